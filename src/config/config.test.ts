import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, DEFAULTS, loadConfig } from "./index";

const dir = mkdtempSync(join(tmpdir(), "gw-config-"));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const failsWith = (env: Record<string, string>, ...fragments: string[]) => {
  let message = "";
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    message = (e as Error).message;
  }
  for (const f of fragments) expect(message).toContain(f);
};

describe("configuration", () => {
  test("defaults with an empty environment: port 4000, embedded database under ./.data", () => {
    const c = loadConfig({});
    expect(c.port).toBe(4000);
    expect(c.masterKey).toBeUndefined();
    expect(c.database).toEqual({ dataDir: join(process.cwd(), ".data") });
    expect(c.redisUrl).toBeUndefined();
    expect(c.maxBodyBytes).toBe(DEFAULTS.maxBodyBytes);
    expect(c.logLevel).toBe("info");
  });

  test("reads every variable", () => {
    const c = loadConfig({
      PORT: "8080",
      GATEWAY_HOST: "127.0.0.1",
      GATEWAY_MASTER_KEY: "sk-master-1234",
      DATABASE_URL: "postgres://u:p@db:5432/gw",
      REDIS_URL: "redis://cache:6379",
      GATEWAY_LOG_LEVEL: "debug",
    });
    expect(c).toMatchObject({
      port: 8080,
      host: "127.0.0.1",
      masterKey: "sk-master-1234",
      database: { url: "postgres://u:p@db:5432/gw" },
      redisUrl: "redis://cache:6379",
      logLevel: "debug",
    });
    expect(loadConfig({ GATEWAY_DATA_DIR: "/var/lib/gw" }).database).toEqual({ dataDir: "/var/lib/gw" });
  });

  test("invalid variables fail naming the variable", () => {
    failsWith({ PORT: "http" }, "PORT", "'http'");
    failsWith({ PORT: "70000" }, "PORT");
    failsWith({ DATABASE_URL: "mysql://x" }, "DATABASE_URL");
    failsWith({ REDIS_URL: "localhost:6379" }, "REDIS_URL");
    failsWith({ GATEWAY_MASTER_KEY: "short" }, "GATEWAY_MASTER_KEY");
    failsWith({ GATEWAY_LOG_LEVEL: "loud" }, "GATEWAY_LOG_LEVEL", "loud");
    failsWith({ GATEWAY_CONFIG: join(dir, "missing.yaml") }, "GATEWAY_CONFIG", "missing.yaml");
  });

  test("the YAML file: values, ${VAR} expansion, and errors that name the field", () => {
    const good = file(
      "good.yaml",
      "server:\n  max_body_bytes: ${BODY_LIMIT}\n  shutdown_timeout_seconds: 5\nauth:\n  key_cache_ttl_seconds: ${TTL:-0}\n",
    );
    // a value that is exactly one variable takes the variable's YAML type
    expect(loadConfig({ GATEWAY_CONFIG: good, BODY_LIMIT: "1024" })).toMatchObject({
      maxBodyBytes: 1024,
      keyCacheTtlMs: 0,
    });
    failsWith({ GATEWAY_CONFIG: good, BODY_LIMIT: "lots" }, "server.max_body_bytes", "lots");
    failsWith({ GATEWAY_CONFIG: good }, "server.max_body_bytes", "BODY_LIMIT");
    const plain = file(
      "plain.yaml",
      "server:\n  max_body_bytes: 1024\n  shutdown_timeout_seconds: 5\nauth:\n  key_cache_ttl_seconds: 0\n",
    );
    expect(loadConfig({ GATEWAY_CONFIG: plain })).toMatchObject({
      maxBodyBytes: 1024,
      shutdownTimeoutMs: 5000,
      keyCacheTtlMs: 0,
    });
    failsWith({ GATEWAY_CONFIG: file("unknown.yaml", "server:\n  max_body: 5\n") }, "server.max_body", "Unknown field");
    failsWith({ GATEWAY_CONFIG: file("neg.yaml", "server:\n  max_body_bytes: -5\n") }, "server.max_body_bytes");
    failsWith({ GATEWAY_CONFIG: file("bad.yaml", "server: [1,\n") }, "not valid YAML");
    failsWith(
      { GATEWAY_CONFIG: file("env.yaml", "auth:\n  note: ${NOT_SET_ANYWHERE}\n") },
      "auth.note",
      "NOT_SET_ANYWHERE",
    );
    expect(loadConfig({ GATEWAY_CONFIG: file("empty.yaml", "") }).port).toBe(4000);
  });

  test("limits and Redis settings: defaults, values and bounds", () => {
    expect(loadConfig({ GATEWAY_CONFIG: file("none.yaml", "") })).toMatchObject({
      redisFailure: "fail_open",
      redisCommandTimeoutMs: 1000,
      leaseMs: 120_000,
    });
    const set = file(
      "limits.yaml",
      "limits:\n  redis_failure: fail_closed\n  lease_seconds: 30\nredis:\n  key_prefix: gw2\n  command_timeout_ms: 250\n",
    );
    expect(loadConfig({ GATEWAY_CONFIG: set })).toMatchObject({
      redisFailure: "fail_closed",
      leaseMs: 30_000,
      redisPrefix: "gw2",
      redisCommandTimeoutMs: 250,
    });
    failsWith({ GATEWAY_CONFIG: file("t0.yaml", "redis:\n  command_timeout_ms: 0\n") }, "redis.command_timeout_ms");
    failsWith({ GATEWAY_CONFIG: file("tx.yaml", "redis:\n  command_timeout_ms: soon\n") }, "redis.command_timeout_ms");
  });
});
