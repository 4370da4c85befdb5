/**
 * Upstream failures, classified once so the router knows what to retry and the client gets a
 * faithful status without ever seeing a provider credential.
 */
import type { UpstreamTiming } from "./types";

export type UpstreamFailureKind = "http" | "timeout" | "connection" | "protocol";

export class UpstreamError extends Error {
  readonly kind: UpstreamFailureKind;
  /** The upstream HTTP status for `http` failures. */
  readonly status: number;
  readonly retryAfterMs: number | undefined;
  /** The provider's own error type or status string, when it gave one. */
  readonly upstreamType: string | undefined;
  /** A `connection` failure after the upstream had answered: it dropped mid-body or mid-stream. */
  readonly dropped: boolean;

  constructor(
    kind: UpstreamFailureKind,
    message: string,
    opts: { status?: number; retryAfterMs?: number; upstreamType?: string; dropped?: boolean } = {},
  ) {
    super(message);
    this.name = "UpstreamError";
    this.kind = kind;
    this.status = opts.status ?? 0;
    this.retryAfterMs = opts.retryAfterMs;
    this.upstreamType = opts.upstreamType;
    this.dropped = opts.dropped ?? false;
  }

  /** Worth another attempt (same or another deployment): rate limits, overload, 5xx, timeouts, resets. */
  get retryable(): boolean {
    if (this.kind === "timeout" || this.kind === "connection") return true;
    if (this.kind === "protocol") return false;
    return this.status === 408 || this.status === 409 || this.status === 429 || this.status >= 500;
  }
}

/** `retry-after` (seconds or HTTP date), `retry-after-ms`, or Google's RetryInfo `retryDelay: "17s"`. */
export function retryAfterMs(headers: Headers, body?: unknown): number | undefined {
  const ms = headers.get("retry-after-ms");
  if (ms !== null && /^\d+(\.\d+)?$/.test(ms)) return Math.round(Number(ms));
  const ra = headers.get("retry-after");
  if (ra !== null) {
    if (/^\d+(\.\d+)?$/.test(ra.trim())) return Math.round(Number(ra) * 1000);
    const at = Date.parse(ra);
    if (!Number.isNaN(at)) return Math.max(0, at - Date.now());
  }
  const details = (body as { error?: { details?: { retryDelay?: unknown }[] } } | undefined)?.error?.details;
  if (Array.isArray(details)) {
    for (const d of details) {
      if (typeof d?.retryDelay === "string") {
        const m = /^(\d+(?:\.\d+)?)s$/.exec(d.retryDelay);
        if (m) return Math.round(Number(m[1]) * 1000);
      }
    }
  }
  return undefined;
}

/** The message and type from any provider's error body: OpenAI, Anthropic, Google or AWS shapes. */
export function describeUpstreamBody(body: unknown): { message?: string; type?: string } {
  if (!body || typeof body !== "object") return {};
  const b = body as Record<string, unknown>;
  const err = (b.error && typeof b.error === "object" ? b.error : b) as Record<string, unknown>;
  const message = [err.message, err.Message, b.message, b.Message].find((m) => typeof m === "string") as
    | string
    | undefined;
  const type = [err.type, err.status, err.code, b.__type, b.type].find((t) => typeof t === "string") as
    | string
    | undefined;
  return { message, type };
}

/** Builds the error for a non-2xx upstream response, with credentials scrubbed from its message. */
export async function upstreamHttpError(
  res: Response,
  provider: string,
  secrets: (string | undefined)[],
): Promise<UpstreamError> {
  const text = await res.text().catch(() => "");
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const described = describeUpstreamBody(body);
  const message = described.message;
  // AWS puts the error type in a header (`ThrottlingException:http://...`), not in the body.
  const type = described.type ?? res.headers.get("x-amzn-errortype")?.split(":")[0];
  const raw = message ?? (text.slice(0, 500) || res.statusText || "no error message");
  return new UpstreamError("http", `${provider} returned ${res.status}: ${scrub(raw, secrets)}`, {
    status: res.status,
    retryAfterMs: retryAfterMs(res.headers, body),
    upstreamType: type,
  });
}

/** Removes credentials (and anything shaped like an API key) from text that may reach a client. */
export function scrub(text: string, secrets: (string | undefined)[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 6) out = out.split(s).join("***");
  return out.replace(/\b(sk|pk|AKIA|ASIA|AIza)[-_A-Za-z0-9*]{12,}/g, "***");
}

/**
 * Wraps fetch: network failures and aborts become UpstreamErrors; the caller handles statuses. The
 * wait for the response's headers is added to `ctx.timing` (the gateway's overhead excludes it).
 */
export async function upstreamFetch(
  url: string,
  init: RequestInit,
  provider: string,
  ctx: { signal: AbortSignal; timing?: UpstreamTiming | undefined },
): Promise<Response> {
  const started = performance.now();
  try {
    return await fetch(url, { ...init, signal: ctx.signal });
  } catch (e) {
    throw fetchFailure(e, provider, ctx.signal);
  } finally {
    if (ctx.timing) ctx.timing.upstreamMs += performance.now() - started;
  }
}

/** The body of a 2xx answer as JSON; a cut connection is a dropped connection, not a bad body. */
export async function readUpstreamJson<T>(res: Response, provider: string, signal: AbortSignal): Promise<T> {
  let text: string;
  try {
    text = await res.text();
  } catch (e) {
    throw fetchFailure(e, provider, signal, "body");
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamError("protocol", `${provider} returned a body that is not JSON`, { status: 502 });
  }
}

/**
 * A failed fetch, or a failed read of what it returned (`during: "body"`: the upstream had answered
 * and then dropped the connection, mid-body or mid-stream), as an UpstreamError.
 */
export function fetchFailure(
  e: unknown,
  provider: string,
  signal: AbortSignal,
  during: "request" | "body" = "request",
): UpstreamError {
  if (e instanceof UpstreamError) return e;
  if (signal.aborted) {
    const reason: unknown = signal.reason;
    // The gateway's own reasons (a stream that went silent) say what happened.
    if (reason instanceof UpstreamError) return reason;
    if (reason instanceof DOMException && reason.name === "TimeoutError") {
      return new UpstreamError("timeout", `${provider} did not answer in time`, { status: 504 });
    }
    return new UpstreamError("connection", `${provider} call aborted`, { status: 499 });
  }
  const msg = e instanceof Error ? e.message : String(e);
  if (during === "body") {
    return new UpstreamError("connection", `${provider} dropped the connection mid-answer: ${msg}`, {
      status: 502,
      dropped: true,
    });
  }
  return new UpstreamError("connection", `cannot reach ${provider}: ${msg}`, { status: 502 });
}
