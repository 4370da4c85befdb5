/**
 * Token estimates with a real tokenizer (o200k, OpenAI's current encoding: exact for OpenAI models
 * and a reasonable stand-in for others): the prompt's reservation for tpm limits and budgets before
 * the upstream call, and the usage of a stream cut off before the upstream reported any (records
 * that use it are marked `usage_estimated`).
 *
 * BPE costs about a microsecond a token, so the hot path does not re-tokenize what it has seen: the
 * prompt is counted part by part (system prompt, each message, each tool), and a bounded cache keeps
 * the counts of recent parts, which conversations resend on every turn.
 */
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import type { CanonicalRequest } from "../protocols/canonical";

export function countTokens(text: string): number {
  return text === "" ? 0 : encode(text).length;
}

/** The prompt's text parts (system, messages, tool definitions) as a tokenizer sees them. */
export function promptParts(req: CanonicalRequest): string[] {
  const parts: string[] = req.system.map((p) => p.text);
  for (const m of req.messages) {
    for (const p of m.content) {
      if (p.type === "text") parts.push(p.text);
      else if (p.type === "tool_call") parts.push(p.name, p.arguments);
      else if (p.type === "thinking") parts.push(p.text);
      else if (p.type === "tool_result") {
        for (const c of p.content) if (c.type === "text") parts.push(c.text);
      }
    }
  }
  for (const t of req.tools ?? []) parts.push(t.name, t.description ?? "", JSON.stringify(t.parameters));
  return parts;
}

/** The prompt as one text (count_tokens answers with its exact count). */
export function promptText(req: CanonicalRequest): string {
  return promptParts(req).join("\n");
}

/** A part longer than this is counted exactly up to here and extrapolated beyond (bounded hot-path cost). */
const EXACT_CHARS = 16_384;
/** Parts up to this size are cached; longer ones are rare enough to count each time. */
const CACHED_CHARS = EXACT_CHARS;
/** Bound on the cached parts' characters together (about 2 bytes each). */
const CACHE_CHARS = 4_000_000;

/** Recently counted parts, oldest first (a Map keeps insertion order: a cheap LRU). */
const counted = new Map<string, number>();
let cachedChars = 0;

function partTokens(text: string): number {
  if (text.length > CACHED_CHARS) {
    const head = countTokens(text.slice(0, EXACT_CHARS));
    return Math.ceil((head * text.length) / EXACT_CHARS);
  }
  const hit = counted.get(text);
  if (hit !== undefined) {
    counted.delete(text);
    counted.set(text, hit);
    return hit;
  }
  const n = countTokens(text);
  counted.set(text, n);
  cachedChars += text.length;
  for (const oldest of counted.keys()) {
    if (cachedChars <= CACHE_CHARS) break;
    counted.delete(oldest);
    cachedChars -= oldest.length;
  }
  return n;
}

/** Prompt tokens for tpm and budget reservations: the parts' counts plus one separator between parts. */
export function estimatePromptTokens(req: CanonicalRequest): number {
  const parts = promptParts(req);
  let n = Math.max(0, parts.length - 1);
  for (const p of parts) if (p !== "") n += partTokens(p);
  return n;
}
