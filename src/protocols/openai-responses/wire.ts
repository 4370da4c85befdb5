/**
 * OpenAI Responses wire types for what the gateway writes (response object, output items, usage) and
 * the mappings the encoders and the native forwarding share (PROTOCOLS.md 5.5 and 5.6).
 */
import type { GatewayError } from "../../http/errors";
import type { FinishReason, Usage } from "../canonical";

export type ItemStatus = "in_progress" | "completed" | "incomplete";

export interface OutputTextContent {
  type: "output_text";
  text: string;
  annotations: unknown[];
  logprobs?: unknown[];
}

export interface RefusalContent {
  type: "refusal";
  refusal: string;
}

export interface OutputMessageItem {
  type: "message";
  id: string;
  status: ItemStatus;
  role: "assistant";
  content: (OutputTextContent | RefusalContent)[];
}

export interface OutputFunctionCallItem {
  type: "function_call";
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}

export interface OutputReasoningItem {
  type: "reasoning";
  id: string;
  summary: { type: "summary_text"; text: string }[];
  content: { type: "reasoning_text"; text: string }[];
  /** The provider's thinking signature (Anthropic), so the item can be replayed. */
  encrypted_content?: string;
}

export type OutputItem = OutputMessageItem | OutputFunctionCallItem | OutputReasoningItem;

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export type ResponseStatus = "completed" | "incomplete" | "failed" | "in_progress";

export interface ResponseError {
  code: string;
  message: string;
}

export interface ResponseObject {
  id: string;
  object: "response";
  created_at: number;
  status: ResponseStatus;
  error: ResponseError | null;
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  instructions: string | null;
  model: string;
  output: OutputItem[];
  output_text: string;
  usage: ResponsesUsage | null;
  previous_response_id: string | null;
  parallel_tool_calls: boolean;
  temperature: number | null;
  top_p: number | null;
  tool_choice: unknown;
  tools: unknown[];
  text: unknown;
  max_output_tokens: number | null;
  reasoning: unknown;
  metadata: Record<string, string>;
  store: boolean;
  user: string | null;
  truncation: "auto" | "disabled";
  background: boolean;
  [extra: string]: unknown;
}

/**
 * Usage as the Responses API reports it: input includes cache reads and cache writes (both broken
 * out in `input_tokens_details`), output includes reasoning.
 */
export function usageToResponses(u: Usage): ResponsesUsage {
  return {
    input_tokens: u.inputTokens,
    input_tokens_details: { cached_tokens: u.cacheReadTokens, cache_write_tokens: u.cacheWriteTokens },
    output_tokens: u.outputTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens },
    total_tokens: u.inputTokens + u.outputTokens,
  };
}

interface UsageIn {
  input_tokens?: number;
  input_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
  output_tokens?: number;
  output_tokens_details?: { reasoning_tokens?: number } | null;
}

/** Usage from an OpenAI-type upstream's Responses answer (native forwarding). */
export function usageFromResponses(u: UsageIn | null | undefined): Usage {
  return {
    inputTokens: u?.input_tokens ?? 0,
    cacheReadTokens: u?.input_tokens_details?.cached_tokens ?? 0,
    cacheWriteTokens: u?.input_tokens_details?.cache_write_tokens ?? 0,
    outputTokens: u?.output_tokens ?? 0,
    reasoningTokens: u?.output_tokens_details?.reasoning_tokens ?? 0,
  };
}

export interface Outcome {
  status: ResponseStatus;
  incomplete_details: ResponseObject["incomplete_details"];
  error: ResponseError | null;
}

/**
 * Finish reason -> response status (PROTOCOLS.md 5.5): caps and context overflow are `incomplete`
 * with reason max_output_tokens, filters `incomplete` with content_filter, an upstream that stopped on
 * an error (e.g. a malformed tool call) `failed`; everything else, tool calls included, `completed`.
 */
export function outcomeOf(reason: FinishReason | undefined): Outcome {
  switch (reason) {
    case "max_tokens":
    case "context_window_exceeded":
      return { status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, error: null };
    case "content_filter":
      return { status: "incomplete", incomplete_details: { reason: "content_filter" }, error: null };
    case "error":
      return {
        status: "failed",
        incomplete_details: null,
        error: { code: "server_error", message: "The model stopped with an error (e.g. a malformed tool call)" },
      };
    case undefined:
    case "end_turn":
    case "stop_sequence":
    case "tool_calls":
    case "pause_turn":
      return { status: "completed", incomplete_details: null, error: null };
    default: {
      const unreachable: never = reason;
      return unreachable;
    }
  }
}

/**
 * `response.error.code` for a failure: the Responses API's own codes (the SDK types them as an
 * enum), chosen by status; the gateway's detail stays in the message.
 */
export function responseErrorOf(e: GatewayError): ResponseError {
  const code = e.status === 429 ? "rate_limit_exceeded" : e.status === 400 ? "invalid_prompt" : "server_error";
  return { code, message: e.message };
}

/** `msg_…`, `fc_…`, `rs_…`: the item id prefixes of the Responses API. */
export function itemId(prefix: "msg" | "fc" | "rs"): string {
  return `${prefix}_${crypto.randomUUID().replace(/-/g, "")}`;
}
