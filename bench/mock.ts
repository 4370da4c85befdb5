/**
 * Mock OpenAI-compatible upstream, run in its own process: `bun bench/mock.ts`.
 *
 * POST .../chat/completions answers a fixed chat.completion (after MOCK_DELAY_MS, default 0), or
 * with `"stream": true` an SSE stream of MOCK_CHUNKS (64) content chunks, one every
 * MOCK_INTERVAL_MS (5), then a finish+usage chunk and `[DONE]`. Upstream model names containing
 * "slow" use MOCK_SLOW_INTERVAL_MS (50) instead. The first content chunk is sent at once, so the
 * time to first token measures only the path, and each chunk is flushed as its own write.
 * Prints `mock listening <port>` when ready.
 */
const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const DELAY_MS = env("MOCK_DELAY_MS", 0);
const CHUNKS = env("MOCK_CHUNKS", 64);
const INTERVAL_MS = env("MOCK_INTERVAL_MS", 5);
const SLOW_INTERVAL_MS = env("MOCK_SLOW_INTERVAL_MS", 50);

const ID = "chatcmpl-bench000000000000000000000";
const CREATED = 1761000000;
const USAGE = { prompt_tokens: 12, completion_tokens: CHUNKS, total_tokens: 12 + CHUNKS };

const completion = JSON.stringify({
  id: ID,
  object: "chat.completion",
  created: CREATED,
  model: "gpt-bench",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: "Hello! This is the benchmark mock.", refusal: null, annotations: [] },
      logprobs: null,
      finish_reason: "stop",
    },
  ],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
  service_tier: "default",
  system_fingerprint: "fp_bench",
});

const enc = new TextEncoder();
const chunk = (delta: Record<string, unknown>, finish: string | null = null, usage: unknown = null) =>
  `data: ${JSON.stringify({ id: ID, object: "chat.completion.chunk", created: CREATED, model: "gpt-bench", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage })}\n\n`;
const frames: Uint8Array[] = [];
for (let i = 0; i < CHUNKS; i++)
  frames.push(enc.encode(chunk(i === 0 ? { role: "assistant", content: "tok0 " } : { content: `tok${i} ` })));
const tail = enc.encode(
  `${chunk({}, "stop")}data: ${JSON.stringify({ id: ID, object: "chat.completion.chunk", created: CREATED, model: "gpt-bench", choices: [], usage: USAGE })}\n\ndata: [DONE]\n\n`,
);

const STREAM_RE = /"stream"\s*:\s*true/;
const SLOW_RE = /"model"\s*:\s*"[^"]*slow/;
const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };
const JSON_HEADERS = { "content-type": "application/json" };

function sseStream(intervalMs: number): Response {
  const body = new ReadableStream({
    type: "direct",
    async pull(controller) {
      const t0 = performance.now();
      try {
        for (let i = 0; i < frames.length; i++) {
          // Scheduled from the start, so the interval does not drift with write or timer latency.
          if (i > 0) await Bun.sleep(Math.max(0, t0 + i * intervalMs - performance.now()));
          controller.write(frames[i] as Uint8Array);
          await controller.flush();
        }
        controller.write(tail);
        await controller.flush();
      } catch {
        // The client went away.
      }
      controller.close();
    },
  });
  return new Response(body as unknown as ReadableStream, { headers: SSE_HEADERS });
}

const mockServer = Bun.serve({
  port: Number(process.env.MOCK_PORT ?? 0),
  hostname: "127.0.0.1",
  idleTimeout: 0,
  async fetch(req) {
    const path = new URL(req.url).pathname;
    if (req.method === "GET") return new Response("ok");
    if (!path.endsWith("/chat/completions"))
      return Response.json({ error: { message: `mock: no route ${path}` } }, { status: 404 });
    // A substring test instead of JSON.parse keeps the mock's own ceiling high.
    const body = await req.text();
    if (STREAM_RE.test(body)) return sseStream(SLOW_RE.test(body) ? SLOW_INTERVAL_MS : INTERVAL_MS);
    if (DELAY_MS > 0) await Bun.sleep(DELAY_MS);
    return new Response(completion, { headers: JSON_HEADERS });
  },
});
console.log(`mock listening ${mockServer.port}`);
