/** Real gateway processes (`bun src/index.ts`), as `npm start` runs them. */
import type { Subprocess } from "bun";

const ROOT = new URL("../..", import.meta.url).pathname;

export interface GatewayProcess {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  port: number;
  url: string;
  /** Everything written to stdout so far. */
  stdout(): string;
  stderr(): string;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number>;
}

export interface ExitedProcess {
  code: number;
  stdout: string;
  stderr: string;
}

function collect(stream: ReadableStream<Uint8Array>, sink: { text: string }, onChunk: () => void): void {
  const decoder = new TextDecoder();
  void (async () => {
    for await (const chunk of stream) {
      sink.text += decoder.decode(chunk, { stream: true });
      onChunk();
    }
  })();
}

const baseEnv = (env: Record<string, string>) => {
  const e: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    PORT: "0",
    GATEWAY_HOST: "127.0.0.1",
    ...env,
  };
  return e;
};

/** Starts a gateway and waits until it listens (or fails if it exits first). */
export async function spawnGateway(env: Record<string, string>, timeoutMs = 30_000): Promise<GatewayProcess> {
  const proc = Bun.spawn([process.execPath, "src/index.ts"], {
    cwd: ROOT,
    env: baseEnv(env),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = { text: "" };
  const err = { text: "" };
  let resolvePort: (port: number) => void = () => {};
  const portPromise = new Promise<number>((r) => {
    resolvePort = r;
  });
  const check = () => {
    const m = /"msg":"gateway listening".*?"port":(\d+)/.exec(out.text);
    if (m) resolvePort(Number(m[1]));
  };
  collect(proc.stdout, out, check);
  collect(proc.stderr, err, () => {});
  const port = await Promise.race([
    portPromise,
    proc.exited.then((code) => {
      throw new Error(`gateway exited with ${code} before listening:\n${out.text}\n${err.text}`);
    }),
    Bun.sleep(timeoutMs).then(() => {
      proc.kill("SIGKILL");
      throw new Error(`gateway did not listen within ${timeoutMs} ms:\n${out.text}\n${err.text}`);
    }),
  ]);
  return {
    proc,
    port,
    url: `http://127.0.0.1:${port}`,
    stdout: () => out.text,
    stderr: () => err.text,
    stop: async (signal = "SIGTERM") => {
      proc.kill(signal);
      return proc.exited;
    },
  };
}

/** Runs a gateway that is expected to exit on its own (bad configuration). */
export async function runGatewayToExit(env: Record<string, string>, timeoutMs = 30_000): Promise<ExitedProcess> {
  const proc = Bun.spawn([process.execPath, "src/index.ts"], {
    cwd: ROOT,
    env: baseEnv(env),
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  const [code, stdout, stderr] = await Promise.all([
    proc.exited,
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
  ]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

export const MASTER_KEY_RE = /sk-[0-9A-Za-z]{48}/g;
