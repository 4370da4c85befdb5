/**
 * Benchmark orchestrator: `npm run bench` (full, ~10 min) or `BENCH_QUICK=1 npm run bench` (~2 min).
 *
 * Starts the mock upstream, a bare Bun forwarder, the gateway embedded and on Postgres + Redis, and
 * Portkey on Bun and on Node, all pointed at the same mock; runs the scenarios of bench/README.md
 * in interleaved rounds; writes bench/RESULTS.md and bench/results.json (a quick run writes them
 * under bench/out/<run>/ only). Raw outputs and process logs go to bench/out/<run>/.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { errorCount, type LoadRun, load, WRK } from "./load";
import { BUN, cpuSeconds, freePort, type Proc, ROOT, rssMB, run, sampleRss, start, stopAll } from "./procs";
import { type Results, renderMarkdown, verdicts } from "./report";
import {
  committedTransactions,
  createDatabase,
  createTeam,
  createTeamAndKey,
  databaseUrl,
  deleteRedisPrefix,
  dropDatabase,
  insertKeys,
  REDIS_URL,
  writeGatewayConfig,
} from "./setup";
import { type LoadSummary, percentile } from "./stats";
import type { StreamClientConfig, StreamClientResult } from "./stream-client";

const QUICK = process.env.BENCH_QUICK === "1";
const num = (name: string, full: number, quick: number) => Number(process.env[name] ?? (QUICK ? quick : full));
const list = (name: string, full: string, quick: string) =>
  (process.env[name] ?? (QUICK ? quick : full)).split(",").map((s) => s.trim());

const S = {
  quick: QUICK,
  rounds: num("BENCH_ROUNDS", 3, 1),
  warmupS: num("BENCH_WARMUP_S", 1, 1),
  durationS: num("BENCH_DURATION_S", 3, 2),
  latencyDurationS: num("BENCH_LATENCY_DURATION_S", 4, 2),
  concurrency: list("BENCH_CONCURRENCY", "8,32,64,128", "32,128").map(Number),
  /** Concurrency of the cross-protocol and auth scenarios, and the headline column. */
  headlineC: num("BENCH_HEADLINE_C", 32, 32),
  streamsPerRound: num("BENCH_STREAMS", 12, 5),
  slowStreams: num("BENCH_SLOW_STREAMS", 1000, 300),
  authKeys: num("BENCH_AUTH_KEYS", 100_000, 20_000),
  overheadSamples: num("BENCH_OVERHEAD_SAMPLES", 500, 200),
  chunks: 64,
  intervalMs: 5,
  slowIntervalMs: 50,
  /** Which targets and scenarios to run (all by default); for development. */
  targets: list("BENCH_TARGETS", "all", "all"),
  scenarios: list("BENCH_SCENARIOS", "all", "all"),
};

const runId = `${new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "").replace("T", "-")}-${Math.random().toString(36).slice(2, 6)}`;
const OUT = `${ROOT}bench/out/${runId}`;
mkdirSync(OUT, { recursive: true });
const MASTER = `sk-bench-master-${runId}`;
const DB_NAME = `bench_${runId.replace(/-/g, "_")}`;
const REDIS_PREFIX = `bench-${runId}`;
const PORTKEY_BIN = `${ROOT}node_modules/@portkey-ai/gateway/build/start-server.js`;

const say = (msg: string) => process.stdout.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const wants = (scenario: string) => S.scenarios.includes("all") || S.scenarios.includes(scenario);

/** One thing wrk or the stream client talks to. */
interface Target {
  name: string;
  label: string;
  base: string;
  /** Headers for an OpenAI chat request (auth, Portkey routing). */
  headers: Record<string, string>;
  proc?: Proc;
  gateway?: boolean;
  /** Failed the streaming sanity check (Portkey on Node, see the notes of a run). */
  noStreaming?: boolean;
}

const PROMPT = "Write one short sentence about benchmarks.";
const chatBody = (model: string, stream = false) =>
  JSON.stringify({
    model,
    messages: [{ role: "user", content: PROMPT }],
    max_tokens: 64,
    ...(stream ? { stream } : {}),
  });
const messagesBody = JSON.stringify({
  model: "mock/gpt",
  max_tokens: 64,
  messages: [{ role: "user", content: PROMPT }],
});
const CHAT = "/v1/chat/completions";
/**
 * Bun's fetch runs 256 requests at once per process unless this is raised before Bun starts;
 * `npm start` and the Docker image set 4096 for the gateway, and every Bun proxy here gets the same.
 */
const UPSTREAM_CONCURRENCY = { BUN_CONFIG_MAX_HTTP_REQUESTS: "4096" };

/** The entry of `obj` at `key`, created by `make` when missing. */
function slot<K extends string | number, V>(obj: Record<K, V>, key: K, make: () => V): V {
  if (!(key in obj)) obj[key] = make();
  return obj[key];
}

function rotate<T>(xs: T[], by: number): T[] {
  const k = by % Math.max(1, xs.length);
  return [...xs.slice(k), ...xs.slice(0, k)];
}

/** bench/FINDINGS.md, the written analysis the report carries (absent: none). */
function readFindings(): string {
  const path = `${ROOT}bench/FINDINGS.md`;
  return existsSync(path) ? readFileSync(path, "utf8") : "";
}

async function versions() {
  const git = async (args: string[]) => (await run(["git", "--no-optional-locks", ...args]).catch(() => "")).trim();
  const cpuinfo = existsSync("/proc/cpuinfo") ? readFileSync("/proc/cpuinfo", "utf8") : "";
  const node = Bun.which("node") ? (await run(["node", "--version"])).trim() : "absent";
  // `wrk -v` prints its version and exits non-zero.
  const wrkV = WRK ? Bun.spawnSync([WRK, "-v"]) : undefined;
  const wrk = wrkV ? `${wrkV.stdout}${wrkV.stderr}`.split("\n")[0]?.trim() : "absent";
  const portkey = existsSync(PORTKEY_BIN)
    ? (JSON.parse(readFileSync(`${ROOT}node_modules/@portkey-ai/gateway/package.json`, "utf8")) as { version: string })
        .version
    : "absent";
  return {
    bun: (await run([BUN, "--version"])).trim(),
    node,
    gatewayCommit: await git(["rev-parse", "--short", "HEAD"]),
    gatewayDirty: (await git(["status", "--porcelain", "--untracked-files=no", "--", "src"])) !== "",
    portkey,
    wrk: wrk ?? "absent",
    loadGenerator: WRK ? "wrk" : "bench/loadgen.ts (Bun fetch; wrk not installed)",
    cores: os.cpus().length,
    cpuModel: /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? "unknown",
    memoryGB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
  };
}

async function streamClient(cfg: StreamClientConfig, maxRequests = 256): Promise<StreamClientResult> {
  const out = await run([BUN, "bench/stream-client.ts", JSON.stringify(cfg)], `${OUT}/streams.log`, {
    BUN_CONFIG_MAX_HTTP_REQUESTS: String(Math.max(256, maxRequests)),
  });
  return JSON.parse(out.trim().split("\n").pop() as string) as StreamClientResult;
}

async function check(t: Target, path: string, headers: Record<string, string>, body: string, expect: string) {
  const res = await fetch(t.base + path, { method: "POST", headers, body });
  const text = await res.text();
  if (res.status !== 200 || !text.includes(expect))
    throw new Error(`${t.name} ${path}: expected 200 with '${expect}', got ${res.status}: ${text.slice(0, 300)}`);
}

async function main(): Promise<void> {
  const started = Date.now();
  say(`run ${runId}${QUICK ? " (quick)" : ""}; raw outputs in bench/out/${runId}/`);
  if (!WRK) say("wrk not found: using the Bun load generator (install wrk: sudo apt-get install wrk)");
  const R: Results = {
    meta: {
      runId,
      date: new Date().toISOString(),
      quick: QUICK,
      loadAvgStart: os.loadavg().map((x) => Math.round(x * 100) / 100),
      loadAvgEnd: [],
      durationS: 0,
      settings: S,
      versions: await versions(),
    },
    targets: {},
    bootRssMB: {},
    mockCeiling: { rps: 0, byConcurrency: {} },
    throughput: {},
    latency: {},
    overhead: {},
    cross: {},
    streaming: {},
    concurrentStreams: {},
    auth: undefined,
    verdicts: [],
    notes: [],
  };
  say(`load average at start: ${R.meta.loadAvgStart.join(", ")} on ${R.meta.versions.cores} cores`);

  // --- processes -----------------------------------------------------------------------------
  const mock = await start({
    name: "mock",
    cmd: [BUN, "bench/mock.ts"],
    env: {
      MOCK_CHUNKS: String(S.chunks),
      MOCK_INTERVAL_MS: String(S.intervalMs),
      MOCK_SLOW_INTERVAL_MS: String(S.slowIntervalMs),
      MOCK_DELAY_MS: process.env.BENCH_MOCK_DELAY_MS ?? "0",
    },
    portRe: /mock listening (\d+)/,
    logFile: `${OUT}/mock.log`,
  });
  const all: Target[] = [
    { name: "direct", label: "direct to the mock", base: mock.url, headers: plainHeaders(), proc: mock },
  ];
  const enabled = (name: string) => S.targets.includes("all") || S.targets.includes(name) || name === "direct";

  if (enabled("forwarder")) {
    const fwd = await start({
      name: "forwarder",
      cmd: [BUN, "bench/forwarder.ts"],
      env: { UPSTREAM_URL: mock.url, ...UPSTREAM_CONCURRENCY },
      portRe: /forwarder listening (\d+)/,
      logFile: `${OUT}/forwarder.log`,
    });
    all.push({
      name: "forwarder",
      label: "bare Bun fetch-forwarder",
      base: fwd.url,
      headers: plainHeaders(),
      proc: fwd,
    });
  }

  // BENCH_PROFILE=1: the gateways write CPU profiles (.cpuprofile and markdown) when they stop.
  const gwCmd = [
    BUN,
    ...(process.env.BENCH_PROFILE === "1" ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${OUT}/profiles`] : []),
    "src/index.ts",
  ];
  // BENCH_GATEWAY_ENV="NAME=value ...": extra environment for both gateways (experiments).
  const extraEnv = Object.fromEntries(
    (process.env.BENCH_GATEWAY_ENV ?? "")
      .split(/\s+/)
      .filter((kv) => kv.includes("="))
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );
  if (Object.keys(extraEnv).length) R.notes.push(`gateways ran with extra environment: ${JSON.stringify(extraEnv)}`);
  const gwEnv = {
    ...UPSTREAM_CONCURRENCY,
    ...extraEnv,
    PORT: "0",
    GATEWAY_HOST: "127.0.0.1",
    GATEWAY_LOG_LEVEL: "info",
    GATEWAY_MASTER_KEY: MASTER,
  };
  const listening = /"msg":"gateway listening".*?"port":(\d+)/;
  if (enabled("gateway-embedded")) {
    writeGatewayConfig(`${OUT}/gateway-embedded.yaml`, mock.url);
    const gw = await start({
      name: "gateway-embedded",
      cmd: gwCmd,
      env: { ...gwEnv, GATEWAY_CONFIG: `${OUT}/gateway-embedded.yaml`, GATEWAY_DATA_DIR: `${OUT}/pglite` },
      portRe: listening,
      logFile: `${OUT}/gateway-embedded.log`,
    });
    const key = await createTeamAndKey(gw.url, MASTER, "bench");
    all.push({
      name: "gateway-embedded",
      label: "gateway, embedded (PGlite, in-process limits)",
      base: gw.url,
      headers: plainHeaders(key),
      proc: gw,
      gateway: true,
    });
  }
  if (enabled("gateway-pg")) {
    await createDatabase(DB_NAME);
    writeGatewayConfig(`${OUT}/gateway-pg.yaml`, mock.url, REDIS_PREFIX);
    const gw = await start({
      name: "gateway-pg",
      cmd: gwCmd,
      env: {
        ...gwEnv,
        GATEWAY_CONFIG: `${OUT}/gateway-pg.yaml`,
        DATABASE_URL: databaseUrl(DB_NAME),
        REDIS_URL,
      },
      portRe: listening,
      logFile: `${OUT}/gateway-pg.log`,
    });
    const key = await createTeamAndKey(gw.url, MASTER, "bench");
    all.push({
      name: "gateway-pg",
      label: "gateway, Postgres + Redis, key with rpm/tpm/parallel limits and a budget",
      base: gw.url,
      headers: plainHeaders(key),
      proc: gw,
      gateway: true,
    });
  }
  const portkeyHeaders = {
    ...plainHeaders(),
    "x-portkey-provider": "openai",
    "x-portkey-custom-host": `${mock.url}/v1`,
  };
  for (const [name, runtime] of [
    ["portkey-bun", BUN],
    ["portkey-node", Bun.which("node")],
  ] as const) {
    if (!enabled(name)) continue;
    if (!existsSync(PORTKEY_BIN) || !runtime) {
      R.notes.push(
        `${name} skipped: ${!existsSync(PORTKEY_BIN) ? "@portkey-ai/gateway not installed" : "node not found"}`,
      );
      continue;
    }
    const port = freePort();
    const p = await start({
      name,
      cmd: [runtime, PORTKEY_BIN, `--port=${port}`, "--headless"],
      env: runtime === BUN ? UPSTREAM_CONCURRENCY : {},
      port,
      logFile: `${OUT}/${name}.log`,
    });
    all.push({
      name,
      label: `Portkey gateway ${R.meta.versions.portkey} on ${name === "portkey-bun" ? "Bun" : "Node"}`,
      base: p.url,
      headers: portkeyHeaders,
      proc: p,
    });
  }
  for (const t of all) R.targets[t.name] = { label: t.label, pid: t.proc?.pid ?? 0 };
  const byName = (n: string) => all.find((t) => t.name === n);
  const gateways = all.filter((t) => t.gateway);

  // --- sanity: every target answers every scenario's request --------------------------------
  for (const t of all) {
    await check(t, CHAT, t.headers, chatBody("mock/gpt"), '"chat.completion"');
    try {
      await check(t, CHAT, t.headers, chatBody("mock/gpt", true), "[DONE]");
    } catch (e) {
      // A reference gateway that cannot stream is left out of the streaming scenario, not the run.
      if (t.gateway || t.name === "direct" || t.name === "forwarder") throw e;
      t.noStreaming = true;
      R.notes.push(
        `${t.name} cannot stream here, so it is left out of the streaming scenario: ${(e as Error).message}`,
      );
    }
  }
  for (const g of gateways) await check(g, "/v1/messages", anthropicHeaders(g), messagesBody, '"type":"message"');
  await Bun.sleep(1000);
  for (const t of all) if (t.proc) R.bootRssMB[t.name] = await rssMB(t.proc.pid);
  say(`targets up: ${all.map((t) => t.name).join(", ")}`);

  const measure = async (
    t: Target,
    c: number,
    durationS: number,
    path = CHAT,
    headers = t.headers,
    body = chatBody("mock/gpt"),
  ): Promise<LoadSummary> => {
    const spec = { url: t.base + path, headers, body, concurrency: c };
    await load({ ...spec, durationS: S.warmupS }, OUT); // warm-up, discarded
    const cpu0 = t.proc ? cpuSeconds(t.proc.pid) : Number.NaN;
    const mock0 = cpuSeconds(mock.pid);
    const r = await load({ ...spec, durationS }, OUT);
    const wall = r.duration_us / 1e6;
    const cpu = (t.proc ? cpuSeconds(t.proc.pid) : Number.NaN) - cpu0;
    if (errorCount(r) > 0)
      R.notes.push(`${t.name} c=${c} ${path}: ${errorCount(r)} errors ${JSON.stringify(r.errors)}`);
    return {
      ...summarize(r),
      cpuPct: Math.round((100 * cpu) / wall),
      cpuUsPerRequest: Math.round((cpu * 1e6) / Math.max(1, r.requests)),
      mockCpuPct: Math.round((100 * (cpuSeconds(mock.pid) - mock0)) / wall),
    };
  };

  // --- the mock's own ceiling, first ----------------------------------------------------------
  const direct = all[0] as Target;
  for (const c of [...new Set([S.headlineC, ...S.concurrency.filter((c) => c >= 32)])]) {
    const r = await measure(direct, c, S.durationS);
    R.mockCeiling.byConcurrency[c] = r.rps;
    R.mockCeiling.rps = Math.max(R.mockCeiling.rps, r.rps);
  }
  say(`mock ceiling: ${Math.round(R.mockCeiling.rps)} req/s`);

  // --- (1) throughput sweep -------------------------------------------------------------------
  if (wants("throughput")) {
    for (let round = 0; round < S.rounds; round++) {
      for (const c of S.concurrency) {
        for (const t of rotate(all, round + c)) {
          const r = await measure(t, c, S.durationS);
          const byC = slot(R.throughput, t.name, (): Record<number, LoadSummary[]> => ({}));
          slot(byC, c, (): LoadSummary[] => []).push(r);
        }
      }
      say(`throughput round ${round + 1}/${S.rounds} done`);
    }
  }

  // --- (1b) latency at concurrency 1 ------------------------------------------------------------
  if (wants("latency")) {
    for (let round = 0; round < S.rounds; round++) {
      for (const t of rotate(all, round)) {
        const r = await measure(t, 1, S.latencyDurationS);
        slot(R.latency, t.name, () => []).push(r);
      }
    }
    say("latency at c=1 done");
    // The gateway's own account of its overhead (x-gateway-overhead-ms), sequential requests.
    for (const g of gateways) {
      const values: number[] = [];
      for (let i = 0; i < S.overheadSamples; i++) {
        const res = await fetch(g.base + CHAT, { method: "POST", headers: g.headers, body: chatBody("mock/gpt") });
        await res.arrayBuffer();
        values.push(Number(res.headers.get("x-gateway-overhead-ms")));
      }
      R.overhead[g.name] = { p50: percentile(values, 50), p90: percentile(values, 90), p99: percentile(values, 99) };
    }
  }

  // --- (3) cross-protocol: Anthropic messages client, OpenAI upstream ------------------------
  if (wants("cross")) {
    for (let round = 0; round < S.rounds; round++) {
      for (const g of rotate(gateways, round)) {
        const protos = round % 2 ? (["anthropic", "openai"] as const) : (["openai", "anthropic"] as const);
        for (const proto of protos) {
          const r =
            proto === "openai"
              ? await measure(g, S.headlineC, S.durationS)
              : await measure(g, S.headlineC, S.durationS, "/v1/messages", anthropicHeaders(g), messagesBody);
          slot(R.cross, g.name, () => ({ openai: [], anthropic: [] }))[proto].push(r);
        }
      }
    }
    say("cross-protocol done");
  }

  // --- (2) streaming: time to first token, inter-chunk gaps, batching --------------------------
  if (wants("streaming")) {
    for (let round = 0; round < S.rounds; round++) {
      for (const t of rotate(
        all.filter((x) => !x.noStreaming),
        round,
      )) {
        const r = await streamClient({
          url: t.base + CHAT,
          headers: t.headers,
          body: chatBody("mock/gpt", true),
          concurrency: 1,
          total: S.streamsPerRound,
          warmup: 2,
        });
        slot(R.streaming, t.name, () => []).push(r);
        if (r.errors) R.notes.push(`${t.name} streaming: ${r.errors} errors (${r.errorSamples.join("; ")})`);
      }
    }
    say("streaming done");
  }

  // --- (4) many concurrent slow streams: errors and memory -----------------------------------
  if (wants("streams")) {
    for (const name of ["direct", "gateway-pg", "gateway-embedded", "forwarder"]) {
      const t = byName(name);
      if (!t?.proc) continue;
      await Bun.sleep(3000);
      const idle = await rssMB(t.proc.pid);
      const sampler = sampleRss(t.proc.pid, 100);
      const client = await streamClient(
        {
          url: t.base + CHAT,
          headers: t.headers,
          body: chatBody("mock/gpt-slow", true),
          concurrency: S.slowStreams,
          total: S.slowStreams,
          timeoutMs: 120_000,
        },
        S.slowStreams + 100,
      );
      const { peakMB } = sampler.stop();
      await Bun.sleep(5000);
      const after = await rssMB(t.proc.pid);
      R.concurrentStreams[name] = { streams: S.slowStreams, idleMB: idle, peakMB, afterMB: after, client };
      say(
        `${S.slowStreams} streams on ${name}: ${client.errors} errors, RSS ${idle.toFixed(0)} -> ${peakMB.toFixed(0)} -> ${after.toFixed(0)} MB`,
      );
    }
  }

  // --- (5) authentication with many keys in the store ----------------------------------------
  const pg = byName("gateway-pg");
  if (wants("auth") && pg?.proc) {
    await createTeam(pg.base, MASTER, "bench-auth");
    const rssBeforeMB = await rssMB(pg.proc.pid);
    const t0 = performance.now();
    const secrets = await insertKeys(databaseUrl(DB_NAME), "bench-auth", S.authKeys);
    const insertS = (performance.now() - t0) / 1000;
    const keysFile = `${OUT}/keys.txt`;
    writeFileSync(keysFile, `${secrets.join("\n")}\n`);
    await check(pg, CHAT, plainHeaders(secrets[secrets.length - 1]), chatBody("mock/gpt"), '"chat.completion"');
    const one: LoadSummary[] = [];
    const many: LoadSummary[] = [];
    const tx: { one: number[]; many: number[] } = { one: [], many: [] };
    let offset = 0;
    let used = 0;
    const spec = { url: pg.base + CHAT, headers: pg.headers, body: chatBody("mock/gpt"), concurrency: S.headlineC };
    const txCount = async () => {
      await Bun.sleep(1200); // backends publish their statistics about once a second
      return committedTransactions(databaseUrl(DB_NAME), DB_NAME);
    };
    for (let round = 0; round < S.rounds; round++) {
      for (const mode of round % 2 ? (["many", "one"] as const) : (["one", "many"] as const)) {
        await load({ ...spec, durationS: S.warmupS }, OUT); // warm-up on the one key, discarded
        const before = await txCount();
        const r =
          mode === "one"
            ? await load({ ...spec, durationS: S.durationS }, OUT)
            : await load({ ...spec, durationS: S.durationS, keysFile, keyOffset: offset }, OUT);
        const after = await txCount();
        if (mode === "many") {
          offset += r.keysSpan;
          used += r.keysSpan;
        }
        if (errorCount(r) > 0) R.notes.push(`auth ${mode}: ${errorCount(r)} errors ${JSON.stringify(r.errors)}`);
        (mode === "one" ? one : many).push(summarize(r));
        tx[mode].push((after - before - 2) / Math.max(1, r.requests));
      }
    }
    R.auth = {
      keys: S.authKeys,
      insertS,
      concurrency: S.headlineC,
      one,
      many,
      keysUsed: used,
      firstUseFraction: Math.min(1, S.authKeys / Math.max(1, used)),
      txPerRequest: { one: tx.one, many: tx.many },
      rssBeforeMB,
      rssAfterMB: await Bun.sleep(5000).then(() => rssMB((pg.proc as Proc).pid)),
    };
    say("auth with many keys done");
  }

  R.meta.loadAvgEnd = os.loadavg().map((x) => Math.round(x * 100) / 100);
  R.meta.durationS = Math.round((Date.now() - started) / 1000);
  R.verdicts = verdicts(R);
  const md = renderMarkdown(R, readFindings());
  const json = `${JSON.stringify(R, null, 2)}\n`;
  writeFileSync(`${OUT}/RESULTS.md`, md);
  writeFileSync(`${OUT}/results.json`, json);
  const partial = !S.targets.includes("all") || !S.scenarios.includes("all");
  if (!QUICK && !partial) {
    writeFileSync(`${ROOT}bench/RESULTS.md`, md);
    writeFileSync(`${ROOT}bench/results.json`, json);
    // Formatted as the repository's formatter wants it, so `npm run lint` stays clean.
    await run([`${ROOT}node_modules/.bin/biome`, "format", "--write", `${ROOT}bench/results.json`]).catch(() => "");
    say("wrote bench/RESULTS.md and bench/results.json");
  } else say(`quick or partial run: wrote bench/out/${runId}/RESULTS.md and results.json only`);
  for (const v of R.verdicts) say(`${v.met ? "MET   " : "MISSED"} ${v.target} [${v.subject}]: ${v.value}`);
}

function plainHeaders(key = "sk-bench-unused"): Record<string, string> {
  return { "content-type": "application/json", authorization: `Bearer ${key}` };
}

function anthropicHeaders(t: Target): Record<string, string> {
  const key = (t.headers.authorization ?? "").replace(/^Bearer /, "");
  return { "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01" };
}

function summarize(r: LoadRun): LoadSummary {
  return {
    rps: Math.round(r.rps),
    requests: r.requests,
    errors: errorCount(r),
    p50Ms: r.latency_us.p50 / 1000,
    p90Ms: r.latency_us.p90 / 1000,
    p99Ms: r.latency_us.p99 / 1000,
    maxMs: r.latency_us.max / 1000,
  };
}

let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopAll();
    await dropDatabase(DB_NAME).catch((e: Error) => say(`could not drop database ${DB_NAME}: ${e.message}`));
    const n = await deleteRedisPrefix(REDIS_PREFIX).catch((e: Error) => {
      say(`could not clean Redis prefix ${REDIS_PREFIX}: ${e.message}`);
      return 0;
    });
    rmSync(`${OUT}/pglite`, { recursive: true, force: true });
    rmSync(`${OUT}/keys.txt`, { force: true });
    say(`cleaned up: processes stopped, database ${DB_NAME} dropped, ${n} Redis keys under ${REDIS_PREFIX}: deleted`);
  })();
  return cleaning;
}

for (const sig of ["SIGINT", "SIGTERM"] as const)
  process.on(sig, () => {
    say(`${sig}: cleaning up`);
    void cleanup().then(() => process.exit(130));
  });

try {
  await main();
} catch (e) {
  say(`failed: ${(e as Error).stack ?? e}`);
  process.exitCode = 1;
} finally {
  await cleanup();
}
process.exit();
