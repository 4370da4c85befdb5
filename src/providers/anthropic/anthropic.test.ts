/** The Anthropic Messages dialect (request, response, stream) and the `anthropic` adapter's HTTP call. */
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { anthropicError, anthropicSseFrames } from "../../../test/mocks/anthropic";
import { startMockUpstream, streamResponse } from "../../../test/mocks/upstream";
import { GatewayError } from "../../http/errors";
import { createLogger } from "../../log";
import {
  type AnthropicMessage,
  anthropicErrorStatus,
  stopReasonFromAnthropic,
  stopReasonToAnthropic,
  usageFromAnthropic,
  usageToAnthropic,
} from "../../protocols/anthropic/wire";
import type { CanonicalRequest, FinishReason, Message, StreamEvent } from "../../protocols/canonical";
import { anthropicStreamEvents, fromAnthropicMessage, toAnthropicBody } from "../dialects/anthropic";
import { UpstreamError } from "../errors";
import type { CallContext, Deployment } from "../types";
import { createAnthropicAdapter, messagesUrl } from "./adapter";

const FIXTURES = join(import.meta.dir, "fixtures");
const fixture = (name: string) => readFileSync(join(FIXTURES, name), "utf8");
const message = (name: string) => JSON.parse(fixture(name)) as AnthropicMessage;

const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });

function req(over: Partial<CanonicalRequest> = {}): CanonicalRequest {
  return { model: "anthropic/claude-sonnet-4-5", system: [], messages: [user("hi")], stream: false, ...over };
}

const body = (over: Partial<CanonicalRequest> = {}, defaultMaxTokens?: number) =>
  toAnthropicBody(req(over), "claude-sonnet-4-5", defaultMaxTokens !== undefined ? { defaultMaxTokens } : {});

const WEATHER = {
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

describe("request: canonical -> Messages body", () => {
  test("model, max_tokens and messages; no model field when the URL names the model (Vertex)", () => {
    expect(body()).toEqual({
      model: "claude-sonnet-4-5",
      max_tokens: 4096,
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    });
    const vertex = toAnthropicBody(req(), undefined, {});
    expect("model" in vertex).toBe(false);
    expect(vertex.max_tokens).toBe(4096);
    expect(body({ stream: true }).stream).toBe(true);
  });

  test("max_tokens: the client's cap, else the catalog's, else 4096", () => {
    expect(body({ maxTokens: 300 }, 64000).max_tokens).toBe(300);
    expect(body({}, 64000).max_tokens).toBe(64000);
    expect(body({}).max_tokens).toBe(4096);
  });

  test("system parts become text blocks, keeping cache_control; empty ones are dropped; none -> no field", () => {
    const b = body({
      system: [
        { type: "text", text: "You are a travel assistant.", cacheControl: { type: "ephemeral" } },
        { type: "text", text: "" },
        { type: "text", text: "Be brief.", cacheControl: { type: "ephemeral", ttl: "1h" } },
      ],
    });
    expect(b.system).toEqual([
      { type: "text", text: "You are a travel assistant.", cache_control: { type: "ephemeral" } },
      { type: "text", text: "Be brief.", cache_control: { type: "ephemeral", ttl: "1h" } },
    ]);
    expect("system" in body({ system: [{ type: "text", text: "" }] })).toBe(false);
  });

  test("same-role turns merge, empty text is dropped, and a conversation opening with the assistant gets a user turn", () => {
    const b = body({
      messages: [
        { role: "assistant", content: [{ type: "text", text: "Earlier I said hello." }] },
        { role: "assistant", content: [{ type: "text", text: "" }] },
        user("first"),
        { role: "user", content: [{ type: "text", text: "" }] },
        user("second"),
        { role: "assistant", content: [{ type: "text", text: "" }] },
      ],
    });
    expect(b.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "(continued)" }] },
      { role: "assistant", content: [{ type: "text", text: "Earlier I said hello." }] },
      {
        role: "user",
        content: [
          { type: "text", text: "first" },
          { type: "text", text: "second" },
        ],
      },
    ]);
  });

  test("tool calls become tool_use with parsed input; tool results open the next user turn, with is_error and images", () => {
    const b = body({
      messages: [
        user("Weather in Lisbon and Porto?"),
        {
          role: "assistant",
          content: [
            { type: "text", text: "Checking." },
            { type: "tool_call", id: "toolu_A", name: "get_weather", arguments: '{"city":"Lisbon"}' },
            { type: "tool_call", id: "toolu_B", name: "get_weather", arguments: "" },
            { type: "tool_call", id: "toolu_C", name: "get_weather", arguments: "{not json" },
          ],
        },
        {
          role: "user",
          content: [
            { type: "text", text: "Here you go:" },
            { type: "tool_result", toolCallId: "toolu_A", content: [{ type: "text", text: '{"temp_c":21}' }] },
          ],
        },
        {
          role: "user",
          content: [
            {
              type: "tool_result",
              toolCallId: "toolu_B",
              isError: true,
              content: [{ type: "text", text: "city is required" }],
              cacheControl: { type: "ephemeral" },
            },
            {
              type: "tool_result",
              toolCallId: "toolu_C",
              content: [
                { type: "text", text: "" },
                { type: "image", source: { kind: "url", url: "https://example.com/map.png" } },
              ],
            },
          ],
        },
      ],
    });
    expect(b.messages[1]).toEqual({
      role: "assistant",
      content: [
        { type: "text", text: "Checking." },
        { type: "tool_use", id: "toolu_A", name: "get_weather", input: { city: "Lisbon" } },
        { type: "tool_use", id: "toolu_B", name: "get_weather", input: {} },
        { type: "tool_use", id: "toolu_C", name: "get_weather", input: { _raw: "{not json" } },
      ],
    });
    expect(b.messages[2]).toEqual({
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "toolu_A", content: [{ type: "text", text: '{"temp_c":21}' }] },
        {
          type: "tool_result",
          tool_use_id: "toolu_B",
          content: [{ type: "text", text: "city is required" }],
          is_error: true,
          cache_control: { type: "ephemeral" },
        },
        {
          type: "tool_result",
          tool_use_id: "toolu_C",
          content: [{ type: "image", source: { type: "url", url: "https://example.com/map.png" } }],
        },
        { type: "text", text: "Here you go:" },
      ],
    });
    expect(b.messages).toHaveLength(3);
  });

  test("signed thinking and redacted thinking are replayed; unsigned reasoning is dropped", () => {
    const b = body({
      messages: [
        user("27 * 453?"),
        {
          role: "assistant",
          content: [
            { type: "thinking", text: "Multiply.", signature: "sig-1" },
            { type: "thinking", text: "", redacted: "opaque==" },
            { type: "thinking", text: "reasoning from another vendor" },
            { type: "tool_call", id: "toolu_1", name: "calc", arguments: '{"a":27,"b":453}' },
          ],
        },
      ],
    });
    expect(b.messages[1]?.content).toEqual([
      { type: "thinking", thinking: "Multiply.", signature: "sig-1" },
      { type: "redacted_thinking", data: "opaque==" },
      { type: "tool_use", id: "toolu_1", name: "calc", input: { a: 27, b: 453 } },
    ]);
  });

  test("images: base64 and URL sources, cache_control kept", () => {
    const b = body({
      messages: [
        {
          role: "user",
          content: [
            { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" }, detail: "high" },
            {
              type: "image",
              source: { kind: "url", url: "https://example.com/cat.jpg" },
              cacheControl: { type: "ephemeral" },
            },
            { type: "text", text: "What are these?", cacheControl: { type: "ephemeral" } },
          ],
        },
      ],
    });
    expect(b.messages[0]?.content).toEqual([
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
      {
        type: "image",
        source: { type: "url", url: "https://example.com/cat.jpg" },
        cache_control: { type: "ephemeral" },
      },
      { type: "text", text: "What are these?", cache_control: { type: "ephemeral" } },
    ]);
  });

  test("tool definitions: input_schema is an object schema, strict is dropped, cache_control kept", () => {
    const b = body({
      tools: [
        { ...WEATHER, strict: true, cacheControl: { type: "ephemeral" } },
        { name: "now", parameters: {} },
        { name: "lookup", parameters: { properties: { q: { type: "string" } } } },
      ],
    });
    expect(b.tools).toEqual([
      {
        name: "get_weather",
        description: "Current weather for a city",
        input_schema: WEATHER.parameters,
        cache_control: { type: "ephemeral" },
      },
      { name: "now", input_schema: { type: "object", properties: {} } },
      { name: "lookup", input_schema: { type: "object", properties: { q: { type: "string" } } } },
    ]);
    expect(b.tool_choice).toBeUndefined();
  });

  test("tool_choice mapping and the parallel flag", () => {
    const tools = [WEATHER];
    expect(body({ tools, toolChoice: { type: "auto" } }).tool_choice).toEqual({ type: "auto" });
    expect(body({ tools, toolChoice: { type: "required" } }).tool_choice).toEqual({ type: "any" });
    expect(body({ tools, toolChoice: { type: "none" } }).tool_choice).toEqual({ type: "none" });
    expect(body({ tools, toolChoice: { type: "tool", name: "get_weather" } }).tool_choice).toEqual({
      type: "tool",
      name: "get_weather",
    });
    expect(body({ tools, parallelToolCalls: false }).tool_choice).toEqual({
      type: "auto",
      disable_parallel_tool_use: true,
    });
    expect(body({ tools, parallelToolCalls: false, toolChoice: { type: "required" } }).tool_choice).toEqual({
      type: "any",
      disable_parallel_tool_use: true,
    });
    expect(body({ tools, parallelToolCalls: false, toolChoice: { type: "none" } }).tool_choice).toEqual({
      type: "none",
    });
    expect(body({ tools, parallelToolCalls: true }).tool_choice).toBeUndefined();
    // Without tools there is nothing to choose.
    expect(body({ toolChoice: { type: "required" }, parallelToolCalls: false }).tool_choice).toBeUndefined();
  });

  test("sampling: temperature clamped to 1, top_p dropped next to temperature, top_k, stop sequences, user", () => {
    expect(body({ temperature: 1.7 }).temperature).toBe(1);
    expect(body({ temperature: 0.3 }).temperature).toBe(0.3);
    expect(body({ temperature: 0 }).temperature).toBe(0);
    const b = body({ topP: 0.9, topK: 40, stop: ["\n\nHuman:", "###"], user: "user-42", seed: 7 });
    expect(b).toMatchObject({
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ["\n\nHuman:", "###"],
      metadata: { user_id: "user-42" },
    });
    expect("seed" in b).toBe(false);
    const both = body({ temperature: 0.5, topP: 0.9 });
    expect(both.temperature).toBe(0.5);
    expect("top_p" in both).toBe(false);
    expect("stop_sequences" in body({ stop: [] })).toBe(false);
  });

  test("thinking: effort or budget -> budget_tokens, max_tokens above it, no temperature or top_k, choice limited", () => {
    const efforts: Array<[CanonicalRequest["reasoningEffort"], number]> = [
      ["minimal", 1024],
      ["low", 1024],
      ["medium", 4096],
      ["high", 16384],
    ];
    for (const [effort, budget] of efforts) {
      const b = body({ reasoningEffort: effort }, 64000);
      expect(b.thinking).toEqual({ type: "enabled", budget_tokens: budget });
      expect(b.max_tokens).toBe(64000);
    }
    // The 4096 fallback is at or below a 16k budget: the budget is added on top.
    const high = body({ reasoningEffort: "high" });
    expect(high.max_tokens).toBe(16384 + 4096);
    expect(high.max_tokens).toBeGreaterThan(16384);
    const explicit = body({
      thinkingBudget: 2048,
      reasoningEffort: "high",
      maxTokens: 1000,
      temperature: 0.7,
      topK: 5,
      topP: 0.5,
      tools: [WEATHER],
      toolChoice: { type: "required" },
    });
    expect(explicit.thinking).toEqual({ type: "enabled", budget_tokens: 2048 });
    expect(explicit.max_tokens).toBe(3048);
    expect("temperature" in explicit).toBe(false);
    expect("top_k" in explicit).toBe(false);
    expect("top_p" in explicit).toBe(false);
    expect(explicit.tool_choice).toEqual({ type: "auto" });
    expect(body({ thinkingBudget: 2048, topP: 0.97 }).top_p).toBe(0.97);
    expect(body({ thinkingBudget: 2048, tools: [WEATHER], toolChoice: { type: "none" } }).tool_choice).toEqual({
      type: "none",
    });
    expect(body({ maxTokens: 500 }).thinking).toBeUndefined();
  });

  test("response_format: a forced json_output tool carrying the schema", () => {
    const schema = { type: "object", properties: { city: { type: "string" }, temp_c: { type: "number" } } };
    const b = body({ responseFormat: { type: "json_schema", name: "weather", schema, strict: true } });
    expect(b.tools).toEqual([
      {
        name: "json_output",
        description: "Respond with the final answer as JSON by calling this tool.",
        input_schema: schema,
      },
    ]);
    expect(b.tool_choice).toEqual({ type: "tool", name: "json_output" });
    const obj = body({ responseFormat: { type: "json_object" } });
    expect(obj.tools?.[0]).toMatchObject({ name: "json_output", input_schema: { type: "object", properties: {} } });
    expect(obj.tool_choice).toEqual({ type: "tool", name: "json_output" });
    expect(body({ responseFormat: { type: "text" } }).tools).toBeUndefined();
    // Next to the client's own tools it is offered, not forced.
    const mixed = body({ tools: [WEATHER], responseFormat: { type: "json_schema", name: "w", schema } });
    expect(mixed.tools?.map((t) => t.name)).toEqual(["get_weather", "json_output"]);
    expect(mixed.tool_choice).toBeUndefined();
  });

  test("n > 1 is a 400 on param n before anything is sent", () => {
    let err: unknown;
    try {
      body({ n: 2 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ status: 400, param: "n", code: "unsupported_parameter" });
    expect((err as Error).message).toContain("n must be 1");
    expect(body({ n: 1 }).messages).toHaveLength(1);
  });
});

describe("response: Messages -> canonical", () => {
  test("text, ids, stop_sequence null and usage with cache reads and writes", () => {
    const r = fromAnthropicMessage(message("message.json"), "anthropic");
    expect(r.id).toBe("msg_01XFDUDYJgAACzvnptvVoYEL");
    expect(r.model).toBe("claude-sonnet-4-5-20250929");
    expect(r.choices).toEqual([
      {
        index: 0,
        content: [{ type: "text", text: "Lisbon is sunny today, around 21 °C." }],
        finishReason: "end_turn",
        stopSequence: null,
      },
    ]);
    expect(r.usage).toEqual({
      inputTokens: 44 + 256 + 1810,
      cacheReadTokens: 1810,
      cacheWriteTokens: 256,
      outputTokens: 15,
      reasoningTokens: 0,
    });
  });

  test("parallel tool_use blocks become tool calls with arguments serialised once", () => {
    const r = fromAnthropicMessage(message("message-tool-use.json"), "anthropic");
    const c = r.choices[0];
    expect(c?.finishReason).toBe("tool_calls");
    expect(c?.content).toEqual([
      { type: "text", text: "I'll check the weather in both cities." },
      { type: "tool_call", id: "toolu_01LisbonA1b2C3d4E5f6G7h8", name: "get_weather", arguments: '{"city":"Lisbon"}' },
      {
        type: "tool_call",
        id: "toolu_01PortoZ9y8X7w6V5u4T3s2",
        name: "get_weather",
        arguments: '{"city":"Porto","units":"celsius"}',
      },
    ]);
    expect(r.usage).toMatchObject({ inputTokens: 412, outputTokens: 96, cacheReadTokens: 0, cacheWriteTokens: 0 });
  });

  test("thinking keeps its signature; redacted thinking keeps its data", () => {
    const r = fromAnthropicMessage(message("message-thinking.json"), "anthropic");
    const content = r.choices[0]?.content ?? [];
    expect(content[0]).toMatchObject({ type: "thinking", text: "The user wants 27 * 453. 27 * 453 = 12231." });
    expect((content[0] as { signature?: string }).signature).toStartWith("EuYBCkQYAiJAgCs1le6");
    expect(content[1]).toMatchObject({ type: "thinking", text: "" });
    expect((content[1] as { redacted?: string }).redacted).toStartWith("EmwKAhgB");
    expect(content[2]).toEqual({ type: "text", text: "27 × 453 = 12,231." });
  });

  test("stop reasons, including the matched stop sequence", () => {
    const base = message("message.json");
    const cases: Array<[AnthropicMessage["stop_reason"], FinishReason]> = [
      ["end_turn", "end_turn"],
      ["stop_sequence", "stop_sequence"],
      ["max_tokens", "max_tokens"],
      ["tool_use", "tool_calls"],
      ["refusal", "content_filter"],
      ["pause_turn", "pause_turn"],
      ["model_context_window_exceeded", "context_window_exceeded"],
      [null, "end_turn"],
    ];
    for (const [reason, finish] of cases) {
      const r = fromAnthropicMessage({ ...base, stop_reason: reason }, "anthropic");
      expect(`${reason} -> ${r.choices[0]?.finishReason}`).toBe(`${reason} -> ${finish}`);
    }
    const seq = fromAnthropicMessage({ ...base, stop_reason: "stop_sequence", stop_sequence: "###" }, "anthropic");
    expect(seq.choices[0]).toMatchObject({ finishReason: "stop_sequence", stopSequence: "###" });
  });

  test("a json_output tool call is the answer as text, finishing as end_turn", () => {
    const r = fromAnthropicMessage(message("message-json-output.json"), "anthropic");
    const c = r.choices[0];
    expect(c?.finishReason).toBe("end_turn");
    expect(c?.content).toEqual([
      { type: "text", text: '{"city":"Lisbon","temp_c":21,"conditions":["sunny","light breeze"]}' },
    ]);
  });

  test("unknown block types are skipped; a body without content or an error body fails", () => {
    const base = message("message.json");
    const r = fromAnthropicMessage(
      { ...base, content: [{ type: "future_block" } as never, ...base.content] },
      "anthropic",
    );
    expect(r.choices[0]?.content).toEqual([{ type: "text", text: "Lisbon is sunny today, around 21 °C." }]);
    expect(() => fromAnthropicMessage({ id: "x" } as never, "anthropic")).toThrow(UpstreamError);
    let err: unknown;
    try {
      fromAnthropicMessage(
        { type: "error", error: { type: "overloaded_error", message: "Overloaded" } } as never,
        "anthropic",
      );
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ kind: "http", status: 529, upstreamType: "overloaded_error" });
  });
});

describe("wire mappings", () => {
  test("error types -> statuses", () => {
    expect(
      [
        "invalid_request_error",
        "authentication_error",
        "billing_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "timeout_error",
        "overloaded_error",
      ].map(anthropicErrorStatus),
    ).toEqual([400, 401, 402, 403, 404, 413, 429, 500, 504, 529]);
    expect(anthropicErrorStatus("something_new")).toBe(502);
    expect(anthropicErrorStatus("toString")).toBe(502);
  });

  test("stop reasons both ways", () => {
    const all: FinishReason[] = [
      "end_turn",
      "stop_sequence",
      "max_tokens",
      "tool_calls",
      "content_filter",
      "context_window_exceeded",
      "pause_turn",
    ];
    for (const f of all) expect(stopReasonFromAnthropic(stopReasonToAnthropic(f))).toBe(f);
    expect(stopReasonToAnthropic("error")).toBe("end_turn");
    expect(stopReasonFromAnthropic("brand_new_reason" as never)).toBe("end_turn");
  });

  test("usage both ways: canonical input includes cache reads and writes", () => {
    const u = usageFromAnthropic({
      input_tokens: 10,
      cache_creation_input_tokens: 200,
      cache_read_input_tokens: 3000,
      output_tokens: 7,
    });
    expect(u).toEqual({
      inputTokens: 3210,
      cacheReadTokens: 3000,
      cacheWriteTokens: 200,
      outputTokens: 7,
      reasoningTokens: 0,
    });
    expect(usageToAnthropic(u)).toEqual({
      input_tokens: 10,
      cache_creation_input_tokens: 200,
      cache_read_input_tokens: 3000,
      output_tokens: 7,
    });
    expect(usageFromAnthropic({ input_tokens: 5, output_tokens: 1, cache_read_input_tokens: null })).toMatchObject({
      inputTokens: 5,
      cacheReadTokens: 0,
    });
  });
});

/** A byte stream that delivers `bytes` in pieces of `size` (splitting lines and UTF-8 sequences). */
function chunked(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  });
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<{ events: StreamEvent[]; error?: unknown }> {
  const events: StreamEvent[] = [];
  try {
    for await (const ev of anthropicStreamEvents(stream, "anthropic")) {
      events.push(ev.type === "start" ? { ...ev, created: 0 } : ev);
    }
  } catch (error) {
    return { events, error };
  }
  return { events };
}

/** Every split of the fixture yields the same events as reading it whole. */
async function eventsOf(name: string): Promise<StreamEvent[]> {
  const bytes = new TextEncoder().encode(fixture(name));
  const whole = await collect(chunked(bytes, bytes.length));
  expect(whole.error).toBeUndefined();
  for (const size of [1, 2, 3, 5, 7, 13, 64, 257]) {
    const split = await collect(chunked(bytes, size));
    expect(split.error).toBeUndefined();
    expect(split.events).toEqual(whole.events);
  }
  // CRLF line endings, as some proxies rewrite them.
  const crlf = await collect(chunked(new TextEncoder().encode(fixture(name).replaceAll("\n", "\r\n")), 11));
  expect(crlf.events).toEqual(whole.events);
  return whole.events;
}

describe("stream: Messages SSE -> canonical events", () => {
  test("text: start, input usage, deltas, finish, cumulative usage; pings ignored; any byte split", async () => {
    const events = await eventsOf("stream-text.sse");
    const input = { inputTokens: 44 + 256 + 1810, cacheReadTokens: 1810, cacheWriteTokens: 256, reasoningTokens: 0 };
    expect(events).toEqual([
      { type: "start", id: "msg_01StreamTxtA1b2C3d4E5f6", model: "claude-sonnet-4-5-20250929", created: 0 },
      { type: "usage", usage: { ...input, outputTokens: 1 } },
      { type: "text_delta", choice: 0, text: "Lisbon is" },
      { type: "text_delta", choice: 0, text: " sunny today, " },
      { type: "text_delta", choice: 0, text: "around 21 °C. ☀️" },
      { type: "finish", choice: 0, reason: "end_turn", stopSequence: null },
      { type: "usage", usage: { ...input, outputTokens: 15 } },
    ]);
  });

  test("parallel tool calls are numbered 0, 1 (not by content-block index); JSON fragments pass through", async () => {
    const events = await eventsOf("stream-tools.sse");
    expect(events.filter((e) => e.type !== "usage" && e.type !== "start")).toEqual([
      { type: "text_delta", choice: 0, text: "I'll check the weather" },
      { type: "text_delta", choice: 0, text: " in both cities." },
      { type: "tool_call_start", choice: 0, index: 0, id: "toolu_01LisbonA1b2C3d4E5f6G7h8", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city": "Lis' },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: 'bon"}' },
      { type: "tool_call_start", choice: 0, index: 1, id: "toolu_01PortoZ9y8X7w6V5u4T3s2", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 1, arguments: '{"city": "Po' },
      { type: "tool_call_delta", choice: 0, index: 1, arguments: 'rto", "units": "celsius"}' },
      { type: "finish", choice: 0, reason: "tool_calls", stopSequence: null },
    ]);
    expect(events.at(-1)).toEqual({
      type: "usage",
      usage: { inputTokens: 412, cacheReadTokens: 0, cacheWriteTokens: 0, outputTokens: 96, reasoningTokens: 0 },
    });
  });

  test("thinking and signature deltas", async () => {
    const events = await eventsOf("stream-thinking.sse");
    expect(events.filter((e) => e.type === "thinking_delta" || e.type === "text_delta")).toEqual([
      { type: "thinking_delta", choice: 0, text: "The user wants 27 * 453." },
      { type: "thinking_delta", choice: 0, text: " 27 * 453 = 12231." },
      {
        type: "thinking_delta",
        choice: 0,
        text: "",
        signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds6bYZ1pI1w==",
      },
      { type: "text_delta", choice: 0, text: "27 × 453 = 12,231." },
    ]);
    expect(events.at(-1)).toMatchObject({ type: "usage", usage: { inputTokens: 52, outputTokens: 210 } });
  });

  test("json_output fragments become text and the turn ends as end_turn", async () => {
    const events = await eventsOf("stream-json-output.sse");
    expect(events.some((e) => e.type === "tool_call_start" || e.type === "tool_call_delta")).toBe(false);
    const text = events.map((e) => (e.type === "text_delta" ? e.text : "")).join("");
    expect(JSON.parse(text)).toEqual({ city: "Lisbon", temp_c: 21 });
    expect(events.find((e) => e.type === "finish")).toMatchObject({ reason: "end_turn" });
  });

  test("a mid-stream overloaded error throws an UpstreamError with status 529 after the text so far", async () => {
    const bytes = new TextEncoder().encode(fixture("stream-overloaded.sse"));
    for (const size of [4, bytes.length]) {
      const { events, error } = await collect(chunked(bytes, size));
      expect(events.filter((e) => e.type === "text_delta")).toEqual([
        { type: "text_delta", choice: 0, text: "Lisbon is" },
      ]);
      expect(error).toBeInstanceOf(UpstreamError);
      expect(error).toMatchObject({ kind: "http", status: 529, upstreamType: "overloaded_error", retryable: true });
      expect((error as Error).message).toContain("Overloaded");
    }
  });

  test("a stream cut before message_delta is a protocol error; malformed data too", async () => {
    const cut = anthropicSseFrames("stream-text.sse").slice(0, 4).join("");
    const a = await collect(chunked(new TextEncoder().encode(cut), 16));
    expect(a.events.map((e) => e.type)).toEqual(["start", "usage", "text_delta"]);
    expect(a.error).toMatchObject({ kind: "protocol", status: 502 });
    const b = await collect(chunked(new TextEncoder().encode("event: message_start\ndata: {not json\n\n"), 8));
    expect(b.error).toMatchObject({ kind: "protocol" });
  });

  test("input counts repeated in message_delta replace those of message_start", async () => {
    const frames = anthropicSseFrames("stream-text.sse").map((f) =>
      f.startsWith("event: message_delta")
        ? `event: message_delta\ndata: ${JSON.stringify({
            type: "message_delta",
            delta: { stop_reason: "max_tokens", stop_sequence: null },
            usage: {
              input_tokens: 50,
              cache_creation_input_tokens: 0,
              cache_read_input_tokens: 2000,
              output_tokens: 64,
            },
          })}\n\n`
        : f,
    );
    const { events } = await collect(chunked(new TextEncoder().encode(frames.join("")), 9));
    expect(events.find((e) => e.type === "finish")).toMatchObject({ reason: "max_tokens" });
    expect(events.at(-1)).toEqual({
      type: "usage",
      usage: { inputTokens: 2050, cacheReadTokens: 2000, cacheWriteTokens: 0, outputTokens: 64, reasoningTokens: 0 },
    });
  });
});

describe("adapter: URL, headers, status", () => {
  const mock = startMockUpstream();
  afterAll(() => mock.close());
  beforeEach(() => mock.reset());
  const ctx = (): CallContext => ({
    signal: new AbortController().signal,
    log: createLogger("error", () => {}),
    defaultMaxTokens: 8192,
    fetchImage: async () => {
      throw new Error("not used");
    },
  });
  const deployment = (over: Partial<Deployment> = {}): Deployment => ({
    id: "anthropic/claude-sonnet-4-5",
    provider: "anthropic",
    upstreamModel: "claude-sonnet-4-5",
    weight: 1,
    ...over,
  });

  test("messagesUrl accepts a base with or without /v1 and trailing slashes", () => {
    expect(messagesUrl("https://api.anthropic.com")).toBe("https://api.anthropic.com/v1/messages");
    expect(messagesUrl("https://api.anthropic.com/")).toBe("https://api.anthropic.com/v1/messages");
    expect(messagesUrl("https://proxy.example/v1/")).toBe("https://proxy.example/v1/messages");
    expect(messagesUrl("https://proxy.example/anthropic")).toBe("https://proxy.example/anthropic/v1/messages");
  });

  test("POSTs the body with x-api-key, anthropic-version and configured headers; deployment settings win", async () => {
    const adapter = createAnthropicAdapter("anthropic", {
      type: "anthropic",
      api_base: `${mock.url}/`,
      api_key: "sk-ant-provider-key-0000000000",
      headers: { "anthropic-beta": "prompt-caching-2024-07-31", "x-team": "a" },
    });
    mock.enqueue(() => new Response(fixture("message.json"), { headers: { "content-type": "application/json" } }));
    const r = await adapter.chat(req({ temperature: 2 }), deployment(), ctx());
    expect(r.choices[0]?.content).toEqual([{ type: "text", text: "Lisbon is sunny today, around 21 °C." }]);
    const up = mock.requests[0];
    expect(up?.method).toBe("POST");
    expect(up?.path).toBe("/v1/messages");
    expect(up?.headers).toMatchObject({
      "x-api-key": "sk-ant-provider-key-0000000000",
      "anthropic-version": "2023-06-01",
      "anthropic-beta": "prompt-caching-2024-07-31",
      "x-team": "a",
      "content-type": "application/json",
    });
    expect(up?.headers.authorization).toBeUndefined();
    expect(up?.json).toEqual({
      model: "claude-sonnet-4-5",
      max_tokens: 8192,
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      temperature: 1,
    });

    mock.enqueue(() => new Response(fixture("message.json")));
    await adapter.chat(
      req(),
      deployment({
        apiBase: `${mock.url}/v1`,
        apiKey: "sk-ant-deployment-key-111111111",
        headers: { "x-team": "b", "anthropic-version": "2023-01-01" },
      }),
      ctx(),
    );
    expect(mock.requests[1]?.path).toBe("/v1/messages");
    expect(mock.requests[1]?.headers).toMatchObject({
      "x-api-key": "sk-ant-deployment-key-111111111",
      "x-team": "b",
      "anthropic-version": "2023-01-01",
    });
  });

  test("anthropic_version from config; non-2xx keeps the status (529 included) and scrubs the key", async () => {
    const key = "sk-ant-provider-key-2222222222";
    const adapter = createAnthropicAdapter("claude", {
      type: "anthropic",
      api_base: mock.url,
      api_key: key,
      anthropic_version: "2023-01-01",
    });
    mock.enqueue(() => anthropicError(529, "overloaded_error", "Overloaded", { "retry-after": "3" }));
    const err = await adapter.chat(req(), deployment(), ctx()).catch((e) => e);
    expect(mock.requests[0]?.headers["anthropic-version"]).toBe("2023-01-01");
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ kind: "http", status: 529, retryAfterMs: 3000, upstreamType: "overloaded_error" });
    expect(err.message).toBe("claude returned 529: Overloaded");

    mock.enqueue(() => anthropicError(401, "authentication_error", `invalid x-api-key: ${key}`));
    const auth = await adapter.chat(req(), deployment(), ctx()).catch((e) => e);
    expect(auth).toMatchObject({ status: 401 });
    expect(auth.message).not.toContain(key);
  });

  test("chatStream resolves after a 2xx and yields events; an error status rejects before any event", async () => {
    const adapter = createAnthropicAdapter("anthropic", { type: "anthropic", api_base: mock.url, api_key: "k" });
    mock.enqueue(() => streamResponse(anthropicSseFrames("stream-text.sse")));
    const events: StreamEvent[] = [];
    for await (const ev of await adapter.chatStream(req({ stream: false }), deployment(), ctx())) events.push(ev);
    expect(mock.requests[0]?.json).toMatchObject({ stream: true, max_tokens: 8192 });
    expect(events.map((e) => (e.type === "text_delta" ? e.text : "")).join("")).toBe(
      "Lisbon is sunny today, around 21 °C. ☀️",
    );

    mock.enqueue(() => anthropicError(429, "rate_limit_error", "slow down", { "retry-after": "17" }));
    const err = await adapter.chatStream(req(), deployment(), ctx()).catch((e) => e);
    expect(err).toMatchObject({ kind: "http", status: 429, retryAfterMs: 17000 });
  });

  test("n > 1 is refused without a network call", async () => {
    const adapter = createAnthropicAdapter("anthropic", { type: "anthropic", api_base: mock.url, api_key: "k" });
    const err = await adapter.chat(req({ n: 3 }), deployment(), ctx()).catch((e) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ status: 400, param: "n" });
    expect(mock.requests).toHaveLength(0);
  });
});
