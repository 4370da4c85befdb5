/** OpenAI chat-completion chunks (SSE) -> canonical stream events. */
import { readSse } from "../../http/sse";
import type { StreamEvent } from "../../protocols/canonical";
import { type ChatCompletionChunk, finishFromOpenAI, usageFromOpenAI } from "../../protocols/openai-chat/wire";
import { describeUpstreamBody, UpstreamError } from "../errors";

export async function* chatChunkEvents(
  body: ReadableStream<Uint8Array>,
  provider: string,
): AsyncGenerator<StreamEvent> {
  let started = false;
  for await (const frame of readSse(body)) {
    if (frame.data === "[DONE]") return;
    let chunk: ChatCompletionChunk & { error?: unknown };
    try {
      chunk = JSON.parse(frame.data);
    } catch {
      throw new UpstreamError("protocol", `${provider} sent a malformed stream chunk`, { status: 502 });
    }
    if (chunk.error) {
      const { message, type } = describeUpstreamBody(chunk);
      throw new UpstreamError("http", `${provider} stream failed: ${message ?? "unknown error"}`, {
        status: 502,
        upstreamType: type,
      });
    }
    if (!started) {
      started = true;
      yield {
        type: "start",
        id: chunk.id,
        model: chunk.model,
        created: chunk.created ?? Math.floor(Date.now() / 1000),
      };
    }
    for (const c of chunk.choices ?? []) {
      const d = c.delta ?? {};
      const reasoning = d.reasoning_content ?? d.reasoning;
      if (reasoning) yield { type: "thinking_delta", choice: c.index, text: reasoning };
      if (d.content) yield { type: "text_delta", choice: c.index, text: d.content };
      for (const t of d.tool_calls ?? []) {
        if (t.id)
          yield { type: "tool_call_start", choice: c.index, index: t.index, id: t.id, name: t.function?.name ?? "" };
        if (t.function?.arguments)
          yield { type: "tool_call_delta", choice: c.index, index: t.index, arguments: t.function.arguments };
      }
      if (c.finish_reason) yield { type: "finish", choice: c.index, reason: finishFromOpenAI(c.finish_reason) };
    }
    if (chunk.usage) yield { type: "usage", usage: usageFromOpenAI(chunk.usage) };
  }
}
