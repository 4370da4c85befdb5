/** Anthropic Messages as a pipeline protocol (POST /v1/messages, POST /v1/messages/count_tokens). */

import { GatewayError } from "../../http/errors";
import { readSse, sseFrame } from "../../http/sse";
import { validator } from "../../http/validate";
import { fetchFailure, UpstreamError } from "../../providers/errors";
import { toClientError } from "../../routing/router";
import type { Protocol, StreamTracker } from "../protocol";
import { decodeMessagesRequest } from "./decode";
import { encodeMessagesResponse } from "./encode";
import { CountTokensRequest, MessagesRequest } from "./schema";
import { errorFrame, eventFrame, MessagesStreamEncoder } from "./stream";
import {
  type AnthropicMessage,
  type AnthropicStreamEvent,
  type AnthropicUsage,
  anthropicErrorStatus,
  usageFromAnthropic,
} from "./wire";

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/** Validates a Messages request; a 400 (Anthropic's `invalid_request_error`) names the first bad field. */
export const parseMessagesRequest = validator(MessagesRequest);
export const parseCountTokensRequest = validator(CountTokensRequest);

// ---------------------------------------------------------------------------------------------
// Native forwarding (Anthropic-type upstreams, Claude on Vertex AI)
// ---------------------------------------------------------------------------------------------

/** A mid-stream `error` event from the upstream, as the gateway reports and bills it. */
function upstreamStreamError(type: string, message: string, provider: string): GatewayError {
  return toClientError(
    new UpstreamError("http", `${provider} stream failed: ${message}`, {
      status: anthropicErrorStatus(type),
      upstreamType: type,
    }),
  );
}

function failure(e: unknown, provider: string, signal: AbortSignal): GatewayError {
  if (e instanceof GatewayError) return e;
  return toClientError(e instanceof UpstreamError ? e : fetchFailure(e, provider, signal));
}

/**
 * The upstream's frames go to the client unchanged, with their event names. Usage is taken from
 * message_start (input and cache counts: partial) and message_delta (cumulative output; newer API
 * versions repeat the input counts there: final), so a stream cut off before message_delta keeps
 * its input counts but has its output estimated rather than billed as message_start's 1.
 */
async function* forwardEvents(
  upstream: ReadableStream<Uint8Array>,
  _input: MessagesRequest,
  t: StreamTracker,
  provider: string,
  signal: AbortSignal,
): AsyncGenerator<Uint8Array> {
  let counts: Partial<AnthropicUsage> = {};
  let finished = false;
  try {
    for await (const frame of readSse(upstream)) {
      let ev: AnthropicStreamEvent;
      try {
        ev = JSON.parse(frame.data);
      } catch {
        throw new UpstreamError("protocol", `${provider} sent a malformed stream event`, { status: 502 });
      }
      const out = sseFrame(frame.data, frame.event ?? ev.type);
      switch (ev.type) {
        case "message_start":
          counts = { ...ev.message?.usage };
          t.partialUsage = usageFromAnthropic({ input_tokens: 0, output_tokens: 0, ...counts });
          break;
        case "content_block_start": {
          const b = ev.content_block;
          if (b?.type === "text" && b.text) t.token(b.text);
          else if (b?.type === "thinking" && b.thinking) t.token(b.thinking);
          else if (b?.type === "tool_use") t.token(b.name);
          break;
        }
        case "content_block_delta": {
          const d = ev.delta;
          if (d?.type === "text_delta") t.token(d.text);
          else if (d?.type === "input_json_delta") t.token(d.partial_json);
          else if (d?.type === "thinking_delta") t.token(d.thinking);
          break;
        }
        case "message_delta": {
          const u = ev.usage ?? { output_tokens: 0 };
          counts = {
            input_tokens: u.input_tokens ?? counts.input_tokens ?? 0,
            cache_creation_input_tokens: u.cache_creation_input_tokens ?? counts.cache_creation_input_tokens ?? 0,
            cache_read_input_tokens: u.cache_read_input_tokens ?? counts.cache_read_input_tokens ?? 0,
            output_tokens: u.output_tokens ?? counts.output_tokens ?? 0,
          };
          t.usage = usageFromAnthropic(counts);
          finished = true;
          break;
        }
        case "message_stop":
          yield out;
          return;
        case "error": {
          const type = ev.error?.type ?? "api_error";
          t.failed = upstreamStreamError(type, ev.error?.message ?? type, provider);
          yield out;
          return;
        }
        default:
          break;
      }
      yield out;
    }
    if (finished) {
      // The upstream closed right after message_delta: end the message for the client.
      yield eventFrame({ type: "message_stop" });
      return;
    }
    throw new UpstreamError("protocol", `${provider} ended the stream before the message was finished`, {
      status: 502,
    });
  } catch (e) {
    const err = failure(e, provider, signal);
    t.failed = err;
    if (!signal.aborted) yield errorFrame(err);
  }
}

export const anthropicMessages: Protocol<MessagesRequest> = {
  name: "anthropic-messages",
  modes: ["chat", "responses"],
  model: (b) => b.model,
  stream: (b) => b.stream === true,
  toCanonical: decodeMessagesRequest,
  encode: (res) => encodeMessagesResponse(res),
  encoder: (_b, ctx) => new MessagesStreamEncoder(ctx.requestId.replace(/^req_/, ""), ctx.model),
  native: {
    // The client's body as it came; the adapter sets (Anthropic) or removes (Vertex) the model.
    body: (b) => b as Record<string, unknown>,
    usage: (json) => usageFromAnthropic((json as AnthropicMessage | null)?.usage),
    frames: forwardEvents,
  },
};
