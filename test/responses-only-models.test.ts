/**
 * Models only OpenAI's Responses API serves (catalog `mode: responses`: o3-pro, gpt-5.5-pro, ...)
 * reached from the three other protocols with their official SDKs: @anthropic-ai/sdk
 * (`messages.create`, `messages.stream`), @google/genai (`generateContent`,
 * `generateContentStream`) and openai (`chat.completions`). The OpenAI-type upstream mock speaks
 * the real Responses wire format (recorded-shape JSON and SSE fixtures); the gateway calls its
 * /responses and translates both ways: text, reasoning, tool calls, usage with cached and reasoning
 * tokens, finish reasons, exact cost, and failures in each protocol's own shape.
 */
import { afterAll, beforeEach, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { FinishReason, type GenerateContentResponse, GoogleGenAI } from "@google/genai";
import type OpenAI from "openai";
import { describeEachBackend, type GeneratedWire, type TestGateway } from "./helpers/gateway";
import { logsOf, sdkClient } from "./helpers/inference";
import { openaiFixture, openaiJson, openaiStream } from "./mocks/openai";
import { startCuttingUpstream, startMockUpstream, streamResponse } from "./mocks/upstream";

const mock = startMockUpstream();
/** Sends the first frames of a stream, then drops the connection. */
const cutting = startCuttingUpstream(
  openaiFixture("responses-stream.sse")
    .split("\n\n")
    .slice(0, 16)
    .map((f) => `${f}\n\n`)
    .join(""),
);
afterAll(() => {
  mock.close();
  cutting.close();
});

const PRO = "openai/o3-pro";
const AZURE_PRO = "azure/o3-pro";
const DROPPY = "flaky/o3-pro";
const PRICES = { input: 20e-6, output: 80e-6, cacheRead: 5e-6 };
/** responses.json and responses-stream.sse: 1820 input (1536 cached), 412 output (384 reasoning). */
const TEXT_COST = (1820 - 1536) * PRICES.input + 1536 * PRICES.cacheRead + 412 * PRICES.output;
const TEXT = "Lisbon is sunny today, around 21 °C.";
const SUMMARY = "**Checking the forecast**\n\nLisbon in October is mild.\n\nAnswer briefly.";

const upstream = (i: number) => mock.requests[i];
const upJson = (i: number) => (mock.requests[i]?.json ?? {}) as Record<string, unknown>;

function genai(gw: TestGateway, apiKey: string) {
  return new GoogleGenAI({ apiKey, httpOptions: { baseUrl: gw.listen() } });
}

async function lastLog(gw: TestGateway, tokenId: string) {
  return (await logsOf(gw, tokenId)).at(-1) as Record<string, unknown>;
}

describeEachBackend(
  "mode: responses models from /v1/messages, generateContent and /v1/chat/completions",
  (gw) => {
    let key: GeneratedWire;
    beforeEach(async () => {
      mock.reset();
      key = await gw().newKey();
    });

    test("@anthropic-ai/sdk messages.create: the upstream's /responses gets a Responses body; thinking, text, usage, cost", async () => {
      const sdk = new Anthropic({ baseURL: gw().listen(), apiKey: key.key, maxRetries: 0 });
      mock.enqueue(() => openaiJson("responses.json"));
      const msg = await sdk.messages.create({
        model: PRO,
        max_tokens: 2000,
        system: "Be brief.",
        messages: [{ role: "user", content: "Weather in Lisbon?" }],
        ...{ temperature: 0.5 },
      });
      expect(msg).toMatchObject({
        type: "message",
        role: "assistant",
        model: "o3-pro-2025-06-10",
        stop_reason: "end_turn",
        content: [
          { type: "thinking", thinking: SUMMARY },
          { type: "text", text: TEXT },
        ],
        usage: { input_tokens: 284, cache_read_input_tokens: 1536, cache_creation_input_tokens: 0, output_tokens: 412 },
      });
      expect(upstream(0)?.path).toBe("/v1/responses");
      expect(upstream(0)?.headers.authorization).toBe("Bearer sk-provider-openai");
      expect(upJson(0)).toEqual({
        model: "o3-pro",
        instructions: "Be brief.",
        input: [{ type: "message", role: "user", content: "Weather in Lisbon?" }],
        max_output_tokens: 2000,
        temperature: 0.5,
        store: false,
      });
      const row = await lastLog(gw(), key.token_id);
      expect(row).toMatchObject({
        endpoint: "/v1/messages",
        model: PRO,
        upstream_model: "o3-pro",
        status: 200,
        input_tokens: 1820,
        cache_read_tokens: 1536,
        output_tokens: 412,
        reasoning_tokens: 384,
        usage_estimated: false,
      });
      expect(row.cost as number).toBeCloseTo(TEXT_COST, 15);
    });

    test("@anthropic-ai/sdk messages.stream: function calls streamed as tool_use with input_json_delta; tool results go back as function_call_output", async () => {
      const sdk = new Anthropic({ baseURL: gw().listen(), apiKey: key.key, maxRetries: 0 });
      mock.enqueue(() => openaiStream("responses-stream-tools.sse"));
      const tools: Anthropic.Tool[] = [
        {
          name: "get_weather",
          description: "Current weather for a city",
          input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      ];
      const stream = sdk.messages.stream({
        model: PRO,
        max_tokens: 1000,
        tools,
        tool_choice: { type: "any" },
        messages: [{ role: "user", content: "Weather in Lisbon and Porto?" }],
      });
      const deltas: string[] = [];
      stream.on("inputJson", (d) => deltas.push(d));
      const final = await stream.finalMessage();
      expect(final.stop_reason).toBe("tool_use");
      expect(final.content as unknown[]).toEqual([
        { type: "tool_use", id: "call_Lis1a2b3c4", name: "get_weather", input: { city: "Lisbon" } },
        { type: "tool_use", id: "call_Por5d6e7f8", name: "get_weather", input: { city: "Porto" } },
      ]);
      expect(deltas.join("")).toBe('{"city":"Lisbon"}{"city":"Porto"}');
      expect(final.usage).toMatchObject({ input_tokens: 112, cache_read_input_tokens: 128, output_tokens: 180 });
      expect(upJson(0)).toMatchObject({
        stream: true,
        store: false,
        tool_choice: "required",
        tools: [
          {
            type: "function",
            name: "get_weather",
            description: "Current weather for a city",
            parameters: tools[0]?.input_schema,
            strict: false,
          },
        ],
      });

      // The next turn: the calls and their results go up as Responses items.
      mock.enqueue(() => openaiJson("responses.json"));
      await sdk.messages.create({
        model: PRO,
        max_tokens: 1000,
        tools,
        messages: [
          { role: "user", content: "Weather in Lisbon and Porto?" },
          { role: "assistant", content: final.content },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "call_Lis1a2b3c4", content: '{"temp_c":21}' },
              { type: "tool_result", tool_use_id: "call_Por5d6e7f8", content: "unavailable", is_error: true },
            ],
          },
        ],
      });
      expect(upJson(1).input).toEqual([
        { type: "message", role: "user", content: "Weather in Lisbon and Porto?" },
        { type: "function_call", call_id: "call_Lis1a2b3c4", name: "get_weather", arguments: '{"city":"Lisbon"}' },
        { type: "function_call", call_id: "call_Por5d6e7f8", name: "get_weather", arguments: '{"city":"Porto"}' },
        { type: "function_call_output", call_id: "call_Lis1a2b3c4", output: '{"temp_c":21}' },
        { type: "function_call_output", call_id: "call_Por5d6e7f8", output: "Error: unavailable" },
      ]);
      const rows = await logsOf(gw(), key.token_id);
      expect(rows[0]).toMatchObject({ stream: true, input_tokens: 240, cache_read_tokens: 128, output_tokens: 180 });
    });

    test("@anthropic-ai/sdk: a cap is stop_reason max_tokens; stop_sequences are a 400 in Anthropic's shape; an upstream failure mid-stream is event: error", async () => {
      const sdk = new Anthropic({ baseURL: gw().listen(), apiKey: key.key, maxRetries: 0 });
      mock.enqueue(() => openaiJson("responses-incomplete.json"));
      const capped = await sdk.messages.create({
        model: PRO,
        max_tokens: 64,
        messages: [{ role: "user", content: "Weather?" }],
      });
      expect(capped.stop_reason).toBe("max_tokens");
      expect(capped.content).toMatchObject([{ type: "text", text: "Lisbon is" }]);
      expect(capped.content).toHaveLength(1);

      const stop = await sdk.messages
        .create({ model: PRO, max_tokens: 64, stop_sequences: ["END"], messages: [{ role: "user", content: "x" }] })
        .catch((e: unknown) => e);
      expect(stop).toBeInstanceOf(Anthropic.BadRequestError);
      expect((stop as InstanceType<typeof Anthropic.APIError>).error).toEqual({
        type: "error",
        error: {
          type: "invalid_request_error",
          message: "Stop sequences are not supported by the Responses API, which serves 'openai/o3-pro'; remove them",
        },
      });
      expect(mock.requests).toHaveLength(1);

      const frames = openaiFixture("responses-stream.sse").split("\n\n").slice(0, 15);
      const failed = {
        type: "response.failed",
        sequence_number: 15,
        response: { id: "resp_x", status: "failed", error: { code: "server_error", message: "The model crashed" } },
      };
      mock.enqueue(() =>
        streamResponse([
          ...frames.map((f) => `${f}\n\n`),
          `event: response.failed\ndata: ${JSON.stringify(failed)}\n\n`,
        ]),
      );
      const stream = sdk.messages.stream({ model: PRO, max_tokens: 64, messages: [{ role: "user", content: "x" }] });
      const err = await stream.finalMessage().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      expect(String((err as Error).message)).toContain("The model crashed");
      expect((await lastLog(gw(), key.token_id)).status).toBe(502);
    });

    test("@google/genai generateContent and generateContentStream: text, thoughts, usageMetadata with cached and thoughts tokens", async () => {
      const ai = genai(gw(), key.key);
      mock.enqueue(() => openaiJson("responses.json"));
      const res = await ai.models.generateContent({
        model: PRO,
        contents: "Weather in Lisbon?",
        config: { systemInstruction: "Be brief.", maxOutputTokens: 2000, thinkingConfig: { includeThoughts: true } },
      });
      expect(res.candidates?.[0]?.content?.parts).toEqual([{ text: SUMMARY, thought: true }, { text: TEXT }]);
      expect(res.candidates?.[0]?.finishReason).toBe(FinishReason.STOP);
      expect(res.usageMetadata).toMatchObject({
        promptTokenCount: 1820,
        cachedContentTokenCount: 1536,
        candidatesTokenCount: 28,
        thoughtsTokenCount: 384,
        totalTokenCount: 2232,
      });
      expect(upstream(0)?.path).toBe("/v1/responses");
      expect(upJson(0)).toMatchObject({ model: "o3-pro", instructions: "Be brief.", max_output_tokens: 2000 });
      expect((await lastLog(gw(), key.token_id)).cost as number).toBeCloseTo(TEXT_COST, 15);

      mock.enqueue(() => openaiStream("responses-stream.sse"));
      const chunks: GenerateContentResponse[] = [];
      for await (const c of await ai.models.generateContentStream({ model: PRO, contents: "Weather in Lisbon?" }))
        chunks.push(c);
      const text = chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? []).map((p) => (p.thought ? "" : p.text));
      expect(text.join("")).toBe(TEXT);
      expect(chunks.at(-1)?.candidates?.[0]?.finishReason).toBe(FinishReason.STOP);
      expect(chunks.at(-1)?.usageMetadata).toMatchObject({ thoughtsTokenCount: 384, cachedContentTokenCount: 1536 });
      expect(upJson(1)).toMatchObject({ stream: true, store: false });
      const row = await lastLog(gw(), key.token_id);
      expect(row).toMatchObject({ stream: true, status: 200, reasoning_tokens: 384, usage_estimated: false });
      expect(row.cost as number).toBeCloseTo(TEXT_COST, 15);
    });

    test("@google/genai function calls: declarations become flat tools; calls come back whole with their ids", async () => {
      const ai = genai(gw(), key.key);
      mock.enqueue(() => openaiStream("responses-stream-tools.sse"));
      const chunks: GenerateContentResponse[] = [];
      for await (const c of await ai.models.generateContentStream({
        model: PRO,
        contents: "Weather in Lisbon and Porto?",
        config: {
          tools: [
            {
              functionDeclarations: [
                {
                  name: "get_weather",
                  parametersJsonSchema: { type: "object", properties: { city: { type: "string" } } },
                },
              ],
            },
          ],
        },
      }))
        chunks.push(c);
      const calls = chunks.flatMap((c) =>
        (c.candidates?.[0]?.content?.parts ?? []).flatMap((p) => p.functionCall ?? []),
      );
      expect(calls).toEqual([
        { id: "call_Lis1a2b3c4", name: "get_weather", args: { city: "Lisbon" } },
        { id: "call_Por5d6e7f8", name: "get_weather", args: { city: "Porto" } },
      ]);
      expect((upJson(0).tools as unknown[])[0]).toMatchObject({ type: "function", name: "get_weather", strict: false });
    });

    test("openai chat.completions: create and stream against a mode: responses model; Azure too", async () => {
      const client: OpenAI = sdkClient(gw(), key.key);
      mock.enqueue(() => openaiJson("responses.json"));
      const res = await client.chat.completions.create({
        model: PRO,
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Weather in Lisbon?" },
        ],
        max_completion_tokens: 2000,
        reasoning_effort: "high",
      });
      expect(res.choices[0]).toMatchObject({
        finish_reason: "stop",
        message: { role: "assistant", content: TEXT },
      });
      expect(res.usage).toMatchObject({
        prompt_tokens: 1820,
        completion_tokens: 412,
        prompt_tokens_details: { cached_tokens: 1536 },
        completion_tokens_details: { reasoning_tokens: 384 },
      });
      expect(upstream(0)?.path).toBe("/v1/responses");
      expect(upJson(0)).toMatchObject({ reasoning: { effort: "high" }, max_output_tokens: 2000, store: false });

      mock.enqueue(() => openaiStream("responses-stream-tools.sse"));
      const stream = await client.chat.completions.create({
        model: PRO,
        messages: [{ role: "user", content: "Weather in Lisbon and Porto?" }],
        tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }],
        stream: true,
        stream_options: { include_usage: true },
      });
      const args: Record<number, string> = {};
      let finish: string | null | undefined;
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream) {
        for (const t of chunk.choices[0]?.delta.tool_calls ?? [])
          args[t.index] = (args[t.index] ?? "") + (t.function?.arguments ?? "");
        finish = chunk.choices[0]?.finish_reason ?? finish;
        usage = chunk.usage ?? usage;
      }
      expect(args).toEqual({ 0: '{"city":"Lisbon"}', 1: '{"city":"Porto"}' });
      expect(finish).toBe("tool_calls");
      expect(usage).toMatchObject({ prompt_tokens: 240, completion_tokens: 180 });

      mock.enqueue(() => openaiJson("responses-incomplete.json"));
      const capped = await client.chat.completions.create({
        model: AZURE_PRO,
        messages: [{ role: "user", content: "x" }],
        max_completion_tokens: 64,
      });
      expect(capped.choices[0]?.finish_reason).toBe("length");
      expect(upstream(2)?.path).toBe("/openai/responses");
      expect(upstream(2)?.query.get("api-version")).toBe("2025-04-01-preview");
      expect(upJson(2)).toMatchObject({ model: "my-o3-pro" });
      // Never the upstream's chat completions, which do not serve these models.
      expect(mock.requests.some((r) => r.path.endsWith("/chat/completions"))).toBe(false);
    });

    test("an upstream that drops mid-stream is reported as a dropped connection, not an unreachable one", async () => {
      const client: OpenAI = sdkClient(gw(), key.key);
      const stream = await client.chat.completions.create({
        model: DROPPY,
        messages: [{ role: "user", content: "x" }],
        stream: true,
      });
      let text = "";
      const err = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      })().catch((e: unknown) => e);
      expect(text).toBe("Lisbon is sunny");
      expect(String((err as Error).message)).toContain(
        "The upstream provider dropped the connection before its answer was complete",
      );
      expect(String((err as Error).message)).not.toContain("Cannot reach");
      expect(await lastLog(gw(), key.token_id)).toMatchObject({ status: 502, stream: true });
    });
  },
  () => ({
    inference: {
      providers: {
        openai: { type: "openai", api_base: `${mock.url}/v1`, api_key: "sk-provider-openai" },
        azure: { type: "azure", api_base: mock.url, api_version: "2025-04-01-preview", api_key: "azure-key" },
        flaky: { type: "openai", api_base: cutting.url, api_key: "sk-flaky" },
      },
      models: [
        {
          name: PRO,
          mode: "responses",
          input_cost_per_token: PRICES.input,
          output_cost_per_token: PRICES.output,
          cache_read_input_token_cost: PRICES.cacheRead,
        },
        { name: AZURE_PRO, mode: "responses", model: "my-o3-pro" },
        { name: DROPPY, mode: "responses" },
      ],
      router: { num_retries: 0 },
    },
  }),
);
