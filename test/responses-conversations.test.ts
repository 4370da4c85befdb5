/**
 * previous_response_id on `mode: responses` models whose turns land on different kinds of
 * deployment: a model with an OpenAI-type deployment (answers forwarded natively to /responses) and
 * an Anthropic-type one (translated), in both orders, streamed and not; a native model falling back
 * to a translated one; and ids the gateway did not issue, which only an upstream Responses API can
 * continue. Which deployment serves a turn is forced by taking the other one down (the router then
 * retries on the healthy one), as when a provider has an outage between two turns.
 */
import { beforeEach, expect, test } from "bun:test";
import OpenAI from "openai";
import { describeEachBackend, type GeneratedWire } from "./helpers/gateway";
import { sdkClient } from "./helpers/inference";
import { anthropicJson, anthropicStream } from "./mocks/anthropic";
import { openaiError, openaiResponse, openaiStream } from "./mocks/openai";
import { type RecordedRequest, startMockUpstream } from "./mocks/upstream";

type Upstream = "openai" | "anthropic";
const down = new Set<Upstream>();
const replies: Record<Upstream, (() => Response)[]> = { openai: [], anthropic: [] };

const upstreamOf = (r: RecordedRequest): Upstream => (r.path.endsWith("/v1/messages") ? "anthropic" : "openai");
const mock = startMockUpstream((r) => {
  const up = upstreamOf(r);
  if (down.has(up)) return openaiError(503, `${up} is down`, "server_error");
  const next = replies[up].shift();
  return next ? next() : openaiError(500, `no ${up} reply queued`, "server_error");
});

const MIXED = "team/smart";
const GPT5 = "openai/gpt-5";
const CLAUDE = "anthropic/claude-sonnet-4-5";

/** The requests that reached a healthy upstream (what a down one refused is left out). */
const served = (up: Upstream) => mock.requests.filter((r) => upstreamOf(r) === up && !down.has(up));
const lastBody = (up: Upstream) =>
  mock.requests.filter((r) => upstreamOf(r) === up).at(-1)?.json as Record<string, unknown>;

describeEachBackend(
  "previous_response_id across deployments",
  (gw) => {
    let key: GeneratedWire;
    let client: OpenAI;
    beforeEach(async () => {
      mock.reset();
      down.clear();
      replies.openai.length = 0;
      replies.anthropic.length = 0;
      key ??= await gw().newKey();
      client ??= sdkClient(gw(), key.key);
    });

    test("OpenAI then Anthropic: the native answer gets a gateway id and is stored; Claude continues it", async () => {
      down.add("anthropic");
      replies.openai.push(() => openaiResponse("Sunny, 21 °C.", "resp_upstream_turn1"));
      const r1 = await client.responses
        .create({ model: MIXED, instructions: "Be brief.", input: "Weather in Lisbon?" })
        .withResponse();
      expect(r1.response.headers.get("x-gateway-deployment")).toBe("openai/gpt-5");
      expect(r1.data.id).toMatch(/^resp_gws/);
      expect(r1.data.output_text).toBe("Sunny, 21 °C.");

      down.clear();
      down.add("openai");
      replies.anthropic.push(() => anthropicJson("message.json"));
      const r2 = await client.responses
        .create({ model: MIXED, previous_response_id: r1.data.id, input: "And tomorrow?" })
        .withResponse();
      expect(r2.response.headers.get("x-gateway-deployment")).toBe("anthropic/claude-sonnet-4-5");
      expect(r2.data.previous_response_id).toBe(r1.data.id);
      // OpenAI's reasoning item stays behind; the turns do not.
      expect(lastBody("anthropic").messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] },
        { role: "assistant", content: [{ type: "text", text: "Sunny, 21 °C." }] },
        { role: "user", content: [{ type: "text", text: "And tomorrow?" }] },
      ]);
      // The upstream's own id was never shown, so it cannot come back.
      expect(JSON.stringify(mock.requests.map((r) => r.json))).not.toContain("resp_upstream_turn1");
    });

    test("Anthropic then OpenAI then Anthropic: the native deployment gets the turns inline, no previous_response_id", async () => {
      down.add("openai");
      replies.anthropic.push(() => anthropicJson("message.json"));
      const r1 = await client.responses.create({ model: MIXED, input: "Weather in Lisbon?" });
      expect(served("anthropic")).toHaveLength(1);

      down.clear();
      down.add("anthropic");
      replies.openai.push(() => openaiResponse("Rain tomorrow.", "resp_upstream_turn2"));
      const r2 = await client.responses.create({ model: MIXED, previous_response_id: r1.id, input: "And tomorrow?" });
      const body = lastBody("openai");
      expect(body.previous_response_id).toBeUndefined();
      expect(body.input).toEqual([
        { type: "message", role: "user", content: "Weather in Lisbon?" },
        {
          type: "message",
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: "Lisbon is sunny today, around 21 °C.", annotations: [] }],
        },
        { type: "message", role: "user", content: "And tomorrow?" },
      ]);
      expect(r2.id).toMatch(/^resp_gws/);
      expect(r2.previous_response_id).toBe(r1.id);
      expect(r2.output_text).toBe("Rain tomorrow.");
      expect(await client.responses.retrieve(r2.id)).toMatchObject({ id: r2.id, previous_response_id: r1.id });

      // ...and back to Claude, with all three turns.
      down.clear();
      down.add("openai");
      replies.anthropic.push(() => anthropicJson("message.json"));
      await client.responses.create({ model: MIXED, previous_response_id: r2.id, input: "Thanks" });
      expect(lastBody("anthropic").messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] },
        { role: "assistant", content: [{ type: "text", text: "Lisbon is sunny today, around 21 °C." }] },
        { role: "user", content: [{ type: "text", text: "And tomorrow?" }] },
        { role: "assistant", content: [{ type: "text", text: "Rain tomorrow." }] },
        { role: "user", content: [{ type: "text", text: "Thanks" }] },
      ]);
    });

    test("streamed: a native stream's events carry the gateway id and its final response is stored; Claude streams the next turn", async () => {
      down.add("anthropic");
      replies.openai.push(() => openaiStream("responses-stream.sse"));
      const s1 = client.responses.stream({ model: MIXED, input: "Weather in Lisbon?" });
      const ids = new Set<string>();
      for await (const ev of s1) if ("response" in ev) ids.add(ev.response.id);
      const r1 = await s1.finalResponse();
      expect([...ids]).toEqual([r1.id]);
      expect(r1.id).toMatch(/^resp_gws/);

      down.clear();
      down.add("openai");
      replies.anthropic.push(() => anthropicStream("stream-text.sse"));
      const r2 = await client.responses
        .stream({ model: MIXED, previous_response_id: r1.id, input: "And tomorrow?" })
        .finalResponse();
      expect(r2.previous_response_id).toBe(r1.id);
      expect(lastBody("anthropic").messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] },
        { role: "assistant", content: [{ type: "text", text: "Lisbon is sunny today, around 21 °C." }] },
        { role: "user", content: [{ type: "text", text: "And tomorrow?" }] },
      ]);
    });

    test("store: false on a native answer: a gateway id that is not kept", async () => {
      replies.openai.push(() => openaiResponse("ok"));
      const r1 = await client.responses.create({ model: GPT5, input: "x", store: false });
      expect(r1.id).toMatch(/^resp_gwn/);
      const again = await client.responses
        .create({ model: GPT5, input: "y", previous_response_id: r1.id })
        .catch((e: unknown) => e);
      expect(again).toBeInstanceOf(OpenAI.NotFoundError);
      expect(served("openai")).toHaveLength(1);
    });

    test("fallback: a native model whose upstream is down falls back to Claude, which gets the stored turns", async () => {
      replies.openai.push(() => openaiResponse("Sunny, 21 °C."));
      const r1 = await client.responses.create({ model: GPT5, input: "Weather in Lisbon?" });
      down.add("openai");
      replies.anthropic.push(() => anthropicJson("message.json"));
      const r2 = await client.responses
        .create({ model: GPT5, previous_response_id: r1.id, input: "And tomorrow?" })
        .withResponse();
      expect(r2.response.headers.get("x-gateway-model")).toBe(CLAUDE);
      expect(r2.data.previous_response_id).toBe(r1.id);
      expect(lastBody("anthropic").messages).toEqual([
        { role: "user", content: [{ type: "text", text: "Weather in Lisbon?" }] },
        { role: "assistant", content: [{ type: "text", text: "Sunny, 21 °C." }] },
        { role: "user", content: [{ type: "text", text: "And tomorrow?" }] },
      ]);
    });

    test("an id the gateway did not issue: passed through to native deployments only, never silently dropped", async () => {
      // On the mixed model, every attempt goes to the OpenAI deployment.
      for (let i = 0; i < 4; i++) replies.openai.push(() => openaiResponse(`turn ${i}`, `resp_upstream_next${i}`));
      for (let i = 0; i < 4; i++) {
        const r = await client.responses.create({
          model: MIXED,
          input: "And then?",
          previous_response_id: "resp_upstream_conversation",
        });
        // The upstream keeps this conversation: its ids come back as they are.
        expect(r.id).toBe(`resp_upstream_next${i}`);
      }
      expect(served("openai").map((r) => (r.json as { previous_response_id?: string }).previous_response_id)).toEqual(
        Array(4).fill("resp_upstream_conversation"),
      );
      expect(served("anthropic")).toHaveLength(0);

      // The native deployment down: the fallback (translated) cannot continue it, so no fallback and
      // no Claude deployment is tried; the client gets the upstream's failure.
      down.add("openai");
      for (const model of [GPT5, MIXED]) {
        const err = await client.responses
          .create({ model, input: "And then?", previous_response_id: "resp_upstream_conversation" })
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(OpenAI.InternalServerError);
        expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
      }
      expect(mock.requests.filter((r) => upstreamOf(r) === "anthropic")).toHaveLength(0);

      // A translated model cannot continue it at all: a clear 404 before any call.
      const chat = await client.responses
        .create({ model: CLAUDE, input: "x", previous_response_id: "resp_upstream_conversation" })
        .catch((e: unknown) => e);
      expect(chat).toBeInstanceOf(OpenAI.NotFoundError);
      expect((chat as InstanceType<typeof OpenAI.APIError>).message).toContain("not issued by this gateway");
    });

    test("what only an upstream Responses API can serve (built-in tools) goes to the native deployment of a mixed model", async () => {
      for (let i = 0; i < 4; i++) replies.openai.push(() => openaiResponse("News."));
      for (let i = 0; i < 4; i++)
        await client.responses.create({ model: MIXED, input: "News?", tools: [{ type: "web_search" }] });
      expect(served("openai")).toHaveLength(4);
      expect(served("anthropic")).toHaveLength(0);
      down.add("openai");
      const err = await client.responses
        .create({ model: MIXED, input: "News?", tools: [{ type: "web_search" }] })
        .catch((e: unknown) => e);
      expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
      expect(mock.requests.filter((r) => upstreamOf(r) === "anthropic")).toHaveLength(0);
    });
  },
  () => ({
    inference: {
      providers: {
        openai: { type: "openai", api_base: `${mock.url}/v1`, api_key: "sk-provider-openai" },
        anthropic: { type: "anthropic", api_base: mock.url, api_key: "sk-ant-provider" },
      },
      models: [
        {
          name: MIXED,
          mode: "responses",
          deployments: [
            { provider: "openai", model: "gpt-5" },
            { provider: "anthropic", model: "claude-sonnet-4-5" },
          ],
          max_retries: 1,
        },
        { name: GPT5, mode: "responses", fallbacks: [CLAUDE], max_retries: 0 },
        { name: CLAUDE, max_output_tokens: 64000 },
      ],
      router: { num_retries: 1, retry_backoff_ms: 0, cooldown_seconds: 0 },
    },
  }),
);
