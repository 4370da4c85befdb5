/** OpenAI chat-completions response -> canonical response. */
import type { AssistantPart, CanonicalResponse } from "../../protocols/canonical";
import { type ChatCompletion, finishFromOpenAI, usageFromOpenAI } from "../../protocols/openai-chat/wire";
import { UpstreamError } from "../errors";

export function fromChatCompletion(body: ChatCompletion, provider: string): CanonicalResponse {
  if (!body || !Array.isArray(body.choices)) {
    throw new UpstreamError("protocol", `${provider} returned a response without choices`, { status: 502 });
  }
  return {
    id: body.id,
    model: body.model,
    created: body.created ?? Math.floor(Date.now() / 1000),
    systemFingerprint: body.system_fingerprint ?? null,
    usage: usageFromOpenAI(body.usage),
    choices: body.choices.map((c) => {
      const content: AssistantPart[] = [];
      const m = c.message ?? { role: "assistant", content: null };
      if (m.reasoning_content) content.push({ type: "thinking", text: m.reasoning_content });
      if (typeof m.content === "string" && m.content !== "") content.push({ type: "text", text: m.content });
      for (const t of m.tool_calls ?? []) {
        content.push({ type: "tool_call", id: t.id, name: t.function.name, arguments: t.function.arguments ?? "" });
      }
      return { index: c.index, content, finishReason: finishFromOpenAI(c.finish_reason), refusal: m.refusal ?? null };
    }),
  };
}
