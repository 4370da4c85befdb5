/**
 * One pipeline for every public protocol: authorize the model, route it (retries, fallbacks), and
 * for each attempt either forward the client's body to an upstream that speaks the same protocol
 * natively or translate through the canonical form. Usage and cost are captured either way, the
 * spend record is written in the background, and responses carry the gateway's overhead and the
 * deployment that served them.
 */
import type { AlertDispatcher } from "../alerts/webhooks";
import type { Principal } from "../auth/authenticator";
import type { Catalog, ServedModel } from "../catalog/catalog";
import { costOf } from "../catalog/cost";
import { badRequest, GatewayError } from "../http/errors";
import { SSE_HEADERS } from "../http/sse";
import {
  admissionRequest,
  cachedSeeds,
  type KeyPrincipal,
  needsEstimate,
  rateHeaders,
  refusalError,
  type Seeds,
} from "../limits/enforcement";
import type { SpendSeeds } from "../limits/seeds";
import type { Lease, Limiter, RateState } from "../limits/types";
import type { Logger } from "../log";
import { type CanonicalRequest, emptyUsage, type StreamEvent, type Usage } from "../protocols/canonical";
import type { NativeForwarding, Protocol, ProtocolContext, StreamEncoder, StreamTracker } from "../protocols/protocol";
import { fetchFailure, UpstreamError } from "../providers/errors";
import type { ImageFetcher } from "../providers/images";
import type { CallContext, Deployment, ProviderAdapter, UpstreamTiming } from "../providers/types";
import { type Router, type RouteTrace, toClientError } from "../routing/router";
import type { SpendLedger } from "../spend/ledger";
import { authorizeModel } from "./access";
import { countTokens, estimatePromptTokens, promptText } from "./estimate";
import { newRequestId } from "./request-id";
import { type StreamOutcome, sseBody } from "./sse-response";

export interface InferenceDeps {
  catalog: Catalog;
  router: Router;
  adapters: Map<string, ProviderAdapter>;
  ledger: SpendLedger;
  log: Logger;
  heartbeatMs: number;
  fetchImage: ImageFetcher;
  /** Rate limits, parallel caps and budgets; absent: not enforced. */
  limiter?: Limiter;
  alerts?: AlertDispatcher;
  /** Output tokens reserved for tpm and budgets when a request sets no cap. */
  defaultOutputTokens?: number;
  /** Re-reads a key and its team from the database (they changed on another instance). */
  reauthenticate?(p: KeyPrincipal): Promise<Principal>;
  /** Durable spend read fresh when a live spend counter has to be created. */
  seeds?: SpendSeeds;
}

export interface RequestContext {
  requestId: string;
  principal: Principal;
  /** performance.now() when the request arrived. */
  startedAt: number;
  /** Aborts when the client disconnects. */
  signal: AbortSignal;
  endpoint: string;
}

/** What the request log needs to know about one finished request. */
interface Outcome {
  model?: ServedModel;
  deployment?: Deployment;
  status: number;
  errorCode?: string | null;
  usage: Usage;
  usageEstimated?: boolean;
  ttftMs?: number;
  attempts?: number;
  stream: boolean;
}

/**
 * One inference request from admission to its record: holds the limiter lease and finishes exactly
 * once, whichever way the request ends (answer, refusal, upstream failure, disconnect), writing the
 * request log and spend, settling the lease and raising a soft-budget alert when one was crossed.
 */
export class InferenceRun {
  private lease: Lease | undefined;
  private rate: RateState | undefined;
  private done = false;

  constructor(
    private readonly deps: InferenceDeps,
    readonly ctx: RequestContext,
    private readonly requested: string,
  ) {}

  get principal(): Principal {
    return this.ctx.principal;
  }

  /** Admits the request against every limit of its key, key+model and team, or throws the 429. */
  async admit(model: ServedModel, canonical: () => CanonicalRequest): Promise<void> {
    const { limiter, reauthenticate } = this.deps;
    if (this.ctx.principal.kind !== "key" || !limiter || !reauthenticate) return;
    let p: KeyPrincipal = this.ctx.principal;
    const estimate = needsEstimate(p.key, p.team, model.name)
      ? this.estimate(model, canonical)
      : { tokens: 0, cost: 0 };
    // The limiter's clock (Redis's with Redis): instances with skewed clocks pick the same windows.
    const now = limiter.now();
    // Seeds of spend counters: the cached records' until a counter has to be created.
    let seeds: Seeds | undefined;
    for (let attempt = 0; attempt < 4; attempt++) {
      const a = await limiter.admit(admissionRequest(p, model, this.ctx.requestId, estimate, now, seeds));
      if (a.ok) {
        this.lease = a.lease;
        this.rate = a.rate;
        return;
      }
      if (a.unseeded) {
        seeds = this.deps.seeds ? await this.deps.seeds.load(p, model.name, now) : cachedSeeds(p, now);
        continue;
      }
      if (!a.stale) throw refusalError(a, model.name);
      seeds = undefined;
      // The key or team changed on another instance: re-read it; it may now be refused outright.
      const fresh = await reauthenticate(p);
      if (fresh.kind !== "key") return;
      p = fresh;
      this.ctx.principal = fresh;
      authorizeModel(this.deps.catalog, fresh, this.requested);
    }
    throw new GatewayError(503, "The key changed while the request was admitted; retry", { code: "key_changed" });
  }

  /** Prompt tokens (tokenizer) plus the output cap (or a bounded default), and what they would cost. */
  private estimate(model: ServedModel, canonical: () => CanonicalRequest): { tokens: number; cost: number } {
    let req: CanonicalRequest;
    try {
      req = canonical();
    } catch (e) {
      // A request the protocol cannot put in canonical form (forwarded natively) still gets a
      // bounded reservation rather than losing its admission.
      this.deps.log.warn("no estimate for a request", { request_id: this.ctx.requestId, error: (e as Error).message });
      return this.reservationWithoutPrompt(model);
    }
    const prompt = estimatePromptTokens(req);
    const cap = Math.min(
      req.maxTokens ?? this.deps.defaultOutputTokens ?? 1024,
      model.maxOutputTokens ?? Number.MAX_SAFE_INTEGER,
    );
    const input = model.prices.input ?? 0;
    const output = model.prices.output ?? input;
    return { tokens: prompt + cap, cost: prompt * input + cap * output };
  }

  private reservationWithoutPrompt(model: ServedModel): { tokens: number; cost: number } {
    const cap = Math.min(this.deps.defaultOutputTokens ?? 1024, model.maxOutputTokens ?? Number.MAX_SAFE_INTEGER);
    return { tokens: cap, cost: cap * (model.prices.output ?? model.prices.input ?? 0) };
  }

  /** Rate-limit headers of the admission (the tightest limits that applied). */
  rateHeaders(): Record<string, string> {
    return rateHeaders(this.rate);
  }

  finish(o: Outcome): void {
    if (this.done) return;
    this.done = true;
    const { deps, ctx } = this;
    const prices = o.model?.prices;
    const { cost, estimated } = prices ? costOf(o.usage, prices) : { cost: 0, estimated: false };
    const key = ctx.principal.kind === "key" ? ctx.principal.key : undefined;
    const team = ctx.principal.kind === "key" ? ctx.principal.team : undefined;
    deps.ledger.record({
      request_id: ctx.requestId,
      created_at: new Date(),
      endpoint: ctx.endpoint,
      token_id: key?.token_id ?? null,
      key_hash: key?.key_hash ?? null,
      team_id: key?.team_id ?? null,
      model: o.model?.name ?? this.requested,
      requested_model: this.requested,
      provider: o.deployment?.provider ?? null,
      deployment: o.deployment?.id ?? null,
      upstream_model: o.deployment?.upstreamModel ?? null,
      stream: o.stream,
      status: o.status,
      error_code: o.errorCode ?? null,
      input_tokens: o.usage.inputTokens,
      cache_read_tokens: o.usage.cacheReadTokens,
      cache_write_tokens: o.usage.cacheWriteTokens,
      output_tokens: o.usage.outputTokens,
      reasoning_tokens: o.usage.reasoningTokens,
      usage_estimated: o.usageEstimated ?? false,
      cost,
      cost_estimated: estimated,
      latency_ms: Math.round(performance.now() - ctx.startedAt),
      ttft_ms: o.ttftMs !== undefined ? Math.round(o.ttftMs) : null,
      attempts: o.attempts ?? 0,
      tags: key?.tags ?? [],
    });
    if (o.deployment) deps.router.recordTokens(o.deployment, o.usage.inputTokens + o.usage.outputTokens);
    const lease = this.lease;
    if (!lease || !key || !team || !deps.limiter) return;
    deps.limiter
      .settle(lease, { tokens: o.usage.inputTokens + o.usage.outputTokens, cost })
      .then((settled) => {
        if (settled.keySoftBudgetCrossed && key.soft_budget != null) {
          const window = lease.request.key.budget;
          deps.alerts?.emit({
            type: "soft_budget_crossed",
            event_id: `evt_${ctx.requestId}`,
            time: new Date().toISOString(),
            key: { token_id: key.token_id, key_alias: key.key_alias, key_name: key.key_name },
            team: { team_id: team.team_id, team_alias: team.team_alias },
            spend: settled.keySpend,
            soft_budget: key.soft_budget,
            max_budget: key.max_budget,
            window_ends_at:
              window && window.windowEndsAt < Number.MAX_SAFE_INTEGER
                ? new Date(window.windowEndsAt).toISOString()
                : null,
          });
        }
      })
      .catch((e: unknown) =>
        deps.log.error("limiter settle failed", { request_id: ctx.requestId, error: (e as Error).message }),
      );
  }
}

export function callContext(
  deps: InferenceDeps,
  m: ServedModel,
  signal: AbortSignal,
  timing: UpstreamTiming,
): CallContext {
  return {
    signal,
    log: deps.log,
    fetchImage: deps.fetchImage,
    timing,
    ...(m.maxOutputTokens ? { defaultMaxTokens: m.maxOutputTokens } : {}),
    ...(m.mode === "responses" ? { responsesApi: true } : {}),
  };
}

/** What the router did and how long the request waited on upstreams, for logs and the overhead header. */
type Trace = RouteTrace & UpstreamTiming;

const newTrace = (): Trace => ({ attempts: 0, waitedMs: 0, upstreamMs: 0 });

/**
 * Response headers. The overhead is the request's time so far minus the waits on upstreams (from
 * sending each upstream request to its response headers) and between attempts: what the gateway
 * itself spent, translation included.
 */
function gatewayHeaders(run: InferenceRun, model: ServedModel, d: Deployment, trace: Trace): Record<string, string> {
  const ctx = run.ctx;
  const overhead = Math.max(0, performance.now() - ctx.startedAt - trace.upstreamMs - trace.waitedMs);
  return {
    ...run.rateHeaders(),
    "x-request-id": ctx.requestId,
    "x-gateway-overhead-ms": overhead.toFixed(3),
    "x-gateway-model": model.name,
    "x-gateway-deployment": d.id,
    "x-gateway-upstream-model": d.upstreamModel,
  };
}

class Tracker implements StreamTracker {
  usage: Usage | undefined;
  partialUsage: Usage | undefined;
  failed: GatewayError | undefined;
  text = "";
  ttftMs: number | undefined;
  /** A canonical `finish` was seen: usage reported after it is the upstream's final count. */
  finished = false;

  constructor(private readonly startedAt: number) {}

  token(text: string): void {
    if (this.ttftMs === undefined) this.ttftMs = performance.now() - this.startedAt;
    this.text += text;
  }

  /**
   * What a stream is billed. The upstream's final count when it gave one (or, for a stream that ran
   * to its end, the last count it gave). A stream cut off first (client gone, upstream failed or
   * went silent) keeps the input and cache counts the upstream reported and bills the output the
   * upstream counted or the tokenizer counts in what was produced, whichever is more; estimated.
   */
  billed(complete: boolean, promptTokens: () => number): { usage: Usage; estimated: boolean } {
    const final = this.usage ?? (complete ? this.partialUsage : undefined);
    if (final) return { usage: final, estimated: false };
    const produced = countTokens(this.text);
    const p = this.partialUsage;
    if (p) return { usage: { ...p, outputTokens: Math.max(p.outputTokens, produced) }, estimated: true };
    return { usage: { ...emptyUsage(), inputTokens: promptTokens(), outputTokens: produced }, estimated: true };
  }
}

function nativeWanted<B>(
  protocol: Protocol<B>,
  m: ServedModel,
): protocol is Protocol<B> & { native: NativeForwarding<B> } {
  return protocol.native !== undefined && (protocol.native.applies?.(m) ?? true);
}

/** Prompt tokens for an estimate; a request without a canonical form counts zero (and is logged as estimated). */
function promptTokensOrZero(canonical: () => CanonicalRequest): number {
  try {
    return countTokens(promptText(canonical()));
  } catch {
    return 0;
  }
}

/**
 * Records a request that failed before answering, with the model and deployment of its last
 * attempt (when one was made); returns the error the client gets.
 */
function failed(run: InferenceRun, model: ServedModel, trace: Trace, e: unknown, stream: boolean): unknown {
  const err = e instanceof UpstreamError ? toClientError(e) : e;
  run.finish({
    model: trace.model ?? model,
    ...(trace.deployment ? { deployment: trace.deployment } : {}),
    status: err instanceof GatewayError ? err.status : 500,
    errorCode: err instanceof GatewayError ? err.code : "internal_error",
    usage: emptyUsage(),
    attempts: trace.attempts,
    stream,
  });
  return err;
}

/** The client-facing error for anything that escaped an adapter's stream. */
export function clientError(e: unknown, provider: string, signal: AbortSignal): GatewayError {
  if (e instanceof GatewayError) return e;
  return toClientError(e instanceof UpstreamError ? e : fetchFailure(e, provider, signal, "body"));
}

/** What a route hands over: the HTTP request, Bun's server (for its idle timer) and the caller. */
export interface HttpCall {
  request: Request;
  server: { timeout(request: Request, seconds: number): void } | null;
  principal: Principal;
  /** performance.now() when the request arrived, when the route measured it earlier. */
  startedAt?: number;
}

/** A route's entry into the pipeline: mints the request id and keeps long silent calls alive. */
export function serveInference<B>(
  deps: InferenceDeps,
  http: HttpCall,
  endpoint: string,
  protocol: Protocol<B>,
  parsed: B,
) {
  // Model calls can be silent for minutes; the server's idle timer must not cut them.
  http.server?.timeout(http.request, 0);
  const ctx: RequestContext = {
    requestId: newRequestId(),
    principal: http.principal,
    startedAt: http.startedAt ?? performance.now(),
    signal: http.request.signal,
    endpoint,
  };
  return handleInference(deps, ctx, protocol, parsed);
}

/** Runs one inference request in the given protocol, from authorization to the response. */
export async function handleInference<B>(
  deps: InferenceDeps,
  ctx: RequestContext,
  protocol: Protocol<B>,
  parsed: B,
): Promise<Response> {
  const requested = protocol.model(parsed);
  const stream = protocol.stream(parsed);
  const run = new InferenceRun(deps, ctx, requested);
  let model: ServedModel;
  let input = parsed;
  let canonical: CanonicalRequest | undefined;
  const toCanonical = (m: ServedModel): CanonicalRequest => {
    canonical ??= protocol.toCanonical(input);
    return { ...canonical, model: m.name, stream };
  };
  try {
    model = authorizeModel(deps.catalog, ctx.principal, requested);
    if (!protocol.modes.includes(model.mode)) {
      throw badRequest(
        `The model '${requested}' is a ${model.mode} model, which this endpoint does not serve${model.mode === "responses" ? " (use /v1/responses)" : ""}`,
        "model",
        "wrong_model_mode",
      );
    }
    if (protocol.prepare)
      input = await protocol.prepare(parsed, { requestId: ctx.requestId, principal: ctx.principal, model: model.name });
    if (protocol.route) model = protocol.route(input, model);
    const served = model;
    await run.admit(served, () => toCanonical(served));
  } catch (e) {
    if (e instanceof GatewayError) run.finish({ status: e.status, errorCode: e.code, usage: emptyUsage(), stream });
    throw e;
  }
  const pctx = (m: ServedModel): ProtocolContext => ({
    requestId: ctx.requestId,
    principal: ctx.principal,
    model: m.name,
  });
  return stream
    ? streamInference(deps, run, protocol, input, model, toCanonical, pctx)
    : completeInference(deps, run, protocol, input, model, toCanonical, pctx);
}

interface Completed {
  text: string;
  usage: Usage;
}

async function completeInference<B>(
  deps: InferenceDeps,
  run: InferenceRun,
  protocol: Protocol<B>,
  input: B,
  model: ServedModel,
  toCanonical: (m: ServedModel) => CanonicalRequest,
  pctx: (m: ServedModel) => ProtocolContext,
): Promise<Response> {
  const ctx = run.ctx;
  const trace = newTrace();
  try {
    const routed = await deps.router.run<Completed>(
      model,
      ctx.signal,
      async (m, d, signal) => {
        const adapter = deps.adapters.get(d.provider) as ProviderAdapter;
        const call = callContext(deps, m, signal, trace);
        const forwarded =
          nativeWanted(protocol, m) &&
          adapter.passthrough?.(protocol.name, protocol.native.body(input, false), d, call, false);
        if (forwarded && protocol.native) {
          const res = await forwarded;
          let text: string;
          try {
            text = await res.text();
          } catch (e) {
            throw fetchFailure(e, d.provider, signal, "body");
          }
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            throw new UpstreamError("protocol", `${d.provider} returned a body that is not JSON`, { status: 502 });
          }
          const answer = protocol.native.answer ? JSON.stringify(protocol.native.answer(json, input, pctx(m))) : text;
          return { text: answer, usage: protocol.native.usage(json) };
        }
        const res = await adapter.chat(toCanonical(m), d, call);
        return { text: JSON.stringify(protocol.encode(res, input, pctx(m))), usage: res.usage };
      },
      trace,
    );
    routed.done();
    run.finish({
      model: routed.model,
      deployment: routed.deployment,
      status: 200,
      usage: routed.value.usage,
      // Without a stream the first token arrives with the whole answer.
      ttftMs: performance.now() - ctx.startedAt,
      attempts: routed.attempts,
      stream: false,
    });
    return new Response(routed.value.text, {
      headers: {
        "content-type": "application/json",
        ...gatewayHeaders(run, routed.model, routed.deployment, trace),
      },
    });
  } catch (e) {
    throw failed(run, model, trace, e, false);
  }
}

async function* canonicalFrames(
  events: AsyncIterable<StreamEvent>,
  encoder: StreamEncoder,
  t: Tracker,
  provider: string,
  signal: AbortSignal,
): AsyncGenerator<Uint8Array> {
  try {
    for await (const ev of events) {
      switch (ev.type) {
        case "usage":
          // Counts before the end (Anthropic's message_start, Gemini's running totals) are partial.
          if (t.finished) t.usage = ev.usage;
          else t.partialUsage = ev.usage;
          break;
        case "finish":
          t.finished = true;
          break;
        case "text_delta":
          t.token(ev.text);
          break;
        case "thinking_delta":
          // Reasoning is output too: billed if the stream is cut, and the first sign of an answer.
          if (ev.text) t.token(ev.text);
          break;
        case "tool_call_start":
          t.token(ev.name);
          break;
        case "tool_call_delta":
          t.token(ev.arguments);
          break;
        default:
          break;
      }
      for (const f of encoder.encode(ev)) yield f;
    }
    for (const f of encoder.end()) yield f;
  } catch (e) {
    const err = clientError(e, provider, signal);
    t.failed = err;
    if (!signal.aborted) for (const f of encoder.error(err)) yield f;
  }
}

type Started =
  | { kind: "native"; body: ReadableStream<Uint8Array> }
  | { kind: "events"; events: AsyncIterable<StreamEvent> };

async function streamInference<B>(
  deps: InferenceDeps,
  run: InferenceRun,
  protocol: Protocol<B>,
  input: B,
  model: ServedModel,
  toCanonical: (m: ServedModel) => CanonicalRequest,
  pctx: (m: ServedModel) => ProtocolContext,
): Promise<Response> {
  const ctx = run.ctx;
  // The client going away, or the upstream going silent mid-stream, aborts the upstream call; only
  // the first means nobody is left to read an error frame.
  const cancel = new AbortController();
  const idle = new AbortController();
  const clientGone = AbortSignal.any([ctx.signal, cancel.signal]);
  const signal = AbortSignal.any([clientGone, idle.signal]);
  const tracker = new Tracker(ctx.startedAt);
  const trace = newTrace();
  let routed: Awaited<ReturnType<Router["run"]>> & { value: Started };
  try {
    routed = await deps.router.run<Started>(
      model,
      signal,
      async (m, d, s) => {
        const adapter = deps.adapters.get(d.provider) as ProviderAdapter;
        const call = callContext(deps, m, s, trace);
        const forwarded =
          nativeWanted(protocol, m) &&
          adapter.passthrough?.(protocol.name, protocol.native.body(input, true), d, call, true);
        if (forwarded) {
          const res = await forwarded;
          if (!res.body) throw new UpstreamError("protocol", `${d.provider} returned an empty stream`, { status: 502 });
          return { kind: "native", body: res.body };
        }
        return { kind: "events", events: await adapter.chatStream(toCanonical(m), d, call) };
      },
      trace,
    );
  } catch (e) {
    throw failed(run, model, trace, e, true);
  }
  routed.done();
  const { deployment } = routed;
  const started = routed.value;
  const frames =
    started.kind === "native" && protocol.native
      ? protocol.native.frames(started.body, input, tracker, deployment.provider, clientGone, pctx(routed.model))
      : canonicalFrames(
          (started as Extract<Started, { kind: "events" }>).events,
          protocol.encoder(input, pctx(routed.model)),
          tracker,
          deployment.provider,
          clientGone,
        );

  let silent = false;
  const onIdle = () => {
    silent = true;
    // Reads of the upstream body fail with this reason: the client gets a 504 error frame.
    idle.abort(
      new UpstreamError("timeout", `${deployment.provider} sent nothing for ${routed.streamIdleMs / 1000} s`, {
        status: 504,
      }),
    );
  };
  const finish = (outcome: StreamOutcome) => {
    const complete = outcome === "complete" && !tracker.failed && !silent;
    const { usage, estimated } = tracker.billed(complete, () => promptTokensOrZero(() => toCanonical(routed.model)));
    let status = tracker.failed?.status ?? 200;
    let errorCode = tracker.failed?.code ?? null;
    if (silent) {
      status = 504;
      errorCode = "upstream_timeout";
    } else if (outcome === "cancelled") {
      status = 499;
      errorCode = "client_closed_request";
    }
    run.finish({
      model: routed.model,
      deployment,
      status,
      errorCode,
      usage,
      usageEstimated: estimated,
      ...(tracker.ttftMs !== undefined ? { ttftMs: tracker.ttftMs } : {}),
      attempts: routed.attempts,
      stream: true,
    });
  };
  const body = sseBody(frames, {
    heartbeatMs: deps.heartbeatMs,
    idleMs: routed.streamIdleMs,
    onIdle,
    onCancel: () => cancel.abort(new DOMException("client disconnected", "AbortError")),
    onEnd: finish,
  });
  return new Response(body, {
    headers: { ...SSE_HEADERS, ...gatewayHeaders(run, routed.model, deployment, trace) },
  });
}
