/** OpenAI Responses SSE events -> canonical stream events (PROTOCOLS.md 2.3, 5.10). */
import { readSse } from "../../../http/sse";
import type { StreamEvent } from "../../../protocols/canonical";
import {
  finishFromResponses,
  statusOfResponseError,
  type UpstreamStreamEvent,
  usageFromResponses,
} from "../../../protocols/openai-responses/wire";
import { UpstreamError } from "../../errors";
import { failedResponse } from "./response";

interface OpenCall {
  /** The canonical tool-call index (0, 1, ... in the order calls open). */
  index: number;
  /** Whether any argument text was passed on (else the `.done` event's full text is). */
  sent: boolean;
}

/**
 * Yields canonical events for one streamed response: `start` from `response.created`; text,
 * refusal and reasoning (summary or text) deltas as they come; function calls opened by
 * `output_item.added` and filled by their argument deltas; `finish` and `usage` from the terminal
 * `response.completed` / `response.incomplete`. `response.failed` and `error` events throw an
 * UpstreamError with the status their code stands for; a stream that ends before a terminal event
 * is a protocol failure.
 */
export async function* responsesStreamEvents(
  body: ReadableStream<Uint8Array>,
  provider: string,
): AsyncGenerator<StreamEvent> {
  let started = false;
  const calls = new Map<string, OpenCall>();
  let nextCall = 0;
  for await (const frame of readSse(body)) {
    if (frame.data === "[DONE]") continue;
    let ev: UpstreamStreamEvent;
    try {
      ev = JSON.parse(frame.data);
    } catch {
      throw new UpstreamError("protocol", `${provider} sent a malformed stream event`, { status: 502 });
    }
    if (!started && ev.type !== "error" && ev.type !== "response.failed") {
      // Normally `response.created`; whatever comes first starts the answer.
      started = true;
      yield {
        type: "start",
        id: ev.response?.id ?? "",
        model: ev.response?.model ?? "",
        created: ev.response?.created_at ?? Math.floor(Date.now() / 1000),
      };
    }
    switch (ev.type) {
      case "response.output_text.delta":
      case "response.refusal.delta":
        if (ev.delta) yield { type: "text_delta", choice: 0, text: ev.delta };
        break;
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta":
        if (ev.delta) yield { type: "thinking_delta", choice: 0, text: ev.delta };
        break;
      case "response.reasoning_summary_part.added":
        // Summary parts are paragraphs of one reasoning text.
        if ((ev.summary_index ?? 0) > 0) yield { type: "thinking_delta", choice: 0, text: "\n\n" };
        break;
      case "response.output_item.added": {
        const item = ev.item;
        if (item?.type !== "function_call" || !item.id) break;
        const call: OpenCall = { index: nextCall++, sent: false };
        calls.set(item.id, call);
        yield {
          type: "tool_call_start",
          choice: 0,
          index: call.index,
          id: item.call_id ?? item.id,
          name: item.name ?? "",
        };
        if (item.arguments) {
          call.sent = true;
          yield { type: "tool_call_delta", choice: 0, index: call.index, arguments: item.arguments };
        }
        break;
      }
      case "response.function_call_arguments.delta": {
        const call = ev.item_id ? calls.get(ev.item_id) : undefined;
        if (!call || !ev.delta) break;
        call.sent = true;
        yield { type: "tool_call_delta", choice: 0, index: call.index, arguments: ev.delta };
        break;
      }
      case "response.function_call_arguments.done": {
        const call = ev.item_id ? calls.get(ev.item_id) : undefined;
        if (call && !call.sent && ev.arguments) {
          call.sent = true;
          yield { type: "tool_call_delta", choice: 0, index: call.index, arguments: ev.arguments };
        }
        break;
      }
      case "response.completed":
      case "response.incomplete": {
        const r = ev.response ?? {};
        yield {
          type: "finish",
          choice: 0,
          reason: finishFromResponses(ev.type.slice("response.".length), r.incomplete_details?.reason, calls.size > 0),
        };
        yield { type: "usage", usage: usageFromResponses(r.usage) };
        return;
      }
      case "response.failed":
        throw failedResponse(ev.response ?? {}, provider);
      case "error": {
        const code = ev.code ?? ev.error?.code ?? null;
        const message = ev.message ?? ev.error?.message ?? "unknown error";
        throw new UpstreamError("http", `${provider} stream failed: ${message}`, {
          status: statusOfResponseError(code),
          ...(code ? { upstreamType: code } : {}),
        });
      }
      default:
        // Lifecycle, item and part boundaries, annotations, built-in tool progress: nothing to say.
        break;
    }
  }
  throw new UpstreamError("protocol", `${provider} ended the stream before the response finished`, { status: 502 });
}
