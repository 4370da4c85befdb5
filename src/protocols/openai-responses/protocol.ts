/**
 * The OpenAI Responses API as a pipeline protocol (POST /v1/responses).
 *
 * The path is chosen per deployment: a `mode: responses` model's deployments on OpenAI-family
 * providers receive the body natively (their `/responses`), its events come back as sent; every other
 * deployment, and every `mode: chat` model, is served through the canonical form.
 *
 * The gateway keeps the conversation whichever deployment answers: every answer, natively forwarded
 * or translated, gets a gateway id (`resp_gw…`) and is stored (unless `store: false`); `prepare`
 * expands a `previous_response_id` into the stored turns, which a native deployment receives as
 * inline input items (without `previous_response_id`) and any other deployment translated. So a
 * conversation continues on whichever deployment serves the next turn.
 *
 * Two kinds of request only an upstream Responses API can serve are routed to the native
 * deployments alone (`route`): those that cannot be translated (built-in tools, files, background
 * mode, ...), and those continuing an id the gateway did not issue (a conversation the upstream
 * keeps, begun outside the gateway): that id passes through, and those answers keep the upstream's
 * ids and are not stored by the gateway.
 */

import type { Catalog, ServedModel } from "../../catalog/catalog";
import { badRequest, GatewayError } from "../../http/errors";
import { readSse, sseFrame } from "../../http/sse";
import { validator } from "../../http/validate";
import { fetchFailure, UpstreamError } from "../../providers/errors";
import type { Deployment, ProviderAdapter } from "../../providers/types";
import { isGatewayResponseId, type ResponseStore, type StoredResponse } from "../../responses/store";
import { toClientError } from "../../routing/router";
import type { CanonicalRequest } from "../canonical";
import type { Protocol, ProtocolContext, StreamTracker } from "../protocol";
import { decodeResponsesRequest, inputItems } from "./decode";
import { encodeResponse } from "./encode";
import { type InputItem, ResponsesRequest } from "./schema";
import { ResponsesStreamEncoder } from "./stream";
import { type ResponseObject, usageFromResponses } from "./wire";

// ---- validation ------------------------------------------------------------------------------

/** Checks a /v1/responses body; a 400 naming the field otherwise. */
export const parseResponsesRequest = validator(ResponsesRequest);

// ---- conversation state ----------------------------------------------------------------------

/** What `prepare` worked out for one request (keyed by the body object it returned). */
interface Prepared {
  /** The conversation: stored turns first when continuing, then the request's input (what is stored). */
  items: InputItem[];
  previousResponseId: string | null;
  /**
   * The upstream keeps this conversation (an id the gateway did not issue, or background mode):
   * natively forwarded answers go out as they are, with the upstream's id, and are not stored.
   */
  upstreamOwned: boolean;
  /** The request in canonical form, when it can be translated. */
  canonical?: CanonicalRequest;
  /** Why it cannot be translated: only native deployments may serve it. */
  nativeOnly?: GatewayError;
}

const OPENAI_FAMILY = new Set(["openai", "openai-compatible", "azure"]);

/** Item types a translated model understands; the rest are built-in tool items an upstream ran. */
const TRANSLATED_ITEMS = new Set(["message", "function_call", "function_call_output", "reasoning"]);

export interface ResponsesProtocolDeps {
  store: ResponseStore;
  catalog: Catalog;
  adapters: Map<string, ProviderAdapter>;
}

const tokenOf = (ctx: ProtocolContext): string | null =>
  ctx.principal.kind === "key" ? ctx.principal.key.token_id : null;

export function previousNotFound(id: string, detail = ""): GatewayError {
  return new GatewayError(404, `Previous response with id '${id}' not found.${detail}`, {
    type: "invalid_request_error",
    code: "previous_response_not_found",
    param: "previous_response_id",
  });
}

/** An id the gateway did not issue, on a model none of whose deployments could pass it upstream. */
const NOT_ISSUED_HERE =
  " It was not issued by this gateway, so only an upstream Responses API (a mode: responses model on an OpenAI-type provider) could continue it.";

/** A stored response's conversation as it was: its input, then its output. */
function turnsOf(stored: StoredResponse): InputItem[] {
  const output = Array.isArray(stored.response.output) ? stored.response.output : [];
  return [...stored.input, ...output] as InputItem[];
}

/**
 * The turns a stored response continues with: its input, then its output. For a translated model,
 * reasoning items go back only to the model that produced them (a signature means nothing to
 * another vendor) and built-in tool items an upstream ran (web searches, ...) are left out (their
 * outcome is in the text that follows). An upstream Responses API gets no reasoning (it accepts
 * only its own, by ids the gateway does not keep) and no item ids.
 */
export function history(stored: StoredResponse, model: string, native: boolean): InputItem[] {
  const items = turnsOf(stored);
  if (!native) {
    return items.filter((i) => {
      const type = i.type ?? "message";
      return type === "reasoning" ? stored.model === model : TRANSLATED_ITEMS.has(type);
    });
  }
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

/** How a natively forwarded answer becomes the gateway's: its id, and the stored copy. */
interface Adoption {
  /** The response object as the client sees it (the gateway's id, the client's previous id). */
  adopt(response: Record<string, unknown>): Record<string, unknown>;
  /** Keeps the final (completed, incomplete or failed) response for previous_response_id. */
  keep(response: Record<string, unknown>): void;
}

/** A failure while forwarding the upstream's stream, as every protocol reports it (a silent upstream: 504). */
function upstreamFailure(e: unknown, provider: string, signal: AbortSignal): GatewayError {
  if (e instanceof GatewayError) return e;
  return toClientError(e instanceof UpstreamError ? e : fetchFailure(e, provider, signal, "body"));
}

const statusOfCode = (code: string | null | undefined) => (code === "rate_limit_exceeded" ? 429 : 502);

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed"]);

/**
 * An upstream Responses stream goes to the client as sent (event names, order, sequence numbers),
 * except that events carrying the response object carry the gateway's id (when the gateway keeps the
 * conversation); the final response is stored. Usage comes from the terminal event; text for
 * estimates from the deltas. When the upstream breaks off, the client gets `response.failed`
 * continuing the upstream's sequence numbers (or an `error` event when the upstream had not even
 * created the response).
 */
async function* forwardEvents(
  upstream: ReadableStream<Uint8Array>,
  t: StreamTracker,
  provider: string,
  signal: AbortSignal,
  adoption: Adoption | undefined,
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
    adoption?.keep(response);
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
      let frame = ev.data;
      if (adoption && data.response && typeof data.response === "object") {
        const response = adoption.adopt(data.response as Record<string, unknown>);
        data = { ...data, response };
        frame = JSON.stringify(data);
        if (TERMINAL.has(data.type ?? "")) adoption.keep(response);
      }
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
      yield sseFrame(frame, ev.event);
      if (terminal) return;
    }
    if (!terminal) throw new UpstreamError("protocol", `${provider} ended the stream before the response finished`);
  } catch (e) {
    const err = upstreamFailure(e, provider, signal);
    t.failed = err;
    if (!signal.aborted) for (const f of failFrames(err)) yield f;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

// ---- the protocol ----------------------------------------------------------------------------

/** The /v1/responses protocol over a response store (see the file comment). */
export function openAIResponses(deps: ResponsesProtocolDeps): Protocol<ResponsesRequest> {
  const { store, catalog, adapters } = deps;
  const prepared = new WeakMap<ResponsesRequest, Prepared>();

  /**
   * The deployments that receive the body natively. The pipeline decides per deployment the same
   * way: `native.applies` (mode: responses) and an adapter whose `passthrough` speaks the protocol.
   */
  const nativeDeployments = (m: ServedModel): Deployment[] =>
    m.mode !== "responses"
      ? []
      : m.deployments.filter((d) => {
          const type = adapters.get(d.provider)?.type;
          return type !== undefined && OPENAI_FAMILY.has(type);
        });

  /** A fallback can take a native-only request when every deployment of it is native. */
  const allNative = (name: string): boolean => {
    const m = catalog.resolve(name);
    return m !== undefined && m.deployments.length > 0 && nativeDeployments(m).length === m.deployments.length;
  };

  const load = async (id: string, ctx: ProtocolContext): Promise<StoredResponse> => {
    const stored = await store.load(id, tokenOf(ctx));
    if (!stored) throw previousNotFound(id);
    return stored;
  };

  const save = (response: Record<string, unknown>, body: ResponsesRequest, ctx: ProtocolContext) => {
    const state = prepared.get(body);
    // The write is not awaited: see src/responses/store.ts for how follow-ups still find it.
    void store.save({
      id: String(response.id),
      tokenId: tokenOf(ctx),
      model: ctx.model,
      requestId: ctx.requestId,
      input: state?.items ?? inputItems(body),
      response,
    });
  };

  const previousOf = (body: ResponsesRequest) =>
    prepared.get(body)?.previousResponseId ?? body.previous_response_id ?? null;

  /** Gives a natively forwarded answer the gateway's id and stores it, unless the upstream keeps it. */
  const adoption = (body: ResponsesRequest, ctx: ProtocolContext): Adoption | undefined => {
    if (prepared.get(body)?.upstreamOwned) return undefined;
    const keep = body.store !== false;
    const id = store.mintId(keep);
    const previous = previousOf(body);
    return {
      adopt: (response) => ({ ...response, id, previous_response_id: previous }),
      keep: (response) => {
        if (keep) save(response, body, ctx);
      },
    };
  };

  return {
    name: "openai-responses",
    modes: ["chat", "responses"],
    model: (b) => b.model,
    stream: (b) => b.stream === true,

    async prepare(body, ctx) {
      const model = catalog.resolve(ctx.model);
      const canForward = model !== undefined && nativeDeployments(model).length > 0;
      const previous = body.previous_response_id ?? null;
      const input = inputItems(body);
      if (previous !== null && !isGatewayResponseId(previous)) {
        // Not the gateway's: only the upstream that issued it may know it.
        if (!canForward) throw previousNotFound(previous, NOT_ISSUED_HERE);
        prepared.set(body, {
          items: input,
          previousResponseId: previous,
          upstreamOwned: true,
          nativeOnly: previousNotFound(previous, NOT_ISSUED_HERE),
        });
        return body;
      }
      const stored = previous !== null ? await load(previous, ctx) : undefined;
      const state: Prepared = {
        // Stored as they were: each later turn picks what its model can take (see history).
        items: stored ? [...turnsOf(stored), ...input] : input,
        previousResponseId: previous,
        upstreamOwned: body.background === true,
      };
      try {
        const items = stored ? [...history(stored, ctx.model, false), ...input] : input;
        const canonical = decodeResponsesRequest(body, items, { strict: true });
        if (canonical.messages.length === 0) {
          throw badRequest("'input' must contain at least one user, assistant or tool item", "input", "missing_field");
        }
        state.canonical = canonical;
      } catch (e) {
        // What only an upstream Responses API can serve goes to the native deployments (see route),
        // which judge it themselves.
        if (!canForward) throw e;
        state.nativeOnly = e instanceof GatewayError ? e : badRequest("The request cannot be translated", "input");
      }
      let out = body;
      if (stored) {
        // A native deployment gets the stored turns inline; the upstream never saw the gateway's id.
        out = { ...body, input: [...history(stored, ctx.model, true), ...input] };
        delete out.previous_response_id;
      }
      prepared.set(out, state);
      return out;
    },

    route(body, model) {
      if (!prepared.get(body)?.nativeOnly) return model;
      return { ...model, deployments: nativeDeployments(model), fallbacks: model.fallbacks.filter(allNative) };
    },

    toCanonical(body) {
      const state = prepared.get(body);
      if (state?.canonical) return state.canonical;
      // Served by native deployments only (see route): this lenient form is for estimates.
      return decodeResponsesRequest(body, state?.items ?? inputItems(body), { strict: false });
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
      answer(json, body, ctx) {
        const a = isObject(json) ? adoption(body, ctx) : undefined;
        if (!a || !isObject(json)) return json;
        const response = a.adopt(json);
        a.keep(response);
        return response;
      },
      frames: (upstream, body, t, provider, signal, ctx) =>
        forwardEvents(upstream, t, provider, signal, adoption(body, ctx)),
    },
  };
}
