/**
 * The shared (Redis) limiter with a policy for when Redis cannot be reached (or does not answer
 * within the command timeout):
 * - `fail_open` (default): serve, enforcing limits per instance in memory meanwhile, and log it;
 *   back to Redis as soon as it answers, without a restart;
 * - `fail_closed`: refuse inference with a 503 until Redis answers again.
 * A lease is always settled by the limiter that admitted it.
 *
 * Spend that only the fallback counted (fail_open), and settlements to Redis that failed past
 * their retries, are kept and applied to Redis once it answers again (`replay`, `settleAgain`),
 * each request once, so the shared budget counters do not forget the outage.
 */
import { GatewayError } from "../http/errors";
import type { Logger } from "../log";
import { type LeaseBook, MemoryLimiter, money, spendWindow, subjects } from "./memory";
import type { Admission, AdmissionRequest, Lease, Limiter, ReplayEntry, Settlement, SettleResult } from "./types";

export type RedisFailureMode = "fail_open" | "fail_closed";

const LOG_EVERY_MS = 10_000;
/** Bound on the spend kept for Redis during a long outage (the oldest is dropped beyond it, loudly). */
export const MAX_REPLAY_ENTRIES = 100_000;

/** Whether a request's spend goes to some live counter. */
function countsSpend(req: AdmissionRequest): boolean {
  return subjects(req).some((l, i) => spendWindow(l, i === 1) !== null);
}

export class ResilientLimiter implements Limiter {
  readonly kind = "redis" as const;
  /** Leases admitted by the fallback, with the limiter time their outage began. */
  private readonly local = new WeakMap<Lease, number>();
  private lastLog = 0;
  private suppressed = 0;
  /** Limiter time of the last answer from Redis (the start of an outage that follows). */
  private lastOk: number;
  /** Set while Redis is failing: when the outage began. */
  private outageSince: number | undefined;
  private replays: ReplayEntry[] = [];
  private unsettled: { lease: Lease; actual: Settlement }[] = [];
  private catchingUp: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly shared: LeaseBook,
    private readonly fallback: Limiter,
    private readonly mode: RedisFailureMode,
    private readonly log: Logger,
  ) {
    this.lastOk = shared.now();
  }

  async admit(req: AdmissionRequest): Promise<Admission> {
    let a: Admission;
    try {
      a = await this.shared.admit(req);
    } catch (e) {
      this.complain(e);
      if (this.outageSince === undefined) {
        this.outageSince = this.lastOk;
        // Each outage starts the fallback afresh: counters left from an earlier outage missed all
        // the spend since, and a missing counter is seeded from the database.
        if (this.fallback instanceof MemoryLimiter && this.fallback.inFlight === 0) this.fallback.store.clear();
      }
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
      const local = await this.fallback.admit(req);
      if (local.ok) this.local.set(local.lease, this.outageSince);
      return local;
    }
    this.lastOk = this.shared.now();
    if (this.outageSince !== undefined) {
      this.outageSince = undefined;
      this.log.info("Redis answers again: limits shared across instances again");
    }
    if (this.replays.length > 0 || this.unsettled.length > 0) void this.catchUp();
    return a;
  }

  settle(lease: Lease, actual: Settlement): Promise<SettleResult> {
    const since = this.local.get(lease);
    if (since === undefined) {
      return this.shared.settle(lease, actual).catch((e: unknown) => {
        this.keep(this.unsettled, { lease, actual });
        throw e;
      });
    }
    return this.fallback.settle(lease, actual).then((r) => {
      if (money(actual.cost) > 0 && countsSpend(lease.request)) {
        this.keep(this.replays, { request: lease.request, cost: money(actual.cost), since });
        if (this.outageSince === undefined) void this.catchUp();
      }
      return r;
    });
  }

  private keep<T>(list: T[], item: T): void {
    list.push(item);
    if (list.length > MAX_REPLAY_ENTRIES) {
      list.splice(0, list.length - MAX_REPLAY_ENTRIES);
      this.log.error("Redis unreachable for long: the oldest outage spend will not reach the live counters", {
        kept: MAX_REPLAY_ENTRIES,
      });
    }
  }

  /**
   * Applies what Redis missed: spend counted by the fallback, settlements that failed. One run at
   * a time; what fails stays for the next run (each request is still applied at most once).
   */
  catchUp(): Promise<void> {
    if (this.catchingUp) return this.catchingUp;
    if (this.closed || (this.replays.length === 0 && this.unsettled.length === 0)) return Promise.resolve();
    const run = async () => {
      const replays = this.replays.splice(0);
      const unsettled = this.unsettled.splice(0);
      let replayed = replays.length;
      try {
        await this.shared.replay(replays);
      } catch (e) {
        replayed = 0;
        this.replays.unshift(...replays);
        this.log.warn("outage spend not yet replayed to Redis; will retry", {
          requests: replays.length,
          error: (e as Error).message,
        });
      }
      const failed = (
        await Promise.all(
          unsettled.map((u) =>
            this.shared.settleAgain(u.lease, u.actual).then(
              () => undefined,
              () => u,
            ),
          ),
        )
      ).filter((u) => u !== undefined);
      this.unsettled.unshift(...failed);
      if (replayed > 0 || unsettled.length > failed.length) {
        this.log.info("outage spend applied to Redis", {
          replayed,
          settled: unsettled.length - failed.length,
        });
      }
    };
    this.catchingUp = run().finally(() => {
      this.catchingUp = undefined;
    });
    return this.catchingUp;
  }

  publishVersion(scope: string, which: "key" | "team", id: string, version: number): Promise<void> {
    return this.shared.publishVersion(scope, which, id, version);
  }

  now(): number {
    return this.shared.now();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.catchingUp) await this.catchingUp;
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
