/**
 * Anthropic Messages wire types and the mappings both directions share: the public `/v1/messages`
 * protocol (client side) and the Anthropic-dialect adapters (upstream side: `anthropic`, Claude on
 * Vertex AI). Field names are Anthropic's; see PROTOCOLS.md section 3 and the tables in section 5.
 */
import type { FinishReason, Usage } from "../canonical";

export interface AnthropicCacheControl {
  type: "ephemeral";
  ttl?: "5m" | "1h";
}

// ---------------------------------------------------------------------------------------------
// Content blocks
// ---------------------------------------------------------------------------------------------

export interface AnthropicTextBlock {
  type: "text";
  text: string;
  /** Present on responses when the model cites documents; kept opaque. */
  citations?: unknown[] | null;
  cache_control?: AnthropicCacheControl;
}

export type AnthropicImageSource = { type: "base64"; media_type: string; data: string } | { type: "url"; url: string };

export interface AnthropicImageBlock {
  type: "image";
  source: AnthropicImageSource;
  cache_control?: AnthropicCacheControl;
}

export interface AnthropicDocumentBlock {
  type: "document";
  source: Record<string, unknown>;
  title?: string;
  context?: string;
  citations?: { enabled: boolean };
  cache_control?: AnthropicCacheControl;
}

export interface AnthropicToolUseBlock {
  type: "tool_use";
  id: string;
  name: string;
  /** Always a JSON object. */
  input: Record<string, unknown>;
  cache_control?: AnthropicCacheControl;
}

export interface AnthropicToolResultBlock {
  type: "tool_result";
  tool_use_id: string;
  content?: string | (AnthropicTextBlock | AnthropicImageBlock)[];
  is_error?: boolean;
  cache_control?: AnthropicCacheControl;
}

export interface AnthropicThinkingBlock {
  type: "thinking";
  thinking: string;
  signature: string;
}

export interface AnthropicRedactedThinkingBlock {
  type: "redacted_thinking";
  data: string;
}

/** Server tools (web search, code execution...) run by Anthropic itself; the gateway passes them by. */
export interface AnthropicServerToolUseBlock {
  type: "server_tool_use";
  id: string;
  name: string;
  input: Record<string, unknown>;
}

export interface AnthropicWebSearchToolResultBlock {
  type: "web_search_tool_result";
  tool_use_id: string;
  content: unknown;
}

/** Blocks a request may carry in `messages[].content`. */
export type AnthropicRequestBlock =
  | AnthropicTextBlock
  | AnthropicImageBlock
  | AnthropicDocumentBlock
  | AnthropicToolUseBlock
  | AnthropicToolResultBlock
  | AnthropicThinkingBlock
  | AnthropicRedactedThinkingBlock;

/** Blocks a response's `content` may hold. */
export type AnthropicResponseBlock =
  | AnthropicTextBlock
  | AnthropicToolUseBlock
  | AnthropicThinkingBlock
  | AnthropicRedactedThinkingBlock
  | AnthropicServerToolUseBlock
  | AnthropicWebSearchToolResultBlock;

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

export interface AnthropicMessageParam {
  role: "user" | "assistant";
  content: string | AnthropicRequestBlock[];
}

export interface AnthropicTool {
  name: string;
  description?: string;
  /** JSON Schema; its `type` must be "object". */
  input_schema: Record<string, unknown>;
  cache_control?: AnthropicCacheControl;
}

export type AnthropicToolChoice =
  | { type: "auto"; disable_parallel_tool_use?: boolean }
  | { type: "any"; disable_parallel_tool_use?: boolean }
  | { type: "tool"; name: string; disable_parallel_tool_use?: boolean }
  | { type: "none" };

export type AnthropicThinkingConfig = { type: "enabled"; budget_tokens: number } | { type: "disabled" };

export interface AnthropicMessagesRequest {
  /** Absent when the model is named by the URL (Claude on Vertex AI). */
  model?: string;
  /** Required by the API. Includes thinking tokens when thinking is enabled. */
  max_tokens: number;
  messages: AnthropicMessageParam[];
  system?: string | AnthropicTextBlock[];
  tools?: AnthropicTool[];
  tool_choice?: AnthropicToolChoice;
  stream?: boolean;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop_sequences?: string[];
  thinking?: AnthropicThinkingConfig;
  metadata?: { user_id?: string };
  service_tier?: "auto" | "standard_only";
  /** Vertex AI: the API version travels in the body instead of a header. */
  anthropic_version?: string;
}

// ---------------------------------------------------------------------------------------------
// Response
// ---------------------------------------------------------------------------------------------

export type AnthropicStopReason =
  | "end_turn"
  | "max_tokens"
  | "stop_sequence"
  | "tool_use"
  | "pause_turn"
  | "refusal"
  | "model_context_window_exceeded";

export interface AnthropicUsage {
  /** Uncached input only (after the last cache breakpoint). */
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation?: { ephemeral_5m_input_tokens?: number; ephemeral_1h_input_tokens?: number } | null;
  server_tool_use?: { web_search_requests?: number } | null;
  service_tier?: string | null;
}

export interface AnthropicMessage {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: AnthropicResponseBlock[];
  stop_reason: AnthropicStopReason | null;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "billing_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "api_error"
  | "timeout_error"
  | "overloaded_error";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: AnthropicErrorType | (string & {}); message: string; details?: unknown };
  request_id?: string;
}

const ERROR_STATUS: Record<AnthropicErrorType, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  billing_error: 402,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
};

/** The HTTP status Anthropic uses for an error type (an error type it has not documented: 502). */
export function anthropicErrorStatus(type: string): number {
  return Object.hasOwn(ERROR_STATUS, type) ? ERROR_STATUS[type as AnthropicErrorType] : 502;
}

/** The error type Anthropic would send with a status, for encoding errors in its shape. */
export function anthropicErrorType(status: number): AnthropicErrorType {
  for (const [type, s] of Object.entries(ERROR_STATUS)) if (s === status) return type as AnthropicErrorType;
  if (status === 503) return "overloaded_error";
  return status >= 500 ? "api_error" : "invalid_request_error";
}

// ---------------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------------

export type AnthropicContentDelta =
  | { type: "text_delta"; text: string }
  | { type: "input_json_delta"; partial_json: string }
  | { type: "thinking_delta"; thinking: string }
  | { type: "signature_delta"; signature: string }
  | { type: "citations_delta"; citation: unknown };

/** `message_delta.usage`: cumulative output; newer API versions repeat the input and cache counts. */
export interface AnthropicDeltaUsage {
  output_tokens: number;
  input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  server_tool_use?: { web_search_requests?: number } | null;
}

export type AnthropicStreamEvent =
  | { type: "message_start"; message: AnthropicMessage }
  | { type: "content_block_start"; index: number; content_block: AnthropicResponseBlock }
  | { type: "content_block_delta"; index: number; delta: AnthropicContentDelta }
  | { type: "content_block_stop"; index: number }
  | {
      type: "message_delta";
      delta: { stop_reason: AnthropicStopReason | null; stop_sequence: string | null };
      usage: AnthropicDeltaUsage;
    }
  | { type: "message_stop" }
  | { type: "ping" }
  | AnthropicErrorBody;

// ---------------------------------------------------------------------------------------------
// Mappings (PROTOCOLS.md 5.5 and 5.6)
// ---------------------------------------------------------------------------------------------

/** https://docs.anthropic.com/en/api/handling-stop-reasons. A missing or undocumented reason is a natural end. */
export function stopReasonFromAnthropic(reason: AnthropicStopReason | null | undefined): FinishReason {
  if (reason === null || reason === undefined) return "end_turn";
  switch (reason) {
    case "end_turn":
      return "end_turn";
    case "stop_sequence":
      return "stop_sequence";
    case "max_tokens":
      return "max_tokens";
    case "tool_use":
      return "tool_calls";
    case "pause_turn":
      return "pause_turn";
    case "refusal":
      return "content_filter";
    case "model_context_window_exceeded":
      return "context_window_exceeded";
    default: {
      const unreachable: never = reason;
      void unreachable;
      return "end_turn";
    }
  }
}

export function stopReasonToAnthropic(reason: FinishReason): AnthropicStopReason {
  switch (reason) {
    case "end_turn":
    case "error":
      return "end_turn";
    case "stop_sequence":
      return "stop_sequence";
    case "max_tokens":
      return "max_tokens";
    case "tool_calls":
      return "tool_use";
    case "content_filter":
      return "refusal";
    case "context_window_exceeded":
      return "model_context_window_exceeded";
    case "pause_turn":
      return "pause_turn";
    default: {
      const unreachable: never = reason;
      return unreachable;
    }
  }
}

/**
 * Anthropic's `input_tokens` is only the uncached part; the canonical `inputTokens` is the whole
 * prompt, so cache reads and writes are added back. Thinking is inside `output_tokens` and is not
 * reported apart.
 */
export function usageFromAnthropic(u: Partial<AnthropicUsage> | null | undefined): Usage {
  const cacheWrite = u?.cache_creation_input_tokens ?? 0;
  const cacheRead = u?.cache_read_input_tokens ?? 0;
  return {
    inputTokens: (u?.input_tokens ?? 0) + cacheWrite + cacheRead,
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
    outputTokens: u?.output_tokens ?? 0,
    reasoningTokens: 0,
  };
}

export function usageToAnthropic(u: Usage): AnthropicUsage {
  return {
    input_tokens: Math.max(0, u.inputTokens - u.cacheReadTokens - u.cacheWriteTokens),
    cache_creation_input_tokens: u.cacheWriteTokens,
    cache_read_input_tokens: u.cacheReadTokens,
    output_tokens: u.outputTokens,
  };
}
