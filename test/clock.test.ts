/**
 * One clock for budget windows: with Redis, an instance whose own clock is off (here: the whole
 * process clock moved past a key's budget reset) still picks the window Redis's clock says.
 */
import { afterAll, afterEach, describe, expect, setSystemTime, test } from "bun:test";
import { createRedis } from "../src/redis/client";
import { pgliteBackend } from "./helpers/backends";
import { type ErrorWire, startGateway } from "./helpers/gateway";
import { requireRedis, TEST_REDIS_URL, uniquePrefix } from "./helpers/redis";
import { openaiCompletion } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

// Every call costs 1000 x 0.00001 = 0.01.
const mock = startMockUpstream(() => openaiCompletion("ok", { prompt: 1000, completion: 0 }));
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(() => setSystemTime());
afterAll(async () => {
  setSystemTime();
  for (const c of cleanups.reverse()) await c();
  mock.close();
});

describe("budget windows with Redis", () => {
  test("an instance whose clock is past the budget reset still uses the window of Redis's clock", async () => {
    if (!requireRedis()) return;
    const redis = createRedis(TEST_REDIS_URL, { prefix: uniquePrefix("clock") });
    await redis.ready(5000);
    const gw = await startGateway(pgliteBackend, {
      redis,
      inference: {
        providers: { mk: { type: "openai", api_base: mock.url, api_key: "k" } },
        models: [{ name: "mk/a", input_cost_per_token: 1e-5, output_cost_per_token: 1e-5 }],
        router: { num_retries: 0 },
      },
    });
    cleanups.push(
      () => redis.close(),
      () => gw.close(),
    );
    const chat = (key: string) =>
      gw.call<ErrorWire>("POST", "/v1/chat/completions", {
        key,
        body: { model: "mk/a", messages: [{ role: "user", content: "hi" }] },
      });
    const k = await gw.newKey({ max_budget: 0.01, budget_duration: "1h" });
    const other = await gw.newKey({});
    expect((await chat(k.key)).status).toBe(200);
    expect((await chat(k.key)).status).toBe(429);

    // This instance's clock jumps 61 minutes ahead: by it, the key's budget window has ended.
    setSystemTime(new Date(Date.now() + 61 * 60_000));
    // Any reply from Redis corrects the offset (here another key's request).
    expect((await chat(other.key)).status).toBe(200);
    // Redis's clock says the window has not ended: the budget is still spent.
    const refused = await chat(k.key);
    expect(refused.status).toBe(429);
    expect(refused.body.error.type).toBe("budget_exceeded");
  });
});
