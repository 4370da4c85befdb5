/** Redis going away and coming back: fail_open serves with per-instance limits, fail_closed refuses; both recover. */
import { afterAll, describe, expect, test } from "bun:test";
import { createRedis, type Redis } from "../src/redis/client";
import { pgliteBackend } from "./helpers/backends";
import { type ErrorWire, startGateway, type TestGateway } from "./helpers/gateway";
import { requireRedis, TEST_REDIS_URL, uniquePrefix } from "./helpers/redis";
import { startTcpProxy, type TcpProxy } from "./helpers/tcp-proxy";
import { openaiCompletion } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

const mock = startMockUpstream(() => openaiCompletion("ok", { prompt: 10, completion: 1 }));
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  mock.close();
});

type Readiness = { status: string; dependencies: Record<string, { status: string }> };

async function setup(mode: "fail_open" | "fail_closed"): Promise<{ gw: TestGateway; proxy: TcpProxy; redis: Redis }> {
  const target = new URL(TEST_REDIS_URL);
  const proxy = startTcpProxy(target.hostname, Number(target.port || 6379));
  const redis = createRedis(`redis://127.0.0.1:${proxy.port}`, {
    prefix: uniquePrefix(mode),
    minBackoffMs: 20,
    maxBackoffMs: 200,
    connectTimeoutMs: 500,
  });
  await redis.ready(5000);
  const gw = await startGateway(pgliteBackend, {
    redis,
    inference: {
      providers: { mk: { type: "openai", api_base: mock.url, api_key: "k" } },
      models: [
        { name: "mk/a", input_cost_per_token: 1e-6, output_cost_per_token: 1e-6 },
        // 11 tokens a call: 0.011 each.
        { name: "mk/p", input_cost_per_token: 1e-3, output_cost_per_token: 1e-3 },
      ],
      router: { num_retries: 0 },
      redisFailure: mode,
      redisCommandTimeoutMs: 300,
    },
  });
  cleanups.push(
    () => proxy.stop(),
    () => redis.close(),
    () => gw.close(),
  );
  return { gw, proxy, redis };
}

const chat = (gw: TestGateway, key: string, model = "mk/a") =>
  gw.call<ErrorWire>("POST", "/v1/chat/completions", {
    key,
    body: { model, messages: [{ role: "user", content: "hi" }] },
  });

/** The reply, or a failure if there is none for so long that the request must be hanging. */
async function answered<T>(p: Promise<T>): Promise<T> {
  const hang = Bun.sleep(20_000).then(() => {
    throw new Error("no answer: the request hangs");
  });
  return Promise.race([p, hang]);
}

async function untilReady(gw: TestGateway, want: string): Promise<{ status: number; body: Readiness }> {
  let r = await gw.call<Readiness>("GET", "/health/readiness", { key: null });
  for (let i = 0; i < 100 && r.body.dependencies.redis?.status !== want; i++) {
    await Bun.sleep(50);
    r = await gw.call<Readiness>("GET", "/health/readiness", { key: null });
  }
  return r;
}

describe("Redis failure modes", () => {
  test("fail_open: served with per-instance limits while Redis is away, readiness degraded, back to Redis without a restart", async () => {
    if (!requireRedis()) return;
    const { gw, proxy } = await setup("fail_open");
    const k = await gw.newKey({ rpm_limit: 2 });
    expect([(await chat(gw, k.key)).status, (await chat(gw, k.key)).status, (await chat(gw, k.key)).status]).toEqual([
      200, 200, 429,
    ]);

    proxy.cut();
    const degraded = await untilReady(gw, "down");
    expect(degraded.status).toBe(200);
    expect(degraded.body.status).toBe("degraded");
    // the in-memory limiter takes over: still limited, counted from zero on this instance
    expect([(await chat(gw, k.key)).status, (await chat(gw, k.key)).status, (await chat(gw, k.key)).status]).toEqual([
      200, 200, 429,
    ]);
    expect(gw.logs.some((l) => l.includes("Redis unreachable: limits enforced per instance"))).toBe(true);

    proxy.restore();
    const ready = await untilReady(gw, "up");
    expect(ready.body.status).toBe("ready");
    // Redis's own window still holds the two requests it admitted: refused again, by the shared limiter
    expect((await chat(gw, k.key)).status).toBe(429);
    const k2 = await gw.newKey({ rpm_limit: 1 });
    expect([(await chat(gw, k2.key)).status, (await chat(gw, k2.key)).status]).toEqual([200, 429]);
  });

  test("fail_closed: inference is a 503 while Redis is away and readiness fails; both recover", async () => {
    if (!requireRedis()) return;
    const { gw, proxy } = await setup("fail_closed");
    const k = await gw.newKey({});
    expect((await chat(gw, k.key)).status).toBe(200);
    proxy.cut();
    const down = await untilReady(gw, "down");
    expect(down.status).toBe(503);
    const refused = await chat(gw, k.key);
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("limits_unavailable");
    // management does not depend on Redis
    expect((await gw.call("GET", `/key/info?key=${k.token_id}`)).status).toBe(200);
    proxy.restore();
    expect((await untilReady(gw, "up")).status).toBe(200);
    expect((await chat(gw, k.key)).status).toBe(200);
  });

  test("fail_open: a Redis that stops answering on an open connection does not hold requests; recovery", async () => {
    if (!requireRedis()) return;
    const { gw, proxy } = await setup("fail_open");
    const k = await gw.newKey({ rpm_limit: 2 });
    expect([(await chat(gw, k.key)).status, (await chat(gw, k.key)).status]).toEqual([200, 200]);

    proxy.stall();
    // Served by the per-instance limiter once the call times out: counted from zero here.
    expect((await answered(chat(gw, k.key))).status).toBe(200);
    expect((await answered(chat(gw, k.key))).status).toBe(200);
    expect((await answered(chat(gw, k.key))).status).toBe(429);
    expect(gw.logs.some((l) => l.includes("Redis unreachable: limits enforced per instance"))).toBe(true);
    const degraded = await untilReady(gw, "down");
    expect(degraded.body.status).toBe("degraded");

    proxy.resume();
    expect((await untilReady(gw, "up")).body.status).toBe("ready");
    // Back on Redis, whose window still holds the two requests it admitted.
    expect((await chat(gw, k.key)).status).toBe(429);
  });

  test("fail_closed: a Redis that stops answering gives 503s instead of hanging; recovery", async () => {
    if (!requireRedis()) return;
    const { gw, proxy } = await setup("fail_closed");
    const k = await gw.newKey({});
    expect((await chat(gw, k.key)).status).toBe(200);
    proxy.stall();
    const refused = await answered(chat(gw, k.key));
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("limits_unavailable");
    expect((await answered(chat(gw, k.key))).status).toBe(503);
    proxy.resume();
    expect((await untilReady(gw, "up")).status).toBe(200);
    expect((await chat(gw, k.key)).status).toBe(200);
  });

  test("fail_open: spend served during an outage reaches Redis's budget counters when it is back", async () => {
    if (!requireRedis()) return;
    const { gw, proxy, redis } = await setup("fail_open");
    const k = await gw.newKey({ max_budget: 0.04 });
    const spentKey = `${redis.prefix}:{${k.team_id}}:k:${k.token_id}:b:all:spent`;
    const liveSpend = async () => Number(await redis.send("GET", [spentKey]));
    expect((await chat(gw, k.key, "mk/p")).status).toBe(200);
    expect(await liveSpend()).toBeCloseTo(0.011, 10);

    proxy.cut();
    await untilReady(gw, "down");
    // Served and counted by this instance alone.
    expect((await chat(gw, k.key, "mk/p")).status).toBe(200);
    expect((await chat(gw, k.key, "mk/p")).status).toBe(200);

    proxy.restore();
    await untilReady(gw, "up");
    // Back on Redis (0.011 + 0.011 < 0.04), which now also gets the 0.022 spent meanwhile.
    expect((await chat(gw, k.key, "mk/p")).status).toBe(200);
    for (let i = 0; i < 100 && (await liveSpend()) < 0.044 - 1e-9; i++) await Bun.sleep(50);
    expect(await liveSpend()).toBeCloseTo(0.044, 10);
    const refused = await chat(gw, k.key, "mk/p");
    expect(refused.status).toBe(429);
    expect(refused.body.error.type).toBe("budget_exceeded");
    expect(gw.logs.some((l) => l.includes("outage spend applied to Redis"))).toBe(true);

    // A second outage starts the per-instance limiter afresh, from the database (0.044 spent), not
    // from what it counted in the first one (0.033).
    await gw.flush();
    proxy.cut();
    await untilReady(gw, "down");
    const again = await chat(gw, k.key, "mk/p");
    expect(again.status).toBe(429);
    expect(again.body.error.type).toBe("budget_exceeded");
    proxy.restore();
  });
});
