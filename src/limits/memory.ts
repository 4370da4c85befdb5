/**
 * The limiter in process memory: the embedded default for a single gateway instance.
 *
 * It is a line-by-line port of `scripts/admit.lua` and `scripts/settle.lua` over a small key-value
 * store with expiries (`MemoryStore`), using the same key names, so both implementations keep one
 * semantics (the contract suite runs against both). Each call runs synchronously, hence atomically.
 * The clock is injectable (`now`).
 *
 * This module also holds what both implementations share: request normalisation and `LeaseBook`,
 * the bookkeeping of unsettled leases (renewal every leaseMs/3, settle-once, close).
 */
import { type Logger, silentLogger } from "../log";
import type {
  Admission,
  AdmissionRequest,
  Lease,
  Limiter,
  LimiterOptions,
  LimitKind,
  LimitScope,
  Limits,
  RateState,
  Settlement,
  SettleResult,
  Subject,
} from "./types";

/** An unused budget counter lives this long (then it is re-seeded from the durable spend). */
export const BUDGET_IDLE_MS = 30 * 24 * 3_600_000;
/** Budget counters outlive their window by this much. */
export const BUDGET_MARGIN_MS = 3_600_000;
/** Published versions are kept this long after the last publication. */
export const VERSION_TTL_MS = 7 * 24 * 3_600_000;
/** Tag spend counters are kept this long after the last spend. */
export const TAG_TTL_MS = 30 * 24 * 3_600_000;
/** `retryAfterMs` of a parallel-cap refusal. */
export const PARALLEL_RETRY_MS = 1_000;

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
 * The spend window of a subject. A soft budget without a budget is tracked on a window that never
 * ends, seeded at 0 (pass a `budget` with an infinite limit to track it on the real window instead).
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

export const num = (n: number | null | undefined): number | null => (finite(n) ? n : null);

/**
 * Unsettled leases of one limiter: renews their parallel slots every leaseMs/3 (so long streams keep
 * them, while the leases of a dead instance expire), settles each lease once, drains on close.
 */
export abstract class LeaseBook implements Limiter {
  abstract readonly kind: "redis" | "memory";
  protected readonly live = new Map<string, Lease>();
  private readonly settled = new WeakMap<Lease, Promise<SettleResult>>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly timer: ReturnType<typeof setInterval>;
  private renewing: Promise<void> | undefined;
  protected closed = false;

  constructor(
    protected readonly options: LimiterOptions,
    protected readonly log: Logger,
  ) {
    if (!(options.windowMs > 0) || !(options.leaseMs > 0)) throw new Error("windowMs and leaseMs must be positive");
    this.timer = setInterval(() => void this.renewLeases(), Math.max(1, Math.floor(options.leaseMs / 3)));
    this.timer.unref?.();
  }

  protected abstract doAdmit(req: AdmissionRequest): Promise<Admission>;
  protected abstract doSettle(lease: Lease, actual: Settlement): Promise<SettleResult>;
  protected abstract doRenew(leases: readonly Lease[]): Promise<void>;
  abstract publishVersion(scope: string, which: "key" | "team", id: string, version: number): Promise<void>;
  abstract tagSpend(tag: string): Promise<number>;
  protected abstract shutdown(): Promise<void>;

  async admit(req: AdmissionRequest): Promise<Admission> {
    if (this.closed) throw new Error("limiter is closed");
    const a = await this.doAdmit(req);
    if (a.ok && hasParallel(req)) this.live.set(req.requestId, a.lease);
    return a;
  }

  settle(lease: Lease, actual: Settlement): Promise<SettleResult> {
    const done = this.settled.get(lease);
    if (done) return done;
    this.live.delete(lease.requestId);
    const p = this.closed
      ? Promise.reject(new Error("limiter is closed"))
      : this.doSettle(lease, { tokens: wholeTokens(actual.tokens), cost: money(actual.cost), tags: actual.tags });
    // A second call for the same lease answers the first result and counts nothing.
    this.settled.set(lease, p);
    this.track(p);
    return p;
  }

  /** Extends the parallel leases of every unsettled request; runs every leaseMs/3 on its own. */
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

  /** Unsettled requests holding a parallel slot (for metrics and drain). */
  get inFlight(): number {
    return this.live.size;
  }

  private track(p: Promise<unknown>): void {
    const q = p.catch(() => {});
    this.pending.add(q);
    void q.finally(() => this.pending.delete(q));
  }

  /**
   * Stops renewals, waits for settlements under way, then releases resources. Leases never settled
   * are not released: like those of a crashed instance, they expire after leaseMs.
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

type Value = number | Map<string, number>;
interface Entry {
  v: Value;
  /** Absolute expiry (ms). */
  exp: number;
}

/**
 * Keys with expiries, the few operations the limiter needs. Expired keys are invisible at once and
 * swept at most once a second, so nothing accumulates. Several limiters may share one store (tests
 * use that to play several instances).
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

  num(key: string, now: number): number | undefined {
    const v = this.entry(key, now)?.v;
    return typeof v === "number" ? v : undefined;
  }

  set(key: string, v: number, ttlMs: number, now: number): void {
    this.m.set(key, { v, exp: now + ttlMs });
  }

  /** SET NX PX: whether the key was created. */
  setNx(key: string, v: number, ttlMs: number, now: number): boolean {
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

  zset(key: string, now: number): Map<string, number> | undefined {
    const v = this.entry(key, now)?.v;
    return v instanceof Map ? v : undefined;
  }

  zadd(key: string, member: string, score: number, now: number): void {
    let z = this.zset(key, now);
    if (!z) {
      z = new Map();
      this.m.set(key, { v: z, exp: Number.POSITIVE_INFINITY });
    }
    z.set(member, score);
  }

  zrem(key: string, member: string, now: number): void {
    const z = this.zset(key, now);
    if (!z) return;
    z.delete(member);
    if (z.size === 0) this.m.delete(key);
  }

  /** Drops members scored at or below `max`. */
  zremBelow(key: string, max: number, now: number): void {
    const z = this.zset(key, now);
    if (!z) return;
    for (const [m, s] of z) if (s <= max) z.delete(m);
    if (z.size === 0) this.m.delete(key);
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

  /** Live keys with their remaining TTL (tests). */
  keys(now: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const [k, e] of this.m) if (e.exp > now) out.set(k, e.exp - now);
    return out;
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
export function versionKey(prefix: string, scope: string, which: "key" | "team", id: string): string {
  return `${prefix}:{${scope}}:v:${which}:${id}`;
}
export function tagKey(prefix: string, tag: string): string {
  return `${prefix}:{tag:${tag}}:spend`;
}

export class MemoryLimiter extends LeaseBook {
  readonly kind = "memory" as const;
  readonly store: MemoryStore;
  private readonly now: () => number;

  constructor(options: MemoryLimiterOptions) {
    super(options, options.log ?? silentLogger);
    this.store = options.store ?? new MemoryStore();
    this.now = options.now ?? Date.now;
  }

  private clock(): number {
    const now = Math.floor(this.now());
    this.store.sweep(now);
    return now;
  }

  private budgetTtl(ends: number, now: number): number {
    let ttl = BUDGET_IDLE_MS;
    if (ends > 0 && ends - now < ttl) ttl = Math.max(ends - now, 0);
    return ttl + BUDGET_MARGIN_MS;
  }

  protected async doAdmit(req: AdmissionRequest): Promise<Admission> {
    const st = this.store;
    const W = this.options.windowMs;
    const LEASE = this.options.leaseMs;
    const tokens = wholeTokens(req.estimate.tokens);
    const cost = money(req.estimate.cost);
    const now = this.clock();

    const kv = st.num(versionKey(P, req.scope, "key", req.key.id), now);
    if (kv !== undefined && kv > req.key.version) return { ok: false, stale: true, which: "key" };
    const tv = st.num(versionKey(P, req.scope, "team", req.team.id), now);
    if (tv !== undefined && tv > req.team.version) return { ok: false, stale: true, which: "team" };

    const bucket = Math.floor(now / W);
    const elapsed = now - bucket * W;
    const frac = elapsed / W;
    const resetMs = W - elapsed;
    const window = (base: string, kind: string): Win => {
      const c = st.num(`${base}:${kind}:${bucket}`, now) ?? 0;
      const p = st.num(`${base}:${kind}:${bucket - 1}`, now) ?? 0;
      return { c, p, est: p * (1 - frac) + c };
    };

    const bases = baseKeys(P, req);
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
      if (!b || b.limit === null) continue;
      s.sk = `${s.base}:b:${b.id}:spent`;
      s.rk = `${s.base}:b:${b.id}:res`;
      const spent = st.num(s.sk, now);
      s.missing = spent === undefined;
      s.spent = spent ?? b.seed;
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
      if (s.sk && s.rk && s.spend) {
        const ttl = this.budgetTtl(s.spend.endsAt, now);
        if (s.missing) st.set(s.sk, s.spent as number, ttl, now);
        if (cost > 0) st.set(s.rk, (s.res as number) + cost, ttl, now);
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
      if (num(l.tpm) !== null && target !== null && delta !== 0) {
        const k = `${base}:tpm:${target}`;
        st.set(k, Math.max(0, (st.num(k, now) ?? 0) + delta), 2 * W, now);
      }
      if (i < 2 && num(l.maxParallel) !== null) st.zrem(`${base}:par`, req.requestId, now);
      const b = spendWindow(l, i === 1);
      if (!b) return;
      const sk = `${base}:b:${b.id}:spent`;
      const rk = `${base}:b:${b.id}:res`;
      const ttl = this.budgetTtl(b.endsAt, now);
      const stored = st.num(sk, now);
      const spent = (stored ?? b.seed) + actual.cost;
      if (actual.cost > 0 || stored === undefined) st.set(sk, spent, ttl, now);
      const res = st.num(rk, now);
      if (b.limit !== null && res !== undefined) {
        const left = res - estCost;
        if (left <= 1e-12) st.del(rk);
        else st.set(rk, left, ttl, now);
      }
      if (i === 0) spends.team = spent;
      if (i === 1) spends.key = spent;
      if (b.soft !== null && spent >= b.soft && st.setNx(`${base}:b:${b.id}:soft`, 1, ttl, now)) crossed = true;
    });
    if (actual.cost > 0) {
      for (const tag of new Set(actual.tags)) {
        const k = tagKey(P, tag);
        st.set(k, (st.num(k, now) ?? 0) + actual.cost, TAG_TTL_MS, now);
      }
    }
    return { keySpend: spends.key, teamSpend: spends.team, keySoftBudgetCrossed: crossed };
  }

  protected async doRenew(leases: readonly Lease[]): Promise<void> {
    const now = this.clock();
    const LEASE = this.options.leaseMs;
    for (const lease of leases) {
      const [team, key] = baseKeys(P, lease.request);
      for (const [base, l] of [
        [team, lease.request.team],
        [key, lease.request.key],
      ] as const) {
        if (num(l.maxParallel) === null) continue;
        const pk = `${base}:par`;
        const z = this.store.zset(pk, now);
        const cur = z?.get(lease.requestId);
        if (z && cur !== undefined && now + LEASE > cur) {
          z.set(lease.requestId, now + LEASE);
          this.store.expire(pk, LEASE, now);
        }
      }
    }
  }

  async publishVersion(scope: string, which: "key" | "team", id: string, version: number): Promise<void> {
    const now = this.clock();
    const k = versionKey(P, scope, which, id);
    const cur = this.store.num(k, now);
    if (cur === undefined || version > cur) this.store.set(k, version, VERSION_TTL_MS, now);
    else this.store.expire(k, VERSION_TTL_MS, now);
  }

  async tagSpend(tag: string): Promise<number> {
    return this.store.num(tagKey(P, tag), this.clock()) ?? 0;
  }

  protected async shutdown(): Promise<void> {}
}
