/**
 * The Responses dialect of the OpenAI-family adapters (models of catalog mode `responses`): the
 * translation tables both ways (request, answers, streams) against recorded-shape fixtures, and the
 * adapters' calls on the wire.
 */
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chunkedStream, collect } from "../../../test/helpers/streams";
import { startCuttingUpstream, startMockUpstream, streamResponse } from "../../../test/mocks/upstream";
import { GatewayError } from "../../http/errors";
import { silentLogger } from "../../log";
import type { CanonicalRequest, StreamEvent } from "../../protocols/canonical";
import { fromResponsesObject, responsesStreamEvents, toResponsesBody } from "../dialects/openai-responses";
import { UpstreamError } from "../errors";
import { createImageFetcher } from "../images";
import type { CallContext, Deployment } from "../types";
import { createOpenAIAdapter } from "./adapter";

const fixture = (name: string) => readFileSync(join(import.meta.dir, "fixtures", name), "utf8");
const json = (name: string) => JSON.parse(fixture(name));
const ctx = (over: Partial<CallContext> = {}): CallContext => ({
  signal: new AbortController().signal,
  log: silentLogger,
  fetchImage: createImageFetcher(),
  responsesApi: true,
  ...over,
});
const deployment = (over: Partial<Deployment> = {}): Deployment => ({
  id: "openai/o3-pro",
  provider: "openai",
  upstreamModel: "o3-pro",
  weight: 1,
  ...over,
});
const events = (text: string) => collect(responsesStreamEvents(chunkedStream(text, 37), "openai"));

const request: CanonicalRequest = {
  model: "openai/o3-pro",
  system: [
    { type: "text", text: "Be brief." },
    { type: "text", text: "Use metric." },
  ],
  messages: [
    {
      role: "user",
      content: [
        { type: "text", text: "What is this?" },
        { type: "image", source: { kind: "base64", mediaType: "image/png", data: "AAAA" }, detail: "low" },
      ],
    },
    {
      role: "assistant",
      content: [
        { type: "thinking", text: "Claude's thoughts", signature: "sig" },
        { type: "text", text: "Let me look." },
        { type: "tool_call", id: "call_1", name: "look", arguments: '{"q":1}' },
      ],
    },
    {
      role: "user",
      content: [
        {
          type: "tool_result",
          toolCallId: "call_1",
          content: [
            { type: "text", text: "a cat" },
            { type: "image", source: { kind: "url", url: "https://x/cat.png" } },
          ],
        },
        { type: "tool_result", toolCallId: "call_2", content: [{ type: "text", text: "timeout" }], isError: true },
        { type: "text", text: "And now?" },
      ],
    },
  ],
  tools: [{ name: "look", description: "Look closer", parameters: { type: "object", properties: {} } }],
  toolChoice: { type: "tool", name: "look" },
  parallelToolCalls: false,
  responseFormat: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true },
  maxTokens: 500,
  temperature: 0.2,
  topP: 0.9,
  topK: 40,
  seed: 7,
  reasoningEffort: "high",
  user: "u-1",
  stream: false,
};

describe("canonical -> Responses request", () => {
  test("instructions, items in order (tool outputs by call_id, images), flat tools with explicit strict, options", () => {
    expect(toResponsesBody(request, "o3-pro")).toEqual({
      model: "o3-pro",
      instructions: "Be brief.\n\nUse metric.",
      input: [
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "What is this?" },
            { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "low" },
          ],
        },
        // Another vendor's thinking is not sent.
        { type: "message", role: "assistant", content: "Let me look." },
        { type: "function_call", call_id: "call_1", name: "look", arguments: '{"q":1}' },
        {
          type: "function_call_output",
          call_id: "call_1",
          output: [
            { type: "input_text", text: "a cat" },
            { type: "input_image", image_url: "https://x/cat.png", detail: "auto" },
          ],
        },
        { type: "function_call_output", call_id: "call_2", output: "Error: timeout" },
        { type: "message", role: "user", content: "And now?" },
      ],
      tools: [
        {
          type: "function",
          name: "look",
          description: "Look closer",
          parameters: { type: "object", properties: {} },
          strict: false,
        },
      ],
      parallel_tool_calls: false,
      tool_choice: { type: "function", name: "look" },
      text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true } },
      max_output_tokens: 500,
      temperature: 0.2,
      top_p: 0.9,
      reasoning: { effort: "high" },
      user: "u-1",
      store: false,
    });
    const streamed = toResponsesBody(
      { ...request, stream: true, tools: [], toolChoice: { type: "auto" }, responseFormat: { type: "json_object" } },
      "o3-pro",
    );
    expect(streamed).toMatchObject({ stream: true, tool_choice: "auto", text: { format: { type: "json_object" } } });
    expect(streamed.tools).toBeUndefined();
  });

  test("what the Responses API cannot do is a 400 naming the field: n > 1, stop sequences", () => {
    const n = (() => toResponsesBody({ ...request, n: 2 }, "o3-pro")) as () => unknown;
    expect(n).toThrow(GatewayError);
    expect(n).toThrow("n must be 1");
    const stop = (() => toResponsesBody({ ...request, stop: ["END"] }, "o3-pro")) as () => unknown;
    expect(stop).toThrow("Stop sequences are not supported by the Responses API, which serves 'openai/o3-pro'");
    try {
      stop();
    } catch (e) {
      expect((e as GatewayError).status).toBe(400);
      expect((e as GatewayError).param).toBe("stop");
    }
  });
});

describe("Responses answers -> canonical", () => {
  test("reasoning summary as thinking, text, usage with cached and reasoning tokens", () => {
    const res = fromResponsesObject(json("responses.json"), "openai");
    expect(res).toMatchObject({ id: "resp_68f0a1b2c3d4e5f60718293a4b5c6d00", model: "o3-pro-2025-06-10" });
    expect(res.created).toBe(1761000100);
    expect(res.choices).toEqual([
      {
        index: 0,
        content: [
          { type: "thinking", text: "**Checking the forecast**\n\nLisbon in October is mild.\n\nAnswer briefly." },
          { type: "text", text: "Lisbon is sunny today, around 21 °C." },
        ],
        finishReason: "end_turn",
        refusal: null,
      },
    ]);
    expect(res.usage).toEqual({
      inputTokens: 1820,
      cacheReadTokens: 1536,
      cacheWriteTokens: 0,
      outputTokens: 412,
      reasoningTokens: 384,
    });
  });

  test("function calls by call_id end in tool_calls; a cap is max_tokens; a content filter; a refusal", () => {
    const tools = fromResponsesObject(json("responses-tools.json"), "openai");
    expect(tools.choices[0]?.content).toEqual([
      { type: "tool_call", id: "call_Lis1a2b3c4", name: "get_weather", arguments: '{"city":"Lisbon"}' },
      { type: "tool_call", id: "call_Por5d6e7f8", name: "get_weather", arguments: '{"city":"Porto"}' },
    ]);
    expect(tools.choices[0]?.finishReason).toBe("tool_calls");
    const capped = fromResponsesObject(json("responses-incomplete.json"), "openai");
    expect(capped.choices[0]).toMatchObject({
      finishReason: "max_tokens",
      content: [{ type: "text", text: "Lisbon is" }],
    });
    const filtered = fromResponsesObject(
      { ...json("responses-incomplete.json"), incomplete_details: { reason: "content_filter" } },
      "openai",
    );
    expect(filtered.choices[0]?.finishReason).toBe("content_filter");
    const refused = fromResponsesObject(
      {
        status: "completed",
        output: [
          { type: "message", content: [{ type: "refusal", refusal: "I can't help with that." }] },
          { type: "web_search_call", id: "ws_1" },
        ],
      },
      "openai",
    );
    expect(refused.choices[0]).toMatchObject({
      content: [],
      refusal: "I can't help with that.",
      finishReason: "end_turn",
    });
  });

  test("failed and unfinished responses are upstream errors; a body without output is a protocol error", () => {
    const failed = (() =>
      fromResponsesObject(
        { status: "failed", output: [], error: { code: "rate_limit_exceeded", message: "slow down" } },
        "openai",
      )) as () => unknown;
    expect(failed).toThrow(UpstreamError);
    expect(failed).toThrow("openai failed the response: slow down");
    try {
      failed();
    } catch (e) {
      expect((e as UpstreamError).status).toBe(429);
    }
    expect(() => fromResponsesObject({ status: "queued", output: [] }, "openai")).toThrow("unfinished");
    expect(() => fromResponsesObject({ status: "completed" }, "openai")).toThrow("without output");
  });
});

describe("Responses streams -> canonical events", () => {
  test("text with a reasoning summary: start, thinking, text, finish and usage from response.completed", async () => {
    const evs = await events(fixture("responses-stream.sse"));
    expect(evs[0]).toEqual({
      type: "start",
      id: "resp_68f0a1b2c3d4e5f60718293a4b5c6d10",
      model: "o3-pro-2025-06-10",
      created: 1761000110,
    });
    const thinking = evs.filter((e) => e.type === "thinking_delta").map((e) => (e as { text: string }).text);
    expect(thinking.join("")).toBe("**Checking the forecast**\n\nLisbon in October is mild.\n\nAnswer briefly.");
    const text = evs.filter((e) => e.type === "text_delta").map((e) => (e as { text: string }).text);
    expect(text).toEqual(["Lisbon is sunny", " today, around", " 21 °C."]);
    expect(evs.slice(-2)).toEqual([
      { type: "finish", choice: 0, reason: "end_turn" },
      {
        type: "usage",
        usage: {
          inputTokens: 1820,
          cacheReadTokens: 1536,
          cacheWriteTokens: 0,
          outputTokens: 412,
          reasoningTokens: 384,
        },
      },
    ]);
  });

  test("function calls: opened by output_item.added, filled by argument deltas, numbered in order", async () => {
    const evs = await events(fixture("responses-stream-tools.sse"));
    expect(evs.filter((e) => e.type.startsWith("tool_call"))).toEqual([
      { type: "tool_call_start", choice: 0, index: 0, id: "call_Lis1a2b3c4", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city":"Lis' },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: 'bon"}' },
      { type: "tool_call_start", choice: 0, index: 1, id: "call_Por5d6e7f8", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 1, arguments: '{"city":"Porto"}' },
    ]);
    expect(evs.find((e) => e.type === "finish")).toEqual({ type: "finish", choice: 0, reason: "tool_calls" });
    expect(evs.at(-1)).toMatchObject({ type: "usage", usage: { cacheReadTokens: 128, reasoningTokens: 128 } });
  });

  test("arguments sent only whole in .done are passed on once", async () => {
    const frames = [
      { type: "response.created", sequence_number: 0, response: { id: "resp_1", model: "m", created_at: 1 } },
      {
        type: "response.output_item.added",
        sequence_number: 1,
        item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "f", arguments: "" },
      },
      { type: "response.function_call_arguments.done", sequence_number: 2, item_id: "fc_1", arguments: '{"a":1}' },
      {
        type: "response.incomplete",
        sequence_number: 3,
        response: { incomplete_details: { reason: "max_output_tokens" } },
      },
    ];
    const evs = await events(frames.map((f) => `event: ${f.type}\ndata: ${JSON.stringify(f)}\n\n`).join(""));
    expect(evs.filter((e) => e.type === "tool_call_delta")).toEqual([
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"a":1}' },
    ]);
    expect(evs.find((e) => e.type === "finish")).toMatchObject({ reason: "max_tokens" });
  });

  test("response.failed, error events, cut streams and malformed events are upstream failures", async () => {
    const created = fixture("responses-stream.sse").split("\n\n").slice(0, 2).join("\n\n");
    const fail = async (tail: string) => {
      const seen: StreamEvent[] = [];
      const err = await (async () => {
        for await (const e of responsesStreamEvents(chunkedStream(`${created}\n\n${tail}`), "openai")) seen.push(e);
      })().catch((e: unknown) => e);
      expect(seen[0]?.type).toBe("start");
      return err as UpstreamError;
    };
    const failed = await fail(
      `event: response.failed\ndata: ${JSON.stringify({ type: "response.failed", sequence_number: 2, response: { status: "failed", error: { code: "server_error", message: "The model crashed" } } })}\n\n`,
    );
    expect([failed.kind, failed.status, failed.message]).toEqual([
      "http",
      502,
      "openai failed the response: The model crashed",
    ]);
    const limited = await fail(
      `event: error\ndata: ${JSON.stringify({ type: "error", sequence_number: 2, code: "rate_limit_exceeded", message: "Too many tokens", param: null })}\n\n`,
    );
    expect([limited.status, limited.retryable, limited.message]).toEqual([
      429,
      true,
      "openai stream failed: Too many tokens",
    ]);
    const cut = await fail("");
    expect([cut.kind, cut.message]).toEqual(["protocol", "openai ended the stream before the response finished"]);
    const bad = await fail("event: response.output_text.delta\ndata: {not json}\n\n");
    expect(bad.kind).toBe("protocol");
  });
});

describe("OpenAI-family adapters call the Responses API for mode: responses models", () => {
  const mock = startMockUpstream();
  afterAll(() => mock.close());
  beforeEach(() => mock.reset());
  const jsonReply = (name: string) => () =>
    new Response(fixture(name), { headers: { "content-type": "application/json" } });
  const sseReply = (name: string) => () =>
    streamResponse(
      fixture(name)
        .split("\n\n")
        .filter((f) => f.trim() !== "")
        .map((f) => `${f}\n\n`),
    );
  const simple: CanonicalRequest = {
    model: "openai/o3-pro",
    system: [],
    messages: [{ role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] }],
    stream: false,
  };

  test("openai: POST /responses with the bearer key; answers and streams translated; chat models unchanged", async () => {
    const a = createOpenAIAdapter("openai", "openai", { type: "openai", api_base: `${mock.url}/v1`, api_key: "sk-p" });
    mock.enqueue(jsonReply("responses.json"));
    const res = await a.chat(simple, deployment(), ctx());
    expect(res.choices[0]?.content.at(-1)).toEqual({ type: "text", text: "Lisbon is sunny today, around 21 °C." });
    expect(mock.requests[0]).toMatchObject({
      path: "/v1/responses",
      headers: { authorization: "Bearer sk-p" },
      json: {
        model: "o3-pro",
        input: [{ type: "message", role: "user", content: "Weather in Lisbon?" }],
        store: false,
      },
    });
    mock.enqueue(sseReply("responses-stream.sse"));
    const evs = await collect(await a.chatStream({ ...simple, stream: true }, deployment(), ctx()));
    expect(evs.at(-1)?.type).toBe("usage");
    expect(mock.requests[1]?.json).toMatchObject({ stream: true, store: false });
    expect(mock.requests[1]?.path).toBe("/v1/responses");
    // Without the flag (mode: chat), chat completions as before.
    mock.enqueue(
      () => new Response(fixture("chat-completion.json"), { headers: { "content-type": "application/json" } }),
    );
    await a.chat(simple, deployment(), ctx({ responsesApi: undefined }));
    expect(mock.requests[2]?.path).toBe("/v1/chat/completions");
  });

  test("azure: /openai/responses with api-version and the deployment name as the model; v1 API", async () => {
    const a = createOpenAIAdapter("az", "azure", {
      type: "azure",
      api_base: mock.url,
      api_version: "2025-04-01-preview",
      api_key: "az-key",
    });
    mock.enqueue(jsonReply("responses-tools.json"));
    const res = await a.chat(simple, deployment({ upstreamModel: "my-o3-pro" }), ctx());
    expect(res.choices[0]?.finishReason).toBe("tool_calls");
    const r = mock.requests[0];
    expect(r?.path).toBe("/openai/responses");
    expect(r?.query.get("api-version")).toBe("2025-04-01-preview");
    expect(r?.headers["api-key"]).toBe("az-key");
    expect(r?.json).toMatchObject({ model: "my-o3-pro" });
    const v1 = createOpenAIAdapter("az", "azure", { type: "azure", api_base: mock.url, api_version: "v1" });
    mock.enqueue(jsonReply("responses.json"));
    await v1.chat(simple, deployment(), ctx());
    expect(mock.requests[1]?.path).toBe("/openai/v1/responses");
  });

  test("upstream errors keep their status; a connection dropped mid-body is a dropped connection", async () => {
    const a = createOpenAIAdapter("openai", "openai", { type: "openai", api_base: mock.url, api_key: "sk-p" });
    mock.enqueue(() =>
      Response.json(
        { error: { message: "This model is only supported in v1/responses", type: "invalid_request_error" } },
        { status: 400 },
      ),
    );
    const e400 = await a.chat(simple, deployment(), ctx()).catch((e: unknown) => e);
    expect(e400).toBeInstanceOf(UpstreamError);
    expect((e400 as UpstreamError).status).toBe(400);
    const cutting = startCuttingUpstream('{"id": "resp_1", "output": [', "application/json");
    const b = createOpenAIAdapter("openai", "openai", { type: "openai", api_base: cutting.url, api_key: "sk-p" });
    const dropped = (await b.chat(simple, deployment(), ctx()).catch((e: unknown) => e)) as UpstreamError;
    cutting.close();
    expect([dropped.kind, dropped.dropped]).toEqual(["connection", true]);
    expect(dropped.message).toContain("dropped the connection mid-answer");
  });
});
