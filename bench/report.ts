/** Turns one run's measurements into derived numbers, verdicts against the targets, and RESULTS.md. */
import { type LoadSummary, median, round3, type Spread, spread } from "./stats";
import type { StreamClientResult } from "./stream-client";

export interface Verdict {
  target: string;
  /** Which target (gateway mode) the number is about. */
  subject: string;
  threshold: string;
  value: string;
  met: boolean;
}

export interface Results {
  meta: {
    runId: string;
    date: string;
    quick: boolean;
    loadAvgStart: number[];
    loadAvgEnd: number[];
    durationS: number;
    settings: Record<string, unknown>;
    versions: Record<string, string | number | boolean>;
  };
  targets: Record<string, { label: string; pid: number }>;
  bootRssMB: Record<string, number>;
  mockCeiling: { rps: number; byConcurrency: Record<number, number> };
  throughput: Record<string, Record<number, LoadSummary[]>>;
  latency: Record<string, LoadSummary[]>;
  /** The gateway's own x-gateway-overhead-ms over sequential requests. */
  overhead: Record<string, { p50: number; p90: number; p99: number }>;
  cross: Record<string, { openai: LoadSummary[]; anthropic: LoadSummary[] }>;
  streaming: Record<string, StreamClientResult[]>;
  concurrentStreams: Record<
    string,
    { streams: number; idleMB: number; peakMB: number; afterMB: number; client: StreamClientResult }
  >;
  auth?: {
    keys: number;
    insertS: number;
    concurrency: number;
    one: LoadSummary[];
    many: LoadSummary[];
    keysUsed: number;
    firstUseFraction: number;
    txPerRequest: { one: number[]; many: number[] };
    rssBeforeMB: number;
    rssAfterMB: number;
  };
  derived?: ReturnType<typeof derive>;
  verdicts: Verdict[];
  notes: string[];
}

/** Within this fraction of the mock's own ceiling, a result says more about the mock than the target. */
const MOCK_BOUND = 0.9;
/** "Back near idle": RSS after the streams within this factor of RSS before them. */
const NEAR_IDLE = 1.25;
const GATEWAYS = ["gateway-pg", "gateway-embedded"];

const perRound = (
  a: LoadSummary[] | undefined,
  b: LoadSummary[] | undefined,
  f: (x: LoadSummary, y: LoadSummary) => number,
) => (a && b ? a.slice(0, Math.min(a.length, b.length)).map((x, i) => f(x, b[i] as LoadSummary)) : []);

export function derive(R: Results) {
  const throughput: Record<string, Record<number, Spread & { mockBound: boolean }>> = {};
  const peak: Record<string, { rps: number; c: number }> = {};
  for (const [t, byC] of Object.entries(R.throughput)) {
    throughput[t] = {};
    peak[t] = { rps: 0, c: 0 };
    for (const [c, runs] of Object.entries(byC)) {
      const s = spread(runs.map((r) => r.rps));
      (throughput[t] as Record<number, Spread & { mockBound: boolean }>)[Number(c)] = {
        ...s,
        mockBound: t !== "direct" && s.median >= MOCK_BOUND * R.mockCeiling.rps,
      };
      if (s.median > (peak[t] as { rps: number }).rps) peak[t] = { rps: s.median, c: Number(c) };
    }
  }
  const ratio = (a: string, b: string) => {
    const byC: Record<number, number> = {};
    for (const c of Object.keys(throughput[a] ?? {}).map(Number)) {
      const x = throughput[a]?.[c]?.median;
      const y = throughput[b]?.[c]?.median;
      if (x && y) byC[c] = round3(x / y);
    }
    const pa = peak[a]?.rps;
    const pb = peak[b]?.rps;
    return { peak: pa && pb ? round3(pa / pb) : Number.NaN, byConcurrency: byC };
  };
  const ratios: Record<string, ReturnType<typeof ratio>> = {};
  for (const g of GATEWAYS) {
    if (!throughput[g]) continue;
    ratios[`${g}/forwarder`] = ratio(g, "forwarder");
    ratios[`${g}/portkey-bun`] = ratio(g, "portkey-bun");
    ratios[`${g}/portkey-node`] = ratio(g, "portkey-node");
  }
  ratios["forwarder/direct"] = ratio("forwarder", "direct");

  const latency: Record<string, { p50: Spread; p99: Spread; addedP50: Spread; addedP99: Spread }> = {};
  for (const [t, runs] of Object.entries(R.latency)) {
    latency[t] = {
      p50: spread(runs.map((r) => r.p50Ms)),
      p99: spread(runs.map((r) => r.p99Ms)),
      addedP50: spread(perRound(runs, R.latency.direct, (x, y) => round3(x.p50Ms - y.p50Ms))),
      addedP99: spread(perRound(runs, R.latency.direct, (x, y) => round3(x.p99Ms - y.p99Ms))),
    };
  }

  const streaming: Record<string, Record<string, Spread | number>> = {};
  const directS = R.streaming.direct;
  for (const [t, runs] of Object.entries(R.streaming)) {
    const diff = (f: (r: StreamClientResult) => number) =>
      spread(
        directS ? runs.slice(0, directS.length).map((r, i) => round3(f(r) - f(directS[i] as StreamClientResult))) : [],
      );
    streaming[t] = {
      ttftP50: spread(runs.map((r) => round3(r.ttftMs.p50))),
      ttftP99: spread(runs.map((r) => round3(r.ttftMs.p99))),
      addedTtftP50: diff((r) => r.ttftMs.p50),
      gapP50: spread(runs.map((r) => round3(r.gapMs.p50))),
      gapP99: spread(runs.map((r) => round3(r.gapMs.p99))),
      addedGapP50: diff((r) => r.gapMs.p50),
      addedGapP99: diff((r) => r.gapMs.p99),
      separateReadRatio: Math.min(...runs.map((r) => r.separateReadRatio)),
      maxChunksPerRead: Math.max(...runs.map((r) => r.maxChunksPerRead)),
      minChunks: Math.min(...runs.map((r) => r.chunksPerStream.min)),
      errors: runs.reduce((s, r) => s + r.errors, 0),
    };
  }

  const cross: Record<string, { openai: Spread; anthropic: Spread; ratio: Spread }> = {};
  for (const [g, c] of Object.entries(R.cross)) {
    cross[g] = {
      openai: spread(c.openai.map((r) => r.rps)),
      anthropic: spread(c.anthropic.map((r) => r.rps)),
      ratio: spread(perRound(c.anthropic, c.openai, (a, o) => round3(a.rps / o.rps))),
    };
  }

  const auth = R.auth
    ? {
        one: spread(R.auth.one.map((r) => r.rps)),
        many: spread(R.auth.many.map((r) => r.rps)),
        ratio: spread(perRound(R.auth.many, R.auth.one, (m, o) => round3(m.rps / o.rps))),
        p99One: spread(R.auth.one.map((r) => r.p99Ms)),
        p99Many: spread(R.auth.many.map((r) => r.p99Ms)),
        txPerRequestOne: round3(median(R.auth.txPerRequest.one)),
        txPerRequestMany: round3(median(R.auth.txPerRequest.many)),
      }
    : undefined;
  return { throughput, peak, ratios, latency, streaming, cross, auth };
}

const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "n/a");
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "n/a");
const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : "n/a");
const k = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString("en-US") : "n/a");
const sp = (s: Spread | undefined, fmt: (x: number) => string) =>
  s?.rounds.length ? (s.rounds.length > 1 ? `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})` : fmt(s.median)) : "n/a";
const pct = (x: number) => (Number.isFinite(x) ? `${Math.round(x * 100)}%` : "n/a");

export function verdicts(R: Results): Verdict[] {
  R.derived = derive(R);
  const D = R.derived;
  const out: Verdict[] = [];
  const add = (target: string, subject: string, threshold: string, value: number, met: boolean, shown: string) => {
    if (Number.isFinite(value)) out.push({ target, subject, threshold, value: shown, met });
  };
  for (const g of GATEWAYS) {
    if (!R.targets[g]) continue;
    const fw = D.ratios[`${g}/forwarder`];
    if (fw) {
      const atC = fw.byConcurrency[R.meta.settings.headlineC as number];
      add(
        "throughput vs bare forwarder",
        g,
        ">= 60%",
        fw.peak,
        fw.peak >= 0.6,
        `${pct(fw.peak)} (peak vs peak${atC ? `; ${pct(atC)} at c=${R.meta.settings.headlineC}` : ""})`,
      );
    }
    const pk = D.ratios[`${g}/portkey-bun`];
    if (pk) add("throughput vs Portkey on Bun", g, ">= 3x", pk.peak, pk.peak >= 3, `${f2(pk.peak)}x (peak vs peak)`);
    const lat = D.latency[g];
    if (lat) {
      add(
        "added p50 latency at c=1",
        g,
        "<= 0.15 ms",
        lat.addedP50.median,
        lat.addedP50.median <= 0.15,
        `${sp(lat.addedP50, f3)} ms`,
      );
      add(
        "added p99 latency at c=1",
        g,
        "<= 1 ms",
        lat.addedP99.median,
        lat.addedP99.median <= 1,
        `${sp(lat.addedP99, f3)} ms`,
      );
    }
    const st = D.streaming[g];
    if (st) {
      const ttft = st.addedTtftP50 as Spread;
      add("streaming: added TTFT p50", g, "<= 1 ms", ttft.median, ttft.median <= 1, `${sp(ttft, f3)} ms`);
      const gap = st.gapP50 as Spread;
      const interval = R.meta.settings.intervalMs as number;
      const ratio = st.separateReadRatio as number;
      const notBatched =
        ratio >= 0.95 && Math.abs(gap.median - interval) <= 1 && (st.minChunks as number) === R.meta.settings.chunks;
      add(
        "streaming: chunks not batched",
        g,
        ">= 95% of chunks in their own read, gap p50 within 1 ms of the interval",
        ratio,
        notBatched,
        `${pct(ratio)} own reads, gap p50 ${f2(gap.median)} ms (interval ${interval} ms), min ${st.minChunks} chunks`,
      );
    }
    const cr = D.cross[g];
    if (cr)
      add(
        "cross-protocol throughput vs same-protocol",
        g,
        ">= 80%",
        cr.ratio.median,
        cr.ratio.median >= 0.8,
        `${sp(cr.ratio, pct)}`,
      );
    const cs = R.concurrentStreams[g];
    if (cs) {
      add(
        "RSS idle",
        g,
        "<= 150 MB",
        cs.idleMB,
        cs.idleMB <= 150,
        `${f1(cs.idleMB)} MB before the streams (${f1(R.bootRssMB[g] ?? Number.NaN)} MB at boot)`,
      );
      add(
        `RSS with ${cs.streams} concurrent streams`,
        g,
        "<= 400 MB, no errors",
        cs.peakMB,
        cs.peakMB <= 400 && cs.client.errors === 0,
        `peak ${f1(cs.peakMB)} MB, ${cs.client.errors} errors of ${cs.client.streams}`,
      );
      add(
        "RSS back near idle after the streams",
        g,
        `<= ${NEAR_IDLE}x idle, 5 s after`,
        cs.afterMB,
        cs.afterMB <= NEAR_IDLE * cs.idleMB,
        `${f1(cs.afterMB)} MB (${f2(cs.afterMB / cs.idleMB)}x idle)`,
      );
    }
  }
  return out;
}

/**
 * The report. `findings` (bench/FINDINGS.md: what the profiles show and why a target is missed,
 * written by people) goes right after the targets, so a regenerated report keeps it.
 */
export function renderMarkdown(R: Results, findings = ""): string {
  const D = R.derived ?? derive(R);
  const V = R.meta.versions;
  const S = R.meta.settings as Record<string, unknown> & { concurrency: number[] };
  const names = Object.keys(R.targets);
  const label = (t: string) => `\`${t}\``;
  const L: string[] = [];
  L.push("# Benchmark results", "");
  L.push(
    `Run \`${R.meta.runId}\` on ${R.meta.date.slice(0, 16).replace("T", " ")} UTC${R.meta.quick ? " (**quick smoke run: not for comparison**)" : ""}, ${Math.round(R.meta.durationS / 60)} min. ` +
      `Load average before: ${R.meta.loadAvgStart.join(" / ")}; after: ${R.meta.loadAvgEnd.join(" / ")}. ` +
      `Produced by \`npm run bench\` (bench/README.md explains each scenario and how to read this).`,
    "",
  );
  L.push("| | |", "|---|---|");
  L.push(`| machine | ${V.cores} cores, ${V.cpuModel}, ${V.memoryGB} GB, Linux ${V.kernel} |`);
  L.push(`| Bun | ${V.bun} (gateway, mock, forwarder, clients) |`, `| Node | ${V.node} |`);
  L.push(`| gateway commit | ${V.gatewayCommit}${V.gatewayDirty ? " plus uncommitted changes under src/" : ""} |`);
  L.push(`| Portkey gateway | ${V.portkey} (npm \`@portkey-ai/gateway\`, \`--headless\`) |`);
  L.push(`| load generator | ${V.loadGenerator}${V.wrk !== "absent" ? ` (${V.wrk})` : ""} |`);
  L.push(
    `| method | closed loop; ${S.rounds} interleaved round(s), target order rotated per round; ${S.warmupS} s warm-up discarded before every ${S.durationS} s measurement (${S.latencyDurationS} s at c=1); figures are the median of the rounds with (min–max) |`,
    "",
  );

  L.push("## Targets", "");
  L.push("| target | threshold | measured | met |", "|---|---|---|---|");
  for (const v of R.verdicts)
    L.push(`| ${v.target} (${label(v.subject)}) | ${v.threshold} | ${v.value} | ${v.met ? "yes" : "**no**"} |`);
  L.push("");
  if (findings.trim()) L.push(findings.trim().replace(/^# .*\n+/, ""), "");

  L.push("## Throughput: OpenAI chat, non-streaming (requests/s)", "");
  L.push(
    `Mock ceiling (direct, measured first): ${k(R.mockCeiling.rps)} req/s. † = within ${Math.round(MOCK_BOUND * 100)}% of it (mock-bound).`,
    "",
  );
  const cs = S.concurrency;
  L.push(
    `| target | ${cs.map((c) => `c=${c}`).join(" | ")} | c=1 (latency run) |`,
    `|---|${cs.map(() => "---:").join("|")}|---:|`,
  );
  for (const t of names) {
    const row = cs.map((c) => {
      const s = D.throughput[t]?.[c];
      return s ? `${sp(s, k)}${s.mockBound ? " †" : ""}` : "n/a";
    });
    const lat = R.latency[t];
    L.push(`| ${label(t)} | ${row.join(" | ")} | ${lat ? k(median(lat.map((r) => r.rps))) : "n/a"} |`);
  }
  L.push("");
  L.push(
    `| ratio | peak vs peak | ${cs.map((c) => `c=${c}`).join(" | ")} |`,
    `|---|---:|${cs.map(() => "---:").join("|")}|`,
  );
  for (const [name, r] of Object.entries(D.ratios))
    L.push(`| ${name} | ${pct(r.peak)} | ${cs.map((c) => pct(r.byConcurrency[c] ?? Number.NaN)).join(" | ")} |`);
  L.push(
    "",
    "CPU of the target process per request (µs) and its utilization (% of one core), median of the rounds; the mock's own CPU share in the last column at the headline concurrency:",
    "",
  );
  L.push(
    `| target | ${cs.map((c) => `c=${c}`).join(" | ")} | mock CPU at c=${S.headlineC} |`,
    `|---|${cs.map(() => "---:").join("|")}|---:|`,
  );
  for (const t of names) {
    const cell = (c: number) => {
      const runs = R.throughput[t]?.[c];
      if (!runs?.length || runs[0]?.cpuUsPerRequest === undefined) return "n/a";
      return `${k(median(runs.map((r) => r.cpuUsPerRequest ?? Number.NaN)))} µs (${k(median(runs.map((r) => r.cpuPct ?? Number.NaN)))}%)`;
    };
    const mockRuns = R.throughput[t]?.[S.headlineC as number];
    const mockPct = mockRuns?.length ? `${k(median(mockRuns.map((r) => r.mockCpuPct ?? Number.NaN)))}%` : "n/a";
    L.push(`| ${label(t)} | ${cs.map(cell).join(" | ")} | ${mockPct} |`);
  }
  L.push("", "Target descriptions:", "");
  for (const t of names) L.push(`- ${label(t)}: ${R.targets[t]?.label}`);
  L.push("");

  L.push("## Latency at concurrency 1 (ms)", "");
  L.push("Added = target minus direct-to-mock in the same round.", "");
  L.push(
    "| target | p50 | p99 | added p50 | added p99 | gateway's own x-gateway-overhead-ms p50 / p99 |",
    "|---|---:|---:|---:|---:|---:|",
  );
  for (const t of names) {
    const l = D.latency[t];
    if (!l) continue;
    const o = R.overhead[t];
    L.push(
      `| ${label(t)} | ${sp(l.p50, f3)} | ${sp(l.p99, f3)} | ${t === "direct" ? "—" : sp(l.addedP50, f3)} | ${t === "direct" ? "—" : sp(l.addedP99, f3)} | ${o ? `${f3(o.p50)} / ${f3(o.p99)}` : ""} |`,
    );
  }
  L.push("");

  L.push(`## Streaming: ${S.chunks} chunks every ${S.intervalMs} ms, one stream at a time (ms)`, "");
  L.push(
    "TTFT = request start to the first content chunk at the client; gap = between consecutive content chunks; own reads = share of chunks that arrived in a read of their own (1.0 = nothing batched).",
    "",
  );
  L.push(
    "| target | TTFT p50 | added TTFT p50 | gap p50 | gap p99 | added gap p50 | added gap p99 | own reads | max chunks in one read | errors |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  );
  for (const t of names) {
    const s = D.streaming[t];
    if (!s) continue;
    const d = t === "direct";
    L.push(
      `| ${label(t)} | ${sp(s.ttftP50 as Spread, f3)} | ${d ? "—" : sp(s.addedTtftP50 as Spread, f3)} | ${sp(s.gapP50 as Spread, f3)} | ${sp(s.gapP99 as Spread, f3)} | ${d ? "—" : sp(s.addedGapP50 as Spread, f3)} | ${d ? "—" : sp(s.addedGapP99 as Spread, f3)} | ${pct(s.separateReadRatio as number)} | ${s.maxChunksPerRead} | ${s.errors} |`,
    );
  }
  L.push("");

  L.push(`## Cross-protocol: Anthropic messages client to the OpenAI upstream (c=${S.headlineC}, requests/s)`, "");
  L.push("| gateway | OpenAI chat (same protocol) | Anthropic messages (translated) | ratio |", "|---|---:|---:|---:|");
  for (const [g, c] of Object.entries(D.cross))
    L.push(`| ${label(g)} | ${sp(c.openai, k)} | ${sp(c.anthropic, k)} | ${sp(c.ratio, pct)} |`);
  L.push("");

  L.push(`## Concurrent slow streams (${S.slowStreams} at once, ${S.chunks} chunks every ${S.slowIntervalMs} ms)`, "");
  L.push(
    `An unhindered stream lasts ${((S.chunks as number) - 1) * (S.slowIntervalMs as number)} ms. RSS sampled from /proc every 100 ms; "after" is 5 s after the last stream ended.`,
    "",
  );
  L.push(
    "| target | errors | TTFT p50 / p99 | stream duration p50 / p99 / max | wall | RSS idle | RSS peak | RSS after |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  );
  for (const [t, c] of Object.entries(R.concurrentStreams)) {
    const cl = c.client;
    L.push(
      `| ${label(t)}${t === "direct" ? " (RSS: the mock's)" : ""} | ${cl.errors} of ${cl.streams} | ${k(cl.ttftMs.p50)} / ${k(cl.ttftMs.p99)} | ${k(cl.totalMs.p50)} / ${k(cl.totalMs.p99)} / ${k(cl.totalMs.max)} | ${k(cl.wallMs)} | ${f1(c.idleMB)} MB | ${f1(c.peakMB)} MB | ${f1(c.afterMB)} MB |`,
    );
  }
  L.push("");

  if (R.auth && D.auth) {
    const a = R.auth;
    L.push(`## Authentication with ${k(a.keys)} keys in Postgres (\`gateway-pg\`, c=${a.concurrency})`, "");
    L.push(
      `${k(a.keys)} keys inserted straight into \`api_keys\` in ${f1(a.insertS)} s. "Many keys" sends a different key on every request; ${k(a.keysUsed)} keys were used in the measured runs, so about ${pct(a.firstUseFraction)} of those requests were a key's first use (a cache miss). DB transactions per request from pg_stat_database (includes the batched request-log writes).`,
      "",
    );
    L.push("| mode | requests/s | p99 ms | DB transactions per request |", "|---|---:|---:|---:|");
    L.push(`| one key (cache hit) | ${sp(D.auth.one, k)} | ${sp(D.auth.p99One, f2)} | ${f2(D.auth.txPerRequestOne)} |`);
    L.push(
      `| a new key per request (cache miss) | ${sp(D.auth.many, k)} | ${sp(D.auth.p99Many, f2)} | ${f2(D.auth.txPerRequestMany)} |`,
    );
    L.push(`| ratio many / one | ${sp(D.auth.ratio, pct)} | | |`, "");
    L.push(
      `RSS of \`gateway-pg\`: ${f1(a.rssBeforeMB)} MB before this scenario, ${f1(a.rssAfterMB)} MB 5 s after it (${k(a.keysUsed)} keys seen for the first time, plus the one key).`,
      "",
    );
  }

  L.push("## RSS at boot (MB, idle after start-up and one request of each kind)", "");
  L.push(`| ${names.map(label).join(" | ")} |`, `|${names.map(() => "---:").join("|")}|`);
  L.push(`| ${names.map((t) => f1(R.bootRssMB[t] ?? Number.NaN)).join(" | ")} |`, "");

  L.push("## Caveats", "");
  L.push(
    "- wrk, the mock and the target share the machine's cores, so every proxy's figure is what is left once wrk and the mock have taken theirs (the CPU table shows each process's share). Absolute requests/s move between runs on a shared VM (the forwarder has measured anywhere from about 14k to 30k req/s here); compare ratios from one run.",
    "- Bun's `fetch` runs at most 256 requests at once per process unless `BUN_CONFIG_MAX_HTTP_REQUESTS` is raised before Bun starts; `npm start` and the Docker image set 4096 for the gateway, and the forwarder, the gateways and Portkey on Bun all run with 4096 here.",
    "- Latency percentiles come from wrk's histogram (microsecond resolution); p99 at c=1 over 4 s is a few hundred samples' tail, so it moves with anything else the machine does.",
    "- Portkey gets no auth, limits or request logging: it is a reference for the proxy path, not a like-for-like gateway.",
    "",
  );
  if (R.notes.length) {
    L.push("## Notes from the run", "");
    for (const n of R.notes) L.push(`- ${n}`);
    L.push("");
  }
  return `${L.join("\n")}\n`;
}
