/**
 * Picks deployments and survives their failures: weighted choice among healthy deployments,
 * retries with exponential backoff (honouring retry-after), cooldown of deployments that keep
 * failing, fallbacks to other models, a timeout per attempt, and deployments' own rpm/tpm. Streams
 * are retried only until the upstream accepted the call, never after the client saw a byte.
 */
import type { ServedModel } from "../catalog/catalog";
import { GatewayError } from "../http/errors";
import type { Logger } from "../log";
import { UpstreamError } from "../providers/errors";
import type { Deployment } from "../providers/types";
import { DeploymentLimits } from "./deployment-limits";

export interface RouterOptions {
  numRetries: number;
  backoffMs: number;
  maxRetryWaitMs: number;
  allowedFails: number;
  cooldownMs: number;
  timeoutMs: number;
  /** Silence allowed on a started stream; absent: the attempt's timeout. */
  streamIdleTimeoutMs?: number;
}

export const ROUTER_DEFAULTS: RouterOptions = {
  numRetries: 2,
  backoffMs: 200,
  maxRetryWaitMs: 10_000,
  allowedFails: 3,
  cooldownMs: 30_000,
  timeoutMs: 600_000,
};

/** One try against one deployment. `signal` fires on client disconnect or the attempt's timeout. */
export type Attempt<T> = (model: ServedModel, deployment: Deployment, signal: AbortSignal) => Promise<T>;

export interface Routed<T> {
  value: T;
  model: ServedModel;
  deployment: Deployment;
  attempts: number;
  /** How long the started stream may go silent before it is ended (the deployment's setting). */
  streamIdleMs: number;
  /** Stops the attempt's timeout (call once a stream has started); client disconnects still abort. */
  done(): void;
}

/** What the router did for one request, filled in as it goes, so a failed request can be logged too. */
export interface RouteTrace {
  attempts: number;
  /** The model and deployment of the latest attempt. */
  model?: ServedModel;
  deployment?: Deployment;
  /** Time spent waiting between attempts (backoff, retry-after). */
  waitedMs: number;
}

interface Health {
  consecutiveFails: number;
  coolUntil: number;
}

/** Beyond this many health records, the ones not cooling down are dropped (wildcard names come and go). */
const HEALTH_PRUNE_AT = 4096;

export class Router {
  private readonly health = new Map<string, Health>();
  private readonly limits = new DeploymentLimits();

  constructor(
    private readonly resolveModel: (name: string) => ServedModel | undefined,
    private readonly opts: RouterOptions,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
    private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void> = abortableSleep,
  ) {}

  /**
   * Runs `attempt` against the model's deployments, then its fallbacks, until one succeeds.
   * The timeout covers each attempt until it resolves; for a stream the caller keeps reading after
   * (and ends it after `streamIdleMs` of upstream silence). `trace` follows the attempts.
   */
  async run<T>(
    model: ServedModel,
    clientSignal: AbortSignal,
    attempt: Attempt<T>,
    trace: RouteTrace = { attempts: 0, waitedMs: 0 },
  ): Promise<Routed<T>> {
    const chain = [model, ...model.fallbacks.map((f) => this.resolveModel(f)).filter((m): m is ServedModel => !!m)];
    let lastError: unknown;
    let attempts = 0;
    // Until a deployment at its rpm/tpm takes requests again (the shortest such wait seen).
    let limitedMs = Number.POSITIVE_INFINITY;
    for (let c = 0; c < chain.length; c++) {
      const current = chain[c] as ServedModel;
      const isLastModel = c === chain.length - 1;
      const tries = 1 + (current.maxRetries ?? this.opts.numRetries);
      const tried = new Set<string>();
      for (let t = 0; t < tries; t++) {
        if (clientSignal.aborted) throw clientGone();
        const now = this.now();
        const deployment = this.pick(current, tried, isLastModel, now);
        if (!deployment) {
          limitedMs = Math.min(limitedMs, this.limitedFor(current, now));
          break;
        }
        tried.add(deployment.id);
        this.limits.request(deployment, now);
        attempts++;
        trace.attempts = attempts;
        trace.model = current;
        trace.deployment = deployment;
        // The most specific timeout wins; the catalog folded provider and model settings into the deployment.
        const ms = deployment.timeoutMs ?? current.timeoutMs ?? this.opts.timeoutMs;
        const { signal, clear } = attemptSignal(clientSignal, ms);
        try {
          const value = await attempt(current, deployment, signal);
          this.succeeded(deployment);
          const streamIdleMs =
            deployment.streamIdleTimeoutMs ?? current.streamIdleTimeoutMs ?? this.opts.streamIdleTimeoutMs ?? ms;
          return { value, model: current, deployment, attempts, streamIdleMs, done: clear };
        } catch (e) {
          clear();
          lastError = e;
          if (clientSignal.aborted) throw clientGone();
          if (!(e instanceof UpstreamError)) throw e;
          const deploymentProblem = e.kind === "http" && [401, 403, 404].includes(e.status);
          if (!e.retryable && !deploymentProblem) throw toClientError(e, deployment);
          this.failed(deployment, e);
          this.log.warn("upstream attempt failed", {
            model: current.name,
            deployment: deployment.id,
            kind: e.kind,
            status: e.status,
            attempt: attempts,
          });
          if (t === tries - 1) break;
          // retry-after speaks for the deployment that said it: another healthy one is tried after
          // the normal backoff; only a retry of the same one waits that long (or is not made).
          const elsewhere = this.hasHealthyUntried(current, tried);
          const wait = elsewhere ? this.backoff(t) : Math.max(this.backoff(t), e.retryAfterMs ?? 0);
          if (wait > this.opts.maxRetryWaitMs) break;
          trace.waitedMs += wait;
          await this.sleep(wait, clientSignal);
        }
      }
    }
    if (lastError instanceof UpstreamError) throw toClientError(lastError);
    if (lastError) throw lastError;
    if (limitedMs < Number.POSITIVE_INFINITY) {
      throw new GatewayError(429, `Every deployment of '${model.name}' is at its requests or tokens per minute limit`, {
        code: "deployment_rate_limited",
        type: "rate_limit_error",
        headers: { "retry-after": String(Math.max(1, Math.ceil(limitedMs / 1000))) },
      });
    }
    throw new GatewayError(503, `No deployment of '${model.name}' is available right now`, {
      code: "no_deployment_available",
      type: "service_unavailable",
    });
  }

  /** Counts the tokens a finished call used against its deployment's tpm (nothing to do without one). */
  recordTokens(d: Deployment, tokens: number): void {
    if (d.tpm !== undefined) this.limits.tokens(d, tokens, this.now());
  }

  /**
   * Weighted random among healthy deployments not yet tried; cooled-down ones only as a last
   * resort. Deployments that used up their rpm/tpm this minute are never picked.
   */
  private pick(model: ServedModel, tried: Set<string>, lastResort: boolean, now: number): Deployment | undefined {
    const open = (d: Deployment) => this.limits.blockedFor(d, now) === 0;
    const healthy = model.deployments.filter((d) => (this.health.get(d.id)?.coolUntil ?? 0) <= now && open(d));
    const fresh = healthy.filter((d) => !tried.has(d.id));
    const pool = fresh.length ? fresh : healthy;
    if (pool.length) return this.weighted(pool);
    if (!lastResort) return undefined;
    // Everything is cooling down and there is nowhere else to go: try the one that recovers first.
    return model.deployments
      .filter(open)
      .sort((a, b) => (this.health.get(a.id)?.coolUntil ?? 0) - (this.health.get(b.id)?.coolUntil ?? 0))[0];
  }

  /** ms until one of the model's deployments that is at its rpm/tpm takes requests again (Infinity: none is). */
  private limitedFor(model: ServedModel, now: number): number {
    let ms = Number.POSITIVE_INFINITY;
    for (const d of model.deployments) {
      const blocked = this.limits.blockedFor(d, now);
      if (blocked > 0 && blocked < ms) ms = blocked;
    }
    return ms;
  }

  private hasHealthyUntried(model: ServedModel, tried: Set<string>): boolean {
    const now = this.now();
    return model.deployments.some(
      (d) => !tried.has(d.id) && (this.health.get(d.id)?.coolUntil ?? 0) <= now && this.limits.blockedFor(d, now) === 0,
    );
  }

  private weighted(pool: Deployment[]): Deployment {
    const total = pool.reduce((s, d) => s + d.weight, 0);
    let r = this.random() * total;
    for (const d of pool) {
      r -= d.weight;
      if (r < 0) return d;
    }
    return pool[pool.length - 1] as Deployment;
  }

  private backoff(retry: number): number {
    const cap = this.opts.backoffMs * 2 ** retry;
    return cap / 2 + this.random() * (cap / 2);
  }

  private succeeded(d: Deployment): void {
    if (this.health.has(d.id)) this.health.delete(d.id);
  }

  private failed(d: Deployment, e: UpstreamError): void {
    const h = this.health.get(d.id) ?? { consecutiveFails: 0, coolUntil: 0 };
    h.consecutiveFails++;
    const rateLimited = e.kind === "http" && e.status === 429;
    if (rateLimited || h.consecutiveFails >= this.opts.allowedFails) {
      h.coolUntil = this.now() + Math.max(this.opts.cooldownMs, rateLimited ? (e.retryAfterMs ?? 0) : 0);
      h.consecutiveFails = 0;
      this.log.warn("deployment cooled down", { deployment: d.id, until: new Date(h.coolUntil).toISOString() });
    }
    if (!this.health.has(d.id) && this.health.size >= HEALTH_PRUNE_AT) {
      const now = this.now();
      for (const [id, x] of this.health) if (x.coolUntil <= now) this.health.delete(id);
    }
    this.health.set(d.id, h);
  }

  /** For tests and readiness: whether a deployment is cooling down now. */
  isCoolingDown(deploymentId: string): boolean {
    return (this.health.get(deploymentId)?.coolUntil ?? 0) > this.now();
  }
}

function attemptSignal(client: AbortSignal, ms: number): { signal: AbortSignal; clear: () => void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(client.reason);
  if (client.aborted) controller.abort(client.reason);
  else client.addEventListener("abort", onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new DOMException("upstream timeout", "TimeoutError")), ms);
  // Only the timer is cleared: a stream that has started must still follow a client disconnect.
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (ms <= 0 || signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function clientGone(): GatewayError {
  return new GatewayError(499, "Client closed the request", { code: "client_closed_request", type: "client_closed" });
}

/**
 * What the client sees of an upstream failure: the status stays faithful (400 stays 400, 429 stays
 * 429 with retry-after, 5xx stays 5xx, Anthropic's 529 becomes 503), except that the upstream
 * rejecting the gateway's own credentials is a 502 that says so without any credential in it.
 */
export function toClientError(e: UpstreamError, deployment?: Deployment): GatewayError {
  const where = deployment ? ` (deployment ${deployment.id})` : "";
  switch (e.kind) {
    case "timeout":
      return new GatewayError(504, `The upstream provider did not answer in time${where}`, {
        code: "upstream_timeout",
        type: "server_error",
      });
    case "connection":
      return new GatewayError(
        502,
        e.dropped
          ? `The upstream provider dropped the connection before its answer was complete${where}`
          : `Cannot reach the upstream provider${where}`,
        {
          code: "upstream_unreachable",
          type: "server_error",
        },
      );
    case "protocol":
      return new GatewayError(502, `The upstream provider sent an invalid response: ${e.message}`, {
        code: "bad_upstream_response",
        type: "server_error",
      });
    case "http":
      break;
  }
  const retryAfter =
    e.retryAfterMs !== undefined ? { "retry-after": String(Math.max(1, Math.ceil(e.retryAfterMs / 1000))) } : undefined;
  if (e.status === 401 || e.status === 403) {
    return new GatewayError(502, `The upstream provider rejected the gateway's credentials (${e.status})${where}`, {
      code: "upstream_auth_error",
      type: "server_error",
    });
  }
  if (e.status === 429) {
    return new GatewayError(429, e.message, {
      code: "upstream_rate_limited",
      type: "rate_limit_error",
      ...(retryAfter ? { headers: retryAfter } : {}),
    });
  }
  if (e.status === 529)
    return new GatewayError(503, e.message, {
      code: "upstream_overloaded",
      type: "server_error",
      ...(retryAfter ? { headers: retryAfter } : {}),
    });
  if (e.status >= 500)
    return new GatewayError(e.status, e.message, {
      code: "upstream_error",
      type: "server_error",
      ...(retryAfter ? { headers: retryAfter } : {}),
    });
  if (e.status === 404)
    return new GatewayError(404, e.message, { code: "upstream_not_found", type: "invalid_request_error" });
  return new GatewayError(e.status >= 400 ? e.status : 502, e.message, {
    code: e.upstreamType ?? "upstream_error",
    type: "invalid_request_error",
  });
}
