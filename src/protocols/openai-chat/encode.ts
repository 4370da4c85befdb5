/** Canonical response -> chat-completions response. */
import type { CanonicalResponse } from "../canonical";
import { type ChatCompletion, type ChatToolCall, finishToOpenAI, usageToOpenAI } from "./wire";

export function chatCompletionId(id: string): string {
  return id.startsWith("chatcmpl-") ? id : `chatcmpl-${id}`;
}

export function encodeChatResponse(res: CanonicalResponse): ChatCompletion {
  return {
    id: chatCompletionId(res.id),
    object: "chat.completion",
    created: res.created,
    model: res.model,
    system_fingerprint: res.systemFingerprint ?? null,
    choices: res.choices.map((c) => {
      let text = "";
      let reasoning = "";
      const toolCalls: ChatToolCall[] = [];
      for (const p of c.content) {
        if (p.type === "text") text += p.text;
        else if (p.type === "thinking") reasoning += p.text;
        else toolCalls.push({ id: p.id, type: "function", function: { name: p.name, arguments: p.arguments } });
      }
      return {
        index: c.index,
        message: {
          role: "assistant" as const,
          content: text === "" && toolCalls.length > 0 ? null : text,
          refusal: c.refusal ?? null,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
          ...(reasoning ? { reasoning_content: reasoning } : {}),
        },
        logprobs: null,
        finish_reason: finishToOpenAI(c.finishReason),
      };
    }),
    usage: usageToOpenAI(res.usage),
  };
}
