/** Anthropic Messages response -> canonical response (PROTOCOLS.md 3.3). */

import {
  type AnthropicMessage,
  anthropicErrorStatus,
  stopReasonFromAnthropic,
  usageFromAnthropic,
} from "../../../protocols/anthropic/wire";
import type { AssistantPart, CanonicalResponse, FinishReason } from "../../../protocols/canonical";
import { describeUpstreamBody, UpstreamError } from "../../errors";
import { JSON_OUTPUT_TOOL } from "./request";

export function fromAnthropicMessage(body: AnthropicMessage, provider: string): CanonicalResponse {
  const raw = body as unknown as { type?: unknown; content?: unknown };
  if (raw?.type === "error") {
    const { message, type } = describeUpstreamBody(body);
    throw new UpstreamError("http", `${provider} failed: ${message ?? "unknown error"}`, {
      status: anthropicErrorStatus(type ?? ""),
      ...(type ? { upstreamType: type } : {}),
    });
  }
  if (!raw || !Array.isArray(raw.content)) {
    throw new UpstreamError("protocol", `${provider} returned a message without content`, { status: 502 });
  }

  const content: AssistantPart[] = [];
  let toolCalls = 0;
  let jsonOutput = false;
  for (const block of body.content) {
    switch (block.type) {
      case "text":
        if (block.text !== "") content.push({ type: "text", text: block.text });
        break;
      case "tool_use":
        if (block.name === JSON_OUTPUT_TOOL) {
          // The structured-output tool: its input is the answer, as text.
          content.push({ type: "text", text: JSON.stringify(block.input ?? {}) });
          jsonOutput = true;
        } else {
          content.push({
            type: "tool_call",
            id: block.id,
            name: block.name,
            arguments: JSON.stringify(block.input ?? {}),
          });
          toolCalls++;
        }
        break;
      case "thinking":
        content.push({ type: "thinking", text: block.thinking, signature: block.signature });
        break;
      case "redacted_thinking":
        content.push({ type: "thinking", text: "", redacted: block.data });
        break;
      case "server_tool_use":
      case "web_search_tool_result":
        // Run by Anthropic itself; their outcome is already in the text that follows.
        break;
      default: {
        // A block type newer than this adapter: skipped rather than failing the whole answer.
        const unreachable: never = block;
        void unreachable;
      }
    }
  }

  let finishReason: FinishReason = stopReasonFromAnthropic(body.stop_reason);
  if (jsonOutput && toolCalls === 0 && finishReason === "tool_calls") finishReason = "end_turn";
  return {
    id: body.id,
    model: body.model,
    created: Math.floor(Date.now() / 1000),
    choices: [
      {
        index: 0,
        content,
        finishReason,
        stopSequence: body.stop_sequence ?? null,
      },
    ],
    usage: usageFromAnthropic(body.usage),
  };
}
