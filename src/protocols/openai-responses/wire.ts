/**
 * OpenAI Responses wire types and the mappings both directions share: what the gateway writes to
 * /v1/responses clients (response object, output items, usage), what the Responses dialect sends to
 * and reads from an upstream Responses API (request body, upstream answers and stream events), and
 * the finish-reason and usage tables (PROTOCOLS.md 5.5 and 5.6).
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

/** Usage from an OpenAI-type upstream's Responses answer (native forwarding and the dialect). */
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

// ---- upstream direction (the Responses dialect of the OpenAI-family adapters) ----------------

export type ResponsesInputContent =
  | { type: "input_text"; text: string }
  | { type: "input_image"; image_url: string; detail: "auto" | "low" | "high" };

/** Input items the dialect writes: messages (easy form), function calls and their outputs. */
export type ResponsesInputItem =
  | { type: "message"; role: "user" | "assistant"; content: string | ResponsesInputContent[] }
  | { type: "function_call"; call_id: string; name: string; arguments: string }
  | { type: "function_call_output"; call_id: string; output: string | ResponsesInputContent[] };

export interface ResponsesFunctionTool {
  type: "function";
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
  strict: boolean;
}

export type ResponsesTextFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; name: string; schema: Record<string, unknown>; strict?: boolean; description?: string };

/** A Responses request as the dialect sends it upstream. */
export interface ResponsesRequestBody {
  model: string;
  input: ResponsesInputItem[];
  instructions?: string;
  tools?: ResponsesFunctionTool[];
  tool_choice?: "none" | "auto" | "required" | { type: "function"; name: string };
  parallel_tool_calls?: boolean;
  text?: { format: ResponsesTextFormat };
  max_output_tokens?: number;
  temperature?: number;
  top_p?: number;
  reasoning?: { effort: string };
  user?: string;
  store: boolean;
  stream?: boolean;
}

/** An upstream's response object as the dialect reads it: only what it needs, all optional. */
export interface UpstreamResponse {
  id?: string;
  model?: string;
  created_at?: number;
  status?: string;
  error?: { code?: string | null; message?: string } | null;
  incomplete_details?: { reason?: string } | null;
  output?: UpstreamOutputItem[];
  usage?: Parameters<typeof usageFromResponses>[0];
}

/** Output items as upstreams send them (built-in tool items and future kinds pass as `type` only). */
export interface UpstreamOutputItem {
  type?: string;
  id?: string;
  call_id?: string;
  name?: string;
  arguments?: string;
  content?: { type?: string; text?: string; refusal?: string }[] | null;
  summary?: { type?: string; text?: string }[] | null;
}

/** One upstream stream event, loosely: every field the dialect reads. */
export interface UpstreamStreamEvent {
  type?: string;
  sequence_number?: number;
  response?: UpstreamResponse;
  item?: UpstreamOutputItem;
  item_id?: string;
  output_index?: number;
  summary_index?: number;
  delta?: string;
  arguments?: string;
  code?: string | null;
  message?: string;
  error?: { code?: string | null; message?: string; type?: string } | null;
}

/**
 * Response status -> finish reason (the inverse of `outcomeOf`): a completed response with function
 * calls ended for them; `incomplete` is the cap or the content filter, as its reason says.
 */
export function finishFromResponses(
  status: string | undefined,
  incompleteReason: string | undefined,
  calledTools: boolean,
): FinishReason {
  if (status === "incomplete") return incompleteReason === "content_filter" ? "content_filter" : "max_tokens";
  if (status === "failed") return "error";
  return calledTools ? "tool_calls" : "end_turn";
}

/** The HTTP status an upstream's `response.error.code` (or a stream `error` event's code) stands for. */
export function statusOfResponseError(code: string | null | undefined): number {
  if (code === "rate_limit_exceeded") return 429;
  if (code === "invalid_prompt" || code === "invalid_request_error" || code === "context_length_exceeded") return 400;
  return 502;
}
