/**
 * The openai SDK through the gateway to a Bedrock-type upstream (Converse / ConverseStream): answers,
 * binary event streams, tools, images, usage, cost, SigV4 on every request, API-key mode, errors.
 */
import { afterAll, beforeEach, expect, test } from "bun:test";
import OpenAI from "openai";
import { describeEachBackend, type GeneratedWire, type KeyWire } from "./helpers/gateway";
import { logsOf, sdkClient } from "./helpers/inference";
import {
  bedrockConverse,
  bedrockError,
  bedrockJson,
  bedrockStream,
  REQUEST_ID,
  type StreamItem,
  verifySigV4,
} from "./mocks/bedrock";
import { type RecordedRequest, startMockUpstream } from "./mocks/upstream";

const CREDS = { accessKeyId: "AKIAGATEWAYE2ETEST01", secretAccessKey: "bedrock-e2e-secret-0123456789abcdefghijklmn" };
const SESSION_TOKEN = "bedrock-e2e-session-token-0123456789";
const API_KEY = "bedrock-api-key-e2e-0123456789abcdef";
const CLAUDE_ID = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const NOVA_ID = "amazon.nova-pro-v1:0";
const MODEL = `bedrock/${CLAUDE_ID}`;
const NOVA = `bedrock-key/${NOVA_ID}`;
const PRICES = { input: 3e-6, output: 15e-6, cacheRead: 0.3e-6, cacheWrite: 3.75e-6 };

const mock = startMockUpstream();
afterAll(() => mock.close());

/** Every SigV4-signed request the mock saw verifies against the shared secret and never carries the virtual key. */
function expectSignedUpstream(up: RecordedRequest | undefined, virtualKey: string): void {
  expect(up).toBeDefined();
  const check = verifySigV4(up as RecordedRequest, CREDS);
  expect(check).toMatchObject({ valid: true });
  expect(check.signedHeaders).toEqual(["content-type", "host", "x-amz-date", "x-amz-security-token"]);
  expect(up?.headers["x-amz-security-token"]).toBe(SESSION_TOKEN);
  expect(up?.headers.authorization).toContain(`Credential=${CREDS.accessKeyId}/`);
  expect(up?.headers.authorization).toContain("/us-east-1/bedrock/aws4_request");
  expect(JSON.stringify(up?.headers)).not.toContain(virtualKey);
  expect(up?.text).not.toContain(virtualKey);
}

const tools: OpenAI.ChatCompletionTool[] = [
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
  "chat completions via the openai SDK, Bedrock Converse upstream",
  (gw) => {
    let key: GeneratedWire;
    let client: OpenAI;
    beforeEach(async () => {
      mock.reset();
      key ??= await gw().newKey();
      client ??= sdkClient(gw(), key.key);
    });

    test("non-streaming: content, usage with cache tokens, a valid SigV4 signature, the model id encoded in the path", async () => {
      mock.enqueue(() => bedrockJson("converse-text.json"));
      const res = await client.chat.completions
        .create({
          model: MODEL,
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Weather in Lisbon?" },
          ],
          max_tokens: 200,
          temperature: 0.3,
          stop: ["END"],
        })
        .withResponse();
      expect(res.data.choices[0]?.message.content).toBe("Lisbon is sunny today, around 21 °C.");
      expect(res.data.choices[0]?.finish_reason).toBe("stop");
      expect(res.data.id).toBe(`chatcmpl-${REQUEST_ID}`);
      expect(res.data.model).toBe(CLAUDE_ID);
      expect(res.data.usage).toMatchObject({
        prompt_tokens: 2600,
        completion_tokens: 50,
        total_tokens: 2650,
        prompt_tokens_details: { cached_tokens: 2000 },
      });
      expect(res.response.headers.get("x-gateway-upstream-model")).toBe(CLAUDE_ID);
      expect(res.response.headers.get("x-gateway-model")).toBe(MODEL);
      const up = mock.requests[0];
      expect(up?.method).toBe("POST");
      expect(up?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse");
      expectSignedUpstream(up, key.key);
      expect(verifySigV4(up as RecordedRequest, { ...CREDS, secretAccessKey: "not-the-secret" }).valid).toBe(false);
      expect(up?.json).toEqual({
        messages: [{ role: "user", content: [{ text: "Weather in Lisbon?" }] }],
        system: [{ text: "Be brief." }],
        inferenceConfig: { maxTokens: 200, temperature: 0.3, stopSequences: ["END"] },
      });
    });

    test("spend and the request log match the prices exactly, cache reads and writes each at their price", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => bedrockJson("converse-text.json"));
      await c.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
      // Bedrock: inputTokens 100 (uncached), cacheRead 2000, cacheWrite 500, output 50.
      const expected = 100 * 3e-6 + 2000 * 0.3e-6 + 500 * 3.75e-6 + 50 * 15e-6;
      expect(expected).toBeCloseTo(0.003525, 15);
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        status: 200,
        model: MODEL,
        provider: "bedrock",
        deployment: MODEL,
        upstream_model: CLAUDE_ID,
        input_tokens: 2600,
        cache_read_tokens: 2000,
        cache_write_tokens: 500,
        output_tokens: 50,
        cost_estimated: false,
        stream: false,
      });
      expect(row?.cost as number).toBeCloseTo(expected, 15);
      const info = await gw().call<KeyWire>("GET", "/key/info", { key: k.key });
      expect(info.body.spend).toBeCloseTo(expected, 15);
    });

    test("streaming from a binary event stream: text in order; the usage chunk only when asked; billed either way", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => bedrockStream("converse-stream-text.json", { delayMs: 1 }));
      const plain = await c.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      const chunks: OpenAI.ChatCompletionChunk[] = [];
      for await (const ch of plain) chunks.push(ch);
      expect(chunks.map((ch) => ch.choices[0]?.delta?.content ?? "").join("")).toBe("Lisbon is sunny today.");
      expect(chunks.some((ch) => ch.usage)).toBe(false);
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
      expect(chunks[0]?.id).toBe(`chatcmpl-${REQUEST_ID}`);
      expect(mock.requests[0]?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream");
      expectSignedUpstream(mock.requests[0], k.key);

      mock.enqueue(() => bedrockStream("converse-stream-text.json", { sizes: [1, 2, 3] }));
      const withUsage = await c.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let usage: OpenAI.CompletionUsage | null | undefined;
      let text = "";
      for await (const ch of withUsage) {
        text += ch.choices[0]?.delta?.content ?? "";
        if (ch.usage) usage = ch.usage;
      }
      expect(text).toBe("Lisbon is sunny today.");
      expect(usage).toMatchObject({
        prompt_tokens: 2600,
        completion_tokens: 5,
        prompt_tokens_details: { cached_tokens: 2000 },
      });

      const rows = await logsOf(gw(), k.token_id);
      expect(rows).toHaveLength(2);
      for (const r of rows) {
        expect(r).toMatchObject({
          stream: true,
          status: 200,
          input_tokens: 2600,
          cache_read_tokens: 2000,
          cache_write_tokens: 500,
          output_tokens: 5,
          usage_estimated: false,
        });
        expect(r.ttft_ms).not.toBeNull();
        expect(r.cost as number).toBeCloseTo(
          100 * PRICES.input + 2000 * PRICES.cacheRead + 500 * PRICES.cacheWrite + 5 * PRICES.output,
          15,
        );
      }
    });

    test("parallel tool calls, streaming and not; the tools reach Converse as toolSpecs", async () => {
      mock.enqueue(() => bedrockJson("converse-tool-calls.json"));
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        tools,
        tool_choice: "required",
      });
      expect(res.choices[0]?.finish_reason).toBe("tool_calls");
      expect(res.choices[0]?.message.content).toBe("I'll check both cities.");
      const calls = res.choices[0]?.message.tool_calls ?? [];
      expect(calls.map((c) => (c.type === "function" ? [c.id, c.function.name, c.function.arguments] : []))).toEqual([
        ["tooluse_Lis1kC0aT7WqZr9xYbN2Qw", "get_weather", '{"city":"Lisbon"}'],
        ["tooluse_Por2mD1bU8XrAs0zZcO3Rx", "get_weather", '{"city":"Porto"}'],
      ]);
      expect((mock.requests[0]?.json as { toolConfig?: unknown } | undefined)?.toolConfig).toEqual({
        tools: [
          {
            toolSpec: {
              name: "get_weather",
              description: "Current weather for a city",
              inputSchema: {
                json: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
              },
            },
          },
        ],
        toolChoice: { any: {} },
      });

      mock.enqueue(() => bedrockStream("converse-stream-tools.json"));
      const stream = client.chat.completions.stream({
        model: MODEL,
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        tools,
      });
      const final = await stream.finalChatCompletion();
      const streamed = final.choices[0]?.message.tool_calls ?? [];
      expect(streamed.map((c) => (c.type === "function" ? [c.id, c.function.name, c.function.arguments] : []))).toEqual(
        [
          ["tooluse_Lis1kC0aT7WqZr9xYbN2Qw", "get_weather", '{"city": "Lisbon"}'],
          ["tooluse_Por2mD1bU8XrAs0zZcO3Rx", "get_weather", '{"city": "Porto"}'],
        ],
      );
      expect(final.choices[0]?.message.content).toBe("Checking both.");
      expect(final.choices[0]?.finish_reason).toBe("tool_calls");
      expect(mock.requests[1]?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream");
    });

    test("a tool-result round trip reaches Converse as toolUse / toolResult blocks", async () => {
      mock.enqueue(() => bedrockConverse("21 °C and sunny in Lisbon; 18 °C in Porto.", { input: 80, output: 12 }));
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: "user", content: "Weather in Lisbon and Porto?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "tooluse_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
              { id: "tooluse_2", type: "function", function: { name: "get_weather", arguments: '{"city":"Porto"}' } },
            ],
          },
          { role: "tool", tool_call_id: "tooluse_1", content: '{"temp_c":21,"sky":"sunny"}' },
          { role: "tool", tool_call_id: "tooluse_2", content: "18 °C" },
        ],
        tools,
      });
      expect(res.choices[0]?.message.content).toBe("21 °C and sunny in Lisbon; 18 °C in Porto.");
      expect(mock.requests[0]?.json).toEqual({
        messages: [
          { role: "user", content: [{ text: "Weather in Lisbon and Porto?" }] },
          {
            role: "assistant",
            content: [
              { toolUse: { toolUseId: "tooluse_1", name: "get_weather", input: { city: "Lisbon" } } },
              { toolUse: { toolUseId: "tooluse_2", name: "get_weather", input: { city: "Porto" } } },
            ],
          },
          {
            role: "user",
            content: [
              { toolResult: { toolUseId: "tooluse_1", content: [{ json: { temp_c: 21, sky: "sunny" } }] } },
              { toolResult: { toolUseId: "tooluse_2", content: [{ text: "18 °C" }] } },
            ],
          },
        ],
        toolConfig: {
          tools: [
            {
              toolSpec: {
                name: "get_weather",
                description: "Current weather for a city",
                inputSchema: {
                  json: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
                },
              },
            },
          ],
        },
      });
      expectSignedUpstream(mock.requests[0], key.key);
    });

    test("an image as a data URL goes inline as bytes with its format", async () => {
      mock.enqueue(() => bedrockConverse("A red pixel.", { input: 20, output: 4 }));
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "What is this?" },
              { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } },
            ],
          },
        ],
      });
      expect(res.choices[0]?.message.content).toBe("A red pixel.");
      expect((mock.requests[0]?.json as { messages?: unknown } | undefined)?.messages).toEqual([
        {
          role: "user",
          content: [{ text: "What is this?" }, { image: { format: "png", source: { bytes: png } } }],
        },
      ]);
    });

    test("Bedrock API key mode: Authorization: Bearer, no SigV4 headers", async () => {
      mock.enqueue(() => bedrockConverse("Hello from Nova.", { input: 9, output: 4 }));
      const res = await client.chat.completions.create({ model: NOVA, messages: [{ role: "user", content: "hi" }] });
      expect(res.choices[0]?.message.content).toBe("Hello from Nova.");
      const up = mock.requests[0];
      expect(up?.path).toBe("/model/amazon.nova-pro-v1%3A0/converse");
      expect(up?.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(up?.headers["x-amz-date"]).toBeUndefined();
      expect(up?.headers["x-amz-security-token"]).toBeUndefined();
      expect(JSON.stringify(up?.headers)).not.toContain(key.key);
    });

    test("upstream errors: ValidationException 400 -> 400; 403 -> 502 without credentials; ThrottlingException 429 -> 429", async () => {
      mock.enqueue(() =>
        bedrockError(400, "ValidationException", "messages.0.content: text content blocks must be non-empty"),
      );
      const bad = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad.message).toContain("text content blocks must be non-empty");
      expect(bad.code).toBe("ValidationException");
      expect(mock.requests).toHaveLength(1);

      mock.reset();
      mock.enqueue(() =>
        bedrockError(
          403,
          "UnrecognizedClientException",
          `The security token included in the request is invalid (${CREDS.accessKeyId} ${SESSION_TOKEN}).`,
        ),
      );
      const denied = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(denied).toBeInstanceOf(OpenAI.APIError);
      expect(denied.status).toBe(502);
      expect(denied.error).toMatchObject({ code: "upstream_auth_error" });
      const shown = JSON.stringify(denied.error);
      for (const secret of [CREDS.secretAccessKey, CREDS.accessKeyId, SESSION_TOKEN])
        expect(shown).not.toContain(secret);
      expect(mock.requests).toHaveLength(1);

      mock.reset();
      mock.enqueue(() =>
        bedrockError(429, "ThrottlingException", "Too many requests, please wait before trying again."),
      );
      const limited = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }], stream: true })
        .catch((e) => e);
      expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
      expect(limited.status).toBe(429);
      expect(limited.message).toContain("Too many requests");
      expect(mock.requests).toHaveLength(1);
    });

    test("an exception mid-stream reaches the client as an OpenAI error frame after the text so far, and is logged", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => bedrockStream("converse-stream-exception.json"));
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
      expect(err.message).toContain("modelStreamErrorException");
      expect(err.message).toContain("the model produced an invalid sequence");
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({ status: 502, error_code: "upstream_error", stream: true });

      // A throttling exception inside the stream keeps its 429 meaning in the frame.
      const items: StreamItem[] = [
        { event: "messageStart", payload: { role: "assistant" } },
        { exception: "throttlingException", payload: { message: "Too many tokens, please wait." } },
      ];
      mock.enqueue(() => bedrockStream(items));
      const res = await fetch(`${gw().listen()}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${k.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], stream: true }),
      });
      const body = await res.text();
      const frame = body.split("\n\n").find((f) => f.includes('"error"'));
      expect(JSON.parse((frame ?? "").replace(/^data: /, ""))).toMatchObject({
        error: { type: "rate_limit_error", code: "upstream_rate_limited" },
      });
      expect(frame).toContain("Too many tokens, please wait.");
    });

    test("response_format json_object: a forced json_output tool with an open object schema; the JSON comes back as text", async () => {
      const answer = { city: "Lisbon", temperature_c: 21 };
      mock.enqueue(() =>
        bedrockJson({
          metrics: { latencyMs: 200 },
          output: {
            message: {
              role: "assistant",
              content: [{ toolUse: { toolUseId: "tooluse_json01", name: "json_output", input: answer } }],
            },
          },
          stopReason: "tool_use",
          usage: { inputTokens: 30, outputTokens: 12, totalTokens: 42 },
        }),
      );
      const res = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Weather in Lisbon as JSON" }],
        response_format: { type: "json_object" },
      });
      expect(JSON.parse(res.choices[0]?.message.content ?? "")).toEqual(answer);
      expect(res.choices[0]?.finish_reason).toBe("stop");
      expect(res.choices[0]?.message.tool_calls ?? []).toEqual([]);
      expect(mock.requests[0]?.json).toMatchObject({
        toolConfig: {
          tools: [{ toolSpec: { name: "json_output", inputSchema: { json: { type: "object" } } } }],
          toolChoice: { tool: { name: "json_output" } },
        },
      });

      mock.enqueue(() =>
        bedrockStream([
          { event: "messageStart", payload: { role: "assistant" } },
          {
            event: "contentBlockStart",
            payload: { contentBlockIndex: 0, start: { toolUse: { toolUseId: "tooluse_json02", name: "json_output" } } },
          },
          { event: "contentBlockDelta", payload: { contentBlockIndex: 0, delta: { toolUse: { input: '{"city":' } } } },
          { event: "contentBlockDelta", payload: { contentBlockIndex: 0, delta: { toolUse: { input: '"Lisbon"}' } } } },
          { event: "contentBlockStop", payload: { contentBlockIndex: 0 } },
          { event: "messageStop", payload: { stopReason: "tool_use" } },
          {
            event: "metadata",
            payload: { usage: { inputTokens: 30, outputTokens: 8, totalTokens: 38 }, metrics: { latencyMs: 90 } },
          },
        ]),
      );
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "Weather in Lisbon as JSON" }],
        response_format: { type: "json_object" },
        stream: true,
      });
      let text = "";
      let finish: string | null | undefined;
      for await (const ch of stream) {
        text += ch.choices[0]?.delta?.content ?? "";
        finish = ch.choices[0]?.finish_reason ?? finish;
        expect(ch.choices[0]?.delta?.tool_calls).toBeUndefined();
      }
      expect(JSON.parse(text)).toEqual({ city: "Lisbon" });
      expect(finish).toBe("stop");
    });

    test("n: 2 is a 400 on param n and nothing is sent upstream", async () => {
      const err = await client.chat.completions
        .create({ model: MODEL, messages: [{ role: "user", content: "x" }], n: 2 })
        .catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.status).toBe(400);
      expect(err.param).toBe("n");
      expect(err.message).toContain("n must be 1");
      expect(mock.requests).toHaveLength(0);
    });
  },
  () => ({
    inference: {
      providers: {
        bedrock: {
          type: "bedrock",
          api_base: mock.url,
          region: "us-east-1",
          access_key_id: CREDS.accessKeyId,
          secret_access_key: CREDS.secretAccessKey,
          session_token: SESSION_TOKEN,
        },
        "bedrock-key": { type: "bedrock", api_base: mock.url, region: "us-east-1", api_key: API_KEY },
      },
      models: [
        {
          name: MODEL,
          input_cost_per_token: PRICES.input,
          output_cost_per_token: PRICES.output,
          cache_read_input_token_cost: PRICES.cacheRead,
          cache_creation_input_token_cost: PRICES.cacheWrite,
          max_output_tokens: 64000,
          supports_function_calling: true,
          supports_vision: true,
        },
        { name: NOVA, input_cost_per_token: 0.8e-6, output_cost_per_token: 3.2e-6 },
      ],
      router: { num_retries: 0 },
    },
  }),
);
