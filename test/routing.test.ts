/** Routing and failure handling through the gateway, against mock upstreams. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import OpenAI from "openai";
import type { ModelConfig } from "../src/config/file";
import { pgliteBackend } from "./helpers/backends";
import { type ErrorWire, type GeneratedWire, startGateway, type TestGateway } from "./helpers/gateway";
import { logsOf } from "./helpers/inference";
import { openaiCompletion, openaiError, openaiFixture } from "./mocks/openai";
import { type MockUpstream, startMockUpstream, streamResponse } from "./mocks/upstream";

const A = startMockUpstream();
const B = startMockUpstream();
const C = startMockUpstream();
/** A port nothing listens on: connections are refused. */
const closedPort = (() => {
  const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
  const port = s.port;
  s.stop(true);
  return port;
})();
let gw: TestGateway;
let key: GeneratedWire;
let client: OpenAI;

const d = (provider: string, model: string, weight = 1) => ({ provider, model, weight });
const models: ModelConfig[] = [
  {
    name: "pa/retry",
    deployments: [d("pa", "retry")],
    max_retries: 2,
    input_cost_per_token: 1e-6,
    output_cost_per_token: 1e-6,
  },
  { name: "pa/bad-request", deployments: [d("pa", "bad")] },
  { name: "pa/rate", deployments: [d("pa", "rate"), d("pb", "rate")] },
  { name: "pa/flaky", deployments: [d("pa", "flaky"), d("pb", "flaky")], max_retries: 1 },
  { name: "pa/primary", deployments: [d("pa", "primary")], fallbacks: ["pc/backup"], max_retries: 1 },
  { name: "pc/backup", input_cost_per_token: 2e-6, output_cost_per_token: 2e-6 },
  { name: "pa/slow", deployments: [d("pa", "slow")], timeout_seconds: 0.3, max_retries: 0 },
  { name: "pa/down", deployments: [d("pa", "down")], max_retries: 1 },
  { name: "pa/limited", deployments: [d("pa", "limited")], max_retries: 0 },
  { name: "pa/weighted", deployments: [d("pa", "w", 3), d("pb", "w", 1)] },
  {
    name: "pa/stream",
    deployments: [d("pa", "stream")],
    max_retries: 1,
    input_cost_per_token: 1e-6,
    output_cost_per_token: 1e-6,
  },
  {
    name: "pa/idle",
    deployments: [d("pa", "idle")],
    stream_idle_timeout_seconds: 0.4,
    max_retries: 0,
    input_cost_per_token: 1e-6,
    output_cost_per_token: 1e-6,
  },
  {
    name: "pa/ridle",
    mode: "responses",
    deployments: [d("pa", "ridle")],
    stream_idle_timeout_seconds: 0.4,
    max_retries: 0,
    input_cost_per_token: 1e-6,
    output_cost_per_token: 1e-6,
  },
  // pd's provider timeout (0.25 s) applies only where neither the model nor the deployment sets one.
  { name: "pd/patient", timeout_seconds: 5, max_retries: 0 },
  { name: "pd/provider-default", max_retries: 0 },
  {
    name: "pd/deployment-own",
    timeout_seconds: 5,
    deployments: [{ provider: "pd", model: "deployment-own", timeout_seconds: 0.25 }],
    max_retries: 0,
  },
  { name: "dead/fallback", max_retries: 1, fallbacks: ["pc/backup"] },
  { name: "dead/only", max_retries: 1 },
];

beforeAll(async () => {
  gw = await startGateway(pgliteBackend, {
    heartbeatMs: 100,
    inference: {
      providers: {
        pa: { type: "openai", api_base: A.url, api_key: "ka" },
        pb: { type: "openai", api_base: B.url, api_key: "kb" },
        pc: { type: "openai", api_base: C.url, api_key: "kc" },
        pd: { type: "openai", api_base: A.url, api_key: "kd", timeout_seconds: 0.25 },
        dead: { type: "openai", api_base: `http://127.0.0.1:${closedPort}/v1`, api_key: "kdead" },
      },
      models,
      router: { retry_backoff_ms: 1, cooldown_seconds: 60, allowed_fails: 2 },
    },
  });
  key = await gw.newKey();
  client = new OpenAI({ baseURL: `${gw.listen()}/v1`, apiKey: key.key, maxRetries: 0 });
});
afterAll(async () => {
  await gw.close();
  for (const m of [A, B, C]) m.close();
});

const ask = (model: string) =>
  client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] }).withResponse();
const modelOf = (m: MockUpstream, name: string) =>
  m.requests.filter((r) => (r.json as { model?: string })?.model === name);

async function lastLog(model?: string): Promise<Record<string, unknown>> {
  await gw.flush();
  const where = model === undefined ? sql`` : sql`where model = ${model}`;
  const res: unknown = await gw.opened.database.db.execute(
    sql`select * from request_logs ${where} order by created_at desc, request_id desc limit 1`,
  );
  return ((res as { rows: Record<string, unknown>[] }).rows ?? [])[0] ?? {};
}

describe("retries and failures", () => {
  test("a 500 is retried and the second attempt answers", async () => {
    A.enqueue(() => openaiError(500, "boom", "server_error"));
    A.setDefault((r) =>
      (r.json as { model: string }).model === "retry"
        ? openaiCompletion("second try", { prompt: 3, completion: 2 })
        : openaiError(500, "unexpected", "x"),
    );
    const { data } = await ask("pa/retry");
    expect(data.choices[0]?.message.content).toBe("second try");
    expect(modelOf(A, "retry")).toHaveLength(2);
    expect(await lastLog()).toMatchObject({ attempts: 2, status: 200, model: "pa/retry" });
  });

  test("a 400 is not retried", async () => {
    A.enqueue(() => openaiError(400, "bad field", "invalid_request_error"));
    const err = await ask("pa/bad-request").catch((e) => e);
    expect(err.status).toBe(400);
    expect(modelOf(A, "bad")).toHaveLength(1);
  });

  test("a 429 cools that deployment down and the other one serves, now and afterwards", async () => {
    let served = 0;
    const first429 = (m: MockUpstream) => () =>
      served++ === 0
        ? openaiError(429, "slow down", "requests", { "retry-after": "30" })
        : openaiCompletion(`from ${m === A ? "A" : "B"}`, { prompt: 1, completion: 1 });
    A.setDefault(first429(A));
    B.setDefault(first429(B));
    for (let i = 0; i < 6; i++) expect((await ask("pa/rate")).data.choices[0]?.message.content).toMatch(/^from [AB]$/);
    const counts = [modelOf(A, "rate").length, modelOf(B, "rate").length].sort();
    // the one that answered 429 saw exactly that one request; the other took all six
    expect(counts).toEqual([1, 6]);
  });

  test("a deployment failing allowed_fails times in a row is cooled down", async () => {
    A.setDefault((r) =>
      (r.json as { model: string }).model === "flaky"
        ? openaiError(503, "unavailable", "server_error")
        : openaiError(500, "x", "x"),
    );
    B.setDefault(() => openaiCompletion("B is fine", { prompt: 1, completion: 1 }));
    // Deployments are picked at random: keep asking until the failing one has been tried twice...
    for (let i = 0; i < 100 && modelOf(A, "flaky").length < 2; i++) {
      expect((await ask("pa/flaky")).data.choices[0]?.message.content).toBe("B is fine");
    }
    expect(modelOf(A, "flaky")).toHaveLength(2);
    expect(gw.inference.router.isCoolingDown("pa/flaky")).toBe(true);
    // ...after which it is skipped: every further request goes straight to the healthy one.
    for (let i = 0; i < 10; i++) expect((await ask("pa/flaky")).data.choices[0]?.message.content).toBe("B is fine");
    expect(modelOf(A, "flaky")).toHaveLength(2);
  });

  test("when every deployment fails, the fallback model serves and is named in the headers and the log", async () => {
    A.setDefault(() => openaiError(503, "down", "server_error"));
    C.setDefault(() => openaiCompletion("backup here", { prompt: 10, completion: 5 }));
    const { data, response } = await ask("pa/primary");
    expect(data.choices[0]?.message.content).toBe("backup here");
    expect(response.headers.get("x-gateway-model")).toBe("pc/backup");
    expect(modelOf(A, "primary")).toHaveLength(2);
    const row = await lastLog();
    expect(row).toMatchObject({ model: "pc/backup", requested_model: "pa/primary", provider: "pc", attempts: 3 });
    expect(row.cost as number).toBeCloseTo(15 * 2e-6, 15);
  });

  test("a slow upstream times out: 504, and the upstream call is abandoned", async () => {
    let upstreamSignal: AbortSignal | undefined;
    A.setDefault(async (_r, raw) => {
      upstreamSignal = raw.signal;
      await Bun.sleep(3000);
      return openaiCompletion("too late", { prompt: 1, completion: 1 });
    });
    const err = await ask("pa/slow").catch((e) => e);
    expect(err.status).toBe(504);
    expect(err.error).toMatchObject({ code: "upstream_timeout" });
    for (let i = 0; i < 40 && !upstreamSignal?.aborted; i++) await Bun.sleep(25);
    expect(upstreamSignal?.aborted).toBe(true);
  });

  test("when every attempt fails the client gets the upstream's status", async () => {
    A.setDefault(() => openaiError(503, "maintenance", "server_error"));
    const err = await ask("pa/down").catch((e) => e);
    expect(err.status).toBe(503);
    expect(err.message).toContain("maintenance");
    // The request log names where the last attempt went, and how many were made.
    expect(await lastLog("pa/down")).toMatchObject({
      status: 503,
      provider: "pa",
      deployment: "pa/down",
      upstream_model: "down",
      attempts: 2,
    });
    A.setDefault(() => openaiError(429, "quota", "requests", { "retry-after": "7" }));
    const limited = await client.chat.completions
      .create({ model: "pa/limited", messages: [{ role: "user", content: "x" }] })
      .withResponse()
      .catch((e) => e);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("7");
  });

  test("a refused connection is retried, then the fallback serves; alone, it is a 502 logged with its deployment", async () => {
    C.setDefault(() => openaiCompletion("backup here", { prompt: 2, completion: 1 }));
    const before = C.requests.length;
    const { data, response } = await ask("dead/fallback");
    expect(data.choices[0]?.message.content).toBe("backup here");
    expect(response.headers.get("x-gateway-model")).toBe("pc/backup");
    expect(C.requests.length - before).toBe(1);
    expect(await lastLog("pc/backup")).toMatchObject({ requested_model: "dead/fallback", attempts: 3, status: 200 });

    const err = await ask("dead/only").catch((e) => e);
    expect(err.status).toBe(502);
    expect(err.error).toMatchObject({ code: "upstream_unreachable" });
    expect(await lastLog("dead/only")).toMatchObject({
      status: 502,
      error_code: "upstream_unreachable",
      provider: "dead",
      deployment: "dead/only",
      attempts: 2,
    });
  });

  test("timeouts: the model's beats its provider's; the provider's applies when the model sets none; the deployment's beats both", async () => {
    A.setDefault(async () => {
      await Bun.sleep(700);
      return openaiCompletion("in the end", { prompt: 1, completion: 1 });
    });
    const { data } = await ask("pd/patient");
    expect(data.choices[0]?.message.content).toBe("in the end");
    for (const model of ["pd/provider-default", "pd/deployment-own"]) {
      const err = await ask(model).catch((e) => e);
      expect(err.status).toBe(504);
      expect(err.error).toMatchObject({ code: "upstream_timeout" });
    }
  });

  test("weights share the load", async () => {
    A.setDefault(() => openaiCompletion("A", { prompt: 1, completion: 1 }));
    B.setDefault(() => openaiCompletion("B", { prompt: 1, completion: 1 }));
    const r = await Promise.all(
      Array.from({ length: 200 }, () =>
        gw.call<{ choices: { message: { content: string } }[] }>("POST", "/v1/chat/completions", {
          key: key.key,
          body: { model: "pa/weighted", messages: [{ role: "user", content: "x" }] },
        }),
      ),
    );
    const fromA = r.filter((x) => x.body.choices[0]?.message.content === "A").length;
    expect(fromA).toBeGreaterThan(120);
    expect(fromA).toBeLessThan(180);
  });
});

describe("streams", () => {
  const frames = () =>
    openaiFixture("chat-stream.sse")
      .split("\n\n")
      .filter((f) => f.trim() !== "")
      .map((f) => `${f.replace(/"model":"[^"]+"/, '"model":"stream"')}\n\n`);

  test("a stream that fails before its first byte is retried", async () => {
    A.enqueue(() => openaiError(502, "bad gateway", "server_error"));
    A.setDefault(() => streamResponse(frames()));
    const s = await client.chat.completions.create({
      model: "pa/stream",
      messages: [{ role: "user", content: "x" }],
      stream: true,
    });
    let text = "";
    for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Lisbon is sunny today.");
    expect(modelOf(A, "stream")).toHaveLength(2);
  });

  test("silence on a stream gets keep-alive comments", async () => {
    const f = frames();
    A.setDefault(() => {
      const body = new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(new TextEncoder().encode(f[0]));
          await Bun.sleep(450);
          for (const x of f.slice(1)) c.enqueue(new TextEncoder().encode(x));
          c.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    const res = await fetch(`${gw.listen()}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "pa/stream", messages: [{ role: "user", content: "x" }], stream: true }),
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(res.headers.get("x-accel-buffering")).toBe("no");
    const text = await res.text();
    expect(text).toContain(": keepalive");
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
  });

  test("a client that disconnects mid-stream aborts the upstream call and is billed for what was produced", async () => {
    const f = frames();
    A.setDefault(() =>
      streamResponse([...f.slice(0, 3), ...Array.from({ length: 60 }, () => f[2] as string), ...f.slice(3)], {
        delayMs: 40,
      }),
    );
    const controller = new AbortController();
    const res = await fetch(`${gw.listen()}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "pa/stream",
        messages: [{ role: "user", content: "What is the weather like in Lisbon today?" }],
        stream: true,
      }),
      signal: controller.signal,
    });
    const reader = res.body?.getReader();
    let seen = "";
    while (!seen.includes("sunny")) {
      const { value } = (await reader?.read()) ?? {};
      seen += new TextDecoder().decode(value);
    }
    controller.abort();
    for (let i = 0; i < 50 && A.open > 0; i++) await Bun.sleep(50);
    expect(A.open).toBe(0);
    let row: Record<string, unknown> = {};
    for (let i = 0; i < 50 && row.status !== 499; i++) {
      row = await lastLog("pa/stream");
      if (row.status !== 499) await Bun.sleep(50);
    }
    expect(row).toMatchObject({
      status: 499,
      error_code: "client_closed_request",
      usage_estimated: true,
      stream: true,
    });
    expect(row.output_tokens as number).toBeGreaterThan(0);
    expect(row.input_tokens as number).toBeGreaterThan(0);
    expect(row.cost as number).toBeGreaterThan(0);
  });
});

describe("streams that go silent", () => {
  /** The first frames of a stream, then silence until the gateway gives up on it. */
  const silentAfter = (n: number) => {
    const f = openaiFixture("chat-stream.sse")
      .split("\n\n")
      .filter((x) => x.trim() !== "")
      .map((x) => `${x.replace(/"model":"[^"]+"/, '"model":"idle"')}\n\n`);
    return (_r: unknown, raw: Request) =>
      new Response(
        new ReadableStream<Uint8Array>({
          start(c) {
            for (const x of f.slice(0, n)) c.enqueue(new TextEncoder().encode(x));
            raw.signal.addEventListener("abort", () => c.close());
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      );
  };

  test("an upstream silent past stream_idle_timeout_seconds: aborted, a 504 error frame, logged and billed for what it produced", async () => {
    const k = await gw.newKey();
    const c = new OpenAI({ baseURL: `${gw.listen()}/v1`, apiKey: k.key, maxRetries: 0 });
    A.setDefault(silentAfter(3));
    const s = await c.chat.completions.create({
      model: "pa/idle",
      messages: [{ role: "user", content: "What is the weather like in Lisbon today?" }],
      stream: true,
    });
    let text = "";
    const err = await (async () => {
      for await (const ch of s) text += ch.choices[0]?.delta?.content ?? "";
    })().catch((e) => e);
    expect(text).toBe("Lisbon is sunny");
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.error).toMatchObject({ code: "upstream_timeout" });
    for (let i = 0; i < 50 && A.open > 0; i++) await Bun.sleep(20);
    expect(A.open).toBe(0);
    const [row] = await logsOf(gw, k.token_id);
    expect(row).toMatchObject({
      model: "pa/idle",
      deployment: "pa/idle",
      status: 504,
      error_code: "upstream_timeout",
      usage_estimated: true,
      stream: true,
    });
    expect(row?.output_tokens as number).toBeGreaterThan(0);
    expect(row?.cost as number).toBeGreaterThan(0);
  });

  test("the same through a translated protocol (/v1/messages): an Anthropic error event, then the end", async () => {
    const k = await gw.newKey();
    A.setDefault(silentAfter(3));
    const res = await fetch(`${gw.listen()}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": k.key, "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({
        model: "pa/idle",
        max_tokens: 100,
        messages: [{ role: "user", content: "Weather?" }],
        stream: true,
      }),
    });
    const text = await res.text();
    expect(text).toContain("is sunny");
    expect(text).toMatch(
      /event: error\ndata: \{"type":"error","error":\{"type":"[a-z_]+","message":"The upstream provider did not answer in time/,
    );
    const [row] = await logsOf(gw, k.token_id);
    expect(row).toMatchObject({ status: 504, error_code: "upstream_timeout", endpoint: "/v1/messages" });
  });

  test("the same forwarded natively (/v1/responses to a Responses API upstream): response.failed with a 504", async () => {
    const k = await gw.newKey();
    const frames = openaiFixture("responses-stream.sse")
      .split("\n\n")
      .filter((x) => x.trim() !== "")
      .map((x) => `${x}\n\n`);
    A.setDefault(
      (_r, raw) =>
        new Response(
          new ReadableStream<Uint8Array>({
            start(c) {
              for (const x of frames.slice(0, 4)) c.enqueue(new TextEncoder().encode(x));
              raw.signal.addEventListener("abort", () => c.close());
            },
          }),
          { headers: { "content-type": "text/event-stream" } },
        ),
    );
    const res = await fetch(`${gw.listen()}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${k.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "pa/ridle", input: "Weather?", stream: true }),
    });
    const text = await res.text();
    expect(text).toContain("event: response.created");
    // The Responses API's own error vocabulary (server_error), with the gateway's reason.
    expect(text).toMatch(
      /event: response\.failed\ndata: \{[^\n]*"error":\{"code":"server_error","message":"The upstream provider did not answer in time/,
    );
    for (let i = 0; i < 50 && A.open > 0; i++) await Bun.sleep(20);
    expect(A.open).toBe(0);
    const [row] = await logsOf(gw, k.token_id);
    expect(row).toMatchObject({ status: 504, error_code: "upstream_timeout", endpoint: "/v1/responses" });
  });

  test("a stream that keeps producing is not cut, however long it lasts", async () => {
    const f = openaiFixture("chat-stream.sse")
      .split("\n\n")
      .filter((x) => x.trim() !== "")
      .map((x) => `${x}\n\n`);
    // 0.15 s between frames, about 1.7 s in all: well past the 0.4 s idle timeout, never silent that long.
    A.setDefault(() =>
      streamResponse([...f.slice(0, 2), ...Array.from({ length: 4 }, () => f[2] as string), ...f.slice(2)], {
        delayMs: 150,
      }),
    );
    const s = await client.chat.completions.create({
      model: "pa/idle",
      messages: [{ role: "user", content: "x" }],
      stream: true,
    });
    let text = "";
    for await (const ch of s) text += ch.choices[0]?.delta?.content ?? "";
    expect(text).toBe(`Lisbon${" is sunny".repeat(5)} today.`);
  });
});

describe("non-streaming disconnects", () => {
  test("a client that gives up aborts the upstream call; the request is logged as 499", async () => {
    let upstreamSignal: AbortSignal | undefined;
    A.setDefault(async (_r, raw) => {
      upstreamSignal = raw.signal;
      await Bun.sleep(2000);
      return openaiCompletion("too late", { prompt: 1, completion: 1 });
    });
    const controller = new AbortController();
    const pending = fetch(`${gw.listen()}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "pa/down", messages: [{ role: "user", content: "x" }] }),
      signal: controller.signal,
    }).catch((e) => e);
    for (let i = 0; i < 40 && !upstreamSignal; i++) await Bun.sleep(25);
    controller.abort();
    await pending;
    for (let i = 0; i < 40 && !upstreamSignal?.aborted; i++) await Bun.sleep(25);
    expect(upstreamSignal?.aborted).toBe(true);
    // Wait for this request's own row: an earlier test's streamed disconnect also logged a 499.
    let row: Record<string, unknown> = {};
    for (let i = 0; i < 40 && row.status !== 499; i++) {
      row = await lastLog("pa/down");
      if (row.status !== 499) await Bun.sleep(25);
    }
    expect(row).toMatchObject({ status: 499, model: "pa/down", output_tokens: 0 });
  });
});

describe("long silent calls", () => {
  test("a stream silent for longer than the server's idle timeout is not cut off", async () => {
    const g = await startGateway(pgliteBackend, {
      heartbeatMs: 60_000,
      inference: { providers: { pa: { type: "openai", api_base: A.url } }, models: [{ name: "pa/thinker" }] },
    });
    const k = await g.newKey();
    const f = openaiFixture("chat-stream.sse")
      .split("\n\n")
      .filter((x) => x.trim() !== "")
      .map((x) => `${x}\n\n`);
    A.setDefault(() => {
      const body = new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(new TextEncoder().encode(f[0]));
          await Bun.sleep(2500);
          for (const x of f.slice(1)) c.enqueue(new TextEncoder().encode(x));
          c.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    });
    // The server's idle timeout (1 s here) must not cut a stream that goes silent for longer. The
    // gateway opts every inference request out of it (server.timeout(req, 0)); this checks the
    // outcome, whichever way the running Bun version applies its idle timer.
    const url = g.listen({ idleTimeout: 1 });
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${k.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "pa/thinker", messages: [{ role: "user", content: "x" }], stream: true }),
    });
    const text = await res.text();
    expect(text).toContain("sunny");
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
    await g.close();
  });
});

describe("deployments' rpm and tpm", () => {
  test("a deployment at its rpm is skipped; with every one at its limit the client gets a 429 with retry-after; tpm sends the rest to the fallback", async () => {
    // The router's clock stands still 20 s into a minute: every request falls in the same window.
    const minuteStart = Math.floor(Date.now() / 60_000) * 60_000;
    const g = await startGateway(pgliteBackend, {
      routerNow: () => minuteStart + 20_000,
      inference: {
        providers: {
          pa: { type: "openai", api_base: A.url, api_key: "ka" },
          pb: { type: "openai", api_base: B.url, api_key: "kb" },
          pc: { type: "openai", api_base: C.url, api_key: "kc" },
        },
        models: [
          {
            name: "pa/metered",
            deployments: [
              { provider: "pa", model: "m", rpm: 1 },
              { provider: "pb", model: "m", rpm: 2 },
            ],
          },
          { name: "pa/tokens", deployments: [{ provider: "pa", model: "t", tpm: 100 }], fallbacks: ["pc/backup"] },
          { name: "pc/backup" },
        ],
      },
    });
    const k = await g.newKey();
    const c = new OpenAI({ baseURL: `${g.listen()}/v1`, apiKey: k.key, maxRetries: 0 });
    const call = (model: string) =>
      c.chat.completions.create({ model, messages: [{ role: "user", content: "x" }] }).withResponse();
    A.setDefault(() => openaiCompletion("A", { prompt: 80, completion: 30 }));
    B.setDefault(() => openaiCompletion("B", { prompt: 1, completion: 1 }));
    C.setDefault(() => openaiCompletion("C", { prompt: 1, completion: 1 }));
    const before = { a: modelOf(A, "m").length, b: modelOf(B, "m").length };
    const served = [];
    for (let i = 0; i < 3; i++) served.push((await call("pa/metered")).data.choices[0]?.message.content);
    expect(served.sort()).toEqual(["A", "B", "B"]);
    const limited = await call("pa/metered").catch((e) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect(limited.error).toMatchObject({ code: "deployment_rate_limited" });
    expect(limited.headers.get("retry-after")).toBe("40");
    expect({ a: modelOf(A, "m").length - before.a, b: modelOf(B, "m").length - before.b }).toEqual({ a: 1, b: 2 });

    // 110 tokens reported by the first call: the deployment is past its tpm for this minute.
    expect((await call("pa/tokens")).data.choices[0]?.message.content).toBe("A");
    const second = await call("pa/tokens");
    expect(second.data.choices[0]?.message.content).toBe("C");
    expect(second.response.headers.get("x-gateway-model")).toBe("pc/backup");
    await g.close();
  });
});

describe("request errors before routing", () => {
  test("a model of the wrong mode is a 400", async () => {
    const g = await startGateway(pgliteBackend, {
      inference: {
        providers: { pa: { type: "openai", api_base: A.url } },
        models: [{ name: "pa/embed", mode: "embedding" }],
      },
    });
    const k = await g.newKey();
    const r = await g.call<ErrorWire>("POST", "/v1/chat/completions", {
      key: k.key,
      body: { model: "pa/embed", messages: [{ role: "user", content: "x" }] },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("wrong_model_mode");
    await g.close();
  });
});
