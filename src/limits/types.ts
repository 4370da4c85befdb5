/**
 * The limiter contract: one atomic admission before the upstream call and one settlement after it.
 * Two implementations keep it: Redis (shared by every gateway instance; Lua scripts, Redis's clock)
 * and process memory (the embedded default). One contract test suite runs against both.
 *
 * Every counter of one request lives under the request's `scope` (its team), so a single Lua call
 * can touch them all and Redis Cluster keeps them in one slot (`{hash-tag}` = the scope).
 */

/** A spend budget: blocks once `spent + reserved` has reached `limit`. */
export interface BudgetCheck {
  limit: number;
  /**
   * Identifies the budget window: a new id starts a new counter at zero. Key and team windows come
   * from `budget_reset_at`; per-model windows are fixed periods aligned to the epoch.
   */
  windowId: string;
  /** When the window ends (epoch ms); counters may be dropped after it. */
  windowEndsAt: number;
  /**
   * Spend already recorded durably for this window, used only when the live counter does not exist
   * (first use, or a Redis that lost its data). See `AdmissionRequest.provisionalSeeds`.
   */
  seed: number;
}

export interface Limits {
  /** Requests per minute; null or undefined: no limit. */
  rpm?: number | null;
  /** Tokens per minute. */
  tpm?: number | null;
  /** Concurrent requests. */
  maxParallel?: number | null;
  budget?: BudgetCheck | null;
  /** Soft budget (alert threshold) on the same window as `budget`. */
  softBudget?: number | null;
}

export interface Subject extends Limits {
  id: string;
  /**
   * The record's version as the caller knows it (its `updated_at` in ms). When a newer version was
   * published (`publishVersion`), admission answers `stale` so the caller reloads the record.
   */
  version: number;
}

export interface AdmissionRequest {
  /** Hash-tag scope of every counter touched: the team id ("_master" for the master key). */
  scope: string;
  /** Unique per request: the parallel-lease id. */
  requestId: string;
  key: Subject;
  /** Limits of this key on this model (`model_rpm_limit`, `model_tpm_limit`, `model_max_budget`). */
  keyModel: Limits & { model: string };
  team: Subject;
  /** Reserved before the call and reconciled by `settle`: prompt estimate + output cap, and its cost. */
  estimate: { tokens: number; cost: number };
  /**
   * The seeds come from cached records: when a spend counter they would create does not exist,
   * admission answers `unseeded` (writing nothing) and the caller retries with seeds read fresh
   * from the durable record. Absent or false: missing counters are created from the seeds given.
   */
  provisionalSeeds?: boolean;
}

export type LimitKind = "rpm" | "tpm" | "parallel" | "budget";
export type LimitScope = "key" | "model" | "team";

/** What rate-limit headers report: the tightest requests and tokens limits that applied. */
export interface RateState {
  requests?: { limit: number; remaining: number; resetMs: number };
  tokens?: { limit: number; remaining: number; resetMs: number };
}

/** Handle of an admitted request; pass it to `settle` exactly once. */
export interface Lease {
  readonly requestId: string;
  readonly request: AdmissionRequest;
  /** Redis or memory time (ms) at admission. */
  readonly admittedAt: number;
}

export type Admission =
  | { ok: true; lease: Lease; rate: RateState }
  /** A newer version of the key or team was published: reload it and try again. */
  | { ok: false; stale: true; unseeded?: undefined; which: "key" | "team" }
  /** A spend counter must be created and the seeds were provisional: read them fresh, try again. */
  | { ok: false; stale: false; unseeded: true }
  | Refusal;

/** A limit was reached. */
export interface Refusal {
  ok: false;
  stale: false;
  unseeded?: undefined;
  kind: LimitKind;
  scope: LimitScope;
  limit: number;
  retryAfterMs: number;
  rate: RateState;
}

export interface Settlement {
  /** Actual tokens (input + output) and cost; replace the reservation. */
  tokens: number;
  cost: number;
}

export interface SettleResult {
  /** Live spend of the key's and team's current budget windows after this request. */
  keySpend: number;
  teamSpend: number;
  /** This settlement crossed the key's soft budget, first time in the window (alert once). */
  keySoftBudgetCrossed: boolean;
}

export interface Limiter {
  readonly kind: "redis" | "memory";
  /** One round trip: version check, rpm/tpm/parallel/budget checks, then counts and reservations. */
  admit(req: AdmissionRequest): Promise<Admission>;
  /**
   * One round trip: releases the parallel slot and the cost reservation, replaces the token
   * reservation with the actual value, adds the spend (key, key+model, team). Counted exactly
   * once per lease, even when retried after a lost reply; safe after failures (actual zero). A
   * failed call is retried with backoff (bounded) before it rejects.
   */
  settle(lease: Lease, actual: Settlement): Promise<SettleResult>;
  /** Records that a key or team changed, so admissions holding an older version answer `stale`. */
  publishVersion(scope: string, which: "key" | "team", id: string, version: number): Promise<void>;
  /**
   * The limiter's clock (ms): Redis's own time (this instance's clock corrected by the offset
   * learned from every reply) or the memory limiter's clock. Budget windows are picked with it,
   * so instances with skewed clocks agree on them.
   */
  now(): number;
  close(): Promise<void>;
}

/**
 * Spend a request made while the shared limiter could not be reached (counted only by the
 * per-instance fallback), to add to the shared counters once it answers again.
 */
export interface ReplayEntry {
  request: AdmissionRequest;
  cost: number;
  /**
   * Limiter time when the outage began. Only counters that already existed then get the spend: a
   * counter created since was seeded from the durable record, which has (or will have) it.
   */
  since: number;
}

/** Options shared by both implementations. */
export interface LimiterOptions {
  /** Length of the rpm/tpm window; 60 000 in production, shorter in tests. */
  windowMs: number;
  /**
   * What an unsettled request holds (parallel slot, cost reservation, its pending settlement) is
   * dropped this long after the last renewal, so a dead instance's requests free what they held.
   * Renewed every leaseMs/3 while the request runs.
   */
  leaseMs: number;
  /** Waits before each retry of a failed settlement (default 100 ms doubling to 4 s: ~8 s in all). */
  settleRetryDelaysMs?: readonly number[];
}

export const LIMITER_DEFAULTS = {
  windowMs: 60_000,
  leaseMs: 120_000,
  commandTimeoutMs: 1_000,
  settleRetryDelaysMs: [100, 250, 500, 1_000, 2_000, 4_000] as readonly number[],
} as const;
