/**
 * Token estimates for when an upstream reports no usage (a stream cut off by the client before its
 * usage event): a real tokenizer (o200k) over the text, which is close for OpenAI models and a
 * reasonable stand-in for others. Records that use it are marked `usage_estimated`.
 */
import { encode } from "gpt-tokenizer/encoding/o200k_base";
import type { CanonicalRequest } from "../protocols/canonical";

export function countTokens(text: string): number {
  return text === "" ? 0 : encode(text).length;
}

/** The prompt's text (system, messages, tool definitions) as a tokenizer sees it. */
export function promptText(req: CanonicalRequest): string {
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
  return parts.join("\n");
}

/** Text beyond this many characters is extrapolated, so huge prompts do not tokenize on the hot path. */
const EXACT_CHARS = 32_768;

/**
 * Prompt tokens for tpm and budget reservations: exact for the first 32k characters, scaled
 * by that part's characters-per-token ratio beyond it.
 */
export function estimatePromptTokens(text: string): number {
  if (text.length <= EXACT_CHARS) return countTokens(text);
  const head = countTokens(text.slice(0, EXACT_CHARS));
  return Math.ceil((head * text.length) / EXACT_CHARS);
}
