/**
 * Google's generateContent protocol end to end: the official @google/genai SDK, its base URL
 * pointed at the gateway, against every provider type (OpenAI, OpenAI-compatible, Azure,
 * Anthropic, Gemini natively, Vertex AI's Gemini natively and Claude, Bedrock), with text,
 * function calls, usage, exact costs in the request log, streams, credentials and errors in
 * Google's envelope.
 */
import { afterAll, beforeEach, expect, test } from "bun:test";
import { ApiError, type GenerateContentResponse, GoogleGenAI, type Part, Type } from "@google/genai";
import { countTokens } from "../src/inference/estimate";
import { describeEachBackend, type GeneratedWire, type TestGateway } from "./helpers/gateway";
import { eventually, logRowWithStatus, logsOf } from "./helpers/inference";
import { anthropicError, anthropicJson, anthropicStream } from "./mocks/anthropic";
import { bedrockJson, bedrockStream, REQUEST_ID } from "./mocks/bedrock";
import {
  geminiFixture,
  geminiJson,
  geminiStream,
  googleError,
  sseFrames,
  testServiceAccount,
  vertexJson,
  vertexStream,
} from "./mocks/gemini";
import { openaiCompletion, openaiError, openaiJson, openaiStream } from "./mocks/openai";
import { sse, startMockUpstream, streamResponse } from "./mocks/upstream";

const mock = startMockUpstream();
const tokens = startMockUpstream(() =>
  Response.json({ access_token: `ya29.gc-token-${crypto.randomUUID()}`, expires_in: 3599, token_type: "Bearer" }),
);
afterAll(() => {
  mock.close();
  tokens.close();
});
const sa = testServiceAccount(`${tokens.url}/token`, "gw-gc-project");

const OPENAI_KEY = "sk-provider-openai-gc-0123456789abcdef";
const ANTHROPIC_KEY = "sk-ant-api03-provider-gc-0123456789abcdef";
const GEMINI_KEY = "AIzaProviderGeminiGc0123456789abcdef";
const OPENAI = { input: 0.15e-6, output: 0.6e-6, cacheRead: 0.075e-6 };
const CLAUDE = { input: 3e-6, output: 15e-6, cacheRead: 0.3e-6, cacheWrite: 3.75e-6 };
const GEMINI = { input: 0.3e-6, output: 2.5e-6, cacheRead: 0.075e-6 };
const BEDROCK_MODEL = "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0";
const VERTEX_RESOURCE = "/v1/projects/gw-gc-project/locations/us-east5/publishers";

const WEATHER_TOOL = {
  functionDeclarations: [
    {
      name: "get_weather",
      description: "Current weather for a city",
      parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } }, required: ["city"] },
    },
  ],
};

interface Sent {
  url: string;
  body: string;
}

/** The SDK on the gateway's real port, recording what it sends (URLs and bodies). */
function genai(gw: () => TestGateway, apiKey: string, apiVersion: string | null = "v1beta") {
  const sent: Sent[] = [];
  const ai = new GoogleGenAI({
    apiKey,
    httpOptions: {
      baseUrl: gw().listen(),
      ...(apiVersion !== null ? { apiVersion } : {}),
      fetch: (async (url: string | URL | Request, init?: RequestInit) => {
        sent.push({ url: String(url), body: typeof init?.body === "string" ? init.body : "" });
        return fetch(url, init);
      }) as typeof fetch,
    },
  });
  return { ai, sent };
}

async function collect(stream: AsyncGenerator<GenerateContentResponse>): Promise<GenerateContentResponse[]> {
  const out: GenerateContentResponse[] = [];
  for await (const c of stream) out.push(c);
  return out;
}

/** The visible text of a stream (read from the parts: the SDK's `text` getter warns beside function calls). */
const textOf = (chunks: GenerateContentResponse[]) =>
  chunks
    .flatMap((c) => c.candidates?.[0]?.content?.parts ?? [])
    .map((p) => (p.thought ? "" : (p.text ?? "")))
    .join("");
const callsOf = (chunks: GenerateContentResponse[]) =>
  chunks.flatMap((c) =>
    (c.candidates?.[0]?.content?.parts ?? []).filter((p) => p.functionCall).map((p) => p.functionCall),
  );

async function apiError(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    return e as ApiError;
  }
  throw new Error("expected an ApiError");
}

/** Plain HTTP against the gateway (for raw bodies, frames and credentials the SDK never sends). */
async function post(gw: () => TestGateway, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${gw().listen()}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json: json as Record<string, unknown> };
}

/** The JSON body the mock upstream received as request `i`. */
const upJson = <T = Record<string, unknown>>(i: number): T => (mock.requests[i]?.json ?? {}) as T;

/** The data of every SSE frame of a body. */
const dataFrames = (text: string) =>
  text
    .split("\n\n")
    .filter((f) => f.startsWith("data: "))
    .map((f) => f.slice("data: ".length));

const HELLO = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };

describeEachBackend(
  "generateContent via @google/genai",
  (gw) => {
    let key: GeneratedWire;
    beforeEach(async () => {
      mock.reset();
      tokens.reset();
      key ??= await gw().newKey();
    });

    test("OpenAI-type: text; system instruction and config translated; usage with cached tokens; exact cost", async () => {
      const k = await gw().newKey();
      const { ai, sent } = genai(gw, k.key);
      mock.enqueue(() => openaiJson("chat-completion.json"));
      const res = await ai.models.generateContent({
        model: "openai/gpt-4o-mini",
        contents: "Weather in Lisbon?",
        config: {
          systemInstruction: "Be brief.",
          temperature: 0.3,
          topP: 0.9,
          maxOutputTokens: 200,
          stopSequences: ["END"],
          seed: 7,
        },
      });
      expect(sent[0]?.url).toBe(`${gw().listen()}/v1beta/models/openai/gpt-4o-mini:generateContent`);
      expect(res.text).toBe("Lisbon is sunny today, around 21 °C.");
      expect(res.candidates).toEqual([
        {
          content: { role: "model", parts: [{ text: "Lisbon is sunny today, around 21 °C." }] },
          finishReason: "STOP" as never,
          index: 0,
        },
      ]);
      expect(res.usageMetadata).toEqual({
        promptTokenCount: 1200,
        cachedContentTokenCount: 1024,
        candidatesTokenCount: 12,
        totalTokenCount: 1212,
      });
      expect(res.modelVersion).toBe("gpt-4o-mini-2024-07-18");
      expect(res.responseId).toBe("chatcmpl-CXa1b2c3d4e5f6g7h8i9j0");
      expect(res.sdkHttpResponse?.headers?.["x-gateway-upstream-model"]).toBe("gpt-4o-mini");

      const up = mock.requests[0];
      expect(up?.path).toBe("/v1/chat/completions");
      expect(up?.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
      expect(JSON.stringify(up?.headers)).not.toContain(k.key);
      expect(up?.json).toMatchObject({
        model: "gpt-4o-mini",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Weather in Lisbon?" },
        ],
        temperature: 0.3,
        top_p: 0.9,
        stop: ["END"],
        seed: 7,
      });
      expect(JSON.stringify(up?.json)).toContain('"max_completion_tokens":200');

      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        endpoint: "/v1beta/models/{model}:generateContent",
        status: 200,
        model: "openai/gpt-4o-mini",
        provider: "openai",
        stream: false,
        input_tokens: 1200,
        cache_read_tokens: 1024,
        output_tokens: 12,
        cost_estimated: false,
      });
      expect(row?.cost as number).toBeCloseTo(176 * OPENAI.input + 1024 * OPENAI.cacheRead + 12 * OPENAI.output, 15);
    });

    test("OpenAI-type: reasoning tokens are thoughtsTokenCount, not candidatesTokenCount; JSON output", async () => {
      const k = await gw().newKey();
      const { ai } = genai(gw, k.key);
      mock.enqueue(() => openaiCompletion('{"ok":true}', { prompt: 100, completion: 50, reasoning: 30 }));
      const res = await ai.models.generateContent({
        model: "openai/gpt-4o-mini",
        contents: "json please",
        config: {
          responseMimeType: "application/json",
          responseSchema: { type: Type.OBJECT, properties: { ok: { type: Type.BOOLEAN } } },
        },
      });
      expect(res.text).toBe('{"ok":true}');
      expect(res.usageMetadata).toEqual({
        promptTokenCount: 100,
        candidatesTokenCount: 20,
        thoughtsTokenCount: 30,
        totalTokenCount: 150,
      });
      expect(mock.requests[0]?.json).toMatchObject({
        response_format: {
          type: "json_schema",
          json_schema: { name: "response", schema: { type: "object", properties: { ok: { type: "boolean" } } } },
        },
      });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({ input_tokens: 100, output_tokens: 50, reasoning_tokens: 30 });
      expect(row?.cost as number).toBeCloseTo(100 * OPENAI.input + 50 * OPENAI.output, 15);
    });

    test("OpenAI-type streaming: only new text per frame; finishReason and usage on the last; billed", async () => {
      const k = await gw().newKey();
      const { ai, sent } = genai(gw, k.key);
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const chunks = await collect(
        await ai.models.generateContentStream({ model: "openai/gpt-4o-mini", contents: "Weather in Lisbon?" }),
      );
      expect(sent[0]?.url).toBe(`${gw().listen()}/v1beta/models/openai/gpt-4o-mini:streamGenerateContent?alt=sse`);
      expect(chunks.slice(0, -1).map((c) => c.text)).toEqual(["Lisbon", " is sunny", " today."]);
      expect(textOf(chunks)).toBe("Lisbon is sunny today.");
      for (const c of chunks.slice(0, -1)) {
        expect(c.candidates?.[0]?.finishReason).toBeUndefined();
        expect(c.usageMetadata).toBeUndefined();
        expect(c.responseId).toBe("chatcmpl-CXs0000000000000000000");
      }
      const last = chunks.at(-1);
      expect(last?.candidates?.[0]?.finishReason).toBe("STOP" as never);
      expect(last?.usageMetadata).toEqual({
        promptTokenCount: 1200,
        cachedContentTokenCount: 1024,
        candidatesTokenCount: 5,
        totalTokenCount: 1205,
      });
      expect(mock.requests[0]?.json).toMatchObject({ stream: true, stream_options: { include_usage: true } });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row).toMatchObject({
        endpoint: "/v1beta/models/{model}:streamGenerateContent",
        stream: true,
        status: 200,
        input_tokens: 1200,
        cache_read_tokens: 1024,
        output_tokens: 5,
        usage_estimated: false,
      });
      expect(row?.cost as number).toBeCloseTo(176 * OPENAI.input + 1024 * OPENAI.cacheRead + 5 * OPENAI.output, 15);
    });

    test("OpenAI-type function calls: declarations and mode go up; calls come back whole with ids; results go back", async () => {
      const { ai } = genai(gw, key.key);
      mock.enqueue(() => openaiJson("chat-tool-calls.json"));
      const res = await ai.models.generateContent({
        model: "openai/gpt-4o-mini",
        contents: "Weather in Lisbon and Porto?",
        config: {
          tools: [WEATHER_TOOL],
          toolConfig: { functionCallingConfig: { mode: "ANY" as never, allowedFunctionNames: ["get_weather"] } },
        },
      });
      expect(res.functionCalls).toEqual([
        { id: "call_Lis1", name: "get_weather", args: { city: "Lisbon" } },
        { id: "call_Por2", name: "get_weather", args: { city: "Porto" } },
      ]);
      expect(res.candidates?.[0]?.finishReason).toBe("STOP" as never);
      expect(res.usageMetadata).toEqual({ promptTokenCount: 85, candidatesTokenCount: 40, totalTokenCount: 125 });
      expect(mock.requests[0]?.json).toMatchObject({
        tools: [
          {
            type: "function",
            function: {
              name: "get_weather",
              description: "Current weather for a city",
              parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
            },
          },
        ],
        tool_choice: { type: "function", function: { name: "get_weather" } },
      });

      // The model's turn as the SDK returned it, then the results, ids echoed.
      mock.enqueue(() => openaiCompletion("Lisbon 21 °C, Porto 17 °C.", { prompt: 120, completion: 12 }));
      const next = await ai.models.generateContent({
        model: "openai/gpt-4o-mini",
        contents: [
          { role: "user", parts: [{ text: "Weather in Lisbon and Porto?" }] },
          res.candidates?.[0]?.content ?? {},
          {
            role: "user",
            parts: (res.functionCalls ?? []).map(
              (c, i): Part => ({
                functionResponse: { id: c.id, name: c.name as string, response: { temp_c: [21, 17][i] } },
              }),
            ),
          },
        ],
        config: { tools: [WEATHER_TOOL] },
      });
      expect(next.text).toBe("Lisbon 21 °C, Porto 17 °C.");
      expect(upJson<{ messages: unknown[] }>(1).messages).toEqual([
        { role: "user", content: "Weather in Lisbon and Porto?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_Lis1", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
            { id: "call_Por2", type: "function", function: { name: "get_weather", arguments: '{"city":"Porto"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_Lis1", content: '{"temp_c":21}' },
        { role: "tool", tool_call_id: "call_Por2", content: '{"temp_c":17}' },
      ]);

      // History without ids (older Gemini models): minted ids pair each response with its call.
      mock.enqueue(() => openaiCompletion("ok", { prompt: 10, completion: 1 }));
      await ai.models.generateContent({
        model: "openai/gpt-4o-mini",
        contents: [
          { role: "user", parts: [{ text: "Weather?" }] },
          { role: "model", parts: [{ functionCall: { name: "get_weather", args: { city: "Faro" } } }] },
          { role: "user", parts: [{ functionResponse: { name: "get_weather", response: { temp_c: 25 } } }] },
        ],
      });
      const [, assistant, tool] = upJson<{ messages: Record<string, unknown>[] }>(2).messages;
      const id = (assistant?.tool_calls as { id: string }[] | undefined)?.[0]?.id;
      expect(id).toMatch(/^call_[0-9a-f-]{36}$/);
      expect(tool).toEqual({ role: "tool", tool_call_id: id, content: '{"temp_c":25}' });
    });

    test("OpenAI-type streamed function calls: argument fragments arrive as whole functionCall parts", async () => {
      const k = await gw().newKey();
      const { ai } = genai(gw, k.key);
      mock.enqueue(() => openaiStream("chat-stream-tools.sse"));
      const chunks = await collect(
        await ai.models.generateContentStream({
          model: "openai/gpt-4o-mini",
          contents: "Weather in Lisbon and Porto?",
          config: { tools: [WEATHER_TOOL] },
        }),
      );
      expect(callsOf(chunks)).toEqual([
        { id: "call_Lis1", name: "get_weather", args: { city: "Lisbon" } },
        { id: "call_Por2", name: "get_weather", args: { city: "Porto" } },
      ]);
      expect(chunks.at(-1)?.candidates?.[0]?.finishReason).toBe("STOP" as never);
      expect(chunks.at(-1)?.usageMetadata).toEqual({
        promptTokenCount: 85,
        candidatesTokenCount: 40,
        totalTokenCount: 125,
      });
      const [row] = await logsOf(gw(), k.token_id);
      expect(row?.cost as number).toBeCloseTo(85 * OPENAI.input + 40 * OPENAI.output, 15);
    });

    test("OpenAI-compatible and Azure upstreams: text, streaming and not", async () => {
      const { ai } = genai(gw, key.key);
      mock.enqueue(() => openaiCompletion("local llama says hi", { prompt: 7, completion: 4 }, "llama3.2:3b"));
      const local = await ai.models.generateContent({ model: "local/llama3.2:3b", contents: "hi" });
      expect(local.text).toBe("local llama says hi");
      expect(local.usageMetadata).toEqual({ promptTokenCount: 7, candidatesTokenCount: 4, totalTokenCount: 11 });
      expect(mock.requests[0]?.path).toBe("/compat/v1/chat/completions");
      expect(mock.requests[0]?.json).toMatchObject({ model: "llama3.2:3b" });
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const localStream = await collect(
        await ai.models.generateContentStream({ model: "local/llama3.2:3b", contents: "hi" }),
      );
      expect(textOf(localStream)).toBe("Lisbon is sunny today.");

      mock.enqueue(() => openaiJson("chat-completion.json"));
      const azure = await ai.models.generateContent({ model: "azure/gpt-4o-mini", contents: "hi" });
      expect(azure.text).toBe("Lisbon is sunny today, around 21 °C.");
      expect(mock.requests[2]?.path).toBe("/openai/deployments/prod-gpt4o-mini/chat/completions");
      expect(mock.requests[2]?.headers["api-key"]).toBe("azure-provider-key-gc");
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const azureStream = await collect(
        await ai.models.generateContentStream({ model: "azure/gpt-4o-mini", contents: "hi" }),
      );
      expect(textOf(azureStream)).toBe("Lisbon is sunny today.");
      expect(azureStream.at(-1)?.usageMetadata?.promptTokenCount).toBe(1200);
    });

    test("Anthropic-type: text; cache reads and writes in the usage; exact cost; streaming", async () => {
      const k = await gw().newKey();
      const { ai } = genai(gw, k.key);
      mock.enqueue(() => anthropicJson("message.json"));
      const res = await ai.models.generateContent({
        model: "anthropic/claude-sonnet-4-5",
        contents: "Weather in Lisbon?",
        config: { systemInstruction: "Be brief.", maxOutputTokens: 300, topK: 20 },
      });
      expect(res.text).toBe("Lisbon is sunny today, around 21 °C.");
      expect(res.usageMetadata).toEqual({
        promptTokenCount: 2110,
        cachedContentTokenCount: 1810,
        candidatesTokenCount: 15,
        totalTokenCount: 2125,
      });
      expect(res.modelVersion).toBe("claude-sonnet-4-5-20250929");
      const up = mock.requests[0];
      expect(up?.path).toBe("/v1/messages");
      expect(up?.headers["x-api-key"]).toBe(ANTHROPIC_KEY);
      expect(up?.json).toMatchObject({
        model: "claude-sonnet-4-5",
        max_tokens: 300,
        top_k: 20,
        messages: [{ role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] }],
      });
      expect(JSON.stringify(upJson(0).system)).toContain("Be brief.");

      mock.enqueue(() => anthropicStream("stream-text.sse"));
      const chunks = await collect(
        await ai.models.generateContentStream({ model: "anthropic/claude-sonnet-4-5", contents: "Weather?" }),
      );
      expect(chunks.slice(0, -1).map((c) => c.text)).toEqual(["Lisbon is", " sunny today, ", "around 21 °C. ☀️"]);
      expect(chunks.at(-1)?.candidates?.[0]?.finishReason).toBe("STOP" as never);
      expect(chunks.at(-1)?.usageMetadata).toEqual({
        promptTokenCount: 2110,
        cachedContentTokenCount: 1810,
        candidatesTokenCount: 15,
        totalTokenCount: 2125,
      });

      const cost = 44 * CLAUDE.input + 256 * CLAUDE.cacheWrite + 1810 * CLAUDE.cacheRead + 15 * CLAUDE.output;
      const rows = await logsOf(gw(), k.token_id);
      expect(rows).toHaveLength(2);
      for (const row of rows) {
        expect(row).toMatchObject({
          provider: "anthropic",
          input_tokens: 2110,
          cache_read_tokens: 1810,
          cache_write_tokens: 256,
          output_tokens: 15,
        });
        expect(row.cost as number).toBeCloseTo(cost, 15);
      }
    });

    test("Anthropic-type function calls, streaming and not; thoughts when includeThoughts", async () => {
      const k = await gw().newKey();
      const { ai } = genai(gw, k.key);
      mock.enqueue(() => anthropicJson("message-tool-use.json"));
      const res = await ai.models.generateContent({
        model: "anthropic/claude-sonnet-4-5",
        contents: "Weather in Lisbon and Porto?",
        config: { tools: [WEATHER_TOOL], toolConfig: { functionCallingConfig: { mode: "AUTO" as never } } },
      });
      expect(res.candidates?.[0]?.content?.parts).toEqual([
        { text: "I'll check the weather in both cities." },
        { functionCall: { id: "toolu_01LisbonA1b2C3d4E5f6G7h8", name: "get_weather", args: { city: "Lisbon" } } },
        {
          functionCall: {
            id: "toolu_01PortoZ9y8X7w6V5u4T3s2",
            name: "get_weather",
            args: { city: "Porto", units: "celsius" },
          },
        },
      ]);
      expect(res.candidates?.[0]?.finishReason).toBe("STOP" as never);
      expect(mock.requests[0]?.json).toMatchObject({
        tools: [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
        tool_choice: { type: "auto" },
      });

      mock.enqueue(() => anthropicStream("stream-tools.sse"));
      const chunks = await collect(
        await ai.models.generateContentStream({
          model: "anthropic/claude-sonnet-4-5",
          contents: "Weather in Lisbon and Porto?",
          config: { tools: [WEATHER_TOOL] },
        }),
      );
      expect(textOf(chunks)).toBe("I'll check the weather in both cities.");
      expect(callsOf(chunks)).toEqual([
        { id: "toolu_01LisbonA1b2C3d4E5f6G7h8", name: "get_weather", args: { city: "Lisbon" } },
        { id: "toolu_01PortoZ9y8X7w6V5u4T3s2", name: "get_weather", args: { city: "Porto", units: "celsius" } },
      ]);
      // Each call is one part of one frame: never split into fragments.
      expect(chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? []).filter((p) => p.functionCall)).toHaveLength(
        2,
      );
      expect(chunks.at(-1)?.usageMetadata).toEqual({
        promptTokenCount: 412,
        candidatesTokenCount: 96,
        totalTokenCount: 508,
      });

      mock.enqueue(() => anthropicJson("message-thinking.json"));
      const thought = await ai.models.generateContent({
        model: "anthropic/claude-sonnet-4-5",
        contents: "27 * 453?",
        config: { thinkingConfig: { thinkingBudget: 2048, includeThoughts: true }, maxOutputTokens: 4096 },
      });
      expect(mock.requests[2]?.json).toMatchObject({ thinking: { type: "enabled", budget_tokens: 2048 } });
      expect(thought.candidates?.[0]?.content?.parts).toEqual([
        { text: "The user wants 27 * 453. 27 * 453 = 12231.", thought: true },
        { text: "27 × 453 = 12,231." },
      ]);
      expect(thought.text).toBe("27 × 453 = 12,231.");
      const rows = await logsOf(gw(), k.token_id);
      expect(rows.map((r) => [r.input_tokens, r.output_tokens])).toEqual([
        [412, 96],
        [412, 96],
        [52, 210],
      ]);
      expect(rows[0]?.cost as number).toBeCloseTo(412 * CLAUDE.input + 96 * CLAUDE.output, 15);
    });

    test("Gemini-type: the client's body goes up unchanged and the answer comes back unchanged; exact cost", async () => {
      const k = await gw().newKey();
      const { ai, sent } = genai(gw, k.key);
      mock.enqueue(() => geminiJson("generate-content.json"));
      const res = await ai.models.generateContent({
        model: "gemini/gemini-2.5-flash",
        contents: [
          {
            role: "user",
            parts: [{ text: "Weather here?" }, { inlineData: { mimeType: "application/pdf", data: "JVBERi0xLjQ=" } }],
          },
        ],
        config: {
          systemInstruction: "Be brief.",
          thinkingConfig: { thinkingBudget: 1024 },
          safetySettings: [{ category: "HARM_CATEGORY_HARASSMENT" as never, threshold: "BLOCK_ONLY_HIGH" as never }],
          tools: [{ googleSearch: {} }],
        },
      });
      const up = mock.requests[0];
      expect(up?.path).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
      expect(up?.headers["x-goog-api-key"]).toBe(GEMINI_KEY);
      expect(JSON.stringify(up?.headers)).not.toContain(k.key);
      expect(up?.json).toEqual(JSON.parse(sent[0]?.body ?? ""));
      expect(up?.text).toBe(sent[0]?.body as string);

      const fixture = JSON.parse(geminiFixture("generate-content.json"));
      expect(res.text).toBe("Clear skies, 21 °C in Lisbon.");
      expect(res.candidates).toEqual(fixture.candidates);
      expect(res.usageMetadata).toEqual(fixture.usageMetadata);
      expect(res.responseId).toBe("k3VhaO7yFIOq1MkP3-WVkA4");

      mock.enqueue(() => geminiJson("generate-content.json"));
      const raw = await post(gw, "/v1beta/models/gemini%2Fgemini-2.5-flash:generateContent", HELLO, {
        "x-goog-api-key": k.key,
      });
      expect(raw.text).toBe(geminiFixture("generate-content.json"));
      expect(mock.requests[1]?.json).toEqual(HELLO);

      const cost = (1854 - 1536) * GEMINI.input + 1536 * GEMINI.cacheRead + (12 + 140) * GEMINI.output;
      const rows = await logsOf(gw(), k.token_id);
      expect(rows).toHaveLength(2);
      for (const row of rows) {
        expect(row).toMatchObject({
          provider: "gemini",
          upstream_model: "gemini-2.5-flash",
          input_tokens: 1854,
          cache_read_tokens: 1536,
          output_tokens: 152,
          reasoning_tokens: 140,
        });
        expect(row.cost as number).toBeCloseTo(cost, 15);
      }
    });

    test("Gemini-type streaming: frames forwarded unchanged; usage from the last frame; function calls", async () => {
      const k = await gw().newKey();
      const { ai, sent } = genai(gw, k.key);
      mock.enqueue(() => geminiStream("stream.sse"));
      const chunks = await collect(
        await ai.models.generateContentStream({ model: "gemini/gemini-2.5-flash", contents: "Weather in Lisbon?" }),
      );
      expect(mock.requests[0]?.path).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent");
      expect(mock.requests[0]?.query.get("alt")).toBe("sse");
      expect(mock.requests[0]?.text).toBe(sent[0]?.body as string);
      expect(textOf(chunks)).toBe("Clear skies, 21 °C in Lisbon.");
      expect(chunks.at(-1)?.usageMetadata).toMatchObject({ cachedContentTokenCount: 1536, thoughtsTokenCount: 140 });

      mock.enqueue(() => geminiStream("stream.sse"));
      const raw = await post(gw, "/v1beta/models/gemini/gemini-2.5-flash:streamGenerateContent?alt=sse", HELLO, {
        "x-goog-api-key": k.key,
      });
      expect(raw.headers.get("content-type")).toContain("text/event-stream");
      expect(dataFrames(raw.text)).toEqual(sseFrames(geminiFixture("stream.sse")).map((f) => f.trim().slice(6)));

      mock.enqueue(() => geminiStream("stream-tools.sse"));
      const tools = await collect(
        await ai.models.generateContentStream({
          model: "gemini/gemini-2.5-flash",
          contents: "Weather in Lisbon and Porto?",
          config: { tools: [WEATHER_TOOL] },
        }),
      );
      expect(callsOf(tools)).toEqual([
        { id: "fc_lisbon_01", name: "get_weather", args: { city: "Lisbon" } },
        { name: "get_weather", args: { city: "Porto", units: "celsius" } },
      ]);
      mock.enqueue(() => geminiJson("generate-content-tools.json"));
      const whole = await ai.models.generateContent({
        model: "gemini/gemini-2.5-flash",
        contents: "Weather?",
        config: { tools: [WEATHER_TOOL] },
      });
      expect(whole.functionCalls).toEqual([
        { id: "fc_lisbon_01", name: "get_weather", args: { city: "Lisbon" } },
        { name: "get_weather", args: { city: "Porto", units: "celsius" } },
      ]);
      expect(whole.usageMetadata).toMatchObject({ candidatesTokenCount: 38, thoughtsTokenCount: 64 });

      const cost = (1854 - 1536) * GEMINI.input + 1536 * GEMINI.cacheRead + 152 * GEMINI.output;
      const rows = await logsOf(gw(), k.token_id);
      expect(rows.map((r) => [r.stream, r.input_tokens, r.output_tokens, r.usage_estimated])).toEqual([
        [true, 1854, 152, false],
        [true, 1854, 152, false],
        [true, 96, 102, false],
        [false, 96, 102, false],
      ]);
      expect(rows[0]?.cost as number).toBeCloseTo(cost, 15);
      expect(rows[3]?.cost as number).toBeCloseTo(96 * GEMINI.input + 102 * GEMINI.output, 15);
    });

    test("Vertex AI: a Gemini model natively (OAuth token), a Claude model through Messages; streaming and not", async () => {
      const { ai, sent } = genai(gw, key.key);
      mock.enqueue(() => vertexJson("generate-content.json"));
      const g = await ai.models.generateContent({ model: "vertex/gemini-2.5-flash", contents: "Weather in Porto?" });
      expect(g.text).toBe("Porto is cloudy, 17 °C.");
      expect(mock.requests[0]?.path).toBe(`${VERTEX_RESOURCE}/google/models/gemini-2.5-flash:generateContent`);
      expect(mock.requests[0]?.headers.authorization).toMatch(/^Bearer ya29\.gc-token-/);
      expect(mock.requests[0]?.text).toBe(sent[0]?.body as string);
      expect(tokens.requests).toHaveLength(1);

      mock.enqueue(() => vertexStream("stream.sse"));
      const gs = await collect(
        await ai.models.generateContentStream({ model: "vertex/gemini-2.5-flash", contents: "Weather in Porto?" }),
      );
      expect(textOf(gs)).toBe("Porto is cloudy, 17 °C.");
      expect(mock.requests[1]?.path).toBe(`${VERTEX_RESOURCE}/google/models/gemini-2.5-flash:streamGenerateContent`);

      mock.enqueue(() => vertexJson("claude-message.json"));
      const c = await ai.models.generateContent({
        model: "vertex/claude-sonnet-4-5@20250929",
        contents: "Weather in Porto?",
        config: { maxOutputTokens: 100 },
      });
      expect(c.text).toBe("It is clear and 21 °C in Lisbon.");
      expect(mock.requests[2]?.path).toBe(`${VERTEX_RESOURCE}/anthropic/models/claude-sonnet-4-5@20250929:rawPredict`);
      expect(mock.requests[2]?.json).toMatchObject({
        anthropic_version: "vertex-2023-10-16",
        max_tokens: 100,
        messages: [{ role: "user", content: [{ type: "text", text: "Weather in Porto?" }] }],
      });
      expect(c.usageMetadata).toMatchObject({ cachedContentTokenCount: 1810, candidatesTokenCount: 15 });

      mock.enqueue(() => vertexStream("claude-stream.sse"));
      const cs = await collect(
        await ai.models.generateContentStream({ model: "vertex/claude-sonnet-4-5@20250929", contents: "Weather?" }),
      );
      expect(textOf(cs)).toBe("Checking");
      expect(callsOf(cs)).toEqual([{ id: expect.any(String), name: "get_weather", args: { city: "Lisbon" } }]);
      expect(mock.requests[3]?.path).toBe(
        `${VERTEX_RESOURCE}/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict`,
      );
      expect(cs.at(-1)?.candidates?.[0]?.finishReason).toBe("STOP" as never);
      expect(cs.at(-1)?.usageMetadata).toMatchObject({ cachedContentTokenCount: 1810, candidatesTokenCount: 38 });
    });

    test("Bedrock: text, streaming and not (a model id with a colon in the path)", async () => {
      const { ai, sent } = genai(gw, key.key);
      mock.enqueue(() => bedrockJson("converse-text.json"));
      const res = await ai.models.generateContent({ model: BEDROCK_MODEL, contents: "Weather in Lisbon?" });
      expect(sent[0]?.url).toContain(
        "/v1beta/models/bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0:generateContent",
      );
      expect(res.text).toBe("Lisbon is sunny today, around 21 °C.");
      expect(res.usageMetadata).toEqual({
        promptTokenCount: 2600,
        cachedContentTokenCount: 2000,
        candidatesTokenCount: 50,
        totalTokenCount: 2650,
      });
      expect(mock.requests[0]?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse");
      mock.enqueue(() => bedrockStream("converse-stream-text.json", { requestId: REQUEST_ID }));
      const chunks = await collect(await ai.models.generateContentStream({ model: BEDROCK_MODEL, contents: "hi" }));
      expect(textOf(chunks)).toBe("Lisbon is sunny today.");
      expect(chunks.at(-1)?.usageMetadata?.candidatesTokenCount).toBe(5);
      expect(mock.requests[1]?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream");
    });

    test("/v1 too: the SDK's default version and apiVersion v1; GET /v1/models still lists models", async () => {
      for (const version of [null, "v1"]) {
        const { ai, sent } = genai(gw, key.key, version);
        mock.enqueue(() => openaiJson("chat-completion.json"));
        const res = await ai.models.generateContent({ model: "openai/gpt-4o-mini", contents: "hi" });
        expect(res.text).toBe("Lisbon is sunny today, around 21 °C.");
        expect(sent[0]?.url).toBe(`${gw().listen()}/v1/models/openai/gpt-4o-mini:generateContent`);
        mock.enqueue(() => openaiStream("chat-stream.sse"));
        const chunks = await collect(
          await ai.models.generateContentStream({ model: "openai/gpt-4o-mini", contents: "hi" }),
        );
        expect(textOf(chunks)).toBe("Lisbon is sunny today.");
        expect(sent[1]?.url).toBe(`${gw().listen()}/v1/models/openai/gpt-4o-mini:streamGenerateContent?alt=sse`);
      }
      const rows = await logsOf(gw(), key.token_id);
      expect(rows.at(-1)?.endpoint).toBe("/v1/models/{model}:streamGenerateContent");

      const list = await gw().call<{ data: { id: string }[] }>("GET", "/v1/models", { key: key.key });
      expect(list.status).toBe(200);
      expect(list.body.data.map((m) => m.id)).toContain("openai/gpt-4o-mini");
      const one = await gw().call<{ id: string }>("GET", "/v1/models/openai/gpt-4o-mini", { key: key.key });
      expect(one.body).toMatchObject({ id: "openai/gpt-4o-mini", object: "model" });
    });

    test("credentials: ?key=, x-goog-api-key, Bearer, x-api-key; escaped model names and a models/ prefix", async () => {
      const paths = [
        ["/v1beta/models/openai%2Fgpt-4o-mini:generateContent", {}],
        ["/v1/models/models%2Fopenai%2Fgpt-4o-mini:generateContent", { "x-goog-api-key": key.key }],
        ["/v1beta/models/models/openai/gpt-4o-mini:generateContent", { authorization: `Bearer ${key.key}` }],
        ["/v1beta/models/openai/gpt-4o-mini:generateContent", { "x-api-key": key.key }],
      ] as const;
      for (const [path, headers] of paths) {
        mock.enqueue(() => openaiJson("chat-completion.json"));
        const url = Object.keys(headers).length ? path : `${path}?key=${encodeURIComponent(key.key)}`;
        const res = await post(gw, url, HELLO, headers);
        expect([path, res.status]).toEqual([path, 200]);
        expect(res.json).toMatchObject({
          candidates: [{ content: { parts: [{ text: "Lisbon is sunny today, around 21 °C." }] } }],
        });
      }
      expect(mock.requests.map((r) => (r.json as { model: string }).model)).toEqual(Array(4).fill("gpt-4o-mini"));
      for (const r of mock.requests) expect(r.text).not.toContain(key.key);

      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const s = await post(
        gw,
        `/v1beta/models/openai%2Fgpt-4o-mini:streamGenerateContent?alt=sse&key=${key.key}`,
        HELLO,
      );
      expect(s.status).toBe(200);
      const frames = dataFrames(s.text).map((d) => JSON.parse(d));
      expect(frames.map((f) => f.candidates[0].content.parts[0].text).join("")).toBe("Lisbon is sunny today.");
      expect(s.text).not.toContain("[DONE]");
    });

    test("streamGenerateContent without alt=sse answers one JSON array", async () => {
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const res = await post(gw, "/v1beta/models/openai/gpt-4o-mini:streamGenerateContent", HELLO, {
        "x-goog-api-key": key.key,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("application/json");
      const list = res.json as unknown as GenerateContentResponse[];
      expect(Array.isArray(list)).toBe(true);
      expect(list.map((f) => f.candidates?.[0]?.content?.parts?.[0]?.text).join("")).toBe("Lisbon is sunny today.");
      expect(list.at(-1)).toMatchObject({
        candidates: [{ finishReason: "STOP" }],
        usageMetadata: { promptTokenCount: 1200 },
      });
    });

    test("errors before the model is called: credentials, model names, access; Google's envelope, the SDK's ApiError", async () => {
      const noKey = await post(gw, "/v1beta/models/openai/gpt-4o-mini:generateContent", HELLO);
      expect(noKey.status).toBe(401);
      expect(noKey.json).toEqual({ error: { code: 401, message: expect.any(String), status: "UNAUTHENTICATED" } });
      const badKey = await apiError(
        genai(gw, "sk-not-a-key").ai.models.generateContent({ model: "openai/gpt-4o-mini", contents: "hi" }),
      );
      expect(badKey.status).toBe(401);
      expect(JSON.parse(badKey.message)).toMatchObject({ error: { code: 401, status: "UNAUTHENTICATED" } });

      const { ai } = genai(gw, key.key);
      const unknown = await apiError(ai.models.generateContent({ model: "openai/no-such-model", contents: "hi" }));
      expect(unknown.status).toBe(404);
      expect(JSON.parse(unknown.message)).toEqual({
        error: {
          code: 404,
          message: "The model 'openai/no-such-model' does not exist or is not served here; GET /v1/models lists yours",
          status: "NOT_FOUND",
        },
      });
      const unknownStream = await apiError(ai.models.generateContentStream({ model: "nowhere/model", contents: "hi" }));
      expect(unknownStream.status).toBe(404);

      const limited = await gw().newKey({ models: ["openai/gpt-4o-mini"] });
      const forbidden = await apiError(
        genai(gw, limited.key).ai.models.generateContent({ model: "anthropic/claude-sonnet-4-5", contents: "hi" }),
      );
      expect(forbidden.status).toBe(403);
      expect(JSON.parse(forbidden.message)).toMatchObject({ error: { code: 403, status: "PERMISSION_DENIED" } });
      expect(mock.requests).toHaveLength(0);

      for (const path of [
        "/v1beta/models/openai/gpt-4o-mini:countTokens",
        "/v1beta/models/openai/gpt-4o-mini:bogus",
        "/v1/models/openai/gpt-4o-mini",
      ]) {
        const r = await post(gw, path, HELLO, { "x-goog-api-key": key.key });
        expect([path, r.status]).toEqual([path, 404]);
        expect(r.json).toEqual({
          error: { code: 404, message: expect.stringContaining("Unknown method"), status: "NOT_FOUND" },
        });
      }
    });

    test("bad input: Google's 400 INVALID_ARGUMENT naming the field", async () => {
      const h = { "x-goog-api-key": key.key };
      const path = "/v1beta/models/openai/gpt-4o-mini:generateContent";
      const cases: [unknown, string][] = [
        [{}, "Missing required field 'contents' in request body"],
        [{ contents: "hi" }, "Invalid 'contents': expected an array of objects, got \"hi\""],
        [
          { contents: [{ parts: [{ text: "x" }] }], generationConfig: { temperature: "warm" } },
          "Invalid 'generationConfig.temperature': expected a number >= 0 and <= 2, got \"warm\"",
        ],
        [
          { contents: [{ role: "user", parts: [{ audio: { uri: "x" } }] }] },
          "'contents[0].parts[0]': parts of kind 'audio' are not supported by this gateway",
        ],
        ["{not json", "Malformed JSON body"],
        ["", "The request body is empty: send a JSON object"],
      ];
      for (const [body, message] of cases) {
        const r = await post(gw, path, body, h);
        expect([body, r.status]).toEqual([body, 400]);
        expect(r.json).toEqual({
          error: { code: 400, message: expect.stringContaining(message), status: "INVALID_ARGUMENT" },
        });
      }
      const sdk = await apiError(
        genai(gw, key.key).ai.models.generateContent({
          model: "openai/gpt-4o-mini",
          contents: [{ role: "user", parts: [{ fileData: { fileUri: "gs://bucket/a.png", mimeType: "image/png" } }] }],
        }),
      );
      expect(sdk.status).toBe(400);
      expect(sdk.message).toContain("INVALID_ARGUMENT");
      expect(mock.requests).toHaveLength(0);
    });

    test("upstream failures keep their status in Google's envelope, before and during a stream", async () => {
      const { ai } = genai(gw, key.key);
      mock.enqueue(() => openaiError(429, "Rate limit reached for gpt-4o-mini", "requests", { "retry-after": "7" }));
      const limited = await post(gw, "/v1beta/models/openai/gpt-4o-mini:generateContent", HELLO, {
        "x-goog-api-key": key.key,
      });
      expect(limited.status).toBe(429);
      expect(limited.headers.get("retry-after")).toBe("7");
      expect(limited.json).toMatchObject({ error: { code: 429, status: "RESOURCE_EXHAUSTED" } });

      mock.enqueue(() => openaiError(500, "The server had an error", "server_error"));
      const failed = await apiError(ai.models.generateContent({ model: "openai/gpt-4o-mini", contents: "hi" }));
      expect(failed.status).toBe(500);
      expect(JSON.parse(failed.message)).toMatchObject({ error: { code: 500, status: "INTERNAL" } });

      mock.enqueue(() =>
        googleError(400, "Unable to submit request because it has an empty text parameter.", "INVALID_ARGUMENT"),
      );
      const g = await apiError(ai.models.generateContent({ model: "gemini/gemini-2.5-flash", contents: "hi" }));
      expect(g.status).toBe(400);
      expect(JSON.parse(g.message).error).toMatchObject({
        code: 400,
        status: "INVALID_ARGUMENT",
        message: expect.stringContaining("empty text parameter"),
      });

      mock.enqueue(() => anthropicError(529, "overloaded_error", "Overloaded"));
      const overloaded = await apiError(
        ai.models.generateContentStream({ model: "anthropic/claude-sonnet-4-5", contents: "hi" }),
      );
      expect(overloaded.status).toBe(503);

      // Mid-stream: the text so far, then one error frame, then the end.
      const k = await gw().newKey();
      mock.enqueue(() => anthropicStream("stream-overloaded.sse"));
      const mid = await post(gw, "/v1beta/models/anthropic/claude-sonnet-4-5:streamGenerateContent?alt=sse", HELLO, {
        "x-goog-api-key": k.key,
      });
      expect(mid.status).toBe(200);
      const frames = dataFrames(mid.text).map((d) => JSON.parse(d));
      expect(frames[0].candidates[0].content.parts).toEqual([{ text: "Lisbon is" }]);
      expect(frames.at(-1)).toEqual({
        error: { code: 503, message: expect.stringContaining("Overloaded"), status: "UNAVAILABLE" },
      });
      mock.enqueue(() => anthropicStream("stream-overloaded.sse"));
      const chunks: GenerateContentResponse[] = [];
      const sdkMid = await apiError(
        (async () => {
          for await (const c of await ai.models.generateContentStream({
            model: "anthropic/claude-sonnet-4-5",
            contents: "hi",
          }))
            chunks.push(c);
        })(),
      );
      expect(sdkMid.status).toBe(503);
      expect(textOf(chunks)).toBe("Lisbon is");

      // A Gemini upstream's own error frame is passed on as it came.
      const upstreamErr = { error: { code: 500, message: "Internal error encountered.", status: "INTERNAL" } };
      mock.enqueue(() =>
        streamResponse(
          sse([{ candidates: [{ content: { role: "model", parts: [{ text: "Clear" }] }, index: 0 }] }, upstreamErr]),
        ),
      );
      const native = await post(gw, "/v1beta/models/gemini/gemini-2.5-flash:streamGenerateContent?alt=sse", HELLO, {
        "x-goog-api-key": k.key,
      });
      expect(
        dataFrames(native.text)
          .map((d) => JSON.parse(d))
          .at(-1),
      ).toEqual(upstreamErr);

      const rows = await logsOf(gw(), k.token_id);
      expect(rows.map((r) => [r.status, r.stream])).toEqual([
        [503, true],
        [500, true],
      ]);
    });
  },
  () => ({
    inference: {
      providers: {
        openai: { type: "openai", api_base: `${mock.url}/v1`, api_key: OPENAI_KEY },
        local: { type: "openai-compatible", api_base: `${mock.url}/compat/v1` },
        azure: { type: "azure", api_base: mock.url, api_version: "2024-10-21", api_key: "azure-provider-key-gc" },
        anthropic: { type: "anthropic", api_base: mock.url, api_key: ANTHROPIC_KEY },
        gemini: { type: "gemini", api_base: `${mock.url}/v1beta`, api_key: GEMINI_KEY },
        vertex: {
          type: "vertex",
          project: "gw-gc-project",
          location: "us-east5",
          credentials: sa.json,
          api_base: `${mock.url}/v1`,
        },
        bedrock: {
          type: "bedrock",
          api_base: mock.url,
          region: "us-east-1",
          access_key_id: "AKIAGATEWAYGCTEST001",
          secret_access_key: "bedrock-gc-secret-0123456789abcdefghijklmn",
        },
      },
      models: [
        {
          name: "openai/gpt-4o-mini",
          input_cost_per_token: OPENAI.input,
          output_cost_per_token: OPENAI.output,
          cache_read_input_token_cost: OPENAI.cacheRead,
          max_output_tokens: 16384,
        },
        {
          name: "azure/gpt-4o-mini",
          model: "prod-gpt4o-mini",
          input_cost_per_token: 1e-6,
          output_cost_per_token: 2e-6,
        },
        { name: "local/*" },
        {
          name: "anthropic/claude-sonnet-4-5",
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
          max_output_tokens: 65536,
        },
        { name: "vertex/gemini-2.5-flash", input_cost_per_token: GEMINI.input, output_cost_per_token: GEMINI.output },
        {
          name: "vertex/claude-sonnet-4-5@20250929",
          input_cost_per_token: CLAUDE.input,
          output_cost_per_token: CLAUDE.output,
          max_output_tokens: 64000,
        },
        { name: BEDROCK_MODEL, input_cost_per_token: CLAUDE.input, output_cost_per_token: CLAUDE.output },
      ],
      router: { num_retries: 0 },
    },
  }),
);

describeEachBackend(
  "generateContent streams that go quiet or are cut",
  (gw) => {
    let key: GeneratedWire;
    beforeEach(async () => {
      mock.reset();
      key ??= await gw().newKey();
    });

    test("keep-alive comments during a silent upstream are ignored by the SDK", async () => {
      mock.enqueue(() => openaiStream("chat-stream.sse", 60));
      const { ai } = genai(gw, key.key);
      const chunks = await collect(
        await ai.models.generateContentStream({ model: "openai/gpt-4o-mini", contents: "hi" }),
      );
      expect(textOf(chunks)).toBe("Lisbon is sunny today.");
      mock.enqueue(() => openaiStream("chat-stream.sse", 60));
      const raw = await post(gw, "/v1beta/models/openai/gpt-4o-mini:streamGenerateContent?alt=sse", HELLO, {
        "x-goog-api-key": key.key,
      });
      expect(raw.text).toContain(": keepalive");
    });

    test("a client that leaves a native stream early: the running usage counts are not final; input kept, output at least the text produced", async () => {
      const k = await gw().newKey();
      // Running totals on every frame, as Gemini sends them; the output count lags the text here.
      const frames = Array.from({ length: 80 }, (_, i) => ({
        candidates: [{ content: { role: "model", parts: [{ text: "Clear skies over Lisbon. " }] }, index: 0 }],
        usageMetadata: { promptTokenCount: 500, candidatesTokenCount: i + 1, totalTokenCount: 501 + i },
      }));
      mock.enqueue(() => streamResponse(sse(frames), { delayMs: 25 }));
      const controller = new AbortController();
      const res = await fetch(`${gw().listen()}/v1beta/models/gemini/gemini-2.5-flash:streamGenerateContent?alt=sse`, {
        method: "POST",
        headers: { "x-goog-api-key": k.key, "content-type": "application/json" },
        body: JSON.stringify(HELLO),
        signal: controller.signal,
      });
      const reader = res.body?.getReader();
      let seen = "";
      while ((seen.match(/Lisbon/g) ?? []).length < 8) seen += new TextDecoder().decode((await reader?.read())?.value);
      controller.abort();
      await eventually(
        () => mock.open,
        (n) => n === 0,
      );
      const row = await logRowWithStatus(gw(), k.token_id, 499);
      expect(row).toMatchObject({ usage_estimated: true, input_tokens: 500, provider: "gemini" });
      expect(row.output_tokens as number).toBeGreaterThanOrEqual(countTokens("Clear skies over Lisbon. ".repeat(8)));
    });

    test("a client that leaves a native stream early is billed by estimate, whatever Gemini-only parts it sent", async () => {
      const k = await gw().newKey();
      const frame = {
        candidates: [{ content: { role: "model", parts: [{ text: "Clear skies over Lisbon. " }] }, index: 0 }],
      };
      mock.enqueue(() => streamResponse(sse(Array.from({ length: 80 }, () => frame)), { delayMs: 25 }));
      const controller = new AbortController();
      const res = await fetch(`${gw().listen()}/v1beta/models/gemini/gemini-2.5-flash:streamGenerateContent?alt=sse`, {
        method: "POST",
        headers: { "x-goog-api-key": k.key, "content-type": "application/json" },
        body: JSON.stringify({
          contents: [
            {
              role: "user",
              parts: [
                { text: "Run this and read the PDF" },
                { inlineData: { mimeType: "application/pdf", data: "JVBERi0=" } },
              ],
            },
            { role: "model", parts: [{ executableCode: { language: "PYTHON", code: "print(1)" } }] },
            { role: "user", parts: [{ text: "and the weather?" }] },
          ],
          tools: [{ codeExecution: {} }, { googleSearch: {} }],
        }),
        signal: controller.signal,
      });
      const reader = res.body?.getReader();
      let seen = "";
      while (!seen.includes("Lisbon")) seen += new TextDecoder().decode((await reader?.read())?.value);
      controller.abort();
      let row: Record<string, unknown> | undefined;
      for (let i = 0; i < 60 && row?.status !== 499; i++) {
        row = (await logsOf(gw(), k.token_id))[0];
        if (row?.status !== 499) await Bun.sleep(50);
      }
      expect(row).toMatchObject({
        status: 499,
        error_code: "client_closed_request",
        usage_estimated: true,
        provider: "gemini",
      });
      expect(row?.input_tokens as number).toBeGreaterThan(0);
      expect(row?.output_tokens as number).toBeGreaterThan(0);
    });
  },
  () => ({
    heartbeatMs: 20,
    inference: {
      providers: {
        openai: { type: "openai", api_base: `${mock.url}/v1`, api_key: OPENAI_KEY },
        gemini: { type: "gemini", api_base: `${mock.url}/v1beta`, api_key: GEMINI_KEY },
      },
      models: [
        { name: "openai/gpt-4o-mini", input_cost_per_token: OPENAI.input, output_cost_per_token: OPENAI.output },
        { name: "gemini/gemini-2.5-flash", input_cost_per_token: GEMINI.input, output_cost_per_token: GEMINI.output },
      ],
      router: { num_retries: 0 },
    },
  }),
);
