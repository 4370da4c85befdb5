/**
 * The limiter contract, run against both implementations: Redis (real server, several instances on
 * one prefix, Redis's clock) and memory (an injected clock that tests move; several limiters on one
 * store). Without Redis the Redis half is skipped with a warning, except under CI=true (it fails).
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { requireRedis, TEST_REDIS_URL, uniquePrefix } from "../../test/helpers/redis";
import { createRedis, type Redis } from "../redis/client";
import { type LeaseBook, MemoryLimiter, MemoryStore } from "./memory";
import { RedisLimiter } from "./redis";
import type {
  Admission,
  AdmissionRequest,
  Lease,
  LimiterOptions,
  Limits,
  Refusal,
  Settlement,
  SettleResult,
  Subject,
} from "./types";

/** Failures injected into settlements: before the store is reached, or after (the reply is lost). */
interface Faults {
  before: number;
  after: number;
}
type TestLimiter = LeaseBook & { faults: Faults };

async function withFaults(faults: Faults, settle: () => Promise<SettleResult>): Promise<SettleResult> {
  if (faults.before > 0) {
    faults.before--;
    throw new Error("injected: the store was not reached");
  }
  const r = await settle();
  if (faults.after > 0) {
    faults.after--;
    throw new Error("injected: the reply was lost");
  }
  return r;
}

class FaultyMemoryLimiter extends MemoryLimiter {
  readonly faults: Faults = { before: 0, after: 0 };
  protected override doSettle(lease: Lease, actual: Settlement): Promise<SettleResult> {
    return withFaults(this.faults, () => super.doSettle(lease, actual));
  }
}

class FaultyRedisLimiter extends RedisLimiter {
  readonly faults: Faults = { before: 0, after: 0 };
  protected override doSettle(lease: Lease, actual: Settlement): Promise<SettleResult> {
    return withFaults(this.faults, () => super.doSettle(lease, actual));
  }
}

/** One isolated namespace: limiters created here share state, like gateway instances. */
interface Namespace {
  limiter(opts?: Partial<LimiterOptions>): Promise<TestLimiter>;
  /** Lets time pass (memory: moves the clock, renewing leases every leaseMs/3 like the timer). */
  sleep(ms: number): Promise<void>;
  /** The limiter clock now (Redis: TIME). */
  now(): Promise<number>;
  /** Every live key with its remaining TTL in ms (-1: none). */
  keys(): Promise<Map<string, number>>;
  prefix: string;
}

interface Harness {
  name: "redis" | "memory";
  open(): Promise<Namespace>;
  dispose(): Promise<void>;
}

const DEFAULTS: LimiterOptions = { windowMs: 60_000, leaseMs: 30_000 };

function memoryHarness(): Harness {
  return {
    name: "memory",
    async open() {
      const store = new MemoryStore();
      // Start 100 ms into a window, like a real clock would be somewhere.
      let t = 1_800_000_000_000 + 100;
      const limiters: { l: TestLimiter; leaseMs: number }[] = [];
      return {
        prefix: "gw",
        async limiter(opts) {
          const o = { ...DEFAULTS, ...opts };
          const l = new FaultyMemoryLimiter({ ...o, store, now: () => t });
          limiters.push({ l, leaseMs: o.leaseMs });
          return l;
        },
        async sleep(ms) {
          const step = Math.max(1, Math.min(...limiters.map((x) => Math.floor(x.leaseMs / 3)), ms));
          let left = ms;
          while (left > 0) {
            const d = Math.min(step, left);
            t += d;
            left -= d;
            await Promise.all(limiters.map((x) => x.l.renewLeases()));
          }
        },
        now: async () => t,
        keys: async () => store.keys(t),
      };
    },
    async dispose() {},
  };
}

function redisHarness(): Harness {
  const clients: Redis[] = [];
  const prefixes: string[] = [];
  let admin: Redis | undefined;
  const getAdmin = async () => {
    if (!admin) {
      admin = createRedis(TEST_REDIS_URL, { prefix: "unused" });
      await admin.ready(5_000);
    }
    return admin;
  };
  const scan = async (a: Redis, prefix: string) => {
    const out: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = (await a.send("SCAN", [cursor, "MATCH", `${prefix}:*`, "COUNT", "1000"])) as [
        string,
        string[],
      ];
      cursor = next;
      out.push(...batch);
    } while (cursor !== "0");
    return out;
  };
  return {
    name: "redis",
    async open() {
      const prefix = uniquePrefix("limiter");
      prefixes.push(prefix);
      const a = await getAdmin();
      return {
        prefix,
        async limiter(opts) {
          // Each limiter gets its own connection, like a separate gateway instance.
          const redis = createRedis(TEST_REDIS_URL, { prefix });
          clients.push(redis);
          await redis.ready(5_000);
          return new FaultyRedisLimiter({ ...DEFAULTS, ...opts, redis });
        },
        sleep: (ms) => Bun.sleep(ms),
        async now() {
          const [s, us] = (await a.send("TIME", [])) as [string, string];
          return Number(s) * 1000 + Math.floor(Number(us) / 1000);
        },
        async keys() {
          const out = new Map<string, number>();
          for (const k of await scan(a, prefix)) out.set(k, Number(await a.send("PTTL", [k])));
          return out;
        },
      };
    },
    async dispose() {
      if (admin) {
        for (const p of prefixes) {
          const ks = await scan(admin, p);
          if (ks.length > 0) await admin.send("DEL", ks);
        }
        await admin.close();
      }
      await Promise.all(clients.map((c) => c.close()));
    },
  };
}

let seq = 0;
interface ReqOver {
  scope?: string;
  provisionalSeeds?: boolean;
  key?: Partial<Subject>;
  team?: Partial<Subject>;
  model?: Partial<Limits> & { model?: string };
  est?: { tokens: number; cost: number };
}
function req(o: ReqOver = {}): AdmissionRequest {
  const scope = o.scope ?? "team-1";
  return {
    scope,
    requestId: `req-${++seq}-${Math.random().toString(36).slice(2, 8)}`,
    key: { id: "key-1", version: 1, ...o.key },
    keyModel: { model: "gpt-x", ...o.model },
    team: { id: scope, version: 1, ...o.team },
    estimate: o.est ?? { tokens: 0, cost: 0 },
    ...(o.provisionalSeeds ? { provisionalSeeds: true } : {}),
  };
}

function leaseOf(a: Admission): Lease {
  if (!a.ok) throw new Error(`expected admission, got ${JSON.stringify(a)}`);
  return a.lease;
}
function refusal(a: Admission): Refusal {
  if (a.ok || a.stale || a.unseeded) throw new Error(`expected a refusal, got ${JSON.stringify(a)}`);
  return a;
}
const admitted = (as: Admission[]) => as.filter((a) => a.ok).length;
const zero = { tokens: 0, cost: 0 };

/** Waits until the limiter clock is `offset` ms into the next window of `windowMs`. */
async function alignTo(ns: Namespace, windowMs: number, offset: number): Promise<void> {
  const pos = (await ns.now()) % windowMs;
  await ns.sleep(windowMs - pos + offset);
}

/** Makes sure the next `needMs` do not cross a window boundary. */
async function awayFromBoundary(ns: Namespace, windowMs: number, needMs: number): Promise<void> {
  const pos = (await ns.now()) % windowMs;
  if (windowMs - pos < needMs) await ns.sleep(windowMs - pos + 5);
}

const budget = (limit: number, seed = 0, windowId = "w1", windowEndsAt = Number.MAX_SAFE_INTEGER) => ({
  limit,
  windowId,
  windowEndsAt,
  seed,
});

const harnesses: Harness[] = [memoryHarness()];
let redisUp = false;
try {
  redisUp = requireRedis();
} catch (e) {
  // CI=true without Redis: the Redis half fails instead of being skipped.
  test("limiter contract (redis): Redis is reachable", () => {
    throw e;
  });
}
if (redisUp) harnesses.push(redisHarness());

for (const h of harnesses) {
  describe(`limiter contract (${h.name})`, () => {
    const opened: TestLimiter[] = [];
    const open = async (opts?: Partial<LimiterOptions>) => {
      const ns = await h.open();
      const make = ns.limiter;
      ns.limiter = async (o) => {
        const l = await make({ ...opts, ...o });
        opened.push(l);
        return l;
      };
      return ns;
    };
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((l) => l.close()));
    });
    afterAll(() => h.dispose());

    test("rpm holds exactly under a concurrent burst, across instances", async () => {
      const ns = await open();
      const a = await ns.limiter();
      const b = await ns.limiter();
      await awayFromBoundary(ns, DEFAULTS.windowMs, 5_000);
      const burst = await Promise.all(
        Array.from({ length: 100 }, (_, i) => (i % 2 ? a : b).admit(req({ key: { id: "k", version: 1, rpm: 20 } }))),
      );
      expect(admitted(burst)).toBe(20);
      const r = refusal(burst.find((x) => !x.ok) as Admission);
      expect(r).toMatchObject({ kind: "rpm", scope: "key", limit: 20 });
      expect(r.retryAfterMs).toBeGreaterThan(0);
      expect(r.rate.requests).toMatchObject({ limit: 20, remaining: 0 });
      // Other keys of the team are not affected.
      expect((await a.admit(req({ key: { id: "k2", version: 1, rpm: 20 } }))).ok).toBe(true);
    });

    test("the rpm window slides across bucket boundaries", async () => {
      const W = 2_000;
      const ns = await open({ windowMs: W });
      const l = await ns.limiter();
      const r = () => req({ key: { id: "k", version: 1, rpm: 10 } });
      await alignTo(ns, W, 200);
      const first: Admission[] = [];
      for (let i = 0; i < 11; i++) first.push(await l.admit(r()));
      expect(admitted(first)).toBe(10);
      const ok = first[0] as Extract<Admission, { ok: true }>;
      expect(ok.rate.requests?.limit).toBe(10);
      expect(ok.rate.requests?.remaining).toBe(9);
      expect(ok.rate.requests?.resetMs).toBeGreaterThan(W - 400);
      expect(ok.rate.requests?.resetMs).toBeLessThanOrEqual(W - 200);
      const no = refusal(first[10] as Admission);
      // 10 in the current bucket: room for one once 10% of the next bucket has passed.
      expect(no.retryAfterMs).toBeGreaterThan(W - 400 + W * 0.1);
      expect(no.retryAfterMs).toBeLessThanOrEqual(W - 200 + W * 0.1 + 1);
      // 55% into the next bucket, the previous one weighs 4.5: 5 more fit.
      await alignTo(ns, W, 1_100);
      const second: Admission[] = [];
      for (let i = 0; i < 7; i++) second.push(await l.admit(r()));
      expect(admitted(second)).toBe(5);
      const no2 = refusal(second[6] as Admission);
      expect(no2.kind).toBe("rpm");
      // The bucket after: the previous (5) weighs ~4.75 at 5%.
      await alignTo(ns, W, 100);
      const third: Admission[] = [];
      for (let i = 0; i < 7; i++) third.push(await l.admit(r()));
      expect(admitted(third)).toBe(5);
      // Two windows later everything has slid out.
      await ns.sleep(2 * W);
      const fourth: Admission[] = [];
      for (let i = 0; i < 11; i++) fourth.push(await l.admit(r()));
      expect(admitted(fourth)).toBe(10);
    });

    test("tpm reserves the estimate and settles to the actual (smaller and larger)", async () => {
      const ns = await open();
      const l = await ns.limiter();
      await awayFromBoundary(ns, DEFAULTS.windowMs, 5_000);
      const r = (tokens: number) => req({ key: { id: "k", version: 1, tpm: 1_000 }, est: { tokens, cost: 0 } });
      const a1 = await l.admit(r(400));
      expect((a1 as Extract<Admission, { ok: true }>).rate.tokens).toMatchObject({ limit: 1_000, remaining: 600 });
      const a2 = await l.admit(r(400));
      expect(a2.ok).toBe(true);
      const a3 = refusal(await l.admit(r(400)));
      expect(a3).toMatchObject({ kind: "tpm", scope: "key", limit: 1_000 });
      expect(a3.rate.tokens).toMatchObject({ limit: 1_000, remaining: 200 });
      // Smaller actual: 400 -> 100 frees 300.
      await l.settle(leaseOf(a1), { tokens: 100, cost: 0 });
      const a4 = await l.admit(r(400));
      expect((a4 as Extract<Admission, { ok: true }>).rate.tokens?.remaining).toBe(100);
      // Larger actual: 400 -> 700 takes 300 more: 1 200 used, nothing fits.
      await l.settle(leaseOf(a2), { tokens: 700, cost: 0 });
      const a5 = refusal(await l.admit(r(1)));
      expect(a5.rate.tokens?.remaining).toBe(0);
      // A failed request (zeros) gives its whole reservation back: 1 200 - 400 = 800.
      await l.settle(leaseOf(a4), zero);
      const a6 = await l.admit(r(200));
      expect((a6 as Extract<Admission, { ok: true }>).rate.tokens?.remaining).toBe(0);
    });

    test("a request larger than the whole tpm limit is admitted only into an empty window", async () => {
      const W = 2_000;
      const ns = await open({ windowMs: W });
      const l = await ns.limiter();
      await alignTo(ns, W, 200);
      const r = (tokens: number) => req({ key: { id: "k", version: 1, tpm: 1_000 }, est: { tokens, cost: 0 } });
      expect((await l.admit(r(5_000))).ok).toBe(true);
      const no = refusal(await l.admit(r(5_000)));
      expect(no.kind).toBe("tpm");
      // Both buckets must empty: the rest of this one and all of the next.
      expect(no.retryAfterMs).toBeGreaterThan(2 * W - 400);
      expect(no.retryAfterMs).toBeLessThanOrEqual(2 * W - 200);
      expect(refusal(await l.admit(r(10))).kind).toBe("tpm");
      await alignTo(ns, W, 100);
      expect((await l.admit(r(5_000))).ok).toBe(false);
      await alignTo(ns, W, 100);
      expect((await l.admit(r(5_000))).ok).toBe(true);
    });

    test("per-model and per-team limits, and the order of checks", async () => {
      const ns = await open();
      const l = await ns.limiter();
      await awayFromBoundary(ns, DEFAULTS.windowMs, 5_000);
      const m = (model: string) => req({ key: { id: "k", version: 1 }, model: { model, rpm: 2 } });
      expect((await l.admit(m("a"))).ok).toBe(true);
      expect((await l.admit(m("a"))).ok).toBe(true);
      expect(refusal(await l.admit(m("a")))).toMatchObject({ kind: "rpm", scope: "model", limit: 2 });
      expect((await l.admit(m("b"))).ok).toBe(true);

      const mt = (tokens: number) =>
        req({ key: { id: "k", version: 1 }, model: { model: "t", tpm: 100 }, est: { tokens, cost: 0 } });
      expect((await l.admit(mt(80))).ok).toBe(true);
      expect(refusal(await l.admit(mt(30)))).toMatchObject({ kind: "tpm", scope: "model", limit: 100 });

      // Team limits span the team's keys.
      const t = (key: string) => req({ scope: "team-2", key: { id: key, version: 1, rpm: 10 }, team: { rpm: 3 } });
      const burst = await Promise.all(["a", "b", "c", "a", "b", "c"].map((k) => l.admit(t(k))));
      expect(admitted(burst)).toBe(3);
      expect(refusal(burst.find((x) => !x.ok) as Admission)).toMatchObject({ kind: "rpm", scope: "team", limit: 3 });
      // The tightest limit is reported: team (0 left) over key (9 left).
      expect(refusal(burst.find((x) => !x.ok) as Admission).rate.requests).toMatchObject({ limit: 3, remaining: 0 });

      // Several limits exhausted: the first in order (budget, parallel, rpm, tpm; team, key, model).
      const all = (o: { estTokens?: number } = {}) =>
        req({
          scope: "team-3",
          key: { id: "k", version: 1, rpm: 1, tpm: 10, maxParallel: 1, budget: budget(1) },
          team: { rpm: 1, tpm: 10, maxParallel: 1, budget: budget(1) },
          model: { rpm: 1, tpm: 10, budget: budget(1) },
          est: { tokens: o.estTokens ?? 10, cost: 1 },
        });
      const first = leaseOf(await l.admit(all()));
      expect(refusal(await l.admit(all()))).toMatchObject({ kind: "budget", scope: "team" });
      await l.settle(first, zero);
      expect(refusal(await l.admit(all()))).toMatchObject({ kind: "rpm", scope: "team", limit: 1 });
      const keyOnly = req({ scope: "team-3", key: { id: "k", version: 1, rpm: 1, tpm: 10 } });
      expect(refusal(await l.admit(keyOnly))).toMatchObject({ kind: "rpm", scope: "key" });
      const tpmOnly = (tokens: number) =>
        req({ scope: "team-3", key: { id: "k2", version: 1, rpm: 5, tpm: 10 }, est: { tokens, cost: 0 } });
      expect((await l.admit(tpmOnly(8))).ok).toBe(true);
      expect(refusal(await l.admit(tpmOnly(5)))).toMatchObject({ kind: "tpm", scope: "key", limit: 10 });
    });

    test("parallel caps hold under concurrent admits and are released by settle", async () => {
      const ns = await open();
      const a = await ns.limiter();
      const b = await ns.limiter();
      const r = (key = "k") => req({ key: { id: key, version: 1, maxParallel: 5 }, team: { maxParallel: 8 } });
      const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).admit(r())));
      expect(admitted(burst)).toBe(5);
      expect(refusal(burst.find((x) => !x.ok) as Admission)).toMatchObject({
        kind: "parallel",
        scope: "key",
        limit: 5,
        retryAfterMs: 1_000,
      });
      const held = burst.filter((x) => x.ok).map(leaseOf);
      // The team cap (8) spans keys: 3 more on another key.
      const other = await Promise.all(Array.from({ length: 6 }, () => a.admit(r("k2"))));
      expect(admitted(other)).toBe(3);
      expect(refusal(other.find((x) => !x.ok) as Admission)).toMatchObject({
        kind: "parallel",
        scope: "team",
        limit: 8,
      });
      // Settling releases: whichever instance admitted, any may settle its own lease.
      const lease = held[0] as Lease;
      const owner = burst.findIndex((x) => x.ok && x.lease === lease) % 2 ? a : b;
      await owner.settle(lease, zero);
      expect((await a.admit(r())).ok).toBe(true);
      expect((await a.admit(r())).ok).toBe(false);
    });

    test("an unsettled lease expires when its instance dies; renewal keeps a running one", async () => {
      const leaseMs = 600;
      const ns = await open({ leaseMs });
      const r = (key: string) => req({ key: { id: key, version: 1, maxParallel: 1 } });
      // Dies: closes without settling (no more renewals).
      const dead = await ns.limiter();
      leaseOf(await dead.admit(r("k1")));
      await dead.close();
      const alive = await ns.limiter();
      const running = leaseOf(await alive.admit(r("k2")));
      const other = await ns.limiter();
      expect(refusal(await other.admit(r("k1"))).kind).toBe("parallel");
      await ns.sleep(leaseMs * 3);
      // The dead instance's lease is gone; the running request still holds its slot.
      expect((await other.admit(r("k1"))).ok).toBe(true);
      expect(refusal(await other.admit(r("k2"))).kind).toBe("parallel");
      await alive.settle(running, zero);
      expect((await other.admit(r("k2"))).ok).toBe(true);
    });

    test("a cost reservation of a request that never settles is freed once its lease expires; renewal keeps a running one", async () => {
      const leaseMs = 600;
      const ns = await open({ leaseMs });
      // No parallel cap: the reservation alone must expire.
      const r = (key: string, cost: number) =>
        req({
          key: { id: key, version: 1, budget: budget(1) },
          team: { budget: budget(10) },
          model: { budget: budget(1, 0, "m") },
          est: { tokens: 0, cost },
        });
      const dead = await ns.limiter();
      leaseOf(await dead.admit(r("k1", 1)));
      await dead.close(); // dies: never settles, no more renewals
      const alive = await ns.limiter();
      const running = leaseOf(await alive.admit(r("k2", 1)));
      const other = await ns.limiter();
      expect(refusal(await other.admit(r("k1", 0.1)))).toMatchObject({ kind: "budget", scope: "key" });
      expect(refusal(await other.admit(r("k2", 0.1)))).toMatchObject({ kind: "budget", scope: "key" });
      await ns.sleep(leaseMs * 3);
      // The dead request's reservations (key, model, team) are released; the running one's are kept.
      const after = leaseOf(await other.admit(r("k1", 0.5)));
      expect(refusal(await other.admit(r("k2", 0.1)))).toMatchObject({ kind: "budget", scope: "key" });
      // The team budget holds 1 (running) + 0.5, not the dead request's 1 any more.
      const team = (cost: number) =>
        req({ key: { id: "k3", version: 1 }, team: { budget: budget(10) }, est: { tokens: 0, cost } });
      const fill = leaseOf(await other.admit(team(8.25)));
      const last = leaseOf(await other.admit(team(0.25)));
      expect(refusal(await other.admit(team(0.25)))).toMatchObject({ kind: "budget", scope: "team" });
      // Settling the running one frees its reservation, and spends what it really cost.
      expect((await alive.settle(running, { tokens: 0, cost: 0.25 })).keySpend).toBeCloseTo(0.25, 9);
      expect((await other.admit(r("k2", 0.1))).ok).toBe(true);
      for (const x of [after, fill, last]) await other.settle(x, zero);
    });

    test("a failed settlement is retried with backoff and counted once, even when only its reply was lost", async () => {
      const ns = await open({ settleRetryDelaysMs: [5, 5, 5] });
      const l = await ns.limiter();
      await awayFromBoundary(ns, DEFAULTS.windowMs, 5_000);
      const r = (cost = 1, tokens = 100) =>
        req({
          key: { id: "k", version: 1, tpm: 1_000, maxParallel: 1, budget: budget(2), softBudget: 0.5 },
          team: { budget: budget(10) },
          model: { tpm: 1_000 },
          est: { tokens, cost },
        });
      // The first attempt commits but its reply is lost: the retry counts nothing again, and still
      // reports the soft-budget crossing the first attempt made.
      l.faults.after = 1;
      const x = leaseOf(await l.admit(r()));
      const s1 = await l.settle(x, { tokens: 300, cost: 0.6 });
      expect(s1.keySpend).toBeCloseTo(0.6, 9);
      expect(s1.teamSpend).toBeCloseTo(0.6, 9);
      expect(s1.keySoftBudgetCrossed).toBe(true);
      // Two attempts that never reach the store, then one that does.
      l.faults.before = 2;
      const y = leaseOf(await l.admit(r()));
      const s2 = await l.settle(y, { tokens: 100, cost: 0.4 });
      expect(s2).toMatchObject({ keySoftBudgetCrossed: false });
      expect(s2.keySpend).toBeCloseTo(1, 9);
      // Tokens counted once each (300 + 100 of 1 000), for the key and per model.
      const full = await l.admit(r(0, 600));
      expect((full as Extract<Admission, { ok: true }>).rate.tokens).toMatchObject({ limit: 1_000, remaining: 0 });
      await l.settle(leaseOf(full), { tokens: 600, cost: 0 });
      expect(refusal(await l.admit(r(0, 1)))).toMatchObject({ kind: "tpm" });
      // The reservations were released once: spent 1 of 2, so one request reserving 1 fits and
      // blocks the budget while it runs.
      const z = leaseOf(await l.admit(r(1, 0)));
      expect(refusal(await l.admit(r(0.1, 0)))).toMatchObject({ kind: "budget", scope: "key" });
      await l.settle(z, zero);
      // The parallel slot (1) was released each time: one at a time still passes.
      const p = leaseOf(await l.admit(r(0, 0)));
      expect(refusal(await l.admit(r(0, 0)))).toMatchObject({ kind: "parallel" });
      await l.settle(p, zero);
      // Retries are bounded: a store that stays unreachable fails the settlement.
      l.faults.before = 10;
      const w = leaseOf(await l.admit(r(0, 0)));
      expect(await l.settle(w, zero).catch((e: unknown) => e)).toBeInstanceOf(Error);
      l.faults.before = 0;
    });

    test("budgets: seed, reservations, blocking, release and reconciliation", async () => {
      const ns = await open();
      const l = await ns.limiter();
      const now = await ns.now();
      const endsAt = now + 3_600_000;
      const r = (seed: number, cost = 0.2) =>
        req({ key: { id: "k", version: 1, budget: budget(1, seed, "w1", endsAt) }, est: { tokens: 0, cost } });
      const a1 = leaseOf(await l.admit(r(0.7)));
      // The seed is used only when the counter does not exist yet.
      const a2 = leaseOf(await l.admit(r(0)));
      const no = refusal(await l.admit(r(0)));
      expect(no).toMatchObject({ kind: "budget", scope: "key", limit: 1 });
      expect(no.retryAfterMs).toBeGreaterThan(3_500_000);
      expect(no.retryAfterMs).toBeLessThanOrEqual(3_600_000);
      // Actual cost replaces the reservation: 0.7 + 0.05 spent, 0.2 reserved.
      const s1 = await l.settle(a1, { tokens: 0, cost: 0.05 });
      expect(s1.keySpend).toBeCloseTo(0.75, 9);
      expect(s1.teamSpend).toBe(0);
      const a3 = leaseOf(await l.admit(r(0, 0.01)));
      // A failed request releases its reservation and spends nothing.
      const s2 = await l.settle(a2, zero);
      expect(s2.keySpend).toBeCloseTo(0.75, 9);
      const s3 = await l.settle(a3, { tokens: 0, cost: 0.3 });
      expect(s3.keySpend).toBeCloseTo(1.05, 9);
      expect(refusal(await l.admit(r(0, 0)))).toMatchObject({ kind: "budget", scope: "key" });

      // A budget window that never ends: no retry time.
      const forever = req({ key: { id: "k9", version: 1, budget: budget(1, 1) } });
      expect(refusal(await l.admit(forever)).retryAfterMs).toBe(0);

      // Team and model budgets; team spend is reported.
      const tm = (cost: number) =>
        req({
          scope: "team-b",
          key: { id: "kb", version: 1 },
          team: { budget: budget(10, 2) },
          model: { budget: budget(0.5, 0, "1h:0") },
          est: { tokens: 0, cost },
        });
      const t1 = leaseOf(await l.admit(tm(0.4)));
      // 0.4 reserved < 0.5: one more is admitted (the in-flight overshoot), then it blocks.
      const t2 = leaseOf(await l.admit(tm(0.4)));
      expect(refusal(await l.admit(tm(0.4)))).toMatchObject({ kind: "budget", scope: "model", limit: 0.5 });
      const st = await l.settle(t1, { tokens: 0, cost: 0.4 });
      expect(st.teamSpend).toBeCloseTo(2.4, 9);
      expect(st.keySpend).toBe(0);
      expect((await l.settle(t2, { tokens: 0, cost: 0.4 })).teamSpend).toBeCloseTo(2.8, 9);
    });

    test("provisional seeds never create a spend counter: admission answers unseeded and writes nothing", async () => {
      const ns = await open();
      const l = await ns.limiter();
      const r = (provisionalSeeds: boolean, seed: number) =>
        req({
          key: { id: "k", version: 1, rpm: 5, budget: budget(1, seed) },
          est: { tokens: 0, cost: 0.25 },
          provisionalSeeds,
        });
      const cached = r(true, 0);
      expect(await l.admit(cached)).toEqual({ ok: false, stale: false, unseeded: true });
      expect([...(await ns.keys()).keys()]).toEqual([]);
      // Fresh seeds create it (0.75 already spent: one reservation of 0.25 fills the budget).
      const fresh = leaseOf(await l.admit(r(false, 0.75)));
      expect(refusal(await l.admit(r(true, 0)))).toMatchObject({ kind: "budget" });
      // Once the counter exists, provisional seeds are ignored like any seed.
      expect((await l.settle(fresh, { tokens: 0, cost: 0.125 })).keySpend).toBeCloseTo(0.875, 9);
      expect((await l.admit(r(true, 0))).ok).toBe(true);
      // A tracked-only window (a soft budget alone) is a spend counter too.
      const soft = (provisionalSeeds: boolean) =>
        req({
          key: { id: "k2", version: 1, budget: budget(Number.POSITIVE_INFINITY, 0.3, "s"), softBudget: 1 },
          provisionalSeeds,
        });
      expect((await l.admit(soft(true))).ok).toBe(false);
      const first = leaseOf(await l.admit(soft(false)));
      // Created at admission: the next provisional admission needs no fresh seeds.
      const second = leaseOf(await l.admit(soft(true)));
      expect((await l.settle(first, { tokens: 0, cost: 0.1 })).keySpend).toBeCloseTo(0.4, 9);
      expect((await l.settle(second, { tokens: 0, cost: 0.1 })).keySpend).toBeCloseTo(0.5, 9);
    });

    test("replayed outage spend reaches counters older than the outage, once per request", async () => {
      const ns = await open();
      const l = await ns.limiter();
      const r = (key: string) =>
        req({ key: { id: key, version: 1, budget: budget(10, 0.5) }, team: { budget: budget(10, 1) } });
      // Counters that existed before the outage.
      await l.settle(leaseOf(await l.admit(r("old"))), zero);
      await ns.sleep(5);
      const since = await ns.now();
      await ns.sleep(5);
      // A counter created during the outage was seeded from the durable record: left alone.
      const young = { ...r("young"), scope: "team-2", team: { id: "team-2", version: 1, budget: budget(10, 1) } };
      await l.settle(leaseOf(await l.admit(young)), zero);
      const spent = r("old");
      const missing = { ...r("gone"), scope: "team-3", team: { id: "team-3", version: 1 } };
      await l.replay([
        { request: spent, cost: 0.25, since },
        { request: spent, cost: 0.25, since },
        { request: young, cost: 0.25, since },
        { request: missing, cost: 0.25, since },
      ]);
      await l.replay([{ request: spent, cost: 0.25, since }]);
      const check = async (x: AdmissionRequest) => l.settle(leaseOf(await l.admit(x)), zero);
      expect(await check(r("old"))).toMatchObject({ keySpend: 0.75, teamSpend: 1.25 });
      expect(await check(young)).toMatchObject({ keySpend: 0.5, teamSpend: 1 });
      // No counter is created by a replay.
      expect([...(await ns.keys()).keys()].some((k) => k.includes("{team-3}") && k.endsWith(":spent"))).toBe(false);
    });

    test("a new budget window starts from its own seed", async () => {
      const ns = await open();
      const l = await ns.limiter();
      const r = (windowId: string, seed: number) =>
        req({ key: { id: "k", version: 1, budget: budget(1, seed, windowId) }, est: { tokens: 0, cost: 0.1 } });
      const a = leaseOf(await l.admit(r("w1", 0.5)));
      await l.settle(a, { tokens: 0, cost: 0.6 });
      expect(refusal(await l.admit(r("w1", 0))).kind).toBe("budget");
      const b = leaseOf(await l.admit(r("w2", 0)));
      expect((await l.settle(b, { tokens: 0, cost: 0.1 })).keySpend).toBeCloseTo(0.1, 9);
    });

    test("concurrent admissions reserve: exactly the affordable number pass", async () => {
      const ns = await open();
      const a = await ns.limiter();
      const b = await ns.limiter();
      const r = () => req({ key: { id: "k", version: 1, budget: budget(1, 0.25) }, est: { tokens: 0, cost: 0.125 } });
      const burst = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).admit(r())));
      expect(admitted(burst)).toBe(6);
    });

    test("spend overshoots a budget by at most the requests in flight when it was reached", async () => {
      const ns = await open();
      const a = await ns.limiter();
      const b = await ns.limiter();
      const limit = 1;
      const actual = 0.15;
      const workers = 8;
      // No cost estimate (the worst case): nothing is reserved, only finished spend blocks.
      const r = () => req({ key: { id: "k", version: 1, budget: budget(limit) }, est: { tokens: 0, cost: 0 } });
      let spent = 0;
      let refusals = 0;
      const worker = async (l: TestLimiter) => {
        for (let i = 0; i < 40; i++) {
          const x = await l.admit(r());
          if (!x.ok) {
            refusals++;
            continue;
          }
          await Bun.sleep(1);
          const s = await l.settle(x.lease, { tokens: 0, cost: actual });
          spent = Math.max(spent, s.keySpend);
        }
      };
      await Promise.all(Array.from({ length: workers }, (_, i) => worker(i % 2 ? a : b)));
      expect(refusals).toBeGreaterThan(0);
      expect(spent).toBeGreaterThanOrEqual(limit);
      expect(spent).toBeLessThan(limit + workers * actual + 1e-9);
      expect(refusal(await a.admit(r())).kind).toBe("budget");
    });

    test("the soft budget is crossed exactly once per window, even with concurrent settles", async () => {
      const ns = await open();
      const a = await ns.limiter();
      const b = await ns.limiter();
      const r = (windowId: string) =>
        req({
          key: { id: "k", version: 1, budget: budget(100, 0, windowId), softBudget: 1 },
          est: { tokens: 0, cost: 0.1 },
        });
      const run = async (windowId: string) => {
        const leases = await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).admit(r(windowId))));
        const results = await Promise.all(
          leases.map((x, i) => (i % 2 ? a : b).settle(leaseOf(x), { tokens: 0, cost: 0.1 })),
        );
        return results.filter((s) => s.keySoftBudgetCrossed).length;
      };
      expect(await run("w1")).toBe(1);
      expect(await run("w1")).toBe(0);
      expect(await run("w2")).toBe(1);
      // A soft budget alone is tracked on its own window (a budget that never blocks), from the
      // stored spend: 0.45 stored + 0.1 crosses 0.5 at once; once per window again.
      const alone = (windowId: string, seed: number) =>
        req({
          key: { id: "k6", version: 1, budget: budget(Number.POSITIVE_INFINITY, seed, windowId), softBudget: 0.5 },
        });
      const w1 = await a.settle(leaseOf(await a.admit(alone("d1", 0.45))), { tokens: 0, cost: 0.1 });
      expect(w1.keySoftBudgetCrossed).toBe(true);
      expect(w1.keySpend).toBeCloseTo(0.55, 9);
      expect(
        (await b.settle(leaseOf(await b.admit(alone("d1", 0.45))), { tokens: 0, cost: 0.1 })).keySoftBudgetCrossed,
      ).toBe(false);
      const w2 = await a.settle(leaseOf(await a.admit(alone("d2", 0))), { tokens: 0, cost: 0.1 });
      expect(w2).toMatchObject({ keySoftBudgetCrossed: false });
      expect(w2.keySpend).toBeCloseTo(0.1, 9);
      expect(
        (await b.settle(leaseOf(await b.admit(alone("d2", 0))), { tokens: 0, cost: 0.45 })).keySoftBudgetCrossed,
      ).toBe(true);
      // Never blocking, whatever the spend.
      expect((await a.admit(alone("d2", 0))).ok).toBe(true);
      // Without any budget window, a soft budget is tracked from zero on a window that never ends.
      const soft = req({ key: { id: "k5", version: 1, softBudget: 0.5 } });
      const s1 = await a.settle(leaseOf(await a.admit(soft)), { tokens: 0, cost: 0.4 });
      expect(s1).toMatchObject({ keySoftBudgetCrossed: false });
      expect(s1.keySpend).toBeCloseTo(0.4, 9);
      const s2 = await a.settle(leaseOf(await a.admit(soft)), { tokens: 0, cost: 0.4 });
      expect(s2.keySoftBudgetCrossed).toBe(true);
    });

    test("stale versions are refused without touching any counter", async () => {
      const ns = await open();
      const l = await ns.limiter();
      const r = (keyVersion: number, teamVersion = 1) =>
        req({ key: { id: "k", version: keyVersion, rpm: 1 }, team: { version: teamVersion } });
      await l.publishVersion("team-1", "key", "k", 200);
      expect(await l.admit(r(100))).toEqual({ ok: false, stale: true, which: "key" });
      // A lower version never replaces a higher one.
      await l.publishVersion("team-1", "key", "k", 150);
      expect(await l.admit(r(180))).toEqual({ ok: false, stale: true, which: "key" });
      await l.publishVersion("team-1", "team", "team-1", 50);
      expect(await l.admit(r(200, 10))).toEqual({ ok: false, stale: true, which: "team" });
      // Nothing was counted by the stale answers: the single rpm slot is still free.
      expect((await l.admit(r(200, 50))).ok).toBe(true);
      expect((await l.admit(r(250, 60))).ok).toBe(false);
      // Another scope's record with the same id is separate.
      expect((await l.admit(req({ scope: "team-x", key: { id: "k", version: 1 } }))).ok).toBe(true);
    });

    test("settling twice counts once", async () => {
      const ns = await open();
      const l = await ns.limiter();
      const r = () =>
        req({ key: { id: "k", version: 1, maxParallel: 2, budget: budget(10) }, est: { tokens: 0, cost: 0.5 } });
      const x = leaseOf(await l.admit(r()));
      const y = leaseOf(await l.admit(r()));
      const first = await l.settle(x, { tokens: 0, cost: 1 });
      const second = await l.settle(x, { tokens: 0, cost: 1 });
      expect(second).toEqual(first);
      expect(first.keySpend).toBeCloseTo(1, 9);
      // One slot was released, not two.
      expect((await l.admit(r())).ok).toBe(true);
      expect(refusal(await l.admit(r())).kind).toBe("parallel");
      expect((await l.settle(y, { tokens: 0, cost: 1 })).keySpend).toBeCloseTo(2, 9);
    });

    test("a failed request settled with zeros releases everything", async () => {
      const ns = await open();
      const l = await ns.limiter();
      const full = () =>
        req({
          key: { id: "k", version: 1, tpm: 100, maxParallel: 1, budget: budget(1) },
          team: { maxParallel: 1, budget: budget(1) },
          model: { tpm: 100, budget: budget(1, 0, "m") },
          est: { tokens: 100, cost: 1 },
        });
      await awayFromBoundary(ns, DEFAULTS.windowMs, 5_000);
      const x = leaseOf(await l.admit(full()));
      expect((await l.admit(full())).ok).toBe(false);
      expect(await l.settle(x, zero)).toEqual({ keySpend: 0, teamSpend: 0, keySoftBudgetCrossed: false });
      expect((await l.admit(full())).ok).toBe(true);
    });

    test("absent limits write nothing; every key carries the scope hash tag and a TTL", async () => {
      const ns = await open({ leaseMs: 30_000 });
      const l = await ns.limiter();
      const bare = leaseOf(
        await l.admit(req({ scope: "team-7", key: { id: "k", version: 1 }, est: { tokens: 5, cost: 1 } })),
      );
      await l.settle(bare, { tokens: 5, cost: 1 });
      expect([...(await ns.keys()).keys()]).toEqual([]);

      await l.publishVersion("team-7", "key", "k", 1);
      const x = leaseOf(
        await l.admit(
          req({
            scope: "team-7",
            key: {
              id: "k",
              version: 1,
              rpm: 5,
              tpm: 500,
              maxParallel: 2,
              budget: budget(5, 1, "w", (await ns.now()) + 86_400_000),
              softBudget: 0.1,
            },
            team: { rpm: 5, tpm: 500, maxParallel: 2, budget: budget(5) },
            model: { rpm: 5, tpm: 500, budget: budget(5, 0, "m") },
            est: { tokens: 10, cost: 0.1 },
          }),
        ),
      );
      const held = await ns.keys();
      expect([...held.keys()].some((k) => k.endsWith(":par"))).toBe(true);
      expect([...held.keys()].some((k) => k.endsWith(":res"))).toBe(true);
      // The request is in the scope's in-flight set, with its reservation record.
      expect([...held.keys()].some((k) => k.endsWith("{team-7}:live"))).toBe(true);
      expect([...held.keys()].some((k) => k.endsWith("{team-7}:lres"))).toBe(true);
      await l.settle(x, { tokens: 20, cost: 0.2 });
      const keys = await ns.keys();
      const names = [...keys.keys()].map((k) => k.slice(ns.prefix.length + 1)).sort();
      const bucket = Math.floor(x.admittedAt / DEFAULTS.windowMs);
      expect(names).toEqual(
        [
          "{team-7}:k:k:b:w:born",
          "{team-7}:k:k:b:w:soft",
          "{team-7}:k:k:b:w:spent",
          `{team-7}:k:k:rpm:${bucket}`,
          `{team-7}:k:k:tpm:${bucket}`,
          "{team-7}:m:k:gpt-x:b:m:born",
          "{team-7}:m:k:gpt-x:b:m:spent",
          `{team-7}:m:k:gpt-x:rpm:${bucket}`,
          `{team-7}:m:k:gpt-x:tpm:${bucket}`,
          "{team-7}:t:team-7:b:w1:born",
          "{team-7}:t:team-7:b:w1:spent",
          `{team-7}:t:team-7:rpm:${bucket}`,
          `{team-7}:t:team-7:tpm:${bucket}`,
          "{team-7}:v:key:k",
        ].sort(),
      );
      for (const [k, ttl] of keys) {
        expect({ k, positive: ttl > 0 }).toEqual({ k, positive: true });
        if (k.includes(":rpm:") || k.includes(":tpm:")) expect(ttl).toBeLessThanOrEqual(2 * DEFAULTS.windowMs);
        if (k.includes(":v:")) expect(ttl).toBeLessThanOrEqual(7 * 86_400_000);
        if (k.includes(":k:k:b:w:")) expect(ttl).toBeLessThanOrEqual(86_400_000 + 3_600_000);
      }
    });
  });
}

if (redisUp) {
  describe("limiter on Redis only", () => {
    const cleanups: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    test("recovers from SCRIPT FLUSH (NOSCRIPT): reloads and retries once", async () => {
      const redis = createRedis(TEST_REDIS_URL, { prefix: uniquePrefix("noscript") });
      await redis.ready(5_000);
      const l = new RedisLimiter({ ...DEFAULTS, redis });
      cleanups.push(async () => {
        await l.close();
        await redis.close();
      });
      const r = () => req({ key: { id: "k", version: 1, rpm: 3, maxParallel: 5 } });
      expect((await l.admit(r())).ok).toBe(true);
      await redis.send("SCRIPT", ["FLUSH"]);
      const x = leaseOf(await l.admit(r()));
      await redis.send("SCRIPT", ["FLUSH"]);
      await l.settle(x, zero);
      await redis.send("SCRIPT", ["FLUSH"]);
      const burst = await Promise.all(Array.from({ length: 5 }, () => l.admit(r())));
      expect(admitted(burst)).toBe(1);
    });

    test("while Redis is unreachable every call rejects quickly with a catchable error", async () => {
      const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      const port = probe.port;
      probe.stop(true);
      const redis = createRedis(`redis://127.0.0.1:${port}`, { prefix: "down" });
      // Settlement retries off: here every call fails at once (retries have their own test).
      const l = new RedisLimiter({ ...DEFAULTS, redis, settleRetryDelaysMs: [] });
      cleanups.push(async () => {
        await l.close();
        await redis.close();
      });
      const started = performance.now();
      const x = await l.admit(req({ key: { id: "k", version: 1, rpm: 1 } })).catch((e: unknown) => e);
      expect(x).toBeInstanceOf(Error);
      const fake: Lease = { requestId: "r", admittedAt: Date.now(), request: req() };
      expect(await l.settle(fake, zero).catch((e: unknown) => e)).toBeInstanceOf(Error);
      expect(await l.publishVersion("s", "key", "k", 1).catch((e: unknown) => e)).toBeInstanceOf(Error);
      expect(performance.now() - started).toBeLessThan(500);
    });

    test("now() is Redis's clock, whatever this instance's clock says, and follows it when it jumps", async () => {
      const redis = createRedis(TEST_REDIS_URL, { prefix: uniquePrefix("clock") });
      await redis.ready(5_000);
      let skew = 3_600_000; // this instance's clock runs an hour ahead
      const l = new RedisLimiter({ ...DEFAULTS, redis, localNow: () => Date.now() + skew });
      cleanups.push(async () => {
        await l.close();
        await redis.close();
      });
      const redisNow = async () => {
        const [sec, us] = (await redis.send("TIME", [])) as [string, string];
        return Number(sec) * 1000 + Math.floor(Number(us) / 1000);
      };
      await l.syncClock();
      // Within the round trips involved, far from the hour of skew.
      expect(Math.abs(l.now() - (await redisNow()))).toBeLessThan(5_000);
      // The local clock jumps back by two hours: the next reply corrects the offset.
      skew = -3_600_000;
      expect(Math.abs(l.now() - (await redisNow()))).toBeGreaterThan(3_000_000);
      const x = leaseOf(await l.admit(req({ key: { id: "k", version: 1, rpm: 10 } })));
      expect(Math.abs(x.admittedAt - (await redisNow()))).toBeLessThan(5_000);
      expect(Math.abs(l.now() - (await redisNow()))).toBeLessThan(5_000);
      await l.settle(x, zero);
    });

    test("a limiter given a URL owns its client and closes it", async () => {
      const l = new RedisLimiter({ ...DEFAULTS, redis: TEST_REDIS_URL, prefix: uniquePrefix("owned") });
      await l.redis.ready(5_000);
      expect((await l.admit(req({ key: { id: "k", version: 1, rpm: 1 } }))).ok).toBe(true);
      await l.close();
      expect(l.redis.isConnected).toBe(false);
      expect(await l.admit(req()).catch((e: unknown) => e)).toBeInstanceOf(Error);
    });
  });
}
