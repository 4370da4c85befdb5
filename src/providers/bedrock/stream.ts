/**
 * ConverseStream (binary event stream) -> canonical stream events.
 * Reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html
 *
 * Each event message carries `:message-type: event`, `:event-type: <member>` and a JSON payload
 * that is the member's body (plus a random-length `p` padding field, ignored). Failures arrive as
 * `:message-type: exception` with `:exception-type` and a `{message}` payload, or as
 * `:message-type: error` with `:error-code` / `:error-message` headers.
 */
import type { StreamEvent } from "../../protocols/canonical";
import { UpstreamError } from "../errors";
import { decodeEventStream, EventStreamError, type EventStreamMessage, headerString } from "./eventstream";
import { JSON_TOOL } from "./request";
import { type ConverseUsage, finishFromConverse, type ResponseContext, usageFromConverse } from "./response";

/** Stream exception types and the HTTP status each one stands for. */
export const STREAM_EXCEPTION_STATUS: Record<string, number> = {
  throttlingException: 429,
  validationException: 400,
  accessDeniedException: 403,
  resourceNotFoundException: 404,
  modelStreamErrorException: 502,
  internalServerException: 500,
  serviceUnavailableException: 503,
  modelTimeoutException: 504,
};

interface ConverseStreamPayload {
  role?: string;
  contentBlockIndex?: number;
  start?: { toolUse?: { toolUseId: string; name: string } };
  delta?: {
    text?: string;
    toolUse?: { input?: string };
    reasoningContent?: { text?: string; signature?: string; redactedContent?: string };
  };
  stopReason?: string;
  usage?: ConverseUsage;
}

const utf8 = new TextDecoder();

function parsePayload(msg: EventStreamMessage, provider: string): ConverseStreamPayload & { message?: string } {
  try {
    const text = utf8.decode(msg.payload);
    return text.trim() === "" ? {} : JSON.parse(text);
  } catch {
    throw new UpstreamError("protocol", `${provider} sent a stream event that is not JSON`, { status: 502 });
  }
}

function streamFailure(msg: EventStreamMessage, provider: string): UpstreamError {
  const kind = headerString(msg, ":message-type");
  if (kind === "exception") {
    const type = headerString(msg, ":exception-type") ?? "unknownException";
    let message: string | undefined;
    try {
      const body = JSON.parse(utf8.decode(msg.payload)) as { message?: unknown; Message?: unknown };
      message = [body.message, body.Message].find((m) => typeof m === "string") as string | undefined;
    } catch {}
    return new UpstreamError("http", `${provider} stream failed: ${type}: ${message ?? "no message"}`, {
      status: STREAM_EXCEPTION_STATUS[type] ?? 502,
      upstreamType: type,
    });
  }
  const code = headerString(msg, ":error-code") ?? "unknownError";
  const message = headerString(msg, ":error-message") ?? "no message";
  return new UpstreamError("http", `${provider} stream failed: ${code}: ${message}`, {
    status: STREAM_EXCEPTION_STATUS[code] ?? 502,
    upstreamType: code,
  });
}

export async function* converseStreamEvents(
  body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>,
  rc: ResponseContext,
): AsyncGenerator<StreamEvent> {
  let started = false;
  /** contentBlockIndex -> tool index (0, 1, ... in order of appearance) for tool-use blocks. */
  const tools = new Map<number, number>();
  /** contentBlockIndex of the json_output tool, whose input is streamed as text. */
  let jsonBlock: number | undefined;
  const start = (): StreamEvent => {
    started = true;
    return { type: "start", id: rc.id, model: rc.model, created: Math.floor(Date.now() / 1000) };
  };
  try {
    for await (const msg of decodeEventStream(body)) {
      const kind = headerString(msg, ":message-type") ?? "event";
      if (kind !== "event") throw streamFailure(msg, rc.provider);
      const type = headerString(msg, ":event-type");
      const ev = parsePayload(msg, rc.provider);
      if (!started && type !== "metadata") yield start();
      const index = ev.contentBlockIndex ?? 0;
      switch (type) {
        case "messageStart":
          break;
        case "contentBlockStart": {
          const use = ev.start?.toolUse;
          if (!use) break;
          if (rc.jsonMode && use.name === JSON_TOOL) {
            jsonBlock = index;
            break;
          }
          const n = tools.size;
          tools.set(index, n);
          yield { type: "tool_call_start", choice: 0, index: n, id: use.toolUseId, name: use.name };
          break;
        }
        case "contentBlockDelta": {
          const d = ev.delta ?? {};
          if (typeof d.text === "string" && d.text !== "") yield { type: "text_delta", choice: 0, text: d.text };
          if (d.toolUse && typeof d.toolUse.input === "string" && d.toolUse.input !== "") {
            if (jsonBlock === index) yield { type: "text_delta", choice: 0, text: d.toolUse.input };
            else {
              const n = tools.get(index);
              if (n === undefined) {
                throw new UpstreamError("protocol", `${rc.provider} streamed tool input for a block it never opened`, {
                  status: 502,
                });
              }
              yield { type: "tool_call_delta", choice: 0, index: n, arguments: d.toolUse.input };
            }
          }
          const r = d.reasoningContent;
          if (r) {
            if (typeof r.text === "string" && r.text !== "") yield { type: "thinking_delta", choice: 0, text: r.text };
            if (typeof r.signature === "string")
              yield { type: "thinking_delta", choice: 0, text: "", signature: r.signature };
            // redactedContent has no canonical stream event; it is dropped.
          }
          break;
        }
        case "contentBlockStop":
          break;
        case "messageStop":
          yield {
            type: "finish",
            choice: 0,
            reason: finishFromConverse(ev.stopReason, rc.jsonMode),
            stopSequence: null,
          };
          break;
        case "metadata":
          if (ev.usage) yield { type: "usage", usage: usageFromConverse(ev.usage) };
          break;
        default:
          // Event types added later (e.g. server tool results) are skipped, not fatal.
          break;
      }
    }
  } catch (e) {
    if (e instanceof EventStreamError) {
      throw new UpstreamError("protocol", `${rc.provider} sent a malformed event stream: ${e.message}`, {
        status: 502,
      });
    }
    throw e;
  }
}
