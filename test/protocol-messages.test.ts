/**
 * The official @anthropic-ai/sdk through the gateway's /v1/messages to every provider type:
 * OpenAI, OpenAI-compatible, Azure, Anthropic (native forwarding), Gemini, Vertex AI (Gemini, and
 * Claude forwarded natively) and Bedrock. Answers, streams (final message and raw event order),
 * tool calls, usage and exact cost, count_tokens, and errors in Anthropic's envelope.
 */
import { afterAll, beforeEach, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { countTokens, promptText } from "../src/inference/estimate";
import { decodeMessagesRequest } from "../src/protocols/anthropic/decode";
import { parseCountTokensRequest } from "../src/protocols/anthropic/protocol";
import { describeEachBackend, type GeneratedWire, type TestGateway } from "./helpers/gateway";
import { eventually, logRowWithStatus, logsOf } from "./helpers/inference";
import { anthropicFixture, anthropicJson, anthropicStream, anthropicTextStream } from "./mocks/anthropic";
import { bedrockJson, bedrockStream } from "./mocks/bedrock";
import { geminiJson, geminiStream, testServiceAccount, vertexJson, vertexStream } from "./mocks/gemini";
import { openaiError, openaiJson, openaiStream } from "./mocks/openai";
import { type RecordedRequest, sse, startMockUpstream, streamResponse } from "./mocks/upstream";

const OPENAI_KEY = "sk-provider-openai-secret-0123456789abcdef";
const ANTHROPIC_KEY = "sk-ant-api03-provider-secret-0123456789abcdef";
const GEMINI_KEY = "AIzaSyA-provider-gemini-secret-0123456789";
const BEDROCK_KEY = "bedrock-api-key-e2e-0123456789abcdef";

const mock = startMockUpstream();
const tokens = startMockUpstream((r) =>
  r.path === "/token"
    ? Response.json({ access_token: "ya29.messages-e2e-token", expires_in: 3599, token_type: "Bearer" })
    : Response.json({ error: "invalid_client" }, { status: 401 }),
);
afterAll(() => {
  mock.close();
  tokens.close();
});
const sa = testServiceAccount(`${tokens.url}/token`, "gw-e2e-project");

/** USD per token, as configured below. */
const OPENAI = { input: 0.15e-6, output: 0.6e-6, cacheRead: 0.075e-6 };
const CLAUDE = { input: 3e-6, output: 15e-6, cacheRead: 0.3e-6, cacheWrite: 3.75e-6 };
const GEMINI = { input: 0.3e-6, output: 2.5e-6, cacheRead: 0.075e-6 };

const CLAUDE_MODEL = "anthropic/claude-sonnet-4-5";
const BEDROCK_MODEL = "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0";
const VERTEX_RESOURCE = "/v1/projects/gw-e2e-project/locations/us-east5/publishers";

const WEATHER_TOOL: Anthropic.Tool = {
  name: "get_weather",
  description: "Current weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

const client = (gw: TestGateway, opts: { apiKey?: string | null; authToken?: string } = {}) =>
  new Anthropic({
    baseURL: gw.listen(),
    apiKey: opts.apiKey === undefined ? null : opts.apiKey,
    ...(opts.authToken ? { authToken: opts.authToken } : {}),
    maxRetries: 0,
  });

/** The raw SSE of a /v1/messages call as `{event, data}` frames (keep-alive comments dropped). */
async function rawStream(gw: TestGateway, key: string, body: Record<string, unknown>) {
  const res = await fetch(`${gw.listen()}/v1/messages`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const text = await res.text();
  const frames = text
    .split("\n\n")
    .filter((f) => f.trim() !== "" && !f.startsWith(":"))
    .map((f) => {
      const event = /^event: (.*)$/m.exec(f)?.[1];
      const data = JSON.parse(/^data: (.*)$/m.exec(f)?.[1] ?? "null");
      return { event, data };
    });
  return { status: res.status, headers: res.headers, text, frames };
}

/** Event types of a stream as the SDK yields them, in order. */
async function eventTypes(stream: AsyncIterable<Anthropic.RawMessageStreamEvent>): Promise<string[]> {
  const out: string[] = [];
  for await (const ev of stream) out.push(ev.type);
  return out;
}

const upstreamText = (r: RecordedRequest | undefined) => r?.text ?? "";

describeEachBackend(
  "/v1/messages via @anthropic-ai/sdk",
  (gw) => {
    let key: GeneratedWire;
    let sdk: Anthropic;
    beforeEach(async () => {
      mock.reset();
      key ??= await gw().newKey();
      sdk ??= client(gw(), { apiKey: key.key });
    });

    // -----------------------------------------------------------------------------------------
    // OpenAI-type upstream: translated
    // -----------------------------------------------------------------------------------------

    test("OpenAI: create() answers in Anthropic's shape; upstream gets a chat body without cache_control; cost is exact", async () => {
      const k = await gw().newKey();
      const c = client(gw(), { apiKey: k.key });
      mock.enqueue(() => openaiJson("chat-completion.json"));
      const { data: msg, response } = await c.messages
        .create({
          model: "openai/gpt-4o-mini",
          max_tokens: 300,
          system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
          messages: [
            {
              role: "user",
              content: [{ type: "text", text: "Weather in Lisbon?", cache_control: { type: "ephemeral", ttl: "1h" } }],
            },
          ],
          tools: [{ ...WEATHER_TOOL, cache_control: { type: "ephemeral" } }],
          stop_sequences: ["###"],
          metadata: { user_id: "end-user-7" },
          // Sampling parameters are part of the protocol, though this SDK version no longer types them.
          ...{ temperature: 0.5 },
        })
        .withResponse();
      expect(msg).toEqual({
        id: "msg_chatcmpl-CXa1b2c3d4e5f6g7h8i9j0",
        type: "message",
        role: "assistant",
        model: "gpt-4o-mini-2024-07-18",
        content: [{ type: "text", text: "Lisbon is sunny today, around 21 °C." }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 176, cache_creation_input_tokens: 0, cache_read_input_tokens: 1024, output_tokens: 12 },
      } as never);
      expect(response.headers.get("x-gateway-model")).toBe("openai/gpt-4o-mini");
      expect(response.headers.get("request-id")).toMatch(/^req_/);
      expect(response.headers.get("request-id")).toBe(response.headers.get("x-request-id"));

      const up = mock.requests[0];
      expect(up?.path).toBe("/v1/chat/completions");
      expect(up?.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
      expect(upstreamText(up)).not.toContain(k.key);
      expect(upstreamText(up)).not.toContain("cache_control");
      expect(upstreamText(up)).not.toContain("ephemeral");
      expect(up?.json).toEqual({
        model: "gpt-4o-mini",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Weather in Lisbon?" },
        ],
        tools: [
          {
            type: "function",
            function: {
              name: "get_weather",
              description: WEATHER_TOOL.description,
              parameters: WEATHER_TOOL.input_schema,
            },
          },
        ],
        max_completion_tokens: 300,
        temperature: 0.5,
        stop: ["###"],
        user: "end-user-7",
      });

      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        endpoint: "/v1/messages",
        status: 200,
        model: "openai/gpt-4o-mini",
        provider: "openai",
        input_tokens: 1200,
        cache_read_tokens: 1024,
        cache_write_tokens: 0,
        output_tokens: 12,
        stream: false,
        usage_estimated: false,
      });
      expect(row?.cost as number).toBeCloseTo(176 * OPENAI.input + 1024 * OPENAI.cacheRead + 12 * OPENAI.output, 15);
    });

    test("OpenAI: tool calls come back as tool_use blocks with parsed input; tool history goes upstream as chat tool messages", async () => {
      mock.enqueue(() => openaiJson("chat-tool-calls.json"));
      const msg = await sdk.messages.create({
        model: "openai/gpt-4o-mini",
        max_tokens: 200,
        tools: [WEATHER_TOOL],
        tool_choice: { type: "any", disable_parallel_tool_use: true },
        messages: [
          { role: "user", content: "Lisbon?" },
          {
            role: "assistant",
            content: [
              { type: "text", text: "Checking." },
              { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Lisbon" } },
            ],
          },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "toolu_01A", content: '{"temp_c":21}' },
              { type: "text", text: "And Porto?" },
            ],
          },
        ],
      });
      expect(msg.stop_reason).toBe("tool_use");
      expect(msg.content).toEqual([
        { type: "tool_use", id: "call_Lis1", name: "get_weather", input: { city: "Lisbon" } },
        { type: "tool_use", id: "call_Por2", name: "get_weather", input: { city: "Porto" } },
      ] as never);
      expect(msg.usage).toMatchObject({ input_tokens: 85, output_tokens: 40 });
      expect(mock.requests[0]?.json).toMatchObject({
        messages: [
          { role: "user", content: "Lisbon?" },
          {
            role: "assistant",
            content: "Checking.",
            tool_calls: [
              { id: "toolu_01A", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
            ],
          },
          { role: "tool", tool_call_id: "toolu_01A", content: '{"temp_c":21}' },
          { role: "user", content: "And Porto?" },
        ],
        tool_choice: "required",
        parallel_tool_calls: false,
      });
    });

    test("OpenAI: stream() gives the final message with two tool calls; raw events come in Anthropic's order; billed", async () => {
      const k = await gw().newKey();
      const c = client(gw(), { apiKey: k.key });
      mock.enqueue(() => openaiStream("chat-stream-tools.sse", 1));
      const final = await c.messages
        .stream({
          model: "openai/gpt-4o-mini",
          max_tokens: 200,
          tools: [WEATHER_TOOL],
          messages: [{ role: "user", content: "Lisbon and Porto?" }],
        })
        .finalMessage();
      expect(final.content).toEqual([
        { type: "tool_use", id: "call_Lis1", name: "get_weather", input: { city: "Lisbon" } },
        { type: "tool_use", id: "call_Por2", name: "get_weather", input: { city: "Porto" } },
      ] as never);
      expect(final.stop_reason).toBe("tool_use");
      // OpenAI reports usage last: message_delta carries the input counts too.
      expect(final.usage).toMatchObject({ input_tokens: 85, cache_read_input_tokens: 0, output_tokens: 40 });
      expect(mock.requests[0]?.json).toMatchObject({ stream: true, stream_options: { include_usage: true } });

      mock.enqueue(() => openaiStream("chat-stream-tools.sse"));
      const raw = await c.messages.create({
        model: "openai/gpt-4o-mini",
        max_tokens: 200,
        tools: [WEATHER_TOOL],
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        stream: true,
      });
      expect(await eventTypes(raw)).toEqual([
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
      ]);

      const rows = await logsOf(gw(), k.token_id);
      expect(rows).toHaveLength(2);
      for (const r of rows) {
        expect(r).toMatchObject({
          endpoint: "/v1/messages",
          stream: true,
          status: 200,
          input_tokens: 85,
          output_tokens: 40,
          usage_estimated: false,
        });
        expect(r.cost as number).toBeCloseTo(85 * OPENAI.input + 40 * OPENAI.output, 15);
      }
    });

    test("OpenAI: streamed text, with event names on every frame and the text block closed before message_delta", async () => {
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const { frames, headers } = await rawStream(gw(), key.key, {
        model: "openai/gpt-4o-mini",
        max_tokens: 100,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(headers.get("content-type")).toContain("text/event-stream");
      for (const f of frames) expect(f.event).toBe(f.data.type);
      expect(frames.map((f) => f.event)).toEqual([
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
      ]);
      const text = frames.filter((f) => f.data.delta?.type === "text_delta").map((f) => f.data.delta.text);
      expect(text.join("")).toBe("Lisbon is sunny today.");
      expect(frames.at(-2)?.data).toEqual({
        type: "message_delta",
        delta: { stop_reason: "end_turn", stop_sequence: null },
        usage: { output_tokens: 5, input_tokens: 176, cache_creation_input_tokens: 0, cache_read_input_tokens: 1024 },
      });
    });

    // -----------------------------------------------------------------------------------------
    // Anthropic-type upstream: the client's body forwarded as-is
    // -----------------------------------------------------------------------------------------

    test("Anthropic: the body is forwarded unchanged but for the model (cache_control and unknown fields kept); the answer too; cost exact", async () => {
      const k = await gw().newKey();
      const c = client(gw(), { apiKey: k.key });
      mock.enqueue(() => anthropicJson("message.json"));
      const body = {
        model: CLAUDE_MODEL,
        max_tokens: 1024,
        system: [
          { type: "text" as const, text: "You are a travel assistant.", cache_control: { type: "ephemeral" as const } },
        ],
        tools: [{ ...WEATHER_TOOL, cache_control: { type: "ephemeral" as const, ttl: "1h" as const } }],
        tool_choice: { type: "auto" as const, disable_parallel_tool_use: true },
        messages: [
          {
            role: "user" as const,
            content: [
              { type: "text" as const, text: "Weather in Lisbon?", cache_control: { type: "ephemeral" as const } },
            ],
          },
        ],
        thinking: { type: "enabled" as const, budget_tokens: 1024 },
        metadata: { user_id: "u-1" },
        service_tier: "auto" as const,
      };
      const { data: msg, response } = await c.messages.create(body).withResponse();
      expect(msg).toEqual(JSON.parse(anthropicFixture("message.json")));
      expect(response.headers.get("x-gateway-deployment")).toBe("anthropic/claude-sonnet-4-5");

      const up = mock.requests[0];
      expect(up?.path).toBe("/v1/messages");
      expect(up?.headers["x-api-key"]).toBe(ANTHROPIC_KEY);
      expect(up?.headers["anthropic-version"]).toBe("2023-06-01");
      expect(JSON.stringify(up?.headers)).not.toContain(k.key);
      expect(up?.json).toEqual({ ...body, model: "claude-sonnet-4-5" });

      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        endpoint: "/v1/messages",
        provider: "anthropic",
        input_tokens: 2110,
        cache_read_tokens: 1810,
        cache_write_tokens: 256,
        output_tokens: 15,
        usage_estimated: false,
      });
      // 44 * 3e-6 + 256 * 3.75e-6 + 1810 * 0.3e-6 + 15 * 15e-6 = 0.00186
      expect(row?.cost as number).toBeCloseTo(0.00186, 15);
    });

    test("Anthropic: tool_use answers and streams pass through; raw events identical to the upstream's; billed from message_start/message_delta", async () => {
      const k = await gw().newKey();
      const c = client(gw(), { apiKey: k.key });
      mock.enqueue(() => anthropicJson("message-tool-use.json"));
      const msg = await c.messages.create({
        model: CLAUDE_MODEL,
        max_tokens: 300,
        tools: [WEATHER_TOOL],
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
      });
      expect(
        msg.content.filter((b) => b.type === "tool_use").map((b) => (b.type === "tool_use" ? [b.name, b.input] : [])),
      ).toEqual([
        ["get_weather", { city: "Lisbon" }],
        ["get_weather", { city: "Porto", units: "celsius" }],
      ]);

      mock.enqueue(() => anthropicStream("stream-tools.sse", 1));
      const final = await c.messages
        .stream({
          model: CLAUDE_MODEL,
          max_tokens: 300,
          tools: [WEATHER_TOOL],
          messages: [{ role: "user", content: "Lisbon and Porto?" }],
        })
        .finalMessage();
      expect(final.content).toEqual([
        { type: "text", text: "I'll check the weather in both cities." },
        { type: "tool_use", id: "toolu_01LisbonA1b2C3d4E5f6G7h8", name: "get_weather", input: { city: "Lisbon" } },
        {
          type: "tool_use",
          id: "toolu_01PortoZ9y8X7w6V5u4T3s2",
          name: "get_weather",
          input: { city: "Porto", units: "celsius" },
        },
      ] as never);
      expect(mock.requests[1]?.json).toEqual({
        model: "claude-sonnet-4-5",
        max_tokens: 300,
        tools: [WEATHER_TOOL],
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        stream: true,
      });

      mock.enqueue(() => anthropicStream("stream-tools.sse"));
      const { frames } = await rawStream(gw(), k.key, {
        model: CLAUDE_MODEL,
        max_tokens: 300,
        messages: [{ role: "user", content: "x" }],
      });
      const upstream = anthropicFixture("stream-tools.sse")
        .split("\n\n")
        .filter((f) => f.trim() !== "")
        .map((f) => ({
          event: /^event: (.*)$/m.exec(f)?.[1],
          data: JSON.parse(/^data: (.*)$/m.exec(f)?.[1] ?? "null"),
        }));
      expect(frames).toEqual(upstream);

      const rows = await logsOf(gw(), k.token_id);
      expect(rows.map((r) => [r.stream, r.input_tokens, r.output_tokens, r.usage_estimated])).toEqual([
        [false, 412, 96, false],
        [true, 412, 96, false],
        [true, 412, 96, false],
      ]);
      expect(rows[1]?.cost as number).toBeCloseTo(412 * CLAUDE.input + 96 * CLAUDE.output, 15);
    });

    test("Anthropic: an upstream error event mid-stream reaches the client as event: error; the SDK raises it", async () => {
      const k = await gw().newKey();
      mock.enqueue(() => anthropicStream("stream-overloaded.sse"));
      const { status, frames } = await rawStream(gw(), k.key, {
        model: CLAUDE_MODEL,
        max_tokens: 50,
        messages: [{ role: "user", content: "x" }],
      });
      expect(status).toBe(200);
      expect(frames.at(-1)).toEqual({
        event: "error",
        data: {
          type: "error",
          error: { details: null, type: "overloaded_error", message: "Overloaded" },
          request_id: "req_011CUabcDEFghiJKLmnoPQRs",
        },
      });
      mock.enqueue(() => anthropicStream("stream-overloaded.sse"));
      const err = await client(gw(), { apiKey: k.key })
        .messages.stream({ model: CLAUDE_MODEL, max_tokens: 50, messages: [{ role: "user", content: "x" }] })
        .finalMessage()
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
        error: { type: "overloaded_error" },
      });
      const rows = await logsOf(gw(), k.token_id);
      expect(rows.map((r) => [r.status, r.error_code])).toEqual([
        [503, "upstream_overloaded"],
        [503, "upstream_overloaded"],
      ]);
    });

    // -----------------------------------------------------------------------------------------
    // Gemini-type upstream: translated
    // -----------------------------------------------------------------------------------------

    test("Gemini: text, usage (input_tokens uncached) and exact cost; tool calls; streams", async () => {
      const k = await gw().newKey();
      const c = client(gw(), { apiKey: k.key });
      mock.enqueue(() => geminiJson("generate-content.json"));
      const msg = await c.messages.create({
        model: "gemini/gemini-2.5-flash",
        max_tokens: 500,
        system: "Be brief.",
        messages: [
          { role: "user", content: [{ type: "text", text: "Weather?", cache_control: { type: "ephemeral" } }] },
        ],
      });
      expect(msg.content).toEqual([{ type: "text", text: "Clear skies, 21 °C in Lisbon." }] as never);
      expect(msg.usage).toEqual({
        input_tokens: 318,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 1536,
        output_tokens: 152,
      } as never);
      const up = mock.requests[0];
      expect(up?.path).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
      expect(up?.headers["x-goog-api-key"]).toBe(GEMINI_KEY);
      expect(upstreamText(up)).not.toContain("cache_control");
      expect(up?.json).toMatchObject({
        systemInstruction: { parts: [{ text: "Be brief." }] },
        contents: [{ role: "user", parts: [{ text: "Weather?" }] }],
        generationConfig: { maxOutputTokens: 500 },
      });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        input_tokens: 1854,
        cache_read_tokens: 1536,
        output_tokens: 152,
        usage_estimated: false,
      });
      expect(row?.cost as number).toBeCloseTo(318 * GEMINI.input + 1536 * GEMINI.cacheRead + 152 * GEMINI.output, 15);

      mock.enqueue(() => geminiJson("generate-content-tools.json"));
      const tools = await c.messages.create({
        model: "gemini/gemini-2.5-flash",
        max_tokens: 500,
        tools: [WEATHER_TOOL],
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
      });
      expect(tools.stop_reason).toBe("tool_use");
      const uses = tools.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
      expect(uses.map((b) => [b.name, b.input])).toEqual([
        ["get_weather", { city: "Lisbon" }],
        ["get_weather", { city: "Porto", units: "celsius" }],
      ]);
      expect(uses[0]?.id).toBe("fc_lisbon_01");
      expect(uses[1]?.id).toMatch(/^call_/);
      expect(tools.content.find((b) => b.type === "text")).toEqual({
        type: "text",
        text: "Checking both cities.",
      } as never);

      mock.enqueue(() => geminiStream("stream.sse", 1));
      const streamed = await c.messages
        .stream({
          model: "gemini/gemini-2.5-flash",
          max_tokens: 500,
          messages: [{ role: "user", content: "Weather?" }],
        })
        .finalMessage();
      expect(streamed.content).toEqual([{ type: "text", text: "Clear skies, 21 °C in Lisbon." }] as never);
      expect(streamed.usage).toMatchObject({ input_tokens: 318, cache_read_input_tokens: 1536, output_tokens: 152 });
      expect(mock.requests[2]?.path).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent");

      mock.enqueue(() => geminiStream("stream-tools.sse"));
      const streamedTools = await c.messages
        .stream({
          model: "gemini/gemini-2.5-flash",
          max_tokens: 500,
          tools: [WEATHER_TOOL],
          messages: [{ role: "user", content: "x" }],
        })
        .finalMessage();
      expect(streamedTools.stop_reason).toBe("tool_use");
      expect(
        streamedTools.content.filter((b) => b.type === "tool_use").map((b) => (b.type === "tool_use" ? b.input : null)),
      ).toEqual([{ city: "Lisbon" }, { city: "Porto", units: "celsius" }]);
      const rows = await logsOf(gw(), k.token_id);
      expect(rows.at(-2)?.cost as number).toBeCloseTo(
        318 * GEMINI.input + 1536 * GEMINI.cacheRead + 152 * GEMINI.output,
        15,
      );
    });

    // -----------------------------------------------------------------------------------------
    // Azure, OpenAI-compatible, Vertex AI, Bedrock
    // -----------------------------------------------------------------------------------------

    test("Azure and OpenAI-compatible: text, streamed and not", async () => {
      mock.enqueue(() => openaiJson("chat-completion.json"));
      const azure = await sdk.messages.create({
        model: "azure/gpt-4o-mini",
        max_tokens: 50,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(azure.content).toEqual([{ type: "text", text: "Lisbon is sunny today, around 21 °C." }] as never);
      expect(mock.requests[0]?.path).toBe("/openai/deployments/prod-gpt4o-mini/chat/completions");
      expect(mock.requests[0]?.headers["api-key"]).toBe("azure-provider-key-0123456789");

      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const azureStream = await sdk.messages
        .stream({ model: "azure/gpt-4o-mini", max_tokens: 50, messages: [{ role: "user", content: "hi" }] })
        .finalMessage();
      expect(azureStream.content).toEqual([{ type: "text", text: "Lisbon is sunny today." }] as never);

      mock.enqueue(() => openaiJson("chat-completion.json"));
      const local = await sdk.messages.create({
        model: "local/llama-3.1-8b",
        max_tokens: 50,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(local.content).toEqual([{ type: "text", text: "Lisbon is sunny today, around 21 °C." }] as never);
      expect(mock.requests[2]?.path).toBe("/compat/v1/chat/completions");
      expect(mock.requests[2]?.json).toMatchObject({ model: "llama-3.1-8b", max_tokens: 50 });

      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const localStream = await sdk.messages
        .stream({ model: "local/llama-3.1-8b", max_tokens: 50, messages: [{ role: "user", content: "hi" }] })
        .finalMessage();
      expect(localStream.content).toEqual([{ type: "text", text: "Lisbon is sunny today." }] as never);
      expect(localStream.stop_reason).toBe("end_turn");
    });

    test("Vertex AI: Gemini translated; Claude forwarded natively (model in the URL, anthropic_version in the body)", async () => {
      mock.enqueue(() => vertexJson("generate-content.json"));
      const gem = await sdk.messages.create({
        model: "vertex/gemini-2.5-flash",
        max_tokens: 50,
        messages: [{ role: "user", content: "Porto?" }],
      });
      expect(gem.content).toEqual([{ type: "text", text: "Porto is cloudy, 17 °C." }] as never);
      expect(mock.requests[0]?.path).toBe(`${VERTEX_RESOURCE}/google/models/gemini-2.5-flash:generateContent`);
      expect(mock.requests[0]?.headers.authorization).toBe("Bearer ya29.messages-e2e-token");

      mock.enqueue(() => vertexStream("stream.sse"));
      const gemStream = await sdk.messages
        .stream({ model: "vertex/gemini-2.5-flash", max_tokens: 50, messages: [{ role: "user", content: "Porto?" }] })
        .finalMessage();
      expect(gemStream.content).toEqual([{ type: "text", text: "Porto is cloudy, 17 °C." }] as never);

      mock.enqueue(() => vertexJson("claude-message.json"));
      const body = {
        model: "vertex/claude-sonnet-4-5@20250929",
        max_tokens: 50,
        system: [{ type: "text" as const, text: "Be brief.", cache_control: { type: "ephemeral" as const } }],
        messages: [{ role: "user" as const, content: "Lisbon?" }],
      };
      const claude = await sdk.messages.create(body);
      expect(claude).toEqual(JSON.parse(await vertexJson("claude-message.json").text()));
      const { model: _model, ...rest } = body;
      expect(mock.requests[2]?.path).toBe(`${VERTEX_RESOURCE}/anthropic/models/claude-sonnet-4-5@20250929:rawPredict`);
      expect(mock.requests[2]?.json).toEqual({ ...rest, anthropic_version: "vertex-2023-10-16" });

      mock.enqueue(() => vertexStream("claude-stream.sse"));
      const claudeStream = await sdk.messages.stream(body).finalMessage();
      expect(claudeStream.content[0]).toEqual({ type: "text", text: "Checking" } as never);
      expect(mock.requests[3]?.path).toBe(
        `${VERTEX_RESOURCE}/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict`,
      );
      expect(mock.requests[3]?.json).toEqual({ ...rest, stream: true, anthropic_version: "vertex-2023-10-16" });
    });

    test("Bedrock (Claude): text streamed and not; cache_control becomes Converse cache points", async () => {
      mock.enqueue(() => bedrockJson("converse-text.json"));
      const msg = await sdk.messages.create({
        model: BEDROCK_MODEL,
        max_tokens: 200,
        system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }],
        messages: [{ role: "user", content: "Weather in Lisbon?" }],
      });
      expect(msg.content).toEqual([{ type: "text", text: "Lisbon is sunny today, around 21 °C." }] as never);
      expect(msg.usage).toEqual({
        input_tokens: 100,
        cache_creation_input_tokens: 500,
        cache_read_input_tokens: 2000,
        output_tokens: 50,
      } as never);
      expect(mock.requests[0]?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse");
      expect(mock.requests[0]?.headers.authorization).toBe(`Bearer ${BEDROCK_KEY}`);
      expect(mock.requests[0]?.json).toMatchObject({
        system: [{ text: "Be brief." }, { cachePoint: { type: "default" } }],
      });

      mock.enqueue(() => bedrockStream("converse-stream-text.json", { sizes: [5, 40] }));
      const streamed = await sdk.messages
        .stream({ model: BEDROCK_MODEL, max_tokens: 200, messages: [{ role: "user", content: "hi" }] })
        .finalMessage();
      expect(streamed.content).toEqual([{ type: "text", text: "Lisbon is sunny today." }] as never);
      expect(streamed.usage).toMatchObject({
        input_tokens: 100,
        cache_read_input_tokens: 2000,
        cache_creation_input_tokens: 500,
        output_tokens: 5,
      });
    });

    // -----------------------------------------------------------------------------------------
    // count_tokens
    // -----------------------------------------------------------------------------------------

    test("count_tokens: the gateway's estimate for any model; 404 and 403 as for messages", async () => {
      const body = {
        model: "openai/gpt-4o-mini",
        system: "You are a travel assistant.",
        tools: [WEATHER_TOOL],
        messages: [{ role: "user" as const, content: "What's the weather in Lisbon today?" }],
      };
      const expected = countTokens(promptText(decodeMessagesRequest(parseCountTokensRequest(body))));
      expect(expected).toBeGreaterThan(10);
      expect(await sdk.messages.countTokens(body)).toEqual({ input_tokens: expected });
      expect(await sdk.messages.countTokens({ ...body, model: CLAUDE_MODEL })).toEqual({ input_tokens: expected });
      expect(mock.requests).toHaveLength(0);

      const missing = await sdk.messages.countTokens({ ...body, model: "openai/nope" }).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
      const limited = await gw().newKey({ models: ["openai/gpt-4o-mini"] });
      const forbidden = await client(gw(), { apiKey: limited.key })
        .messages.countTokens({ ...body, model: CLAUDE_MODEL })
        .catch((e: unknown) => e);
      expect(forbidden).toBeInstanceOf(Anthropic.PermissionDeniedError);
      const bad = await sdk.messages.countTokens({ ...body, messages: [] }).catch((e: unknown) => e);
      expect(bad).toBeInstanceOf(Anthropic.BadRequestError);
    });

    // -----------------------------------------------------------------------------------------
    // Authentication and errors in Anthropic's envelope
    // -----------------------------------------------------------------------------------------

    test("authentication: x-api-key and Bearer (authToken) both work; missing or wrong keys are 401 authentication_error", async () => {
      mock.enqueue(() => openaiJson("chat-completion.json"));
      const viaBearer = await client(gw(), { authToken: key.key }).messages.create({
        model: "openai/gpt-4o-mini",
        max_tokens: 10,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(viaBearer.type).toBe("message");

      for (const c of [
        client(gw(), { apiKey: "sk-wrong-key-0000" }),
        client(gw(), { authToken: "sk-wrong-key-0000" }),
      ]) {
        const err = await c.messages
          .create({ model: "openai/gpt-4o-mini", max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
        expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(401);
        expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
          type: "error",
          error: { type: "authentication_error" },
        });
      }
      const res = await fetch(`${gw().listen()}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "openai/gpt-4o-mini",
          max_tokens: 10,
          messages: [{ role: "user", content: "hi" }],
        }),
      });
      expect(res.status).toBe(401);
      const body = (await res.json()) as { type: string; error: { type: string; message: string } };
      expect(body.type).toBe("error");
      expect(body.error.type).toBe("authentication_error");
      expect(mock.requests).toHaveLength(1);
    });

    test("unknown model 404 not_found_error, forbidden model 403 permission_error, upstream 429 rate_limit_error", async () => {
      const notFound = await sdk.messages
        .create({ model: "openai/no-such-model", max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e);
      expect(notFound).toBeInstanceOf(Anthropic.NotFoundError);
      expect((notFound as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
        type: "error",
        error: { type: "not_found_error" },
      });

      const limited = await gw().newKey({ models: ["openai/gpt-4o-mini"] });
      const forbidden = await client(gw(), { apiKey: limited.key })
        .messages.create({ model: CLAUDE_MODEL, max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e);
      expect(forbidden).toBeInstanceOf(Anthropic.PermissionDeniedError);
      expect((forbidden as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
        error: { type: "permission_error" },
      });

      mock.enqueue(() => openaiError(429, "Rate limit reached for requests", "requests", { "retry-after": "7" }));
      const limitedUp = await sdk.messages
        .create({ model: "openai/gpt-4o-mini", max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e);
      expect(limitedUp).toBeInstanceOf(Anthropic.RateLimitError);
      const rl = limitedUp as InstanceType<typeof Anthropic.APIError>;
      expect(rl.error).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
      expect(rl.headers?.get("retry-after")).toBe("7");

      mock.enqueue(() => openaiError(500, "upstream exploded", "server_error"));
      const failed = await sdk.messages
        .create({ model: "openai/gpt-4o-mini", max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
        .catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(Anthropic.InternalServerError);
      expect((failed as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ error: { type: "api_error" } });
    });

    test("bad input: 400 invalid_request_error naming the field; malformed JSON; native-only content refused for translated models", async () => {
      const post = async (body: string) => {
        const res = await fetch(`${gw().listen()}/v1/messages`, {
          method: "POST",
          headers: { "x-api-key": key.key, "content-type": "application/json" },
          body,
        });
        return {
          status: res.status,
          body: (await res.json()) as { type: string; error: { type: string; message: string } },
        };
      };
      const noMax = await sdk.messages
        .create({
          model: "openai/gpt-4o-mini",
          messages: [{ role: "user", content: "hi" }],
        } as unknown as Anthropic.MessageCreateParamsNonStreaming)
        .catch((e: unknown) => e);
      expect(noMax).toBeInstanceOf(Anthropic.BadRequestError);
      expect((noMax as InstanceType<typeof Anthropic.APIError>).error).toEqual({
        type: "error",
        error: { type: "invalid_request_error", message: "Missing required field 'max_tokens' in request body" },
      });

      const malformed = await post('{"model": "openai/gpt-4o-mini", "max_tokens": ');
      expect(malformed.status).toBe(400);
      expect(malformed.body.type).toBe("error");
      expect(malformed.body.error.type).toBe("invalid_request_error");
      expect(malformed.body.error.message).toContain("Malformed JSON");

      const badBlock = await post(
        JSON.stringify({
          model: "openai/gpt-4o-mini",
          max_tokens: 5,
          messages: [{ role: "user", content: [{ type: "video", url: "x" }] }],
        }),
      );
      expect(badBlock.status).toBe(400);
      expect(badBlock.body.error.message).toContain("Invalid 'messages[0].content[0].type': expected one of");

      const temp = await sdk.messages
        .create({
          model: "openai/gpt-4o-mini",
          max_tokens: 5,
          messages: [{ role: "user", content: "hi" }],
          ...{ temperature: 1.7 },
        })
        .catch((e: unknown) => e);
      expect(temp).toBeInstanceOf(Anthropic.BadRequestError);
      expect((temp as InstanceType<typeof Anthropic.APIError>).message).toContain("Invalid 'temperature'");

      const pdf = {
        max_tokens: 50,
        messages: [
          {
            role: "user" as const,
            content: [
              {
                type: "document" as const,
                source: { type: "base64" as const, media_type: "application/pdf" as const, data: "JVBERi0xLjQK" },
              },
              { type: "text" as const, text: "Summarise." },
            ],
          },
        ],
      };
      const refused = await sdk.messages.create({ ...pdf, model: "openai/gpt-4o-mini" }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(Anthropic.BadRequestError);
      expect((refused as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
        error: {
          type: "invalid_request_error",
          message: expect.stringContaining(
            "'messages[0].content[0]' (a document with a base64 source) can only be sent to models served by Anthropic",
          ),
        },
      });
      expect(mock.requests).toHaveLength(0);

      // The same request reaches Claude, which reads PDFs itself.
      mock.enqueue(() => anthropicJson("message.json"));
      await sdk.messages.create({ ...pdf, model: CLAUDE_MODEL });
      expect(mock.requests[0]?.json).toEqual({ ...pdf, model: "claude-sonnet-4-5" });
    });

    test("Anthropic, forwarded natively: a client that leaves mid-stream keeps message_start's input counts, output counted from the text", async () => {
      const k = await gw().newKey();
      const words = Array.from({ length: 80 }, (_, i) => `word${i} `);
      mock.enqueue(() => anthropicTextStream(words, { input: 40, output: 900, cacheRead: 1800 }, 25));
      const stream = await client(gw(), { apiKey: k.key }).messages.create({
        model: CLAUDE_MODEL,
        max_tokens: 1000,
        messages: [{ role: "user", content: "Count slowly." }],
        stream: true,
      });
      let received = "";
      let deltas = 0;
      // The SDK ends the iteration (or throws its abort error) once the stream is aborted.
      await (async () => {
        for await (const ev of stream) {
          if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") {
            received += ev.delta.text;
            if (++deltas === 8) stream.controller.abort();
          }
        }
      })().catch((e) => {
        if (!(e instanceof Anthropic.APIUserAbortError)) throw e;
      });
      expect(deltas).toBe(8);
      await eventually(
        () => mock.open,
        (n) => n === 0,
      );
      const row = await logRowWithStatus(gw(), k.token_id, 499);
      expect(row).toMatchObject({
        usage_estimated: true,
        input_tokens: 1840,
        cache_read_tokens: 1800,
        provider: "anthropic",
      });
      expect(row.output_tokens as number).toBeGreaterThanOrEqual(countTokens(received));
      expect(row.output_tokens as number).toBeLessThan(900);
    });

    test("a translated stream that fails midway ends with event: error in Anthropic's shape", async () => {
      const chunk = (content: string) => ({
        id: "chatcmpl-x",
        object: "chat.completion.chunk",
        created: 1,
        model: "gpt-4o-mini",
        choices: [{ index: 0, delta: { content }, finish_reason: null }],
      });
      mock.enqueue(() =>
        streamResponse(sse([chunk("Lisbon"), { error: { message: "The server had an error", type: "server_error" } }])),
      );
      const { status, frames } = await rawStream(gw(), key.key, {
        model: "openai/gpt-4o-mini",
        max_tokens: 50,
        messages: [{ role: "user", content: "x" }],
      });
      expect(status).toBe(200);
      expect(frames.map((f) => f.event)).toEqual([
        "message_start",
        "content_block_start",
        "content_block_delta",
        "error",
      ]);
      expect(frames.at(-1)?.data).toEqual({
        type: "error",
        error: { type: "api_error", message: "openai stream failed: The server had an error" },
      });

      mock.enqueue(() =>
        streamResponse(sse([chunk("Lisbon"), { error: { message: "The server had an error", type: "server_error" } }])),
      );
      const err = await sdk.messages
        .stream({ model: "openai/gpt-4o-mini", max_tokens: 50, messages: [{ role: "user", content: "x" }] })
        .finalMessage()
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.APIError);
      expect((err as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ error: { type: "api_error" } });
    });
  },
  () => ({
    inference: {
      providers: {
        openai: { type: "openai", api_base: `${mock.url}/v1`, api_key: OPENAI_KEY },
        local: { type: "openai-compatible", api_base: `${mock.url}/compat/v1` },
        azure: {
          type: "azure",
          api_base: mock.url,
          api_version: "2024-10-21",
          api_key: "azure-provider-key-0123456789",
        },
        anthropic: { type: "anthropic", api_base: mock.url, api_key: ANTHROPIC_KEY },
        gemini: { type: "gemini", api_base: `${mock.url}/v1beta`, api_key: GEMINI_KEY },
        vertex: {
          type: "vertex",
          project: "gw-e2e-project",
          location: "us-east5",
          credentials: sa.json,
          api_base: `${mock.url}/v1`,
        },
        bedrock: { type: "bedrock", api_base: mock.url, region: "us-east-1", api_key: BEDROCK_KEY },
      },
      models: [
        {
          name: "openai/gpt-4o-mini",
          input_cost_per_token: OPENAI.input,
          output_cost_per_token: OPENAI.output,
          cache_read_input_token_cost: OPENAI.cacheRead,
          cache_creation_input_token_cost: null,
          supports_function_calling: true,
        },
        {
          name: CLAUDE_MODEL,
          input_cost_per_token: CLAUDE.input,
          output_cost_per_token: CLAUDE.output,
          cache_read_input_token_cost: CLAUDE.cacheRead,
          cache_creation_input_token_cost: CLAUDE.cacheWrite,
          max_output_tokens: 64000,
        },
        {
          name: "gemini/gemini-2.5-flash",
          input_cost_per_token: GEMINI.input,
          output_cost_per_token: GEMINI.output,
          cache_read_input_token_cost: GEMINI.cacheRead,
          cache_creation_input_token_cost: null,
        },
        {
          name: "azure/gpt-4o-mini",
          model: "prod-gpt4o-mini",
          input_cost_per_token: 1e-6,
          output_cost_per_token: 2e-6,
        },
        { name: "local/*" },
        { name: "vertex/gemini-2.5-flash", input_cost_per_token: GEMINI.input, output_cost_per_token: GEMINI.output },
        {
          name: "vertex/claude-sonnet-4-5@20250929",
          input_cost_per_token: CLAUDE.input,
          output_cost_per_token: CLAUDE.output,
        },
        { name: BEDROCK_MODEL, input_cost_per_token: CLAUDE.input, output_cost_per_token: CLAUDE.output },
      ],
      router: { num_retries: 0 },
    },
  }),
);
