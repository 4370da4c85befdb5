/**
 * The generateContent protocol in isolation: request decoding (and the checks that refuse what the
 * gateway cannot translate), response and stream encoding, native frame forwarding, and round
 * trips through the Gemini dialect (the upstream direction) back to the same wire shapes.
 */
import { describe, expect, test } from "bun:test";
import { GatewayError } from "../../http/errors";
import { readSse } from "../../http/sse";
import { parseModelTarget } from "../../inference/gemini-routes";
import { fromGeminiResponse, toGeminiBody } from "../../providers/dialects/gemini";
import type { ImageFetcher } from "../../providers/images";
import type { CanonicalResponse, FinishReason, StreamEvent, ToolCallPart, ToolResultPart, Usage } from "../canonical";
import type { StreamTracker } from "../protocol";
import { decodeGenerateContent, jsonSchemaFromGemini } from "./decode";
import { encodeGenerateContent } from "./encode";
import { type GenerateContentInput, geminiGenerateContent, parseGenerateContent } from "./protocol";
import { GeminiStreamEncoder, sseToJsonArray } from "./stream";
import {
  finishFromGemini,
  GEMINI_FINISH_REASONS,
  type GenerateContentRequest,
  type GenerateContentResponse,
  usageFromGemini,
  usageToGemini,
} from "./wire";

const MODEL = "openai/gpt-4o-mini";
const parse = (body: unknown, stream = false) => parseGenerateContent(MODEL, stream, body);
const decode = (body: unknown, stream = false) => {
  const i = parse(body, stream);
  return decodeGenerateContent(i.request, i.model, i.stream);
};
const noFetch: ImageFetcher = async (url) => {
  throw new Error(`unexpected fetch of ${url}`);
};
const toGemini = (body: unknown) =>
  toGeminiBody(decode(body), { fetchImage: noFetch, signal: new AbortController().signal });

function bad(body: unknown): GatewayError {
  try {
    parse(body);
  } catch (e) {
    expect(e).toBeInstanceOf(GatewayError);
    expect((e as GatewayError).status).toBe(400);
    return e as GatewayError;
  }
  throw new Error("expected a 400");
}

const usage = (u: Partial<Usage>): Usage => ({
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  ...u,
});

const response = (over: Partial<CanonicalResponse> = {}): CanonicalResponse => ({
  id: "resp_1",
  model: "gpt-4o-mini-2024-07-18",
  created: 1761000000,
  choices: [{ index: 0, content: [{ type: "text", text: "hi" }], finishReason: "end_turn" }],
  usage: usage({ inputTokens: 10, outputTokens: 2 }),
  ...over,
});

const dec = new TextDecoder();
const frames = (chunks: Uint8Array[]): GenerateContentResponse[] =>
  chunks.map((c) => {
    const text = dec.decode(c);
    expect(text.startsWith("data: ")).toBe(true);
    expect(text.endsWith("\n\n")).toBe(true);
    return JSON.parse(text.slice(6));
  });

describe("requests: decoding", () => {
  test("roles, merged turns, system instruction (Content or string), generation config", () => {
    const req = decode({
      systemInstruction: { role: "user", parts: [{ text: "Be brief." }, { text: "Use metric." }] },
      contents: [
        { role: "user", parts: [{ text: "Hi" }] },
        { parts: [{ text: "no role is a user turn" }] },
        { role: "model", parts: [{ text: "Hello" }, { text: "thinking...", thought: true }] },
        { role: "user", parts: [{ text: "Weather?" }] },
      ],
      generationConfig: {
        maxOutputTokens: 256,
        temperature: 0.4,
        topP: 0.9,
        topK: 40,
        stopSequences: ["END"],
        candidateCount: 2,
        seed: 7,
        presencePenalty: 0.5,
        frequencyPenalty: -0.5,
        thinkingConfig: { thinkingBudget: 2048, includeThoughts: true },
      },
    });
    expect(req.system).toEqual([
      { type: "text", text: "Be brief." },
      { type: "text", text: "Use metric." },
    ]);
    expect(req.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "Hi" },
          { type: "text", text: "no role is a user turn" },
        ],
      },
      { role: "assistant", content: [{ type: "text", text: "Hello" }] },
      { role: "user", content: [{ type: "text", text: "Weather?" }] },
    ]);
    expect(req).toMatchObject({
      model: MODEL,
      stream: false,
      maxTokens: 256,
      temperature: 0.4,
      topP: 0.9,
      topK: 40,
      stop: ["END"],
      n: 2,
      seed: 7,
      presencePenalty: 0.5,
      frequencyPenalty: -0.5,
      thinkingBudget: 2048,
    });
    expect(decode({ systemInstruction: "Plain.", contents: [{ parts: [{ text: "x" }] }] }, true)).toMatchObject({
      system: [{ type: "text", text: "Plain." }],
      stream: true,
    });
  });

  test("thinking: a budget of 0 (off) or -1 (dynamic) sets nothing; thinkingLevel is an effort", () => {
    const g = (thinkingConfig: unknown) =>
      decode({ contents: [{ parts: [{ text: "x" }] }], generationConfig: { thinkingConfig } });
    expect(g({ thinkingBudget: 0 }).thinkingBudget).toBeUndefined();
    expect(g({ thinkingBudget: -1 }).thinkingBudget).toBeUndefined();
    expect(g({ thinkingLevel: "HIGH" }).reasoningEffort).toBe("high");
    expect(g({ thinkingLevel: "LOW" }).reasoningEffort).toBe("low");
  });

  test("JSON output: mime type alone, responseJsonSchema, and Gemini's responseSchema converted", () => {
    const g = (generationConfig: unknown) =>
      decode({ contents: [{ parts: [{ text: "x" }] }], generationConfig }).responseFormat;
    expect(g({ responseMimeType: "application/json" })).toEqual({ type: "json_object" });
    expect(g({ responseMimeType: "text/plain" })).toBeUndefined();
    expect(
      g({ responseMimeType: "text/x.enum", responseSchema: { type: "STRING", enum: ["a", "b"] } }),
    ).toBeUndefined();
    expect(
      g({ responseMimeType: "application/json", responseJsonSchema: { type: "object", properties: { a: {} } } }),
    ).toEqual({ type: "json_schema", name: "response", schema: { type: "object", properties: { a: {} } } });
    expect(
      g({
        responseMimeType: "application/json",
        responseSchema: {
          type: "OBJECT",
          properties: {
            city: { type: "STRING", nullable: true },
            kind: { type: "STRING", format: "enum", enum: ["a", "b"] },
            tags: { type: "ARRAY", items: { type: "STRING" }, minItems: "1" },
          },
          propertyOrdering: ["city", "kind", "tags"],
          required: ["city"],
        },
      }),
    ).toEqual({
      type: "json_schema",
      name: "response",
      schema: {
        type: "object",
        properties: {
          city: { type: ["string", "null"] },
          kind: { type: "string", enum: ["a", "b"] },
          tags: { type: "array", items: { type: "string" }, minItems: 1 },
        },
        required: ["city"],
      },
    });
    expect(jsonSchemaFromGemini({ anyOf: [{ type: "INTEGER" }], nullable: true })).toEqual({
      anyOf: [{ type: "integer" }, { type: "null" }],
    });
  });

  test("tools: parameters (Gemini schema) and parametersJsonSchema; function-calling modes", () => {
    const tools = [
      {
        functionDeclarations: [
          {
            name: "get_weather",
            description: "Weather for a city",
            parameters: { type: "OBJECT", properties: { city: { type: "STRING" } }, required: ["city"] },
          },
          { name: "get_time", parametersJsonSchema: { type: "object", properties: { tz: { type: "string" } } } },
          { name: "ping" },
        ],
      },
      { googleSearch: {} },
    ];
    const req = decode({ contents: [{ parts: [{ text: "x" }] }], tools });
    expect(req.tools).toEqual([
      {
        name: "get_weather",
        description: "Weather for a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
      { name: "get_time", parameters: { type: "object", properties: { tz: { type: "string" } } } },
      { name: "ping", parameters: { type: "object", properties: {} } },
    ]);
    const choice = (functionCallingConfig: unknown) =>
      decode({ contents: [{ parts: [{ text: "x" }] }], tools, toolConfig: { functionCallingConfig } }).toolChoice;
    expect(choice({ mode: "AUTO" })).toEqual({ type: "auto" });
    expect(choice({ mode: "ANY" })).toEqual({ type: "required" });
    expect(choice({ mode: "NONE" })).toEqual({ type: "none" });
    expect(choice({ mode: "VALIDATED" })).toEqual({ type: "auto" });
    expect(choice({ mode: "ANY", allowedFunctionNames: ["get_time"] })).toEqual({ type: "tool", name: "get_time" });
    expect(choice({ mode: "ANY", allowedFunctionNames: ["get_time", "ping"] })).toEqual({ type: "required" });
    expect(choice({})).toBeUndefined();
  });

  test("function calls keep their ids; calls without one get call_<uuid>, and their responses match by name", () => {
    const req = decode({
      contents: [
        { role: "user", parts: [{ text: "Weather in Lisbon and Porto, and the time?" }] },
        {
          role: "model",
          parts: [
            { functionCall: { id: "fc_1", name: "get_weather", args: { city: "Lisbon" } }, thoughtSignature: "sig" },
            { functionCall: { name: "get_weather", args: { city: "Porto" } } },
            { functionCall: { name: "get_time" } },
          ],
        },
        {
          role: "user",
          parts: [
            { functionResponse: { name: "get_time", response: { time: "10:00" } } },
            { functionResponse: { id: "fc_1", name: "get_weather", response: { temp_c: 21 } } },
            { functionResponse: { name: "get_weather", response: { result: "17 °C, cloudy" } } },
          ],
        },
      ],
    });
    const calls = req.messages[1]?.content as ToolCallPart[];
    expect(calls.map((c) => [c.name, c.arguments])).toEqual([
      ["get_weather", '{"city":"Lisbon"}'],
      ["get_weather", '{"city":"Porto"}'],
      ["get_time", "{}"],
    ]);
    expect(calls[0]?.id).toBe("fc_1");
    expect(calls[1]?.id).toMatch(/^call_[0-9a-f-]{36}$/);
    expect(calls[2]?.id).toMatch(/^call_[0-9a-f-]{36}$/);
    const results = req.messages[2]?.content as ToolResultPart[];
    expect(results.map((r) => [r.toolCallId, r.name, r.content])).toEqual([
      [calls[2]?.id, "get_time", [{ type: "text", text: '{"time":"10:00"}' }]],
      ["fc_1", "get_weather", [{ type: "text", text: '{"temp_c":21}' }]],
      [calls[1]?.id, "get_weather", [{ type: "text", text: '{"result":"17 °C, cloudy"}' }]],
    ]);
  });

  test("images: inlineData is a base64 image, an http(s) fileData a URL image", () => {
    const req = decode({
      contents: [
        {
          role: "user",
          parts: [
            { text: "Compare" },
            { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } },
            { fileData: { mimeType: "image/jpeg", fileUri: "https://example.com/a.jpg" } },
          ],
        },
      ],
    });
    expect(req.messages[0]?.content).toEqual([
      { type: "text", text: "Compare" },
      { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { kind: "url", url: "https://example.com/a.jpg" } },
    ]);
  });

  test("code execution in history is kept as text; model images and thoughts are left out", () => {
    const req = decode({
      contents: [
        { role: "user", parts: [{ text: "Compute" }] },
        {
          role: "model",
          parts: [
            { text: "plan", thought: true },
            { executableCode: { language: "PYTHON", code: "print(6*7)" } },
            { codeExecutionResult: { outcome: "OUTCOME_OK", output: "42\n" } },
            { inlineData: { mimeType: "image/png", data: "AAAA" } },
          ],
        },
      ],
    });
    expect(req.messages[1]).toEqual({
      role: "assistant",
      content: [
        { type: "text", text: "```python\nprint(6*7)\n```" },
        { type: "text", text: "42\n" },
      ],
    });
  });
});

describe("requests: what is refused, with the field named", () => {
  test("schema errors: missing or empty contents, wrong types, a body that is not an object", () => {
    expect(bad({}).message).toBe("Missing required field 'contents' in request body");
    expect(bad({ contents: [] }).param).toBe("contents");
    expect(bad({ contents: "hi" }).message).toContain("'contents'");
    expect(bad({ contents: [{ parts: [{ text: 1 }] }] }).param).toBe("contents[0].parts[0].text");
    expect(bad({ contents: [{ role: "assistant", parts: [] }] }).message).toBe(
      `Invalid 'contents[0].role': expected "user" or "model", got "assistant"`,
    );
    const t = bad({ contents: [{ parts: [{ text: "x" }] }], generationConfig: { temperature: "hot" } });
    expect(t.message).toBe("Invalid 'generationConfig.temperature': expected a number >= 0 and <= 2, got \"hot\"");
    expect(bad({ contents: [{ parts: [{ text: "x" }] }], generationConfig: { maxOutputTokens: 0 } }).param).toBe(
      "generationConfig.maxOutputTokens",
    );
    expect(bad({ contents: [{ role: "model", parts: [{ functionCall: { name: "f", args: "{}" } }] }] }).param).toBe(
      "contents[0].parts[0].functionCall.args",
    );
    expect(bad(undefined).message).toBe("The request body is empty: send a JSON object");
    expect(bad([1]).message).toBe("The request body must be an object");
  });

  test("unknown part kinds are named; a part holds exactly one kind; fileData must be a web URL", () => {
    const unknown = bad({ contents: [{ parts: [{ text: "x" }, { toolCall: { id: "t" }, thought: true }] }] });
    expect(unknown.message).toContain("'contents[0].parts[1]': parts of kind 'toolCall' are not supported");
    expect(unknown.param).toBe("contents[0].parts[1].toolCall");
    expect(bad({ contents: [{ parts: [{}] }] }).message).toContain("'contents[0].parts[0]' is empty");
    expect(
      bad({ contents: [{ parts: [{ text: "x", inlineData: { mimeType: "image/png", data: "" } }] }] }).message,
    ).toBe("'contents[0].parts[0]' holds 'text' and 'inlineData'; a part holds exactly one kind of data");
    const gs = bad({ contents: [{ parts: [{ fileData: { mimeType: "image/png", fileUri: "gs://b/a.png" } }] }] });
    expect(gs.param).toBe("contents[0].parts[0].fileData.fileUri");
    expect(gs.message).toContain("cannot read 'gs:' URIs");
  });

  test("function calls come from the model, responses from the user; the system instruction is text", () => {
    expect(bad({ contents: [{ role: "user", parts: [{ functionCall: { name: "f" } }] }] }).message).toContain(
      'a functionCall part belongs in a turn of role "model"',
    );
    expect(
      bad({ contents: [{ role: "model", parts: [{ functionResponse: { name: "f", response: {} } }] }] }).message,
    ).toContain('a functionResponse part belongs in a turn of role "user"');
    expect(
      bad({
        systemInstruction: { parts: [{ inlineData: { mimeType: "image/png", data: "" } }] },
        contents: [{ parts: [{ text: "x" }] }],
      }).param,
    ).toBe("systemInstruction.parts[0]");
  });

  test("a part holding only a thought signature (as newer models return) is accepted and carries nothing", () => {
    const req = decode({
      contents: [
        { role: "user", parts: [{ text: "hi" }] },
        {
          role: "model",
          parts: [{ text: "Hello" }, { thoughtSignature: "CpwCAdHt" }, { text: "", thoughtSignature: "x" }],
        },
      ],
    });
    expect(req.messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: "Hello" }] });
  });

  test("unknown fields are allowed (Gemini upstreams receive them)", () => {
    const i = parse({
      contents: [{ parts: [{ text: "x", partMetadata: { a: 1 } }] }],
      safetySettings: [{ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_NONE" }],
      serviceTier: "flex",
    });
    expect(i.request).toMatchObject({ serviceTier: "flex" });
  });
});

describe("requests: round trip through the Gemini dialect", () => {
  test("a Gemini request decoded and re-encoded for a Gemini upstream is the same request", async () => {
    const body = {
      systemInstruction: { parts: [{ text: "Be brief." }] },
      contents: [
        {
          role: "user",
          parts: [{ text: "Weather here?" }, { inlineData: { mimeType: "image/jpeg", data: "/9j/4AAQ" } }],
        },
        {
          role: "model",
          parts: [
            { functionCall: { id: "fc_1", name: "get_weather", args: { city: "Lisbon" } } },
            { functionCall: { name: "get_weather", args: { city: "Porto", units: "celsius" } } },
          ],
        },
        {
          role: "user",
          parts: [
            { functionResponse: { id: "fc_1", name: "get_weather", response: { temp_c: 21 } } },
            { functionResponse: { name: "get_weather", response: { result: "17 °C" } } },
          ],
        },
      ],
      tools: [
        {
          functionDeclarations: [
            {
              name: "get_weather",
              description: "Current weather",
              parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
            },
          ],
        },
      ],
      toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_weather"] } },
      generationConfig: { maxOutputTokens: 300, temperature: 0.5, topP: 0.9, topK: 20, stopSequences: ["END"] },
    } satisfies GenerateContentRequest;
    // Ids minted for the call without one are not Gemini's and are left out again.
    expect(await toGemini(body)).toEqual(body as GenerateContentRequest);
  });
});

describe("responses: encoding", () => {
  test("text, function calls (args objects, ids kept), finishReason, index, usage, modelVersion, responseId", () => {
    const res = encodeGenerateContent(
      response({
        choices: [
          {
            index: 0,
            finishReason: "tool_calls",
            content: [
              { type: "text", text: "Checking." },
              { type: "thinking", text: "hmm", signature: "s" },
              { type: "tool_call", id: "call_Lis1", name: "get_weather", arguments: '{"city":"Lisbon"}' },
              { type: "tool_call", id: "toolu_2", name: "get_time", arguments: "" },
              { type: "tool_call", id: "call_3", name: "bad", arguments: "{oops" },
            ],
          },
        ],
        usage: usage({ inputTokens: 1200, cacheReadTokens: 1024, outputTokens: 52, reasoningTokens: 40 }),
      }),
      { includeThoughts: false },
    );
    expect(res).toEqual({
      candidates: [
        {
          content: {
            role: "model",
            parts: [
              { text: "Checking." },
              { functionCall: { id: "call_Lis1", name: "get_weather", args: { city: "Lisbon" } } },
              { functionCall: { id: "toolu_2", name: "get_time", args: {} } },
              { functionCall: { id: "call_3", name: "bad", args: { _raw: "{oops" } } },
            ],
          },
          finishReason: "STOP",
          index: 0,
        },
      ],
      usageMetadata: {
        promptTokenCount: 1200,
        cachedContentTokenCount: 1024,
        candidatesTokenCount: 12,
        thoughtsTokenCount: 40,
        totalTokenCount: 1252,
      },
      modelVersion: "gpt-4o-mini-2024-07-18",
      responseId: "resp_1",
    });
  });

  test("thoughts only when the client asked; several candidates; a refusal is the text and the finishMessage", () => {
    const res = encodeGenerateContent(
      response({
        choices: [
          {
            index: 0,
            finishReason: "end_turn",
            content: [
              { type: "thinking", text: "27*453" },
              { type: "text", text: "12231" },
            ],
          },
          { index: 1, finishReason: "content_filter", content: [], refusal: "I can't help with that." },
        ],
      }),
      { includeThoughts: true },
    );
    expect(res.candidates).toEqual([
      {
        content: { role: "model", parts: [{ text: "27*453", thought: true }, { text: "12231" }] },
        finishReason: "STOP",
        index: 0,
      },
      {
        content: { role: "model", parts: [{ text: "I can't help with that." }] },
        finishReason: "SAFETY",
        finishMessage: "I can't help with that.",
        index: 1,
      },
    ]);
  });

  test("every canonical finish reason maps to Gemini's and back to the same class", () => {
    const expected: Record<FinishReason, [string, FinishReason]> = {
      end_turn: ["STOP", "end_turn"],
      stop_sequence: ["STOP", "end_turn"],
      tool_calls: ["STOP", "tool_calls"],
      pause_turn: ["STOP", "end_turn"],
      max_tokens: ["MAX_TOKENS", "max_tokens"],
      context_window_exceeded: ["MAX_TOKENS", "max_tokens"],
      content_filter: ["SAFETY", "content_filter"],
      error: ["OTHER", "end_turn"],
    };
    for (const [reason, [wire, back]] of Object.entries(expected) as [FinishReason, [string, FinishReason]][]) {
      const content =
        reason === "tool_calls" ? [{ type: "tool_call" as const, id: "c", name: "f", arguments: "{}" }] : [];
      const encoded = encodeGenerateContent(response({ choices: [{ index: 0, finishReason: reason, content }] }), {
        includeThoughts: false,
      });
      expect(encoded.candidates?.[0]?.finishReason).toBe(wire as never);
      expect(fromGeminiResponse(encoded, "p", "m").choices[0]?.finishReason).toBe(back);
    }
  });

  test("every Gemini finish reason survives the trip through canonical in its class", () => {
    const cls = (r: string) =>
      r === "MAX_TOKENS"
        ? "MAX_TOKENS"
        : finishFromGemini(r, false) === "content_filter"
          ? "SAFETY"
          : finishFromGemini(r, false) === "error"
            ? "OTHER"
            : "STOP";
    for (const r of [...GEMINI_FINISH_REASONS, "SOMETHING_NEW"]) {
      const upstream: GenerateContentResponse = {
        candidates: [{ content: { role: "model", parts: [{ text: "x" }] }, finishReason: r, index: 0 }],
        usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2 },
      };
      const back = encodeGenerateContent(fromGeminiResponse(upstream, "p", "m"), { includeThoughts: false });
      expect([r, back.candidates?.[0]?.finishReason]).toEqual([r, cls(r) as never]);
    }
  });

  test("usage both directions: canonical -> usageMetadata -> canonical, and Gemini -> canonical -> Gemini", () => {
    const cases: Usage[] = [
      usage({ inputTokens: 2110, cacheReadTokens: 1810, outputTokens: 15 }),
      usage({ inputTokens: 1854, cacheReadTokens: 1536, outputTokens: 152, reasoningTokens: 140 }),
      usage({ inputTokens: 7, outputTokens: 4 }),
    ];
    for (const u of cases) {
      const g = encodeGenerateContent(response({ usage: u }), { includeThoughts: false }).usageMetadata;
      expect(g?.promptTokenCount).toBe(u.inputTokens);
      expect(g?.candidatesTokenCount).toBe(u.outputTokens - u.reasoningTokens);
      expect(g?.totalTokenCount).toBe(u.inputTokens + u.outputTokens);
      expect(usageFromGemini(g)).toEqual(u);
    }
    const fromGoogle = {
      promptTokenCount: 1854,
      cachedContentTokenCount: 1536,
      candidatesTokenCount: 12,
      thoughtsTokenCount: 140,
      totalTokenCount: 2006,
    };
    expect(usageToGemini(usageFromGemini(fromGoogle))).toEqual(fromGoogle);
  });
});

describe("streams: encoding", () => {
  const ev = (events: StreamEvent[], includeThoughts = false) => {
    const enc = new GeminiStreamEncoder({ includeThoughts }, MODEL);
    const out = events.flatMap((e) => enc.encode(e));
    return { frames: frames([...out, ...enc.end()]), enc };
  };

  test("text frames carry only new text; the last frame has finishReason and usage; no [DONE]", () => {
    const { frames: f } = ev([
      { type: "start", id: "chatcmpl-1", model: "gpt-4o-mini-2024-07-18", created: 1 },
      { type: "text_delta", choice: 0, text: "Lisbon" },
      { type: "thinking_delta", choice: 0, text: "(hidden)" },
      { type: "text_delta", choice: 0, text: " is sunny." },
      { type: "finish", choice: 0, reason: "end_turn" },
      { type: "usage", usage: usage({ inputTokens: 1200, cacheReadTokens: 1024, outputTokens: 5 }) },
    ]);
    expect(f).toEqual([
      {
        candidates: [{ content: { role: "model", parts: [{ text: "Lisbon" }] }, index: 0 }],
        modelVersion: "gpt-4o-mini-2024-07-18",
        responseId: "chatcmpl-1",
      },
      {
        candidates: [{ content: { role: "model", parts: [{ text: " is sunny." }] }, index: 0 }],
        modelVersion: "gpt-4o-mini-2024-07-18",
        responseId: "chatcmpl-1",
      },
      {
        candidates: [{ content: { role: "model", parts: [{ text: "" }] }, finishReason: "STOP", index: 0 }],
        usageMetadata: {
          promptTokenCount: 1200,
          cachedContentTokenCount: 1024,
          candidatesTokenCount: 5,
          totalTokenCount: 1205,
        },
        modelVersion: "gpt-4o-mini-2024-07-18",
        responseId: "chatcmpl-1",
      },
    ]);
  });

  test("argument deltas are buffered per call: each call goes out whole when the next starts or at the finish", () => {
    const enc = new GeminiStreamEncoder({ includeThoughts: false }, MODEL);
    const emitted = (e: StreamEvent) => frames(enc.encode(e));
    expect(emitted({ type: "start", id: "msg_1", model: "claude-sonnet-4-5", created: 1 })).toEqual([]);
    expect(emitted({ type: "text_delta", choice: 0, text: "Checking." })).toHaveLength(1);
    expect(emitted({ type: "tool_call_start", choice: 0, index: 0, id: "toolu_L", name: "get_weather" })).toEqual([]);
    expect(emitted({ type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city": "Lis' })).toEqual([]);
    expect(emitted({ type: "tool_call_delta", choice: 0, index: 0, arguments: 'bon"}' })).toEqual([]);
    expect(emitted({ type: "tool_call_start", choice: 0, index: 1, id: "toolu_P", name: "get_weather" })).toEqual([
      {
        candidates: [
          {
            content: {
              role: "model",
              parts: [{ functionCall: { id: "toolu_L", name: "get_weather", args: { city: "Lisbon" } } }],
            },
            index: 0,
          },
        ],
        modelVersion: "claude-sonnet-4-5",
        responseId: "msg_1",
      },
    ]);
    expect(emitted({ type: "tool_call_delta", choice: 0, index: 1, arguments: '{"city":"Porto"}' })).toEqual([]);
    expect(emitted({ type: "finish", choice: 0, reason: "tool_calls" })).toEqual([]);
    expect(emitted({ type: "usage", usage: usage({ inputTokens: 412, outputTokens: 96 }) })).toEqual([]);
    expect(frames(enc.end())).toEqual([
      {
        candidates: [
          {
            content: {
              role: "model",
              parts: [{ functionCall: { id: "toolu_P", name: "get_weather", args: { city: "Porto" } } }],
            },
            finishReason: "STOP",
            index: 0,
          },
        ],
        usageMetadata: { promptTokenCount: 412, candidatesTokenCount: 96, totalTokenCount: 508 },
        modelVersion: "claude-sonnet-4-5",
        responseId: "msg_1",
      },
    ]);
  });

  test("text after a call completes it first; a call with no arguments is {}", () => {
    const { frames: f } = ev([
      { type: "start", id: "r", model: "m", created: 1 },
      { type: "tool_call_start", choice: 0, index: 0, id: "c1", name: "now" },
      { type: "text_delta", choice: 0, text: "done" },
      { type: "finish", choice: 0, reason: "tool_calls" },
    ]);
    expect(f.map((x) => x.candidates?.[0]?.content?.parts)).toEqual([
      [{ functionCall: { id: "c1", name: "now", args: {} } }, { text: "done" }],
      [{ text: "" }],
    ]);
  });

  test("several candidates finish together in the last frame; thoughts when asked; max tokens", () => {
    const { frames: f } = ev(
      [
        { type: "start", id: "r", model: "m", created: 1 },
        { type: "thinking_delta", choice: 0, text: "think" },
        { type: "text_delta", choice: 1, text: "B" },
        { type: "text_delta", choice: 0, text: "A" },
        { type: "finish", choice: 1, reason: "max_tokens" },
        { type: "finish", choice: 0, reason: "stop_sequence" },
      ],
      true,
    );
    expect(f[0]?.candidates).toEqual([
      { content: { role: "model", parts: [{ text: "think", thought: true }] }, index: 0 },
    ]);
    expect(f.at(-1)?.candidates?.map((c) => [c.index, c.finishReason])).toEqual([
      [0, "STOP"],
      [1, "MAX_TOKENS"],
    ]);
    expect(f.at(-1)?.usageMetadata).toBeUndefined();
  });

  test("a failure is one frame in Google's envelope", () => {
    const enc = new GeminiStreamEncoder({ includeThoughts: false }, MODEL);
    const [frame] = frames(enc.error(new GatewayError(503, "Overloaded", { code: "upstream_overloaded" })));
    expect(frame as unknown).toEqual({ error: { code: 503, message: "Overloaded", status: "UNAVAILABLE" } });
  });
});

describe("native forwarding (Gemini upstreams)", () => {
  const enc = new TextEncoder();
  const body = (text: string) =>
    new ReadableStream<Uint8Array>({
      start(c) {
        // Cut anywhere, frames split across reads.
        for (let i = 0; i < text.length; i += 23) c.enqueue(enc.encode(text.slice(i, i + 23)));
        c.close();
      },
    });
  const tracker = () => {
    const t: StreamTracker & { text: string } = {
      usage: undefined,
      failed: undefined,
      text: "",
      token(s: string) {
        t.text += s;
      },
    };
    return t;
  };
  const input: GenerateContentInput = parse({ contents: [{ parts: [{ text: "x" }] }] }, true);
  const native = geminiGenerateContent.native;
  if (!native) throw new Error("generateContent forwards natively");
  const forward = async (text: string, t: StreamTracker) => {
    const out: string[] = [];
    const ctx = { requestId: "req_test", principal: { kind: "master" as const }, model: "gemini/gemini-2.5-flash" };
    for await (const f of native.frames(body(text), input, t, "gemini", new AbortController().signal, ctx))
      out.push(dec.decode(f));
    return out;
  };
  const f1 = {
    candidates: [{ content: { role: "model", parts: [{ text: "Clear" }] }, index: 0 }],
    usageMetadata: { promptTokenCount: 10, totalTokenCount: 10 },
  };
  const f2 = {
    candidates: [
      {
        content: { role: "model", parts: [{ functionCall: { name: "f", args: { a: 1 } } }] },
        finishReason: "STOP",
        index: 0,
      },
    ],
    usageMetadata: {
      promptTokenCount: 10,
      cachedContentTokenCount: 4,
      candidatesTokenCount: 3,
      thoughtsTokenCount: 2,
      totalTokenCount: 15,
    },
  };

  test("the body goes as the client sent it; usage of a whole answer from usageMetadata", () => {
    expect(native.body(input, true)).toBe(input.request);
    expect(native.usage(f2)).toEqual(
      usage({ inputTokens: 10, cacheReadTokens: 4, outputTokens: 5, reasoningTokens: 2 }),
    );
  });

  test("frames unchanged, the last usage wins, text and calls recorded", async () => {
    const t = tracker();
    const out = await forward(`data: ${JSON.stringify(f1)}\r\n\r\ndata: ${JSON.stringify(f2)}\r\n\r\n`, t);
    expect(out).toEqual([`data: ${JSON.stringify(f1)}\n\n`, `data: ${JSON.stringify(f2)}\n\n`]);
    expect(t.usage).toEqual(usage({ inputTokens: 10, cacheReadTokens: 4, outputTokens: 5, reasoningTokens: 2 }));
    expect(t.text).toBe('Clearf{"a":1}');
    expect(t.failed).toBeUndefined();
  });

  test("an upstream error frame is passed on and ends the stream; a malformed frame becomes one", async () => {
    const t = tracker();
    const err = { error: { code: 429, message: "Resource has been exhausted", status: "RESOURCE_EXHAUSTED" } };
    const out = await forward(
      `data: ${JSON.stringify(f1)}\n\ndata: ${JSON.stringify(err)}\n\ndata: ${JSON.stringify(f2)}\n\n`,
      t,
    );
    expect(out).toEqual([`data: ${JSON.stringify(f1)}\n\n`, `data: ${JSON.stringify(err)}\n\n`]);
    expect(t.failed?.status).toBe(429);
    const t2 = tracker();
    const out2 = await forward(`data: ${JSON.stringify(f1)}\n\ndata: {"candidates": [\n\n`, t2);
    expect(out2).toHaveLength(2);
    expect(JSON.parse(out2[1]?.slice(6) ?? "")).toEqual({
      error: {
        code: 502,
        message: "The upstream provider sent an invalid response: gemini sent a malformed stream frame",
        status: "UNAVAILABLE",
      },
    });
    expect(t2.failed?.status).toBe(502);
    // Counts from before the finish reason are running totals: kept as partial, not final.
    expect(t2.usage).toBeUndefined();
    expect(t2.partialUsage).toEqual(usage({ inputTokens: 10 }));
  });
});

describe("routes: the model and method in the path", () => {
  test("slashes escaped or not, a models/ prefix, colons in model names; anything else is no target", () => {
    expect(parseModelTarget("openai/gpt-4o-mini:generateContent")).toEqual({
      model: "openai/gpt-4o-mini",
      method: "generateContent",
      stream: false,
    });
    expect(parseModelTarget("openai%2Fgpt-4o-mini:streamGenerateContent")).toEqual({
      model: "openai/gpt-4o-mini",
      method: "streamGenerateContent",
      stream: true,
    });
    expect(parseModelTarget("models/local/llama3.2:3b:generateContent")?.model).toBe("local/llama3.2:3b");
    expect(parseModelTarget("models%2Fopenai%2Fgpt-4o-mini%3AgenerateContent")?.model).toBe("openai/gpt-4o-mini");
    for (const bad of [
      "openai/gpt-4o-mini",
      "openai/gpt-4o-mini:countTokens",
      ":generateContent",
      "models/:generateContent",
      "a%zz:generateContent",
      "x:constructor",
    ])
      expect(parseModelTarget(bad)).toBeUndefined();
  });

  test("without alt=sse the stream is one JSON array; keep-alives become whitespace", async () => {
    const sse = `data: {"a":1}\n\n: keepalive\n\ndata: {"b":\ndata: 2}\n\n`;
    const out = await new Response(
      sseToJsonArray(
        new ReadableStream({
          start(c) {
            for (const ch of sse) c.enqueue(new TextEncoder().encode(ch));
            c.close();
          },
        }),
      ),
    ).text();
    expect(JSON.parse(out)).toEqual([{ a: 1 }, { b: 2 }]);
    expect(await new Response(sseToJsonArray(new Response("").body as ReadableStream)).text()).toBe("[]");
  });

  test("the SSE reader reads what the encoder writes", async () => {
    const enc = new GeminiStreamEncoder({ includeThoughts: false }, MODEL);
    const bytes = [...enc.encode({ type: "text_delta", choice: 0, text: "a\nb" }), ...enc.end()];
    const read = [];
    for await (const e of readSse(new Response(new Blob(bytes)).body as ReadableStream)) read.push(JSON.parse(e.data));
    expect(read[0].candidates[0].content.parts[0].text).toBe("a\nb");
  });
});
