/**
 * Bedrock Converse response -> canonical response, and the mappings the stream shares.
 * Reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
 */
import type { AssistantPart, CanonicalResponse, FinishReason, Usage } from "../../protocols/canonical";
import { UpstreamError } from "../errors";
import { JSON_TOOL } from "./request";

/** TokenUsage (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html). */
export interface ConverseUsage {
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  cacheReadInputTokens?: number;
  cacheWriteInputTokens?: number;
}

export type ConverseOutputBlock = {
  text?: string;
  toolUse?: { toolUseId: string; name: string; input?: unknown };
  reasoningContent?: { reasoningText?: { text?: string; signature?: string }; redactedContent?: string };
};

export interface ConverseResponse {
  output?: { message?: { role?: string; content?: ConverseOutputBlock[] } };
  stopReason?: string;
  usage?: ConverseUsage;
  metrics?: { latencyMs?: number };
}

/**
 * Bedrock's `inputTokens` does NOT include cache reads or writes. The API reference only says "the
 * number of tokens sent in the request to the model"; the prompt-caching guide bills tokens "not
 * read from or written to cache" at the input rate, beside the two cache counts, and Claude on
 * Bedrock mirrors Anthropic's `input_tokens` (uncached only). Clients that parse real Converse
 * responses agree (the Vercel AI SDK's Bedrock provider sums inputTokens + cacheRead + cacheWrite
 * for the prompt total). The canonical `inputTokens` is the whole prompt, so all three are added.
 */
export function usageFromConverse(u: ConverseUsage | undefined): Usage {
  const uncached = u?.inputTokens ?? 0;
  const read = u?.cacheReadInputTokens ?? 0;
  const write = u?.cacheWriteInputTokens ?? 0;
  return {
    inputTokens: uncached + read + write,
    cacheReadTokens: read,
    cacheWriteTokens: write,
    outputTokens: u?.outputTokens ?? 0,
    // Converse does not report reasoning tokens apart from output.
    reasoningTokens: 0,
  };
}

/** StopReason (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html#API_runtime_ConverseStream_ResponseSyntax). */
const STOP_REASONS: Record<string, FinishReason> = {
  end_turn: "end_turn",
  tool_use: "tool_calls",
  max_tokens: "max_tokens",
  stop_sequence: "stop_sequence",
  guardrail_intervened: "content_filter",
  content_filtered: "content_filter",
  model_context_window_exceeded: "context_window_exceeded",
};

/** `jsonMode`: the forced json_output tool carried the answer, so a tool_use stop is a natural end. */
export function finishFromConverse(reason: string | undefined, jsonMode: boolean): FinishReason {
  if (jsonMode && reason === "tool_use") return "end_turn";
  return (reason && STOP_REASONS[reason]) || "end_turn";
}

export interface ResponseContext {
  provider: string;
  /** The response id: the upstream's `x-amzn-requestid`, or one minted by the adapter. */
  id: string;
  /** The deployment's model id (Converse does not echo one). */
  model: string;
  /** The request asked for a json_schema answer through the json_output tool. */
  jsonMode: boolean;
}

export function fromConverse(body: ConverseResponse, rc: ResponseContext): CanonicalResponse {
  const blocks = body?.output?.message?.content;
  if (!Array.isArray(blocks)) {
    throw new UpstreamError("protocol", `${rc.provider} returned a response without output.message.content`, {
      status: 502,
    });
  }
  const content: AssistantPart[] = [];
  for (const b of blocks) {
    if (typeof b.text === "string") {
      if (b.text !== "") content.push({ type: "text", text: b.text });
    } else if (b.toolUse) {
      const args = JSON.stringify(b.toolUse.input ?? {});
      if (rc.jsonMode && b.toolUse.name === JSON_TOOL) content.push({ type: "text", text: args });
      else content.push({ type: "tool_call", id: b.toolUse.toolUseId, name: b.toolUse.name, arguments: args });
    } else if (b.reasoningContent) {
      const r = b.reasoningContent;
      if (r.redactedContent !== undefined) content.push({ type: "thinking", text: "", redacted: r.redactedContent });
      else if (r.reasoningText) {
        content.push({
          type: "thinking",
          text: r.reasoningText.text ?? "",
          ...(r.reasoningText.signature ? { signature: r.reasoningText.signature } : {}),
        });
      }
    }
    // Other blocks (citations, images, server tool results) have no canonical form yet.
  }
  return {
    id: rc.id,
    model: rc.model,
    created: Math.floor(Date.now() / 1000),
    usage: usageFromConverse(body.usage),
    choices: [
      { index: 0, content, finishReason: finishFromConverse(body.stopReason, rc.jsonMode), stopSequence: null },
    ],
  };
}
