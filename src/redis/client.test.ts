/**
 * The Redis wrapper against a real server, behind a TCP proxy the tests cut and restore for genuine
 * outages. Without Redis these tests are skipped with a warning, except under CI=true (they fail).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { requireRedis, TEST_REDIS_URL, uniquePrefix } from "../../test/helpers/redis";
import { startTcpProxy, type TcpProxy } from "../../test/helpers/tcp-proxy";
import { createRedis, type Redis, RedisTimeoutError, RedisUnavailableError } from "./client";

const target = new URL(TEST_REDIS_URL);
const viaProxy = (proxy: TcpProxy) => {
  const u = new URL(TEST_REDIS_URL);
  u.hostname = "127.0.0.1";
  u.port = String(proxy.port);
  return u.toString();
};

async function until(cond: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await Bun.sleep(10);
  }
}

async function closedPort(): Promise<number> {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
function track(r: Redis): Redis {
  cleanups.push(() => r.close());
  return r;
}

describe("redis client without a server", () => {
  test("calls reject at once while disconnected; ping fails; close is final", async () => {
    const r = track(createRedis(`redis://127.0.0.1:${await closedPort()}`, { minBackoffMs: 20 }));
    expect(r.prefix).toBe("gw");
    expect(r.key("a", 1)).toBe("gw:a:1");
    expect(r.isConnected).toBe(false);
    const started = performance.now();
    const e = await r.send("GET", ["x"]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(Error);
    expect(
      await r
        .script("return 1")
        .run([], [])
        .catch((x: unknown) => x),
    ).toBeInstanceOf(Error);
    expect(await r.ping().catch((x: unknown) => x)).toBeInstanceOf(RedisUnavailableError);
    expect(performance.now() - started).toBeLessThan(200);
    expect(await r.ready(100).catch((x: unknown) => x)).toBeInstanceOf(RedisUnavailableError);
    await r.close();
    expect(await r.send("GET", ["x"]).catch((x: unknown) => x)).toBeInstanceOf(RedisUnavailableError);
  });

  test("ping times out when the server does not answer", async () => {
    // Answers the connection handshake, never a PING.
    const srv = Bun.listen({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data(s, d) {
          if (!new TextDecoder().decode(d).includes("PING")) s.write("%0\r\n");
        },
      },
    });
    cleanups.push(() => srv.stop(true));
    const r = track(createRedis(`redis://127.0.0.1:${srv.port}`));
    await r.ready(2_000);
    const started = performance.now();
    const e = await r.ping(200).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RedisUnavailableError);
    expect((e as Error).message).toContain("timed out");
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

let redisUp = false;
try {
  redisUp = requireRedis();
} catch (e) {
  // CI=true without Redis: fail instead of skipping.
  test("redis client: Redis is reachable", () => {
    throw e;
  });
}
(redisUp ? describe : describe.skip)("redis client", () => {
  test("prefix, commands, publish and ping", async () => {
    const prefix = uniquePrefix("client");
    const r = track(createRedis(TEST_REDIS_URL, { prefix }));
    await r.ready(5_000);
    expect(r.isConnected).toBe(true);
    await r.ping();
    expect(r.key("x")).toBe(`${prefix}:x`);
    await r.send("SET", [r.key("x"), "1", "PX", "10000"]);
    expect(await r.send("GET", [r.key("x")])).toBe("1");
    await r.send("DEL", [r.key("x")]);
  });

  test("scripts run by EVALSHA and survive SCRIPT FLUSH (reload and retry once)", async () => {
    const r = track(createRedis(TEST_REDIS_URL, { prefix: uniquePrefix("scripts") }));
    await r.ready(5_000);
    const s = r.script(`return {ARGV[1], #KEYS, '${Math.random()}'}`);
    expect(((await s.run(["a", "b"], ["7"])) as unknown[]).slice(0, 2)).toEqual(["7", 2]);
    // Registered once: the same source gives the same SHA and state.
    expect(r.script(s.source).sha).toBe(s.sha);
    expect(await r.send("SCRIPT", ["EXISTS", s.sha])).toEqual([1]);
    await r.send("SCRIPT", ["FLUSH"]);
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => s.run([], [String(i)])));
    expect(many.map((x) => (x as unknown[])[0])).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
    // Script errors are not retried and reach the caller.
    const bad = r.script("return redis.call('NOSUCHCOMMAND')");
    expect(await bad.run([], []).catch((x: unknown) => x)).toBeInstanceOf(Error);
  });

  test("reconnects forever with backoff after outages; calls fail fast meanwhile", async () => {
    const proxy = startTcpProxy(target.hostname, Number(target.port || 6379));
    cleanups.push(() => proxy.stop());
    const r = track(
      createRedis(viaProxy(proxy), { prefix: uniquePrefix("reconnect"), minBackoffMs: 10, maxBackoffMs: 100 }),
    );
    const s = r.script(`return '${Math.random()}'`);
    await r.ready(5_000);
    expect(typeof (await s.run([], []))).toBe("string");

    proxy.cut();
    await until(() => !r.isConnected);
    const started = performance.now();
    expect(await r.send("PING", []).catch((x: unknown) => x)).toBeInstanceOf(Error);
    expect(await s.run([], []).catch((x: unknown) => x)).toBeInstanceOf(Error);
    expect(await r.ping().catch((x: unknown) => x)).toBeInstanceOf(Error);
    expect(performance.now() - started).toBeLessThan(200);
    // Far more attempts than Bun's own maxRetries would allow at this backoff.
    await Bun.sleep(2_500);
    proxy.restore();
    await r.ready(5_000);
    await r.ping();
    expect(typeof (await s.run([], []))).toBe("string");

    // And again.
    proxy.cut();
    await until(() => !r.isConnected);
    proxy.restore();
    await r.ready(5_000);
    await r.ping();
  });

  test("a Redis that stops answering on an open connection: calls time out, the connection is replaced, recovery", async () => {
    const proxy = startTcpProxy(target.hostname, Number(target.port || 6379));
    cleanups.push(() => proxy.stop());
    const r = track(
      createRedis(viaProxy(proxy), {
        prefix: uniquePrefix("stall"),
        minBackoffMs: 10,
        maxBackoffMs: 100,
        connectTimeoutMs: 500,
      }),
    );
    const s = r.script(`return '${Math.random()}'`);
    await r.ready(5_000);
    expect(typeof (await s.run([], [], { timeoutMs: 300 }))).toBe("string");

    proxy.stall();
    const stalled = await s.run([], [], { timeoutMs: 300 }).catch((x: unknown) => x);
    expect(stalled).toBeInstanceOf(RedisTimeoutError);
    expect(stalled).toBeInstanceOf(RedisUnavailableError);
    // The silent connection was dropped: the next calls fail at once instead of waiting too.
    expect(r.isConnected).toBe(false);
    const next = await s.run([], [], { timeoutMs: 60_000 }).catch((x: unknown) => x);
    expect(next).toBeInstanceOf(Error);
    expect(next).not.toBeInstanceOf(RedisTimeoutError);
    expect(await r.ping(300).catch((x: unknown) => x)).toBeInstanceOf(RedisUnavailableError);

    proxy.resume();
    await r.ready(5_000);
    expect(typeof (await s.run([], [], { timeoutMs: 300 }))).toBe("string");
    await r.ping(300);
  });

  test("the subscriber receives messages and resubscribes after a reconnect", async () => {
    const prefix = uniquePrefix("pubsub");
    const proxy = startTcpProxy(target.hostname, Number(target.port || 6379));
    cleanups.push(() => proxy.stop());
    const pub = track(createRedis(TEST_REDIS_URL, { prefix }));
    const r = track(createRedis(viaProxy(proxy), { prefix, minBackoffMs: 10, maxBackoffMs: 100 }));
    await pub.ready(5_000);
    await r.ready(5_000);
    const sub = r.subscriber();
    const got: string[] = [];
    const other: string[] = [];
    await sub.subscribe("invalidate", (m, c) => got.push(`${c}:${m}`));
    await sub.subscribe("invalidate", (m) => other.push(m));
    await until(() => sub.isConnected);
    // Subscriptions on the wire are prefixed; the listener sees the plain name.
    await until(async () => (await pub.publish("invalidate", "one")) === 1);
    await until(() => got.length >= 1);
    expect(got[0]).toBe("invalidate:one");
    expect(other).toContain("one");

    proxy.cut();
    await until(() => !sub.isConnected);
    proxy.restore();
    await until(() => sub.isConnected);
    await until(async () => (await pub.publish("invalidate", "two")) === 1);
    await until(() => got.includes("invalidate:two"));
    await Bun.sleep(50);
    // Exactly once per message: no duplicate subscription after the reconnect.
    expect(got.filter((g) => g === "invalidate:two")).toHaveLength(1);

    await sub.unsubscribe("invalidate");
    await until(async () => (await pub.publish("invalidate", "three")) === 0);
    await sub.close();
  });
});
