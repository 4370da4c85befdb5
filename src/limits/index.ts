/**
 * The limiter: rate limits, parallel caps and budgets, exact across instances (Redis) or in one
 * process (memory). See `types.ts` for the contract.
 */
import type { Logger } from "../log";
import type { Redis } from "../redis/client";
import { type LeaseBook, MemoryLimiter, MemoryStore } from "./memory";
import { RedisLimiter } from "./redis";
import { LIMITER_DEFAULTS, type LimiterOptions } from "./types";

export { LeaseBook, MemoryLimiter, MemoryStore } from "./memory";
export { RedisLimiter } from "./redis";
export * from "./types";

export interface CreateLimiterOptions extends Partial<LimiterOptions> {
  /**
   * Redis: a shared client (`createRedis`, not closed by the limiter) or a URL (a client of its
   * own, closed by `close()`). Absent: the in-memory limiter (one instance only).
   */
  redis?: Redis | string | null;
  /** Key prefix when `redis` is a URL; default `gw`. */
  prefix?: string;
  /** Redis only: a call unanswered this long fails like an unreachable Redis; default 1 000 ms. */
  commandTimeoutMs?: number;
  log?: Logger;
  /** Memory: the clock (ms). Redis: this instance's clock, corrected to Redis's by a learned offset. */
  now?: () => number;
}

export function createLimiter(options: CreateLimiterOptions = {}): LeaseBook {
  const base: LimiterOptions = {
    windowMs: options.windowMs ?? LIMITER_DEFAULTS.windowMs,
    leaseMs: options.leaseMs ?? LIMITER_DEFAULTS.leaseMs,
  };
  if (options.redis)
    return new RedisLimiter({
      ...base,
      redis: options.redis,
      prefix: options.prefix,
      log: options.log,
      commandTimeoutMs: options.commandTimeoutMs ?? LIMITER_DEFAULTS.commandTimeoutMs,
      ...(options.now ? { localNow: options.now } : {}),
    });
  return new MemoryLimiter({ ...base, now: options.now, log: options.log, store: new MemoryStore() });
}
