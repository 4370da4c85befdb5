/** The openai SDK through the gateway to an OpenAI-type upstream: answers, streams, tools, usage, cost, errors. */
import { afterAll, beforeEach, expect, test } from "bun:test";
import OpenAI from "openai";
import { describeEachBackend, type ErrorWire, type GeneratedWire, type KeyWire } from "./helpers/gateway";
import { logsOf, sdkClient } from "./helpers/inference";
import { openaiCompletion, openaiError, openaiJson, openaiStream } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

const PROVIDER_KEY = "sk-provider-openai-secret-0123456789abcdef";
const mock = startMockUpstream();
afterAll(() => mock.close());

const PRICES = { input: 0.15e-6, output: 0.6e-6, cacheRead: 0.075e-6 };

describeEachBackend(
  "chat completions via the openai SDK, OpenAI-type upstream",
  (gw) => {
    let key: GeneratedWire;
    let client: OpenAI;
    beforeEach(async () => {
      mock.reset();
      key ??= await gw().newKey();
      client ??= sdkClient(gw(), key.key);
    });

    test("non-streaming: content and usage come back; upstream sees the provider key and the upstream model id", async () => {
      mock.enqueue(() => openaiJson("chat-completion.json"));
      const res = await client.chat.completions
        .create({
          model: "openai/gpt-4o-mini",
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Weather in Lisbon?" },
          ],
        })
        .withResponse();
      expect(res.data.choices[0]?.message.content).toBe("Lisbon is sunny today, around 21 °C.");
      expect(res.data.usage).toMatchObject({
        prompt_tokens: 1200,
        completion_tokens: 12,
        prompt_tokens_details: { cached_tokens: 1024 },
      });
      expect(res.response.headers.get("x-gateway-upstream-model")).toBe("gpt-4o-mini");
      expect(res.response.headers.get("x-gateway-model")).toBe("openai/gpt-4o-mini");
      expect(Number(res.response.headers.get("x-gateway-overhead-ms"))).toBeGreaterThanOrEqual(0);
      expect(res.response.headers.get("x-request-id")).toMatch(/^req_/);
      const up = mock.requests[0];
      expect(up?.path).toBe("/v1/chat/completions");
      expect(up?.headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
      expect(JSON.stringify(up?.headers)).not.toContain(key.key);
      expect(up?.json).toMatchObject({
        model: "gpt-4o-mini",
        messages: [{ role: "system" }, { role: "user", content: "Weather in Lisbon?" }],
      });
    });

    test("spend and the request log match the catalog prices exactly", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => openaiJson("chat-completion.json"));
      await c.chat.completions.create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] });
      const expected = 176 * PRICES.input + 1024 * PRICES.cacheRead + 12 * PRICES.output;
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        status: 200,
        model: "openai/gpt-4o-mini",
        provider: "openai",
        deployment: "openai/gpt-4o-mini",
        upstream_model: "gpt-4o-mini",
        input_tokens: 1200,
        cache_read_tokens: 1024,
        cache_write_tokens: 0,
        output_tokens: 12,
        cost_estimated: false,
        stream: false,
        key_hash: k.key_hash,
        team_id: k.team_id,
      });
      expect(row?.cost as number).toBeCloseTo(expected, 15);
      // Without a stream, the first token comes with the whole answer.
      expect(row?.ttft_ms).not.toBeNull();
      expect(row?.ttft_ms as number).toBeLessThanOrEqual(row?.latency_ms as number);
      const info = await gw().call<KeyWire>("GET", "/key/info", { key: k.key });
      expect(info.body.spend).toBeCloseTo(expected, 15);
    });

    test("cache writes OpenAI reports (prompt_tokens_details.cache_write_tokens) are billed at the cache-write price", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => openaiCompletion("ok", { prompt: 5000, completion: 20, cached: 1000, cacheWrite: 3000 }));
      const res = await c.chat.completions.create({
        model: "openai/gpt-6.1-sol",
        messages: [{ role: "user", content: "hi" }],
      });
      expect(res.usage?.prompt_tokens_details).toMatchObject({ cached_tokens: 1000, cache_write_tokens: 3000 });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        input_tokens: 5000,
        cache_read_tokens: 1000,
        cache_write_tokens: 3000,
        cost_estimated: false,
      });
      expect(row?.cost as number).toBeCloseTo(1000 * 2e-6 + 1000 * 0.1e-6 + 3000 * 2.5e-6 + 20 * 10e-6, 15);
    });

    test("a null cache-read price bills cached tokens at the input price and marks the cost estimated", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => openaiCompletion("ok", { prompt: 1000, completion: 10, cached: 400 }));
      await c.chat.completions.create({ model: "openai/unpriced-cache", messages: [{ role: "user", content: "hi" }] });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row?.cost_estimated).toBe(true);
      expect(row?.cost as number).toBeCloseTo(1000 * 1e-6 + 10 * 2e-6, 15);
      expect(mock.requests[0]?.json).toMatchObject({ model: "gpt-4o-mini" });
    });

    test("streaming: deltas arrive in order, usage chunk only when asked, billing either way", async () => {
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const plain = await client.chat.completions.create({
        model: "openai/gpt-4o-mini",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      const chunks = [];
      for await (const ch of plain) chunks.push(ch);
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Lisbon is sunny today.");
      expect(chunks.some((c) => c.usage)).toBe(false);
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
      expect(mock.requests[0]?.json).toMatchObject({ stream: true, stream_options: { include_usage: true } });

      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const withUsage = await client.chat.completions.create({
        model: "openai/gpt-4o-mini",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const ch of withUsage) if (ch.usage) usage = ch.usage;
      expect(usage).toMatchObject({ prompt_tokens: 1200, completion_tokens: 5 });

      const rows = await logsOf(gw(), key.token_id);
      const streamed = rows.filter((r) => r.stream === true);
      expect(streamed.length).toBeGreaterThanOrEqual(2);
      for (const r of streamed.slice(-2)) {
        expect(r).toMatchObject({
          input_tokens: 1200,
          cache_read_tokens: 1024,
          output_tokens: 5,
          status: 200,
          usage_estimated: false,
        });
        expect(r.ttft_ms).not.toBeNull();
        expect(r.cost as number).toBeCloseTo(176 * PRICES.input + 1024 * PRICES.cacheRead + 5 * PRICES.output, 15);
      }
    });

    test("tool calls, parallel, streaming and not", async () => {
      const tools: OpenAI.ChatCompletionTool[] = [
        {
          type: "function",
          function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
        },
      ];
      mock.enqueue(() => openaiJson("chat-tool-calls.json"));
      const res = await client.chat.completions.create({
        model: "openai/gpt-4o-mini",
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        tools,
      });
      expect(res.choices[0]?.finish_reason).toBe("tool_calls");
      const calls = res.choices[0]?.message.tool_calls ?? [];
      expect(calls.map((c) => (c.type === "function" ? [c.id, c.function.name, c.function.arguments] : []))).toEqual([
        ["call_Lis1", "get_weather", '{"city":"Lisbon"}'],
        ["call_Por2", "get_weather", '{"city":"Porto"}'],
      ]);
      expect(mock.requests[0]?.json).toMatchObject({ tools });

      mock.enqueue(() => openaiStream("chat-stream-tools.sse"));
      const stream = client.chat.completions.stream({
        model: "openai/gpt-4o-mini",
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        tools,
      });
      const final = await stream.finalChatCompletion();
      const streamedCalls = final.choices[0]?.message.tool_calls ?? [];
      expect(streamedCalls.map((c) => (c.type === "function" ? c.function.arguments : ""))).toEqual([
        '{"city":"Lisbon"}',
        '{"city":"Porto"}',
      ]);
      expect(final.choices[0]?.finish_reason).toBe("tool_calls");
    });

    test("tool results go back upstream unchanged", async () => {
      mock.enqueue(() => openaiCompletion("21 °C", { prompt: 50, completion: 3 }));
      const messages: OpenAI.ChatCompletionMessageParam[] = [
        { role: "user", content: "Weather in Lisbon?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: '{"temp_c":21}' },
      ];
      await client.chat.completions.create({ model: "openai/gpt-4o-mini", messages });
      expect(mock.requests[0]?.json).toMatchObject({ messages });
    });

    test("upstream errors keep a faithful status; a provider 401 is a 502 that never shows the provider key", async () => {
      mock.enqueue(() => openaiError(400, "Invalid 'messages[0].content': string too long.", "invalid_request_error"));
      const bad = await client.chat.completions
        .create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad.message).toContain("string too long");
      expect(mock.requests).toHaveLength(1);

      mock.setDefault(() => openaiError(401, `Incorrect API key provided: ${PROVIDER_KEY}.`, "invalid_request_error"));
      const auth = await client.chat.completions
        .create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(auth).toBeInstanceOf(OpenAI.APIError);
      expect(auth.status).toBe(502);
      expect(JSON.stringify(auth.error)).not.toContain(PROVIDER_KEY);
      expect(auth.error).toMatchObject({ code: "upstream_auth_error" });
      mock.setDefault(() => openaiError(500, "no default", "server_error"));
    });

    test("unknown model is 404 model_not_found; models outside the key's or team's list are 403", async () => {
      const missing = await client.chat.completions
        .create({ model: "openai/does-not-exist", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
      expect(missing.error).toMatchObject({ code: "model_not_found" });
      const limited = await gw().newKey({ models: ["openai/unpriced-cache"] });
      const lc = sdkClient(gw(), limited.key);
      const denied = await lc.chat.completions
        .create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(denied).toBeInstanceOf(OpenAI.PermissionDeniedError);
      expect(denied.message).toContain("openai/gpt-4o-mini");
      const teamLimited = await gw().newKey({}, { models: ["openai/*"] });
      const teamOk = sdkClient(gw(), teamLimited.key);
      mock.enqueue(() => openaiCompletion("ok", { prompt: 1, completion: 1 }));
      const allowed = await teamOk.chat.completions.create({
        model: "openai/gpt-4o-mini",
        messages: [{ role: "user", content: "x" }],
      });
      expect(allowed.choices[0]?.message.content).toBe("ok");
      const otherTeam = await gw().newKey({}, { models: ["anthropic/*"] });
      const oc = sdkClient(gw(), otherTeam.key);
      const teamDenied = await oc.chat.completions
        .create({ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(teamDenied.status).toBe(403);
      expect(teamDenied.message).toContain("team");
    });

    test("/v1/models lists what the key may use; retrieve works with slashes in the id", async () => {
      const all = await client.models.list();
      expect(all.data.map((m) => m.id).sort()).toEqual([
        "openai/gpt-4o-mini",
        "openai/gpt-6.1-sol",
        "openai/unpriced-cache",
      ]);
      const limited = await gw().newKey({ models: ["openai/unpriced-cache"] });
      const lc = sdkClient(gw(), limited.key);
      expect((await lc.models.list()).data.map((m) => m.id)).toEqual(["openai/unpriced-cache"]);
      const one = await client.models.retrieve("openai/gpt-4o-mini");
      expect(one).toMatchObject({ id: "openai/gpt-4o-mini", owned_by: "openai", object: "model" });
      const hidden = await lc.models.retrieve("openai/gpt-4o-mini").catch((e) => e);
      expect(hidden).toBeInstanceOf(OpenAI.NotFoundError);
    });

    test("the model hub is public and keeps null prices as null", async () => {
      const r = await gw().call<{ data: Record<string, unknown>[] }>("GET", "/public/model_hub", { key: null });
      expect(r.status).toBe(200);
      const mini = r.body.data.find((m) => m.model_name === "openai/gpt-4o-mini");
      expect(mini).toMatchObject({
        mode: "chat",
        providers: ["openai"],
        input_cost_per_token: PRICES.input,
        output_cost_per_token: PRICES.output,
        cache_read_input_token_cost: PRICES.cacheRead,
        cache_creation_input_token_cost: null,
        max_output_tokens: 16384,
        supports_function_calling: true,
      });
      const unpriced = r.body.data.find((m) => m.model_name === "openai/unpriced-cache");
      expect(unpriced?.cache_read_input_token_cost).toBeNull();
    });

    test("bad chat bodies are 400 naming the field, in OpenAI's shape", async () => {
      const cases: Array<[unknown, string]> = [
        [{ messages: [{ role: "user", content: "x" }] }, "model"],
        [{ model: "openai/gpt-4o-mini" }, "messages"],
        [{ model: "openai/gpt-4o-mini", messages: [] }, "messages"],
        [{ model: "openai/gpt-4o-mini", messages: [{ role: "wizard", content: "x" }] }, "messages[0].role"],
        [{ model: "openai/gpt-4o-mini", messages: [{ role: "tool", content: "x" }] }, "messages[0].tool_call_id"],
        [{ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: 5 }] }, "messages[0].content"],
        [{ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "x" }], temperature: 3 }, "temperature"],
        [{ model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "x" }], max_tokens: 0 }, "max_tokens"],
        [
          { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "x" }], tools: [{ type: "function" }] },
          "tools[0].function",
        ],
      ];
      for (const [body, param] of cases) {
        const r = await gw().call<ErrorWire>("POST", "/v1/chat/completions", { key: key.key, body });
        expect(`${param} ${r.status}`).toBe(`${param} 400`);
        expect(r.body.error.param).toBe(param);
      }
      expect(mock.requests).toHaveLength(0);
      const noKey = await gw().call<ErrorWire>("POST", "/v1/chat/completions", { key: null, body: {} });
      expect(noKey.status).toBe(401);
    });
  },
  () => ({
    inference: {
      providers: { openai: { type: "openai", api_base: `${mock.url}/v1`, api_key: PROVIDER_KEY } },
      models: [
        {
          name: "openai/gpt-4o-mini",
          input_cost_per_token: PRICES.input,
          output_cost_per_token: PRICES.output,
          cache_read_input_token_cost: PRICES.cacheRead,
          cache_creation_input_token_cost: null,
          max_output_tokens: 16384,
          supports_function_calling: true,
        },
        {
          name: "openai/unpriced-cache",
          model: "gpt-4o-mini",
          input_cost_per_token: 1e-6,
          output_cost_per_token: 2e-6,
          cache_read_input_token_cost: null,
        },
        {
          name: "openai/gpt-6.1-sol",
          input_cost_per_token: 2e-6,
          output_cost_per_token: 10e-6,
          cache_read_input_token_cost: 0.1e-6,
          cache_creation_input_token_cost: 2.5e-6,
        },
      ],
      router: { num_retries: 0 },
    },
  }),
);

describeEachBackend(
  "chat completions via the openai SDK, Azure and OpenAI-compatible upstreams",
  (gw) => {
    let client: OpenAI;
    let key: GeneratedWire;
    beforeEach(async () => {
      mock.reset();
      key ??= await gw().newKey();
      client ??= sdkClient(gw(), key.key);
    });

    test("azure: deployment URL, api-version, api-key header; streaming and not; billed", async () => {
      mock.enqueue(() => openaiJson("chat-completion.json"));
      const res = await client.chat.completions.create({
        model: "azure/gpt-4o-mini",
        messages: [{ role: "user", content: "hi" }],
      });
      expect(res.choices[0]?.message.content).toBe("Lisbon is sunny today, around 21 °C.");
      const up = mock.requests[0];
      expect(up?.path).toBe("/openai/deployments/prod-gpt4o-mini/chat/completions");
      expect(up?.query.get("api-version")).toBe("2024-10-21");
      expect(up?.headers["api-key"]).toBe("azure-provider-key-0123456789");
      expect(up?.headers.authorization).toBeUndefined();
      mock.enqueue(() => openaiStream("chat-stream-tools.sse"));
      const final = await client.chat.completions
        .stream({ model: "azure/gpt-4o-mini", messages: [{ role: "user", content: "weather?" }] })
        .finalChatCompletion();
      expect(final.choices[0]?.message.tool_calls?.map((c) => (c.type === "function" ? c.function.name : ""))).toEqual([
        "get_weather",
        "get_weather",
      ]);
      const rows = await logsOf(gw(), key.token_id);
      expect(rows.at(-1)).toMatchObject({
        provider: "azure",
        deployment: "azure/prod-gpt4o-mini",
        input_tokens: 85,
        output_tokens: 40,
      });
      expect(rows.at(-1)?.cost as number).toBeCloseTo(85 * 1e-6 + 40 * 2e-6, 15);
    });

    test("openai-compatible: base path, no auth header without a key, streaming and not", async () => {
      mock.enqueue(() => openaiCompletion("local llama says hi", { prompt: 7, completion: 4 }, "llama3.2:3b"));
      const res = await client.chat.completions.create({
        model: "local/llama3.2:3b",
        messages: [{ role: "user", content: "hi" }],
        max_completion_tokens: 20,
      });
      expect(res.choices[0]?.message.content).toBe("local llama says hi");
      const up = mock.requests[0];
      expect(up?.path).toBe("/compat/v1/chat/completions");
      expect(up?.headers.authorization).toBeUndefined();
      expect(up?.json).toMatchObject({ model: "llama3.2:3b", max_tokens: 20 });
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      let text = "";
      for await (const c of await client.chat.completions.create({
        model: "local/llama3.2:3b",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      })) {
        text += c.choices[0]?.delta?.content ?? "";
      }
      expect(text).toBe("Lisbon is sunny today.");
      const rows = await logsOf(gw(), key.token_id);
      expect(rows.at(-1)).toMatchObject({
        provider: "local",
        upstream_model: "llama3.2:3b",
        cost: 0,
        cost_estimated: true,
        output_tokens: 5,
      });
    });
  },
  () => ({
    inference: {
      providers: {
        azure: {
          type: "azure",
          api_base: mock.url,
          api_version: "2024-10-21",
          api_key: "azure-provider-key-0123456789",
        },
        local: { type: "openai-compatible", api_base: `${mock.url}/compat/v1` },
      },
      models: [
        {
          name: "azure/gpt-4o-mini",
          model: "prod-gpt4o-mini",
          input_cost_per_token: 1e-6,
          output_cost_per_token: 2e-6,
        },
        { name: "local/*" },
      ],
      router: { num_retries: 0 },
    },
  }),
);
