/**
 * Streaming client: runs SSE chat-completion streams and measures, per stream, the time to the
 * first content chunk and the gaps between content chunks as this client sees them, and how many
 * separate reads carried them (a proxy that batches chunks shows fewer reads and bigger gaps).
 *
 *   bun bench/stream-client.ts '<json config>'     prints one JSON result line
 *
 * Config: { url, headers, body, concurrency, total, warmup?, timeoutMs? }. `warmup` streams run
 * first, one at a time, and are not counted; then `concurrency` loops each run streams back to back
 * until `total` streams have been started. For many concurrent streams set
 * BUN_CONFIG_MAX_HTTP_REQUESTS above `concurrency` (Bun's fetch allows 256 at once by default).
 */
import { extent, percentile } from "./stats";

export interface StreamClientConfig {
  url: string;
  headers: Record<string, string>;
  body: string;
  concurrency: number;
  total: number;
  warmup?: number;
  timeoutMs?: number;
}

interface OneStream {
  ok: boolean;
  error?: string;
  ttftMs: number;
  gapsMs: number[];
  /** Content chunks received. */
  chunks: number;
  /** Reads that completed at least one content chunk. */
  contentReads: number;
  /** Most content chunks completed by a single read. */
  maxChunksPerRead: number;
  totalMs: number;
  done: boolean;
}

const decoder = new TextDecoder();

/** An SSE event carries a token when it has a non-empty text delta (OpenAI `content` or Anthropic `text`). */
const CONTENT_RE = /"(?:content|text)":"[^"]/;

async function runOne(cfg: StreamClientConfig): Promise<OneStream> {
  const r: OneStream = {
    ok: false,
    ttftMs: Number.NaN,
    gapsMs: [],
    chunks: 0,
    contentReads: 0,
    maxChunksPerRead: 0,
    totalMs: Number.NaN,
    done: false,
  };
  const t0 = performance.now();
  try {
    const res = await fetch(cfg.url, {
      method: "POST",
      headers: cfg.headers,
      body: cfg.body,
      signal: AbortSignal.timeout(cfg.timeoutMs ?? 60_000),
    });
    if (res.status !== 200 || !res.body) {
      r.error = `status ${res.status}: ${(await res.text()).slice(0, 200)}`;
      return r;
    }
    const reader = res.body.getReader();
    let buf = "";
    let last = Number.NaN;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      const now = performance.now();
      buf += decoder.decode(value, { stream: true });
      let inRead = 0;
      let end = buf.indexOf("\n\n");
      while (end >= 0) {
        const event = buf.slice(0, end);
        buf = buf.slice(end + 2);
        if (event.includes("[DONE]") || event.includes("message_stop")) r.done = true;
        else if (CONTENT_RE.test(event)) {
          inRead++;
          r.chunks++;
          if (r.chunks === 1) r.ttftMs = now - t0;
          else r.gapsMs.push(now - last);
          last = now;
        }
        end = buf.indexOf("\n\n");
      }
      if (inRead > 0) r.contentReads++;
      if (inRead > r.maxChunksPerRead) r.maxChunksPerRead = inRead;
    }
    r.totalMs = performance.now() - t0;
    r.ok = r.done && r.chunks > 0;
    if (!r.ok) r.error = r.done ? "no content chunks" : "stream ended without its final event";
  } catch (e) {
    r.error = (e as Error).message;
  }
  return r;
}

export interface StreamClientResult {
  streams: number;
  ok: number;
  errors: number;
  errorSamples: string[];
  ttftMs: { p50: number; p90: number; p99: number; min: number; max: number };
  gapMs: { p50: number; p90: number; p99: number; max: number };
  chunksPerStream: { min: number; p50: number };
  /** Content reads / content chunks over all streams: 1.0 means every chunk arrived in its own read. */
  separateReadRatio: number;
  maxChunksPerRead: number;
  totalMs: { p50: number; p99: number; max: number };
  wallMs: number;
}

export async function runStreams(cfg: StreamClientConfig): Promise<StreamClientResult> {
  for (let i = 0; i < (cfg.warmup ?? 0); i++) await runOne(cfg);
  const results: OneStream[] = [];
  let started = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (started < cfg.total) {
      started++;
      results.push(await runOne(cfg));
    }
  };
  await Promise.all(Array.from({ length: Math.min(cfg.concurrency, cfg.total) }, worker));
  const good = results.filter((r) => r.ok);
  const gaps = good.flatMap((r) => r.gapsMs);
  const ttfts = good.map((r) => r.ttftMs);
  const chunks = good.reduce((s, r) => s + r.chunks, 0);
  const reads = good.reduce((s, r) => s + r.contentReads, 0);
  const bad = results.filter((r) => !r.ok);
  return {
    streams: results.length,
    ok: good.length,
    errors: bad.length,
    errorSamples: [...new Set(bad.map((r) => r.error ?? "unknown"))].slice(0, 5),
    ttftMs: {
      p50: percentile(ttfts, 50),
      p90: percentile(ttfts, 90),
      p99: percentile(ttfts, 99),
      min: extent(ttfts).min,
      max: extent(ttfts).max,
    },
    gapMs: { p50: percentile(gaps, 50), p90: percentile(gaps, 90), p99: percentile(gaps, 99), max: extent(gaps).max },
    chunksPerStream: {
      min: extent(good.map((r) => r.chunks)).min,
      p50: percentile(
        good.map((r) => r.chunks),
        50,
      ),
    },
    separateReadRatio: chunks ? reads / chunks : 0,
    maxChunksPerRead: Math.max(0, ...good.map((r) => r.maxChunksPerRead)),
    totalMs: {
      p50: percentile(
        good.map((r) => r.totalMs),
        50,
      ),
      p99: percentile(
        good.map((r) => r.totalMs),
        99,
      ),
      max: extent(good.map((r) => r.totalMs)).max,
    },
    wallMs: performance.now() - t0,
  };
}

if (import.meta.main) {
  const cfg = JSON.parse(process.argv[2] ?? "{}") as StreamClientConfig;
  const result = await runStreams(cfg);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
