/**
 * The shared (Redis) limiter with a policy for when Redis cannot be reached:
 * - `fail_open` (default): serve, enforcing limits per instance in memory meanwhile, and log it;
 *   back to Redis as soon as it answers, without a restart;
 * - `fail_closed`: refuse inference with a 503 until Redis answers again.
 * A lease is always settled by the limiter that admitted it.
 */
import { GatewayError } from "../http/errors";
import type { Logger } from "../log";
import type { Admission, AdmissionRequest, Lease, Limiter, Settlement, SettleResult } from "./types";

export type RedisFailureMode = "fail_open" | "fail_closed";

const LOG_EVERY_MS = 10_000;

export class ResilientLimiter implements Limiter {
  readonly kind = "redis" as const;
  private readonly local = new WeakSet<Lease>();
  private lastLog = 0;
  private suppressed = 0;

  constructor(
    private readonly shared: Limiter,
    private readonly fallback: Limiter,
    private readonly mode: RedisFailureMode,
    private readonly log: Logger,
  ) {}

  async admit(req: AdmissionRequest): Promise<Admission> {
    try {
      return await this.shared.admit(req);
    } catch (e) {
      this.complain(e);
      if (this.mode === "fail_closed") {
        throw new GatewayError(
          503,
          "Rate limits cannot be checked right now (the limits store is unreachable); retry shortly",
          {
            code: "limits_unavailable",
            type: "service_unavailable",
            headers: { "retry-after": "1" },
          },
        );
      }
      const a = await this.fallback.admit(req);
      if (a.ok) this.local.add(a.lease);
      return a;
    }
  }

  settle(lease: Lease, actual: Settlement): Promise<SettleResult> {
    return this.local.has(lease) ? this.fallback.settle(lease, actual) : this.shared.settle(lease, actual);
  }

  publishVersion(scope: string, which: "key" | "team", id: string, version: number): Promise<void> {
    return this.shared.publishVersion(scope, which, id, version);
  }

  now(): number {
    return this.shared.now();
  }

  async close(): Promise<void> {
    await Promise.all([this.shared.close(), this.fallback.close()]);
  }

  /** Loud, but not one line per request. */
  private complain(e: unknown): void {
    const now = Date.now();
    if (now - this.lastLog < LOG_EVERY_MS) {
      this.suppressed++;
      return;
    }
    this.log.error(
      this.mode === "fail_open"
        ? "Redis unreachable: limits enforced per instance until it is back (fail_open)"
        : "Redis unreachable: inference refused until it is back (fail_closed)",
      { error: (e as Error).message, similar_since_last: this.suppressed },
    );
    this.lastLog = now;
    this.suppressed = 0;
  }
}
