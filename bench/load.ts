/** One closed-loop load measurement: wrk when installed, else the Bun fallback (bench/loadgen.ts). */
import { writeFileSync } from "node:fs";
import { BUN, run } from "./procs";
import type { LoadResult } from "./stats";

export const WRK = Bun.which("wrk");

export interface LoadSpec {
  url: string;
  headers: Record<string, string>;
  body: string;
  concurrency: number;
  durationS: number;
  /** Cycle through these keys, one per request, starting at keyOffset (the auth scenario). */
  keysFile?: string;
  keyOffset?: number;
}

export interface LoadRun extends LoadResult {
  /** How far into the key sequence the run went (keys scenario). */
  keysSpan: number;
}

let seq = 0;

export async function load(spec: LoadSpec, outDir: string): Promise<LoadRun> {
  const n = seq++;
  const log = `${outDir}/load.log`;
  let stdout: string;
  if (WRK) {
    const bodyFile = `${outDir}/body-${n % 16}.json`;
    writeFileSync(bodyFile, spec.body);
    const threads = String(Math.min(2, spec.concurrency));
    const base = [WRK, "-t", threads, "-c", String(spec.concurrency), "-d", `${spec.durationS}s`, "--timeout", "10s"];
    if (spec.keysFile) {
      stdout = await run(
        [
          ...base,
          "-s",
          "bench/lua/keys.lua",
          spec.url,
          "--",
          bodyFile,
          spec.keysFile,
          String(spec.keyOffset ?? 0),
          threads,
        ],
        log,
      );
    } else {
      const headersFile = `${outDir}/headers-${n % 16}.txt`;
      writeFileSync(
        headersFile,
        Object.entries(spec.headers)
          .map(([k, v]) => `${k}: ${v}\n`)
          .join(""),
      );
      stdout = await run([...base, "-s", "bench/lua/post.lua", spec.url, "--", bodyFile, headersFile], log);
    }
  } else {
    const cfg = {
      url: spec.url,
      headers: spec.headers,
      body: spec.body,
      concurrency: spec.concurrency,
      durationS: spec.durationS,
      keysFile: spec.keysFile,
      keyOffset: spec.keyOffset,
    };
    stdout = await run([BUN, "bench/loadgen.ts", JSON.stringify(cfg)], log, {
      BUN_CONFIG_MAX_HTTP_REQUESTS: String(Math.max(256, spec.concurrency * 2)),
    });
  }
  const line = stdout.split("\n").find((l) => l.startsWith("WRK_JSON "));
  if (!line) throw new Error(`no result from the load generator for ${spec.url}:\n${stdout}`);
  const r = JSON.parse(line.slice("WRK_JSON ".length)) as LoadResult;
  const span = /KEYS_SPAN (\d+)/.exec(stdout);
  return { ...r, rps: r.requests / (r.duration_us / 1e6), keysSpan: span ? Number(span[1]) : 0 };
}

export function errorCount(r: LoadResult): number {
  const e = r.errors;
  return e.connect + e.read + e.write + e.status + e.timeout;
}
