/** The openai SDK through the gateway to a Gemini (Google AI) upstream: answers, streams, tools, images, usage, cost, errors. */
import { afterAll, beforeEach, expect, test } from "bun:test";
import OpenAI from "openai";
import { describeEachBackend, type GeneratedWire, type KeyWire } from "./helpers/gateway";
import { logsOf, sdkClient } from "./helpers/inference";
import { geminiFixture, geminiJson, geminiStream, geminiText, googleError } from "./mocks/gemini";
import { startMockUpstream } from "./mocks/upstream";

const PROVIDER_KEY = "AIzaSyA-provider-gemini-secret-0123456789";
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
  "base64",
);
const mock = startMockUpstream();
const images = startMockUpstream(async (r) => {
  // The slow image makes the gateway's own work inside an attempt measurable.
  if (r.path === "/img/slow.png") await Bun.sleep(400);
  const found = r.path === "/img/pixel.png" || r.path === "/img/slow.png";
  return new Response(found ? PNG : "missing", { status: found ? 200 : 404, headers: { "content-type": "image/png" } });
});
afterAll(() => {
  mock.close();
  images.close();
});

const PRICES = { input: 0.3e-6, output: 2.5e-6, cacheRead: 0.075e-6 };
/** generate-content.json and stream.sse: 1854 prompt (1536 cached), 12 candidates + 140 thoughts. */
const FIXTURE_COST = (1854 - 1536) * PRICES.input + 1536 * PRICES.cacheRead + (12 + 140) * PRICES.output;
const UPSTREAM_PATH = "/v1beta/models/gemini-2.5-flash:generateContent";
const STREAM_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather",
      strict: true,
      parameters: {
        type: "object",
        additionalProperties: false,
        properties: {
          city: { type: "string" },
          units: { type: ["string", "null"], enum: ["celsius", "fahrenheit", null] },
        },
        required: ["city", "units"],
      },
    },
  },
];

describeEachBackend(
  "chat completions via the openai SDK, Gemini upstream",
  (gw) => {
    let key: GeneratedWire;
    let client: OpenAI;
    beforeEach(async () => {
      mock.reset();
      images.reset();
      key ??= await gw().newKey();
      client ??= sdkClient(gw(), key.key);
    });

    test("non-streaming: text and usage come back; upstream sees the provider key in its header and a Gemini body", async () => {
      mock.enqueue(() => geminiJson("generate-content.json"));
      const res = await client.chat.completions
        .create({
          model: "gemini/gemini-2.5-flash",
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Weather in Lisbon?" },
          ],
          max_completion_tokens: 300,
          temperature: 0.2,
          stop: ["END"],
          reasoning_effort: "medium",
        })
        .withResponse();
      expect(res.data.choices).toHaveLength(1);
      expect(res.data.choices[0]?.message.content).toBe("Clear skies, 21 °C in Lisbon.");
      expect(res.data.choices[0]?.finish_reason).toBe("stop");
      expect(res.data.model).toBe("gemini-2.5-flash");
      expect(res.data.id).toContain("k3VhaO7yFIOq1MkP3-WVkA4");
      expect(res.data.usage).toMatchObject({
        prompt_tokens: 1854,
        completion_tokens: 152,
        total_tokens: 2006,
        prompt_tokens_details: { cached_tokens: 1536 },
        completion_tokens_details: { reasoning_tokens: 140 },
      });
      expect(res.response.headers.get("x-gateway-upstream-model")).toBe("gemini-2.5-flash");
      expect(res.response.headers.get("x-gateway-model")).toBe("gemini/gemini-2.5-flash");
      const up = mock.requests[0];
      expect(up?.method).toBe("POST");
      expect(up?.path).toBe(UPSTREAM_PATH);
      expect(up?.query.get("key")).toBeNull();
      expect(up?.headers["x-goog-api-key"]).toBe(PROVIDER_KEY);
      expect(up?.headers.authorization).toBeUndefined();
      expect(JSON.stringify(up?.headers)).not.toContain(key.key);
      expect(up?.json).toEqual({
        systemInstruction: { parts: [{ text: "Be brief." }] },
        contents: [{ role: "user", parts: [{ text: "Weather in Lisbon?" }] }],
        generationConfig: {
          maxOutputTokens: 300,
          temperature: 0.2,
          stopSequences: ["END"],
          thinkingConfig: { thinkingBudget: 4096 },
        },
      });
    });

    test("spend and the request log match the catalog prices exactly, cached and thought tokens included", async () => {
      const k = await gw().newKey();
      const c = sdkClient(gw(), k.key);
      mock.enqueue(() => geminiJson("generate-content.json"));
      await c.chat.completions.create({
        model: "gemini/gemini-2.5-flash",
        messages: [{ role: "user", content: "hi" }],
      });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        status: 200,
        model: "gemini/gemini-2.5-flash",
        provider: "gemini",
        deployment: "gemini/gemini-2.5-flash",
        upstream_model: "gemini-2.5-flash",
        input_tokens: 1854,
        cache_read_tokens: 1536,
        cache_write_tokens: 0,
        output_tokens: 152,
        reasoning_tokens: 140,
        cost_estimated: false,
        usage_estimated: false,
        stream: false,
      });
      expect(row?.cost as number).toBeCloseTo(FIXTURE_COST, 15);
      const info = await gw().call<KeyWire>("GET", "/key/info", { key: k.key });
      expect(info.body.spend).toBeCloseTo(FIXTURE_COST, 15);

      const hub = await gw().call<{ data: Record<string, unknown>[] }>("GET", "/public/model_hub", { key: null });
      expect(hub.body.data.find((m) => m.model_name === "gemini/gemini-2.5-flash")).toMatchObject({
        providers: ["gemini"],
        input_cost_per_token: PRICES.input,
        output_cost_per_token: PRICES.output,
        cache_read_input_token_cost: PRICES.cacheRead,
        cache_creation_input_token_cost: null,
      });
    });

    test("streaming: alt=sse upstream, deltas in order, usage chunk only when asked, billed either way", async () => {
      mock.enqueue(() => geminiStream("stream.sse", 5));
      const plain = await client.chat.completions.create({
        model: "gemini/gemini-2.5-flash",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      const chunks = [];
      for await (const ch of plain) chunks.push(ch);
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Clear skies, 21 °C in Lisbon.");
      expect(chunks.some((c) => c.usage)).toBe(false);
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
      expect(mock.requests[0]?.path).toBe(STREAM_PATH);
      expect(mock.requests[0]?.query.get("alt")).toBe("sse");
      expect(mock.requests[0]?.headers["x-goog-api-key"]).toBe(PROVIDER_KEY);

      mock.enqueue(() => geminiStream("stream.sse"));
      const withUsage = await client.chat.completions.create({
        model: "gemini/gemini-2.5-flash",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const ch of withUsage) if (ch.usage) usage = ch.usage;
      expect(usage).toMatchObject({
        prompt_tokens: 1854,
        completion_tokens: 152,
        prompt_tokens_details: { cached_tokens: 1536 },
        completion_tokens_details: { reasoning_tokens: 140 },
      });

      const streamed = (await logsOf(gw(), key.token_id)).filter((r) => r.stream === true);
      expect(streamed.length).toBeGreaterThanOrEqual(2);
      for (const r of streamed.slice(-2)) {
        expect(r).toMatchObject({
          input_tokens: 1854,
          cache_read_tokens: 1536,
          output_tokens: 152,
          status: 200,
          usage_estimated: false,
        });
        expect(r.cost as number).toBeCloseTo(FIXTURE_COST, 15);
      }
    });

    test("parallel function calls, non-streaming and streaming; schemas sanitised upstream", async () => {
      mock.enqueue(() => geminiJson("generate-content-tools.json"));
      const res = await client.chat.completions.create({
        model: "gemini/gemini-2.5-flash",
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        tools,
        tool_choice: "required",
      });
      expect(res.choices[0]?.finish_reason).toBe("tool_calls");
      expect(res.choices[0]?.message.content).toBe("Checking both cities.");
      const calls = (res.choices[0]?.message.tool_calls ?? []).map((c) =>
        c.type === "function" ? [c.id, c.function.name, c.function.arguments] : [],
      );
      expect(calls).toEqual([
        ["fc_lisbon_01", "get_weather", '{"city":"Lisbon"}'],
        [expect.stringMatching(/^call_[0-9a-f-]{36}$/), "get_weather", '{"city":"Porto","units":"celsius"}'],
      ]);
      expect(mock.requests[0]?.json).toMatchObject({
        tools: [
          {
            functionDeclarations: [
              {
                name: "get_weather",
                description: "Current weather",
                parameters: {
                  type: "object",
                  properties: {
                    city: { type: "string" },
                    units: { type: "string", nullable: true, enum: ["celsius", "fahrenheit"] },
                  },
                  required: ["city", "units"],
                },
              },
            ],
          },
        ],
        toolConfig: { functionCallingConfig: { mode: "ANY" } },
      });
      expect(mock.requests[0]?.text).not.toContain("additionalProperties");
      expect(mock.requests[0]?.text).not.toContain("strict");

      mock.enqueue(() => geminiStream("stream-tools.sse", 3));
      const stream = client.chat.completions.stream({
        model: "gemini/gemini-2.5-flash",
        messages: [{ role: "user", content: "Lisbon and Porto?" }],
        tools,
        tool_choice: { type: "function", function: { name: "get_weather" } },
      });
      const final = await stream.finalChatCompletion();
      const streamed = final.choices[0]?.message.tool_calls ?? [];
      expect(streamed.map((c) => (c.type === "function" ? [c.function.name, c.function.arguments] : []))).toEqual([
        ["get_weather", '{"city":"Lisbon"}'],
        ["get_weather", '{"city":"Porto","units":"celsius"}'],
      ]);
      expect(streamed[0]?.id).toBe("fc_lisbon_01");
      expect(streamed[1]?.id).toMatch(/^call_/);
      expect(final.choices[0]?.finish_reason).toBe("tool_calls");
      expect(final.choices[0]?.message.content).toBe("Checking both cities.");
      expect(mock.requests[1]?.json).toMatchObject({
        toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_weather"] } },
      });
    });

    test("tool results go back as functionResponse parts named after their calls", async () => {
      mock.enqueue(() => geminiText("21 °C in Lisbon, 17 °C in Porto.", { prompt: 80, candidates: 12 }));
      const messages: OpenAI.ChatCompletionMessageParam[] = [
        { role: "user", content: "Weather in Lisbon and Porto?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "fc_lisbon_01", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
            { id: "call_9f8e7d6c", type: "function", function: { name: "get_weather", arguments: '{"city":"Porto"}' } },
          ],
        },
        { role: "tool", tool_call_id: "fc_lisbon_01", content: '{"temp_c":21}' },
        { role: "tool", tool_call_id: "call_9f8e7d6c", content: "17 C and cloudy" },
      ];
      const res = await client.chat.completions.create({ model: "gemini/gemini-2.5-flash", messages, tools });
      expect(res.choices[0]?.message.content).toBe("21 °C in Lisbon, 17 °C in Porto.");
      expect(mock.requests[0]?.json).toMatchObject({
        contents: [
          { role: "user", parts: [{ text: "Weather in Lisbon and Porto?" }] },
          {
            role: "model",
            parts: [
              { functionCall: { id: "fc_lisbon_01", name: "get_weather", args: { city: "Lisbon" } } },
              { functionCall: { name: "get_weather", args: { city: "Porto" } } },
            ],
          },
          {
            role: "user",
            parts: [
              { functionResponse: { id: "fc_lisbon_01", name: "get_weather", response: { temp_c: 21 } } },
              { functionResponse: { name: "get_weather", response: { result: "17 C and cloudy" } } },
            ],
          },
        ],
      });
      type Sent = { contents: { parts: Record<string, { id?: string }>[] }[] };
      const contents = (mock.requests[0]?.json as Sent | undefined)?.contents ?? [];
      expect(contents[1]?.parts[1]?.functionCall?.id).toBeUndefined();
      expect(contents[2]?.parts[1]?.functionResponse?.id).toBeUndefined();
    });

    test("x-gateway-overhead-ms counts the gateway's work inside an attempt (an image download), not the wait for the upstream", async () => {
      mock.enqueue(async () => {
        await Bun.sleep(1500);
        return geminiText("A pixel.", { prompt: 300, candidates: 3 });
      });
      const res = await client.chat.completions
        .create({
          model: "gemini/gemini-2.5-flash",
          messages: [
            { role: "user", content: [{ type: "image_url", image_url: { url: `${images.url}/img/slow.png` } }] },
          ],
        })
        .withResponse();
      const overhead = Number(res.response.headers.get("x-gateway-overhead-ms"));
      // At least the 400 ms download; far less than the 1.5 s the upstream took to answer.
      expect(overhead).toBeGreaterThanOrEqual(400);
      expect(overhead).toBeLessThan(1500);
    });

    test("images: a data URL and an http URL (downloaded by the gateway) both go up as inlineData", async () => {
      mock.enqueue(() => geminiText("A single pixel, twice.", { prompt: 600, candidates: 6 }));
      const res = await client.chat.completions.create({
        model: "gemini/gemini-2.5-flash",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "What are these?" },
              { type: "image_url", image_url: { url: "data:image/jpeg;base64,/9j/4AAQSkZJRg==" } },
              { type: "image_url", image_url: { url: `${images.url}/img/pixel.png`, detail: "high" } },
            ],
          },
        ],
      });
      expect(res.choices[0]?.message.content).toBe("A single pixel, twice.");
      expect(images.requests.map((r) => r.path)).toEqual(["/img/pixel.png"]);
      expect(mock.requests[0]?.json).toMatchObject({
        contents: [
          {
            role: "user",
            parts: [
              { text: "What are these?" },
              { inlineData: { mimeType: "image/jpeg", data: "/9j/4AAQSkZJRg==" } },
              { inlineData: { mimeType: "image/png", data: PNG.toString("base64") } },
            ],
          },
        ],
      });

      const missing = await client.chat.completions
        .create({
          model: "gemini/gemini-2.5-flash",
          messages: [
            { role: "user", content: [{ type: "image_url", image_url: { url: `${images.url}/img/gone.png` } }] },
          ],
        })
        .catch((e) => e);
      expect(missing).toBeInstanceOf(OpenAI.BadRequestError);
      expect(mock.requests).toHaveLength(1);
    });

    test("n: 2 asks for two candidates and returns two choices", async () => {
      mock.enqueue(() => geminiJson("generate-content-candidates.json"));
      const res = await client.chat.completions.create({
        model: "gemini/gemini-2.5-flash",
        messages: [{ role: "user", content: "Weather in Lisbon?" }],
        n: 2,
        max_tokens: 12,
      });
      expect(mock.requests[0]?.json).toMatchObject({ generationConfig: { candidateCount: 2, maxOutputTokens: 12 } });
      expect(res.choices.map((c) => [c.index, c.message.content, c.finish_reason])).toEqual([
        [0, "Lisbon: sunny.", "stop"],
        [1, "Sunny in Lisbon, around 21 °C, light", "length"],
      ]);
      expect(res.model).toBe("gemini-2.0-flash");
    });

    test("a blocked prompt is an empty answer with finish_reason content_filter", async () => {
      mock.enqueue(() => geminiJson("prompt-blocked.json"));
      const res = await client.chat.completions.create({
        model: "gemini/gemini-2.5-flash",
        messages: [{ role: "user", content: "something unsafe" }],
      });
      expect(res.choices).toHaveLength(1);
      expect(res.choices[0]?.finish_reason).toBe("content_filter");
      expect(res.choices[0]?.message.content ?? "").toBe("");
      expect(res.usage?.prompt_tokens).toBe(22);
    });

    test("upstream errors: 400 stays 400, 429 keeps its retry delay, 500 stays 500, a bad provider key is a 502", async () => {
      mock.enqueue(() => geminiJson("error-400.json", 400));
      const bad = await client.chat.completions
        .create({ model: "gemini/gemini-2.5-flash", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad.message).toContain("contents is not specified");

      mock.enqueue(() => geminiJson("error-429.json", 429));
      const limited = await client.chat.completions
        .create({ model: "gemini/gemini-2.5-flash", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
      expect(limited.headers.get("retry-after")).toBe("17");
      expect(limited.message).toContain("exceeded your current quota");
      expect(mock.requests).toHaveLength(2);

      mock.enqueue(() => googleError(500, "Internal error encountered.", "INTERNAL"));
      const down = await client.chat.completions
        .create({ model: "gemini/gemini-2.5-flash", messages: [{ role: "user", content: "x" }], stream: true })
        .catch((e) => e);
      expect(down).toBeInstanceOf(OpenAI.InternalServerError);
      expect(down.status).toBe(500);

      mock.enqueue(
        () =>
          new Response(geminiFixture("error-api-key.json").replace("Please pass", `Key ${PROVIDER_KEY}. Please pass`), {
            status: 400,
          }),
      );
      const auth = await client.chat.completions
        .create({ model: "gemini/gemini-2.5-flash", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(auth.status).toBe(502);
      expect(auth.error).toMatchObject({ code: "upstream_auth_error" });
      expect(JSON.stringify(auth.error)).not.toContain(PROVIDER_KEY);
    });
  },
  () => ({
    inference: {
      providers: { gemini: { type: "gemini", api_base: `${mock.url}/v1beta`, api_key: PROVIDER_KEY } },
      models: [
        {
          name: "gemini/gemini-2.5-flash",
          input_cost_per_token: PRICES.input,
          output_cost_per_token: PRICES.output,
          cache_read_input_token_cost: PRICES.cacheRead,
          cache_creation_input_token_cost: null,
          max_output_tokens: 65536,
          supports_function_calling: true,
          supports_vision: true,
        },
      ],
      router: { num_retries: 0 },
      imageFetch: { allowPrivateNetworks: true, maxBytes: 1e6, timeoutMs: 5000 },
    },
  }),
);
