/**
 * The OpenAI Responses API as a pipeline protocol (POST /v1/responses).
 *
 * Models with catalog `mode: responses` on OpenAI-type providers are forwarded natively: the body
 * goes to the provider's `/responses` unchanged (the upstream keeps the conversation state, so
 * `previous_response_id` passes through) and its events come back unchanged. Every other model
 * (`mode: chat`) is translated through the canonical form; the gateway then keeps the conversation
 * itself: each response is stored (unless `store: false`) and `prepare` expands a
 * `previous_response_id` into the stored turns ahead of the new input.
 */

import { TypeCompiler } from "@sinclair/typebox/compiler";
import type { Catalog, ServedModel } from "../../catalog/catalog";
import { badRequest, GatewayError } from "../../http/errors";
import { readSse, sseFrame } from "../../http/sse";
import { validator } from "../../http/validate";
import { UpstreamError } from "../../providers/errors";
import type { ProviderAdapter } from "../../providers/types";
import { isGatewayResponseId, type ResponseStore, type StoredResponse } from "../../responses/store";
import type { CanonicalRequest } from "../canonical";
import type { Protocol, ProtocolContext, StreamTracker } from "../protocol";
import { decodeResponsesRequest, inputItems } from "./decode";
import { encodeResponse } from "./encode";
import { type InputItem, ResponsesRequest } from "./schema";
import { ResponsesStreamEncoder } from "./stream";
import { type ResponseObject, usageFromResponses } from "./wire";

// ---- validation ------------------------------------------------------------------------------

const _check = TypeCompiler.Compile(ResponsesRequest);

/**
 * The first error, made precise: TypeBox reports a failed `string | array` union at the union (so
 * "input must be a string or an array"); this descends to the first bad element, and an input item
 * without `type` is checked as the message it is.
 */
/** Checks a /v1/responses body; a 400 naming the field otherwise. */
export const parseResponsesRequest = validator(ResponsesRequest);

// ---- conversation state ----------------------------------------------------------------------

/** What `prepare` worked out for one request (keyed by the body object it returned). */
interface Prepared {
  /** Forwarded to an upstream Responses API as-is (canonical decoding then serves estimates only). */
  native: boolean;
  /** The conversation items: stored turns first when continuing, then the request's input. */
  items: InputItem[];
  previousResponseId: string | null;
  canonical?: CanonicalRequest;
}

const OPENAI_FAMILY = new Set(["openai", "openai-compatible", "azure"]);

export interface ResponsesProtocolDeps {
  store: ResponseStore;
  catalog: Catalog;
  adapters: Map<string, ProviderAdapter>;
}

const tokenOf = (ctx: ProtocolContext): string | null =>
  ctx.principal.kind === "key" ? ctx.principal.key.token_id : null;

export function previousNotFound(id: string): GatewayError {
  return new GatewayError(404, `Previous response with id '${id}' not found.`, {
    type: "invalid_request_error",
    code: "previous_response_not_found",
    param: "previous_response_id",
  });
}

/**
 * The turns a stored response continues with: its input, then its output. Reasoning items are
 * replayed only to the model that produced them (a signature means nothing to another vendor), and
 * never to an upstream Responses API (it accepts only its own reasoning); item ids are dropped there.
 */
export function history(stored: StoredResponse, model: string, native: boolean): InputItem[] {
  const output = Array.isArray(stored.response.output) ? stored.response.output : [];
  const items = [...stored.input, ...output] as InputItem[];
  if (!native) return stored.model === model ? items : items.filter((i) => i.type !== "reasoning");
  return items
    .filter((i) => i.type !== "reasoning")
    .map((i) => {
      if (i.type !== "message" && i.type !== "function_call") return i;
      const { id: _id, ...rest } = i as Record<string, unknown>;
      return rest as InputItem;
    });
}

// ---- native forwarding -----------------------------------------------------------------------

interface UpstreamEvent {
  type?: string;
  sequence_number?: number;
  delta?: string;
  response?: {
    id?: string;
    usage?: Parameters<typeof usageFromResponses>[0];
    error?: { code?: string; message?: string };
  };
  code?: string | null;
  message?: string;
  error?: { code?: string | null; message?: string; type?: string };
}

function upstreamFailure(e: unknown, provider: string, signal: AbortSignal): GatewayError {
  if (e instanceof GatewayError) return e;
  if (e instanceof UpstreamError)
    return new GatewayError(502, e.message, { code: "upstream_error", type: "server_error" });
  return new GatewayError(502, signal.aborted ? "stream aborted" : `${provider} stream failed`, {
    code: "upstream_error",
    type: "server_error",
  });
}

const statusOfCode = (code: string | null | undefined) => (code === "rate_limit_exceeded" ? 429 : 502);

/**
 * An upstream Responses stream goes to the client unchanged (event names and data as sent). Usage
 * comes from the terminal event; text for estimates from the deltas. When the upstream breaks off,
 * the client gets `response.failed` continuing the upstream's sequence numbers (or an `error` event
 * when the upstream had not even created the response).
 */
async function* forwardEvents(
  upstream: ReadableStream<Uint8Array>,
  _input: ResponsesRequest,
  t: StreamTracker,
  provider: string,
  signal: AbortSignal,
): AsyncGenerator<Uint8Array> {
  let seq = -1;
  let created: Record<string, unknown> | undefined;
  let terminal = false;
  const failFrames = (err: GatewayError): Uint8Array[] => {
    const n = seq + 1;
    if (!created) {
      return [
        sseFrame(
          JSON.stringify({ type: "error", sequence_number: n, code: err.code, message: err.message, param: null }),
          "error",
        ),
      ];
    }
    const response = {
      ...created,
      status: "failed",
      error: { code: err.status === 429 ? "rate_limit_exceeded" : "server_error", message: err.message },
    };
    return [sseFrame(JSON.stringify({ type: "response.failed", sequence_number: n, response }), "response.failed")];
  };
  try {
    for await (const ev of readSse(upstream)) {
      if (ev.data === "[DONE]") break;
      let data: UpstreamEvent;
      try {
        data = JSON.parse(ev.data);
      } catch {
        throw new UpstreamError("protocol", `${provider} sent a malformed stream event`, { status: 502 });
      }
      if (typeof data.sequence_number === "number") seq = data.sequence_number;
      switch (data.type) {
        case "response.created":
        case "response.in_progress":
          if (data.response) created = data.response as Record<string, unknown>;
          break;
        case "response.output_text.delta":
        case "response.function_call_arguments.delta":
        case "response.reasoning_text.delta":
        case "response.reasoning_summary_text.delta":
          if (typeof data.delta === "string") t.token(data.delta);
          break;
        case "response.completed":
        case "response.incomplete":
          terminal = true;
          t.usage = usageFromResponses(data.response?.usage);
          break;
        case "response.failed": {
          terminal = true;
          if (data.response?.usage) t.usage = usageFromResponses(data.response.usage);
          const err = data.response?.error;
          t.failed = new GatewayError(502, err?.message ?? `${provider} failed the response`, {
            code: err?.code ?? "upstream_error",
            type: "server_error",
          });
          break;
        }
        case "error": {
          terminal = true;
          const code = data.code ?? data.error?.code ?? null;
          t.failed = new GatewayError(statusOfCode(code), data.message ?? data.error?.message ?? "upstream error", {
            code: code ?? "upstream_error",
            type: statusOfCode(code) === 429 ? "rate_limit_error" : "server_error",
          });
          break;
        }
        default:
          break;
      }
      yield sseFrame(ev.data, ev.event);
      if (terminal) return;
    }
    if (!terminal) throw new UpstreamError("protocol", `${provider} ended the stream before the response finished`);
  } catch (e) {
    const err = upstreamFailure(e, provider, signal);
    t.failed = err;
    if (!signal.aborted) for (const f of failFrames(err)) yield f;
  }
}

// ---- the protocol ----------------------------------------------------------------------------

/**
 * The /v1/responses protocol over a response store. Native forwarding applies to `mode: responses`
 * models (the adapter decides whether it can: OpenAI-type providers can).
 */
export function openAIResponses(deps: ResponsesProtocolDeps): Protocol<ResponsesRequest> {
  const { store, catalog, adapters } = deps;
  const prepared = new WeakMap<ResponsesRequest, Prepared>();

  /** Forwarded natively on every deployment, so the upstream keeps the conversation. */
  const forwardsNatively = (m: ServedModel | undefined): boolean =>
    m?.mode === "responses" &&
    m.deployments.every((d) => {
      const type = adapters.get(d.provider)?.type;
      return type !== undefined && OPENAI_FAMILY.has(type);
    });

  const load = async (id: string, ctx: ProtocolContext): Promise<StoredResponse> => {
    const stored = await store.load(id, tokenOf(ctx));
    if (!stored) throw previousNotFound(id);
    return stored;
  };

  const save = (response: ResponseObject, body: ResponsesRequest, ctx: ProtocolContext) => {
    const state = prepared.get(body);
    // The write is not awaited: see src/responses/store.ts for how follow-ups still find it.
    void store.save({
      id: response.id,
      tokenId: tokenOf(ctx),
      model: ctx.model,
      requestId: ctx.requestId,
      input: state?.items ?? inputItems(body),
      response: response as unknown as Record<string, unknown>,
    });
  };

  const previousOf = (body: ResponsesRequest) =>
    prepared.get(body)?.previousResponseId ?? body.previous_response_id ?? null;

  return {
    name: "openai-responses",
    modes: ["chat", "responses"],
    model: (b) => b.model,
    stream: (b) => b.stream === true,

    async prepare(body, ctx) {
      const native = forwardsNatively(catalog.resolve(ctx.model));
      const previous = body.previous_response_id ?? null;
      if (native) {
        // The upstream keeps its own responses; only a response the gateway made is expanded here.
        if (!previous || !isGatewayResponseId(previous)) {
          prepared.set(body, { native, items: inputItems(body), previousResponseId: previous });
          return body;
        }
        const items = [...history(await load(previous, ctx), ctx.model, true), ...inputItems(body)];
        const out: ResponsesRequest = { ...body, input: items };
        delete out.previous_response_id;
        prepared.set(out, { native, items, previousResponseId: previous });
        return out;
      }
      let items = inputItems(body);
      if (previous) items = [...history(await load(previous, ctx), ctx.model, false), ...items];
      const out: ResponsesRequest = { ...body };
      const canonical = decodeResponsesRequest(out, items, { strict: true });
      if (canonical.messages.length === 0) {
        throw badRequest("'input' must contain at least one user, assistant or tool item", "input", "missing_field");
      }
      prepared.set(out, { native, items, previousResponseId: previous, canonical });
      return out;
    },

    toCanonical(body) {
      const state = prepared.get(body);
      if (state?.canonical) return state.canonical;
      return decodeResponsesRequest(body, state?.items ?? inputItems(body), { strict: !state?.native });
    },

    encode(res, body, ctx) {
      const keep = body.store !== false;
      const response = encodeResponse(res, body, {
        id: store.mintId(keep),
        createdAt: res.created || Math.floor(Date.now() / 1000),
        model: res.model,
        previousResponseId: previousOf(body),
      });
      if (keep) save(response, body, ctx);
      return response;
    },

    encoder(body, ctx) {
      const keep = body.store !== false;
      return new ResponsesStreamEncoder(body, {
        id: store.mintId(keep),
        previousResponseId: previousOf(body),
        ...(keep ? { onFinal: (response: ResponseObject) => save(response, body, ctx) } : {}),
      });
    },

    native: {
      applies: (m) => m.mode === "responses",
      body: (b, stream) => ({ ...b, stream }),
      usage: (json) => usageFromResponses((json as { usage?: Parameters<typeof usageFromResponses>[0] }).usage),
      frames: forwardEvents,
    },
  };
}
