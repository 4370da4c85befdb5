/** Small statistics helpers shared by the harness scripts. */

/** Nearest-rank percentile of unsorted values (q in 0..100); NaN for an empty list. */
export function percentile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((q / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** Every round's value, in order. */
  rounds: number[];
}

/** Median with min-max over rounds. */
export function spread(values: number[]): Spread {
  return {
    median: median(values),
    min: Math.min(...values),
    max: Math.max(...values),
    rounds: values,
  };
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** Rounds for display and JSON: 3 significant decimals at most. */
export const round3 = (x: number) => Math.round(x * 1000) / 1000;

/** What one closed-loop load run measured (wrk's Lua `done` or the Bun fallback print this shape). */
export interface LoadResult {
  requests: number;
  duration_us: number;
  bytes: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latency_us: {
    min: number;
    mean: number;
    stdev: number;
    max: number;
    p50: number;
    p90: number;
    p99: number;
    p999: number;
  };
  rps: number;
}

/** Min and max without spreading (large arrays overflow the argument limit). */
export function extent(values: number[]): { min: number; max: number } {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return values.length ? { min, max } : { min: Number.NaN, max: Number.NaN };
}

/** What results.json keeps of one load run. */
export interface LoadSummary {
  rps: number;
  requests: number;
  errors: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** CPU used by the target process during the measurement: % of one core, and microseconds per request. */
  cpuPct?: number;
  cpuUsPerRequest?: number;
  /** CPU used by the mock meanwhile, % of one core. */
  mockCpuPct?: number;
}
