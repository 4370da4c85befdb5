/** The run contract, against real processes: what `npm start` does. */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTempDatabase, IN_CI, POSTGRES_AVAILABLE } from "./helpers/backends";
import { type GatewayProcess, MASTER_KEY_RE, runGatewayToExit, spawnGateway } from "./helpers/process";
import { openaiCompletion } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

const dirs: string[] = [];
const running: GatewayProcess[] = [];
const drops: Array<() => Promise<void>> = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "gw-server-"));
  dirs.push(d);
  return d;
};
afterAll(async () => {
  for (const p of running) if (p.proc.exitCode === null) await p.stop("SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const drop of drops) await drop();
});

async function start(env: Record<string, string>) {
  const p = await spawnGateway(env);
  running.push(p);
  return p;
}

const json = (body: unknown, key: string) => ({
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
  body: JSON.stringify(body),
});

describe("embedded mode (no DATABASE_URL)", () => {
  test("first start generates and prints a master key once; later starts reuse its stored hash", async () => {
    const dataDir = tempDir();
    const first = await start({ GATEWAY_DATA_DIR: dataDir });
    const printed = first.stdout().match(MASTER_KEY_RE) ?? [];
    expect(printed).toHaveLength(1);
    const master = printed[0] as string;
    expect((await fetch(`${first.url}/health/liveliness`)).status).toBe(200);
    expect((await fetch(`${first.url}/health/readiness`)).status).toBe(200);
    const team = await fetch(`${first.url}/team/new`, json({ team_id: "t1" }, master));
    expect(team.status).toBe(200);
    const key = (await (await fetch(`${first.url}/key/generate`, json({ team_id: "t1" }, master))).json()) as {
      key: string;
    };
    expect(await first.stop()).toBe(0);
    // only the printed banner ever held the key; log lines did not
    expect(
      first
        .stdout()
        .split("\n")
        .filter((l) => l.includes(key.key)),
    ).toEqual([]);

    const second = await start({ GATEWAY_DATA_DIR: dataDir });
    expect(second.stdout().match(MASTER_KEY_RE)).toBeNull();
    const info = await fetch(`${second.url}/key/info`, { headers: { authorization: `Bearer ${key.key}` } });
    expect(info.status).toBe(200);
    expect(
      (await fetch(`${second.url}/team/info?team_id=t1`, { headers: { authorization: `Bearer ${master}` } })).status,
    ).toBe(200);
    expect(await second.stop()).toBe(0);
  });

  test("GATEWAY_MASTER_KEY is used as given and never printed", async () => {
    const master = "sk-configured-master-key-0123456789";
    const p = await start({ GATEWAY_DATA_DIR: tempDir(), GATEWAY_MASTER_KEY: master });
    expect(p.stdout()).not.toContain(master);
    expect(p.stdout().match(MASTER_KEY_RE)).toBeNull();
    expect((await fetch(`${p.url}/team/new`, json({}, master))).status).toBe(200);
    expect((await fetch(`${p.url}/team/new`, json({}, "sk-wrong"))).status).toBe(401);
    expect(await p.stop("SIGINT")).toBe(0);
  });

  test("SIGTERM stops accepting, finishes the request in flight, writes its log and spend, and exits 0", async () => {
    const master = "sk-drain-master-key-0123456789";
    // The in-flight request is a model call that the upstream holds until the test releases it.
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const upstream = startMockUpstream(async () => {
      await held;
      return openaiCompletion("finished after SIGTERM", { prompt: 1000, completion: 500 });
    });
    const dir = tempDir();
    const config = join(dir, "gateway.yaml");
    writeFileSync(
      config,
      `providers:\n  up: { type: openai, api_base: "${upstream.url}/v1" }\nmodels:\n  - { name: up/m, input_cost_per_token: 0.001, output_cost_per_token: 0.002 }\n`,
    );
    const env = { GATEWAY_DATA_DIR: dir, GATEWAY_MASTER_KEY: master, GATEWAY_CONFIG: config };
    const p = await start(env);
    expect((await fetch(`${p.url}/team/new`, json({ team_id: "drain" }, master))).status).toBe(200);
    const key = (await (await fetch(`${p.url}/key/generate`, json({ team_id: "drain" }, master))).json()) as {
      key: string;
      token_id: string;
    };
    const inflight = fetch(
      `${p.url}/v1/chat/completions`,
      json({ model: "up/m", messages: [{ role: "user", content: "x" }] }, key.key),
    );
    for (let i = 0; i < 200 && upstream.requests.length === 0; i++) await Bun.sleep(25);
    expect(upstream.requests).toHaveLength(1);
    p.proc.kill("SIGTERM");
    // stops accepting at once...
    let refused = false;
    for (let i = 0; i < 100 && !refused; i++) {
      refused = await fetch(`${p.url}/health/liveliness`).then(
        () => false,
        () => true,
      );
      if (!refused) await Bun.sleep(20);
    }
    expect(refused).toBe(true);
    expect(p.proc.exitCode).toBeNull();
    // ...finishes the request in flight, then exits 0
    release();
    const res = await inflight;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe(
      "finished after SIGTERM",
    );
    expect(await p.proc.exited).toBe(0);
    expect(p.stdout()).toContain('"msg":"stopped"');
    upstream.close();

    // The request finished after SIGTERM: its request-log row and spend were flushed before exit.
    const again = await start(env);
    const auth = { headers: { authorization: `Bearer ${master}` } };
    const info = (await (await fetch(`${again.url}/key/info?key=${key.token_id}`, auth)).json()) as { spend: number };
    expect(info.spend).toBeCloseTo(1000 * 0.001 + 500 * 0.002, 6);
    const logs = (await (await fetch(`${again.url}/spend/logs?key=${key.token_id}`, auth)).json()) as {
      logs: { model: string; status: number; input_tokens: number; output_tokens: number }[];
    };
    expect(logs.logs).toHaveLength(1);
    expect(logs.logs[0]).toMatchObject({ model: "up/m", status: 200, input_tokens: 1000, output_tokens: 500 });
    expect(await again.stop()).toBe(0);
  });

  test("bodies over the limit get a 413 in the error envelope from the real server", async () => {
    const master = "sk-limit-master-key-0123456789";
    const dir = tempDir();
    const config = join(dir, "gateway.yaml");
    writeFileSync(config, "server:\n  max_body_bytes: 1024\n");
    const p = await start({ GATEWAY_DATA_DIR: dir, GATEWAY_MASTER_KEY: master, GATEWAY_CONFIG: config });
    const big = JSON.stringify({ metadata: { x: "y".repeat(1500) } });
    const r = await fetch(`${p.url}/team/new`, json(JSON.parse(big), master));
    expect(r.status).toBe(413);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("request_too_large");
    // any size, declared or streamed, gets the same envelope (never Bun's bare 413)
    const envelope413 = async (r: Response) => {
      expect(r.status).toBe(413);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe("request_too_large");
    };
    await envelope413(await fetch(`${p.url}/team/new`, { ...json({}, master), body: "x".repeat(10_000) }));
    await envelope413(await fetch(`${p.url}/team/new`, { ...json({}, master), body: new Uint8Array(20_000_000) }));
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 200; i++) c.enqueue(new Uint8Array(100_000).fill(32));
        c.close();
      },
    });
    await envelope413(await fetch(`${p.url}/team/new`, { ...json({}, master), body: chunks }));
    // Bun's own limit on the request line and headers (16 KiB): a bare 431, as the README says
    const longUrl = await fetch(`${p.url}/key/info?key=${"k".repeat(20_000)}`, {
      headers: { authorization: `Bearer ${master}` },
    });
    expect(longUrl.status).toBe(431);
    expect((await fetch(`${p.url}/health/liveliness`)).status).toBe(200);
    expect(await p.stop()).toBe(0);
  });
});

describe("a port already in use", () => {
  // Two embedded-database starts in a row: slow on a busy machine.
  test("a second instance on a taken port exits 1 saying so, and the first keeps serving", async () => {
    const first = await spawnGateway(
      { GATEWAY_DATA_DIR: tempDir(), GATEWAY_MASTER_KEY: "sk-first-master-key-0123456789" },
      120_000,
    );
    running.push(first);
    const second = await runGatewayToExit(
      {
        GATEWAY_DATA_DIR: tempDir(),
        GATEWAY_MASTER_KEY: "sk-second-master-key-0123456789",
        PORT: String(first.port),
      },
      120_000,
    );
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`PORT ${first.port} is already in use`);
    expect(second.stdout).not.toContain("gateway listening");
    expect(second.stdout + second.stderr).not.toMatch(/\bat .+:\d+:\d+/);
    // every connection still reaches the first instance
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${first.url}/team/list`, {
        headers: { authorization: "Bearer sk-first-master-key-0123456789" },
      });
      expect(r.status).toBe(200);
    }
    expect(await first.stop()).toBe(0);
  }, 300_000);
});

describe("invalid configuration fails at start, naming the field", () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ["PORT", { PORT: "not-a-port" }, "PORT"],
    ["DATABASE_URL", { DATABASE_URL: "mysql://localhost/x" }, "DATABASE_URL"],
    ["REDIS_URL", { REDIS_URL: "localhost:6379" }, "REDIS_URL"],
    ["GATEWAY_MASTER_KEY", { GATEWAY_MASTER_KEY: "abc" }, "GATEWAY_MASTER_KEY"],
    ["GATEWAY_CONFIG missing", { GATEWAY_CONFIG: "/nonexistent/gateway.yaml" }, "GATEWAY_CONFIG"],
  ];
  for (const [label, env, field] of cases) {
    test(label, async () => {
      const r = await runGatewayToExit({ GATEWAY_DATA_DIR: tempDir(), ...env });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(field);
      expect(r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
    });
  }
  test("config file with an unknown field", async () => {
    const dir = tempDir();
    const config = join(dir, "gateway.yaml");
    writeFileSync(config, "server:\n  max_body_bytez: 10\n");
    const r = await runGatewayToExit({ GATEWAY_DATA_DIR: dir, GATEWAY_CONFIG: config });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("server.max_body_bytez");
  });
  test("an unreachable database exits 1 with a log line, no stack trace", async () => {
    const r = await runGatewayToExit({ DATABASE_URL: "postgres://postgres@127.0.0.1:1/none" });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("cannot open the database");
    expect(r.stdout + r.stderr).not.toMatch(/\bat .+:\d+:\d+/);
  });
});

describe("Postgres (DATABASE_URL)", () => {
  test("instances starting together migrate once, agree on one master key, and share keys", async () => {
    if (!POSTGRES_AVAILABLE) {
      if (IN_CI) throw new Error("CI=true requires Postgres");
      return;
    }
    const temp = await createTempDatabase();
    drops.push(temp.drop);
    const [a, b] = await Promise.all([start({ DATABASE_URL: temp.url }), start({ DATABASE_URL: temp.url })]);
    const printed = [...(a.stdout().match(MASTER_KEY_RE) ?? []), ...(b.stdout().match(MASTER_KEY_RE) ?? [])];
    expect(printed).toHaveLength(1);
    const master = printed[0] as string;
    expect((await fetch(`${a.url}/health/readiness`)).status).toBe(200);
    expect((await fetch(`${b.url}/team/new`, json({ team_id: "shared" }, master))).status).toBe(200);
    const made = (await (await fetch(`${a.url}/key/generate`, json({ team_id: "shared" }, master))).json()) as {
      key: string;
    };
    const onB = await fetch(`${b.url}/key/info`, { headers: { authorization: `Bearer ${made.key}` } });
    expect(onB.status).toBe(200);
    expect([await a.stop(), await b.stop()]).toEqual([0, 0]);
  });
});
