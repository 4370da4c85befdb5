import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { verify } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { collect } from "../../../test/helpers/streams";
import { assertionOf, googleError, sseFrames, testServiceAccount, tokenResponse } from "../../../test/mocks/gemini";
import { startMockUpstream, streamResponse } from "../../../test/mocks/upstream";
import { ConfigError } from "../../config/error";
import type { ProviderConfig } from "../../config/file";
import { silentLogger } from "../../log";
import type { CanonicalRequest } from "../../protocols/canonical";
import { UpstreamError } from "../errors";
import type { ImageFetcher } from "../images";
import type { CallContext, Deployment } from "../types";
import { createVertexAdapter, isClaudeModel, ServiceAccountTokens, TOKEN_REFRESH_MARGIN_MS } from "./adapter";

const fixture = (name: string) => readFileSync(join(import.meta.dir, "fixtures", name), "utf8");

const tokenMock = startMockUpstream(tokenResponse());
const api = startMockUpstream();
afterAll(() => {
  tokenMock.close();
  api.close();
});
beforeEach(() => {
  tokenMock.reset();
  tokenMock.setDefault(tokenResponse());
  api.reset();
});

const TOKEN_URI = `${tokenMock.url}/token`;
const sa = testServiceAccount(TOKEN_URI);

const noFetch: ImageFetcher = async (url) => {
  throw new Error(`unexpected download of ${url}`);
};
const ctx = (over: Partial<CallContext> = {}): CallContext => ({
  signal: new AbortController().signal,
  log: silentLogger,
  fetchImage: noFetch,
  ...over,
});
const deployment = (model = "gemini-2.5-flash", over: Partial<Deployment> = {}): Deployment => ({
  id: `vertex/${model}`,
  provider: "vertex",
  upstreamModel: model,
  weight: 1,
  ...over,
});
const req = (over: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  model: "vertex/x",
  system: [],
  messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  stream: false,
  ...over,
});
const cfg = (over: Partial<ProviderConfig> = {}): ProviderConfig => ({
  type: "vertex",
  project: "gw-test-project",
  location: "europe-west4",
  credentials: sa.json,
  api_base: `${api.url}/v1`,
  ...over,
});
const geminiOk = () =>
  new Response(fixture("generate-content.json"), { headers: { "content-type": "application/json" } });

function configError(f: () => unknown): ConfigError {
  try {
    f();
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error("no ConfigError");
}

describe("vertex configuration", () => {
  test("project and credentials are required; errors name the field and never show the key", () => {
    expect(configError(() => createVertexAdapter("vx", cfg({ project: undefined }))).message).toContain(
      "providers.vx.project",
    );
    expect(configError(() => createVertexAdapter("vx", cfg({ credentials: undefined }))).message).toContain(
      "providers.vx.credentials",
    );
    const cases: [string, string][] = [
      ["{not json", "not a service-account key"],
      [JSON.stringify({ type: "authorized_user", refresh_token: "1//secret-refresh" }), "authorized_user"],
      [JSON.stringify({ type: "service_account", client_email: "a@b.c" }), "private_key"],
      [JSON.stringify({ type: "service_account", private_key: "x" }), "client_email"],
      [
        JSON.stringify({
          type: "service_account",
          client_email: "a@b.c",
          private_key: "-----BEGIN PRIVATE KEY-----\nnope\n",
        }),
        "not a usable PEM private key",
      ],
      [JSON.parse(JSON.stringify(sa.json)).replace(TOKEN_URI, "ftp://x"), "token_uri"],
      ["/definitely/not/here/key.json", "cannot read"],
    ];
    for (const [credentials, want] of cases) {
      const e = configError(() => createVertexAdapter("vx", cfg({ credentials })));
      expect(e.message).toContain("providers.vx.credentials");
      expect(e.message).toContain(want);
      expect(e.message).not.toContain("secret-refresh");
      expect(e.message).not.toContain("BEGIN PRIVATE KEY");
    }
    expect(configError(() => createVertexAdapter("vx", cfg({ location: "us-central1/../x" }))).message).toContain(
      "providers.vx.location",
    );
  });

  test("credentials may be a file path", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vertex-key-"));
    const path = join(dir, "sa.json");
    writeFileSync(path, sa.json);
    api.enqueue(geminiOk);
    const res = await createVertexAdapter("vx", cfg({ credentials: path })).chat(req(), deployment(), ctx());
    expect(res.choices[0]?.content).toEqual([{ type: "text", text: "Porto is cloudy, 17 °C." }]);
  });

  test("Claude models are told apart by name", () => {
    expect(isClaudeModel("claude-sonnet-4-5@20250929")).toBe(true);
    expect(isClaudeModel("Claude-3-haiku")).toBe(true);
    expect(isClaudeModel("gemini-2.5-pro")).toBe(false);
  });
});

describe("service-account tokens", () => {
  test("the assertion is an RS256 JWT signed by the key, with Google's claims, posted as a form", async () => {
    const now = 1_761_000_000_500;
    const a = createVertexAdapter("vx", cfg(), { now: () => now });
    api.enqueue(geminiOk);
    await a.chat(req(), deployment(), ctx());
    expect(tokenMock.requests).toHaveLength(1);
    const t = tokenMock.requests[0];
    expect(t?.method).toBe("POST");
    expect(t?.path).toBe("/token");
    expect(t?.headers["content-type"]).toBe("application/x-www-form-urlencoded");
    const form = new URLSearchParams(t?.text);
    expect(form.get("grant_type")).toBe("urn:ietf:params:oauth:grant-type:jwt-bearer");
    const { header, claims, raw } = assertionOf(tokenMock, 0);
    expect(header).toEqual({ alg: "RS256", typ: "JWT", kid: "4f1c2d3e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d" });
    expect(claims).toEqual({
      iss: sa.clientEmail,
      scope: "https://www.googleapis.com/auth/cloud-platform",
      aud: TOKEN_URI,
      iat: 1_761_000_000,
      exp: 1_761_003_600,
    });
    const [h, c, sig] = raw.split(".") as [string, string, string];
    expect(verify("RSA-SHA256", Buffer.from(`${h}.${c}`), sa.publicKey, Buffer.from(sig, "base64url"))).toBe(true);
    expect(verify("RSA-SHA256", Buffer.from(`${h}.${c}x`), sa.publicKey, Buffer.from(sig, "base64url"))).toBe(false);
    expect(api.requests[0]?.headers.authorization).toMatch(/^Bearer ya29\.mock-access-token-\d+$/);
  });

  test("one token serves many calls until 60 s before expiry, then it is refreshed", async () => {
    let now = 1_761_000_000_000;
    tokenMock.setDefault(tokenResponse({ expiresIn: 3600 }));
    const a = createVertexAdapter("vx", cfg(), { now: () => now });
    for (let i = 0; i < 3; i++) {
      api.enqueue(geminiOk);
      await a.chat(req(), deployment(), ctx());
    }
    expect(tokenMock.requests).toHaveLength(1);
    const first = api.requests[0]?.headers.authorization;
    expect(api.requests.map((r) => r.headers.authorization)).toEqual([first, first, first]);

    now += 3600_000 - TOKEN_REFRESH_MARGIN_MS - 1;
    api.enqueue(geminiOk);
    await a.chat(req(), deployment(), ctx());
    expect(tokenMock.requests).toHaveLength(1);

    now += 2;
    api.enqueue(geminiOk);
    await a.chat(req(), deployment(), ctx());
    expect(tokenMock.requests).toHaveLength(2);
    expect(api.requests[4]?.headers.authorization).not.toBe(first);
    expect((assertionOf(tokenMock, 1).claims as { iat: number }).iat).toBe(Math.floor(now / 1000));
  });

  test("concurrent calls share one token request", async () => {
    tokenMock.setDefault(async () => {
      await Bun.sleep(50);
      return tokenResponse({ token: "ya29.shared" })(undefined as never, undefined as never);
    });
    api.setDefault(geminiOk);
    try {
      const a = createVertexAdapter("vx", cfg());
      const results = await Promise.all(Array.from({ length: 12 }, () => a.chat(req(), deployment(), ctx())));
      expect(results).toHaveLength(12);
      expect(tokenMock.requests).toHaveLength(1);
      expect(new Set(api.requests.map((r) => r.headers.authorization))).toEqual(new Set(["Bearer ya29.shared"]));
    } finally {
      api.setDefault(() => Response.json({ error: { message: "no mock response queued" } }, { status: 500 }));
    }
  });

  test("a caller that gives up does not cancel the shared refresh", async () => {
    tokenMock.setDefault(async () => {
      await Bun.sleep(60);
      return tokenResponse({ token: "ya29.slow" })(undefined as never, undefined as never);
    });
    const tokens = new ServiceAccountTokens(
      { client_email: sa.clientEmail, private_key: sa.privateKeyPem, token_uri: TOKEN_URI },
      "vx",
    );
    const quitter = new AbortController();
    const gaveUp = tokens.token(quitter.signal).catch((e) => e);
    const patient = tokens.token(new AbortController().signal);
    quitter.abort();
    expect(await gaveUp).toBeInstanceOf(UpstreamError);
    expect(await patient).toBe("ya29.slow");
    expect(tokenMock.requests).toHaveLength(1);
  });

  test("a refused key is a 401 UpstreamError without credentials; failures are not cached", async () => {
    tokenMock.enqueue(() => new Response(fixture("token-error.json"), { status: 400 }));
    const a = createVertexAdapter("vx", cfg());
    const err = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect([err.kind, err.status, err.upstreamType]).toEqual(["http", 401, "invalid_grant"]);
    expect(err.message).toContain("Invalid JWT Signature");
    const assertion = assertionOf(tokenMock, 0).raw;
    expect(err.message).not.toContain(assertion.slice(-20));
    expect(err.message).not.toContain("PRIVATE KEY");
    expect(api.requests).toHaveLength(0);

    tokenMock.enqueue(() => Response.json({ error: "internal_failure" }, { status: 503 }));
    const down = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect([down.status, down.retryable]).toEqual([503, true]);

    tokenMock.enqueue(() => Response.json({ token_type: "Bearer" }));
    const empty = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect([empty.kind, empty.status]).toEqual(["protocol", 502]);

    api.enqueue(geminiOk);
    await a.chat(req(), deployment(), ctx());
    expect(tokenMock.requests).toHaveLength(4);
  });

  test("an unreachable token endpoint is a connection failure", async () => {
    const dead = testServiceAccount("http://127.0.0.1:9/token");
    const err = await createVertexAdapter("vx", cfg({ credentials: dead.json }))
      .chat(req(), deployment(), ctx())
      .catch((e) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.kind).toBe("connection");
  });

  test("a 401 from Vertex drops the cached token so the next call gets a new one", async () => {
    const a = createVertexAdapter("vx", cfg());
    api.enqueue(() => googleError(401, "Request had invalid authentication credentials.", "UNAUTHENTICATED"));
    const err = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect(err.status).toBe(401);
    api.enqueue(geminiOk);
    await a.chat(req(), deployment(), ctx());
    expect(tokenMock.requests).toHaveLength(2);
    expect(api.requests[0]?.headers.authorization).not.toBe(api.requests[1]?.headers.authorization);
  });
});

describe("vertex Gemini models", () => {
  test("generateContent on the regional publisher path, bearer token, configured headers, Gemini body", async () => {
    api.enqueue(geminiOk);
    const a = createVertexAdapter("vx", cfg({ headers: { "x-goog-user-project": "billing-proj" } }));
    expect(a.type).toBe("vertex");
    const res = await a.chat(
      req({ maxTokens: 64, system: [{ type: "text", text: "Be brief." }] }),
      deployment(),
      ctx(),
    );
    const up = api.requests[0];
    expect(up?.path).toBe(
      "/v1/projects/gw-test-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent",
    );
    expect(up?.headers["x-goog-user-project"]).toBe("billing-proj");
    expect(up?.headers["x-goog-api-key"]).toBeUndefined();
    expect(up?.json).toEqual({
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      systemInstruction: { parts: [{ text: "Be brief." }] },
      generationConfig: { maxOutputTokens: 64 },
    });
    expect(res).toMatchObject({
      id: "a1L3aPnnHp6UmecP6t7-kQk",
      model: "gemini-2.5-flash",
      created: Math.floor(Date.parse("2025-10-21T09:14:03.512345Z") / 1000),
      usage: { inputTokens: 2400, cacheReadTokens: 2048, cacheWriteTokens: 0, outputTokens: 209, reasoningTokens: 200 },
    });
  });

  test("streamGenerateContent?alt=sse, parallel calls with minted ids", async () => {
    api.enqueue(() => streamResponse(sseFrames(fixture("stream-tools.sse"))));
    const a = createVertexAdapter("vx", cfg());
    const events = await collect(await a.chatStream(req({ stream: true }), deployment(), ctx()));
    expect(api.requests[0]?.path).toBe(
      "/v1/projects/gw-test-project/locations/europe-west4/publishers/google/models/gemini-2.5-flash:streamGenerateContent",
    );
    expect(api.requests[0]?.query.get("alt")).toBe("sse");
    const calls = events.filter((e) => e.type === "tool_call_start" || e.type === "tool_call_delta");
    expect(calls).toEqual([
      {
        type: "tool_call_start",
        choice: 0,
        index: 0,
        id: expect.stringMatching(/^call_/) as unknown as string,
        name: "get_weather",
      },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city":"Lisbon"}' },
      {
        type: "tool_call_start",
        choice: 0,
        index: 1,
        id: expect.stringMatching(/^call_/) as unknown as string,
        name: "get_time",
      },
      { type: "tool_call_delta", choice: 0, index: 1, arguments: '{"tz":"Europe/Lisbon"}' },
    ]);
    expect(events.find((e) => e.type === "finish")).toEqual({ type: "finish", choice: 0, reason: "tool_calls" });
  });

  test("default hosts: regional, global, and us-central1 when no location is set", async () => {
    const calls: string[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = (async (url: string | URL | Request, init?: RequestInit) => {
      const u = String(url);
      if (u === TOKEN_URI) return realFetch(url, init);
      calls.push(u);
      return geminiOk();
    }) as typeof fetch;
    try {
      for (const location of ["asia-northeast1", "global", undefined]) {
        await createVertexAdapter("vx", cfg({ api_base: undefined, location })).chat(req(), deployment(), ctx());
      }
    } finally {
      globalThis.fetch = realFetch;
    }
    expect(calls).toEqual([
      "https://asia-northeast1-aiplatform.googleapis.com/v1/projects/gw-test-project/locations/asia-northeast1/publishers/google/models/gemini-2.5-flash:generateContent",
      "https://aiplatform.googleapis.com/v1/projects/gw-test-project/locations/global/publishers/google/models/gemini-2.5-flash:generateContent",
      "https://us-central1-aiplatform.googleapis.com/v1/projects/gw-test-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent",
    ]);
  });

  test("upstream errors keep status and retry delay, and never carry the token", async () => {
    const a = createVertexAdapter("vx", cfg());
    api.enqueue(() => new Response(fixture("error-429.json"), { status: 429 }));
    const rl = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect([rl.status, rl.retryAfterMs, rl.upstreamType]).toEqual([429, 8000, "RESOURCE_EXHAUSTED"]);
    const token = api.requests[0]?.headers.authorization?.slice("Bearer ".length) ?? "";
    api.enqueue(() => googleError(500, `Internal error for token ${token}`, "INTERNAL"));
    const down = await a.chatStream(req({ stream: true }), deployment(), ctx()).catch((e) => e);
    expect(down.status).toBe(500);
    expect(down.message).not.toContain(token);
  });
});

describe("vertex Claude models", () => {
  const CLAUDE = "claude-sonnet-4-5@20250929";

  test("rawPredict with the Anthropic body, vertex anthropic_version and no model; response decoded", async () => {
    api.enqueue(
      () => new Response(fixture("claude-message.json"), { headers: { "content-type": "application/json" } }),
    );
    const a = createVertexAdapter("vx", cfg());
    const res = await a.chat(
      req({ system: [{ type: "text", text: "Be brief." }] }),
      deployment(CLAUDE),
      ctx({ defaultMaxTokens: 8192 }),
    );
    const up = api.requests[0];
    expect(up?.path).toBe(
      "/v1/projects/gw-test-project/locations/europe-west4/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
    );
    expect(up?.headers.authorization).toMatch(/^Bearer ya29\./);
    expect(up?.json).toMatchObject({
      anthropic_version: "vertex-2023-10-16",
      max_tokens: 8192,
      system: [{ type: "text", text: "Be brief." }],
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    });
    expect(up?.json).not.toHaveProperty("model");
    expect(up?.json).not.toHaveProperty("stream");
    expect(res.choices[0]?.content).toEqual([{ type: "text", text: "It is clear and 21 °C in Lisbon." }]);
    expect(res.usage).toEqual({
      inputTokens: 44 + 120 + 1810,
      cacheReadTokens: 1810,
      cacheWriteTokens: 120,
      outputTokens: 15,
      reasoningTokens: 0,
    });
  });

  test("streamRawPredict with stream: true; events decoded; URL images inlined", async () => {
    api.enqueue(() => streamResponse(sseFrames(fixture("claude-stream.sse"))));
    const fetched: string[] = [];
    const fetchImage: ImageFetcher = async (url) => {
      fetched.push(url);
      return { mediaType: "image/png", data: "iVBORw0KGgo=" };
    };
    const a = createVertexAdapter("vx", cfg());
    const events = await collect(
      await a.chatStream(
        req({
          stream: true,
          messages: [
            {
              role: "user",
              content: [
                { type: "text", text: "Where?" },
                { type: "image", source: { kind: "url", url: "http://img.test/p.png" } },
              ],
            },
          ],
        }),
        deployment(CLAUDE),
        ctx({ fetchImage }),
      ),
    );
    expect(api.requests[0]?.path).toEndWith("/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict");
    expect(api.requests[0]?.json).toMatchObject({
      anthropic_version: "vertex-2023-10-16",
      stream: true,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Where?" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
          ],
        },
      ],
    });
    expect(fetched).toEqual(["http://img.test/p.png"]);
    expect(events.filter((e) => e.type !== "usage")).toMatchObject([
      { type: "start", id: "msg_vrtx_01StrM9pQ4aVb2cX7dE1fG3h", model: "claude-sonnet-4-5-20250929" },
      { type: "text_delta", choice: 0, text: "Checking" },
      { type: "tool_call_start", choice: 0, index: 0, id: "toolu_vrtx_01A", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city": "Lis' },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: 'bon"}' },
      { type: "finish", choice: 0, reason: "tool_calls" },
    ]);
  });

  test("n > 1 is refused before any call", async () => {
    const a = createVertexAdapter("vx", cfg());
    const err = await a.chat(req({ n: 2 }), deployment(CLAUDE), ctx()).catch((e) => e);
    expect(err.status).toBe(400);
    expect(api.requests).toHaveLength(0);
  });
});
