/** The public Messages protocol: decode, encode and stream encoding, native forwarding and validation. */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { GatewayError } from "../../http/errors";
import { readSse } from "../../http/sse";
import { anthropicStreamEvents, fromAnthropicMessage, toAnthropicBody } from "../../providers/dialects/anthropic";
import type { CanonicalResponse, FinishReason, StreamEvent, Usage } from "../canonical";
import type { StreamTracker } from "../protocol";
import { decodeMessagesRequest, nativeOnlyFeature } from "./decode";
import { encodeMessagesResponse } from "./encode";
import { anthropicMessages, parseCountTokensRequest, parseMessagesRequest } from "./protocol";
import type { MessagesRequest } from "./schema";
import { MessagesStreamEncoder } from "./stream";

const FIXTURES = join(import.meta.dir, "../../providers/anthropic/fixtures");
const fixture = (name: string) => readFileSync(join(FIXTURES, name), "utf8");

const request = (body: Record<string, unknown>): MessagesRequest =>
  parseMessagesRequest({ model: "openai/gpt-4o-mini", max_tokens: 512, ...body });

const usage = (u: Partial<Usage>): Usage => ({
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  ...u,
});

function bytesOf(frames: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const f of frames) c.enqueue(f);
      c.close();
    },
  });
}

/** Frames as `{event, data}` with the data parsed. */
async function eventsOf(frames: Uint8Array[]): Promise<{ event?: string; data: Record<string, unknown> }[]> {
  const out = [];
  for await (const ev of readSse(bytesOf(frames))) out.push({ event: ev.event, data: JSON.parse(ev.data) });
  return out;
}

function encodeAll(events: StreamEvent[], enc = new MessagesStreamEncoder("req_fallback", "openai/gpt-4o-mini")) {
  const frames: Uint8Array[] = [];
  for (const ev of events) frames.push(...enc.encode(ev));
  frames.push(...enc.end());
  return frames;
}

describe("decode: Messages request -> canonical", () => {
  test("system string and text blocks with cache_control", () => {
    expect(
      decodeMessagesRequest(request({ system: "Be brief.", messages: [{ role: "user", content: "hi" }] })),
    ).toEqual({
      model: "openai/gpt-4o-mini",
      system: [{ type: "text", text: "Be brief." }],
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      maxTokens: 512,
      stream: false,
    });
    const c = decodeMessagesRequest(
      request({
        system: [
          { type: "text", text: "You are a travel assistant." },
          { type: "text", text: "Long policy text", cache_control: { type: "ephemeral", ttl: "1h" } },
          { type: "text", text: "" },
        ],
        messages: [{ role: "user", content: "hi" }],
      }),
    );
    expect(c.system).toEqual([
      { type: "text", text: "You are a travel assistant." },
      { type: "text", text: "Long policy text", cacheControl: { type: "ephemeral", ttl: "1h" } },
    ]);
  });

  test("images (base64 and url), tool_use/tool_result with names, thinking, merged turns", () => {
    const c = decodeMessagesRequest(
      request({
        messages: [
          {
            role: "user",
            content: [
              { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
              {
                type: "image",
                source: { type: "url", url: "https://example.com/a.jpg" },
                cache_control: { type: "ephemeral" },
              },
              { type: "text", text: "Weather where these were taken?" },
            ],
          },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "Lisbon, probably.", signature: "sig-1" },
              { type: "redacted_thinking", data: "opaque==" },
              { type: "text", text: "Checking." },
              { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Lisbon", days: [1, 2] } },
              { type: "tool_use", id: "toolu_01B", name: "get_time", input: {} },
            ],
          },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "toolu_01A", content: '{"temp_c":21}' },
              {
                type: "tool_result",
                tool_use_id: "toolu_01B",
                is_error: true,
                cache_control: { type: "ephemeral" },
                content: [
                  { type: "text", text: "clock unavailable" },
                  { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "/9j/" } },
                ],
              },
            ],
          },
          { role: "user", content: "And tomorrow?" },
        ],
      }),
    );
    expect(c.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" } },
          {
            type: "image",
            source: { kind: "url", url: "https://example.com/a.jpg" },
            cacheControl: { type: "ephemeral" },
          },
          { type: "text", text: "Weather where these were taken?" },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "thinking", text: "Lisbon, probably.", signature: "sig-1" },
          { type: "thinking", text: "", redacted: "opaque==" },
          { type: "text", text: "Checking." },
          { type: "tool_call", id: "toolu_01A", name: "get_weather", arguments: '{"city":"Lisbon","days":[1,2]}' },
          { type: "tool_call", id: "toolu_01B", name: "get_time", arguments: "{}" },
        ],
      },
      {
        role: "user",
        content: [
          {
            type: "tool_result",
            toolCallId: "toolu_01A",
            name: "get_weather",
            content: [{ type: "text", text: '{"temp_c":21}' }],
          },
          {
            type: "tool_result",
            toolCallId: "toolu_01B",
            name: "get_time",
            isError: true,
            cacheControl: { type: "ephemeral" },
            content: [
              { type: "text", text: "clock unavailable" },
              { type: "image", source: { kind: "base64", mediaType: "image/jpeg", data: "/9j/" } },
            ],
          },
          // Consecutive user turns are merged.
          { type: "text", text: "And tomorrow?" },
        ],
      },
    ]);
  });

  test("tools, tool_choice, sampling, stop sequences, metadata, thinking, stream", () => {
    const c = decodeMessagesRequest(
      request({
        messages: [{ role: "user", content: "hi" }],
        tools: [
          {
            name: "get_weather",
            description: "Current weather",
            input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
            cache_control: { type: "ephemeral" },
          },
          { type: "custom", name: "noop", input_schema: { type: "object" } },
        ],
        tool_choice: { type: "any", disable_parallel_tool_use: true },
        temperature: 0.2,
        top_p: 0.9,
        top_k: 40,
        stop_sequences: ["###"],
        metadata: { user_id: "end-user-7" },
        thinking: { type: "enabled", budget_tokens: 2048 },
        stream: true,
      }),
    );
    expect(c).toMatchObject({
      tools: [
        {
          name: "get_weather",
          description: "Current weather",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          cacheControl: { type: "ephemeral" },
        },
        { name: "noop", parameters: { type: "object" } },
      ],
      toolChoice: { type: "required" },
      parallelToolCalls: false,
      temperature: 0.2,
      topP: 0.9,
      topK: 40,
      stop: ["###"],
      user: "end-user-7",
      thinkingBudget: 2048,
      maxTokens: 512,
      stream: true,
    });
    const choice = (tc: unknown) =>
      decodeMessagesRequest(request({ messages: [{ role: "user", content: "x" }], tool_choice: tc }));
    expect(choice({ type: "auto" }).toolChoice).toEqual({ type: "auto" });
    expect(choice({ type: "auto" }).parallelToolCalls).toBeUndefined();
    expect(choice({ type: "none" }).toolChoice).toEqual({ type: "none" });
    expect(choice({ type: "tool", name: "get_weather" }).toolChoice).toEqual({ type: "tool", name: "get_weather" });
    expect(choice({ type: "auto", disable_parallel_tool_use: false }).parallelToolCalls).toBeUndefined();
  });

  test("top-level cache_control marks the last cacheable block; output_config maps to format and effort", () => {
    const c = decodeMessagesRequest(
      request({
        cache_control: { type: "ephemeral" },
        output_config: { effort: "max", format: { type: "json_schema", schema: { type: "object" } } },
        messages: [
          { role: "user", content: "q" },
          {
            role: "assistant",
            content: [
              { type: "text", text: "a" },
              { type: "thinking", thinking: "t", signature: "s" },
            ],
          },
        ],
      }),
    );
    expect(c.messages[1]?.content).toEqual([
      { type: "text", text: "a", cacheControl: { type: "ephemeral" } },
      { type: "thinking", text: "t", signature: "s" },
    ]);
    expect(c.responseFormat).toEqual({ type: "json_schema", name: "output", schema: { type: "object" } });
    expect(c.reasoningEffort).toBe("high");
  });

  test("documents: plain text and content sources become text; PDFs and server tools are native-only", () => {
    const body = request({
      messages: [
        {
          role: "user",
          content: [
            { type: "document", title: "Policy", source: { type: "text", media_type: "text/plain", data: "No pets." } },
            { type: "document", source: { type: "content", content: [{ type: "text", text: "Chunk 1" }] } },
            { type: "text", text: "Summarise." },
          ],
        },
      ],
    });
    expect(decodeMessagesRequest(body).messages[0]?.content).toEqual([
      { type: "text", text: "Policy\n\nNo pets." },
      { type: "text", text: "Chunk 1" },
      { type: "text", text: "Summarise." },
    ]);
    expect(nativeOnlyFeature(body)).toBeUndefined();

    const pdf = request({
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Read this" },
            { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBERi0=" } },
          ],
        },
      ],
    });
    expect(nativeOnlyFeature(pdf)).toBe("'messages[0].content[1]' (a document with a base64 source)");
    // Decoding still succeeds (token estimates of natively forwarded requests): the PDF is left out.
    expect(decodeMessagesRequest(pdf).messages[0]?.content).toEqual([{ type: "text", text: "Read this" }]);

    const server = request({
      messages: [{ role: "user", content: "news?" }],
      tools: [
        { name: "get_weather", input_schema: { type: "object" } },
        { type: "web_search_20250305", name: "web_search", max_uses: 3 },
      ],
    });
    expect(nativeOnlyFeature(server)).toBe("'tools[1]' (the server tool 'web_search_20250305')");
    expect(decodeMessagesRequest(server).tools?.map((t) => t.name)).toEqual(["get_weather"]);
  });

  test("round trip: Messages body -> canonical -> the Anthropic dialect reproduces it", () => {
    const original = {
      model: "claude-sonnet-4-5",
      max_tokens: 1024,
      system: [{ type: "text", text: "You are a travel assistant.", cache_control: { type: "ephemeral" } }],
      messages: [
        {
          role: "user",
          content: [
            { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "/9j/4AAQ" } },
            { type: "text", text: "Weather where this photo was taken?" },
          ],
        },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Looks like Lisbon.", signature: "EqQB" },
            { type: "text", text: "Looks like Lisbon; checking." },
            { type: "tool_use", id: "toolu_01A", name: "get_weather", input: { city: "Lisbon" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_01A", content: [{ type: "text", text: '{"temp_c":21}' }] },
            { type: "text", text: "Thanks", cache_control: { type: "ephemeral", ttl: "5m" } },
          ],
        },
      ],
      tools: [
        {
          name: "get_weather",
          description: "Current weather for a city",
          input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          cache_control: { type: "ephemeral" },
        },
      ],
      tool_choice: { type: "auto", disable_parallel_tool_use: true },
      stop_sequences: ["###"],
      temperature: 0.5,
      metadata: { user_id: "u-1" },
    };
    const canonical = decodeMessagesRequest(parseMessagesRequest(original));
    expect(toAnthropicBody(canonical, "claude-sonnet-4-5", {})).toEqual(original as never);
  });
});

describe("encode: canonical response -> Messages response", () => {
  const response = (
    over: Partial<CanonicalResponse["choices"][number]> = {},
    u: Partial<Usage> = {},
  ): CanonicalResponse => ({
    id: "chatcmpl-abc",
    model: "gpt-4o-mini-2024-07-18",
    created: 1761000000,
    choices: [{ index: 0, content: [{ type: "text", text: "Hello" }], finishReason: "end_turn", ...over }],
    usage: usage({ inputTokens: 1200, cacheReadTokens: 1024, outputTokens: 12, ...u }),
  });

  test("text, tool_use (input parsed from the argument text), thinking and redacted thinking, in order", () => {
    const res = encodeMessagesResponse(
      response({
        content: [
          { type: "thinking", text: "hmm", signature: "sig" },
          { type: "thinking", text: "", redacted: "opaque" },
          { type: "thinking", text: "unsigned reasoning" },
          { type: "text", text: "Checking both." },
          { type: "tool_call", id: "call_1", name: "get_weather", arguments: '{"city":"Lisbon"}' },
          { type: "tool_call", id: "call_2", name: "get_time", arguments: "" },
          { type: "tool_call", id: "call_3", name: "broken", arguments: "{not json" },
        ],
        finishReason: "tool_calls",
      }),
    );
    expect(res).toEqual({
      id: "msg_chatcmpl-abc",
      type: "message",
      role: "assistant",
      model: "gpt-4o-mini-2024-07-18",
      content: [
        { type: "thinking", thinking: "hmm", signature: "sig" },
        { type: "redacted_thinking", data: "opaque" },
        { type: "thinking", thinking: "unsigned reasoning", signature: "" },
        { type: "text", text: "Checking both." },
        { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Lisbon" } },
        { type: "tool_use", id: "call_2", name: "get_time", input: {} },
        { type: "tool_use", id: "call_3", name: "broken", input: { _raw: "{not json" } },
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 176, cache_creation_input_tokens: 0, cache_read_input_tokens: 1024, output_tokens: 12 },
    });
  });

  test("every finish reason maps to its stop_reason; stop_sequence only with stop_sequence", () => {
    const table: [FinishReason, string][] = [
      ["end_turn", "end_turn"],
      ["stop_sequence", "stop_sequence"],
      ["max_tokens", "max_tokens"],
      ["tool_calls", "tool_use"],
      ["content_filter", "refusal"],
      ["context_window_exceeded", "model_context_window_exceeded"],
      ["pause_turn", "pause_turn"],
      ["error", "end_turn"],
    ];
    for (const [reason, expected] of table) {
      const res = encodeMessagesResponse(response({ finishReason: reason, stopSequence: "###" }));
      expect(res.stop_reason as string).toBe(expected);
      expect(res.stop_sequence).toBe(reason === "stop_sequence" ? "###" : null);
    }
    expect(encodeMessagesResponse(response({ finishReason: "stop_sequence" })).stop_sequence).toBeNull();
  });

  test("usage: input_tokens is the uncached part; cache reads and writes apart", () => {
    const res = encodeMessagesResponse(
      response({}, { inputTokens: 2110, cacheReadTokens: 1810, cacheWriteTokens: 256, outputTokens: 15 }),
    );
    expect(res.usage).toEqual({
      input_tokens: 44,
      cache_creation_input_tokens: 256,
      cache_read_input_tokens: 1810,
      output_tokens: 15,
    });
  });

  test("an OpenAI refusal becomes the text with stop_reason refusal; msg_ ids are kept", () => {
    const res = encodeMessagesResponse({
      ...response({ content: [], refusal: "I can't help with that." }),
      id: "msg_01X",
    });
    expect(res.id).toBe("msg_01X");
    expect(res.content).toEqual([{ type: "text", text: "I can't help with that." }]);
    expect(res.stop_reason).toBe("refusal");
  });

  test("round trip: an Anthropic message through the dialect and back keeps content, reasons and usage", () => {
    for (const name of ["message.json", "message-tool-use.json", "message-thinking.json"]) {
      const original = JSON.parse(fixture(name));
      const back = encodeMessagesResponse(fromAnthropicMessage(original, "anthropic"));
      expect(back).toEqual({
        id: original.id,
        type: "message",
        role: "assistant",
        model: original.model,
        content: original.content,
        stop_reason: original.stop_reason,
        stop_sequence: original.stop_sequence,
        usage: {
          input_tokens: original.usage.input_tokens,
          cache_creation_input_tokens: original.usage.cache_creation_input_tokens,
          cache_read_input_tokens: original.usage.cache_read_input_tokens,
          output_tokens: original.usage.output_tokens,
        },
      });
    }
  });
});

describe("stream encoder: canonical events -> Messages SSE", () => {
  test("text then two tool calls (usage reported last, as OpenAI does): event order, indices and final usage", async () => {
    const frames = encodeAll([
      { type: "start", id: "chatcmpl-1", model: "gpt-4o-mini", created: 1 },
      { type: "text_delta", choice: 0, text: "Checking " },
      { type: "text_delta", choice: 0, text: "both." },
      { type: "tool_call_start", choice: 0, index: 0, id: "call_L", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city":"Lis' },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: 'bon"}' },
      { type: "tool_call_start", choice: 0, index: 1, id: "call_P", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 1, arguments: '{"city":"Porto"}' },
      { type: "finish", choice: 0, reason: "tool_calls" },
      { type: "usage", usage: usage({ inputTokens: 85, cacheReadTokens: 5, outputTokens: 40 }) },
    ]);
    const events = await eventsOf(frames);
    for (const e of events) expect(e.event).toBe(e.data.type as string);
    expect(events.map((e) => e.data)).toEqual([
      {
        type: "message_start",
        message: {
          id: "msg_chatcmpl-1",
          type: "message",
          role: "assistant",
          model: "gpt-4o-mini",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 },
        },
      },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Checking " } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "both." } },
      { type: "content_block_stop", index: 0 },
      {
        type: "content_block_start",
        index: 1,
        content_block: { type: "tool_use", id: "call_L", name: "get_weather", input: {} },
      },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"city":"Lis' } },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: 'bon"}' } },
      { type: "content_block_stop", index: 1 },
      {
        type: "content_block_start",
        index: 2,
        content_block: { type: "tool_use", id: "call_P", name: "get_weather", input: {} },
      },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: '{"city":"Porto"}' } },
      { type: "content_block_stop", index: 2 },
      {
        type: "message_delta",
        delta: { stop_reason: "tool_use", stop_sequence: null },
        usage: { output_tokens: 40, input_tokens: 80, cache_creation_input_tokens: 0, cache_read_input_tokens: 5 },
      },
      { type: "message_stop" },
    ]);
  });

  test("usage reported up front goes into message_start and is not repeated in message_delta", async () => {
    const events = await eventsOf(
      encodeAll([
        { type: "start", id: "msg_01", model: "claude", created: 1 },
        {
          type: "usage",
          usage: usage({ inputTokens: 2110, cacheReadTokens: 1810, cacheWriteTokens: 256, outputTokens: 1 }),
        },
        { type: "text_delta", choice: 0, text: "Hi" },
        { type: "finish", choice: 0, reason: "stop_sequence", stopSequence: "###" },
        {
          type: "usage",
          usage: usage({ inputTokens: 2110, cacheReadTokens: 1810, cacheWriteTokens: 256, outputTokens: 15 }),
        },
      ]),
    );
    expect(events[0]?.data).toMatchObject({
      type: "message_start",
      message: {
        id: "msg_01",
        usage: { input_tokens: 44, cache_creation_input_tokens: 256, cache_read_input_tokens: 1810, output_tokens: 1 },
      },
    });
    expect(events.at(-2)?.data).toEqual({
      type: "message_delta",
      delta: { stop_reason: "stop_sequence", stop_sequence: "###" },
      usage: { output_tokens: 15 },
    });
  });

  test("thinking: thinking_delta then signature_delta in one block; text follows in the next", async () => {
    const events = await eventsOf(
      encodeAll([
        { type: "start", id: "x", model: "m", created: 1 },
        { type: "thinking_delta", choice: 0, text: "Let me think." },
        { type: "thinking_delta", choice: 0, text: "", signature: "sig==" },
        { type: "thinking_delta", choice: 0, text: "More." },
        { type: "text_delta", choice: 0, text: "Answer" },
        { type: "finish", choice: 0, reason: "end_turn" },
      ]),
    );
    expect(events.slice(1, -2).map((e) => e.data)).toEqual([
      { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "Let me think." } },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "sig==" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "thinking", thinking: "", signature: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "thinking_delta", thinking: "More." } },
      { type: "content_block_stop", index: 1 },
      { type: "content_block_start", index: 2, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 2, delta: { type: "text_delta", text: "Answer" } },
      { type: "content_block_stop", index: 2 },
    ]);
  });

  test("every finish reason reaches message_delta; an empty stream still ends as a message", async () => {
    const reasons: FinishReason[] = [
      "end_turn",
      "stop_sequence",
      "max_tokens",
      "tool_calls",
      "content_filter",
      "context_window_exceeded",
      "pause_turn",
      "error",
    ];
    const expected = [
      "end_turn",
      "stop_sequence",
      "max_tokens",
      "tool_use",
      "refusal",
      "model_context_window_exceeded",
      "pause_turn",
      "end_turn",
    ];
    for (const [i, reason] of reasons.entries()) {
      const events = await eventsOf(encodeAll([{ type: "finish", choice: 0, reason }]));
      expect(events.map((e) => e.event)).toEqual(["message_start", "message_delta", "message_stop"]);
      expect(events[1]?.data.delta).toMatchObject({ stop_reason: expected[i] as string });
      // No start event: the message is named after the request and the served model.
      expect(events[0]?.data).toMatchObject({ message: { id: "msg_req_fallback", model: "openai/gpt-4o-mini" } });
    }
  });

  test("error frames: event error with Anthropic's envelope and the type of the status", async () => {
    const enc = new MessagesStreamEncoder("r", "m");
    const cases: [number, string][] = [
      [429, "rate_limit_error"],
      [503, "overloaded_error"],
      [502, "api_error"],
      [504, "timeout_error"],
      [400, "invalid_request_error"],
    ];
    for (const [status, type] of cases) {
      const [ev] = await eventsOf(enc.error(new GatewayError(status, `failed ${status}`)));
      expect(ev).toEqual({ event: "error", data: { type: "error", error: { type, message: `failed ${status}` } } });
    }
  });

  test("round trip: an Anthropic stream through the dialect and the encoder keeps events and content", async () => {
    for (const name of ["stream-text.sse", "stream-tools.sse", "stream-thinking.sse"]) {
      const original = await eventsOf([new TextEncoder().encode(fixture(name))]);
      const canonical: StreamEvent[] = [];
      for await (const ev of anthropicStreamEvents(bytesOf([new TextEncoder().encode(fixture(name))]), "anthropic"))
        canonical.push(ev);
      const again = await eventsOf(encodeAll(canonical));
      const shape = (evs: typeof original) =>
        evs
          .filter((e) => e.event !== "ping")
          .filter(
            (e) =>
              !(
                e.data.type === "content_block_delta" && (e.data.delta as { partial_json?: string }).partial_json === ""
              ),
          )
          .map((e) => {
            const d = e.data;
            if (d.type === "message_start") return { type: d.type, id: (d.message as { id: string }).id };
            if (d.type === "message_delta")
              return { type: d.type, delta: d.delta, output: (d.usage as { output_tokens: number }).output_tokens };
            return d;
          });
      expect(shape(again)).toEqual(shape(original));
    }
  });
});

describe("native forwarding", () => {
  const tracker = (): StreamTracker & { text: string } => ({
    usage: undefined,
    failed: undefined,
    text: "",
    token(t: string) {
      this.text += t;
    },
  });
  const forward = async (sse: string, t: StreamTracker, body: Record<string, unknown> = {}) => {
    const out: Uint8Array[] = [];
    const frames = anthropicMessages.native?.frames(
      bytesOf([new TextEncoder().encode(sse)]),
      body as unknown as MessagesRequest,
      t,
      "anthropic",
      new AbortController().signal,
      { requestId: "req_test", principal: { kind: "master" }, model: "anthropic/claude-sonnet-4-5" },
    );
    for await (const f of frames ?? []) out.push(f);
    return new TextDecoder().decode(Buffer.concat(out));
  };

  test("the body goes as the client sent it; usage from a non-streamed answer", () => {
    const body = request({ messages: [{ role: "user", content: "hi" }], extra_field: { kept: true } });
    expect(anthropicMessages.native?.body(body, false)).toBe(body);
    expect(anthropicMessages.native?.usage(JSON.parse(fixture("message.json")))).toEqual({
      inputTokens: 2110,
      cacheReadTokens: 1810,
      cacheWriteTokens: 256,
      outputTokens: 15,
      reasoningTokens: 0,
    });
  });

  test("frames pass unchanged with their event names; usage and text are recorded", async () => {
    const t = tracker();
    const text = await forward(fixture("stream-tools.sse"), t);
    const normalize = (s: string) => s.replace(/\{"type": "ping"\}/g, '{"type":"ping"}');
    expect(normalize(text)).toBe(normalize(fixture("stream-tools.sse")));
    expect(t.usage).toEqual({
      inputTokens: 412,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      outputTokens: 96,
      reasoningTokens: 0,
    });
    // Tool names are output too, as on the translated path.
    expect(t.text).toBe(
      `I'll check the weather in both cities.get_weather{"city": "Lisbon"}get_weather{"city": "Porto", "units": "celsius"}`,
    );
    expect(t.failed).toBeUndefined();

    const t2 = tracker();
    await forward(fixture("stream-text.sse"), t2);
    // Input and cache counts from message_start, output from message_delta.
    expect(t2.usage).toEqual({
      inputTokens: 2110,
      cacheReadTokens: 1810,
      cacheWriteTokens: 256,
      outputTokens: 15,
      reasoningTokens: 0,
    });
  });

  test("an upstream error event is forwarded and recorded as the failure; no usage is claimed", async () => {
    const t = tracker();
    const text = await forward(fixture("stream-overloaded.sse"), t);
    expect(text).toContain(
      'event: error\ndata: {"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"}',
    );
    expect(t.failed?.status).toBe(503);
    expect(t.usage).toBeUndefined();
    expect(t.text).toBe("Lisbon is");
  });

  test("a stream cut before the message ends gets an error frame in Anthropic's shape", async () => {
    const t = tracker();
    const cut = fixture("stream-text.sse").split("event: message_delta")[0] as string;
    const text = await forward(cut, t);
    const events = await eventsOf([new TextEncoder().encode(text)]);
    expect(events.at(-1)).toEqual({
      event: "error",
      data: {
        type: "error",
        error: {
          type: "api_error",
          message:
            "The upstream provider sent an invalid response: anthropic ended the stream before the message was finished",
        },
      },
    });
    expect(t.failed?.status).toBe(502);
  });
});

describe("validation", () => {
  const fails = (body: unknown) => {
    try {
      parseMessagesRequest(body);
    } catch (e) {
      expect(e).toBeInstanceOf(GatewayError);
      expect((e as GatewayError).status).toBe(400);
      return (e as GatewayError).message;
    }
    throw new Error("expected a 400");
  };
  const base = { model: "m", max_tokens: 10 };
  const hi = [{ role: "user", content: "hi" }];

  test("precise messages naming the field", () => {
    expect(fails({ model: "m", messages: hi })).toBe("Missing required field 'max_tokens' in request body");
    expect(fails({ ...base, messages: [] })).toBe("Invalid 'messages': must not be empty");
    expect(fails({ ...base, messages: [{ role: "system", content: "x" }] })).toBe(
      `Invalid 'messages[0].role': expected one of "user", "assistant", got "system"`,
    );
    expect(fails({ ...base, messages: [{ role: "user", content: 5 }] })).toBe(
      "Invalid 'messages[0].content': expected a string or an array of content blocks, got 5",
    );
    expect(fails({ ...base, messages: [{ role: "user", content: [{ type: "text" }] }] })).toBe(
      "Missing required field 'messages[0].content[0].text' in request body",
    );
    expect(
      fails({
        ...base,
        messages: [{ role: "assistant", content: [{ type: "tool_use", id: "t", name: "f", input: "{}" }] }],
      }),
    ).toBe(`Invalid 'messages[0].content[0].input': expected a JSON object, got "{}"`);
    expect(
      fails({ ...base, messages: [{ role: "assistant", content: [{ type: "tool_result", tool_use_id: "t" }] }] }),
    ).toContain("Invalid 'messages[0].content[0].type': expected one of");
    expect(
      fails({
        ...base,
        messages: [
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "text", text: 1 }] }] },
        ],
      }),
    ).toBe("Invalid 'messages[0].content[0].content[0].text': expected a string, got 1");
    expect(fails({ ...base, messages: hi, tools: [{ name: "f" }] })).toBe(
      "Missing required field 'tools[0].input_schema' in request body",
    );
    expect(fails({ ...base, messages: hi, tools: [{ name: "f", input_schema: { type: "array" } }] })).toBe(
      `Invalid 'tools[0].input_schema.type': expected "object", got "array"`,
    );
    expect(fails({ ...base, messages: hi, tools: [{ type: "web_search_20250305" }] })).toBe(
      "Missing required field 'tools[0].name' in request body",
    );
    expect(fails({ ...base, messages: hi, tool_choice: { type: "tool" } })).toBe(
      "Missing required field 'tool_choice.name' in request body",
    );
    expect(fails({ ...base, messages: hi, temperature: 1.5 })).toBe(
      "Invalid 'temperature': expected a number >= 0 and <= 1, got 1.5",
    );
    expect(fails({ ...base, messages: hi, thinking: { type: "enabled", budget_tokens: 100 } })).toBe(
      "Invalid 'thinking.budget_tokens': expected an integer >= 1024, got 100",
    );
    expect(fails({ ...base, messages: hi, system: [{ type: "text" }] })).toBe(
      "Missing required field 'system[0].text' in request body",
    );
    expect(fails(undefined)).toBe("The request body is empty: send a JSON object");
    expect(fails([])).toBe("The request body must be an object");
  });

  test("unknown fields are kept (Anthropic adds fields; Anthropic upstreams receive them)", () => {
    const body = parseMessagesRequest({ ...base, messages: hi, container: "c-1", speed: "fast" });
    expect(body).toMatchObject({ container: "c-1", speed: "fast" });
  });

  test("count_tokens: max_tokens is not required", () => {
    expect(parseCountTokensRequest({ model: "m", messages: hi })).toEqual({ model: "m", messages: hi } as never);
  });
});
