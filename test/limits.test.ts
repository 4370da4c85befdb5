/**
 * Limits and budgets through the API, on each limiter: in process memory (the embedded default)
 * and on Redis (shared by instances), each over each database backend.
 */
import { afterAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { signature } from "../src/alerts/webhooks";
import { MemoryLimiter } from "../src/limits/memory";
import { createRedis, type Redis } from "../src/redis/client";
import { describeEachBackend, type ErrorWire, type TestGateway } from "./helpers/gateway";
import { requireRedis, TEST_REDIS_URL, uniquePrefix } from "./helpers/redis";
import { openaiCompletion, openaiFixture } from "./mocks/openai";
import { startMockUpstream, streamResponse } from "./mocks/upstream";

// Every completion reports 1000 prompt + 0 completion tokens: 0.01 at the test price.
let delayMs = 0;
const mock = startMockUpstream(async () => {
  if (delayMs) await Bun.sleep(delayMs);
  return openaiCompletion("ok", { prompt: 1000, completion: 0 });
});
const hooks: { headers: Headers; body: string }[] = [];
const webhook = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    hooks.push({ headers: req.headers, body: await req.text() });
    return new Response("ok");
  },
});
afterAll(() => {
  mock.close();
  void webhook.stop(true);
});

type Reply = Awaited<ReturnType<TestGateway["call"]>>;

type LimiterKind = "memory" | "redis";
const limiterKinds: LimiterKind[] = ["memory"];
if (requireRedis()) limiterKinds.push("redis");
const redisClients: Redis[] = [];
afterAll(async () => {
  for (const r of redisClients) {
    const keys = await scanPrefix(r);
    if (keys.length > 0) await r.send("DEL", keys);
    await r.close();
  }
});

/** Every key under a client's prefix. */
async function scanPrefix(r: Redis): Promise<string[]> {
  const out: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = (await r.send("SCAN", [cursor, "MATCH", `${r.prefix}:*`, "COUNT", "1000"])) as [
      string,
      string[],
    ];
    cursor = next;
    out.push(...batch);
  } while (cursor !== "0");
  return out;
}

for (const kind of limiterKinds) {
  let redis: Redis | undefined;
  describeEachBackend(
    `limits and budgets (${kind} limiter)`,
    (gw) => {
      /** The live counters are lost (a Redis restart without persistence, or a flush; memory: a restart). */
      const loseLiveCounters = async () => {
        if (redis) {
          const keys = await scanPrefix(redis);
          if (keys.length > 0) await redis.send("DEL", keys);
          return;
        }
        const limiter = gw().inference.limiter;
        if (!(limiter instanceof MemoryLimiter)) throw new Error("expected the memory limiter");
        limiter.store.clear();
      };
      const chat = (key: string, model = "mk/a", extra: Record<string, unknown> = {}) =>
        gw().call<ErrorWire & { choices?: unknown[] }>("POST", "/v1/chat/completions", {
          key,
          body: { model, messages: [{ role: "user", content: "hi" }], ...extra },
        });
      const statuses = (rs: Reply[]) => rs.map((r) => r.status);

      test("rpm: the limit is exact; the refusal names it, with retry-after and x-ratelimit headers", async () => {
        delayMs = 0;
        const k = await gw().newKey({ rpm_limit: 3 });
        const ok = await chat(k.key);
        expect(ok.headers.get("x-ratelimit-limit-requests")).toBe("3");
        expect(ok.headers.get("x-ratelimit-remaining-requests")).toBe("2");
        expect(ok.headers.get("x-ratelimit-reset-requests")).toMatch(/^\d+s$/);
        const rest = await Promise.all([chat(k.key), chat(k.key), chat(k.key), chat(k.key)]);
        expect(statuses(rest).sort()).toEqual([200, 200, 429, 429]);
        const refused = rest.find((r) => r.status === 429) as Reply & { body: ErrorWire };
        expect(refused.body.error).toMatchObject({ type: "rate_limit_error", code: "rpm_limit_exceeded" });
        expect(refused.body.error.message).toContain("rpm limit (3 requests per minute)");
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
        expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0");
        // the master key is not limited
        expect((await chat(gw().masterKey)).status).toBe(200);
      });

      test("tpm: reserves prompt + max_tokens before the call and settles to the real usage after it", async () => {
        // "hi" is about 1 prompt token; max_tokens 60 reserves ~61; each call really uses 1000 (mock usage).
        const k = await gw().newKey({ tpm_limit: 100 });
        const first = await chat(k.key, "mk/a", { max_tokens: 60 });
        expect(first.status).toBe(200);
        expect(first.headers.get("x-ratelimit-limit-tokens")).toBe("100");
        // settled at 1000 tokens: the window is now over the limit
        const second = await chat(k.key, "mk/a", { max_tokens: 60 });
        expect(second.status).toBe(429);
        expect(second.body.error).toMatchObject({ code: "tpm_limit_exceeded" });
        expect(second.body.error.message).toContain("tpm limit (100 tokens per minute)");
        // settling below the estimate gives the difference back: 61 reserved, 10 used, so a second
        // 61-token reservation fits under 100 (it would not if the reservation were kept)
        const k3 = await gw().newKey({ tpm_limit: 100 });
        mock.enqueue(() => openaiCompletion("ok", { prompt: 5, completion: 5 }));
        mock.enqueue(() => openaiCompletion("ok", { prompt: 5, completion: 5 }));
        expect((await chat(k3.key, "mk/a", { max_tokens: 60 })).status).toBe(200);
        expect((await chat(k3.key, "mk/a", { max_tokens: 60 })).status).toBe(200);
        // a single request larger than the whole limit passes only into an empty window
        const k2 = await gw().newKey({ tpm_limit: 100 });
        expect((await chat(k2.key, "mk/b", { max_tokens: 5000 })).status).toBe(200);
        expect((await chat(k2.key, "mk/b", { max_tokens: 5000 })).status).toBe(429);
      });

      test("per-model limits apply to that model only; team limits span the team's keys", async () => {
        const k = await gw().newKey({ model_rpm_limit: { "mk/a": 1 } });
        expect((await chat(k.key, "mk/a")).status).toBe(200);
        const refused = await chat(k.key, "mk/a");
        expect(refused.status).toBe(429);
        expect(refused.body.error.message).toContain("per-model (mk/a)");
        expect((await chat(k.key, "mk/b")).status).toBe(200);

        const team = await gw().newTeam({ rpm_limit: 2 });
        const a = await gw().newKey({ team_id: team.team_id });
        const b = await gw().newKey({ team_id: team.team_id });
        expect(statuses([await chat(a.key), await chat(b.key)])).toEqual([200, 200]);
        const third = await chat(a.key);
        expect(third.status).toBe(429);
        expect(third.body.error.message).toContain("the team's rpm limit");
      });

      test("parallel caps: excess is refused while calls run; streams hold their slot until they end or the client leaves", async () => {
        delayMs = 300;
        const k = await gw().newKey({ max_parallel_requests: 1 });
        const both = await Promise.all([chat(k.key), chat(k.key)]);
        expect(statuses(both).sort()).toEqual([200, 429]);
        const refused = both.find((r) => r.status === 429);
        expect(refused?.body.error).toMatchObject({ code: "parallel_limit_exceeded" });
        expect(refused?.body.error.message).toContain("parallel request limit (1 at once)");
        delayMs = 0;
        expect((await chat(k.key)).status).toBe(200);

        // a stream keeps the slot while it runs...
        const frames = openaiFixture("chat-stream.sse")
          .split("\n\n")
          .filter((f) => f.trim() !== "")
          .map((f) => `${f}\n\n`);
        mock.enqueue(() => streamResponse(frames, { delayMs: 150 }));
        const url = gw().listen();
        const controller = new AbortController();
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${k.key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "mk/a", messages: [{ role: "user", content: "x" }], stream: true }),
          signal: controller.signal,
        });
        const reader = res.body?.getReader();
        await reader?.read();
        expect((await chat(k.key)).status).toBe(429);
        // ...and gives it back when the client disconnects
        controller.abort();
        let status = 429;
        for (let i = 0; i < 40 && status === 429; i++) {
          await Bun.sleep(50);
          status = (await chat(k.key)).status;
        }
        expect(status).toBe(200);
      });

      test("budgets: key max_budget, per-model budget and team budget block once reached, with type budget_exceeded", async () => {
        delayMs = 0;
        const k = await gw().newKey({ max_budget: 0.02 });
        expect(statuses([await chat(k.key), await chat(k.key)])).toEqual([200, 200]);
        const over = await chat(k.key);
        expect(over.status).toBe(429);
        expect(over.body.error).toMatchObject({ type: "budget_exceeded", code: "budget_exceeded" });
        expect(over.body.error.message).toContain("this key's budget ($0.02)");

        const m = await gw().newKey({ model_max_budget: { "mk/a": { budget_limit: 0.01, time_period: "1d" } } });
        expect((await chat(m.key, "mk/a")).status).toBe(200);
        const modelOver = await chat(m.key, "mk/a");
        expect(modelOver.status).toBe(429);
        expect(modelOver.body.error.message).toContain("per-model (mk/a) budget");
        expect((await chat(m.key, "mk/b")).status).toBe(200);

        const team = await gw().newTeam({ max_budget: 0.01 });
        const t = await gw().newKey({ team_id: team.team_id });
        expect((await chat(t.key)).status).toBe(200);
        const teamOver = await chat(t.key);
        expect(teamOver.status).toBe(429);
        expect(teamOver.body.error.message).toContain("the team's budget");
      });

      test("live counters lost mid-window (Redis flushed or restarted): budgets still hold, rebuilt from the database", async () => {
        delayMs = 0;
        const team = await gw().newTeam({ max_budget: 0.06 });
        const k = await gw().newKey({
          team_id: team.team_id,
          max_budget: 0.05,
          model_max_budget: { "mk/b": { budget_limit: 0.02, time_period: "1d" } },
        });
        const k2 = await gw().newKey({ team_id: team.team_id });
        expect(statuses([await chat(k.key), await chat(k.key), await chat(k.key, "mk/b")])).toEqual([200, 200, 200]);
        await gw().flush();
        await loseLiveCounters();
        // Spent so far, now known only to the database: key 0.03, team 0.03, the key on mk/b 0.01.
        expect((await chat(k.key, "mk/b")).status).toBe(200);
        const model = await chat(k.key, "mk/b");
        expect(model.status).toBe(429);
        expect(model.body.error.message).toContain("per-model (mk/b) budget");
        expect((await chat(k.key)).status).toBe(200);
        const key = await chat(k.key);
        expect(key.status).toBe(429);
        expect(key.body.error.message).toContain("this key's budget");
        expect((await chat(k2.key)).status).toBe(200);
        const teamOver = await chat(k2.key);
        expect(teamOver.status).toBe(429);
        expect(teamOver.body.error.message).toContain("the team's budget");
      });

      test("budget_duration: the window resets and requests pass again", async () => {
        const k = await gw().newKey({ max_budget: 0.01, budget_duration: "2s" });
        expect((await chat(k.key)).status).toBe(200);
        const blocked = await chat(k.key);
        expect(blocked.status).toBe(429);
        expect(Number(blocked.headers.get("retry-after"))).toBeLessThanOrEqual(2);
        await Bun.sleep(2100);
        expect((await chat(k.key)).status).toBe(200);
      });

      test("refusals come in each protocol's own error shape, with the same headers", async () => {
        const k = await gw().newKey({ rpm_limit: 1 });
        expect((await chat(k.key)).status).toBe(200);
        const messages = await gw().call<{ type: string; error: { type: string; message: string } }>(
          "POST",
          "/v1/messages",
          {
            key: null,
            headers: { "x-api-key": k.key },
            body: { model: "mk/a", max_tokens: 10, messages: [{ role: "user", content: "hi" }] },
          },
        );
        expect(messages.status).toBe(429);
        expect(messages.body).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
        expect(messages.body.error.message).toContain("rpm limit");
        expect(messages.headers.get("retry-after")).not.toBeNull();
        const google = await gw().call<{ error: { code: number; status: string; message: string } }>(
          "POST",
          `/v1beta/models/${encodeURIComponent("mk/a")}:generateContent`,
          {
            key: null,
            headers: { "x-goog-api-key": k.key },
            body: { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
          },
        );
        expect(google.status).toBe(429);
        expect(google.body.error).toMatchObject({ code: 429, status: "RESOURCE_EXHAUSTED" });
        expect(google.headers.get("x-ratelimit-limit-requests")).toBe("1");
        const responses = await gw().call<ErrorWire>("POST", "/v1/responses", {
          key: k.key,
          body: { model: "mk/a", input: "hi" },
        });
        expect(responses.status).toBe(429);
        expect(responses.body.error.code).toBe("rpm_limit_exceeded");
      });

      test("soft budget: the request succeeds and one signed alert goes out per window", async () => {
        hooks.length = 0;
        const k = await gw().newKey({ soft_budget: 0.015, max_budget: 1, key_alias: `soft-${Math.random()}` });
        for (let i = 0; i < 4; i++) expect((await chat(k.key)).status).toBe(200);
        await gw().inference.alerts.idle();
        expect(hooks).toHaveLength(1);
        const event = JSON.parse((hooks[0] as { body: string }).body);
        expect(event).toMatchObject({
          type: "soft_budget_crossed",
          key: { token_id: k.token_id, key_alias: k.key_alias, key_name: k.key_name },
          team: { team_id: k.team_id },
          soft_budget: 0.015,
          max_budget: 1,
        });
        expect(event.spend).toBeCloseTo(0.02, 10);
        const h = (hooks[0] as { headers: Headers }).headers;
        expect(h.get("x-gateway-signature")).toBe(
          signature("hook-secret", h.get("x-gateway-timestamp") as string, (hooks[0] as { body: string }).body),
        );
        expect(gw().logs.some((l) => l.includes('"msg":"alert"') && l.includes(k.token_id))).toBe(true);
      });

      test("a soft budget without max_budget counts the key's stored spend on its budget window", async () => {
        hooks.length = 0;
        const k = await gw().newKey({ soft_budget: 0.5, budget_duration: "30d", key_alias: `soft-${Math.random()}` });
        // Spend already recorded in this window, just under the soft budget.
        await gw().opened.database.db.execute(sql`update api_keys set spend = 0.495 where token_id = ${k.token_id}`);
        for (let i = 0; i < 3; i++) expect((await chat(k.key)).status).toBe(200);
        await gw().inference.alerts.idle();
        expect(hooks).toHaveLength(1);
        const event = JSON.parse((hooks[0] as { body: string }).body);
        expect(event).toMatchObject({ key: { token_id: k.token_id }, soft_budget: 0.5, max_budget: null });
        expect(event.spend).toBeCloseTo(0.505, 10);
        expect(event.window_ends_at).toBe(k.budget_reset_at);
      });
    },
    () => {
      if (kind === "redis") {
        redis = createRedis(TEST_REDIS_URL, { prefix: uniquePrefix("limits") });
        redisClients.push(redis);
      }
      return {
        ...(redis ? { redis } : {}),
        inference: {
          providers: { mk: { type: "openai", api_base: mock.url, api_key: "k" } },
          models: [
            { name: "mk/a", input_cost_per_token: 1e-5, output_cost_per_token: 1e-5, max_output_tokens: 100 },
            { name: "mk/b", input_cost_per_token: 1e-5, output_cost_per_token: 1e-5, max_output_tokens: 100 },
          ],
          router: { num_retries: 0 },
          defaultOutputTokens: 10,
          alerts: {
            webhooks: [{ url: `http://127.0.0.1:${webhook.port}/hook`, secret: "hook-secret" }],
            maxAttempts: 2,
          },
        },
      };
    },
  );
}
