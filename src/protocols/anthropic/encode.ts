/** Canonical response -> Anthropic Messages response (PROTOCOLS.md 3.3, 5.5, 5.6). */
import { type AssistantPart, type CanonicalResponse, parseArguments } from "../canonical";
import {
  type AnthropicMessage,
  type AnthropicResponseBlock,
  type AnthropicStopReason,
  stopReasonToAnthropic,
  usageToAnthropic,
} from "./wire";

/** Message ids are `msg_…`; an upstream id of another shape keeps its text after the prefix. */
export function messageId(id: string): string {
  return id.startsWith("msg_") ? id : `msg_${id}`;
}

/** Content blocks in the order the model produced them; tool arguments become the input object. */
export function responseBlocks(parts: readonly AssistantPart[]): AnthropicResponseBlock[] {
  const out: AnthropicResponseBlock[] = [];
  for (const p of parts) {
    switch (p.type) {
      case "text":
        if (p.text !== "") out.push({ type: "text", text: p.text });
        break;
      case "tool_call":
        out.push({ type: "tool_use", id: p.id, name: p.name, input: parseArguments(p.arguments) });
        break;
      case "thinking":
        if (p.redacted !== undefined) out.push({ type: "redacted_thinking", data: p.redacted });
        else out.push({ type: "thinking", thinking: p.text, signature: p.signature ?? "" });
        break;
      default: {
        const unreachable: never = p;
        return unreachable;
      }
    }
  }
  return out;
}

export function encodeMessagesResponse(res: CanonicalResponse): AnthropicMessage {
  // This protocol has one choice per answer (no `n`).
  const choice = res.choices.find((c) => c.index === 0) ?? res.choices[0];
  const content = responseBlocks(choice?.content ?? []);
  let stopReason: AnthropicStopReason = stopReasonToAnthropic(choice?.finishReason ?? "end_turn");
  // An OpenAI-style refusal carries its explanation apart from the content.
  if (choice?.refusal && !content.some((b) => b.type === "text")) {
    content.push({ type: "text", text: choice.refusal });
    stopReason = "refusal";
  }
  return {
    id: messageId(res.id),
    type: "message",
    role: "assistant",
    model: res.model,
    content,
    stop_reason: stopReason,
    stop_sequence: stopReason === "stop_sequence" ? (choice?.stopSequence ?? null) : null,
    usage: usageToAnthropic(res.usage),
  };
}
