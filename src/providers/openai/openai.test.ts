import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { chunkedStream, collect } from "../../../test/helpers/streams";
import { startMockUpstream, streamResponse } from "../../../test/mocks/upstream";
import type { ProviderConfig } from "../../config/file";
import { silentLogger } from "../../log";
import type { CanonicalRequest, StreamEvent } from "../../protocols/canonical";
import { UpstreamError } from "../errors";
import { createImageFetcher } from "../images";
import type { CallContext, Deployment } from "../types";
import { createOpenAIAdapter } from "./adapter";
import { toChatRequest } from "./request";
import { fromChatCompletion } from "./response";
import { chatChunkEvents } from "./stream";

const fixture = (name: string) => readFileSync(join(import.meta.dir, "fixtures", name), "utf8");
const ctx = (): CallContext => ({
  signal: new AbortController().signal,
  log: silentLogger,
  fetchImage: createImageFetcher(),
});
const deployment = (over: Partial<Deployment> = {}): Deployment => ({
  id: "p/m",
  provider: "p",
  upstreamModel: "up-model",
  weight: 1,
  ...over,
});

const base: CanonicalRequest = {
  model: "openai/x",
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
    { role: "assistant", content: [{ type: "tool_call", id: "call_1", name: "look", arguments: '{"q":1}' }] },
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
        { type: "text", text: "And now?" },
      ],
    },
  ],
  stream: false,
};

describe("canonical -> OpenAI chat request", () => {
  test("system joined, images as data URLs, tool results as tool messages before the user's text", () => {
    const body = toChatRequest(base, "gpt-x", "max_completion_tokens");
    expect(body.model).toBe("gpt-x");
    expect(body.messages).toEqual([
      { role: "system", content: "Be brief.\n\nUse metric." },
      {
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA", detail: "low" } },
        ],
      },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "look", arguments: '{"q":1}' } }],
      },
      { role: "tool", tool_call_id: "call_1", content: "a cat" },
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "https://x/cat.png" } },
          { type: "text", text: "And now?" },
        ],
      },
    ]);
  });

  test("tools, tool_choice, response_format, sampling and the max-tokens field per provider type", () => {
    const req: CanonicalRequest = {
      ...base,
      tools: [{ name: "look", description: "d", parameters: { type: "object" }, strict: true }],
      toolChoice: { type: "tool", name: "look" },
      parallelToolCalls: false,
      responseFormat: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true },
      maxTokens: 99,
      temperature: 0.2,
      topP: 0.9,
      stop: ["END"],
      seed: 7,
      n: 2,
      reasoningEffort: "low",
      user: "u1",
      stream: true,
    };
    const body = toChatRequest(req, "m", "max_completion_tokens");
    expect(body).toMatchObject({
      tools: [
        {
          type: "function",
          function: { name: "look", description: "d", parameters: { type: "object" }, strict: true },
        },
      ],
      tool_choice: { type: "function", function: { name: "look" } },
      parallel_tool_calls: false,
      response_format: { type: "json_schema", json_schema: { name: "out", schema: { type: "object" }, strict: true } },
      max_completion_tokens: 99,
      temperature: 0.2,
      top_p: 0.9,
      stop: ["END"],
      seed: 7,
      n: 2,
      reasoning_effort: "low",
      user: "u1",
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(toChatRequest(req, "m", "max_tokens")).toMatchObject({ max_tokens: 99 });
    expect(toChatRequest(req, "m", "max_tokens")).not.toHaveProperty("max_completion_tokens");
    expect(toChatRequest({ ...req, toolChoice: { type: "required" } }, "m", "max_tokens").tool_choice).toBe("required");
  });
});

describe("OpenAI chat response and stream -> canonical", () => {
  test("a completion with cached tokens", () => {
    const res = fromChatCompletion(JSON.parse(fixture("chat-completion.json")), "openai");
    expect(res).toMatchObject({
      id: "chatcmpl-CXa1b2c3d4e5f6g7h8i9j0",
      model: "gpt-4o-mini-2024-07-18",
      choices: [
        {
          index: 0,
          finishReason: "end_turn",
          content: [{ type: "text", text: "Lisbon is sunny today, around 21 °C." }],
        },
      ],
      usage: { inputTokens: 1200, cacheReadTokens: 1024, cacheWriteTokens: 0, outputTokens: 12, reasoningTokens: 0 },
    });
  });

  test("parallel tool calls", () => {
    const res = fromChatCompletion(JSON.parse(fixture("chat-tool-calls.json")), "openai");
    expect(res.choices[0]?.finishReason).toBe("tool_calls");
    expect(res.choices[0]?.content).toEqual([
      { type: "tool_call", id: "call_Lis1", name: "get_weather", arguments: '{"city":"Lisbon"}' },
      { type: "tool_call", id: "call_Por2", name: "get_weather", arguments: '{"city":"Porto"}' },
    ]);
  });

  test("text and tool-call streams, split at awkward byte boundaries", async () => {
    for (const cut of [1, 7, 64, 4096]) {
      const text = await collect(chatChunkEvents(chunkedStream(fixture("chat-stream.sse"), cut), "openai"));
      expect(
        text
          .filter((e) => e.type === "text_delta")
          .map((e) => (e.type === "text_delta" ? e.text : ""))
          .join(""),
      ).toBe("Lisbon is sunny today.");
      expect(text[0]).toMatchObject({
        type: "start",
        id: "chatcmpl-CXs0000000000000000000",
        model: "gpt-4o-mini-2024-07-18",
      });
      expect(text.find((e) => e.type === "finish")).toEqual({ type: "finish", choice: 0, reason: "end_turn" });
      expect(text.at(-1)).toMatchObject({
        type: "usage",
        usage: { inputTokens: 1200, cacheReadTokens: 1024, outputTokens: 5 },
      });
    }
    const tools = await collect(chatChunkEvents(chunkedStream(fixture("chat-stream-tools.sse")), "openai"));
    expect(tools.filter((e) => e.type.startsWith("tool_call"))).toEqual([
      { type: "tool_call_start", choice: 0, index: 0, id: "call_Lis1", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city":"Lis' },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: 'bon"}' },
      { type: "tool_call_start", choice: 0, index: 1, id: "call_Por2", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 1, arguments: '{"city":"Porto"}' },
    ]);
    expect(tools.find((e) => e.type === "finish")).toMatchObject({ reason: "tool_calls" });
  });

  test("an error frame mid-stream is an upstream failure", async () => {
    const text = `${fixture("chat-stream.sse").split("\n\n")[0]}\n\ndata: {"error":{"message":"overloaded","type":"server_error"}}\n\n`;
    const events: StreamEvent[] = [];
    const err = await (async () => {
      for await (const e of chatChunkEvents(chunkedStream(text), "openai")) events.push(e);
    })().catch((e) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err.message).toContain("overloaded");
    expect(events[0]?.type).toBe("start");
  });
});

describe("OpenAI-family adapters on the wire", () => {
  const mock = startMockUpstream();
  afterAll(() => mock.close());
  beforeEach(() => mock.reset());
  const completion = () =>
    new Response(fixture("chat-completion.json"), { headers: { "content-type": "application/json" } });
  const req: CanonicalRequest = {
    model: "x/y",
    system: [],
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
    stream: false,
    maxTokens: 5,
  };

  test("openai: bearer key, /chat/completions, max_completion_tokens, provider and deployment headers", async () => {
    const cfg: ProviderConfig = {
      type: "openai",
      api_base: `${mock.url}/v1/`,
      api_key: "sk-prov",
      headers: { "x-org": "o1" },
    };
    mock.enqueue(completion);
    const a = createOpenAIAdapter("openai", "openai", cfg);
    const res = await a.chat(req, deployment({ headers: { "x-team": "t" } }), ctx());
    expect(res.choices[0]?.content[0]).toMatchObject({ text: "Lisbon is sunny today, around 21 °C." });
    const r = mock.requests[0];
    expect(r?.path).toBe("/v1/chat/completions");
    expect(r?.headers).toMatchObject({ authorization: "Bearer sk-prov", "x-org": "o1", "x-team": "t" });
    expect(r?.json).toMatchObject({ model: "up-model", max_completion_tokens: 5 });
    mock.enqueue(completion);
    await a.chat(req, deployment({ apiKey: "sk-deploy", apiBase: `${mock.url}/alt` }), ctx());
    expect(mock.requests[1]).toMatchObject({
      path: "/alt/chat/completions",
      headers: { authorization: "Bearer sk-deploy" },
    });
  });

  test("openai-compatible: requires api_base, no auth header without a key, max_tokens by default", async () => {
    expect(() => createOpenAIAdapter("ollama", "openai-compatible", { type: "openai-compatible" })).toThrow(
      "providers.ollama.api_base",
    );
    const a = createOpenAIAdapter("ollama", "openai-compatible", {
      type: "openai-compatible",
      api_base: `${mock.url}/v1`,
    });
    mock.enqueue(completion);
    await a.chat(req, deployment(), ctx());
    expect(mock.requests[0]?.headers.authorization).toBeUndefined();
    expect(mock.requests[0]?.json).toMatchObject({ max_tokens: 5 });
    mock.enqueue(completion);
    await a.passthrough?.(
      "openai-chat",
      { model: "x", messages: [], max_completion_tokens: 9 },
      deployment(),
      ctx(),
      false,
    );
    expect(mock.requests[1]?.json).toEqual({ model: "up-model", messages: [], max_tokens: 9 });
    const b = createOpenAIAdapter("vllm", "openai-compatible", {
      type: "openai-compatible",
      api_base: mock.url,
      max_tokens_field: "max_completion_tokens",
    });
    mock.enqueue(completion);
    await b.chat(req, deployment(), ctx());
    expect(mock.requests[2]?.json).toMatchObject({ max_completion_tokens: 5 });
  });

  test("azure: deployment URL with api-version and the api-key header; the v1 API puts the model in the body", async () => {
    expect(() => createOpenAIAdapter("az", "azure", { type: "azure", api_base: mock.url })).toThrow(
      "providers.az.api_version",
    );
    expect(() => createOpenAIAdapter("az", "azure", { type: "azure", api_version: "2024-10-21" })).toThrow(
      "providers.az.api_base",
    );
    const a = createOpenAIAdapter("az", "azure", {
      type: "azure",
      api_base: mock.url,
      api_version: "2024-10-21",
      api_key: "az-key",
    });
    mock.enqueue(completion);
    await a.chat(req, deployment({ upstreamModel: "my-gpt4o" }), ctx());
    const r = mock.requests[0];
    expect(r?.path).toBe("/openai/deployments/my-gpt4o/chat/completions");
    expect(r?.query.get("api-version")).toBe("2024-10-21");
    expect(r?.headers["api-key"]).toBe("az-key");
    expect(r?.headers.authorization).toBeUndefined();
    const v1 = createOpenAIAdapter("az", "azure", {
      type: "azure",
      api_base: mock.url,
      api_version: "v1",
      api_key: "az-key",
    });
    mock.enqueue(completion);
    await v1.chat(req, deployment({ upstreamModel: "gpt-4o" }), ctx());
    expect(mock.requests[1]?.path).toBe("/openai/v1/chat/completions");
    expect(mock.requests[1]?.json).toMatchObject({ model: "gpt-4o" });
  });

  test("statuses, retry-after and unreachable upstreams become classified UpstreamErrors with keys scrubbed", async () => {
    const a = createOpenAIAdapter("openai", "openai", {
      type: "openai",
      api_base: mock.url,
      api_key: "sk-secret-provider-key",
    });
    mock.enqueue(() =>
      Response.json({ error: { message: "Incorrect API key provided: sk-secret-provider-key" } }, { status: 401 }),
    );
    const e401 = await a.chat(req, deployment(), ctx()).catch((e) => e);
    expect(e401).toBeInstanceOf(UpstreamError);
    expect(e401.status).toBe(401);
    expect(e401.message).not.toContain("sk-secret-provider-key");
    mock.enqueue(() =>
      Response.json(
        { error: { message: "slow down", type: "requests" } },
        { status: 429, headers: { "retry-after": "3" } },
      ),
    );
    const e429 = await a.chat(req, deployment(), ctx()).catch((e) => e);
    expect([e429.status, e429.retryAfterMs, e429.retryable]).toEqual([429, 3000, true]);
    const gone = createOpenAIAdapter("openai", "openai", { type: "openai", api_base: "http://127.0.0.1:1" });
    const eConn = await gone.chat(req, deployment(), ctx()).catch((e) => e);
    expect([eConn.kind, eConn.retryable]).toEqual(["connection", true]);
    mock.enqueue(() => streamResponse(["data: {not json}\n\n"]));
    const stream = await a.chatStream({ ...req, stream: true }, deployment(), ctx());
    const bad = await collect(stream).catch((e) => e);
    expect(bad.kind).toBe("protocol");
  });
});
