/** The openai SDK through the gateway to an Anthropic-type upstream: answers, streams, tools, usage, cost, errors. */
import { afterAll, beforeEach, expect, test } from "bun:test";
import OpenAI from "openai";
import { countTokens } from "../src/inference/estimate";
import { describeEachBackend, type GeneratedWire, type KeyWire } from "./helpers/gateway";
import { eventually, logRowWithStatus, logsOf, readThenDisconnect, sdkClient } from "./helpers/inference";
import {
  anthropicError,
  anthropicJson,
  anthropicMessage,
  anthropicStream,
  anthropicTextStream,
} from "./mocks/anthropic";
import { startMockUpstream } from "./mocks/upstream";

const PROVIDER_KEY = "sk-ant-api03-provider-secret-0123456789abcdef";
const DEPLOYMENT_KEY = "sk-ant-api03-deployment-secret-fedcba9876543210";
const mock = startMockUpstream();
afterAll(() => mock.close());

/** USD per token, as configured below (Claude Sonnet's published prices). */
const PRICES = { input: 3e-6, output: 15e-6, cacheRead: 0.3e-6, cacheWrite: 3.75e-6 };
const MODEL = "anthropic/claude-sonnet-4-5";
const MAX_OUTPUT = 64000;

/*
 * message.json and stream-text.sse report 44 uncached input tokens, 256 cache-write tokens, 1810
 * cache-read tokens and 15 output tokens:
 *   44 * 3e-6 + 256 * 3.75e-6 + 1810 * 0.3e-6 + 15 * 15e-6
 *   = 0.000132 + 0.00096 + 0.000543 + 0.000225 = 0.00186
 * With the cache-write price unpublished (null), cache writes are billed at the input price:
 *   0.000132 + 256 * 3e-6 + 0.000543 + 0.000225 = 0.000132 + 0.000768 + 0.000543 + 0.000225 = 0.001668
 */
const FIXTURE_COST = 0.00186;
const FIXTURE_COST_UNPRICED_WRITE = 0.001668;

const TOOLS: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather for a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

describeEachBackend(
  "chat completions via the openai SDK, Anthropic-type upstream",
  (gw) => {
    let key: GeneratedWire;
    let client: OpenAI;
    beforeEach(async () => {
      mock.reset();
      key ??= await gw().newKey();
      client ??= sdkClient(gw(), key.key);
    });

    test("non-streaming text: content, usage and headers; upstream gets the Messages body and the provider key", async () => {
      mock.enqueue(() => anthropicJson("message.json"));
      const res = await client.chat.completions
        .create({
          model: MODEL,
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Weather in Lisbon?" },
          ],
          max_tokens: 300,
          temperature: 1.5,
          stop: ["###"],
          user: "end-user-7",
        })
        .withResponse();
      expect(res.data.choices[0]?.message.content).toBe("Lisbon is sunny today, around 21 °C.");
      expect(res.data.choices[0]?.finish_reason).toBe("stop");
      expect(res.data.model).toBe("claude-sonnet-4-5-20250929");
      expect(res.data.usage).toMatchObject({
        prompt_tokens: 2110,
        completion_tokens: 15,
        total_tokens: 2125,
        prompt_tokens_details: { cached_tokens: 1810 },
      });
      expect(res.response.headers.get("x-gateway-upstream-model")).toBe("claude-sonnet-4-5");
      expect(res.response.headers.get("x-gateway-deployment")).toBe("anthropic/claude-sonnet-4-5");

      const up = mock.requests[0];
      expect(up?.method).toBe("POST");
      expect(up?.path).toBe("/v1/messages");
      expect(up?.headers["x-api-key"]).toBe(PROVIDER_KEY);
      expect(up?.headers["anthropic-version"]).toBe("2023-06-01");
      expect(up?.headers["content-type"]).toBe("application/json");
      expect(up?.headers.authorization).toBeUndefined();
      expect(JSON.stringify(up?.headers)).not.toContain(key.key);
      expect(up?.text).not.toContain(key.key);
      expect(up?.json).toEqual({
        model: "claude-sonnet-4-5",
        max_tokens: 300,
        system: [{ type: "text", text: "Be brief." }],
        messages: [{ role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] }],
        temperature: 1,
        stop_sequences: ["###"],
        metadata: { user_id: "end-user-7" },
      });
    });

    test("max_tokens missing: upstream receives the model's catalog max_output_tokens, else 4096", async () => {
      mock.enqueue(() => anthropicMessage("ok", { input: 5, output: 1 }));
      await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
      expect(mock.requests[0]?.json).toMatchObject({ model: "claude-sonnet-4-5", max_tokens: MAX_OUTPUT });

      mock.enqueue(() => anthropicMessage("ok", { input: 5, output: 1 }));
      await client.chat.completions.create({
        model: "anthropic/unpriced-cache-write",
        messages: [{ role: "user", content: "hi" }],
      });
      expect(mock.requests[1]?.json).toMatchObject({ model: "claude-sonnet-4-5", max_tokens: 4096 });

      mock.enqueue(() => anthropicMessage("ok", { input: 5, output: 1 }));
      await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        max_completion_tokens: 123,
      });
      expect(mock.requests[2]?.json).toMatchObject({ max_tokens: 123 });
    });

    test("spend and the request log price cache reads and cache writes apart", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => anthropicJson("message.json"));
      await c.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        status: 200,
        model: MODEL,
        provider: "anthropic",
        deployment: "anthropic/claude-sonnet-4-5",
        upstream_model: "claude-sonnet-4-5",
        input_tokens: 2110,
        cache_read_tokens: 1810,
        cache_write_tokens: 256,
        output_tokens: 15,
        usage_estimated: false,
        cost_estimated: false,
        stream: false,
      });
      expect(row?.cost as number).toBeCloseTo(FIXTURE_COST, 15);
      const info = await gw().call<KeyWire>("GET", "/key/info", { key: k.key });
      expect(info.body.spend).toBeCloseTo(FIXTURE_COST, 15);

      // A second call with other counts adds to the key's spend:
      // 100 * 3e-6 + 500 * 3.75e-6 + 1000 * 0.3e-6 + 20 * 15e-6 = 0.0003 + 0.001875 + 0.0003 + 0.0003 = 0.002775
      mock.enqueue(() => anthropicMessage("ok", { input: 100, output: 20, cacheRead: 1000, cacheWrite: 500 }));
      await c.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "again" }] });
      const rows = await logsOf(gw(), k.token_id);
      expect(rows[1]).toMatchObject({ input_tokens: 1600, cache_read_tokens: 1000, cache_write_tokens: 500 });
      expect(rows[1]?.cost as number).toBeCloseTo(0.002775, 15);
      const after = await gw().call<KeyWire>("GET", "/key/info", { key: k.key });
      expect(after.body.spend).toBeCloseTo(FIXTURE_COST + 0.002775, 15);
    });

    test("a null cache-write price bills cache writes at the input price and marks the cost estimated", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => anthropicJson("message.json"));
      await c.chat.completions.create({
        model: "anthropic/unpriced-cache-write",
        messages: [{ role: "user", content: "hi" }],
      });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({ cache_write_tokens: 256, cache_read_tokens: 1810, cost_estimated: true });
      expect(row?.cost as number).toBeCloseTo(FIXTURE_COST_UNPRICED_WRITE, 15);
    });

    test("streaming text: deltas in order, usage chunk only when asked, billed either way", async () => {
      mock.enqueue(() => anthropicStream("stream-text.sse"));
      const plain = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      const chunks = [];
      for await (const ch of plain) chunks.push(ch);
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(
        "Lisbon is sunny today, around 21 °C. ☀️",
      );
      expect(chunks[0]?.choices[0]?.delta?.role).toBe("assistant");
      expect(chunks.some((c) => c.usage)).toBe(false);
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
      expect(mock.requests[0]?.json).toMatchObject({
        model: "claude-sonnet-4-5",
        stream: true,
        max_tokens: MAX_OUTPUT,
      });
      expect(mock.requests[0]?.json).not.toHaveProperty("stream_options");

      mock.enqueue(() => anthropicStream("stream-text.sse", 2));
      const withUsage = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let usage: OpenAI.CompletionUsage | null | undefined;
      let text = "";
      for await (const ch of withUsage) {
        if (ch.usage) usage = ch.usage;
        text += ch.choices[0]?.delta?.content ?? "";
      }
      expect(text).toBe("Lisbon is sunny today, around 21 °C. ☀️");
      expect(usage).toMatchObject({
        prompt_tokens: 2110,
        completion_tokens: 15,
        total_tokens: 2125,
        prompt_tokens_details: { cached_tokens: 1810 },
      });

      const rows = await logsOf(gw(), key.token_id);
      const streamed = rows.filter((r) => r.stream === true);
      expect(streamed.length).toBeGreaterThanOrEqual(2);
      for (const r of streamed.slice(-2)) {
        expect(r).toMatchObject({
          status: 200,
          input_tokens: 2110,
          cache_read_tokens: 1810,
          cache_write_tokens: 256,
          output_tokens: 15,
          usage_estimated: false,
          cost_estimated: false,
        });
        expect(r.ttft_ms).not.toBeNull();
        expect(r.cost as number).toBeCloseTo(FIXTURE_COST, 15);
      }
    });

    test("parallel tool calls, not streaming: ids, names and argument JSON; tools and the parallel flag go upstream", async () => {
      mock.enqueue(() => anthropicJson("message-tool-use.json"));
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        tools: TOOLS,
        parallel_tool_calls: false,
      });
      const msg = res.choices[0]?.message;
      expect(res.choices[0]?.finish_reason).toBe("tool_calls");
      expect(msg?.content).toBe("I'll check the weather in both cities.");
      expect(
        (msg?.tool_calls ?? []).map((c) =>
          c.type === "function" ? [c.id, c.function.name, c.function.arguments] : [],
        ),
      ).toEqual([
        ["toolu_01LisbonA1b2C3d4E5f6G7h8", "get_weather", '{"city":"Lisbon"}'],
        ["toolu_01PortoZ9y8X7w6V5u4T3s2", "get_weather", '{"city":"Porto","units":"celsius"}'],
      ]);
      expect(mock.requests[0]?.json).toMatchObject({
        tools: [
          {
            name: "get_weather",
            description: "Current weather for a city",
            input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          },
        ],
        tool_choice: { type: "auto", disable_parallel_tool_use: true },
      });
      expect(res.usage).toMatchObject({ prompt_tokens: 412, completion_tokens: 96 });
    });

    test("parallel tool calls, streaming: ids, names and argument JSON arrive per call", async () => {
      mock.enqueue(() => anthropicStream("stream-tools.sse"));
      const stream = client.chat.completions.stream({
        model: MODEL,
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        tools: TOOLS,
        tool_choice: "required",
        stream_options: { include_usage: true },
      });
      const final = await stream.finalChatCompletion();
      const choice = final.choices[0];
      expect(choice?.finish_reason).toBe("tool_calls");
      expect(choice?.message.content).toBe("I'll check the weather in both cities.");
      expect(
        (choice?.message.tool_calls ?? []).map((c) =>
          c.type === "function" ? [c.id, c.function.name, JSON.parse(c.function.arguments)] : [],
        ),
      ).toEqual([
        ["toolu_01LisbonA1b2C3d4E5f6G7h8", "get_weather", { city: "Lisbon" }],
        ["toolu_01PortoZ9y8X7w6V5u4T3s2", "get_weather", { city: "Porto", units: "celsius" }],
      ]);
      expect(
        (choice?.message.tool_calls ?? []).map((c) => (c.type === "function" ? c.function.arguments : "")),
      ).toEqual(['{"city": "Lisbon"}', '{"city": "Porto", "units": "celsius"}']);
      expect(final.usage).toMatchObject({ prompt_tokens: 412, completion_tokens: 96 });
      expect(mock.requests[0]?.json).toMatchObject({ stream: true, tool_choice: { type: "any" } });
    });

    test("a tool-result round trip: tool_use in the assistant turn, tool_result blocks first in the next user turn", async () => {
      mock.enqueue(() => anthropicMessage("Lisbon is warmer.", { input: 120, output: 5 }));
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Weather in Lisbon and Porto?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "toolu_A", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
              { id: "toolu_B", type: "function", function: { name: "get_weather", arguments: '{"city":"Porto"}' } },
            ],
          },
          { role: "tool", tool_call_id: "toolu_A", content: '{"temp_c":21}' },
          { role: "tool", tool_call_id: "toolu_B", content: '{"temp_c":17}' },
          { role: "user", content: "Which is warmer?" },
        ],
        tools: TOOLS,
      });
      expect(res.choices[0]?.message.content).toBe("Lisbon is warmer.");
      const up = mock.requests[0]?.json as Record<string, unknown>;
      expect(up.system).toEqual([{ type: "text", text: "Be brief." }]);
      expect(up.messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Weather in Lisbon and Porto?" }] },
        {
          role: "assistant",
          content: [
            { type: "tool_use", id: "toolu_A", name: "get_weather", input: { city: "Lisbon" } },
            { type: "tool_use", id: "toolu_B", name: "get_weather", input: { city: "Porto" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_A", content: [{ type: "text", text: '{"temp_c":21}' }] },
            { type: "tool_result", tool_use_id: "toolu_B", content: [{ type: "text", text: '{"temp_c":17}' }] },
            { type: "text", text: "Which is warmer?" },
          ],
        },
      ]);
    });

    test("response_format json_schema: a forced json_output tool upstream, plain JSON text back", async () => {
      mock.enqueue(() => anthropicJson("message-json-output.json"));
      const schema = { type: "object", properties: { city: { type: "string" }, temp_c: { type: "number" } } };
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Lisbon weather as JSON" }],
        response_format: { type: "json_schema", json_schema: { name: "weather", schema } },
      });
      expect(res.choices[0]?.finish_reason).toBe("stop");
      expect(res.choices[0]?.message.tool_calls).toBeUndefined();
      expect(JSON.parse(res.choices[0]?.message.content ?? "")).toEqual({
        city: "Lisbon",
        temp_c: 21,
        conditions: ["sunny", "light breeze"],
      });
      expect(mock.requests[0]?.json).toMatchObject({
        tools: [{ name: "json_output", input_schema: schema }],
        tool_choice: { type: "tool", name: "json_output" },
      });
    });

    test("reasoning_effort turns on thinking; thinking comes back as reasoning_content", async () => {
      mock.enqueue(() => anthropicJson("message-thinking.json"));
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "27 * 453?" }],
        reasoning_effort: "medium",
        temperature: 0.2,
        max_completion_tokens: 2000,
      });
      expect(res.choices[0]?.message.content).toBe("27 × 453 = 12,231.");
      const reasoning = res.choices[0]?.message as { reasoning_content?: string } | undefined;
      expect(reasoning?.reasoning_content).toBe("The user wants 27 * 453. 27 * 453 = 12231.");
      const up = mock.requests[0]?.json as Record<string, unknown>;
      expect(up.thinking).toEqual({ type: "enabled", budget_tokens: 4096 });
      expect(up.max_tokens).toBe(4096 + 2000);
      expect(up).not.toHaveProperty("temperature");
    });

    test("deployment and provider settings: api_base ending in /v1, anthropic_version, extra headers, deployment key", async () => {
      mock.enqueue(() => anthropicMessage("hi from haiku", { input: 3, output: 4 }, { model: "claude-haiku-4-5" }));
      const res = await client.chat.completions.create({
        model: "anthropic-beta/claude-haiku",
        messages: [{ role: "user", content: "hi" }],
      });
      expect(res.choices[0]?.message.content).toBe("hi from haiku");
      const up = mock.requests[0];
      expect(up?.path).toBe("/v1/messages");
      expect(up?.headers).toMatchObject({
        "x-api-key": DEPLOYMENT_KEY,
        "anthropic-version": "2023-01-01",
        "anthropic-beta": "prompt-caching-2024-07-31,token-efficient-tools-2025-02-19",
        "x-deployment-tag": "blue",
      });
      expect(up?.json).toMatchObject({ model: "claude-haiku-4-5" });
    });

    test("upstream 400 keeps its status and Anthropic's message", async () => {
      mock.enqueue(() =>
        anthropicError(
          400,
          "invalid_request_error",
          "messages.0.content.0.text: text content blocks must be non-empty",
        ),
      );
      const bad = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad.message).toContain("text content blocks must be non-empty");
      expect(bad.error).toMatchObject({ code: "invalid_request_error" });
      expect(mock.requests).toHaveLength(1);
    });

    test("upstream 401 is a 502 that never shows the provider key", async () => {
      mock.enqueue(() => anthropicError(401, "authentication_error", `invalid x-api-key ${PROVIDER_KEY}`));
      const auth = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(auth).toBeInstanceOf(OpenAI.APIError);
      expect(auth.status).toBe(502);
      expect(auth.error).toMatchObject({ code: "upstream_auth_error" });
      expect(JSON.stringify(auth.error)).not.toContain(PROVIDER_KEY);
      expect(auth.message).not.toContain(PROVIDER_KEY);
    });

    test("upstream 429 with retry-after is a 429 with retry-after (no retries configured)", async () => {
      mock.enqueue(() =>
        anthropicError(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", {
          "retry-after": "17",
        }),
      );
      const limited = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
      expect(limited.status).toBe(429);
      expect(limited.headers.get("retry-after")).toBe("17");
      expect(limited.message).toContain("per-minute rate limit");
      expect(mock.requests).toHaveLength(1);
    });

    test("upstream 529 overloaded is a 503", async () => {
      mock.enqueue(() => anthropicError(529, "overloaded_error", "Overloaded"));
      const over = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(over).toBeInstanceOf(OpenAI.InternalServerError);
      expect(over.status).toBe(503);
      expect(over.error).toMatchObject({ code: "upstream_overloaded" });
      expect(over.message).toContain("Overloaded");
      expect(mock.requests).toHaveLength(1);
    });

    test("a 529 is retried when the model allows retries", async () => {
      mock.enqueue(
        () => anthropicError(529, "overloaded_error", "Overloaded"),
        () => anthropicMessage("second time lucky", { input: 3, output: 3 }),
      );
      const res = await client.chat.completions.create({
        model: "anthropic/retrying",
        messages: [{ role: "user", content: "x" }],
      });
      expect(res.choices[0]?.message.content).toBe("second time lucky");
      expect(mock.requests).toHaveLength(2);
    });

    test("an overloaded error mid-stream reaches the client as an error after the text so far, and is logged", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => anthropicStream("stream-overloaded.sse"));
      const stream = await c.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      let text = "";
      const err = await (async () => {
        for await (const ch of stream) text += ch.choices[0]?.delta?.content ?? "";
      })().catch((e) => e);
      expect(text).toBe("Lisbon is");
      expect(err).toBeInstanceOf(OpenAI.APIError);
      expect(err.message).toContain("Overloaded");
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({ status: 503, error_code: "upstream_overloaded", stream: true, input_tokens: 44 });
    });

    test("n: 2 is a 400 on param n and nothing is sent upstream", async () => {
      const err = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }], n: 2 })
        .catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.param).toBe("n");
      expect(err.message).toContain("n must be 1");
      expect(mock.requests).toHaveLength(0);
    });

    test("a streamed answer's billing follows the upstream usage, not an estimate", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() =>
        anthropicTextStream(["a", "b", "c"], { input: 10, output: 30, cacheRead: 100, cacheWrite: 50 }),
      );
      const s = await c.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "x" }],
        stream: true,
      });
      for await (const _ of s) {
      }
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        input_tokens: 160,
        cache_read_tokens: 100,
        cache_write_tokens: 50,
        output_tokens: 30,
        usage_estimated: false,
      });
      // 10 * 3e-6 + 50 * 3.75e-6 + 100 * 0.3e-6 + 30 * 15e-6 = 0.00003 + 0.0001875 + 0.00003 + 0.00045 = 0.0006975
      expect(row?.cost as number).toBeCloseTo(0.0006975, 15);
    });

    test("a client that disconnects mid-stream: the upstream is aborted; input counts from message_start, output counted from the text produced", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      const words = Array.from({ length: 80 }, (_, i) => `word${i} `);
      // message_start says output_tokens 1; message_delta (never reached) would say 900.
      mock.enqueue(() => anthropicTextStream(words, { input: 40, output: 900, cacheRead: 1800, cacheWrite: 60 }, 25));
      const s = await c.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Count slowly." }],
        stream: true,
      });
      const received = await readThenDisconnect(s, 8);
      await eventually(
        () => mock.open,
        (n) => n === 0,
      );
      const row = await logRowWithStatus(gw(), k.token_id, 499);
      expect(row).toMatchObject({
        error_code: "client_closed_request",
        usage_estimated: true,
        stream: true,
        input_tokens: 1900,
        cache_read_tokens: 1800,
        cache_write_tokens: 60,
      });
      const output = row.output_tokens as number;
      expect(output).toBeGreaterThanOrEqual(countTokens(received));
      expect(output).toBeLessThan(900);
      expect(row.ttft_ms).not.toBeNull();
      const cost = 40 * PRICES.input + 60 * PRICES.cacheWrite + 1800 * PRICES.cacheRead + output * PRICES.output;
      expect(row.cost as number).toBeCloseTo(cost, 15);
    });
  },
  () => ({
    inference: {
      providers: {
        anthropic: { type: "anthropic", api_base: mock.url, api_key: PROVIDER_KEY },
        "anthropic-beta": {
          type: "anthropic",
          api_base: `${mock.url}/v1/`,
          api_key: PROVIDER_KEY,
          anthropic_version: "2023-01-01",
          headers: { "anthropic-beta": "prompt-caching-2024-07-31,token-efficient-tools-2025-02-19" },
        },
      },
      models: [
        {
          name: MODEL,
          input_cost_per_token: PRICES.input,
          output_cost_per_token: PRICES.output,
          cache_read_input_token_cost: PRICES.cacheRead,
          cache_creation_input_token_cost: PRICES.cacheWrite,
          max_output_tokens: MAX_OUTPUT,
          supports_function_calling: true,
          supports_prompt_caching: true,
        },
        {
          name: "anthropic/unpriced-cache-write",
          model: "claude-sonnet-4-5",
          input_cost_per_token: PRICES.input,
          output_cost_per_token: PRICES.output,
          cache_read_input_token_cost: PRICES.cacheRead,
          cache_creation_input_token_cost: null,
        },
        {
          name: "anthropic/retrying",
          model: "claude-sonnet-4-5",
          input_cost_per_token: PRICES.input,
          output_cost_per_token: PRICES.output,
          max_retries: 1,
        },
        {
          name: "anthropic-beta/claude-haiku",
          deployments: [
            {
              provider: "anthropic-beta",
              model: "claude-haiku-4-5",
              api_key: DEPLOYMENT_KEY,
              headers: { "x-deployment-tag": "blue" },
            },
          ],
        },
      ],
      router: { num_retries: 0, retry_backoff_ms: 1 },
    },
  }),
);
