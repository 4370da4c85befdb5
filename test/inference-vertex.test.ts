/**
 * The openai SDK through the gateway to Vertex AI: Gemini and Claude models, with the OAuth token
 * obtained from a mock token endpoint by a real RS256-signed service-account assertion.
 */
import { afterAll, beforeEach, expect, test } from "bun:test";
import { verify } from "node:crypto";
import OpenAI from "openai";
import { countTokens } from "../src/inference/estimate";
import { describeEachBackend, type GeneratedWire, type KeyWire } from "./helpers/gateway";
import { eventually, logRowWithStatus, logsOf, readThenDisconnect, sdkClient } from "./helpers/inference";
import { anthropicError, anthropicTextStream } from "./mocks/anthropic";
import {
  assertionOf,
  geminiJson,
  googleError,
  testServiceAccount,
  vertexFixture,
  vertexJson,
  vertexStream,
} from "./mocks/gemini";
import { startMockUpstream, streamResponse } from "./mocks/upstream";

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);
let issued = 0;
const tokens = startMockUpstream((r) =>
  r.path === "/token"
    ? Response.json({ access_token: `ya29.e2e-token-${++issued}`, expires_in: 3599, token_type: "Bearer" })
    : Response.json(
        { error: "invalid_client", error_description: "The OAuth client was not found." },
        { status: 401, headers: { "www-authenticate": 'Bearer realm="token"' } },
      ),
);
const mock = startMockUpstream();
const images = startMockUpstream((r) =>
  r.path === "/img/pixel.png"
    ? new Response(PNG, { headers: { "content-type": "image/png" } })
    : new Response("gone", { status: 404 }),
);
afterAll(() => {
  tokens.close();
  mock.close();
  images.close();
});

const sa = testServiceAccount(`${tokens.url}/token`, "gw-e2e-project");
const refused = testServiceAccount(`${tokens.url}/token-refused`, "gw-e2e-project");

const GEMINI = { input: 0.3e-6, output: 2.5e-6, cacheRead: 0.075e-6 };
const CLAUDE = { input: 3e-6, output: 15e-6, cacheRead: 0.3e-6, cacheWrite: 3.75e-6 };
/** vertex generate-content.json / stream.sse: 2400 prompt (2048 cached), 9 candidates + 200 thoughts. */
const GEMINI_COST = (2400 - 2048) * GEMINI.input + 2048 * GEMINI.cacheRead + (9 + 200) * GEMINI.output;
/** claude-message.json: 44 uncached, 1810 cache reads, 120 cache writes, 15 output. */
const CLAUDE_COST = 44 * CLAUDE.input + 1810 * CLAUDE.cacheRead + 120 * CLAUDE.cacheWrite + 15 * CLAUDE.output;

const RESOURCE = "/v1/projects/gw-e2e-project/locations/us-east5/publishers";
const GEMINI_PATH = `${RESOURCE}/google/models/gemini-2.5-flash`;
const CLAUDE_PATH = `${RESOURCE}/anthropic/models/claude-sonnet-4-5@20250929`;

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
  {
    type: "function",
    function: { name: "get_time", parameters: { type: "object", properties: { tz: { type: "string" } } } },
  },
];

describeEachBackend(
  "chat completions via the openai SDK, Vertex AI upstream",
  (gw) => {
    let key: GeneratedWire;
    let client: OpenAI;
    beforeEach(async () => {
      mock.reset();
      tokens.reset();
      images.reset();
      key ??= await gw().newKey();
      client ??= sdkClient(gw(), key.key);
    });

    test("Gemini on Vertex: the token comes from a signed assertion, is sent as a bearer and reused", async () => {
      mock.enqueue(
        () => vertexJson("generate-content.json"),
        () => vertexJson("generate-content.json"),
      );
      const res = await client.chat.completions
        .create({
          model: "vertex/gemini-2.5-flash",
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Weather in Porto?" },
          ],
        })
        .withResponse();
      expect(res.data.choices[0]?.message.content).toBe("Porto is cloudy, 17 °C.");
      expect(res.data.choices[0]?.finish_reason).toBe("stop");
      expect(res.data.usage).toMatchObject({
        prompt_tokens: 2400,
        completion_tokens: 209,
        prompt_tokens_details: { cached_tokens: 2048 },
        completion_tokens_details: { reasoning_tokens: 200 },
      });
      expect(res.response.headers.get("x-gateway-upstream-model")).toBe("gemini-2.5-flash");
      await client.chat.completions.create({
        model: "vertex/gemini-2.5-flash",
        messages: [{ role: "user", content: "again" }],
      });

      expect(tokens.requests).toHaveLength(1);
      const { claims, raw } = assertionOf(tokens, 0);
      expect(claims).toMatchObject({
        iss: sa.clientEmail,
        aud: `${tokens.url}/token`,
        scope: "https://www.googleapis.com/auth/cloud-platform",
      });
      const [h, c, s] = raw.split(".") as [string, string, string];
      expect(verify("RSA-SHA256", Buffer.from(`${h}.${c}`), sa.publicKey, Buffer.from(s, "base64url"))).toBe(true);

      const [first, second] = mock.requests;
      expect(first?.path).toBe(`${GEMINI_PATH}:generateContent`);
      expect(first?.headers.authorization).toMatch(/^Bearer ya29\.e2e-token-\d+$/);
      expect(second?.headers.authorization).toBe(first?.headers.authorization as string);
      expect(JSON.stringify(first?.headers)).not.toContain(key.key);
      expect(first?.headers["x-goog-api-key"]).toBeUndefined();
      expect(first?.json).toEqual({
        systemInstruction: { parts: [{ text: "Be brief." }] },
        contents: [{ role: "user", parts: [{ text: "Weather in Porto?" }] }],
      });
    });

    test("spend and the request log match the prices exactly, for Gemini and for Claude (with cache writes)", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(
        () => vertexJson("generate-content.json"),
        () => vertexJson("claude-message.json"),
      );
      await c.chat.completions.create({
        model: "vertex/gemini-2.5-flash",
        messages: [{ role: "user", content: "hi" }],
      });
      await c.chat.completions.create({
        model: "vertex/claude-sonnet-4-5@20250929",
        messages: [{ role: "user", content: "hi" }],
      });
      const [g, cl] = await logsOf(gw(), k.token_id);
      expect(g).toMatchObject({
        status: 200,
        provider: "vertex",
        model: "vertex/gemini-2.5-flash",
        upstream_model: "gemini-2.5-flash",
        input_tokens: 2400,
        cache_read_tokens: 2048,
        cache_write_tokens: 0,
        output_tokens: 209,
        reasoning_tokens: 200,
        cost_estimated: false,
      });
      expect(g?.cost as number).toBeCloseTo(GEMINI_COST, 15);
      expect(cl).toMatchObject({
        status: 200,
        model: "vertex/claude-sonnet-4-5@20250929",
        upstream_model: "claude-sonnet-4-5@20250929",
        input_tokens: 1974,
        cache_read_tokens: 1810,
        cache_write_tokens: 120,
        output_tokens: 15,
        cost_estimated: false,
      });
      expect(cl?.cost as number).toBeCloseTo(CLAUDE_COST, 15);
      const info = await gw().call<KeyWire>("GET", "/key/info", { key: k.key });
      expect(info.body.spend).toBeCloseTo(GEMINI_COST + CLAUDE_COST, 15);
    });

    test("streaming Gemini: alt=sse, deltas in order, usage chunk only when asked, billed either way", async () => {
      mock.enqueue(() => vertexStream("stream.sse", 5));
      const plain = await client.chat.completions.create({
        model: "vertex/gemini-2.5-flash",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      const chunks = [];
      for await (const ch of plain) chunks.push(ch);
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Porto is cloudy, 17 °C.");
      expect(chunks.some((c) => c.usage)).toBe(false);
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
      expect(mock.requests[0]?.path).toBe(`${GEMINI_PATH}:streamGenerateContent`);
      expect(mock.requests[0]?.query.get("alt")).toBe("sse");
      expect(mock.requests[0]?.headers.authorization).toMatch(/^Bearer ya29\./);

      mock.enqueue(() => vertexStream("stream.sse"));
      const withUsage = await client.chat.completions.create({
        model: "vertex/gemini-2.5-flash",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const ch of withUsage) if (ch.usage) usage = ch.usage;
      expect(usage).toMatchObject({
        prompt_tokens: 2400,
        completion_tokens: 209,
        prompt_tokens_details: { cached_tokens: 2048 },
      });

      const streamed = (await logsOf(gw(), key.token_id)).filter((r) => r.stream === true);
      expect(streamed.length).toBeGreaterThanOrEqual(2);
      for (const r of streamed.slice(-2)) {
        expect(r).toMatchObject({
          input_tokens: 2400,
          cache_read_tokens: 2048,
          output_tokens: 209,
          usage_estimated: false,
        });
        expect(r.cost as number).toBeCloseTo(GEMINI_COST, 15);
      }
    });

    test("parallel function calls from Gemini, streaming and not; ids minted where Vertex gives none", async () => {
      mock.enqueue(() => vertexJson("generate-content-tools.json"));
      const res = await client.chat.completions.create({
        model: "vertex/gemini-2.5-flash",
        messages: [{ role: "user", content: "Weather and time in Lisbon?" }],
        tools,
      });
      expect(res.choices[0]?.finish_reason).toBe("tool_calls");
      const calls = res.choices[0]?.message.tool_calls ?? [];
      expect(calls.map((c) => (c.type === "function" ? [c.function.name, c.function.arguments] : []))).toEqual([
        ["get_weather", '{"city":"Lisbon"}'],
        ["get_time", '{"tz":"Europe/Lisbon"}'],
      ]);
      expect(calls.every((c) => /^call_[0-9a-f-]{36}$/.test(c.id))).toBe(true);
      expect(new Set(calls.map((c) => c.id)).size).toBe(2);
      expect(mock.requests[0]?.json).toMatchObject({
        tools: [{ functionDeclarations: [{ name: "get_weather" }, { name: "get_time" }] }],
      });

      mock.enqueue(() => vertexStream("stream-tools.sse", 3));
      const final = await client.chat.completions
        .stream({ model: "vertex/gemini-2.5-flash", messages: [{ role: "user", content: "Weather and time?" }], tools })
        .finalChatCompletion();
      expect(final.choices[0]?.finish_reason).toBe("tool_calls");
      expect(
        (final.choices[0]?.message.tool_calls ?? []).map((c) =>
          c.type === "function" ? [c.function.name, c.function.arguments] : [],
        ),
      ).toEqual([
        ["get_weather", '{"city":"Lisbon"}'],
        ["get_time", '{"tz":"Europe/Lisbon"}'],
      ]);
    });

    test("a tool-result round trip to Gemini: calls and named responses in the upstream body", async () => {
      mock.enqueue(() => vertexJson("generate-content.json"));
      await client.chat.completions.create({
        model: "vertex/gemini-2.5-flash",
        tools,
        messages: [
          { role: "user", content: "Weather in Lisbon?" },
          {
            role: "assistant",
            content: "Looking it up.",
            tool_calls: [
              { id: "call_abc", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
            ],
          },
          { role: "tool", tool_call_id: "call_abc", content: "21 C" },
        ],
      });
      expect(mock.requests[0]?.json).toMatchObject({
        contents: [
          { role: "user", parts: [{ text: "Weather in Lisbon?" }] },
          {
            role: "model",
            parts: [{ text: "Looking it up." }, { functionCall: { name: "get_weather", args: { city: "Lisbon" } } }],
          },
          { role: "user", parts: [{ functionResponse: { name: "get_weather", response: { result: "21 C" } } }] },
        ],
      });
    });

    test("images to Gemini on Vertex: data URL and downloaded http URL inline", async () => {
      mock.enqueue(() => vertexJson("generate-content.json"));
      await client.chat.completions.create({
        model: "vertex/gemini-2.5-flash",
        messages: [
          {
            role: "user",
            content: [
              { type: "image_url", image_url: { url: "data:image/webp;base64,UklGRiIAAABXRUJQ" } },
              { type: "image_url", image_url: { url: `${images.url}/img/pixel.png` } },
              { type: "text", text: "Same place?" },
            ],
          },
        ],
      });
      expect(images.requests).toHaveLength(1);
      expect(mock.requests[0]?.json).toMatchObject({
        contents: [
          {
            role: "user",
            parts: [
              { inlineData: { mimeType: "image/webp", data: "UklGRiIAAABXRUJQ" } },
              { inlineData: { mimeType: "image/png", data: PNG.toString("base64") } },
              { text: "Same place?" },
            ],
          },
        ],
      });
    });

    test("n: 2 to Gemini on Vertex gives two choices", async () => {
      mock.enqueue(() => geminiJson("generate-content-candidates.json"));
      const res = await client.chat.completions.create({
        model: "vertex/gemini-2.5-flash",
        messages: [{ role: "user", content: "Lisbon?" }],
        n: 2,
      });
      expect(mock.requests[0]?.json).toMatchObject({ generationConfig: { candidateCount: 2 } });
      expect(res.choices.map((c) => c.message.content)).toEqual([
        "Lisbon: sunny.",
        "Sunny in Lisbon, around 21 °C, light",
      ]);
    });

    test("Claude on Vertex: rawPredict with the Messages body and anthropic_version; text back", async () => {
      mock.enqueue(() => vertexJson("claude-message.json"));
      const res = await client.chat.completions.create({
        model: "vertex/claude-sonnet-4-5@20250929",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Weather in Lisbon?" },
        ],
        temperature: 0.5,
      });
      expect(res.choices[0]?.message.content).toBe("It is clear and 21 °C in Lisbon.");
      expect(res.choices[0]?.finish_reason).toBe("stop");
      expect(res.usage).toMatchObject({
        prompt_tokens: 1974,
        completion_tokens: 15,
        prompt_tokens_details: { cached_tokens: 1810 },
      });
      const up = mock.requests[0];
      expect(up?.path).toBe(`${CLAUDE_PATH}:rawPredict`);
      expect(up?.headers.authorization).toMatch(/^Bearer ya29\.e2e-token-\d+$/);
      expect(up?.headers["x-api-key"]).toBeUndefined();
      expect(up?.json).toMatchObject({
        anthropic_version: "vertex-2023-10-16",
        max_tokens: 64000,
        temperature: 0.5,
        system: [{ type: "text", text: "Be brief." }],
        messages: [{ role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] }],
      });
      expect(up?.json).not.toHaveProperty("model");
    });

    test("Claude on Vertex streaming: streamRawPredict, a tool call streamed back, usage when asked", async () => {
      mock.enqueue(() =>
        streamResponse(
          vertexFixture("claude-stream.sse")
            .split("\n\n")
            .filter((f) => f.trim() !== "")
            .map((f) => `${f}\n\n`),
          { delayMs: 2 },
        ),
      );
      const stream = client.chat.completions.stream({
        model: "vertex/claude-sonnet-4-5@20250929",
        messages: [{ role: "user", content: "Weather in Lisbon?" }],
        tools,
        stream_options: { include_usage: true },
      });
      const final = await stream.finalChatCompletion();
      expect(mock.requests[0]?.path).toBe(`${CLAUDE_PATH}:streamRawPredict`);
      expect(mock.requests[0]?.json).toMatchObject({ stream: true, anthropic_version: "vertex-2023-10-16" });
      expect(final.choices[0]?.message.content).toBe("Checking");
      expect(final.choices[0]?.finish_reason).toBe("tool_calls");
      const call = final.choices[0]?.message.tool_calls?.[0];
      expect(call?.id).toBe("toolu_vrtx_01A");
      expect(call?.type === "function" ? [call.function.name, call.function.arguments] : []).toEqual([
        "get_weather",
        '{"city": "Lisbon"}',
      ]);
      expect(final.usage).toMatchObject({ prompt_tokens: 1854, completion_tokens: 38 });
    });

    test("Claude on Vertex, a client that disconnects while the model thinks: aborted upstream, reasoning billed, time to first token kept", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      const thoughts = Array.from({ length: 80 }, (_, i) => `consider${i} `);
      mock.enqueue(() =>
        anthropicTextStream(["never sent"], { input: 30, output: 700, cacheRead: 1000 }, 25, thoughts),
      );
      const s = await c.chat.completions.create({
        model: "vertex/claude-sonnet-4-5@20250929",
        messages: [{ role: "user", content: "Think it through." }],
        reasoning_effort: "low",
        stream: true,
      });
      const received = await readThenDisconnect(s, 8);
      expect(received).toStartWith("consider0 ");
      expect(mock.requests[0]?.path).toBe(`${CLAUDE_PATH}:streamRawPredict`);
      await eventually(
        () => mock.open,
        (n) => n === 0,
      );
      const row = await logRowWithStatus(gw(), k.token_id, 499);
      expect(row).toMatchObject({
        model: "vertex/claude-sonnet-4-5@20250929",
        provider: "vertex",
        usage_estimated: true,
        input_tokens: 1030,
        cache_read_tokens: 1000,
      });
      const output = row.output_tokens as number;
      expect(output).toBeGreaterThanOrEqual(countTokens(received));
      expect(output).toBeLessThan(700);
      expect(row.ttft_ms).not.toBeNull();
      expect(row.cost as number).toBeCloseTo(30 * CLAUDE.input + 1000 * CLAUDE.cacheRead + output * CLAUDE.output, 15);
    });

    test("upstream errors: 400 stays 400, 429 keeps Google's retry delay, 500 stays 500", async () => {
      mock.enqueue(() =>
        googleError(400, "Unable to submit request because it has an empty text parameter.", "INVALID_ARGUMENT"),
      );
      const bad = await client.chat.completions
        .create({ model: "vertex/gemini-2.5-flash", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad.message).toContain("empty text parameter");

      mock.enqueue(() => vertexJson("error-429.json", 429));
      const limited = await client.chat.completions
        .create({ model: "vertex/gemini-2.5-flash", messages: [{ role: "user", content: "x" }], stream: true })
        .catch((e) => e);
      expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
      expect(limited.headers.get("retry-after")).toBe("8");

      mock.enqueue(() => vertexJson("error-500.json", 500));
      const down = await client.chat.completions
        .create({ model: "vertex/gemini-2.5-flash", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(down).toBeInstanceOf(OpenAI.InternalServerError);
      expect(down.message).toContain("Internal error encountered");

      mock.enqueue(() =>
        anthropicError(400, "invalid_request_error", "messages: text content blocks must be non-empty"),
      );
      const claudeBad = await client.chat.completions
        .create({ model: "vertex/claude-sonnet-4-5@20250929", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(claudeBad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(claudeBad.message).toContain("must be non-empty");
      expect(mock.requests).toHaveLength(4);
    });

    test("a token endpoint that refuses the service account is a 502 that shows no credentials", async () => {
      const res = await gw().call<{ error: Record<string, unknown> }>("POST", "/v1/chat/completions", {
        key: key.key,
        body: { model: "vertex-refused/gemini-2.5-flash", messages: [{ role: "user", content: "x" }] },
      });
      expect(res.status).toBe(502);
      expect(res.body.error).toMatchObject({ code: "upstream_auth_error" });
      expect(tokens.requests.map((r) => r.path)).toEqual(["/token-refused"]);
      expect(mock.requests).toHaveLength(0);
      const assertion = assertionOf(tokens, 0).raw;
      for (const secret of [
        assertion,
        assertion.split(".")[2] ?? "",
        "PRIVATE KEY",
        refused.privateKeyPem.slice(40, 80),
      ]) {
        expect(res.text).not.toContain(secret);
      }

      const streamed = await client.chat.completions
        .create({ model: "vertex-refused/gemini-2.5-flash", messages: [{ role: "user", content: "x" }], stream: true })
        .catch((e) => e);
      expect(streamed.status).toBe(502);
      expect(JSON.stringify(streamed.error)).not.toContain("PRIVATE KEY");
    });
  },
  () => ({
    inference: {
      providers: {
        vertex: {
          type: "vertex",
          project: "gw-e2e-project",
          location: "us-east5",
          credentials: sa.json,
          api_base: `${mock.url}/v1`,
        },
        "vertex-refused": {
          type: "vertex",
          project: "gw-e2e-project",
          location: "us-east5",
          credentials: refused.json,
          api_base: `${mock.url}/v1`,
        },
      },
      models: [
        {
          name: "vertex/gemini-2.5-flash",
          input_cost_per_token: GEMINI.input,
          output_cost_per_token: GEMINI.output,
          cache_read_input_token_cost: GEMINI.cacheRead,
          cache_creation_input_token_cost: null,
          max_output_tokens: 65536,
          supports_function_calling: true,
          supports_vision: true,
        },
        {
          name: "vertex/claude-sonnet-4-5@20250929",
          input_cost_per_token: CLAUDE.input,
          output_cost_per_token: CLAUDE.output,
          cache_read_input_token_cost: CLAUDE.cacheRead,
          cache_creation_input_token_cost: CLAUDE.cacheWrite,
          max_output_tokens: 64000,
          supports_function_calling: true,
        },
        {
          name: "vertex-refused/gemini-2.5-flash",
          input_cost_per_token: GEMINI.input,
          output_cost_per_token: GEMINI.output,
        },
      ],
      router: { num_retries: 0 },
      imageFetch: { allowPrivateNetworks: true, maxBytes: 1e6, timeoutMs: 5000 },
    },
  }),
);
