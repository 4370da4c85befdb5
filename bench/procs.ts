/** Child processes of a benchmark run: start, find the port, sample memory, stop. */
import { appendFileSync, readFileSync } from "node:fs";
import type { Subprocess } from "bun";

export const ROOT = new URL("..", import.meta.url).pathname;
/** The repository's pinned Bun, as `npm start` runs it. */
export const BUN = `${ROOT}node_modules/.bin/bun`;

export interface Proc {
  name: string;
  pid: number;
  port: number;
  url: string;
  proc: Subprocess;
  stop(): Promise<void>;
}

export interface StartOptions {
  name: string;
  cmd: string[];
  env: Record<string, string>;
  /** Captures the port from a stdout line; absent: `port` is known in advance and polled. */
  portRe?: RegExp;
  port?: number;
  logFile: string;
  timeoutMs?: number;
}

const running = new Set<Proc>();

/** Starts a process and resolves once it listens (its port printed, or an HTTP answer on `port`). */
export async function start(o: StartOptions): Promise<Proc> {
  const proc = Bun.spawn(o.cmd, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...o.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  let found: (port: number) => void = () => {};
  const portFound = new Promise<number>((r) => {
    found = r;
  });
  const drain = async (stream: ReadableStream<Uint8Array>, tag: string) => {
    const dec = new TextDecoder();
    for await (const chunk of stream) {
      const text = dec.decode(chunk, { stream: true });
      appendFileSync(o.logFile, tag === "out" ? text : `[stderr] ${text}`);
      if (tag === "out" && o.portRe) {
        out += text;
        const m = o.portRe.exec(out);
        if (m) found(Number(m[1]));
        if (out.length > 100_000) out = out.slice(-10_000);
      }
    }
  };
  void drain(proc.stdout, "out");
  void drain(proc.stderr, "err");
  if (!o.portRe && o.port) void pollHttp(o.port, o.timeoutMs ?? 30_000).then(() => found(o.port as number));
  const timeoutMs = o.timeoutMs ?? 60_000;
  const timer = deadline(timeoutMs);
  const port = await Promise.race([
    portFound,
    proc.exited.then((code) => {
      throw new Error(`${o.name} exited with ${code} before listening; see ${o.logFile}`);
    }),
    timer.promise.then(() => {
      proc.kill("SIGKILL");
      throw new Error(`${o.name} did not listen within ${timeoutMs} ms; see ${o.logFile}`);
    }),
  ]).finally(timer.cancel);
  const p: Proc = {
    name: o.name,
    pid: proc.pid,
    port,
    url: `http://127.0.0.1:${port}`,
    proc,
    stop: async () => {
      running.delete(p);
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill("SIGTERM");
      const grace = deadline(15_000);
      const exited = await Promise.race([proc.exited.then(() => true), grace.promise.then(() => false)]);
      grace.cancel();
      if (!exited) {
        proc.kill("SIGKILL");
        await proc.exited;
      }
    },
  };
  running.add(p);
  return p;
}

/** A cancellable timer (a pending Bun.sleep would keep the process alive after the run). */
function deadline(ms: number): { promise: Promise<void>; cancel(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const promise = new Promise<void>((r) => {
    timer = setTimeout(r, ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

async function pollHttp(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      await Bun.sleep(100);
    }
  }
}

/** Stops every process this run started that is still running. */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop()));
}

/** A port that was free a moment ago (for programs that cannot listen on port 0 and report it). */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/** Resident set size of a process in MB, from /proc/<pid>/status (VmRSS). */
export async function rssMB(pid: number): Promise<number> {
  try {
    const status = await Bun.file(`/proc/${pid}/status`).text();
    const m = /VmRSS:\s+(\d+) kB/.exec(status);
    return m ? Number(m[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** CPU time (user + system) a process has used so far, in seconds, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may contain spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return Number.NaN;
  }
}
/** USER_HZ: 100 on every mainstream Linux build. */
const CLOCK_TICKS = 100;

/** Samples RSS every `everyMs` until stopped; returns the peak and every sample. */
export function sampleRss(pid: number, everyMs = 100) {
  const samples: number[] = [];
  const timer = setInterval(() => {
    void rssMB(pid).then((mb) => {
      if (!Number.isNaN(mb)) samples.push(mb);
    });
  }, everyMs);
  return {
    stop(): { peakMB: number; samples: number[] } {
      clearInterval(timer);
      return { peakMB: samples.reduce((a, b) => Math.max(a, b), 0), samples };
    },
  };
}

/** Runs a command to completion; resolves with its stdout (stderr is appended to the log file). */
export async function run(cmd: string[], logFile?: string, env?: Record<string, string>): Promise<string> {
  const proc = Bun.spawn(cmd, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (logFile) appendFileSync(logFile, `$ ${cmd.join(" ")}\n${stdout}${stderr ? `[stderr] ${stderr}` : ""}\n`);
  if (code !== 0) throw new Error(`${cmd[0]} exited with ${code}: ${stderr.slice(0, 500)}`);
  return stdout;
}
