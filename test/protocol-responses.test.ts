/**
 * The openai SDK's Responses API (`responses.create`, `responses.stream`, `retrieve`, `delete`)
 * through the gateway to every provider type: OpenAI-type (translated chat models, and mode:
 * responses models forwarded to the upstream's /responses), OpenAI-compatible, Azure, Anthropic,
 * Gemini, Vertex AI (Gemini and Claude) and Bedrock. Text, function calls, reasoning, usage and exact
 * costs; conversations with previous_response_id across gateway instances; 404s; errors.
 */
import { afterAll, beforeEach, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import OpenAI from "openai";
import { createApp } from "../src/app";
import { Authenticator } from "../src/auth/authenticator";
import { hashSecret } from "../src/keys/secret";
import { createLogger } from "../src/log";
import { describeEachBackend, type ErrorWire, type GeneratedWire, type TestGateway } from "./helpers/gateway";
import { logsOf, sdkClient } from "./helpers/inference";
import { anthropicJson, anthropicStream } from "./mocks/anthropic";
import { bedrockJson, bedrockStream } from "./mocks/bedrock";
import { geminiJson, geminiStream, testServiceAccount, vertexJson, vertexStream } from "./mocks/gemini";
import { openaiCompletion, openaiError, openaiJson, openaiStream } from "./mocks/openai";
import { sse, startMockUpstream, streamResponse } from "./mocks/upstream";

const mock = startMockUpstream();
let issued = 0;
const tokens = startMockUpstream(() =>
  Response.json({ access_token: `ya29.responses-token-${++issued}`, expires_in: 3599, token_type: "Bearer" }),
);
afterAll(() => {
  mock.close();
  tokens.close();
});
const sa = testServiceAccount(`${tokens.url}/token`, "gw-resp-project");

const OPENAI = { input: 0.15e-6, output: 0.6e-6, cacheRead: 0.075e-6 };
const GPT5 = { input: 1.25e-6, output: 10e-6, cacheRead: 0.125e-6 };
const CLAUDE = { input: 3e-6, output: 15e-6, cacheRead: 0.3e-6, cacheWrite: 3.75e-6 };
const GEMINI = { input: 0.3e-6, output: 2.5e-6, cacheRead: 0.075e-6 };

const MINI = "openai/gpt-4o-mini";
const GPT5_MODEL = "openai/gpt-5";
const CLAUDE_MODEL = "anthropic/claude-sonnet-4-5";
const GEMINI_MODEL = "gemini/gemini-2.5-flash";
const BEDROCK_MODEL = "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0";
const VERTEX_RESOURCE = "/v1/projects/gw-resp-project/locations/us-east5/publishers";

const weatherTool: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: false,
};

type Params = OpenAI.Responses.ResponseCreateParamsNonStreaming;

/** `responses.stream`: every event (sequence numbers must strictly increase from 0) and the final response. */
async function streamAll(client: OpenAI, params: Omit<Params, "stream">) {
  const s = client.responses.stream(params as Parameters<OpenAI["responses"]["stream"]>[0]);
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const ev of s) events.push(ev);
  const final = await s.finalResponse();
  const seqs = events.map((e) => e.sequence_number);
  expect(seqs[0]).toBe(0);
  for (let i = 1; i < seqs.length; i++) expect(seqs[i] as number).toBeGreaterThan(seqs[i - 1] as number);
  return { events, final, types: events.map((e) => e.type) };
}

/** A Responses API answer as an OpenAI upstream sends it (for mode: responses models). */
function upstreamResponse(text: string, status = "completed") {
  return {
    id: "resp_68ab12upstream",
    object: "response",
    created_at: 1761000000,
    status,
    model: "gpt-5-2025-08-07",
    error: null,
    incomplete_details: null,
    instructions: null,
    previous_response_id: null,
    output: [
      { type: "reasoning", id: "rs_up1", summary: [] },
      {
        type: "message",
        id: "msg_up1",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text, annotations: [] }],
      },
    ],
    parallel_tool_calls: true,
    temperature: 1,
    top_p: 1,
    tool_choice: "auto",
    tools: [],
    metadata: {},
    usage: {
      input_tokens: 2000,
      input_tokens_details: { cached_tokens: 1500 },
      output_tokens: 300,
      output_tokens_details: { reasoning_tokens: 200 },
      total_tokens: 2300,
    },
  };
}
const GPT5_COST = 500 * GPT5.input + 1500 * GPT5.cacheRead + 300 * GPT5.output;

function upstreamEvents(text: string[], opts: { cutAfter?: number } = {}) {
  const full = upstreamResponse(text.join(""));
  const created = { ...full, status: "in_progress", output: [], usage: null };
  const msg = { type: "message", id: "msg_up1", status: "in_progress", role: "assistant", content: [] };
  const part = { type: "output_text", text: "", annotations: [] };
  const events: Record<string, unknown>[] = [
    { type: "response.created", response: created },
    { type: "response.in_progress", response: created },
    { type: "response.output_item.added", output_index: 0, item: msg },
    { type: "response.content_part.added", item_id: "msg_up1", output_index: 0, content_index: 0, part },
    ...text.map((delta) => ({
      type: "response.output_text.delta",
      item_id: "msg_up1",
      output_index: 0,
      content_index: 0,
      delta,
      logprobs: [],
    })),
    {
      type: "response.output_text.done",
      item_id: "msg_up1",
      output_index: 0,
      content_index: 0,
      text: text.join(""),
      logprobs: [],
    },
    {
      type: "response.content_part.done",
      item_id: "msg_up1",
      output_index: 0,
      content_index: 0,
      part: { ...part, text: text.join("") },
    },
    { type: "response.output_item.done", output_index: 0, item: { ...full.output[1] } },
    { type: "response.completed", response: { ...full, output: [full.output[1]] } },
  ];
  const numbered = events.map((e, i) => ({ event: e.type as string, data: { ...e, sequence_number: i } }));
  return streamResponse(sse(opts.cutAfter !== undefined ? numbered.slice(0, opts.cutAfter) : numbered));
}

/** The messages of the n-th upstream request (chat completions and Anthropic bodies). */
function upstreamMessages(n: number): unknown {
  return (mock.requests[n]?.json as { messages?: unknown } | undefined)?.messages;
}

async function lastLog(gw: TestGateway, tokenId: string) {
  const rows = await logsOf(gw, tokenId);
  return rows.at(-1) as Record<string, unknown>;
}

describeEachBackend(
  "responses via the openai SDK",
  (gw) => {
    let key: GeneratedWire;
    let client: OpenAI;
    /** A key of its own per test that checks its request log. */
    const fresh = async () => {
      const k = await gw().newKey();
      return { k, c: sdkClient(gw(), k.key) };
    };
    beforeEach(async () => {
      mock.reset();
      tokens.reset();
      key ??= await gw().newKey();
      client ??= sdkClient(gw(), key.key);
    });

    // ---- OpenAI-type, translated (mode: chat) ---------------------------------------------------

    test("OpenAI chat model: text, instructions first, usage with cached and reasoning tokens, exact cost", async () => {
      const { k, c } = await fresh();
      mock.enqueue(() =>
        openaiCompletion("Lisbon is sunny.", { prompt: 1200, completion: 100, cached: 1024, reasoning: 64 }),
      );
      const res = await c.responses
        .create({
          model: MINI,
          instructions: "Be brief.",
          input: "Weather in Lisbon?",
          max_output_tokens: 300,
          temperature: 0.3,
          metadata: { team: "blue" },
        })
        .withResponse();
      expect(res.data).toMatchObject({
        object: "response",
        status: "completed",
        model: "gpt-4o-mini-2024-07-18",
        output_text: "Lisbon is sunny.",
        instructions: "Be brief.",
        previous_response_id: null,
        error: null,
        incomplete_details: null,
        temperature: 0.3,
        max_output_tokens: 300,
        metadata: { team: "blue" },
        store: true,
        usage: {
          input_tokens: 1200,
          input_tokens_details: { cached_tokens: 1024, cache_write_tokens: 0 },
          output_tokens: 100,
          output_tokens_details: { reasoning_tokens: 64 },
          total_tokens: 1300,
        },
      });
      expect(res.data.id).toMatch(/^resp_gws/);
      expect(res.data.output).toEqual([
        {
          type: "message",
          id: expect.stringMatching(/^msg_/),
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: "Lisbon is sunny.", annotations: [] }],
        },
      ]);
      expect(res.response.headers.get("x-request-id")).toMatch(/^req_/);
      expect(res.response.headers.get("x-gateway-model")).toBe(MINI);
      const up = mock.requests[0];
      expect(up?.path).toBe("/v1/chat/completions");
      expect(up?.json).toEqual({
        model: "gpt-4o-mini",
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "Weather in Lisbon?" },
        ],
        max_completion_tokens: 300,
        temperature: 0.3,
      });
      const row = await lastLog(gw(), k.token_id);
      expect(row).toMatchObject({
        endpoint: "/v1/responses",
        model: MINI,
        provider: "openai",
        status: 200,
        stream: false,
        input_tokens: 1200,
        cache_read_tokens: 1024,
        output_tokens: 100,
        reasoning_tokens: 64,
        cost_estimated: false,
      });
      expect(row.cost as number).toBeCloseTo(176 * OPENAI.input + 1024 * OPENAI.cacheRead + 100 * OPENAI.output, 15);
    });

    test("OpenAI chat model: function calls, streamed and not; flat tools become chat tools upstream", async () => {
      mock.enqueue(() => openaiJson("chat-tool-calls.json"));
      const res = await client.responses.create({
        model: MINI,
        input: "Lisbon and Porto?",
        tools: [weatherTool],
        tool_choice: "required",
        parallel_tool_calls: true,
      });
      expect(res.status).toBe("completed");
      expect(res.output).toEqual([
        {
          type: "function_call",
          id: expect.stringMatching(/^fc_/),
          call_id: "call_Lis1",
          name: "get_weather",
          arguments: '{"city":"Lisbon"}',
          status: "completed",
        },
        {
          type: "function_call",
          id: expect.stringMatching(/^fc_/),
          call_id: "call_Por2",
          name: "get_weather",
          arguments: '{"city":"Porto"}',
          status: "completed",
        },
      ]);
      expect(res.output_text).toBe("");
      expect(mock.requests[0]?.json).toMatchObject({
        tools: [
          {
            type: "function",
            function: {
              name: "get_weather",
              description: "Current weather for a city",
              parameters: weatherTool.parameters,
              strict: false,
            },
          },
        ],
        tool_choice: "required",
        parallel_tool_calls: true,
      });

      mock.enqueue(() => openaiStream("chat-stream-tools.sse"));
      const { final, types, events } = await streamAll(client, {
        model: MINI,
        input: "Lisbon and Porto?",
        tools: [weatherTool],
      });
      expect(final.output.map((i) => (i.type === "function_call" ? [i.call_id, i.arguments] : i.type))).toEqual([
        ["call_Lis1", '{"city":"Lisbon"}'],
        ["call_Por2", '{"city":"Porto"}'],
      ]);
      // One item at a time, as the API streams them: the first call is done before the second starts.
      expect(
        types.filter((t) => t.startsWith("response.function_call_arguments") || t.startsWith("response.output_item")),
      ).toEqual([
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
      ]);
      expect(final.usage).toMatchObject({ input_tokens: 85, output_tokens: 40 });
      expect(events.at(-1)?.type).toBe("response.completed");
    });

    test("OpenAI chat model streaming: the full event sequence, usage at the end, billed", async () => {
      const { k, c } = await fresh();
      mock.enqueue(() => openaiStream("chat-stream.sse", 2));
      const { final, types, events } = await streamAll(c, { model: MINI, input: "hi" });
      expect(types).toEqual([
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
      ]);
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
      const deltas = events.flatMap((e) => (e.type === "response.output_text.delta" ? [e.delta] : []));
      expect(deltas).toEqual(["Lisbon", " is sunny", " today."]);
      expect(final.output_text).toBe("Lisbon is sunny today.");
      expect(final.id).toMatch(/^resp_gws/);
      expect(final.usage).toMatchObject({
        input_tokens: 1200,
        input_tokens_details: { cached_tokens: 1024 },
        output_tokens: 5,
      });
      expect(mock.requests[0]?.json).toMatchObject({ stream: true, stream_options: { include_usage: true } });

      // Raw SSE: event names match the types; no [DONE].
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const raw = await fetch(`${gw().listen()}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${k.key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: MINI, input: "hi", stream: true }),
      });
      expect(raw.headers.get("content-type")).toContain("text/event-stream");
      const text = await raw.text();
      expect(text).not.toContain("[DONE]");
      const frames = text.split("\n\n").filter((f) => f.startsWith("event:"));
      for (const f of frames) {
        const [ev, data] = f.split("\n") as [string, string];
        expect(JSON.parse(data.slice("data: ".length)).type).toBe(ev.slice("event: ".length));
      }

      const rows = (await logsOf(gw(), k.token_id)).filter((r) => r.stream === true);
      expect(rows).toHaveLength(2);
      for (const r of rows) {
        expect(r).toMatchObject({ status: 200, input_tokens: 1200, output_tokens: 5, usage_estimated: false });
        expect(r.cost as number).toBeCloseTo(176 * OPENAI.input + 1024 * OPENAI.cacheRead + 5 * OPENAI.output, 15);
      }
    });

    // ---- OpenAI-type, forwarded natively (mode: responses) --------------------------------------

    test("mode: responses model continuing an upstream's own id: body and answer pass unchanged, upstream id kept", async () => {
      const { k, c } = await fresh();
      mock.enqueue(() => Response.json(upstreamResponse("Hello from gpt-5.")));
      const res = await c.responses.create({
        model: GPT5_MODEL,
        input: "hi",
        instructions: "Be brief.",
        tools: [{ type: "web_search" }],
        reasoning: { effort: "low" },
        previous_response_id: "resp_upstream_prev",
        include: ["reasoning.encrypted_content"],
      });
      expect(res).toMatchObject({
        id: "resp_68ab12upstream",
        output_text: "Hello from gpt-5.",
        model: "gpt-5-2025-08-07",
      });
      expect(res.output[0]).toEqual({ type: "reasoning", id: "rs_up1", summary: [] });
      const up = mock.requests[0];
      expect(up?.path).toBe("/v1/responses");
      expect(up?.headers.authorization).toBe("Bearer sk-provider-openai");
      expect(up?.json).toEqual({
        model: "gpt-5",
        input: "hi",
        instructions: "Be brief.",
        tools: [{ type: "web_search" }],
        reasoning: { effort: "low" },
        previous_response_id: "resp_upstream_prev",
        include: ["reasoning.encrypted_content"],
        stream: false,
      });
      const row = await lastLog(gw(), k.token_id);
      expect(row).toMatchObject({
        model: GPT5_MODEL,
        upstream_model: "gpt-5",
        input_tokens: 2000,
        cache_read_tokens: 1500,
        output_tokens: 300,
        reasoning_tokens: 200,
      });
      expect(row.cost as number).toBeCloseTo(GPT5_COST, 15);
    });

    test("mode: responses model streaming: upstream events forwarded with the gateway's id, stored; usage from response.completed", async () => {
      const { k, c } = await fresh();
      mock.enqueue(() => upstreamEvents(["Hello", " from", " gpt-5."]));
      const { final, events } = await streamAll(c, { model: GPT5_MODEL, input: "hi" });
      expect(final.output_text).toBe("Hello from gpt-5.");
      expect(final.id).toMatch(/^resp_gws/);
      const ids = events.flatMap((e) => ("response" in e ? [e.response.id] : []));
      expect(ids).toEqual([final.id, final.id, final.id]);
      expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
      expect(await c.responses.retrieve(final.id)).toMatchObject({ id: final.id, output_text: "Hello from gpt-5." });
      expect(events.filter((e) => e.type === "response.output_text.delta")).toHaveLength(3);
      expect(mock.requests[0]?.json).toEqual({ model: "gpt-5", input: "hi", stream: true });
      const row = await lastLog(gw(), k.token_id);
      expect(row).toMatchObject({
        stream: true,
        status: 200,
        input_tokens: 2000,
        output_tokens: 300,
        usage_estimated: false,
      });
      expect(row.cost as number).toBeCloseTo(GPT5_COST, 15);

      // The upstream breaks off: the client gets response.failed continuing its sequence numbers.
      mock.enqueue(() => upstreamEvents(["Hello", " from"], { cutAfter: 6 }));
      const cut = await streamAll(c, { model: GPT5_MODEL, input: "hi" });
      expect(cut.types.at(-1)).toBe("response.failed");
      expect(cut.events.at(-1)?.sequence_number).toBe(6);
      expect(cut.final.status).toBe("failed");
      expect(cut.final.error?.message).toContain("ended the stream");
      expect((await lastLog(gw(), k.token_id)).status).toBe(502);
    });

    test("built-in tools reach mode: responses models only; translated models answer 400 naming the tool", async () => {
      const err = await client.responses
        .create({ model: MINI, input: "news?", tools: [{ type: "web_search" }] })
        .catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.param).toBe("tools[0].type");
      expect(err.message).toContain("web_search");
      expect(err.message).toContain("mode: responses");
      const file = await client.responses
        .create({
          model: MINI,
          input: [{ role: "user", content: [{ type: "input_image", file_id: "file-abc", detail: "auto" }] }],
        })
        .catch((e) => e);
      expect(file).toBeInstanceOf(OpenAI.BadRequestError);
      expect(file.param).toBe("input[0].content[0].file_id");
      expect(mock.requests).toHaveLength(0);
    });

    // ---- OpenAI-compatible and Azure --------------------------------------------------------------

    test("OpenAI-compatible and Azure: text, streamed and not", async () => {
      mock.enqueue(() => openaiCompletion("local llama says hi", { prompt: 7, completion: 4 }, "llama3.2:3b"));
      const local = await client.responses.create({ model: "local/llama3.2:3b", input: "hi" });
      expect(local.output_text).toBe("local llama says hi");
      expect(mock.requests[0]?.path).toBe("/compat/v1/chat/completions");
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      expect((await streamAll(client, { model: "local/llama3.2:3b", input: "hi" })).final.output_text).toBe(
        "Lisbon is sunny today.",
      );

      mock.enqueue(() => openaiJson("chat-completion.json"));
      const azure = await client.responses.create({ model: "azure/gpt-4o-mini", input: "hi" });
      expect(azure.output_text).toBe("Lisbon is sunny today, around 21 °C.");
      expect(mock.requests[2]?.path).toBe("/openai/deployments/prod-gpt4o-mini/chat/completions");
      expect(mock.requests[2]?.query.get("api-version")).toBe("2024-10-21");
      mock.enqueue(() => openaiStream("chat-stream.sse"));
      const s = await streamAll(client, { model: "azure/gpt-4o-mini", input: "hi" });
      expect(s.final.output_text).toBe("Lisbon is sunny today.");
      expect(s.final.usage?.output_tokens).toBe(5);
    });

    // ---- Anthropic --------------------------------------------------------------------------------

    test("Anthropic: text with cache reads and writes, exact cost; function calls; thinking as a reasoning item", async () => {
      const { k, c } = await fresh();
      mock.enqueue(() => anthropicJson("message.json"));
      const res = await c.responses.create({
        model: CLAUDE_MODEL,
        instructions: "Be brief.",
        input: "Weather in Lisbon?",
      });
      expect(res.output_text).toBe("Lisbon is sunny today, around 21 °C.");
      expect(res.usage).toEqual({
        input_tokens: 2110,
        input_tokens_details: { cached_tokens: 1810, cache_write_tokens: 256 },
        output_tokens: 15,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 2125,
      });
      expect(mock.requests[0]?.path).toBe("/v1/messages");
      expect(mock.requests[0]?.json).toMatchObject({
        model: "claude-sonnet-4-5",
        system: [{ type: "text", text: "Be brief." }],
        messages: [{ role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] }],
        max_tokens: 64000,
      });
      const row = await lastLog(gw(), k.token_id);
      expect(row).toMatchObject({
        input_tokens: 2110,
        cache_read_tokens: 1810,
        cache_write_tokens: 256,
        output_tokens: 15,
      });
      expect(row.cost as number).toBeCloseTo(
        44 * CLAUDE.input + 1810 * CLAUDE.cacheRead + 256 * CLAUDE.cacheWrite + 15 * CLAUDE.output,
        15,
      );

      mock.enqueue(() => anthropicJson("message-tool-use.json"));
      const tools = await c.responses.create({ model: CLAUDE_MODEL, input: "Lisbon and Porto?", tools: [weatherTool] });
      expect(tools.output.map((i) => (i.type === "function_call" ? [i.call_id, i.name, i.arguments] : i.type))).toEqual(
        [
          "message",
          ["toolu_01LisbonA1b2C3d4E5f6G7h8", "get_weather", '{"city":"Lisbon"}'],
          ["toolu_01PortoZ9y8X7w6V5u4T3s2", "get_weather", '{"city":"Porto","units":"celsius"}'],
        ],
      );
      expect(tools.output_text).toBe("I'll check the weather in both cities.");
      expect(mock.requests[1]?.json).toMatchObject({
        tools: [
          { name: "get_weather", description: "Current weather for a city", input_schema: weatherTool.parameters },
        ],
      });

      mock.enqueue(() => anthropicJson("message-thinking.json"));
      const thought = await c.responses.create({
        model: CLAUDE_MODEL,
        input: "27 * 453?",
        reasoning: { effort: "low" },
      });
      expect(thought.output).toMatchObject([
        {
          type: "reasoning",
          summary: [],
          content: [{ type: "reasoning_text", text: "The user wants 27 * 453. 27 * 453 = 12231." }],
          encrypted_content: expect.stringMatching(/^EuYB/),
        },
        { type: "message", content: [{ type: "output_text", text: "27 × 453 = 12,231." }] },
      ]);
      expect(thought.output[0]?.id).toMatch(/^rs_/);
    });

    test("Anthropic streaming: text, function calls and thinking, each billed", async () => {
      const { k, c } = await fresh();
      mock.enqueue(() => anthropicStream("stream-text.sse", 1));
      const text = await streamAll(c, { model: CLAUDE_MODEL, input: "hi" });
      expect(text.final.output_text.length).toBeGreaterThan(0);
      expect(text.final.usage).toMatchObject({
        input_tokens: 2110,
        input_tokens_details: { cached_tokens: 1810 },
        output_tokens: 15,
      });
      const row = await lastLog(gw(), k.token_id);
      expect(row).toMatchObject({ stream: true, cache_write_tokens: 256 });
      expect(row.cost as number).toBeCloseTo(
        44 * CLAUDE.input + 1810 * CLAUDE.cacheRead + 256 * CLAUDE.cacheWrite + 15 * CLAUDE.output,
        15,
      );

      mock.enqueue(() => anthropicStream("stream-tools.sse"));
      const tools = await streamAll(c, { model: CLAUDE_MODEL, input: "Lisbon and Porto?", tools: [weatherTool] });
      expect(tools.final.output.map((i) => i.type)).toEqual(["message", "function_call", "function_call"]);
      const calls = tools.final.output.flatMap((i) => (i.type === "function_call" ? [i] : []));
      expect(calls[0]?.call_id).toBe("toolu_01LisbonA1b2C3d4E5f6G7h8");
      expect(JSON.parse(calls[0]?.arguments ?? "")).toEqual({ city: "Lisbon" });
      expect(tools.final.usage).toMatchObject({ input_tokens: 412, output_tokens: 96 });

      mock.enqueue(() => anthropicStream("stream-thinking.sse"));
      const thinking = await streamAll(c, { model: CLAUDE_MODEL, input: "27 * 453?" });
      expect(thinking.final.output[0]).toMatchObject({
        type: "reasoning",
        content: [{ type: "reasoning_text", text: "The user wants 27 * 453. 27 * 453 = 12231." }],
        encrypted_content: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds6bYZ1pI1w==",
      });
      expect(thinking.types).toContain("response.reasoning_text.delta");
      expect(thinking.final.output.at(-1)?.type).toBe("message");
    });

    test("Anthropic: a failure mid-stream is response.failed; the SDK resolves with the failed response", async () => {
      const { k, c } = await fresh();
      mock.enqueue(() => anthropicStream("stream-overloaded.sse"));
      const { final, types, events } = await streamAll(c, { model: CLAUDE_MODEL, input: "hi" });
      expect(types.at(-1)).toBe("response.failed");
      expect(final.status).toBe("failed");
      expect(final.error?.message).toContain("Overloaded");
      expect(final.output).toMatchObject([{ type: "message", status: "incomplete", content: [{ text: "Lisbon is" }] }]);
      expect(events.some((e) => e.type === "response.completed")).toBe(false);
      const row = await lastLog(gw(), k.token_id);
      expect(row).toMatchObject({ status: 503, stream: true });
      // The failed response is kept, as the API keeps it: GET shows it.
      const got = await c.responses.retrieve(final.id);
      expect(got).toMatchObject({
        id: final.id,
        status: "failed",
        error: { message: expect.stringContaining("Overloaded") },
      });
    });

    // ---- Gemini -----------------------------------------------------------------------------------

    test("Gemini: text with cached and thinking tokens, exact cost; function calls with and without ids; streams", async () => {
      const { k, c } = await fresh();
      mock.enqueue(() => geminiJson("generate-content.json"));
      const res = await c.responses.create({
        model: GEMINI_MODEL,
        input: "Weather in Lisbon?",
        instructions: "Be brief.",
      });
      expect(res.output_text).toBe("Clear skies, 21 °C in Lisbon.");
      expect(res.usage).toEqual({
        input_tokens: 1854,
        input_tokens_details: { cached_tokens: 1536, cache_write_tokens: 0 },
        output_tokens: 152,
        output_tokens_details: { reasoning_tokens: 140 },
        total_tokens: 2006,
      });
      expect(mock.requests[0]?.path).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
      expect(mock.requests[0]?.json).toMatchObject({
        systemInstruction: { parts: [{ text: "Be brief." }] },
        contents: [{ role: "user", parts: [{ text: "Weather in Lisbon?" }] }],
      });
      const row = await lastLog(gw(), k.token_id);
      expect(row).toMatchObject({
        input_tokens: 1854,
        cache_read_tokens: 1536,
        output_tokens: 152,
        reasoning_tokens: 140,
      });
      expect(row.cost as number).toBeCloseTo(318 * GEMINI.input + 1536 * GEMINI.cacheRead + 152 * GEMINI.output, 15);

      mock.enqueue(() => geminiJson("generate-content-tools.json"));
      const tools = await c.responses.create({ model: GEMINI_MODEL, input: "Lisbon and Porto?", tools: [weatherTool] });
      const calls = tools.output.flatMap((i) => (i.type === "function_call" ? [i] : []));
      expect(calls.map((x) => [x.name, x.arguments])).toEqual([
        ["get_weather", '{"city":"Lisbon"}'],
        ["get_weather", '{"city":"Porto","units":"celsius"}'],
      ]);
      expect(calls[0]?.call_id).toBe("fc_lisbon_01");
      expect(calls[1]?.call_id).toMatch(/^call_/);
      expect(tools.output_text).toBe("Checking both cities.");
      expect(mock.requests[1]?.json).toMatchObject({
        tools: [{ functionDeclarations: [{ name: "get_weather" }] }],
      });

      mock.enqueue(() => geminiStream("stream.sse"));
      const s = await streamAll(c, { model: GEMINI_MODEL, input: "Weather in Lisbon?" });
      expect(s.final.output_text.endsWith(" in Lisbon.")).toBe(true);
      expect(s.final.usage).toMatchObject({
        input_tokens: 1854,
        output_tokens: 152,
        output_tokens_details: { reasoning_tokens: 140 },
      });
      expect(mock.requests[2]?.path).toBe("/v1beta/models/gemini-2.5-flash:streamGenerateContent");
      const streamed = await lastLog(gw(), k.token_id);
      expect(streamed.cost as number).toBeCloseTo(
        318 * GEMINI.input + 1536 * GEMINI.cacheRead + 152 * GEMINI.output,
        15,
      );

      mock.enqueue(() => geminiStream("stream-tools.sse"));
      const st = await streamAll(c, { model: GEMINI_MODEL, input: "Lisbon and Porto?", tools: [weatherTool] });
      expect(st.final.output.map((i) => (i.type === "function_call" ? i.name : i.type))).toEqual([
        "message",
        "get_weather",
        "get_weather",
      ]);
    });

    // ---- Vertex and Bedrock -----------------------------------------------------------------------

    test("Vertex AI: Gemini and Claude models, streamed and not", async () => {
      mock.enqueue(() => vertexJson("generate-content.json"));
      const g = await client.responses.create({ model: "vertex/gemini-2.5-flash", input: "Weather in Porto?" });
      expect(g.output_text).toBe("Porto is cloudy, 17 °C.");
      expect(mock.requests[0]?.path).toBe(`${VERTEX_RESOURCE}/google/models/gemini-2.5-flash:generateContent`);
      expect(mock.requests[0]?.headers.authorization).toMatch(/^Bearer ya29\.responses-token-/);
      mock.enqueue(() => vertexStream("stream.sse"));
      expect((await streamAll(client, { model: "vertex/gemini-2.5-flash", input: "Porto?" })).final.output_text).toBe(
        "Porto is cloudy, 17 °C.",
      );

      mock.enqueue(() => vertexJson("claude-message.json"));
      const cl = await client.responses.create({ model: "vertex/claude-sonnet-4-5@20250929", input: "Lisbon?" });
      expect(cl.output_text).toBe("It is clear and 21 °C in Lisbon.");
      expect(mock.requests[2]?.path).toBe(`${VERTEX_RESOURCE}/anthropic/models/claude-sonnet-4-5@20250929:rawPredict`);
      mock.enqueue(() => vertexStream("claude-stream.sse"));
      const cs = await streamAll(client, { model: "vertex/claude-sonnet-4-5@20250929", input: "Lisbon?" });
      expect(cs.final.output_text).toBe("Checking");
      expect(cs.final.output.at(-1)).toMatchObject({
        type: "function_call",
        call_id: "toolu_vrtx_01A",
        name: "get_weather",
      });
    });

    test("Bedrock: text, streamed and not", async () => {
      mock.enqueue(() => bedrockJson("converse-text.json"));
      const r = await client.responses.create({ model: BEDROCK_MODEL, input: "Weather in Lisbon?" });
      expect(r.output_text).toBe("Lisbon is sunny today, around 21 °C.");
      expect(r.usage).toMatchObject({
        input_tokens: 2600,
        input_tokens_details: { cached_tokens: 2000 },
        output_tokens: 50,
      });
      expect(mock.requests[0]?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse");
      mock.enqueue(() => bedrockStream("converse-stream-text.json", { delayMs: 1 }));
      const s = await streamAll(client, { model: BEDROCK_MODEL, input: "Weather in Lisbon?" });
      expect(s.final.output_text).toBe("Lisbon is sunny today.");
      expect(s.final.usage?.output_tokens).toBe(5);
      expect(mock.requests[1]?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream");
    });

    // ---- conversations ----------------------------------------------------------------------------

    test("previous_response_id: the stored turns are replayed upstream (function_call_output included), on any instance", async () => {
      mock.enqueue(() =>
        Response.json({
          id: "chatcmpl-turn1",
          object: "chat.completion",
          created: 1761000000,
          model: "gpt-4o-mini-2024-07-18",
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content: null,
                tool_calls: [
                  { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
                ],
              },
              finish_reason: "tool_calls",
            },
          ],
          usage: { prompt_tokens: 50, completion_tokens: 10, total_tokens: 60 },
        }),
      );
      const r1 = await client.responses.create({
        model: MINI,
        instructions: "Be brief.",
        input: "Weather in Lisbon?",
        tools: [weatherTool],
      });
      expect(r1.output[0]).toMatchObject({ type: "function_call", call_id: "call_1" });

      mock.enqueue(() => openaiCompletion("It is 21 °C.", { prompt: 80, completion: 6 }));
      const r2 = await client.responses.create({
        model: MINI,
        previous_response_id: r1.id,
        input: [{ type: "function_call_output", call_id: "call_1", output: '{"temp_c":21}' }],
        tools: [weatherTool],
      });
      expect(r2).toMatchObject({ previous_response_id: r1.id, output_text: "It is 21 °C.", instructions: null });
      // instructions are not carried over; the earlier turns are.
      expect(upstreamMessages(1)).toEqual([
        { role: "user", content: "Weather in Lisbon?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: '{"temp_c":21}' },
      ]);

      // Turn 3 on another gateway instance sharing the database, streamed.
      const other = secondInstance(gw());
      try {
        const otherClient = new OpenAI({ baseURL: `${other.url}/v1`, apiKey: key.key, maxRetries: 0 });
        mock.enqueue(() => openaiStream("chat-stream.sse"));
        const r3 = await streamAll(otherClient, {
          model: MINI,
          previous_response_id: r2.id,
          instructions: "Answer in French.",
          input: "And tomorrow?",
        });
        expect(r3.final.previous_response_id).toBe(r2.id);
        expect(upstreamMessages(2)).toEqual([
          { role: "system", content: "Answer in French." },
          { role: "user", content: "Weather in Lisbon?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Lisbon"}' } },
            ],
          },
          { role: "tool", tool_call_id: "call_1", content: '{"temp_c":21}' },
          { role: "assistant", content: "It is 21 °C." },
          { role: "user", content: "And tomorrow?" },
        ]);
        // ...and the streamed turn continues back on the first instance, straight away.
        mock.enqueue(() => openaiCompletion("Merci.", { prompt: 10, completion: 2 }));
        await client.responses.create({ model: MINI, previous_response_id: r3.final.id, input: "Thanks" });
        const messages = upstreamMessages(3) as unknown[];
        expect(messages.slice(-3)).toEqual([
          { role: "user", content: "And tomorrow?" },
          { role: "assistant", content: "Lisbon is sunny today." },
          { role: "user", content: "Thanks" },
        ]);
      } finally {
        await other.close();
      }

      // GET returns the stored response to its key only; DELETE removes it.
      const got = await client.responses.retrieve(r2.id);
      expect(got).toMatchObject({
        id: r2.id,
        output_text: "It is 21 °C.",
        previous_response_id: r1.id,
        usage: r2.usage ?? {},
      });
      const stranger = sdkClient(gw(), (await gw().newKey()).key);
      expect(await stranger.responses.retrieve(r2.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
      await client.responses.delete(r2.id);
      expect(await client.responses.retrieve(r2.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    });

    test("previous_response_id with thinking: Anthropic gets its signed thinking back on the next turn", async () => {
      mock.enqueue(() => anthropicJson("message-thinking.json"));
      const r1 = await client.responses.create({ model: CLAUDE_MODEL, input: "27 * 453?" });
      mock.enqueue(() => anthropicJson("message.json"));
      await client.responses.create({ model: CLAUDE_MODEL, input: "And 28 * 453?", previous_response_id: r1.id });
      expect(upstreamMessages(1)).toEqual([
        { role: "user", content: [{ type: "text", text: "27 * 453?" }] },
        {
          role: "assistant",
          content: [
            {
              type: "thinking",
              thinking: "The user wants 27 * 453. 27 * 453 = 12231.",
              signature: expect.stringMatching(/^EuYB/),
            },
            { type: "text", text: "27 × 453 = 12,231." },
          ],
        },
        { role: "user", content: [{ type: "text", text: "And 28 * 453?" }] },
      ]);
      // Another model continuing the conversation gets no foreign reasoning.
      mock.enqueue(() => geminiJson("generate-content.json"));
      await client.responses.create({ model: GEMINI_MODEL, input: "And 29?", previous_response_id: r1.id });
      expect(JSON.stringify(mock.requests[2]?.json)).not.toContain("12231.");
      expect(mock.requests[2]?.json).toMatchObject({
        contents: [
          { role: "user", parts: [{ text: "27 * 453?" }] },
          { role: "model", parts: [{ text: "27 × 453 = 12,231." }] },
          { role: "user", parts: [{ text: "And 29?" }] },
        ],
      });
    });

    test("a gateway response continues on a mode: responses model as inline history", async () => {
      mock.enqueue(() => openaiCompletion("Hi there.", { prompt: 5, completion: 3 }));
      const r1 = await client.responses.create({ model: MINI, input: "Hello" });
      mock.enqueue(() => Response.json(upstreamResponse("Continuing.")));
      await client.responses.create({ model: GPT5_MODEL, input: "Go on", previous_response_id: r1.id });
      const body = mock.requests[1]?.json as Record<string, unknown>;
      expect(body.previous_response_id).toBeUndefined();
      expect(body.input).toEqual([
        { type: "message", role: "user", content: "Hello" },
        {
          type: "message",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: "Hi there.", annotations: [] }],
        },
        { type: "message", role: "user", content: "Go on" },
      ]);
    });

    test("unknown, other-key, expired and unstored ids are 404 on previous_response_id, in OpenAI's shape", async () => {
      const unknown = await client.responses
        .create({ model: MINI, input: "x", previous_response_id: "resp_doesnotexist" })
        .catch((e) => e);
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
      expect(unknown.error).toEqual({
        message:
          "Previous response with id 'resp_doesnotexist' not found. It was not issued by this gateway, so only an upstream Responses API (a mode: responses model on an OpenAI-type provider) could continue it.",
        type: "invalid_request_error",
        param: "previous_response_id",
        code: "previous_response_not_found",
      });

      mock.enqueue(() => openaiCompletion("ok", { prompt: 1, completion: 1 }));
      const mine = await client.responses.create({ model: MINI, input: "x" });
      const other = sdkClient(gw(), (await gw().newKey()).key);
      const foreign = await other.responses
        .create({ model: MINI, input: "x", previous_response_id: mine.id })
        .catch((e) => e);
      expect(foreign).toBeInstanceOf(OpenAI.NotFoundError);
      expect(foreign.param).toBe("previous_response_id");
      // Nor may the master key use a key's response.
      const master = await gw().call<ErrorWire>("POST", "/v1/responses", {
        body: { model: MINI, input: "x", previous_response_id: mine.id },
      });
      expect(master.status).toBe(404);

      await gw().opened.database.db.execute(
        sql`update responses set expires_at = now() - interval '1 minute' where id = ${mine.id}`,
      );
      const expired = await client.responses
        .create({ model: MINI, input: "x", previous_response_id: mine.id })
        .catch((e) => e);
      expect(expired).toBeInstanceOf(OpenAI.NotFoundError);
      expect(await client.responses.retrieve(mine.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);

      mock.enqueue(() => openaiCompletion("ok", { prompt: 1, completion: 1 }));
      const unstored = await client.responses.create({ model: MINI, input: "x", store: false });
      expect((unstored as unknown as { store: boolean }).store).toBe(false);
      const t0 = performance.now();
      const notKept = await client.responses
        .create({ model: MINI, input: "x", previous_response_id: unstored.id })
        .catch((e) => e);
      expect(notKept).toBeInstanceOf(OpenAI.NotFoundError);
      expect(performance.now() - t0).toBeLessThan(1000);
      expect(mock.requests).toHaveLength(2);
    });

    // ---- errors -----------------------------------------------------------------------------------

    test("bad bodies are 400 naming the field, in OpenAI's shape; nothing goes upstream", async () => {
      const cases: [unknown, string][] = [
        [{ input: "x" }, "model"],
        [{ model: MINI, input: 5 }, "input"],
        [{ model: MINI, input: [{ role: "wizard", content: "x" }] }, "input[0].role"],
        [{ model: MINI, input: [{ type: "function_call_output", output: "x" }] }, "input[0].call_id"],
        [{ model: MINI, input: "x", tools: [{ type: "function" }] }, "tools[0].name"],
        [{ model: MINI, input: "x", text: { format: { type: "json_schema", schema: {} } } }, "text.format.name"],
        [{ model: MINI, input: "x", temperature: 3 }, "temperature"],
        [{ model: MINI, input: "x", max_output_tokens: 0 }, "max_output_tokens"],
        [{ model: MINI, input: [{ type: "item_reference", id: "msg_1" }] }, "input[0].type"],
        [{ model: MINI }, "input"],
      ];
      for (const [body, param] of cases) {
        const r = await gw().call<ErrorWire>("POST", "/v1/responses", { key: key.key, body });
        expect(`${param} ${r.status}`).toBe(`${param} 400`);
        expect(r.body.error).toMatchObject({ type: "invalid_request_error", param });
        expect(typeof r.body.error.message).toBe("string");
      }
      const sdk = await client.responses.create({ model: MINI, input: "x", temperature: 3 } as Params).catch((e) => e);
      expect(sdk).toBeInstanceOf(OpenAI.BadRequestError);
      expect(mock.requests).toHaveLength(0);
    });

    test("auth, unknown and forbidden models, upstream failures: the SDK raises its matching errors", async () => {
      const noKey = new OpenAI({ baseURL: `${gw().listen()}/v1`, apiKey: "sk-wrong", maxRetries: 0 });
      expect(await noKey.responses.create({ model: MINI, input: "x" }).catch((e) => e)).toBeInstanceOf(
        OpenAI.AuthenticationError,
      );
      const missing = await client.responses.create({ model: "openai/nope", input: "x" }).catch((e) => e);
      expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
      expect(missing.error).toMatchObject({ code: "model_not_found", param: "model" });
      const limited = sdkClient(gw(), (await gw().newKey({ models: [GEMINI_MODEL] })).key);
      expect(await limited.responses.create({ model: MINI, input: "x" }).catch((e) => e)).toBeInstanceOf(
        OpenAI.PermissionDeniedError,
      );

      mock.enqueue(() => openaiError(429, "Rate limit reached", "rate_limit_error", { "retry-after": "3" }));
      const limitedUp = await client.responses.create({ model: MINI, input: "x" }).catch((e) => e);
      expect(limitedUp).toBeInstanceOf(OpenAI.RateLimitError);
      mock.enqueue(() => openaiError(500, "boom", "server_error"));
      const down = await client.responses
        .stream({ model: MINI, input: "x" })
        .finalResponse()
        .catch((e) => e);
      expect(down).toBeInstanceOf(OpenAI.InternalServerError);
      mock.enqueue(() => openaiError(400, "Invalid 'input': too long.", "invalid_request_error"));
      const bad = await client.responses.create({ model: GPT5_MODEL, input: "x" }).catch((e) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect(bad.message).toContain("too long");
    });
  },
  () => ({
    inference: {
      providers: {
        openai: { type: "openai", api_base: `${mock.url}/v1`, api_key: "sk-provider-openai" },
        local: { type: "openai-compatible", api_base: `${mock.url}/compat/v1` },
        azure: { type: "azure", api_base: mock.url, api_version: "2024-10-21", api_key: "azure-provider-key" },
        anthropic: { type: "anthropic", api_base: mock.url, api_key: "sk-ant-provider" },
        gemini: { type: "gemini", api_base: `${mock.url}/v1beta`, api_key: "gemini-provider-key" },
        vertex: {
          type: "vertex",
          project: "gw-resp-project",
          location: "us-east5",
          credentials: sa.json,
          api_base: `${mock.url}/v1`,
        },
        bedrock: { type: "bedrock", api_base: mock.url, region: "us-east-1", api_key: "bedrock-provider-key" },
      },
      models: [
        {
          name: MINI,
          input_cost_per_token: OPENAI.input,
          output_cost_per_token: OPENAI.output,
          cache_read_input_token_cost: OPENAI.cacheRead,
          max_output_tokens: 16384,
        },
        {
          name: GPT5_MODEL,
          mode: "responses",
          input_cost_per_token: GPT5.input,
          output_cost_per_token: GPT5.output,
          cache_read_input_token_cost: GPT5.cacheRead,
        },
        { name: "local/*" },
        {
          name: "azure/gpt-4o-mini",
          model: "prod-gpt4o-mini",
          input_cost_per_token: 1e-6,
          output_cost_per_token: 2e-6,
        },
        {
          name: CLAUDE_MODEL,
          input_cost_per_token: CLAUDE.input,
          output_cost_per_token: CLAUDE.output,
          cache_read_input_token_cost: CLAUDE.cacheRead,
          cache_creation_input_token_cost: CLAUDE.cacheWrite,
          max_output_tokens: 64000,
        },
        {
          name: GEMINI_MODEL,
          input_cost_per_token: GEMINI.input,
          output_cost_per_token: GEMINI.output,
          cache_read_input_token_cost: GEMINI.cacheRead,
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

/** A second gateway instance over the same database (and the same providers), served on its own port. */
function secondInstance(gw: TestGateway): { url: string; close(): Promise<void> } {
  const log = createLogger("error", () => {});
  const app = createApp({
    database: gw.opened.database,
    authenticator: new Authenticator(gw.opened.database.db, {
      masterKeyHash: hashSecret(gw.masterKey),
      cacheTtlMs: 60_000,
      cacheMaxEntries: 1000,
    }),
    log,
    maxBodyBytes: 64 * 1024,
    responsesRetentionMs: 30 * 86_400_000,
    ...gw.inference,
  });
  app.listen({ port: 0, hostname: "127.0.0.1" });
  return {
    url: `http://127.0.0.1:${app.server?.port}`,
    close: async () => {
      await app.stop(true);
    },
  };
}
