/** OpenAI chat completions as a pipeline protocol (POST /v1/chat/completions). */
import { GatewayError } from "../../http/errors";
import { readSse, sseFrame } from "../../http/sse";
import { validator } from "../../http/validate";
import { fetchFailure, UpstreamError } from "../../providers/errors";
import { toClientError } from "../../routing/router";
import type { Protocol, StreamTracker } from "../protocol";
import { decodeChatRequest } from "./decode";
import { encodeChatResponse } from "./encode";
import { ChatCompletionRequest } from "./schema";
import { ChatStreamEncoder } from "./stream";
import { type ChatCompletion, type ChatCompletionChunk, usageFromOpenAI } from "./wire";

export const parseChatRequest = validator(ChatCompletionRequest);

const DONE = new TextEncoder().encode("data: [DONE]\n\n");

/**
 * An OpenAI-type upstream's chunks go to the client unchanged, except the usage chunk the gateway
 * forced on (dropped when the client did not ask for it). Usage and the text, reasoning and tool
 * calls produced are recorded on the way (for an estimate should the stream be cut first).
 */
async function* forwardChunks(
  upstream: ReadableStream<Uint8Array>,
  input: ChatCompletionRequest,
  t: StreamTracker,
  provider: string,
  signal: AbortSignal,
): AsyncGenerator<Uint8Array> {
  const includeUsage = input.stream_options?.include_usage === true;
  try {
    for await (const ev of readSse(upstream)) {
      if (ev.data === "[DONE]") break;
      let chunk: ChatCompletionChunk & { error?: { message?: string; code?: string | null } };
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        throw new UpstreamError("protocol", `${provider} sent a malformed stream chunk`, { status: 502 });
      }
      if (chunk.error) {
        t.failed = new GatewayError(502, chunk.error.message ?? "upstream stream failed", {
          code: chunk.error.code ?? "upstream_error",
          type: "server_error",
        });
        yield sseFrame(ev.data);
        return;
      }
      if (chunk.usage) {
        // OpenAI sends usage once, in a last chunk without choices; servers that report running
        // totals on content chunks (vLLM's continuous usage) are final only with the finish reason.
        const u = usageFromOpenAI(chunk.usage);
        if (chunk.choices?.some((c) => !c.finish_reason)) t.partialUsage = u;
        else t.usage = u;
      }
      for (const c of chunk.choices ?? []) {
        const reasoning = c.delta?.reasoning_content ?? c.delta?.reasoning;
        if (reasoning) t.token(reasoning);
        if (c.delta?.content) t.token(c.delta.content);
        for (const call of c.delta?.tool_calls ?? [])
          t.token(`${call.function?.name ?? ""}${call.function?.arguments ?? ""}`);
      }
      if (!includeUsage && chunk.usage && (chunk.choices?.length ?? 0) === 0) continue;
      yield sseFrame(ev.data);
    }
    yield DONE;
  } catch (e) {
    const err = upstreamFailure(e, provider, signal);
    t.failed = err;
    if (!signal.aborted)
      yield sseFrame(JSON.stringify({ error: { message: err.message, type: err.type, param: null, code: err.code } }));
  }
}

function upstreamFailure(e: unknown, provider: string, signal: AbortSignal): GatewayError {
  if (e instanceof GatewayError) return e;
  return toClientError(e instanceof UpstreamError ? e : fetchFailure(e, provider, signal));
}

export const openAIChat: Protocol<ChatCompletionRequest> = {
  name: "openai-chat",
  modes: ["chat", "responses"],
  model: (b) => b.model,
  stream: (b) => b.stream === true,
  toCanonical: decodeChatRequest,
  encode: (res) => encodeChatResponse(res),
  encoder: (b) => new ChatStreamEncoder(b.stream_options?.include_usage === true),
  native: {
    // A `mode: responses` model is not served by the upstream's chat completions: translated.
    applies: (m) => m.mode === "chat",
    body: (b, stream) =>
      stream
        ? { ...b, stream: true, stream_options: { ...b.stream_options, include_usage: true } }
        : { ...b, stream: false },
    usage: (json) => usageFromOpenAI((json as ChatCompletion).usage),
    frames: forwardChunks,
  },
};
