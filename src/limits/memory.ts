/**
 * The limiter in process memory: the embedded default for a single gateway instance.
 *
 * It is a line-by-line port of `scripts/admit.lua` and `scripts/settle.lua` over a small key-value
 * store with expiries (`MemoryStore`), using the same key names, so both implementations keep one
 * semantics (the contract suite runs against both). Each call runs synchronously, hence atomically.
 * The clock is injectable (`now`).
 *
 * This module also holds what both implementations share: request normalisation and `LeaseBook`,
 * the bookkeeping of unsettled leases (renewal every leaseMs/3, settle-once with retries, close).
 */
import { type Logger, silentLogger } from "../log";
import {
  type Admission,
  type AdmissionRequest,
  type Lease,
  LIMITER_DEFAULTS,
  type Limiter,
  type LimiterOptions,
  type LimitKind,
  type LimitScope,
  type Limits,
  type RateState,
  type ReplayEntry,
  type Settlement,
  type SettleResult,
  type Subject,
} from "./types";

/** An unused budget counter lives this long (then it is re-seeded from the durable spend). */
export const BUDGET_IDLE_MS = 30 * 24 * 3_600_000;
/** Budget counters outlive their window by this much. */
export const BUDGET_MARGIN_MS = 3_600_000;
/** The in-flight set of a scope and its reservation records: refreshed by every admission. */
export const LIVE_TTL_MS = BUDGET_IDLE_MS + BUDGET_MARGIN_MS;
/** Published versions are kept this long after the last publication. */
export const VERSION_TTL_MS = 7 * 24 * 3_600_000;
/** `retryAfterMs` of a parallel-cap refusal. */
export const PARALLEL_RETRY_MS = 1_000;
/** Expired in-flight entries released per admission at most (bounded work per call). */
export const PURGE_BATCH = 100;

const SCOPES: readonly LimitScope[] = ["team", "key", "model"];

// ---------------------------------------------------------------------------------------------
// Shared by both implementations

/** Spend tracking of one subject: its budget window, and whether it blocks or alerts. */
export interface SpendWindow {
  id: string;
  /** Blocking limit; null: tracked only (a soft budget without a budget). */
  limit: number | null;
  /** Window end in ms; 0: never ends. */
  endsAt: number;
  seed: number;
  soft: number | null;
}

function finite(n: number | null | undefined): n is number {
  return typeof n === "number" && Number.isFinite(n);
}

/** Token counts are whole and non-negative; costs non-negative. */
export function wholeTokens(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.ceil(n) : 0;
}
export function money(n: number): number {
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/**
 * The spend window of a subject. A budget with an infinite limit tracks spend on its window
 * without blocking (a soft budget without a budget); a soft budget with no budget at all is
 * tracked on a window that never ends, seeded at 0.
 */
export function spendWindow(l: Limits, soft: boolean): SpendWindow | null {
  const b = l.budget;
  const softBudget = soft && finite(l.softBudget) ? l.softBudget : null;
  if (!b) return softBudget === null ? null : { id: "all", limit: null, endsAt: 0, seed: 0, soft: softBudget };
  const endsAt = finite(b.windowEndsAt) && b.windowEndsAt < Number.MAX_SAFE_INTEGER ? b.windowEndsAt : 0;
  return { id: b.windowId, limit: finite(b.limit) ? b.limit : null, endsAt, seed: money(b.seed), soft: softBudget };
}

/** The limits of a request, in the order the checks run (team, key, model). */
export function subjects(req: AdmissionRequest): readonly [Subject | Limits, Subject | Limits, Limits] {
  return [req.team, req.key, req.keyModel];
}

export function hasParallel(req: AdmissionRequest): boolean {
  return finite(req.team.maxParallel) || finite(req.key.maxParallel);
}

/**
 * Whether settling this request counts anything (tokens or spend): such a request is entered in
 * its scope's in-flight set at admission, and its settlement counts only when it takes it out
 * again, so a settlement retried after a lost reply counts once.
 */
export function tracked(req: AdmissionRequest): boolean {
  return subjects(req).some((l, i) => finite(l.tpm) || spendWindow(l, i === 1) !== null);
}

/** Whether admission reserves the estimated cost on some budget (released on settle or expiry). */
export function reserves(req: AdmissionRequest): boolean {
  return money(req.estimate.cost) > 0 && subjects(req).some((l) => spendWindow(l, false)?.limit != null);
}

/** Whether an unsettled lease holds anything in the store that must be renewed while it runs. */
export function holdsLease(req: AdmissionRequest): boolean {
  return hasParallel(req) || tracked(req);
}

export const num = (n: number | null | undefined): number | null => (finite(n) ? n : null);

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Unsettled leases of one limiter: renews what they hold every leaseMs/3 (so long streams keep
 * their slots and reservations, while those of a dead instance expire), settles each lease once
 * (retrying a failed settlement with backoff), drains on close.
 */
export abstract class LeaseBook implements Limiter {
  abstract readonly kind: "redis" | "memory";
  protected readonly live = new Map<string, Lease>();
  private readonly settled = new WeakMap<Lease, Promise<SettleResult>>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly retryDelays: readonly number[];
  private renewing: Promise<void> | undefined;
  protected closed = false;

  constructor(
    protected readonly options: LimiterOptions,
    protected readonly log: Logger,
  ) {
    if (!(options.windowMs > 0) || !(options.leaseMs > 0)) throw new Error("windowMs and leaseMs must be positive");
    this.retryDelays = options.settleRetryDelaysMs ?? LIMITER_DEFAULTS.settleRetryDelaysMs;
    this.timer = setInterval(() => void this.renewLeases(), Math.max(1, Math.floor(options.leaseMs / 3)));
    this.timer.unref?.();
  }

  protected abstract doAdmit(req: AdmissionRequest): Promise<Admission>;
  protected abstract doSettle(lease: Lease, actual: Settlement): Promise<SettleResult>;
  protected abstract doRenew(leases: readonly Lease[]): Promise<void>;
  abstract publishVersion(scope: string, which: "key" | "team", id: string, version: number): Promise<void>;
  abstract now(): number;
  /** Adds spend counted elsewhere meanwhile (see `ReplayEntry`); each request at most once. */
  abstract replay(entries: readonly ReplayEntry[]): Promise<void>;
  protected abstract shutdown(): Promise<void>;

  async admit(req: AdmissionRequest): Promise<Admission> {
    if (this.closed) throw new Error("limiter is closed");
    const a = await this.doAdmit(req);
    if (a.ok && holdsLease(req)) this.live.set(req.requestId, a.lease);
    return a;
  }

  settle(lease: Lease, actual: Settlement): Promise<SettleResult> {
    const done = this.settled.get(lease);
    if (done) return done;
    const p = this.closed
      ? Promise.reject(new Error("limiter is closed"))
      : this.settleWithRetries(lease, { tokens: wholeTokens(actual.tokens), cost: money(actual.cost) });
    // A second call for the same lease answers the first result and counts nothing.
    this.settled.set(lease, p);
    this.track(p);
    // The lease stays renewed while the settlement is retried.
    void p.then(
      () => this.live.delete(lease.requestId),
      () => this.live.delete(lease.requestId),
    );
    return p;
  }

  /**
   * A failed settlement (Redis blip, lost reply) is retried with backoff: the store counts it once
   * (see `tracked`), so a retry after a reply that was lost does not count twice.
   */
  private async settleWithRetries(lease: Lease, actual: Settlement): Promise<SettleResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.doSettle(lease, actual);
      } catch (e) {
        const delay = this.retryDelays[attempt];
        if (delay === undefined) throw e;
        this.log.warn("limiter settle failed; retrying", {
          request_id: lease.requestId,
          attempt: attempt + 1,
          error: (e as Error).message,
        });
        await sleep(delay);
      }
    }
  }

  /**
   * One more attempt at a settlement that failed for good (its retries ran out): counted only if
   * the request is still in flight, so never twice.
   */
  settleAgain(lease: Lease, actual: Settlement): Promise<SettleResult> {
    if (this.closed) return Promise.reject(new Error("limiter is closed"));
    return this.doSettle(lease, { tokens: wholeTokens(actual.tokens), cost: money(actual.cost) });
  }

  /** Extends what every unsettled request holds; runs every leaseMs/3 on its own. */
  renewLeases(): Promise<void> {
    if (this.closed || this.live.size === 0) return Promise.resolve();
    if (this.renewing) return this.renewing;
    const p = this.doRenew([...this.live.values()])
      .catch((e: unknown) => this.log.warn("limiter lease renewal failed", { error: (e as Error).message }))
      .finally(() => {
        this.renewing = undefined;
      });
    this.renewing = p;
    return p;
  }

  /** Unsettled requests holding something in the store (for metrics and drain). */
  get inFlight(): number {
    return this.live.size;
  }

  private track(p: Promise<unknown>): void {
    const q = p.catch(() => {});
    this.pending.add(q);
    void q.finally(() => this.pending.delete(q));
  }

  /**
   * Stops renewals, waits for settlements under way (retries included), then releases resources.
   * Leases never settled are not released: like those of a crashed instance, they expire after
   * leaseMs.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    await Promise.all([...this.pending]);
    if (this.renewing) await this.renewing;
    await this.shutdown();
  }
}

// ---------------------------------------------------------------------------------------------
// The in-memory store

class ZSet {
  readonly m = new Map<string, number>();
}
class Hash {
  readonly m = new Map<string, string>();
}
type Value = number | string | ZSet | Hash;
interface Entry {
  v: Value;
  /** Absolute expiry (ms). */
  exp: number;
}

/**
 * Keys with expiries, the few operations the limiter needs (Redis semantics: a sorted set or hash
 * left empty is deleted). Expired keys are invisible at once and swept at most once a second, so
 * nothing accumulates. Several limiters may share one store (tests use that to play several
 * instances).
 */
export class MemoryStore {
  private readonly m = new Map<string, Entry>();
  private lastSweep = Number.NEGATIVE_INFINITY;

  private entry(key: string, now: number): Entry | undefined {
    const e = this.m.get(key);
    if (e && e.exp <= now) {
      this.m.delete(key);
      return undefined;
    }
    return e;
  }

  /** GET of a string key (number or text). */
  get(key: string, now: number): number | string | undefined {
    const v = this.entry(key, now)?.v;
    return typeof v === "number" || typeof v === "string" ? v : undefined;
  }

  num(key: string, now: number): number | undefined {
    const v = this.get(key, now);
    return typeof v === "number" ? v : undefined;
  }

  set(key: string, v: number | string, ttlMs: number, now: number): void {
    this.m.set(key, { v, exp: now + ttlMs });
  }

  /** SET KEEPTTL of an existing key; no-op when it does not exist. */
  replace(key: string, v: number, now: number): void {
    const e = this.entry(key, now);
    if (e) e.v = v;
  }

  /** SET NX PX: whether the key was created. */
  setNx(key: string, v: number | string, ttlMs: number, now: number): boolean {
    if (this.entry(key, now)) return false;
    this.set(key, v, ttlMs, now);
    return true;
  }

  del(key: string): void {
    this.m.delete(key);
  }

  expire(key: string, ttlMs: number, now: number): void {
    const e = this.entry(key, now);
    if (e) e.exp = now + ttlMs;
  }

  private coll<T extends ZSet | Hash>(key: string, now: number, kind: new () => T, create: boolean): T | undefined {
    const e = this.entry(key, now);
    if (e?.v instanceof kind) return e.v;
    if (!create) return undefined;
    const v = new kind();
    this.m.set(key, { v, exp: Number.POSITIVE_INFINITY });
    return v;
  }

  private dropIfEmpty(key: string, c: ZSet | Hash): void {
    if (c.m.size === 0) this.m.delete(key);
  }

  zset(key: string, now: number): Map<string, number> | undefined {
    return this.coll(key, now, ZSet, false)?.m;
  }

  zadd(key: string, member: string, score: number, now: number): void {
    this.coll(key, now, ZSet, true)?.m.set(member, score);
  }

  /** ZADD XX GT CH: raises an existing member's score; whether it changed. */
  zraise(key: string, member: string, score: number, now: number): boolean {
    const z = this.zset(key, now);
    const cur = z?.get(member);
    if (!z || cur === undefined || score <= cur) return false;
    z.set(member, score);
    return true;
  }

  /** ZREM: whether the member was there. */
  zrem(key: string, member: string, now: number): boolean {
    const z = this.coll(key, now, ZSet, false);
    if (!z) return false;
    const had = z.m.delete(member);
    this.dropIfEmpty(key, z);
    return had;
  }

  /** Drops members scored at or below `max`. */
  zremBelow(key: string, max: number, now: number): void {
    const z = this.coll(key, now, ZSet, false);
    if (!z) return;
    for (const [m, s] of z.m) if (s <= max) z.m.delete(m);
    this.dropIfEmpty(key, z);
  }

  /** ZRANGEBYSCORE key -inf max LIMIT 0 limit: lowest scores first. */
  zrangeBelow(key: string, max: number, limit: number, now: number): string[] {
    const z = this.zset(key, now);
    if (!z) return [];
    return [...z]
      .filter(([, s]) => s <= max)
      .sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, limit)
      .map(([m]) => m);
  }

  hset(key: string, field: string, value: string, now: number): void {
    this.coll(key, now, Hash, true)?.m.set(field, value);
  }

  hget(key: string, field: string, now: number): string | undefined {
    return this.coll(key, now, Hash, false)?.m.get(field);
  }

  hdel(key: string, field: string, now: number): void {
    const h = this.coll(key, now, Hash, false);
    if (!h) return;
    h.m.delete(field);
    this.dropIfEmpty(key, h);
  }

  sweep(now: number): void {
    if (now - this.lastSweep < 1_000) return;
    this.lastSweep = now;
    for (const [k, e] of this.m) if (e.exp <= now) this.m.delete(k);
  }

  /** Keys held, expired ones not yet swept included. */
  get size(): number {
    return this.m.size;
  }

  /** Live keys with their remaining TTL (tests; -1: none). */
  keys(now: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const [k, e] of this.m) if (e.exp > now) out.set(k, e.exp === Number.POSITIVE_INFINITY ? -1 : e.exp - now);
    return out;
  }

  /** Deletes every key (tests: a Redis that lost its data). */
  clear(): void {
    this.m.clear();
  }
}

// ---------------------------------------------------------------------------------------------
// The limiter

export interface MemoryLimiterOptions extends LimiterOptions {
  /** Clock in ms; default `Date.now`. */
  now?: () => number;
  /** Share one store between limiters (tests); default a private one. */
  store?: MemoryStore;
  log?: Logger;
}

interface Win {
  c: number;
  p: number;
  est: number;
}

interface Sub {
  base: string;
  scope: LimitScope;
  rpm: number | null;
  tpm: number | null;
  par: number | null;
  spend: SpendWindow | null;
  r?: Win;
  t?: Win;
  sk?: string;
  rk?: string;
  pk?: string;
  missing?: boolean;
  spent?: number;
  res?: number;
}

const P = "gw";

/** The key names of `redis.ts`, under prefix `gw`. */
export function baseKeys(prefix: string, req: AdmissionRequest): [string, string, string] {
  const tag = `${prefix}:{${req.scope}}`;
  return [`${tag}:t:${req.team.id}`, `${tag}:k:${req.key.id}`, `${tag}:m:${req.key.id}:${req.keyModel.model}`];
}
/** The scope's in-flight set (request id -> lease expiry) and reservation records (id -> amount and keys). */
export function liveKeys(prefix: string, scope: string): [string, string] {
  return [`${prefix}:{${scope}}:live`, `${prefix}:{${scope}}:lres`];
}
export function versionKey(prefix: string, scope: string, which: "key" | "team", id: string): string {
  return `${prefix}:{${scope}}:v:${which}:${id}`;
}
/** The estimated cost as the scripts see it (also part of the reservation record). */
export const costArg = (req: AdmissionRequest): string => String(money(req.estimate.cost));
/** Marks a request whose spend was replayed (idempotence of `replay`). */
export function replayKey(prefix: string, scope: string, requestId: string): string {
  return `${prefix}:{${scope}}:rp:${requestId}`;
}
/** How long a replay mark is kept. */
export const REPLAY_MARK_TTL_MS = 24 * 3_600_000;

/** Subtracts a released reservation from a sum; an empty sum is deleted. */
function release(st: MemoryStore, key: string, amount: number, now: number): void {
  const v = st.num(key, now);
  if (v === undefined) return;
  const left = v - amount;
  if (left <= 1e-12) st.del(key);
  else st.replace(key, left, now);
}

export class MemoryLimiter extends LeaseBook {
  readonly kind = "memory" as const;
  readonly store: MemoryStore;
  private readonly clockFn: () => number;

  constructor(options: MemoryLimiterOptions) {
    super(options, options.log ?? silentLogger);
    this.store = options.store ?? new MemoryStore();
    this.clockFn = options.now ?? Date.now;
  }

  now(): number {
    return Math.floor(this.clockFn());
  }

  private clock(): number {
    const now = this.now();
    this.store.sweep(now);
    return now;
  }

  private budgetTtl(ends: number, now: number): number {
    let ttl = BUDGET_IDLE_MS;
    if (ends > 0 && ends - now < ttl) ttl = Math.max(ends - now, 0);
    return ttl + BUDGET_MARGIN_MS;
  }

  /** Creates a budget counter from its seed, with its birth time (see `replay` in redis.ts). */
  private createSpent(sk: string, spent: number, ttl: number, now: number): void {
    this.store.set(sk, spent, ttl, now);
    this.store.set(`${sk.slice(0, -":spent".length)}:born`, now, ttl, now);
  }

  protected async doAdmit(req: AdmissionRequest): Promise<Admission> {
    const st = this.store;
    const W = this.options.windowMs;
    const LEASE = this.options.leaseMs;
    const tokens = wholeTokens(req.estimate.tokens);
    const cost = money(req.estimate.cost);
    const isTracked = tracked(req);
    const [live, lres] = liveKeys(P, req.scope);
    const now = this.clock();

    const kv = st.num(versionKey(P, req.scope, "key", req.key.id), now);
    if (kv !== undefined && kv > req.key.version) return { ok: false, stale: true, which: "key" };
    const tv = st.num(versionKey(P, req.scope, "team", req.team.id), now);
    if (tv !== undefined && tv > req.team.version) return { ok: false, stale: true, which: "team" };

    const bases = baseKeys(P, req);
    // A spend counter to create from seeds read from a cache: ask for fresh ones first.
    if (req.provisionalSeeds) {
      for (const [i, l] of subjects(req).entries()) {
        const b = spendWindow(l, false);
        if (b && st.num(`${bases[i]}:b:${b.id}:spent`, now) === undefined) {
          return { ok: false, stale: false, unseeded: true };
        }
      }
    }

    // Requests whose lease expired without a settlement (their instance died): release their
    // reservations, a bounded number per call.
    if (isTracked) {
      for (const rid of st.zrangeBelow(live, now, PURGE_BATCH, now)) {
        const rec = st.hget(lres, rid, now);
        if (rec !== undefined) {
          const [amount, ...keys] = rec.split("\n");
          for (const k of keys) release(st, k, Number(amount), now);
          st.hdel(lres, rid, now);
        }
        st.zrem(live, rid, now);
      }
    }

    const bucket = Math.floor(now / W);
    const elapsed = now - bucket * W;
    const frac = elapsed / W;
    const resetMs = W - elapsed;
    const window = (base: string, kind: string): Win => {
      const c = st.num(`${base}:${kind}:${bucket}`, now) ?? 0;
      const p = st.num(`${base}:${kind}:${bucket - 1}`, now) ?? 0;
      return { c, p, est: p * (1 - frac) + c };
    };

    const S: Sub[] = subjects(req).map((l, i) => {
      const s: Sub = {
        base: bases[i] as string,
        scope: SCOPES[i] as LimitScope,
        rpm: num(l.rpm),
        tpm: num(l.tpm),
        par: i < 2 ? num(l.maxParallel) : null,
        spend: spendWindow(l, false),
      };
      if (s.rpm !== null) s.r = window(s.base, "rpm");
      if (s.tpm !== null) s.t = window(s.base, "tpm");
      return s;
    });

    const tightest = (field: "rpm" | "tpm", amount: number) => {
      let best: { limit: number; remaining: number; resetMs: number } | undefined;
      for (const s of S) {
        const l = s[field];
        const w = field === "rpm" ? s.r : s.t;
        if (l === null || !w) continue;
        const rem = Math.max(0, Math.floor(l - w.est - amount));
        if (!best || rem < best.remaining || (rem === best.remaining && l < best.limit)) {
          best = { limit: l, remaining: rem, resetMs };
        }
      }
      return best;
    };
    const rate = (admitted: boolean): RateState => {
      const r: RateState = {};
      const rq = tightest("rpm", admitted ? 1 : 0);
      const tk = tightest("tpm", admitted ? tokens : 0);
      if (rq) r.requests = rq;
      if (tk) r.tokens = tk;
      return r;
    };
    const refuse = (kind: LimitKind, scope: LimitScope, limit: number, retryAfterMs: number): Admission => ({
      ok: false,
      stale: false,
      kind,
      scope,
      limit,
      retryAfterMs,
      rate: rate(false),
    });
    const retryAfter = (w: Win, amount: number, limit: number): number => {
      let wait: number;
      if (amount > limit) wait = w.c > 0 ? resetMs + W : resetMs;
      else if (w.c + amount <= limit) wait = (1 - (limit - amount - w.c) / w.p) * W - elapsed;
      else wait = resetMs + (1 - (limit - amount) / w.c) * W;
      return Math.max(1, Math.ceil(wait));
    };

    for (const s of S) {
      const b = s.spend;
      if (!b) continue;
      s.sk = `${s.base}:b:${b.id}:spent`;
      const spent = st.num(s.sk, now);
      s.missing = spent === undefined;
      s.spent = spent ?? b.seed;
      if (b.limit === null) continue; // tracked, never blocking
      s.rk = `${s.base}:b:${b.id}:res`;
      s.res = st.num(s.rk, now) ?? 0;
      if (s.spent + s.res >= b.limit)
        return refuse("budget", s.scope, b.limit, b.endsAt > 0 ? Math.max(0, b.endsAt - now) : 0);
    }
    for (const s of S) {
      if (s.par === null) continue;
      s.pk = `${s.base}:par`;
      st.zremBelow(s.pk, now, now);
      if ((st.zset(s.pk, now)?.size ?? 0) >= s.par) return refuse("parallel", s.scope, s.par, PARALLEL_RETRY_MS);
    }
    for (const s of S) {
      if (s.rpm !== null && s.r && s.r.est + 1 > s.rpm) return refuse("rpm", s.scope, s.rpm, retryAfter(s.r, 1, s.rpm));
    }
    // A request larger than the whole tpm limit would never fit: it is admitted when the window is
    // empty, so such requests are not blocked forever (at most one per window and a half).
    for (const s of S) {
      if (s.tpm === null || !s.t) continue;
      if (s.t.est + tokens > s.tpm && !(tokens > s.tpm && s.t.est === 0)) {
        return refuse("tpm", s.scope, s.tpm, retryAfter(s.t, tokens, s.tpm));
      }
    }

    const resKeys: string[] = [];
    for (const s of S) {
      if (s.rpm !== null) {
        const k = `${s.base}:rpm:${bucket}`;
        st.set(k, (st.num(k, now) ?? 0) + 1, 2 * W, now);
      }
      if (s.tpm !== null && tokens > 0) {
        const k = `${s.base}:tpm:${bucket}`;
        st.set(k, (st.num(k, now) ?? 0) + tokens, 2 * W, now);
      }
      if (s.pk) {
        st.zadd(s.pk, req.requestId, now + LEASE, now);
        st.expire(s.pk, LEASE, now);
      }
      if (s.sk && s.spend) {
        const ttl = this.budgetTtl(s.spend.endsAt, now);
        if (s.missing) this.createSpent(s.sk, s.spent as number, ttl, now);
        if (s.rk && cost > 0) {
          st.set(s.rk, (s.res as number) + cost, ttl, now);
          resKeys.push(s.rk);
        }
      }
    }
    if (isTracked) {
      st.zadd(live, req.requestId, now + LEASE, now);
      st.expire(live, LIVE_TTL_MS, now);
      if (resKeys.length > 0) {
        st.hset(lres, req.requestId, [costArg(req), ...resKeys].join("\n"), now);
        st.expire(lres, LIVE_TTL_MS, now);
      }
    }
    return { ok: true, lease: { requestId: req.requestId, request: req, admittedAt: now }, rate: rate(true) };
  }

  protected async doSettle(lease: Lease, actual: Settlement): Promise<SettleResult> {
    const st = this.store;
    const W = this.options.windowMs;
    const req = lease.request;
    const now = this.clock();
    const estTokens = wholeTokens(req.estimate.tokens);
    const estCost = money(req.estimate.cost);
    const [live, lres] = liveKeys(P, req.scope);

    // Counts only if this request is still in flight: not settled already (a retry after a lost
    // reply), not expired (its reservation was released by an admission meanwhile).
    const first = tracked(req) ? st.zrem(live, req.requestId, now) : true;
    if (first && reserves(req)) st.hdel(lres, req.requestId, now);

    const delta = actual.tokens - estTokens;
    const bucket = Math.floor(now / W);
    const ab = Math.floor(lease.admittedAt / W);
    // See settle.lua: the difference goes to the admission bucket while it is still in the window;
    // after that, only extra use goes to the current bucket.
    const target = ab >= bucket - 1 ? ab : delta > 0 ? bucket : null;

    const bases = baseKeys(P, req);
    const spends = { key: 0, team: 0 };
    let crossed = false;
    subjects(req).forEach((l, i) => {
      const base = bases[i] as string;
      if (first && num(l.tpm) !== null && target !== null && delta !== 0) {
        const k = `${base}:tpm:${target}`;
        st.set(k, Math.max(0, (st.num(k, now) ?? 0) + delta), 2 * W, now);
      }
      if (i < 2 && num(l.maxParallel) !== null) st.zrem(`${base}:par`, req.requestId, now);
      const b = spendWindow(l, i === 1);
      if (!b) return;
      const sk = `${base}:b:${b.id}:spent`;
      const rk = `${base}:b:${b.id}:res`;
      const softKey = `${base}:b:${b.id}:soft`;
      const ttl = this.budgetTtl(b.endsAt, now);
      const stored = st.num(sk, now);
      let spent = stored ?? b.seed;
      if (first) {
        spent += actual.cost;
        if (stored === undefined) this.createSpent(sk, spent, ttl, now);
        else if (actual.cost > 0) st.set(sk, spent, ttl, now);
        if (b.limit !== null && estCost > 0) release(st, rk, estCost, now);
      }
      if (i === 0) spends.team = spent;
      if (i === 1) spends.key = spent;
      if (b.soft !== null) {
        if (first) {
          if (spent >= b.soft && st.setNx(softKey, req.requestId, ttl, now)) crossed = true;
        } else if (st.get(softKey, now) === req.requestId) {
          // The first attempt crossed it but its answer was lost: report it now.
          crossed = true;
        }
      }
    });
    return { keySpend: spends.key, teamSpend: spends.team, keySoftBudgetCrossed: crossed };
  }

  protected async doRenew(leases: readonly Lease[]): Promise<void> {
    const now = this.clock();
    const LEASE = this.options.leaseMs;
    for (const lease of leases) {
      const req = lease.request;
      if (tracked(req)) this.store.zraise(liveKeys(P, req.scope)[0], lease.requestId, now + LEASE, now);
      const [team, key] = baseKeys(P, req);
      for (const [base, l] of [
        [team, req.team],
        [key, req.key],
      ] as const) {
        if (num(l.maxParallel) === null) continue;
        const pk = `${base}:par`;
        if (this.store.zraise(pk, lease.requestId, now + LEASE, now)) this.store.expire(pk, LEASE, now);
      }
    }
  }

  async replay(entries: readonly ReplayEntry[]): Promise<void> {
    const now = this.clock();
    for (const { request: req, cost, since } of entries) {
      if (!(money(cost) > 0)) continue;
      if (!this.store.setNx(replayKey(P, req.scope, req.requestId), 1, REPLAY_MARK_TTL_MS, now)) continue;
      const bases = baseKeys(P, req);
      subjects(req).forEach((l, i) => {
        const b = spendWindow(l, i === 1);
        if (!b) return;
        const sk = `${bases[i]}:b:${b.id}:spent`;
        const spent = this.store.num(sk, now);
        const born = this.store.num(`${bases[i]}:b:${b.id}:born`, now);
        if (spent !== undefined && (born === undefined || born <= since))
          this.store.replace(sk, spent + money(cost), now);
      });
    }
  }

  async publishVersion(scope: string, which: "key" | "team", id: string, version: number): Promise<void> {
    const now = this.clock();
    const k = versionKey(P, scope, which, id);
    const cur = this.store.num(k, now);
    if (cur === undefined || version > cur) this.store.set(k, version, VERSION_TTL_MS, now);
    else this.store.expire(k, VERSION_TTL_MS, now);
  }

  protected async shutdown(): Promise<void> {}
}
