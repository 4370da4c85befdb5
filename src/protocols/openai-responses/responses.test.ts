/** The Responses protocol without HTTP: validation, decoding, encoding, the stream encoder. */
import { describe, expect, test } from "bun:test";
import { Value } from "@sinclair/typebox/value";
import { ResponseStream } from "openai/lib/responses/ResponseStream";
import { GatewayError } from "../../http/errors";
import type { CanonicalResponse, FinishReason, StreamEvent, Usage } from "../canonical";
import { decodeResponsesRequest } from "./decode";
import { encodeResponse, outputItems } from "./encode";
import { history, parseResponsesRequest } from "./protocol";
import { type InputItem, ResponseObject, ResponseStreamEvent, type ResponsesRequest } from "./schema";
import { ResponsesStreamEncoder } from "./stream";
import type { OutputItem, ResponseObject as ResponseObjectType } from "./wire";

const body = (b: Record<string, unknown>): ResponsesRequest =>
  parseResponsesRequest({ model: "openai/gpt-4o-mini", ...b });

const usage = (u: Partial<Usage> = {}): Usage => ({
  inputTokens: 1200,
  cacheReadTokens: 1024,
  cacheWriteTokens: 0,
  outputTokens: 40,
  reasoningTokens: 24,
  ...u,
});

const META = {
  id: "resp_gws0000000000123456789012345678901234",
  createdAt: 1761000000,
  model: "m-2025",
  previousResponseId: null,
};

function canonical(content: CanonicalResponse["choices"][0]["content"], finishReason: FinishReason = "end_turn") {
  return {
    id: "up-1",
    model: "m-2025",
    created: 1761000000,
    choices: [{ index: 0, content, finishReason }],
    usage: usage(),
  } satisfies CanonicalResponse;
}

function errorOf(f: () => unknown): GatewayError {
  try {
    f();
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new Error("expected a GatewayError");
}

describe("request validation", () => {
  test("accepts the documented shapes and unknown fields", () => {
    const ok = body({
      input: [
        { role: "developer", content: "Be brief." },
        {
          role: "user",
          content: [
            { type: "input_text", text: "Weather in Lisbon?" },
            { type: "input_image", image_url: "https://example.com/beach.jpg", detail: "auto" },
          ],
        },
        { type: "function_call", call_id: "call_7Qx", name: "get_weather", arguments: '{"city":"Lisbon"}' },
        { type: "function_call_output", call_id: "call_7Qx", output: '{"temp_c":21}' },
        { type: "web_search_call", id: "ws_1", status: "completed" },
      ],
      tools: [{ type: "function", name: "get_weather", parameters: { type: "object" } }, { type: "web_search" }],
      tool_choice: { type: "function", name: "get_weather" },
      text: { format: { type: "json_schema", name: "w", schema: { type: "object" }, strict: true } },
      prompt_cache_key: "anything",
    });
    expect(ok.model).toBe("openai/gpt-4o-mini");
  });

  test("errors name the exact field, inside unions and item lists", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ input: "x", model: undefined }, "model"],
      [{ input: 5 }, "input"],
      [
        {
          input: [
            { role: "user", content: "a" },
            { role: "wizard", content: "x" },
          ],
        },
        "input[1].role",
      ],
      [{ input: [{ content: "x" }] }, "input[0].role"],
      [{ input: [{ role: "user", content: [{ type: "input_text" }] }] }, "input[0].content[0].text"],
      [{ input: [{ role: "user", content: [{ type: "input_video", url: "x" }] }] }, "input[0].content[0].type"],
      [{ input: [{ type: "function_call", name: "f", arguments: "{}" }] }, "input[0].call_id"],
      [{ input: [{ type: "function_call_output", call_id: "c" }] }, "input[0].output"],
      [{ input: "x", tools: [{ type: "function" }] }, "tools[0].name"],
      [{ input: "x", text: { format: { type: "json_schema", schema: {} } } }, "text.format.name"],
      [{ input: "x", temperature: 3 }, "temperature"],
      [{ input: "x", max_output_tokens: 0 }, "max_output_tokens"],
      [{ input: "x", reasoning: { effort: "extreme" } }, "reasoning.effort"],
      [{ input: "x", tool_choice: { type: "function" } }, "tool_choice.name"],
    ];
    for (const [b, param] of cases) {
      const e = errorOf(() => parseResponsesRequest({ model: "m/x", ...b }));
      expect(`${param}: ${e.status} ${e.param}`).toBe(`${param}: 400 ${param}`);
    }
  });
});

describe("decoding", () => {
  test("a string input with instructions: system first, one user turn, options mapped", () => {
    const req = decodeResponsesRequest(
      body({
        input: "Weather in Lisbon?",
        instructions: "Be brief.",
        max_output_tokens: 300,
        temperature: 0.2,
        top_p: 0.9,
        reasoning: { effort: "xhigh" },
        user: "u-1",
        parallel_tool_calls: false,
        tool_choice: "required",
        tools: [{ type: "function", name: "get_weather", description: "w", strict: true }],
        text: { format: { type: "json_schema", name: "weather", schema: { type: "object" }, strict: true } },
        stream: true,
      }),
    );
    expect(req).toEqual({
      model: "openai/gpt-4o-mini",
      system: [{ type: "text", text: "Be brief." }],
      messages: [{ role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] }],
      tools: [{ name: "get_weather", description: "w", parameters: { type: "object", properties: {} }, strict: true }],
      toolChoice: { type: "required" },
      parallelToolCalls: false,
      responseFormat: { type: "json_schema", name: "weather", schema: { type: "object" }, strict: true },
      maxTokens: 300,
      temperature: 0.2,
      topP: 0.9,
      reasoningEffort: "high",
      user: "u-1",
      stream: true,
    });
    expect(
      decodeResponsesRequest(body({ input: "x", text: { format: { type: "json_object" } } })).responseFormat,
    ).toEqual({
      type: "json_object",
    });
    expect(
      decodeResponsesRequest(body({ input: "x", tool_choice: { type: "function", name: "f" } })).toolChoice,
    ).toEqual({ type: "tool", name: "f" });
  });

  test("items: roles, images, function calls and outputs linked by call_id, reasoning", () => {
    const req = decodeResponsesRequest(
      body({
        instructions: "First.",
        input: [
          { role: "system", content: "Second." },
          {
            type: "message",
            role: "user",
            content: [
              { type: "input_text", text: "Look:" },
              { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=", detail: "low" },
              { type: "input_image", image_url: "https://example.com/a.jpg" },
            ],
          },
          { role: "developer", content: [{ type: "input_text", text: "Third." }] },
          {
            type: "reasoning",
            id: "rs_1",
            summary: [],
            content: [{ type: "reasoning_text", text: "hmm" }],
            encrypted_content: "sig",
          },
          {
            type: "reasoning",
            id: "rs_2",
            summary: [{ type: "summary_text", text: "opaque" }],
            encrypted_content: "gAAA",
          },
          { role: "assistant", content: [{ type: "output_text", text: "Checking.", annotations: [] }] },
          { type: "function_call", call_id: "call_A", name: "get_weather", arguments: '{"city":"Lisbon"}' },
          { type: "function_call", call_id: "call_B", name: "get_time", arguments: "{}" },
          { type: "function_call_output", call_id: "call_A", output: '{"temp_c":21}' },
          { type: "function_call_output", call_id: "call_B", output: [{ type: "input_text", text: "12:00" }] },
          { role: "user", content: "Thanks" },
        ],
      }),
    );
    expect(req.system).toEqual([
      { type: "text", text: "First." },
      { type: "text", text: "Second." },
      { type: "text", text: "Third." },
    ]);
    expect(req.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "Look:" },
          { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" }, detail: "low" },
          { type: "image", source: { kind: "url", url: "https://example.com/a.jpg" } },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "thinking", text: "hmm", signature: "sig" },
          { type: "text", text: "Checking." },
          { type: "tool_call", id: "call_A", name: "get_weather", arguments: '{"city":"Lisbon"}' },
          { type: "tool_call", id: "call_B", name: "get_time", arguments: "{}" },
        ],
      },
      {
        role: "user",
        content: [
          {
            type: "tool_result",
            toolCallId: "call_A",
            name: "get_weather",
            content: [{ type: "text", text: '{"temp_c":21}' }],
          },
          { type: "tool_result", toolCallId: "call_B", name: "get_time", content: [{ type: "text", text: "12:00" }] },
          { type: "text", text: "Thanks" },
        ],
      },
    ]);
  });

  test("what cannot be translated is a 400 naming the field; lenient decoding (estimates) skips it", () => {
    const cases: [Record<string, unknown>, string, string][] = [
      [
        { input: [{ role: "user", content: [{ type: "input_image", file_id: "file-1" }] }] },
        "input[0].content[0].file_id",
        "uploaded files",
      ],
      [
        { input: [{ role: "user", content: [{ type: "input_file", file_id: "f" }] }] },
        "input[0].content[0].type",
        "file inputs",
      ],
      [{ input: "x", tools: [{ type: "web_search" }] }, "tools[0].type", "web_search"],
      [{ input: [{ type: "web_search_call", id: "ws" }] }, "input[0].type", "web_search_call"],
      [{ input: [{ type: "item_reference", id: "msg_1" }] }, "input[0].type", "item references"],
      [{ input: "x", tool_choice: { type: "web_search" } }, "tool_choice.type", "web_search"],
      [{ input: "x", background: true }, "background", "Background"],
    ];
    for (const [b, param, words] of cases) {
      const parsed = body(b);
      const e = errorOf(() => decodeResponsesRequest(parsed));
      expect(`${e.status} ${e.param}`).toBe(`400 ${param}`);
      expect(e.message).toContain(words);
      expect(() => decodeResponsesRequest(parsed, undefined, { strict: false })).not.toThrow();
    }
    expect(
      decodeResponsesRequest(body({ input: "x", tools: [{ type: "web_search" }] }), undefined, { strict: false }).tools,
    ).toBeUndefined();
  });
});

describe("encoding", () => {
  test("finish reasons -> status and incomplete_details (PROTOCOLS 5.5)", () => {
    const cases: [FinishReason, string, unknown][] = [
      ["end_turn", "completed", null],
      ["stop_sequence", "completed", null],
      ["tool_calls", "completed", null],
      ["max_tokens", "incomplete", { reason: "max_output_tokens" }],
      ["context_window_exceeded", "incomplete", { reason: "max_output_tokens" }],
      ["content_filter", "incomplete", { reason: "content_filter" }],
      ["error", "failed", null],
    ];
    for (const [reason, status, details] of cases) {
      const r = encodeResponse(canonical([{ type: "text", text: "Hi" }], reason), body({ input: "x" }), META);
      expect([reason, r.status, r.incomplete_details] as unknown[]).toEqual([reason, status, details]);
      expect(r.output[0]?.type === "message" && r.output[0].status).toBe(
        status === "incomplete" ? "incomplete" : "completed",
      );
      if (status === "failed") expect(r.error?.code).toBe("server_error");
      else expect(r.error).toBeNull();
    }
  });

  test("output items, ids, usage with cached and reasoning tokens, echoes; valid against the schema", () => {
    const r = encodeResponse(
      canonical(
        [
          { type: "thinking", text: "Let me check.", signature: "EqQB" },
          { type: "thinking", text: "", redacted: "opaque" },
          { type: "text", text: "Checking " },
          { type: "text", text: "both." },
          { type: "tool_call", id: "call_Lis1", name: "get_weather", arguments: '{"city":"Lisbon"}' },
          { type: "tool_call", id: "call_Por2", name: "get_weather", arguments: '{"city":"Porto"}' },
        ],
        "tool_calls",
      ),
      body({ input: "x", instructions: "Be brief.", temperature: 0.5, metadata: { team: "a" } }),
      { ...META, previousResponseId: "resp_prev" },
    );
    expect(r).toMatchObject({
      id: META.id,
      object: "response",
      created_at: 1761000000,
      status: "completed",
      model: "m-2025",
      error: null,
      incomplete_details: null,
      instructions: "Be brief.",
      previous_response_id: "resp_prev",
      temperature: 0.5,
      top_p: 1,
      tool_choice: "auto",
      parallel_tool_calls: true,
      metadata: { team: "a" },
      store: true,
      output_text: "Checking both.",
      usage: {
        input_tokens: 1200,
        input_tokens_details: { cached_tokens: 1024, cache_write_tokens: 0 },
        output_tokens: 40,
        output_tokens_details: { reasoning_tokens: 24 },
        total_tokens: 1240,
      },
    });
    expect(r.output.map((i) => i.type)).toEqual(["reasoning", "message", "function_call", "function_call"]);
    const [rs, msg, fc1, fc2] = r.output as [OutputItem, OutputItem, OutputItem, OutputItem];
    expect(rs).toMatchObject({
      summary: [],
      content: [{ type: "reasoning_text", text: "Let me check." }],
      encrypted_content: "EqQB",
    });
    expect(rs.id).toMatch(/^rs_/);
    expect(msg).toMatchObject({
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: "Checking both.", annotations: [] }],
    });
    expect(msg.id).toMatch(/^msg_/);
    expect(fc1).toMatchObject({
      call_id: "call_Lis1",
      name: "get_weather",
      arguments: '{"city":"Lisbon"}',
      status: "completed",
    });
    expect(fc1.id).toMatch(/^fc_/);
    expect(fc2.id).not.toBe(fc1.id);
    expect(Value.Check(ResponseObject, r)).toBe(true);
  });

  test("round trip: output items sent back as input decode to the same assistant turn", () => {
    const parts = [
      { type: "thinking" as const, text: "Think.", signature: "sig-1" },
      { type: "text" as const, text: "Checking." },
      { type: "tool_call" as const, id: "call_1", name: "get_weather", arguments: '{"city":"Lisbon"}' },
    ];
    const output = outputItems(parts);
    const req = decodeResponsesRequest(body({ input: [{ role: "user", content: "Hi" }, ...(output as InputItem[])] }));
    expect(req.messages[1]).toEqual({ role: "assistant", content: parts });
  });

  test("a refusal is a part of the assistant message", () => {
    const res = canonical([{ type: "text", text: "No." }], "content_filter");
    res.choices[0] = { ...res.choices[0], refusal: "I can't help with that." } as (typeof res.choices)[0];
    const r = encodeResponse(res, body({ input: "x" }), META);
    expect(r.output).toHaveLength(1);
    expect(r.output[0]).toMatchObject({
      content: [
        { type: "output_text", text: "No." },
        { type: "refusal", refusal: "I can't help with that." },
      ],
    });
    expect(r.status).toBe("incomplete");
  });
});

const decoder = new TextDecoder();

interface Frame {
  event: string;
  data: Record<string, unknown> & { type: string; sequence_number: number };
}

function frames(bytes: Uint8Array[]): Frame[] {
  return bytes.map((b) => {
    const text = decoder.decode(b);
    const m = /^event: (.+)\ndata: (.+)\n\n$/s.exec(text);
    if (!m) throw new Error(`not an SSE frame: ${text}`);
    return { event: m[1] as string, data: JSON.parse(m[2] as string) };
  });
}

function run(events: StreamEvent[], b = body({ input: "x", stream: true })) {
  const completed: ResponseObjectType[] = [];
  const enc = new ResponsesStreamEncoder(b, {
    id: META.id,
    previousResponseId: null,
    onFinal: (r) => completed.push(r),
  });
  const out: Uint8Array[] = [];
  for (const ev of events) out.push(...enc.encode(ev));
  out.push(...enc.end());
  return { frames: frames(out), completed, enc };
}

/** Feeds the events to the openai SDK's own stream accumulator (it validates ids, indexes and order). */
async function sdkFinal(fs: Frame[]) {
  const ndjson = fs.map((f) => `${JSON.stringify(f.data)}\n`).join("");
  const stream = ResponseStream.fromReadableStream(new Response(ndjson).body as ReadableStream);
  const seen: string[] = [];
  stream.on("event", (e) => seen.push(e.type));
  const final = await stream.finalResponse();
  return { final, seen };
}

describe("stream encoder", () => {
  const start: StreamEvent = { type: "start", id: "up", model: "m-2025", created: 1761000000 };
  const textAndTwoCalls: StreamEvent[] = [
    start,
    { type: "text_delta", choice: 0, text: "Checking " },
    { type: "text_delta", choice: 0, text: "both." },
    { type: "tool_call_start", choice: 0, index: 0, id: "call_Lis1", name: "get_weather" },
    { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city":' },
    { type: "tool_call_delta", choice: 0, index: 0, arguments: '"Lisbon"}' },
    { type: "tool_call_start", choice: 0, index: 1, id: "call_Por2", name: "get_weather" },
    { type: "tool_call_delta", choice: 0, index: 1, arguments: '{"city":"Porto"}' },
    { type: "finish", choice: 0, reason: "tool_calls" },
    { type: "usage", usage: usage() },
  ];

  test("text and two function calls: the full event order, sequence numbers from 0, one terminal event", async () => {
    const { frames: fs, completed } = run(textAndTwoCalls);
    expect(fs.map((f) => f.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(fs.map((f) => f.data.sequence_number)).toEqual(fs.map((_, i) => i));
    for (const f of fs) {
      expect(f.data.type).toBe(f.event);
      expect(Value.Check(ResponseStreamEvent, f.data)).toBe(true);
    }
    const created = fs[0]?.data.response as ResponseObjectType;
    expect(created).toMatchObject({ id: META.id, status: "in_progress", output: [], usage: null, model: "m-2025" });
    const msgId = (fs[2]?.data.item as { id?: string } | undefined)?.id;
    expect(fs[4]?.data).toMatchObject({ item_id: msgId, output_index: 0, content_index: 0, delta: "Checking " });
    expect(fs[6]?.data).toMatchObject({ item_id: msgId, text: "Checking both." });
    expect(fs[9]?.data).toMatchObject({
      output_index: 1,
      item: { type: "function_call", call_id: "call_Lis1", name: "get_weather", arguments: "", status: "in_progress" },
    });
    expect(fs[12]?.data).toMatchObject({ output_index: 1, name: "get_weather", arguments: '{"city":"Lisbon"}' });
    expect(fs[13]?.data).toMatchObject({ output_index: 1, item: { call_id: "call_Lis1", status: "completed" } });
    expect(fs[14]?.data).toMatchObject({ output_index: 2, item: { call_id: "call_Por2", arguments: "" } });
    expect(fs[16]?.data).toMatchObject({ output_index: 2, arguments: '{"city":"Porto"}' });
    const final = fs.at(-1)?.data.response as ResponseObjectType;
    expect(final).toMatchObject({
      id: META.id,
      status: "completed",
      output_text: "Checking both.",
      usage: {
        input_tokens: 1200,
        input_tokens_details: { cached_tokens: 1024 },
        output_tokens: 40,
        output_tokens_details: { reasoning_tokens: 24 },
        total_tokens: 1240,
      },
    });
    expect(final.output.map((i) => (i.type === "function_call" ? i.call_id : i.type))).toEqual([
      "message",
      "call_Lis1",
      "call_Por2",
    ]);
    expect(completed).toEqual([final]);

    const sdk = await sdkFinal(fs);
    expect(sdk.final.output_text).toBe("Checking both.");
    expect(sdk.final.output.map((i) => (i.type === "function_call" ? i.arguments : i.type))).toEqual([
      "message",
      '{"city":"Lisbon"}',
      '{"city":"Porto"}',
    ]);
    expect(sdk.seen.at(-1)).toBe("response.completed");
  });

  test("thinking then text: a reasoning item with the signature, then the message", async () => {
    const { frames: fs } = run([
      start,
      { type: "thinking_delta", choice: 0, text: "Let me " },
      { type: "thinking_delta", choice: 0, text: "think." },
      { type: "thinking_delta", choice: 0, text: "", signature: "EqQB" },
      { type: "thinking_delta", choice: 0, text: "Again." },
      { type: "text_delta", choice: 0, text: "Done." },
      { type: "finish", choice: 0, reason: "end_turn" },
    ]);
    const final = fs.at(-1)?.data.response as ResponseObjectType;
    expect(final.output).toMatchObject([
      { type: "reasoning", content: [{ type: "reasoning_text", text: "Let me think." }], encrypted_content: "EqQB" },
      { type: "reasoning", content: [{ type: "reasoning_text", text: "Again." }] },
      { type: "message", content: [{ type: "output_text", text: "Done." }] },
    ]);
    expect(fs.filter((f) => f.event === "response.reasoning_text.delta").map((f) => f.data.delta)).toEqual([
      "Let me ",
      "think.",
      "Again.",
    ]);
    const sdk = await sdkFinal(fs);
    expect(sdk.final.output.map((i) => i.type)).toEqual(["reasoning", "reasoning", "message"]);
    expect(sdk.final.output_text).toBe("Done.");
  });

  test("a capped answer ends with response.incomplete, its last item incomplete; it is still stored", async () => {
    const { frames: fs, completed } = run([
      start,
      { type: "text_delta", choice: 0, text: "Long answ" },
      { type: "finish", choice: 0, reason: "max_tokens" },
      { type: "usage", usage: usage({ outputTokens: 5, reasoningTokens: 0 }) },
    ]);
    expect(fs.at(-1)?.event).toBe("response.incomplete");
    expect(fs.at(-2)?.data).toMatchObject({ type: "response.output_item.done", item: { status: "incomplete" } });
    expect(fs.at(-1)?.data.response).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
      usage: { output_tokens: 5 },
    });
    expect(completed).toHaveLength(1);
    const sdk = await sdkFinal(fs);
    expect(sdk.final.status).toBe("incomplete");
  });

  test("failures: an error event before anything was sent; response.failed with the partial output after", async () => {
    const err = new GatewayError(429, "slow down", { code: "upstream_rate_limited", type: "rate_limit_error" });
    const early = new ResponsesStreamEncoder(body({ input: "x" }), { id: META.id, previousResponseId: null });
    const [e] = frames(early.error(err));
    expect(e).toEqual({
      event: "error",
      data: { type: "error", sequence_number: 0, code: "upstream_rate_limited", message: "slow down", param: null },
    });

    const completed: unknown[] = [];
    const late = new ResponsesStreamEncoder(body({ input: "x" }), {
      id: META.id,
      previousResponseId: null,
      onFinal: (r) => completed.push(r),
    });
    const out = [...late.encode(start), ...late.encode({ type: "text_delta", choice: 0, text: "Lisbon is" })];
    out.push(...late.error(err));
    const fs = frames(out);
    const last = fs.at(-1);
    expect(last?.event).toBe("response.failed");
    expect(last?.data.sequence_number).toBe(fs.length - 1);
    expect(last?.data.response).toMatchObject({
      id: META.id,
      status: "failed",
      error: { code: "rate_limit_exceeded", message: "slow down" },
      output: [{ type: "message", status: "incomplete", content: [{ text: "Lisbon is" }] }],
    });
    // The failed response is still handed over for storing (GET shows it, as the API does).
    expect(completed).toEqual([last?.data.response]);
    // The SDK resolves the stream with the failed response (it does not throw on response.failed).
    const sdk = await sdkFinal(fs);
    expect(sdk.final.status).toBe("failed");
    expect(sdk.final.error?.message).toBe("slow down");
  });
});

describe("history for previous_response_id", () => {
  const stored = {
    id: "resp_gws",
    tokenId: null,
    model: "anthropic/claude",
    requestId: null,
    input: [{ type: "message", role: "user", content: "Hi" }],
    response: {
      output: [
        {
          type: "reasoning",
          id: "rs_1",
          summary: [],
          content: [{ type: "reasoning_text", text: "t" }],
          encrypted_content: "s",
        },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "f", arguments: "{}", status: "completed" },
      ],
    },
    createdAt: new Date(),
    expiresAt: new Date(),
  };

  test("built-in tool items an upstream ran go back only to an upstream Responses API", () => {
    const searched = {
      ...stored,
      model: "openai/gpt-5",
      response: {
        output: [
          { type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "news" } },
          { type: "message", id: "msg_1", status: "completed", role: "assistant", content: [] },
        ],
      },
    };
    expect(history(searched, "anthropic/claude", false).map((i) => i.type ?? "message")).toEqual([
      "message",
      "message",
    ]);
    expect(history(searched, "openai/gpt-5", true).map((i) => i.type ?? "message")).toEqual([
      "message",
      "web_search_call",
      "message",
    ]);
  });

  test("stored input then output; reasoning only for the model that produced it; no ids for native upstreams", () => {
    expect(history(stored, "anthropic/claude", false).map((i) => i.type ?? "message")).toEqual([
      "message",
      "reasoning",
      "function_call",
    ]);
    expect(history(stored, "gemini/flash", false).map((i) => i.type ?? "message")).toEqual([
      "message",
      "function_call",
    ]);
    const native = history(stored, "openai/gpt-5", true);
    expect(native).toEqual([
      { type: "message", role: "user", content: "Hi" },
      { type: "function_call", call_id: "call_1", name: "f", arguments: "{}", status: "completed" },
    ]);
  });
});
