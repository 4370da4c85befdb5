/**
 * Gemini `streamGenerateContent?alt=sse` -> canonical stream events (PROTOCOLS.md 4.4, 5.10).
 * Every frame is a whole GenerateContentResponse holding only the new parts; there is no `[DONE]`.
 * Function calls arrive whole, so each becomes one start and one delta with its full JSON.
 */
import { readSse } from "../../../http/sse";
import type { StreamEvent } from "../../../protocols/canonical";
import { finishFromGemini, type GenerateContentResponse, usageFromGemini } from "../../../protocols/gemini/wire";
import { UpstreamError } from "../../errors";
import { createdOf, embeddedError, mintCallId } from "./response";

interface CandidateState {
  tools: number;
  finished: boolean;
}

export async function* geminiStreamEvents(
  body: ReadableStream<Uint8Array>,
  provider: string,
  model: string,
): AsyncGenerator<StreamEvent> {
  let started = false;
  const candidates = new Map<number, CandidateState>();
  const state = (i: number): CandidateState => {
    let s = candidates.get(i);
    if (!s) {
      s = { tools: 0, finished: false };
      candidates.set(i, s);
    }
    return s;
  };

  for await (const frame of readSse(body)) {
    if (frame.data === "" || frame.data === "[DONE]") continue;
    let chunk: GenerateContentResponse;
    try {
      chunk = JSON.parse(frame.data);
    } catch {
      throw new UpstreamError("protocol", `${provider} sent a malformed stream frame`, { status: 502 });
    }
    if (!chunk || typeof chunk !== "object") {
      throw new UpstreamError("protocol", `${provider} sent a stream frame that is not an object`, { status: 502 });
    }
    const failed = embeddedError(chunk, provider);
    if (failed) throw failed;
    if (!started) {
      started = true;
      yield {
        type: "start",
        id: chunk.responseId || crypto.randomUUID(),
        model: chunk.modelVersion || model,
        created: createdOf(chunk),
      };
    }
    for (const [pos, c] of (chunk.candidates ?? []).entries()) {
      const choice = c.index ?? pos;
      const s = state(choice);
      for (const p of c.content?.parts ?? []) {
        if (p.functionCall) {
          const index = s.tools++;
          yield {
            type: "tool_call_start",
            choice,
            index,
            id: p.functionCall.id || mintCallId(),
            name: p.functionCall.name,
          };
          yield { type: "tool_call_delta", choice, index, arguments: JSON.stringify(p.functionCall.args ?? {}) };
        } else if (typeof p.text === "string") {
          if (p.thought) {
            yield {
              type: "thinking_delta",
              choice,
              text: p.text,
              ...(p.thoughtSignature ? { signature: p.thoughtSignature } : {}),
            };
          } else if (p.text !== "") yield { type: "text_delta", choice, text: p.text };
        }
      }
      if (c.finishReason && !s.finished) {
        s.finished = true;
        yield { type: "finish", choice, reason: finishFromGemini(c.finishReason, s.tools > 0) };
      }
    }
    if (!chunk.candidates?.length && chunk.promptFeedback?.blockReason) {
      const s = state(0);
      if (!s.finished) {
        s.finished = true;
        yield { type: "finish", choice: 0, reason: "content_filter" };
      }
    }
    if (chunk.usageMetadata) yield { type: "usage", usage: usageFromGemini(chunk.usageMetadata) };
  }
  if (!started) throw new UpstreamError("protocol", `${provider} ended the stream without a response`, { status: 502 });
  // A stream that ended cleanly without a finish reason still ends its choices.
  for (const [choice, s] of candidates) {
    if (!s.finished) yield { type: "finish", choice, reason: s.tools > 0 ? "tool_calls" : "end_turn" };
  }
}
