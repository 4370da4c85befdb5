/**
 * Fallback closed-loop load generator for machines without wrk: `concurrency` loops, each sending
 * the next request as soon as the previous answer is read, for `durationS` seconds. Prints the
 * same `WRK_JSON {...}` line as bench/lua/report.lua. Slower than wrk (Bun's fetch client costs
 * more CPU per request than wrk), so on a small machine it can be the bottleneck: prefer wrk.
 *
 *   bun bench/loadgen.ts '{"url":...,"headers":{...},"body":"...","concurrency":32,"durationS":5,
 *                         "keysFile":"path"?, "keyOffset":0?}'
 *
 * With `keysFile` (one key a line), request i carries `Authorization: Bearer keys[(keyOffset + i) % keys.length]`.
 */
import { extent, percentile } from "./stats";

interface LoadConfig {
  url: string;
  headers: Record<string, string>;
  body: string;
  concurrency: number;
  durationS: number;
  keysFile?: string;
  keyOffset?: number;
}

const cfg = JSON.parse(process.argv[2] ?? "{}") as LoadConfig;
const keys = cfg.keysFile ? (await Bun.file(cfg.keysFile).text()).split("\n").filter(Boolean) : [];
const latencies: number[] = [];
const errors = { connect: 0, read: 0, write: 0, status: 0, timeout: 0 };
let bytes = 0;
let sent = 0;
const start = performance.now();
const deadline = start + cfg.durationS * 1000;

async function loop(): Promise<void> {
  while (performance.now() < deadline) {
    const headers = { ...cfg.headers };
    if (keys.length) headers.authorization = `Bearer ${keys[((cfg.keyOffset ?? 0) + sent) % keys.length]}`;
    sent++;
    const t = performance.now();
    try {
      const res = await fetch(cfg.url, { method: "POST", headers, body: cfg.body });
      const buf = await res.arrayBuffer();
      bytes += buf.byteLength;
      if (res.status >= 400) errors.status++;
      latencies.push((performance.now() - t) * 1000);
    } catch {
      errors.read++;
    }
  }
}

await Promise.all(Array.from({ length: cfg.concurrency }, loop));
const durationUs = (performance.now() - start) * 1000;
const mean = latencies.reduce((s, x) => s + x, 0) / Math.max(1, latencies.length);
const stdev = Math.sqrt(latencies.reduce((s, x) => s + (x - mean) ** 2, 0) / Math.max(1, latencies.length));
const out = {
  requests: latencies.length,
  duration_us: Math.round(durationUs),
  bytes,
  errors,
  latency_us: {
    min: Math.round(extent(latencies).min),
    mean,
    stdev,
    max: Math.round(extent(latencies).max),
    p50: Math.round(percentile(latencies, 50)),
    p90: Math.round(percentile(latencies, 90)),
    p99: Math.round(percentile(latencies, 99)),
    p999: Math.round(percentile(latencies, 99.9)),
  },
};
process.stdout.write(`WRK_JSON ${JSON.stringify(out)}\nKEYS_SPAN ${sent}\n`);
