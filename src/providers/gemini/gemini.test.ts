import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chunkedStream, collect } from "../../../test/helpers/streams";
import { googleError, sseFrames } from "../../../test/mocks/gemini";
import { startMockUpstream, streamResponse } from "../../../test/mocks/upstream";
import type { ProviderConfig } from "../../config/file";
import { GatewayError } from "../../http/errors";
import { silentLogger } from "../../log";
import type { CanonicalRequest, FinishReason, StreamEvent, Usage } from "../../protocols/canonical";
import {
  finishFromGemini,
  finishToGemini,
  GEMINI_FINISH_REASONS,
  type GenerateContentResponse,
  geminiStatusName,
  usageFromGemini,
  usageToGemini,
} from "../../protocols/gemini/wire";
import { fromGeminiResponse, geminiStreamEvents, toGeminiBody, toGeminiSchema } from "../dialects/gemini";
import { UpstreamError } from "../errors";
import type { ImageFetcher } from "../images";
import type { CallContext, Deployment } from "../types";
import { createGeminiAdapter } from "./adapter";

const fixture = (name: string) => readFileSync(join(import.meta.dir, "fixtures", name), "utf8");
const fixtureJson = (name: string) => JSON.parse(fixture(name)) as GenerateContentResponse;

const noFetch: ImageFetcher = async (url) => {
  throw new Error(`unexpected download of ${url}`);
};
const rctx = (fetchImage: ImageFetcher = noFetch) => ({ fetchImage, signal: new AbortController().signal });
const ctx = (fetchImage: ImageFetcher = noFetch): CallContext => ({
  signal: new AbortController().signal,
  log: silentLogger,
  fetchImage,
});
const deployment = (over: Partial<Deployment> = {}): Deployment => ({
  id: "gemini/gemini-2.5-flash",
  provider: "gemini",
  upstreamModel: "gemini-2.5-flash",
  weight: 1,
  ...over,
});
const req = (over: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  model: "gemini/gemini-2.5-flash",
  system: [],
  messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  stream: false,
  ...over,
});

const usage = (over: Partial<Usage>): Usage => ({
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  ...over,
});

describe("Gemini wire mappings", () => {
  test("finish reasons: calls win over STOP, filters, caps, bad calls, unknown values", () => {
    const expected: Record<string, FinishReason> = {
      STOP: "end_turn",
      OTHER: "end_turn",
      FINISH_REASON_UNSPECIFIED: "end_turn",
      NO_IMAGE: "end_turn",
      MAX_TOKENS: "max_tokens",
      SAFETY: "content_filter",
      RECITATION: "content_filter",
      LANGUAGE: "content_filter",
      BLOCKLIST: "content_filter",
      PROHIBITED_CONTENT: "content_filter",
      SPII: "content_filter",
      IMAGE_SAFETY: "content_filter",
      IMAGE_PROHIBITED_CONTENT: "content_filter",
      IMAGE_RECITATION: "content_filter",
      IMAGE_OTHER: "content_filter",
      MALFORMED_FUNCTION_CALL: "error",
      UNEXPECTED_TOOL_CALL: "error",
      TOO_MANY_TOOL_CALLS: "error",
    };
    expect(Object.keys(expected).sort()).toEqual([...GEMINI_FINISH_REASONS].sort());
    for (const [reason, want] of Object.entries(expected))
      expect(`${reason} ${finishFromGemini(reason, false)}`).toBe(`${reason} ${want}`);
    expect(finishFromGemini("STOP", true)).toBe("tool_calls");
    expect(finishFromGemini("MAX_TOKENS", true)).toBe("tool_calls");
    expect(finishFromGemini("SOMETHING_NEW_IN_2027", false)).toBe("end_turn");
    expect(finishFromGemini(undefined, false)).toBe("end_turn");
    expect(finishFromGemini(null, true)).toBe("tool_calls");
  });

  test("finish reasons back to Gemini", () => {
    const cases: [FinishReason, string][] = [
      ["end_turn", "STOP"],
      ["stop_sequence", "STOP"],
      ["tool_calls", "STOP"],
      ["pause_turn", "STOP"],
      ["max_tokens", "MAX_TOKENS"],
      ["context_window_exceeded", "MAX_TOKENS"],
      ["content_filter", "SAFETY"],
      ["error", "OTHER"],
    ];
    for (const [c, g] of cases) expect(finishToGemini(c)).toBe(g as ReturnType<typeof finishToGemini>);
  });

  test("usage: tool-use prompt is input, thoughts are output and reasoning, cache reads kept", () => {
    expect(
      usageFromGemini({
        promptTokenCount: 1854,
        cachedContentTokenCount: 1536,
        candidatesTokenCount: 12,
        thoughtsTokenCount: 140,
        toolUsePromptTokenCount: 30,
        totalTokenCount: 2036,
      }),
    ).toEqual(usage({ inputTokens: 1884, cacheReadTokens: 1536, outputTokens: 152, reasoningTokens: 140 }));
    expect(usageFromGemini(undefined)).toEqual(usage({}));
    expect(
      usageToGemini(usage({ inputTokens: 100, cacheReadTokens: 60, outputTokens: 50, reasoningTokens: 20 })),
    ).toEqual({
      promptTokenCount: 100,
      cachedContentTokenCount: 60,
      candidatesTokenCount: 30,
      thoughtsTokenCount: 20,
      totalTokenCount: 150,
    });
    expect(usageToGemini(usage({ inputTokens: 5, outputTokens: 2 }))).toEqual({
      promptTokenCount: 5,
      candidatesTokenCount: 2,
      totalTokenCount: 7,
    });
  });

  test("HTTP statuses to Google status names", () => {
    const cases: [number, string][] = [
      [400, "INVALID_ARGUMENT"],
      [401, "UNAUTHENTICATED"],
      [403, "PERMISSION_DENIED"],
      [404, "NOT_FOUND"],
      [413, "INVALID_ARGUMENT"],
      [429, "RESOURCE_EXHAUSTED"],
      [500, "INTERNAL"],
      [503, "UNAVAILABLE"],
      [529, "UNAVAILABLE"],
      [504, "DEADLINE_EXCEEDED"],
      [418, "FAILED_PRECONDITION"],
      [599, "INTERNAL"],
    ];
    for (const [s, n] of cases) expect(`${s} ${geminiStatusName(s)}`).toBe(`${s} ${n}`);
  });
});

describe("JSON Schema -> Gemini schema", () => {
  test("drops unsupported keywords, keeps the supported ones", () => {
    expect(
      toGeminiSchema({
        $schema: "http://json-schema.org/draft-07/schema#",
        $id: "urn:x",
        type: "object",
        title: "Query",
        description: "A query",
        additionalProperties: false,
        strict: true,
        properties: {
          city: {
            type: "string",
            description: "City",
            minLength: 1,
            maxLength: 80,
            pattern: "^[A-Z]",
            examples: ["Lisbon"],
          },
          days: { type: "integer", minimum: 1, maximum: 14, exclusiveMinimum: 0, format: "int32", default: 3 },
          when: { type: "string", format: "date-time" },
          site: { type: "string", format: "uri" },
          tags: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 5, uniqueItems: true },
        },
        required: ["city", "ghost"],
      }),
    ).toEqual({
      type: "object",
      title: "Query",
      description: "A query",
      properties: {
        city: {
          type: "string",
          description: "City",
          minLength: 1,
          maxLength: 80,
          pattern: "^[A-Z]",
          example: "Lisbon",
        },
        days: { type: "integer", minimum: 1, maximum: 14, format: "int32", default: 3 },
        when: { type: "string", format: "date-time" },
        site: { type: "string" },
        tags: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 5 },
      },
      required: ["city"],
    });
  });

  test("type arrays and null branches become nullable; several types become anyOf", () => {
    expect(toGeminiSchema({ type: ["string", "null"], description: "d" })).toEqual({
      type: "string",
      nullable: true,
      description: "d",
    });
    expect(toGeminiSchema({ anyOf: [{ type: "integer" }, { type: "null" }], description: "n" })).toEqual({
      type: "integer",
      nullable: true,
      description: "n",
    });
    expect(toGeminiSchema({ oneOf: [{ type: "string" }, { type: "number" }] })).toEqual({
      anyOf: [{ type: "string" }, { type: "number" }],
    });
    expect(toGeminiSchema({ type: ["string", "integer", "null"] })).toEqual({
      anyOf: [{ type: "string" }, { type: "integer" }],
      nullable: true,
    });
  });

  test("enums: strings only (format enum), const becomes an enum, null in enum is nullable", () => {
    expect(toGeminiSchema({ type: "string", enum: ["c", "f"] })).toEqual({
      type: "string",
      enum: ["c", "f"],
      format: "enum",
    });
    expect(toGeminiSchema({ enum: ["a", null] })).toEqual({
      type: "string",
      enum: ["a"],
      format: "enum",
      nullable: true,
    });
    expect(toGeminiSchema({ const: "fixed" })).toEqual({ type: "string", enum: ["fixed"], format: "enum" });
    expect(toGeminiSchema({ type: "integer", enum: [1, 2, 3] })).toEqual({ type: "integer" });
  });

  test("local $refs are inlined ($defs, definitions), recursion is cut, allOf merged", () => {
    const schema = {
      type: "object",
      $defs: { City: { type: "object", properties: { name: { type: "string" } }, required: ["name"] } },
      definitions: { Unit: { type: "string", enum: ["c", "f"] } },
      properties: {
        city: { $ref: "#/$defs/City", description: "Where" },
        unit: { $ref: "#/definitions/Unit" },
        missing: { $ref: "#/$defs/Nope" },
        remote: { $ref: "https://example.com/schema.json" },
        both: {
          allOf: [
            { $ref: "#/$defs/City" },
            { type: "object", properties: { country: { type: "string" } }, required: ["country"] },
          ],
        },
      },
    };
    expect(toGeminiSchema(schema)).toEqual({
      type: "object",
      properties: {
        city: { type: "object", description: "Where", properties: { name: { type: "string" } }, required: ["name"] },
        unit: { type: "string", enum: ["c", "f"], format: "enum" },
        missing: { type: "object" },
        remote: { type: "object" },
        both: {
          type: "object",
          properties: { name: { type: "string" }, country: { type: "string" } },
          required: ["name", "country"],
        },
      },
    });
    const tree = {
      $defs: { Node: { type: "object", properties: { value: { type: "string" }, child: { $ref: "#/$defs/Node" } } } },
      $ref: "#/$defs/Node",
    };
    const out = JSON.stringify(toGeminiSchema(tree));
    expect(out).not.toContain("$ref");
    expect(out.match(/"child"/g)?.length).toBeGreaterThan(3);
  });

  test("objects without properties keep their type; empty properties are dropped; tuples use the first item", () => {
    expect(
      toGeminiSchema({ type: "object", properties: { opts: { type: "object", additionalProperties: true } } }),
    ).toEqual({
      type: "object",
      properties: { opts: { type: "object" } },
    });
    expect(toGeminiSchema({ type: "object", properties: {}, required: ["x"] })).toEqual({ type: "object" });
    expect(toGeminiSchema({ type: "array", items: [{ type: "number" }, { type: "string" }] })).toEqual({
      type: "array",
      items: { type: "number" },
    });
    expect(toGeminiSchema({ properties: { a: { type: "boolean" } } })).toEqual({
      type: "object",
      properties: { a: { type: "boolean" } },
    });
  });
});

describe("canonical -> generateContent body", () => {
  test("system instruction, roles, merged turns, function calls and responses with names and ids", async () => {
    const body = await toGeminiBody(
      req({
        system: [
          { type: "text", text: "Be brief." },
          { type: "text", text: "" },
          { type: "text", text: "Use metric." },
        ],
        messages: [
          { role: "user", content: [{ type: "text", text: "Weather in Lisbon and Porto?" }] },
          { role: "user", content: [{ type: "text", text: "And the time?" }] },
          {
            role: "assistant",
            content: [
              { type: "thinking", text: "Two lookups.", signature: "sig" },
              { type: "text", text: "Checking." },
              { type: "tool_call", id: "fc_1", name: "get_weather", arguments: '{"city":"Lisbon"}' },
              { type: "tool_call", id: "call_abc123", name: "get_weather", arguments: '{"city":"Porto"}' },
              { type: "tool_call", id: "toolu_01X", name: "get_time", arguments: "" },
            ],
          },
          {
            role: "user",
            content: [
              { type: "text", text: "Here you go." },
              { type: "tool_result", toolCallId: "fc_1", content: [{ type: "text", text: '{"temp_c":21}' }] },
              {
                type: "tool_result",
                toolCallId: "call_abc123",
                name: "get_weather",
                content: [{ type: "text", text: "17 C" }],
              },
              {
                type: "tool_result",
                toolCallId: "toolu_01X",
                content: [{ type: "text", text: "no clock" }],
                isError: true,
              },
              { type: "tool_result", toolCallId: "unknown_call", content: [{ type: "text", text: "[1,2]" }] },
            ],
          },
        ],
      }),
      rctx(),
    );
    expect(body.systemInstruction).toEqual({ parts: [{ text: "Be brief." }, { text: "Use metric." }] });
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "Weather in Lisbon and Porto?" }, { text: "And the time?" }] },
      {
        role: "model",
        parts: [
          { text: "Checking." },
          { functionCall: { id: "fc_1", name: "get_weather", args: { city: "Lisbon" } } },
          { functionCall: { name: "get_weather", args: { city: "Porto" } } },
          { functionCall: { name: "get_time", args: {} } },
        ],
      },
      {
        role: "user",
        parts: [
          { functionResponse: { id: "fc_1", name: "get_weather", response: { temp_c: 21 } } },
          { functionResponse: { name: "get_weather", response: { result: "17 C" } } },
          { functionResponse: { name: "get_time", response: { error: "no clock" } } },
          { functionResponse: { id: "unknown_call", name: "unknown_call", response: { result: "[1,2]" } } },
          { text: "Here you go." },
        ],
      },
    ]);
    expect(body.tools).toBeUndefined();
    expect(body.generationConfig).toBeUndefined();
  });

  test("images: base64 inline, URLs downloaded once and inlined (also inside tool results), gs:// as fileData", async () => {
    const fetched: string[] = [];
    const fetchImage: ImageFetcher = async (url, signal) => {
      expect(signal).toBeInstanceOf(AbortSignal);
      fetched.push(url);
      return { mediaType: "image/png", data: `DATA(${url})` };
    };
    const body = await toGeminiBody(
      req({
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "Compare" },
              { type: "image", source: { kind: "base64", mediaType: "image/jpeg", data: "/9j/4AAQ" } },
              { type: "image", source: { kind: "url", url: "http://img.test/a.png" } },
              { type: "image", source: { kind: "url", url: "http://img.test/a.png" } },
              { type: "image", source: { kind: "url", url: "gs://bucket/photo.webp" } },
            ],
          },
          { role: "assistant", content: [{ type: "tool_call", id: "fc_9", name: "snap", arguments: "{}" }] },
          {
            role: "user",
            content: [
              {
                type: "tool_result",
                toolCallId: "fc_9",
                content: [
                  { type: "text", text: "here" },
                  { type: "image", source: { kind: "url", url: "http://img.test/b.png" } },
                ],
              },
            ],
          },
        ],
      }),
      rctx(fetchImage),
    );
    expect(fetched.sort()).toEqual(["http://img.test/a.png", "http://img.test/b.png"]);
    expect(body.contents[0]?.parts).toEqual([
      { text: "Compare" },
      { inlineData: { mimeType: "image/jpeg", data: "/9j/4AAQ" } },
      { inlineData: { mimeType: "image/png", data: "DATA(http://img.test/a.png)" } },
      { inlineData: { mimeType: "image/png", data: "DATA(http://img.test/a.png)" } },
      { fileData: { mimeType: "image/webp", fileUri: "gs://bucket/photo.webp" } },
    ]);
    expect(body.contents[2]?.parts).toEqual([
      { functionResponse: { id: "fc_9", name: "snap", response: { result: "here" } } },
      { inlineData: { mimeType: "image/png", data: "DATA(http://img.test/b.png)" } },
    ]);
  });

  test("a failed image download fails the request before any upstream call", async () => {
    const fetchImage: ImageFetcher = async () => {
      throw new GatewayError(400, "Image URLs may not point at private or local network addresses");
    };
    const r = req({
      messages: [{ role: "user", content: [{ type: "image", source: { kind: "url", url: "http://10.0.0.1/x.png" } }] }],
    });
    await expect(toGeminiBody(r, rctx(fetchImage))).rejects.toThrow("private");
  });

  test("tools as one functionDeclarations block with sanitised schemas; parameterless tools declare none", async () => {
    const body = await toGeminiBody(
      req({
        tools: [
          {
            name: "get_weather",
            description: "Current weather",
            strict: true,
            parameters: {
              type: "object",
              additionalProperties: false,
              properties: { city: { type: "string" }, units: { type: ["string", "null"], enum: ["c", "f", null] } },
              required: ["city"],
            },
          },
          { name: "now", parameters: { type: "object", properties: {} } },
        ],
      }),
      rctx(),
    );
    expect(body.tools).toEqual([
      {
        functionDeclarations: [
          {
            name: "get_weather",
            description: "Current weather",
            parameters: {
              type: "object",
              properties: {
                city: { type: "string" },
                units: { type: "string", nullable: true, enum: ["c", "f"], format: "enum" },
              },
              required: ["city"],
            },
          },
          { name: "now" },
        ],
      },
    ]);
  });

  test("tool_choice: auto, none, required, one tool", async () => {
    const tools = [{ name: "f", parameters: { type: "object", properties: { a: { type: "string" } } } }];
    const cases: [CanonicalRequest["toolChoice"], unknown][] = [
      [{ type: "auto" }, { functionCallingConfig: { mode: "AUTO" } }],
      [{ type: "none" }, { functionCallingConfig: { mode: "NONE" } }],
      [{ type: "required" }, { functionCallingConfig: { mode: "ANY" } }],
      [{ type: "tool", name: "f" }, { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["f"] } }],
    ];
    for (const [choice, want] of cases) {
      const body = await toGeminiBody(req({ tools, toolChoice: choice }), rctx());
      expect(body.toolConfig).toEqual(want as typeof body.toolConfig);
    }
  });

  test("generationConfig: sampling, caps, stops, candidates, seed, penalties, JSON output, thinking", async () => {
    const body = await toGeminiBody(
      req({
        maxTokens: 512,
        temperature: 1.4,
        topP: 0.9,
        topK: 40,
        stop: ["END", "STOP"],
        n: 2,
        seed: 7,
        presencePenalty: 0.5,
        frequencyPenalty: -0.5,
        user: "u-1",
        parallelToolCalls: false,
        responseFormat: {
          type: "json_schema",
          name: "weather",
          strict: true,
          schema: {
            type: "object",
            additionalProperties: false,
            properties: { temp: { type: ["number", "null"] } },
            required: ["temp"],
          },
        },
        reasoningEffort: "low",
      }),
      rctx(),
    );
    expect(body.generationConfig).toEqual({
      maxOutputTokens: 512,
      temperature: 1.4,
      topP: 0.9,
      topK: 40,
      stopSequences: ["END", "STOP"],
      candidateCount: 2,
      seed: 7,
      presencePenalty: 0.5,
      frequencyPenalty: -0.5,
      responseMimeType: "application/json",
      responseSchema: {
        type: "object",
        properties: { temp: { type: "number", nullable: true } },
        required: ["temp"],
      },
      thinkingConfig: { thinkingBudget: 1024 },
    });
    expect(JSON.stringify(body)).not.toContain("u-1");

    const json = await toGeminiBody(req({ responseFormat: { type: "json_object" }, n: 1 }), rctx());
    expect(json.generationConfig).toEqual({ responseMimeType: "application/json" });
    const text = await toGeminiBody(req({ responseFormat: { type: "text" } }), rctx());
    expect(text.generationConfig).toBeUndefined();

    const efforts = { minimal: 0, low: 1024, medium: 4096, high: 16384 } as const;
    for (const [effort, budget] of Object.entries(efforts)) {
      const b = await toGeminiBody(req({ reasoningEffort: effort as keyof typeof efforts }), rctx());
      expect(b.generationConfig?.thinkingConfig).toEqual({ thinkingBudget: budget });
    }
    const explicit = await toGeminiBody(req({ thinkingBudget: 2000, reasoningEffort: "high" }), rctx());
    expect(explicit.generationConfig?.thinkingConfig).toEqual({ thinkingBudget: 2000, includeThoughts: true });
  });

  test("more than five stop sequences is a 400 naming stop", async () => {
    const err = await toGeminiBody(req({ stop: ["a", "b", "c", "d", "e", "f"] }), rctx()).catch((e) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.status).toBe(400);
    expect(err.param).toBe("stop");
  });
});

describe("generateContent response -> canonical", () => {
  test("text, usage with cache and thoughts, response id and model version", () => {
    const res = fromGeminiResponse(fixtureJson("generate-content.json"), "gemini", "gemini-2.5-flash-deployed");
    expect(res).toMatchObject({
      id: "k3VhaO7yFIOq1MkP3-WVkA4",
      model: "gemini-2.5-flash",
      choices: [
        { index: 0, content: [{ type: "text", text: "Clear skies, 21 °C in Lisbon." }], finishReason: "end_turn" },
      ],
      usage: usage({ inputTokens: 1854, cacheReadTokens: 1536, outputTokens: 152, reasoningTokens: 140 }),
    });
    expect(res.created).toBeGreaterThan(1_700_000_000);
  });

  test("parallel function calls: ids kept or minted, arguments serialised, finish tool_calls", () => {
    const res = fromGeminiResponse(fixtureJson("generate-content-tools.json"), "gemini", "m");
    const [text, lisbon, porto] = res.choices[0]?.content ?? [];
    expect(text).toEqual({ type: "text", text: "Checking both cities." });
    expect(lisbon).toEqual({
      type: "tool_call",
      id: "fc_lisbon_01",
      name: "get_weather",
      arguments: '{"city":"Lisbon"}',
    });
    expect(porto).toMatchObject({
      type: "tool_call",
      name: "get_weather",
      arguments: '{"city":"Porto","units":"celsius"}',
    });
    expect((porto as { id: string }).id).toMatch(/^call_[0-9a-f-]{36}$/);
    expect(res.choices[0]?.finishReason).toBe("tool_calls");
    expect(res.usage).toEqual(usage({ inputTokens: 96, outputTokens: 102, reasoningTokens: 64 }));
  });

  test("several candidates become choices by index", () => {
    const res = fromGeminiResponse(fixtureJson("generate-content-candidates.json"), "gemini", "m");
    expect(res.choices.map((c) => [c.index, c.finishReason, c.content])).toEqual([
      [0, "end_turn", [{ type: "text", text: "Lisbon: sunny." }]],
      [1, "max_tokens", [{ type: "text", text: "Sunny in Lisbon, around 21 °C, light" }]],
    ]);
  });

  test("a blocked prompt is one empty choice ending in content_filter", () => {
    const res = fromGeminiResponse(fixtureJson("prompt-blocked.json"), "gemini", "m");
    expect(res.choices).toHaveLength(1);
    expect(res.choices[0]).toMatchObject({ index: 0, content: [], finishReason: "content_filter" });
    expect(res.choices[0]?.refusal).toContain("SAFETY");
    expect(res.usage.inputTokens).toBe(22);
  });

  test("thought parts become thinking, signatures kept; missing ids and versions are filled in", () => {
    const res = fromGeminiResponse(
      {
        candidates: [
          {
            content: {
              role: "model",
              parts: [
                { text: "Let me think", thought: true },
                { text: " more.", thought: true },
                { text: "Answer", thoughtSignature: "sig1" },
                { text: " here." },
                { executableCode: { language: "PYTHON", code: "print(1)" } },
              ],
            },
            finishReason: "SOMETHING_NEW",
          },
        ],
      },
      "gemini",
      "deployed-model",
    );
    expect(res.model).toBe("deployed-model");
    expect(res.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.choices[0]?.content).toEqual([
      { type: "thinking", text: "Let me think more." },
      { type: "text", text: "Answer here." },
    ]);
    expect(res.choices[0]?.finishReason).toBe("end_turn");
  });

  test("an error body is an UpstreamError with Google's code; no candidates and no feedback is a protocol error", () => {
    const e = (() => {
      try {
        fromGeminiResponse(
          { error: { code: 503, message: "The model is overloaded.", status: "UNAVAILABLE" } } as never,
          "gemini",
          "m",
        );
      } catch (err) {
        return err;
      }
    })() as UpstreamError;
    expect(e).toBeInstanceOf(UpstreamError);
    expect([e.kind, e.status, e.upstreamType]).toEqual(["http", 503, "UNAVAILABLE"]);
    expect(() => fromGeminiResponse({ candidates: [] }, "gemini", "m")).toThrow(UpstreamError);
  });
});

describe("streamGenerateContent (SSE) -> canonical events", () => {
  const textEvents: StreamEvent[] = [
    {
      type: "start",
      id: "k3VhaO7yFIOq1MkP3-WVkA4",
      model: "gemini-2.5-flash",
      created: expect.any(Number) as unknown as number,
    },
    { type: "text_delta", choice: 0, text: "Clear skies" },
    { type: "usage", usage: usage({ inputTokens: 1854 }) },
    { type: "text_delta", choice: 0, text: ", 21 °C" },
    { type: "usage", usage: usage({ inputTokens: 1854 }) },
    { type: "text_delta", choice: 0, text: " in Lisbon." },
    { type: "finish", choice: 0, reason: "end_turn" },
    {
      type: "usage",
      usage: usage({ inputTokens: 1854, cacheReadTokens: 1536, outputTokens: 152, reasoningTokens: 140 }),
    },
  ];

  test("text stream, CRLF frames, at every awkward byte boundary", async () => {
    const text = fixture("stream.sse");
    expect(text).toContain("\r\n\r\n");
    for (const cut of [1, 2, 3, 5, 7, 13, 64, 100_000]) {
      const events = await collect(geminiStreamEvents(chunkedStream(text, cut), "gemini", "m"));
      expect(events).toEqual(textEvents);
    }
  });

  test("function calls: one start and one full delta each, indexes per candidate, finish tool_calls", async () => {
    for (const cut of [1, 9, 4096]) {
      const events = await collect(geminiStreamEvents(chunkedStream(fixture("stream-tools.sse"), cut), "gemini", "m"));
      const kinds = events.filter((e) => e.type !== "usage");
      expect(kinds[0]).toMatchObject({ type: "start", id: "b2ZhaJ7cLY2k1MkPn5WZgAk" });
      expect(kinds.slice(1)).toEqual([
        { type: "text_delta", choice: 0, text: "Checking both cities." },
        { type: "tool_call_start", choice: 0, index: 0, id: "fc_lisbon_01", name: "get_weather" },
        { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city":"Lisbon"}' },
        {
          type: "tool_call_start",
          choice: 0,
          index: 1,
          id: expect.stringMatching(/^call_/) as unknown as string,
          name: "get_weather",
        },
        { type: "tool_call_delta", choice: 0, index: 1, arguments: '{"city":"Porto","units":"celsius"}' },
        { type: "finish", choice: 0, reason: "tool_calls" },
      ]);
      expect(events.at(-1)).toEqual({
        type: "usage",
        usage: usage({ inputTokens: 96, outputTokens: 102, reasoningTokens: 64 }),
      });
    }
  });

  test("several candidates, thoughts, a repeated finish reason and LF frames", async () => {
    const frames = [
      { candidates: [{ content: { parts: [{ text: "hmm", thought: true }] }, index: 0 }], responseId: "r1" },
      {
        candidates: [
          { content: { parts: [{ text: "A" }] }, index: 0 },
          { content: { parts: [{ functionCall: { name: "f", args: {} } }] }, index: 1 },
        ],
      },
      {
        candidates: [
          { content: { parts: [{ text: "B" }] }, index: 0, finishReason: "MAX_TOKENS" },
          { content: { parts: [] }, index: 1, finishReason: "STOP" },
        ],
      },
      { candidates: [{ content: { parts: [] }, index: 0, finishReason: "MAX_TOKENS" }] },
    ];
    const text = frames.map((f) => `data: ${JSON.stringify(f)}\n\n`).join("");
    const events = await collect(geminiStreamEvents(chunkedStream(text, 11), "gemini", "dep-model"));
    expect(events).toEqual([
      { type: "start", id: "r1", model: "dep-model", created: expect.any(Number) as unknown as number },
      { type: "thinking_delta", choice: 0, text: "hmm" },
      { type: "text_delta", choice: 0, text: "A" },
      {
        type: "tool_call_start",
        choice: 1,
        index: 0,
        id: expect.stringMatching(/^call_/) as unknown as string,
        name: "f",
      },
      { type: "tool_call_delta", choice: 1, index: 0, arguments: "{}" },
      { type: "text_delta", choice: 0, text: "B" },
      { type: "finish", choice: 0, reason: "max_tokens" },
      { type: "finish", choice: 1, reason: "tool_calls" },
    ]);
  });

  test("a blocked prompt ends choice 0 with content_filter; a stream without finish still finishes", async () => {
    const blocked = `data: ${JSON.stringify(fixtureJson("prompt-blocked.json"))}\r\n\r\n`;
    const events = await collect(geminiStreamEvents(chunkedStream(blocked, 7), "gemini", "m"));
    expect(events.map((e) => e.type)).toEqual(["start", "finish", "usage"]);
    expect(events[1]).toEqual({ type: "finish", choice: 0, reason: "content_filter" });

    const cut = `data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text: "x" }] } }] })}\n\n`;
    const ended = await collect(geminiStreamEvents(chunkedStream(cut, 3), "gemini", "m"));
    expect(ended.at(-1)).toEqual({ type: "finish", choice: 0, reason: "end_turn" });
  });

  test("an error frame throws with Google's code; malformed and empty streams are protocol errors", async () => {
    const text = [
      `data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text: "par" }] } }] })}\n\n`,
      `data: ${JSON.stringify({ error: { code: 429, message: "Resource has been exhausted", status: "RESOURCE_EXHAUSTED" } })}\n\n`,
    ].join("");
    const seen: StreamEvent[] = [];
    const err = await (async () => {
      for await (const e of geminiStreamEvents(chunkedStream(text, 5), "gemini", "m")) seen.push(e);
    })().catch((e) => e);
    expect(seen.map((e) => e.type)).toEqual(["start", "text_delta"]);
    expect(err).toBeInstanceOf(UpstreamError);
    expect([err.kind, err.status, err.upstreamType]).toEqual(["http", 429, "RESOURCE_EXHAUSTED"]);
    expect(err.message).toContain("Resource has been exhausted");

    const bad = await collect(geminiStreamEvents(chunkedStream("data: {not json\n\n", 4), "gemini", "m")).catch(
      (e) => e,
    );
    expect(bad).toBeInstanceOf(UpstreamError);
    expect(bad.kind).toBe("protocol");
    const empty = await collect(geminiStreamEvents(chunkedStream(": keepalive\n\n", 4), "gemini", "m")).catch((e) => e);
    expect(empty).toBeInstanceOf(UpstreamError);
    expect(empty.kind).toBe("protocol");
  });
});

describe("gemini adapter against a mock upstream", () => {
  const KEY = "AIzaSyD-provider-gemini-key-0123456789";
  const mock = startMockUpstream();
  afterAll(() => mock.close());
  beforeEach(() => mock.reset());
  const cfg = (over: Partial<ProviderConfig> = {}): ProviderConfig => ({
    type: "gemini",
    api_base: `${mock.url}/v1beta/`,
    api_key: KEY,
    headers: { "x-goog-user-project": "proj-1", "x-team": "cfg" },
    ...over,
  });

  test("unary: URL, key in the header only, configured and deployment headers, body", async () => {
    mock.enqueue(
      () => new Response(fixture("generate-content.json"), { headers: { "content-type": "application/json" } }),
    );
    const a = createGeminiAdapter("gemini", cfg());
    expect(a.type).toBe("gemini");
    const res = await a.chat(req({ maxTokens: 10 }), deployment({ headers: { "x-team": "dep" } }), ctx());
    expect(res.choices[0]?.content).toEqual([{ type: "text", text: "Clear skies, 21 °C in Lisbon." }]);
    const up = mock.requests[0];
    expect(up?.method).toBe("POST");
    expect(up?.path).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
    expect([...(up?.query.keys() ?? [])]).toEqual([]);
    expect(up?.headers["x-goog-api-key"]).toBe(KEY);
    expect(up?.headers["x-goog-user-project"]).toBe("proj-1");
    expect(up?.headers["x-team"]).toBe("dep");
    expect(up?.headers["content-type"]).toBe("application/json");
    expect(up?.json).toEqual({
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      generationConfig: { maxOutputTokens: 10 },
    });
  });

  test("streaming uses alt=sse; deployment base and key override the provider's; tuned model paths kept", async () => {
    mock.enqueue(() => streamResponse(sseFrames(fixture("stream.sse"))));
    const a = createGeminiAdapter("gemini", cfg());
    const events = await collect(
      await a.chatStream(
        req({ stream: true }),
        deployment({ apiBase: `${mock.url}/alt`, apiKey: "AIza-deployment-key-99" }),
        ctx(),
      ),
    );
    expect(
      events
        .filter((e) => e.type === "text_delta")
        .map((e) => (e as { text: string }).text)
        .join(""),
    ).toBe("Clear skies, 21 °C in Lisbon.");
    expect(mock.requests[0]?.path).toBe("/alt/models/gemini-2.5-flash:streamGenerateContent");
    expect(mock.requests[0]?.query.get("alt")).toBe("sse");
    expect(mock.requests[0]?.query.get("key")).toBeNull();
    expect(mock.requests[0]?.headers["x-goog-api-key"]).toBe("AIza-deployment-key-99");

    mock.enqueue(() => new Response(fixture("generate-content.json")));
    await a.chat(req(), deployment({ upstreamModel: "tunedModels/my-tune-7" }), ctx());
    expect(mock.requests[1]?.path).toBe("/v1beta/tunedModels/my-tune-7:generateContent");
  });

  test("the default base is Google's", async () => {
    const calls: string[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = (async (url: string | URL | Request) => {
      calls.push(String(url));
      return new Response(fixture("generate-content.json"));
    }) as typeof fetch;
    try {
      await createGeminiAdapter("g", { type: "gemini", api_key: KEY }).chat(req(), deployment(), ctx());
    } finally {
      globalThis.fetch = realFetch;
    }
    expect(calls).toEqual(["https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"]);
  });

  test("errors: 429 with RetryInfo, 400 passed on, an invalid key is a 401 without the key, 500", async () => {
    const a = createGeminiAdapter("gemini", cfg());
    mock.enqueue(() => new Response(fixture("error-429.json"), { status: 429 }));
    const rl = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect(rl).toBeInstanceOf(UpstreamError);
    expect([rl.status, rl.retryAfterMs, rl.upstreamType, rl.retryable]).toEqual([
      429,
      17_000,
      "RESOURCE_EXHAUSTED",
      true,
    ]);

    mock.enqueue(() => new Response(fixture("error-400.json"), { status: 400 }));
    const bad = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect([bad.status, bad.upstreamType, bad.retryable]).toEqual([400, "INVALID_ARGUMENT", false]);
    expect(bad.message).toContain("contents is not specified");

    mock.enqueue(() =>
      googleError(400, `API key not valid: ${KEY}`, "INVALID_ARGUMENT", [
        { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID", domain: "googleapis.com" },
      ]),
    );
    const auth = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect(auth.status).toBe(401);
    expect(auth.message).not.toContain(KEY);

    mock.enqueue(() => googleError(500, "Internal error encountered.", "INTERNAL"));
    const down = await a.chatStream(req({ stream: true }), deployment(), ctx()).catch((e) => e);
    expect([down.status, down.retryable]).toEqual([500, true]);

    mock.enqueue(() => new Response("<html>oops</html>", { status: 200 }));
    const junk = await a.chat(req(), deployment(), ctx()).catch((e) => e);
    expect([junk.kind, junk.status]).toEqual(["protocol", 502]);
  });
});
