/**
 * Three gateway processes on one Postgres and one Redis behave like one: limits hold exactly under
 * load spread over all three, and key changes reach every instance before its next request.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTempDatabase, IN_CI, POSTGRES_AVAILABLE } from "./helpers/backends";
import { type GatewayProcess, spawnGateway } from "./helpers/process";
import { requireRedis, TEST_REDIS_URL, uniquePrefix } from "./helpers/redis";
import { openaiCompletion } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

const MASTER = "sk-multi-instance-master-0123456789";
const enabled = (() => {
  if (!POSTGRES_AVAILABLE) {
    if (IN_CI) throw new Error("CI=true requires Postgres for the multi-instance suite");
    return false;
  }
  return requireRedis();
})();

// The upstream: counts requests in flight, answers after a delay with a fixed usage (cost 0.01).
let inFlight = 0;
let maxInFlight = 0;
let delayMs = 0;
const mock = startMockUpstream(async () => {
  inFlight++;
  maxInFlight = Math.max(maxInFlight, inFlight);
  try {
    if (delayMs) await Bun.sleep(delayMs);
    return openaiCompletion("ok", { prompt: 1000, completion: 0 });
  } finally {
    inFlight--;
  }
});

const gateways: GatewayProcess[] = [];
const cleanups: Array<() => Promise<unknown> | unknown> = [];
let dir = "";

beforeAll(async () => {
  if (!enabled) return;
  const temp = await createTempDatabase();
  cleanups.push(temp.drop);
  dir = mkdtempSync(join(tmpdir(), "gw-multi-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const config = join(dir, "gateway.yaml");
  writeFileSync(
    config,
    [
      "providers:",
      `  up: { type: openai, api_base: "${mock.url}/v1", api_key: upstream-key }`,
      "models:",
      "  - name: up/model",
      "    input_cost_per_token: 0.00001",
      "    output_cost_per_token: 0.00001",
      "    max_output_tokens: 10",
      "router: { num_retries: 0 }",
      "catalog: { include_defaults: false }",
      `redis: { key_prefix: ${uniquePrefix("multi")} }`,
      "limits: { redis_failure: fail_closed, default_output_tokens: 10 }",
      "auth: { key_cache_ttl_seconds: 600 }",
      "",
    ].join("\n"),
  );
  const env = { DATABASE_URL: temp.url, REDIS_URL: TEST_REDIS_URL, GATEWAY_CONFIG: config, GATEWAY_MASTER_KEY: MASTER };
  gateways.push(await spawnGateway(env));
  gateways.push(...(await Promise.all([spawnGateway(env), spawnGateway(env)])));
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  mock.close();
  for (const c of cleanups.reverse()) await c();
});

const post = (g: GatewayProcess, path: string, key: string, body: unknown) =>
  fetch(`${g.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

async function newKey(settings: Record<string, unknown>): Promise<{ key: string; token_id: string }> {
  const team = `team-${Math.random().toString(36).slice(2, 9)}`;
  expect((await post(gateways[0] as GatewayProcess, "/team/new", MASTER, { team_id: team })).status).toBe(200);
  const r = await post(gateways[1] as GatewayProcess, "/key/generate", MASTER, { team_id: team, ...settings });
  expect(r.status).toBe(200);
  return (await r.json()) as { key: string; token_id: string };
}

/** `n` chat requests at once, spread round-robin over the three instances. */
async function burst(key: string, n: number, content = "hi") {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res = await post(gateways[i % 3] as GatewayProcess, "/v1/chat/completions", key, {
        model: "up/model",
        messages: [{ role: "user", content }],
      });
      const body = (await res.json()) as { error?: { type: string; code: string; message: string } };
      return { status: res.status, headers: res.headers, body };
    }),
  );
}

describe("three instances, one Postgres, one Redis", () => {
  test("an rpm limit of N admits exactly N per window, whatever instance a request reaches", async () => {
    if (!enabled) return;
    delayMs = 0;
    const k = await newKey({ rpm_limit: 15 });
    const results = await burst(k.key, 60);
    const ok = results.filter((r) => r.status === 200);
    const limited = results.filter((r) => r.status === 429);
    expect(ok).toHaveLength(15);
    expect(limited).toHaveLength(45);
    const sample = limited[0];
    expect(sample?.body.error).toMatchObject({ type: "rate_limit_error", code: "rpm_limit_exceeded" });
    expect(sample?.body.error?.message).toContain("rpm");
    expect(Number(sample?.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(sample?.headers.get("x-ratelimit-limit-requests")).toBe("15");
    expect(sample?.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(ok[0]?.headers.get("x-ratelimit-limit-requests")).toBe("15");
  });

  test("a parallel cap of P never has more than P calls in flight upstream, and slots come back", async () => {
    if (!enabled) return;
    delayMs = 400;
    maxInFlight = 0;
    const k = await newKey({ max_parallel_requests: 3 });
    const results = await burst(k.key, 24);
    expect(maxInFlight).toBeLessThanOrEqual(3);
    expect(results.filter((r) => r.status === 200).length).toBeGreaterThanOrEqual(3);
    const refused = results.filter((r) => r.status === 429);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]?.body.error).toMatchObject({ code: "parallel_limit_exceeded" });
    // every slot was released: three more at once all pass
    maxInFlight = 0;
    const again = await burst(k.key, 3);
    expect(again.map((r) => r.status)).toEqual([200, 200, 200]);
  });

  test("a budget is not overshot beyond the requests in flight when it was reached", async () => {
    if (!enabled) return;
    delayMs = 300;
    const budget = 0.05; // each request costs 1000 x 0.00001 = 0.01
    const k = await newKey({ max_budget: budget });
    // a prompt of about 1000 tokens, so the reservation (estimated from it) matches what is billed
    const prompt = "lorem ".repeat(1000);
    const results = await burst(k.key, 30, prompt);
    const ok = results.filter((r) => r.status === 200).length;
    // reservations hold the budget while requests are in flight: at most one request's worth over
    expect(ok * 0.01).toBeLessThanOrEqual(budget + 0.01 + 1e-9);
    expect(ok).toBeGreaterThanOrEqual(4);
    const refused = results.filter((r) => r.status === 429);
    expect(refused[0]?.body.error).toMatchObject({ type: "budget_exceeded", code: "budget_exceeded" });
    delayMs = 0;
    const after = await burst(k.key, 3, prompt);
    expect(after.every((r) => r.status === 429 && r.body.error?.type === "budget_exceeded")).toBe(true);
  });

  test("a regenerated or blocked key is rejected by every instance on its next request", async () => {
    if (!enabled) return;
    delayMs = 0;
    const k = await newKey({});
    // every instance has the key cached (long cache TTL)
    for (const r of await burst(k.key, 3)) expect(r.status).toBe(200);
    const regen = await post(gateways[0] as GatewayProcess, "/key/regenerate", MASTER, { key: k.key });
    const fresh = (await regen.json()) as { key: string };
    const old = await burst(k.key, 3);
    expect(old.map((r) => r.status)).toEqual([401, 401, 401]);
    const now = await burst(fresh.key, 3);
    expect(now.map((r) => r.status)).toEqual([200, 200, 200]);
    expect((await post(gateways[2] as GatewayProcess, "/key/block", MASTER, { key: fresh.key })).status).toBe(200);
    const blocked = await burst(fresh.key, 3);
    expect(blocked.map((r) => r.status)).toEqual([401, 401, 401]);
  });
});
