import { afterEach, expect, test } from "bun:test";
import { createLimiter, MemoryLimiter, MemoryStore, RedisLimiter } from "./index";
import type { AdmissionRequest, Limiter } from "./types";

const open: Limiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((l) => l.close()));
});

let n = 0;
const req = (maxParallel: number | null, rpm: number | null = null): AdmissionRequest => ({
  scope: "t",
  requestId: `r${++n}`,
  key: { id: "k", version: 1, maxParallel, rpm },
  keyModel: { model: "m" },
  team: { id: "t", version: 1 },
  estimate: { tokens: 1, cost: 0 },
});

test("the renewal timer keeps a running request's slot on the real clock; a dead one expires", async () => {
  const store = new MemoryStore();
  const holder = new MemoryLimiter({ windowMs: 60_000, leaseMs: 150, store });
  const other = new MemoryLimiter({ windowMs: 60_000, leaseMs: 150, store });
  open.push(holder, other);
  const a = await holder.admit(req(1));
  expect(a.ok).toBe(true);
  expect(holder.inFlight).toBe(1);
  await Bun.sleep(500);
  expect((await other.admit(req(1))).ok).toBe(false);
  await holder.close();
  await Bun.sleep(300);
  expect((await other.admit(req(1))).ok).toBe(true);
});

test("expired keys are swept, so nothing accumulates", async () => {
  let t = 1_000_000;
  const store = new MemoryStore();
  const l = new MemoryLimiter({ windowMs: 1_000, leaseMs: 500, store, now: () => t });
  open.push(l);
  for (let i = 0; i < 50; i++) {
    const a = await l.admit({ ...req(5, 100), key: { id: `k${i}`, version: 1, rpm: 100, maxParallel: 5 } });
    if (!a.ok) throw new Error("refused");
    if (i % 2) await l.settle(a.lease, { tokens: 1, cost: 0 });
  }
  expect(store.size).toBeGreaterThan(50);
  t += 10_000;
  await l.admit(req(null));
  expect(store.size).toBe(0);
});

test("createLimiter: memory by default, Redis when given a client or URL", async () => {
  const m = createLimiter({ windowMs: 1_000 });
  open.push(m);
  expect(m.kind).toBe("memory");
  const r = createLimiter({ redis: "redis://127.0.0.1:1", prefix: "x" });
  open.push(r);
  expect(r.kind).toBe("redis");
  expect(r).toBeInstanceOf(RedisLimiter);
  expect(() => createLimiter({ windowMs: 0 })).toThrow();
});

test("rpm, as documented: never more than N in an aligned window; up to 2N - 1 in a rolling one at worst", async () => {
  const W = 60_000;
  const N = 10;
  // Start 100 ms before a window boundary: the worst case is a burst there, then a steady stream.
  let t = 1_800_000_000_000 - (1_800_000_000_000 % W) - 100;
  const l = new MemoryLimiter({ windowMs: W, leaseMs: 120_000, now: () => t });
  open.push(l);
  const admittedAt: number[] = [];
  const end = t + 2 * W;
  while (t < end) {
    if ((await l.admit(req(null, N))).ok) admittedAt.push(t);
    else t += 50;
  }
  const inAligned = new Map<number, number>();
  for (const a of admittedAt) inAligned.set(Math.floor(a / W), (inAligned.get(Math.floor(a / W)) ?? 0) + 1);
  expect(Math.max(...inAligned.values())).toBe(N);
  let rolling = 0;
  for (const a of admittedAt) rolling = Math.max(rolling, admittedAt.filter((b) => b >= a && b < a + W).length);
  expect(rolling).toBeGreaterThan(N);
  expect(rolling).toBeLessThanOrEqual(2 * N - 1);
});
