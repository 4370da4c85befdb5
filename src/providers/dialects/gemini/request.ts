/**
 * Canonical request -> Gemini generateContent body (PROTOCOLS.md 4.2 and 5), shared by the `gemini`
 * (Google AI) and `vertex` adapters. Gemini does not fetch web URLs, so image URLs are downloaded
 * (through the SSRF-guarded fetcher) and sent inline.
 */
import { badRequest } from "../../../http/errors";
import {
  type CanonicalRequest,
  type ImagePart,
  parseArguments,
  type ReasoningEffort,
  type TextPart,
  type ToolResultPart,
} from "../../../protocols/canonical";
import type {
  GeminiContent,
  GeminiFunctionDeclaration,
  GeminiGenerationConfig,
  GeminiPart,
  GeminiRole,
  GeminiToolConfig,
  GenerateContentRequest,
} from "../../../protocols/gemini/wire";
import type { ImageFetcher, InlineImage } from "../../images";
import { toGeminiSchema } from "./schema";

export interface GeminiRequestContext {
  fetchImage: ImageFetcher;
  signal: AbortSignal;
}

/** Gemini accepts at most five stop sequences. */
export const GEMINI_MAX_STOP_SEQUENCES = 5;

/** reasoning_effort -> thinkingBudget (PROTOCOLS.md 5.7). */
export const THINKING_BUDGETS: Record<ReasoningEffort, number> = {
  minimal: 0,
  low: 1024,
  medium: 4096,
  high: 16384,
};

/**
 * Tool-call ids minted by other providers (OpenAI `call_…`, Anthropic `toolu_…`, Bedrock
 * `tooluse_…`) and by this gateway for Gemini calls that had none (`call_<uuid>`) are not
 * Gemini's: sending them back as `functionCall.id` would name a call Gemini never made.
 */
const FOREIGN_ID = /^(call_|toolu_|tooluse_)/;

export function isGeminiCallId(id: string): boolean {
  return id !== "" && !FOREIGN_ID.test(id);
}

/** gs:// objects (Vertex) are referenced, not downloaded; the mime type comes from the extension. */
const GS_MIME: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  heic: "image/heic",
  heif: "image/heif",
};

function gsMime(url: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(url)?.[1]?.toLowerCase() ?? "";
  return GS_MIME[ext] ?? "image/jpeg";
}

/** Downloads every URL image of the request at once; data and gs:// images need no download. */
async function prefetchImages(req: CanonicalRequest, ctx: GeminiRequestContext): Promise<Map<string, InlineImage>> {
  const urls = new Set<string>();
  const visit = (p: { type: string; source?: ImagePart["source"] }) => {
    if (p.type === "image" && p.source?.kind === "url" && !p.source.url.startsWith("gs://")) urls.add(p.source.url);
  };
  for (const m of req.messages) {
    for (const p of m.content) {
      visit(p);
      if (p.type === "tool_result") for (const c of p.content) visit(c);
    }
  }
  const list = [...urls];
  const images = await Promise.all(list.map((u) => ctx.fetchImage(u, ctx.signal)));
  return new Map(list.map((u, i) => [u, images[i] as InlineImage]));
}

function imagePart(p: ImagePart, downloaded: Map<string, InlineImage>): GeminiPart {
  const s = p.source;
  if (s.kind === "base64") return { inlineData: { mimeType: s.mediaType, data: s.data } };
  if (s.url.startsWith("gs://")) return { fileData: { mimeType: gsMime(s.url), fileUri: s.url } };
  const img = downloaded.get(s.url) as InlineImage;
  return { inlineData: { mimeType: img.mediaType, data: img.data } };
}

/** `response` must be an object: JSON objects as they are, other text as `{result}`, errors as `{error}`. */
export function functionResponseBody(p: ToolResultPart): Record<string, unknown> {
  const text = p.content
    .filter((c): c is TextPart => c.type === "text")
    .map((c) => c.text)
    .join("");
  if (p.isError) return { error: text };
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    try {
      const v: unknown = JSON.parse(trimmed);
      if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      // Not JSON after all: wrapped as text below.
    }
  }
  return { result: text };
}

function toContents(req: CanonicalRequest, downloaded: Map<string, InlineImage>): GeminiContent[] {
  const contents: GeminiContent[] = [];
  const callNames = new Map<string, string>();
  const push = (role: GeminiRole, parts: GeminiPart[]) => {
    if (parts.length === 0) return;
    const last = contents.at(-1);
    if (last && last.role === role) last.parts.push(...parts);
    else contents.push({ role, parts });
  };
  for (const m of req.messages) {
    if (m.role === "assistant") {
      const parts: GeminiPart[] = [];
      for (const p of m.content) {
        switch (p.type) {
          case "text":
            if (p.text !== "") parts.push({ text: p.text });
            break;
          case "tool_call": {
            callNames.set(p.id, p.name);
            const call = { name: p.name, args: parseArguments(p.arguments) };
            parts.push({ functionCall: isGeminiCallId(p.id) ? { id: p.id, ...call } : call });
            break;
          }
          case "thinking":
            // Gemini's thinking is not replayed as text; its signatures have no canonical slot yet.
            break;
          default: {
            const unreachable: never = p;
            return unreachable;
          }
        }
      }
      push("model", parts);
      continue;
    }
    // Function responses lead their turn, as Gemini pairs them with the previous turn's calls.
    const responses: GeminiPart[] = [];
    const rest: GeminiPart[] = [];
    for (const p of m.content) {
      switch (p.type) {
        case "text":
          if (p.text !== "") rest.push({ text: p.text });
          break;
        case "image":
          rest.push(imagePart(p, downloaded));
          break;
        case "tool_result": {
          const name = p.name ?? callNames.get(p.toolCallId) ?? p.toolCallId;
          const fr = { name, response: functionResponseBody(p) };
          responses.push({ functionResponse: isGeminiCallId(p.toolCallId) ? { id: p.toolCallId, ...fr } : fr });
          // Gemini's function responses carry no images: they follow as parts of the same turn.
          for (const c of p.content) if (c.type === "image") rest.push(imagePart(c, downloaded));
          break;
        }
        default: {
          const unreachable: never = p;
          return unreachable;
        }
      }
    }
    push("user", [...responses, ...rest]);
  }
  return contents;
}

function toolConfig(req: CanonicalRequest): GeminiToolConfig | undefined {
  const c = req.toolChoice;
  if (!c) return undefined;
  switch (c.type) {
    case "auto":
      return { functionCallingConfig: { mode: "AUTO" } };
    case "none":
      return { functionCallingConfig: { mode: "NONE" } };
    case "required":
      return { functionCallingConfig: { mode: "ANY" } };
    case "tool":
      return { functionCallingConfig: { mode: "ANY", allowedFunctionNames: [c.name] } };
    default: {
      const unreachable: never = c;
      return unreachable;
    }
  }
}

function functionDeclaration(t: NonNullable<CanonicalRequest["tools"]>[number]): GeminiFunctionDeclaration {
  const decl: GeminiFunctionDeclaration = { name: t.name };
  if (t.description !== undefined) decl.description = t.description;
  const params = toGeminiSchema(t.parameters);
  // Gemini rejects an OBJECT without properties: a parameterless function declares none.
  if (params.properties && Object.keys(params.properties).length > 0) decl.parameters = { ...params, type: "object" };
  return decl;
}

function generationConfig(req: CanonicalRequest): GeminiGenerationConfig | undefined {
  const g: GeminiGenerationConfig = {};
  if (req.maxTokens !== undefined) g.maxOutputTokens = req.maxTokens;
  if (req.temperature !== undefined) g.temperature = req.temperature;
  if (req.topP !== undefined) g.topP = req.topP;
  if (req.topK !== undefined) g.topK = req.topK;
  if (req.stop?.length) {
    if (req.stop.length > GEMINI_MAX_STOP_SEQUENCES) {
      throw badRequest(
        `Gemini accepts at most ${GEMINI_MAX_STOP_SEQUENCES} stop sequences, got ${req.stop.length}`,
        "stop",
        "too_many_stop_sequences",
      );
    }
    g.stopSequences = req.stop;
  }
  if (req.n !== undefined && req.n !== 1) g.candidateCount = req.n;
  if (req.seed !== undefined) g.seed = req.seed;
  if (req.presencePenalty !== undefined) g.presencePenalty = req.presencePenalty;
  if (req.frequencyPenalty !== undefined) g.frequencyPenalty = req.frequencyPenalty;
  const f = req.responseFormat;
  if (f?.type === "json_object") g.responseMimeType = "application/json";
  else if (f?.type === "json_schema") {
    g.responseMimeType = "application/json";
    g.responseSchema = toGeminiSchema(f.schema);
  }
  // An explicit budget (Anthropic-style thinking) also asks for the thoughts; an effort level does not.
  if (req.thinkingBudget !== undefined)
    g.thinkingConfig = { thinkingBudget: req.thinkingBudget, includeThoughts: true };
  else if (req.reasoningEffort !== undefined)
    g.thinkingConfig = { thinkingBudget: THINKING_BUDGETS[req.reasoningEffort] };
  return Object.keys(g).length ? g : undefined;
}

export async function toGeminiBody(req: CanonicalRequest, ctx: GeminiRequestContext): Promise<GenerateContentRequest> {
  const downloaded = await prefetchImages(req, ctx);
  const body: GenerateContentRequest = { contents: toContents(req, downloaded) };
  const system = req.system.filter((p) => p.text !== "");
  if (system.length) body.systemInstruction = { parts: system.map((p) => ({ text: p.text })) };
  if (req.tools?.length) body.tools = [{ functionDeclarations: req.tools.map(functionDeclaration) }];
  const tc = toolConfig(req);
  if (tc) body.toolConfig = tc;
  const g = generationConfig(req);
  if (g) body.generationConfig = g;
  return body;
}
