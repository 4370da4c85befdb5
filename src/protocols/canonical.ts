/**
 * The gateway's internal request, response and stream-event types. Every public protocol decodes
 * into these and encodes out of them; every provider adapter translates them to and from its
 * upstream wire format. Nothing here knows about HTTP, Elysia or any one vendor.
 */

export interface CacheControl {
  type: "ephemeral";
  ttl?: "5m" | "1h";
}

export interface TextPart {
  type: "text";
  text: string;
  /** Anthropic prompt-caching breakpoint; kept for Anthropic upstreams, dropped for others. */
  cacheControl?: CacheControl;
}

export type ImageSource = { kind: "base64"; mediaType: string; data: string } | { kind: "url"; url: string };

export interface ImagePart {
  type: "image";
  source: ImageSource;
  detail?: "auto" | "low" | "high";
  cacheControl?: CacheControl;
}

export interface ToolCallPart {
  type: "tool_call";
  id: string;
  name: string;
  /** The arguments as JSON text, exactly as produced (may be invalid JSON when a model emits it). */
  arguments: string;
  cacheControl?: CacheControl;
}

export interface ToolResultPart {
  type: "tool_result";
  toolCallId: string;
  /** The called tool's name when known (Gemini matches results by name). */
  name?: string;
  content: (TextPart | ImagePart)[];
  isError?: boolean;
  cacheControl?: CacheControl;
}

export interface ThinkingPart {
  type: "thinking";
  text: string;
  /** Provider signature that must be replayed unchanged (Anthropic `signature`). */
  signature?: string;
  /** Opaque redacted thinking (Anthropic `redacted_thinking.data`). */
  redacted?: string;
}

export type UserPart = TextPart | ImagePart | ToolResultPart;
export type AssistantPart = TextPart | ToolCallPart | ThinkingPart;

export type Message = { role: "user"; content: UserPart[] } | { role: "assistant"; content: AssistantPart[] };

export interface ToolDefinition {
  name: string;
  description?: string;
  /** JSON Schema of the arguments (an object schema). */
  parameters: Record<string, unknown>;
  strict?: boolean;
  cacheControl?: CacheControl;
}

export type ToolChoice = { type: "auto" } | { type: "none" } | { type: "required" } | { type: "tool"; name: string };

export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; name: string; schema: Record<string, unknown>; strict?: boolean; description?: string };

export type ReasoningEffort = "minimal" | "low" | "medium" | "high";

export interface CanonicalRequest {
  /** The public model name the client asked for (`<provider>/<model>`). */
  model: string;
  /** System prompt, in order; hoisted from wherever the client protocol put it. */
  system: TextPart[];
  messages: Message[];
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  responseFormat?: ResponseFormat;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  stop?: string[];
  /** Number of choices; adapters that cannot produce several reject n > 1. */
  n?: number;
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  reasoningEffort?: ReasoningEffort;
  /** Anthropic-style thinking budget, when the client set one explicitly. */
  thinkingBudget?: number;
  /** End-user id, for upstream abuse tracking. */
  user?: string;
  stream: boolean;
}

/**
 * Why a choice ended, with the distinctions the protocols need (section 5.5 of PROTOCOLS.md):
 * each encoder maps these to its own vocabulary.
 */
export type FinishReason =
  | "end_turn"
  | "stop_sequence"
  | "max_tokens"
  | "tool_calls"
  | "content_filter"
  | "context_window_exceeded"
  | "pause_turn"
  | "error";

/**
 * Token counts. `inputTokens` is the whole prompt, including cache reads and cache writes;
 * `outputTokens` is the whole completion, including reasoning.
 */
export interface Usage {
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  outputTokens: number;
  reasoningTokens: number;
}

export const emptyUsage = (): Usage => ({
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
});

export interface Choice {
  index: number;
  content: AssistantPart[];
  finishReason: FinishReason;
  /** The stop sequence that ended the output, when the upstream says which. */
  stopSequence?: string | null;
  refusal?: string | null;
}

export interface CanonicalResponse {
  id: string;
  /** The model id the upstream reports (e.g. a dated snapshot). */
  model: string;
  created: number;
  choices: Choice[];
  usage: Usage;
  systemFingerprint?: string | null;
}

/**
 * Stream events, in upstream order. A stream is: `start`, then deltas (per choice), then one
 * `finish` per choice, with `usage` events wherever the upstream reports counts (each carries the
 * totals so far; the last one wins). Tool calls open with `tool_call_start` and continue with
 * `tool_call_delta` fragments of the JSON argument text.
 */
export type StreamEvent =
  | { type: "start"; id: string; model: string; created: number }
  | { type: "text_delta"; choice: number; text: string }
  | { type: "thinking_delta"; choice: number; text: string; signature?: string }
  | { type: "tool_call_start"; choice: number; index: number; id: string; name: string }
  | { type: "tool_call_delta"; choice: number; index: number; arguments: string }
  | { type: "finish"; choice: number; reason: FinishReason; stopSequence?: string | null }
  | { type: "usage"; usage: Usage };

/** Plain text of a list of parts (text parts only). */
export function textOf(parts: readonly { type: string; text?: string }[]): string {
  let out = "";
  for (const p of parts) if (p.type === "text" && p.text !== undefined) out += p.text;
  return out;
}

/** Parses tool-call argument text into an object, as Anthropic, Gemini and Bedrock require. */
export function parseArguments(text: string): Record<string, unknown> {
  if (text.trim() === "") return {};
  try {
    const v: unknown = JSON.parse(text);
    if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
    return { _value: v };
  } catch {
    return { _raw: text };
  }
}
