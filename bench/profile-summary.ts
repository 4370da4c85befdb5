/**
 * Summarizes a .cpuprofile (from `BENCH_PROFILE=1 npm run bench`) by sample counts, not by time:
 * the time-weighted view that Bun's markdown export gives charges idle gaps to whatever ran last.
 *
 *   bun bench/profile-summary.ts <file.cpuprofile> [top=30] [filter]
 *
 * Prints samples by package or source folder, then the functions with the most samples on top of
 * the stack (self) and anywhere on the stack (inclusive), as a share of all samples that ran
 * JavaScript or native code (idle excluded);
 * `filter` keeps only functions whose name or location contains it. PROFILE_LAST_S=<n> keeps only the
 * samples of the profile's last n seconds (the steady state under load, without start-up).
 */
interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas?: number[];
}

const [file, topArg, filter] = process.argv.slice(2);
if (!file) {
  console.error("usage: bun bench/profile-summary.ts <file.cpuprofile> [top] [filter]");
  process.exit(2);
}
const top = Number(topArg ?? 30);
const profile = (await Bun.file(file).json()) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const IDLE = new Set(["(idle)", "(program)", "(garbage collector)", "(root)"]);
const name = (n: Node) => {
  const where = n.callFrame.url
    ? `${n.callFrame.url.replace(/^.*\/work\/main\//, "")}:${n.callFrame.lineNumber + 1}`
    : "";
  return `${n.callFrame.functionName || "(anonymous)"}${where ? ` ${where}` : ""}`;
};

/** The package (node_modules/<pkg>) or source folder (src/<dir>) a frame belongs to. */
const area = (n: Node): string | undefined => {
  const url = n.callFrame.url;
  if (!url) return undefined;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const src = /\/src\/([^/]+)/.exec(url);
  if (src) return `src/${src[1]}`;
  return url.startsWith("internal:") || url.startsWith("node:") ? "bun node-compat (node:net, streams)" : url;
};

const self = new Map<string, number>();
const byArea = new Map<string, number>();
const inclusive = new Map<string, number>();
let total = 0;
// Sample times (microseconds from the start) from the deltas, to keep only the last PROFILE_LAST_S.
const lastS = Number(process.env.PROFILE_LAST_S ?? 0);
let samples = profile.samples;
if (lastS > 0 && profile.timeDeltas) {
  const times: number[] = [];
  let t = 0;
  for (const d of profile.timeDeltas) {
    t += d;
    times.push(t);
  }
  const from = t - lastS * 1e6;
  samples = samples.filter((_, i) => (times[i] ?? 0) >= from);
}
for (const id of samples) {
  const leaf = byId.get(id);
  if (!leaf || IDLE.has(leaf.callFrame.functionName)) continue;
  total++;
  self.set(name(leaf), (self.get(name(leaf)) ?? 0) + 1);
  // Native frames (fetch, socket writes, JSON) count for the nearest caller that has a location.
  let owner: string | undefined;
  for (let cur: number | undefined = id; cur !== undefined && !owner; cur = parent.get(cur)) {
    const n = byId.get(cur);
    if (n) owner = area(n);
  }
  byArea.set(owner ?? "(native, no JS caller)", (byArea.get(owner ?? "(native, no JS caller)") ?? 0) + 1);
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const n = byId.get(cur);
    if (!n) break;
    const key = name(n);
    if (seen.has(key) || IDLE.has(n.callFrame.functionName)) continue;
    seen.add(key);
    inclusive.set(key, (inclusive.get(key) ?? 0) + 1);
  }
}

const show = (title: string, m: Map<string, number>) => {
  console.log(`\n${title} (${total} non-idle samples)`);
  const rows = [...m.entries()].filter(([k]) => !filter || k.includes(filter)).sort((a, b) => b[1] - a[1]);
  for (const [k, v] of rows.slice(0, top)) console.log(`${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`);
};
show("self by package or source folder (native frames charged to their caller)", byArea);
show("self", self);
show("inclusive", inclusive);

// A module (not a script), so top-level await is allowed.
export {};
