/** Native forwarding of chat-completion streams: what is recorded for billing, and how failures end a stream. */
import { describe, expect, test } from "bun:test";
import type { GatewayError } from "../../http/errors";
import { UpstreamError } from "../../providers/errors";
import type { Usage } from "../canonical";
import type { StreamTracker } from "../protocol";
import { openAIChat, parseChatRequest } from "./protocol";

const native = openAIChat.native as NonNullable<typeof openAIChat.native>;
const input = parseChatRequest({ model: "openai/x", messages: [{ role: "user", content: "hi" }], stream: true });

const tracker = () => {
  const t: StreamTracker & { text: string; partialUsage: Usage | undefined } = {
    usage: undefined,
    partialUsage: undefined,
    failed: undefined as GatewayError | undefined,
    text: "",
    token(s: string) {
      t.text += s;
    },
  };
  return t;
};

const chunk = (delta: Record<string, unknown>, finish: string | null, usage?: Record<string, unknown>) => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "x",
  choices: [{ index: 0, delta, finish_reason: finish }],
  ...(usage ? { usage } : {}),
});
const usage = (prompt: number, completion: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
});
const sse = (...events: unknown[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const e of events) c.enqueue(new TextEncoder().encode(`data: ${JSON.stringify(e)}\n\n`));
      c.close();
    },
  });

async function forward(body: ReadableStream<Uint8Array>, t: StreamTracker): Promise<string> {
  let out = "";
  const ctx = { requestId: "req_test", principal: { kind: "master" as const }, model: "openai/gpt-4o-mini" };
  for await (const f of native.frames(body, input, t, "openai", new AbortController().signal, ctx))
    out += new TextDecoder().decode(f);
  return out;
}

describe("openai-chat native frames", () => {
  test("reasoning, text and tool calls are recorded; OpenAI's closing usage chunk is final", async () => {
    const t = tracker();
    await forward(
      sse(
        chunk({ reasoning_content: "Think. " }, null),
        chunk({ content: "Hi" }, null),
        chunk({ tool_calls: [{ index: 0, id: "c1", function: { name: "f", arguments: "{}" } }] }, null),
        chunk({}, "tool_calls"),
        { ...chunk({}, null, usage(10, 7)), choices: [] },
      ),
      t,
    );
    expect(t.text).toBe("Think. Hif{}");
    expect(t.usage).toMatchObject({ inputTokens: 10, outputTokens: 7 });
  });

  test("running totals on content chunks (continuous usage) are partial until the finish reason", async () => {
    const t = tracker();
    await forward(sse(chunk({ content: "a" }, null, usage(10, 1)), chunk({ content: "b" }, null, usage(10, 2))), t);
    expect(t.usage).toBeUndefined();
    expect(t.partialUsage).toMatchObject({ inputTokens: 10, outputTokens: 2 });
    const done = tracker();
    await forward(sse(chunk({ content: "a" }, null, usage(10, 1)), chunk({}, "stop", usage(10, 2))), done);
    expect(done.usage).toMatchObject({ inputTokens: 10, outputTokens: 2 });
  });

  test("an upstream read failing with the gateway's timeout ends the stream with a 504 error frame", async () => {
    const t = tracker();
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode(`data: ${JSON.stringify(chunk({ content: "Hi" }, null))}\n\n`));
        c.error(new UpstreamError("timeout", "openai sent nothing for 30 s", { status: 504 }));
      },
    });
    const out = await forward(body, t);
    expect(t.failed).toMatchObject({ status: 504, code: "upstream_timeout" });
    expect(out).toContain('"code":"upstream_timeout"');
  });
});
