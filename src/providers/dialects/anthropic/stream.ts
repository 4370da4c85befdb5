/** Anthropic Messages SSE stream -> canonical stream events (PROTOCOLS.md 3.4, 5.10). */
import { readSse } from "../../../http/sse";
import {
  type AnthropicStreamEvent,
  type AnthropicUsage,
  anthropicErrorStatus,
  stopReasonFromAnthropic,
  usageFromAnthropic,
} from "../../../protocols/anthropic/wire";
import type { StreamEvent } from "../../../protocols/canonical";
import { UpstreamError } from "../../errors";
import { JSON_OUTPUT_TOOL } from "./request";

/** What a content block (by Anthropic's block index) turns into. */
type BlockRole =
  | { kind: "text" }
  | { kind: "tool"; index: number }
  | { kind: "json" }
  | { kind: "thinking" }
  | { kind: "ignored" };

/**
 * Yields canonical events for one streamed message. Tool calls are numbered 0, 1, ... in the order
 * they open (not by content-block index, which also counts text and thinking blocks). A mid-stream
 * `error` event throws an UpstreamError with the status Anthropic gives that error type.
 */
export async function* anthropicStreamEvents(
  body: ReadableStream<Uint8Array>,
  provider: string,
): AsyncGenerator<StreamEvent> {
  const blocks = new Map<number, BlockRole>();
  let tools = 0;
  let jsonOutput = false;
  // The counts so far, in Anthropic's terms: message_start has the input, message_delta the output.
  let counts: AnthropicUsage = { input_tokens: 0, output_tokens: 0 };
  let finished = false;

  for await (const frame of readSse(body)) {
    let ev: AnthropicStreamEvent;
    try {
      ev = JSON.parse(frame.data);
    } catch {
      throw new UpstreamError("protocol", `${provider} sent a malformed stream event`, { status: 502 });
    }
    switch (ev.type) {
      case "message_start": {
        const m = ev.message;
        yield { type: "start", id: m.id, model: m.model, created: Math.floor(Date.now() / 1000) };
        counts = { ...m.usage };
        yield { type: "usage", usage: usageFromAnthropic(counts) };
        break;
      }
      case "content_block_start": {
        const b = ev.content_block;
        switch (b.type) {
          case "text":
            blocks.set(ev.index, { kind: "text" });
            if (b.text) yield { type: "text_delta", choice: 0, text: b.text };
            break;
          case "tool_use":
            if (b.name === JSON_OUTPUT_TOOL) {
              jsonOutput = true;
              blocks.set(ev.index, { kind: "json" });
            } else {
              const index = tools++;
              blocks.set(ev.index, { kind: "tool", index });
              yield { type: "tool_call_start", choice: 0, index, id: b.id, name: b.name };
            }
            break;
          case "thinking":
            blocks.set(ev.index, { kind: "thinking" });
            if (b.thinking || b.signature) {
              yield {
                type: "thinking_delta",
                choice: 0,
                text: b.thinking ?? "",
                ...(b.signature ? { signature: b.signature } : {}),
              };
            }
            break;
          case "redacted_thinking":
          case "server_tool_use":
          case "web_search_tool_result":
            // No canonical stream event carries these; the client protocol could not replay them.
            blocks.set(ev.index, { kind: "ignored" });
            break;
          default: {
            const unreachable: never = b;
            void unreachable;
            blocks.set(ev.index, { kind: "ignored" });
          }
        }
        break;
      }
      case "content_block_delta": {
        const role = blocks.get(ev.index) ?? { kind: "ignored" };
        const d = ev.delta;
        switch (d.type) {
          case "text_delta":
            if (d.text) yield { type: "text_delta", choice: 0, text: d.text };
            break;
          case "input_json_delta":
            if (!d.partial_json) break;
            if (role.kind === "tool")
              yield { type: "tool_call_delta", choice: 0, index: role.index, arguments: d.partial_json };
            else if (role.kind === "json") yield { type: "text_delta", choice: 0, text: d.partial_json };
            break;
          case "thinking_delta":
            if (d.thinking) yield { type: "thinking_delta", choice: 0, text: d.thinking };
            break;
          case "signature_delta":
            yield { type: "thinking_delta", choice: 0, text: "", signature: d.signature };
            break;
          case "citations_delta":
            break;
          default: {
            const unreachable: never = d;
            void unreachable;
          }
        }
        break;
      }
      case "content_block_stop":
        break;
      case "message_delta": {
        let reason = stopReasonFromAnthropic(ev.delta.stop_reason);
        if (jsonOutput && tools === 0 && reason === "tool_calls") reason = "end_turn";
        finished = true;
        yield { type: "finish", choice: 0, reason, stopSequence: ev.delta.stop_sequence ?? null };
        // Cumulative output; input and cache counts from message_start unless this event repeats them.
        const u = ev.usage;
        counts = {
          input_tokens: u?.input_tokens ?? counts.input_tokens,
          cache_creation_input_tokens: u?.cache_creation_input_tokens ?? counts.cache_creation_input_tokens ?? 0,
          cache_read_input_tokens: u?.cache_read_input_tokens ?? counts.cache_read_input_tokens ?? 0,
          output_tokens: u?.output_tokens ?? counts.output_tokens,
        };
        yield { type: "usage", usage: usageFromAnthropic(counts) };
        break;
      }
      case "message_stop":
        return;
      case "ping":
        break;
      case "error": {
        const type = ev.error?.type ?? "api_error";
        throw new UpstreamError("http", `${provider} stream failed: ${ev.error?.message ?? type}`, {
          status: anthropicErrorStatus(type),
          upstreamType: type,
        });
      }
      default: {
        // An event type newer than this adapter: skipped, as Anthropic's versioning policy asks.
        const unreachable: never = ev;
        void unreachable;
      }
    }
  }
  if (!finished) {
    throw new UpstreamError("protocol", `${provider} ended the stream before the message was finished`, {
      status: 502,
    });
  }
}
