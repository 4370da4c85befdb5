/** An in-process gateway over a chosen backend, driven through `app.handle()`. */
import { afterAll, beforeAll, describe } from "bun:test";
import { type App, createApp } from "../../src/app";
import { Authenticator } from "../../src/auth/authenticator";
import { Propagator } from "../../src/auth/propagation";
import { buildInference, type InferenceConfig, type InferenceParts } from "../../src/gateway";
import { probe } from "../../src/health/routes";
import type { KeyInfo } from "../../src/keys/model";
import { hashSecret } from "../../src/keys/secret";
import { createLogger } from "../../src/log";
import type { Redis } from "../../src/redis/client";
import type { teamInfo } from "../../src/teams/model";
import { BACKENDS, type Backend, type OpenedBackend } from "./backends";

/** A record as it crosses the wire: dates become ISO strings. */
export type Wire<T> = { [K in keyof T]: T[K] extends Date ? string : T[K] extends Date | null ? string | null : T[K] };
export type KeyWire = Wire<KeyInfo>;
export type GeneratedWire = KeyWire & { key: string };
export type TeamWire = Wire<ReturnType<typeof teamInfo>>;
export type ErrorWire = { error: { message: string; type: string; param: string | null; code: string | null } };

export interface CallOptions {
  body?: unknown;
  /** Sent as-is instead of JSON-encoding `body`. */
  raw?: string;
  key?: string | null;
  headers?: Record<string, string>;
}

export interface Reply<T> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export interface TestGateway {
  app: App;
  inference: InferenceParts;
  masterKey: string;
  opened: OpenedBackend;
  backend: Backend["name"];
  /** Everything the gateway logged. */
  logs: string[];
  /** The gateway's clock, in ms; move it with `advance`. */
  clock: { now(): number; advance(ms: number): void };
  call<T = unknown>(method: string, path: string, opts?: CallOptions): Promise<Reply<T>>;
  /** A team, a key in it, and the key's secret. */
  newKey(settings?: Record<string, unknown>, teamSettings?: Record<string, unknown>): Promise<GeneratedWire>;
  newTeam(settings?: Record<string, unknown>): Promise<TeamWire>;
  /** Serves the app on a real port (for SDK clients, disconnects, idle timeouts); returns its base URL. */
  listen(opts?: { idleTimeout?: number }): string;
  /** Writes buffered spend and request logs now. */
  flush(): Promise<void>;
  close(): Promise<void>;
}

let uniq = 0;
export const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${++uniq}`;

export interface GatewayOptions {
  maxBodyBytes?: number;
  /** Providers, models and router settings; no default catalog unless asked. */
  inference?: Partial<InferenceConfig>;
  heartbeatMs?: number;
  responsesRetentionMs?: number;
  /** A shared Redis: limits, version stamps and invalidation go through it. */
  redis?: Redis;
  /** Replaces the router's backoff sleeps (tests of retries need not wait). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** The router's clock (cooldowns, deployments' rpm/tpm minutes). */
  routerNow?: () => number;
}

export async function startGateway(backend: Backend, opts: GatewayOptions = {}): Promise<TestGateway> {
  // A gateway whose Redis is not connected yet would start on its failure policy.
  await opts.redis?.ready(5000);
  const opened = await backend.open();
  const masterKey = `sk-test-master-${crypto.randomUUID()}`;
  let offset = 0;
  const clock = {
    now: () => Date.now() + offset,
    advance: (ms: number) => {
      offset += ms;
    },
  };
  const logs: string[] = [];
  const log = createLogger("debug", (line) => void logs.push(line));
  const authenticator = new Authenticator(opened.database.db, {
    masterKeyHash: hashSecret(masterKey),
    cacheTtlMs: 10 * 60_000,
    cacheMaxEntries: 10_000,
    now: clock.now,
  });
  const inference = buildInference(
    { providers: {}, models: [], router: {}, includeDefaultCatalog: false, ...opts.inference },
    opened.database.db,
    log,
    {
      ledger: { batchSize: 100, flushIntervalMs: 5, maxBuffered: 100_000 },
      ...(opts.sleep ? { sleep: opts.sleep } : {}),
      ...(opts.routerNow ? { routerNow: opts.routerNow } : {}),
      ...(opts.redis ? { redis: opts.redis } : {}),
    },
  );
  const redis = opts.redis;
  if (opts.heartbeatMs !== undefined) inference.heartbeatMs = opts.heartbeatMs;
  const app = createApp({
    database: opened.database,
    authenticator,
    log,
    maxBodyBytes: opts.maxBodyBytes ?? 64 * 1024,
    ...(redis
      ? {
          invalidator: new Propagator(authenticator, log, inference.limiter),
          redisHealth: {
            check: probe(() => redis.ping(500)),
            critical: (opts.inference?.redisFailure ?? "fail_open") === "fail_closed",
          },
        }
      : {}),
    responsesRetentionMs: opts.responsesRetentionMs ?? 30 * 86_400_000,
    now: () => new Date(clock.now()),
    ...inference,
  });

  const call = async <T>(method: string, path: string, o: CallOptions = {}): Promise<Reply<T>> => {
    const headers: Record<string, string> = { ...o.headers };
    const key = o.key === undefined ? masterKey : o.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    let body: string | undefined;
    if (o.raw !== undefined) body = o.raw;
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers["content-type"] ??= "application/json";
    }
    const res = await app.handle(new Request(`http://localhost${path}`, { method, headers, body }));
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: res.status, body: parsed as T, headers: res.headers, text };
  };

  const newTeam = async (settings: Record<string, unknown> = {}) => {
    const r = await call<TeamWire>("POST", "/team/new", { body: { team_id: unique("team"), ...settings } });
    if (r.status !== 200) throw new Error(`team/new failed: ${r.text}`);
    return r.body;
  };
  const newKey = async (settings: Record<string, unknown> = {}, teamSettings: Record<string, unknown> = {}) => {
    const teamId = (settings.team_id as string | undefined) ?? (await newTeam(teamSettings)).team_id;
    const r = await call<GeneratedWire>("POST", "/key/generate", { body: { ...settings, team_id: teamId } });
    if (r.status !== 200) throw new Error(`key/generate failed: ${r.text}`);
    return r.body;
  };

  return {
    app,
    inference,
    masterKey,
    opened,
    backend: backend.name,
    logs,
    clock,
    call,
    newKey,
    newTeam,
    listen: (o = {}) => {
      if (!app.server) app.listen({ port: 0, hostname: "127.0.0.1", ...o });
      return `http://127.0.0.1:${app.server?.port}`;
    },
    flush: () => inference.ledger.flush(),
    close: async () => {
      if (app.server) await app.stop(true);
      await inference.ledger.close(2000);
      await inference.limiter.close();
      await opened.dispose();
    },
  };
}

/** Runs the same suite once per backend, each with its own gateway and database. */
export function describeEachBackend(
  title: string,
  body: (gw: () => TestGateway) => void,
  options?: () => GatewayOptions,
): void {
  for (const backend of BACKENDS) {
    describe(`${title} [${backend.name}]`, () => {
      let gw: TestGateway | undefined;
      beforeAll(async () => {
        gw = await startGateway(backend, options?.());
      });
      afterAll(async () => {
        await gw?.close();
      });
      body(() => {
        if (!gw) throw new Error(`the ${backend.name} gateway did not start`);
        return gw;
      });
    });
  }
}
