/**
 * Gemini `generateContent` wire types (Google AI and Vertex AI share them) and the mappings both
 * directions use: the Gemini-family adapters (upstream side) and a Gemini-shaped public protocol.
 * See PROTOCOLS.md section 4 and the tables of section 5.
 */
import type { FinishReason, Usage } from "../canonical";

// ---------------------------------------------------------------------------------------------
// Request

export interface GeminiInlineData {
  mimeType: string;
  /** base64 */
  data: string;
}

export interface GeminiFunctionCall {
  /** Present on newer models only. */
  id?: string;
  name: string;
  args?: Record<string, unknown>;
}

export interface GeminiFunctionResponse {
  id?: string;
  name: string;
  /** Must be a JSON object. */
  response: Record<string, unknown>;
}

/** One part of a turn. Exactly one data field is set; `thought`/`thoughtSignature` may accompany it. */
export interface GeminiPart {
  text?: string;
  /** The part is the model's thinking (only returned with `includeThoughts`). */
  thought?: boolean;
  /** Opaque signature of the model's thinking, to be replayed in later turns. */
  thoughtSignature?: string;
  inlineData?: GeminiInlineData;
  fileData?: { mimeType?: string; fileUri: string };
  functionCall?: GeminiFunctionCall;
  functionResponse?: GeminiFunctionResponse;
  executableCode?: { language: string; code: string };
  codeExecutionResult?: { outcome: string; output?: string };
  videoMetadata?: Record<string, unknown>;
}

export type GeminiRole = "user" | "model";

export interface GeminiContent {
  /** Absent on `systemInstruction`; `user` or `model` on turns. */
  role?: GeminiRole;
  parts: GeminiPart[];
}

export type GeminiSchemaType = "string" | "number" | "integer" | "boolean" | "array" | "object";

/** The OpenAPI 3.0 subset Gemini accepts for function parameters and `responseSchema`. */
export interface GeminiSchema {
  type?: GeminiSchemaType;
  format?: string;
  title?: string;
  description?: string;
  nullable?: boolean;
  enum?: string[];
  items?: GeminiSchema;
  minItems?: number;
  maxItems?: number;
  properties?: Record<string, GeminiSchema>;
  required?: string[];
  minProperties?: number;
  maxProperties?: number;
  propertyOrdering?: string[];
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  anyOf?: GeminiSchema[];
  default?: unknown;
  example?: unknown;
}

export interface GeminiFunctionDeclaration {
  name: string;
  description?: string;
  /** Omitted for functions without parameters (Gemini rejects an OBJECT with no properties). */
  parameters?: GeminiSchema;
}

export interface GeminiTool {
  functionDeclarations?: GeminiFunctionDeclaration[];
  googleSearch?: Record<string, unknown>;
  codeExecution?: Record<string, unknown>;
}

export type GeminiFunctionCallingMode = "AUTO" | "ANY" | "NONE" | "VALIDATED";

export interface GeminiToolConfig {
  functionCallingConfig: { mode: GeminiFunctionCallingMode; allowedFunctionNames?: string[] };
}

export interface GeminiThinkingConfig {
  thinkingBudget?: number;
  includeThoughts?: boolean;
}

export interface GeminiGenerationConfig {
  maxOutputTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  candidateCount?: number;
  stopSequences?: string[];
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  responseMimeType?: string;
  responseSchema?: GeminiSchema;
  responseJsonSchema?: Record<string, unknown>;
  responseLogprobs?: boolean;
  logprobs?: number;
  responseModalities?: string[];
  thinkingConfig?: GeminiThinkingConfig;
}

export interface GeminiSafetySetting {
  category: string;
  threshold: string;
}

export interface GenerateContentRequest {
  contents: GeminiContent[];
  systemInstruction?: GeminiContent;
  tools?: GeminiTool[];
  toolConfig?: GeminiToolConfig;
  generationConfig?: GeminiGenerationConfig;
  safetySettings?: GeminiSafetySetting[];
  /** `cachedContents/...`: an explicit cache. */
  cachedContent?: string;
  /** Vertex AI only. */
  labels?: Record<string, string>;
}

// ---------------------------------------------------------------------------------------------
// Response

/** Every finish reason Google documents; anything else is handled as unknown, never a crash. */
export const GEMINI_FINISH_REASONS = [
  "FINISH_REASON_UNSPECIFIED",
  "STOP",
  "MAX_TOKENS",
  "SAFETY",
  "RECITATION",
  "LANGUAGE",
  "OTHER",
  "BLOCKLIST",
  "PROHIBITED_CONTENT",
  "SPII",
  "MALFORMED_FUNCTION_CALL",
  "IMAGE_SAFETY",
  "IMAGE_PROHIBITED_CONTENT",
  "IMAGE_RECITATION",
  "IMAGE_OTHER",
  "NO_IMAGE",
  "UNEXPECTED_TOOL_CALL",
  "TOO_MANY_TOOL_CALLS",
] as const;
export type GeminiFinishReason = (typeof GEMINI_FINISH_REASONS)[number];

export interface GeminiSafetyRating {
  category: string;
  probability?: string;
  probabilityScore?: number;
  severity?: string;
  severityScore?: number;
  blocked?: boolean;
}

export interface GeminiCandidate {
  content?: GeminiContent;
  /** A known GeminiFinishReason, or a value newer than this code. */
  finishReason?: string;
  finishMessage?: string;
  index?: number;
  safetyRatings?: GeminiSafetyRating[];
  citationMetadata?: Record<string, unknown>;
  groundingMetadata?: Record<string, unknown>;
  avgLogprobs?: number;
  logprobsResult?: Record<string, unknown>;
  tokenCount?: number;
}

export interface GeminiModalityTokenCount {
  modality: string;
  tokenCount?: number;
}

export interface GeminiUsageMetadata {
  /** The whole prompt, including `cachedContentTokenCount`. */
  promptTokenCount?: number;
  cachedContentTokenCount?: number;
  /** Visible output only; excludes `thoughtsTokenCount`. */
  candidatesTokenCount?: number;
  toolUsePromptTokenCount?: number;
  thoughtsTokenCount?: number;
  totalTokenCount?: number;
  promptTokensDetails?: GeminiModalityTokenCount[];
  cacheTokensDetails?: GeminiModalityTokenCount[];
  candidatesTokensDetails?: GeminiModalityTokenCount[];
  toolUsePromptTokensDetails?: GeminiModalityTokenCount[];
  /** Vertex AI: ON_DEMAND or PROVISIONED_THROUGHPUT. */
  trafficType?: string;
}

export interface GeminiPromptFeedback {
  blockReason?: string;
  blockReasonMessage?: string;
  safetyRatings?: GeminiSafetyRating[];
}

export interface GenerateContentResponse {
  candidates?: GeminiCandidate[];
  promptFeedback?: GeminiPromptFeedback;
  usageMetadata?: GeminiUsageMetadata;
  modelVersion?: string;
  responseId?: string;
  /** Vertex AI: RFC 3339 time the response was created. */
  createTime?: string;
}

/** Google RPC error body: `{"error": {"code", "message", "status", "details"}}`. */
export interface GoogleErrorBody {
  error: {
    code: number;
    message: string;
    status: string;
    details?: ({ "@type": string } & Record<string, unknown>)[];
  };
}

// ---------------------------------------------------------------------------------------------
// Mappings

export function isGeminiFinishReason(v: unknown): v is GeminiFinishReason {
  return typeof v === "string" && (GEMINI_FINISH_REASONS as readonly string[]).includes(v);
}

/**
 * Gemini says STOP when it calls functions, so any functionCall in the candidate makes it
 * `tool_calls` (PROTOCOLS.md 5.5). Unknown values are a natural end, never a crash.
 */
export function finishFromGemini(reason: string | null | undefined, hasFunctionCall: boolean): FinishReason {
  if (hasFunctionCall) return "tool_calls";
  if (!isGeminiFinishReason(reason)) return "end_turn";
  switch (reason) {
    case "STOP":
    case "OTHER":
    case "FINISH_REASON_UNSPECIFIED":
    case "NO_IMAGE":
      return "end_turn";
    case "MAX_TOKENS":
      return "max_tokens";
    case "SAFETY":
    case "RECITATION":
    case "LANGUAGE":
    case "BLOCKLIST":
    case "PROHIBITED_CONTENT":
    case "SPII":
    case "IMAGE_SAFETY":
    case "IMAGE_PROHIBITED_CONTENT":
    case "IMAGE_RECITATION":
    case "IMAGE_OTHER":
      return "content_filter";
    case "MALFORMED_FUNCTION_CALL":
    case "UNEXPECTED_TOOL_CALL":
    case "TOO_MANY_TOOL_CALLS":
      return "error";
    default: {
      const unreachable: never = reason;
      return unreachable;
    }
  }
}

/** Canonical -> Gemini: tool calls and stop sequences are a plain STOP in Gemini's vocabulary. */
export function finishToGemini(reason: FinishReason): GeminiFinishReason {
  switch (reason) {
    case "end_turn":
    case "stop_sequence":
    case "tool_calls":
    case "pause_turn":
      return "STOP";
    case "max_tokens":
    case "context_window_exceeded":
      return "MAX_TOKENS";
    case "content_filter":
      return "SAFETY";
    case "error":
      return "OTHER";
    default: {
      const unreachable: never = reason;
      return unreachable;
    }
  }
}

/** PROTOCOLS.md 5.6: thoughts are output (Gemini reports them apart from candidates). */
export function usageFromGemini(u: GeminiUsageMetadata | null | undefined): Usage {
  const thoughts = u?.thoughtsTokenCount ?? 0;
  return {
    inputTokens: (u?.promptTokenCount ?? 0) + (u?.toolUsePromptTokenCount ?? 0),
    cacheReadTokens: u?.cachedContentTokenCount ?? 0,
    cacheWriteTokens: 0,
    outputTokens: (u?.candidatesTokenCount ?? 0) + thoughts,
    reasoningTokens: thoughts,
  };
}

/** Canonical -> Gemini usage; zero cache and thought counts are left out, as Google does. */
export function usageToGemini(u: Usage): GeminiUsageMetadata {
  const out: GeminiUsageMetadata = {
    promptTokenCount: u.inputTokens,
    candidatesTokenCount: Math.max(0, u.outputTokens - u.reasoningTokens),
    totalTokenCount: u.inputTokens + u.outputTokens,
  };
  if (u.cacheReadTokens > 0) out.cachedContentTokenCount = u.cacheReadTokens;
  if (u.reasoningTokens > 0) out.thoughtsTokenCount = u.reasoningTokens;
  return out;
}

/** The canonical Google RPC status name for an HTTP status (PROTOCOLS.md 4.5 and 5.11). */
export function geminiStatusName(httpStatus: number): string {
  switch (httpStatus) {
    case 400:
    case 413:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 409:
      return "ABORTED";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 499:
      return "CANCELLED";
    case 500:
      return "INTERNAL";
    case 501:
      return "UNIMPLEMENTED";
    case 502:
    case 503:
    case 529:
      return "UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      if (httpStatus >= 500) return "INTERNAL";
      if (httpStatus >= 400) return "FAILED_PRECONDITION";
      return "UNKNOWN";
  }
}
