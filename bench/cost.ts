/**
 * CPU cost per request, by process: `bun bench/cost.ts` (about a minute).
 *
 * Throughput on a 2-core machine moves with whatever else runs; CPU time per request barely does.
 * This starts the mock, the bare forwarder and the gateway (embedded and on Postgres + Redis, as
 * `npm run bench` configures them), drives each with wrk at one concurrency, and reports for every
 * target the microseconds of CPU its own process spent per request, plus Redis's own time per
 * command (from INFO commandstats) for the Postgres + Redis gateway. Use it to see what a hot-path
 * change saves before running the full benchmark on an idle machine.
 *
 * Knobs: COST_TARGETS (comma list: forwarder, gateway-embedded, gateway-pg), COST_C (32),
 * COST_DURATION_S (5), COST_PATH (`chat` or `messages`), COST_PROFILE=1 (the gateways write CPU profiles to
 * bench/out/<run>/profiles/ when they stop; summarize with bench/profile-summary.ts).
 */
import { mkdirSync } from "node:fs";
import { load, WRK } from "./load";
import { BUN, cpuSeconds, type Proc, ROOT, start, stopAll } from "./procs";
import {
  createDatabase,
  createTeamAndKey,
  databaseUrl,
  deleteRedisPrefix,
  dropDatabase,
  REDIS_URL,
  writeGatewayConfig,
} from "./setup";

const runId = `cost-${Date.now().toString(36)}`;
const OUT = `${ROOT}bench/out/${runId}`;
mkdirSync(OUT, { recursive: true });
const TARGETS = (process.env.COST_TARGETS ?? "forwarder,gateway-embedded,gateway-pg").split(",");
const C = Number(process.env.COST_C ?? 32);
const DURATION_S = Number(process.env.COST_DURATION_S ?? 5);
const MESSAGES = process.env.COST_PATH === "messages";
const MASTER = `sk-cost-master-${runId}`;
const DB = `bench_${runId.replace(/-/g, "_")}`;
const PREFIX = `bench-${runId}`;

const body = MESSAGES
  ? JSON.stringify({
      model: "mock/gpt",
      max_tokens: 64,
      messages: [{ role: "user", content: "Write one short sentence about benchmarks." }],
    })
  : JSON.stringify({
      model: "mock/gpt",
      max_tokens: 64,
      messages: [{ role: "user", content: "Write one short sentence about benchmarks." }],
    });
const path = MESSAGES ? "/v1/messages" : "/v1/chat/completions";

async function redisCommandStats(): Promise<Map<string, { calls: number; usec: number }>> {
  const client = new Bun.RedisClient(REDIS_URL);
  try {
    const text = String(await client.send("INFO", ["commandstats"]));
    const out = new Map<string, { calls: number; usec: number }>();
    for (const m of text.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g))
      out.set(m[1] as string, { calls: Number(m[2]), usec: Number(m[3]) });
    return out;
  } finally {
    client.close();
  }
}

async function main() {
  if (!WRK) throw new Error("bench/cost.ts needs wrk (apt-get install wrk)");
  const mock = await start({
    name: "mock",
    cmd: [BUN, "bench/mock.ts"],
    env: {},
    portRe: /mock listening (\d+)/,
    logFile: `${OUT}/mock.log`,
  });
  const gwEnv = {
    BUN_CONFIG_MAX_HTTP_REQUESTS: "4096",
    PORT: "0",
    GATEWAY_HOST: "127.0.0.1",
    GATEWAY_LOG_LEVEL: "info",
    GATEWAY_MASTER_KEY: MASTER,
  };
  const gwCmd = [
    BUN,
    ...(process.env.COST_PROFILE === "1"
      ? ["--cpu-prof", "--cpu-prof-interval=250", `--cpu-prof-dir=${OUT}/profiles`]
      : []),
    "src/index.ts",
  ];
  const listening = /"msg":"gateway listening".*?"port":(\d+)/;
  const targets: { name: string; proc: Proc; headers: Record<string, string> }[] = [];
  const auth = (key: string): Record<string, string> =>
    MESSAGES
      ? { "content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01" }
      : { "content-type": "application/json", authorization: `Bearer ${key}` };
  if (TARGETS.includes("forwarder")) {
    const proc = await start({
      name: "forwarder",
      cmd: [BUN, "bench/forwarder.ts"],
      env: { UPSTREAM_URL: mock.url, BUN_CONFIG_MAX_HTTP_REQUESTS: "4096" },
      portRe: /forwarder listening (\d+)/,
      logFile: `${OUT}/forwarder.log`,
    });
    targets.push({ name: "forwarder", proc, headers: { "content-type": "application/json" } });
  }
  if (TARGETS.includes("gateway-embedded")) {
    writeGatewayConfig(`${OUT}/embedded.yaml`, mock.url);
    const proc = await start({
      name: "gateway-embedded",
      cmd: gwCmd,
      env: { ...gwEnv, GATEWAY_CONFIG: `${OUT}/embedded.yaml`, GATEWAY_DATA_DIR: `${OUT}/pglite` },
      portRe: listening,
      logFile: `${OUT}/embedded.log`,
    });
    targets.push({ name: "gateway-embedded", proc, headers: auth(await createTeamAndKey(proc.url, MASTER, "cost")) });
  }
  if (TARGETS.includes("gateway-pg")) {
    await createDatabase(DB);
    writeGatewayConfig(`${OUT}/pg.yaml`, mock.url, PREFIX);
    const proc = await start({
      name: "gateway-pg",
      cmd: gwCmd,
      env: { ...gwEnv, GATEWAY_CONFIG: `${OUT}/pg.yaml`, DATABASE_URL: databaseUrl(DB), REDIS_URL },
      portRe: listening,
      logFile: `${OUT}/pg.log`,
    });
    targets.push({ name: "gateway-pg", proc, headers: auth(await createTeamAndKey(proc.url, MASTER, "cost")) });
  }
  try {
    for (const t of targets) {
      const spec = {
        url: t.proc.url + (t.name === "forwarder" ? "/v1/chat/completions" : path),
        headers: t.headers,
        body,
        concurrency: C,
      };
      await load({ ...spec, durationS: 2 }, OUT); // warm-up
      const cpu0 = cpuSeconds(t.proc.pid);
      const r0 = await redisCommandStats();
      const r = await load({ ...spec, durationS: DURATION_S }, OUT);
      const cpu = cpuSeconds(t.proc.pid) - cpu0;
      const r1 = await redisCommandStats();
      const redis = [...r1]
        .map(([cmd, v]) => {
          const before = r0.get(cmd) ?? { calls: 0, usec: 0 };
          return { cmd, calls: v.calls - before.calls, usec: v.usec - before.usec };
        })
        .filter((x) => x.calls > r.requests / 10)
        .map((x) => `${x.cmd} ${(x.calls / r.requests).toFixed(2)}/req ${(x.usec / Math.max(1, x.calls)).toFixed(1)}us`)
        .join(", ");
      const line = `${t.name.padEnd(18)} ${String(Math.round(r.rps)).padStart(6)} req/s  ${String(Math.round((cpu * 1e6) / r.requests)).padStart(5)} us CPU/req  ${Math.round((100 * cpu) / (r.duration_us / 1e6))}% CPU${t.name === "gateway-pg" ? `  redis: ${redis}` : ""}  errors ${r.errors ? JSON.stringify(r.errors) : 0}`;
      console.log(line);
    }
  } finally {
    await stopAll();
    if (TARGETS.includes("gateway-pg")) {
      await dropDatabase(DB).catch(() => {});
      await deleteRedisPrefix(PREFIX).catch(() => 0);
    }
  }
}

await main();
