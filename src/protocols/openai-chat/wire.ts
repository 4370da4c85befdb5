/**
 * OpenAI chat-completions wire types and the mappings both directions share: the public protocol
 * (client side) and the OpenAI-family adapters (upstream side).
 */
import type { FinishReason, Usage } from "../canonical";

export type ChatContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string; detail?: "auto" | "low" | "high" } }
  | { type: "input_audio"; input_audio: { data: string; format: string } }
  | { type: "file"; file: Record<string, unknown> }
  | { type: "refusal"; refusal: string };

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type ChatMessage =
  | { role: "system" | "developer"; content: string | ChatContentPart[]; name?: string }
  | { role: "user"; content: string | ChatContentPart[]; name?: string }
  | {
      role: "assistant";
      content?: string | ChatContentPart[] | null;
      tool_calls?: ChatToolCall[];
      refusal?: string | null;
      name?: string;
      /** DeepSeek / vLLM reasoning text. */
      reasoning_content?: string | null;
    }
  | { role: "tool"; content: string | ChatContentPart[]; tool_call_id: string }
  | { role: "function"; content: string | null; name: string };

export interface ChatTool {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null };
}

export type ChatToolChoice = "none" | "auto" | "required" | { type: "function"; function: { name: string } };

export type ChatResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | {
      type: "json_schema";
      json_schema: { name: string; schema?: Record<string, unknown>; strict?: boolean | null; description?: string };
    };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ChatTool[];
  tool_choice?: ChatToolChoice;
  parallel_tool_calls?: boolean;
  response_format?: ChatResponseFormat;
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  n?: number | null;
  stop?: string | string[] | null;
  seed?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  reasoning_effort?: string | null;
  user?: string;
  [extra: string]: unknown;
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /**
   * `cache_write_tokens`: prompt tokens written to the cache, sent by the models whose cache writes
   * OpenAI bills (the GPT-6 family, with extended retention); absent elsewhere.
   */
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number; audio_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number; audio_tokens?: number } | null;
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  system_fingerprint?: string | null;
  choices: {
    index: number;
    message: {
      role: "assistant";
      content: string | null;
      refusal?: string | null;
      tool_calls?: ChatToolCall[];
      reasoning_content?: string | null;
    };
    logprobs?: unknown;
    finish_reason: string | null;
  }[];
  usage?: ChatUsage | null;
}

export interface ChatChunkToolCall {
  index: number;
  id?: string;
  type?: "function";
  function?: { name?: string; arguments?: string };
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  system_fingerprint?: string | null;
  choices: {
    index: number;
    delta: {
      role?: "assistant";
      content?: string | null;
      refusal?: string | null;
      tool_calls?: ChatChunkToolCall[];
      reasoning_content?: string | null;
      reasoning?: string | null;
    };
    logprobs?: unknown;
    finish_reason: string | null;
  }[];
  usage?: ChatUsage | null;
}

const FINISH_FROM_OPENAI: Record<string, FinishReason> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  content_filter: "content_filter",
};

export function finishFromOpenAI(reason: string | null | undefined): FinishReason {
  return (reason && FINISH_FROM_OPENAI[reason]) || "end_turn";
}

/** See PROTOCOLS.md 5.5: everything but caps, tools and filters is a plain `stop`. */
export function finishToOpenAI(reason: FinishReason): "stop" | "length" | "tool_calls" | "content_filter" {
  switch (reason) {
    case "max_tokens":
    case "context_window_exceeded":
      return "length";
    case "tool_calls":
      return "tool_calls";
    case "content_filter":
      return "content_filter";
    case "end_turn":
    case "stop_sequence":
    case "pause_turn":
    case "error":
      return "stop";
    default: {
      const unreachable: never = reason;
      return unreachable;
    }
  }
}

export function usageFromOpenAI(u: ChatUsage | null | undefined): Usage {
  return {
    inputTokens: u?.prompt_tokens ?? 0,
    cacheReadTokens: u?.prompt_tokens_details?.cached_tokens ?? 0,
    cacheWriteTokens: u?.prompt_tokens_details?.cache_write_tokens ?? 0,
    outputTokens: u?.completion_tokens ?? 0,
    reasoningTokens: u?.completion_tokens_details?.reasoning_tokens ?? 0,
  };
}

export function usageToOpenAI(u: Usage): ChatUsage {
  return {
    prompt_tokens: u.inputTokens,
    completion_tokens: u.outputTokens,
    total_tokens: u.inputTokens + u.outputTokens,
    prompt_tokens_details: {
      cached_tokens: u.cacheReadTokens,
      ...(u.cacheWriteTokens > 0 ? { cache_write_tokens: u.cacheWriteTokens } : {}),
    },
    completion_tokens_details: { reasoning_tokens: u.reasoningTokens },
  };
}
