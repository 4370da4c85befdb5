/** Nothing accepted is lost: spend survives a Postgres outage, overflow and a restart, written once. */
import { afterAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { silentLogger } from "../src/log";
import { createRedis, type Redis } from "../src/redis/client";
import { SpendLedger } from "../src/spend/ledger";
import { RedisSpill } from "../src/spend/spill";
import { openDatabase } from "../src/store/db";
import type { NewRequestLog } from "../src/store/schema";
import { BACKENDS, createTempDatabase, IN_CI, POSTGRES_AVAILABLE } from "./helpers/backends";
import { rowsOf } from "./helpers/inference";
import { requireRedis, TEST_REDIS_URL, uniquePrefix } from "./helpers/redis";
import { startTcpProxy } from "./helpers/tcp-proxy";

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const row = (i: number, tokenId: string, teamId: string): NewRequestLog => ({
  request_id: `req_test_${i}`,
  created_at: new Date(1_790_000_000_000 + i),
  endpoint: "/v1/chat/completions",
  token_id: tokenId,
  team_id: teamId,
  model: "m/x",
  requested_model: "m/x",
  status: 200,
  input_tokens: 10,
  output_tokens: 5,
  cost: 0.01,
});

test("a Postgres outage with overflow to Redis and a shutdown in the middle loses and doubles nothing", async () => {
  if (!POSTGRES_AVAILABLE) {
    if (IN_CI) throw new Error("CI=true requires Postgres");
    return;
  }
  if (!requireRedis()) return;
  const temp = await createTempDatabase();
  cleanups.push(temp.drop);
  const url = new URL(temp.url);
  const proxy = startTcpProxy(url.hostname, Number(url.port || 5432));
  cleanups.push(() => proxy.stop());
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  const database = await openDatabase({ url: url.toString() });
  cleanups.push(() => database.close().catch(() => {}));
  const db = database.db;
  await db.execute(sql`insert into teams (team_id) values ('t1')`);
  await db.execute(
    sql`insert into api_keys (token_id, key_hash, key_name, team_id) values ('k1', 'h1', 'sk-...0001', 't1')`,
  );

  const redis: Redis = createRedis(TEST_REDIS_URL, { prefix: uniquePrefix("ledger") });
  cleanups.push(() => redis.close());
  await redis.ready(5000);
  const spill = new RedisSpill(redis);
  const opts = { batchSize: 10, flushIntervalMs: 10, maxBuffered: 25, spill, spillDrainMs: 50 };
  const first = new SpendLedger(db, silentLogger, opts);

  // Some rows reach the database before the outage.
  for (let i = 0; i < 5; i++) first.record(row(i, "k1", "t1"));
  await first.flush();
  proxy.cut();
  for (let i = 5; i < 100; i++) first.record(row(i, "k1", "t1"));
  await first.flush();
  // 25 wait in memory, the rest spilled to Redis; a shutdown spills the 25 as well.
  await first.close(300);
  expect(first.pending).toBe(0);
  expect(Number(await redis.send("LLEN", [redis.key("ledger", "spill")]))).toBe(95);

  // The database comes back; a new instance (a restart) drains the spill.
  proxy.restore();
  const second = new SpendLedger(db, silentLogger, opts);
  // A duplicate of an already-written row must not be counted twice.
  second.record(row(3, "k1", "t1"));
  let written = 0;
  for (let i = 0; i < 100 && written < 100; i++) {
    await second.flush();
    written = Number(
      (rowsOf(await db.execute(sql`select count(*)::int as n from request_logs`))[0] as { n: number }).n,
    );
    if (written < 100) await Bun.sleep(50);
  }
  await second.close(1000);
  expect(written).toBe(100);
  const [spend] = rowsOf(await db.execute(sql`select spend from api_keys where token_id = 'k1'`)) as {
    spend: number;
  }[];
  expect(spend?.spend).toBeCloseTo(1.0, 10);
  const [team] = rowsOf(await db.execute(sql`select spend from teams where team_id = 't1'`)) as { spend: number }[];
  expect(team?.spend).toBeCloseTo(1.0, 10);
  expect(Number(await redis.send("LLEN", [redis.key("ledger", "spill")]))).toBe(0);
});

/** A throwaway Postgres database with one team and key, and a Redis spill under its own prefix. */
async function ledgerSetup(label: string) {
  const temp = await createTempDatabase();
  cleanups.push(temp.drop);
  const database = await openDatabase({ url: temp.url });
  cleanups.push(() => database.close().catch(() => {}));
  const db = database.db;
  await db.execute(sql`insert into teams (team_id) values ('t1')`);
  await db.execute(
    sql`insert into api_keys (token_id, key_hash, key_name, team_id) values ('k1', 'h1', 'sk-...0001', 't1')`,
  );
  const redis: Redis = createRedis(TEST_REDIS_URL, { prefix: uniquePrefix(label) });
  cleanups.push(() => redis.close());
  await redis.ready(5000);
  // A second connection of our own, to hold locks and watch the ledger's sessions.
  const admin = postgres(temp.url, { max: 2, onnotice: () => {} });
  cleanups.push(() => admin.end({ timeout: 1 }));
  const count = async () => Number((await admin`select count(*)::int as n from request_logs`)[0]?.n);
  const keySpend = async () => Number((await admin`select spend from api_keys where token_id = 'k1'`)[0]?.spend);
  const spilled = async () => Number(await redis.send("LLEN", [redis.key("ledger", "spill")]));
  /** Holds the key row locked (the ledger's spend update waits) until the returned function is called. */
  const lockKeyRow = async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((r) => {
      release = r;
    });
    let locked: () => void = () => {};
    const isLocked = new Promise<void>((r) => {
      locked = r;
    });
    const tx = admin.begin(async (t) => {
      await t`select 1 from api_keys where token_id = 'k1' for update`;
      locked();
      await released;
    });
    await isLocked;
    return async () => {
      release();
      await tx;
    };
  };
  /** Resolves once a ledger transaction is waiting on that lock; returns its backend pid. */
  const blockedWriter = async () => {
    for (let i = 0; i < 500; i++) {
      const rows = await admin`select pid from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock'`;
      if (rows.length > 0) return Number(rows[0]?.pid);
      await Bun.sleep(10);
    }
    throw new Error("no ledger write ever waited on the lock");
  };
  return { db, url: temp.url, redis, admin, count, keySpend, spilled, lockKeyRow, blockedWriter };
}

const enabled = () => {
  if (!POSTGRES_AVAILABLE) {
    if (IN_CI) throw new Error("CI=true requires Postgres");
    return false;
  }
  return requireRedis();
};

test("rows recorded while a batch is being written never push unwritten rows out of the buffer", async () => {
  if (!enabled()) return;
  const s = await ledgerSetup("overflow");
  const ledger = new SpendLedger(s.db, silentLogger, {
    batchSize: 5,
    flushIntervalMs: 1_000_000,
    maxBuffered: 10,
    spill: new RedisSpill(s.redis),
    spillDrainMs: 1_000_000,
  });
  const unlock = await s.lockKeyRow();
  for (let i = 0; i < 10; i++) ledger.record(row(i, "k1", "t1"));
  const writing = ledger.flush(); // the first batch (rows 0-4) waits on the lock
  await s.blockedWriter();
  // The buffer overflows while that batch is in flight: the oldest buffered rows spill to Redis.
  for (let i = 10; i < 24; i++) ledger.record(row(i, "k1", "t1"));
  expect(ledger.pending).toBe(15); // 5 being written + 10 buffered; the rest spilled
  await unlock();
  await writing;
  for (let i = 0; i < 50 && (ledger.pending > 0 || (await s.spilled()) > 0); i++) await ledger.flush();
  await ledger.close(1000);
  expect(await s.count()).toBe(24);
  expect(await s.keySpend()).toBeCloseTo(0.24, 10);
});

test("a drain that dies between reading the spill and committing leaves the rows in the spill", async () => {
  if (!enabled()) return;
  const s = await ledgerSetup("crash");
  const spill = new RedisSpill(s.redis);
  await spill.push(Array.from({ length: 30 }, (_, i) => row(i, "k1", "t1")));
  const opts = { batchSize: 10, flushIntervalMs: 1_000_000, maxBuffered: 100, spill, spillDrainMs: 1_000_000 };
  // The instance that dies is a process of its own, killed while its transaction waits on a lock.
  const unlock = await s.lockKeyRow();
  const proc = Bun.spawn(
    [
      process.execPath,
      new URL("./helpers/spill-drainer.ts", import.meta.url).pathname,
      s.url,
      TEST_REDIS_URL,
      s.redis.prefix,
    ],
    { stdout: "ignore", stderr: "inherit" },
  );
  cleanups.push(() => proc.kill("SIGKILL"));
  await s.blockedWriter(); // it has read the first 10 rows of the spill and is writing them
  // Read but not committed: still in the spill.
  expect(await s.spilled()).toBe(30);
  proc.kill("SIGKILL");
  await proc.exited;
  await unlock();
  expect(await s.spilled()).toBe(30);
  expect(await s.count()).toBe(0);
  const next = new SpendLedger(s.db, silentLogger, opts);
  await next.flush();
  await next.close(1000);
  expect(await s.count()).toBe(30);
  expect(await s.keySpend()).toBeCloseTo(0.3, 10);
  expect(await s.spilled()).toBe(0);
});

test("instances draining one spill at once write every row once and lose none", async () => {
  if (!enabled()) return;
  const s = await ledgerSetup("concurrent");
  const spill = new RedisSpill(s.redis);
  await spill.push(Array.from({ length: 200 }, (_, i) => row(i, "k1", "t1")));
  const opts = { batchSize: 7, flushIntervalMs: 1_000_000, maxBuffered: 100, spill, spillDrainMs: 1_000_000 };
  const ledgers = [0, 1, 2].map(() => new SpendLedger(s.db, silentLogger, opts));
  await Promise.all(ledgers.map((l) => l.flush()));
  await Promise.all(ledgers.map((l) => l.close(1000)));
  expect(await s.spilled()).toBe(0);
  expect(await s.count()).toBe(200);
  expect(await s.keySpend()).toBeCloseTo(2, 10);
});

test("the spend not yet written is known per key, team and key+model until its write commits", async () => {
  if (!enabled()) return;
  const s = await ledgerSetup("unwritten");
  const ledger = new SpendLedger(s.db, silentLogger, { batchSize: 10, flushIntervalMs: 1_000_000, maxBuffered: 100 });
  const unlock = await s.lockKeyRow();
  for (let i = 0; i < 3; i++) ledger.record(row(i, "k1", "t1"));
  ledger.record({ ...row(3, "k1", "t1"), model: "m/y" });
  const u = ledger.unwritten("k1", "t1", "m/x");
  expect(u.key).toBeCloseTo(0.04, 10);
  expect(u.team).toBeCloseTo(0.04, 10);
  expect(u.model).toBeCloseTo(0.03, 10);
  const writing = ledger.flush();
  await s.blockedWriter();
  // Being written is not written yet.
  expect(ledger.unwritten("k1", "t1", "m/y").model).toBeCloseTo(0.01, 10);
  await unlock();
  await writing;
  expect(ledger.unwritten("k1", "t1", "m/x")).toEqual({ key: 0, team: 0, model: 0 });
  expect(await s.keySpend()).toBeCloseTo(0.04, 10);
  await ledger.close(1000);
});

for (const backend of BACKENDS) {
  describe(`rows the database cannot store [${backend.name}]`, () => {
    test("text is made storable (NUL, lone surrogates); a row refused anyway is dropped alone, never stalling the rest", async () => {
      const opened = await backend.open();
      cleanups.push(() => opened.dispose());
      const db = opened.database.db;
      await db.execute(sql`insert into teams (team_id) values ('t1')`);
      await db.execute(
        sql`insert into api_keys (token_id, key_hash, key_name, team_id) values ('k1', 'h1', 'sk-...0001', 't1')`,
      );
      const logged: Array<[string, Record<string, unknown> | undefined]> = [];
      const log = {
        ...silentLogger,
        error: (msg: string, fields?: Record<string, unknown>) => logged.push([msg, fields]),
      };
      const ledger = new SpendLedger(db, log, { batchSize: 10, flushIntervalMs: 10, maxBuffered: 100 });
      ledger.record({ ...row(1, "k1", "t1"), requested_model: "up/a\u0000b", model: "up/a\u0000b" });
      ledger.record({ ...row(2, "k1", "t1"), requested_model: "up/\ud800x" });
      // A value no column takes (the types rule it out; a bug could still produce it).
      ledger.record({ ...row(3, "k1", "t1"), status: "not a number" as unknown as number });
      ledger.record({ ...row(4, "k1", "t1"), requested_model: "fine 😀" });
      await ledger.flush();
      const rows = rowsOf(
        await db.execute(sql`select request_id, requested_model, model from request_logs order by request_id`),
      ) as { request_id: string; requested_model: string; model: string }[];
      expect(rows).toEqual([
        { request_id: "req_test_1", requested_model: "up/ab", model: "up/ab" },
        { request_id: "req_test_2", requested_model: "up/\ufffdx", model: "m/x" },
        { request_id: "req_test_4", requested_model: "fine 😀", model: "m/x" },
      ]);
      const [spend] = rowsOf(await db.execute(sql`select spend from api_keys where token_id = 'k1'`)) as {
        spend: number;
      }[];
      expect(spend?.spend).toBeCloseTo(0.03, 10);
      expect(logged.map(([m, f]) => [m, f?.request_id])).toContainEqual([
        "request log row refused by the database and dropped",
        "req_test_3",
      ]);
      // Later rows are written as usual: nothing is stuck.
      ledger.record(row(5, "k1", "t1"));
      await ledger.close(1000);
      expect(ledger.pending).toBe(0);
      const [n] = rowsOf(await db.execute(sql`select count(*)::int as n from request_logs`)) as { n: number }[];
      expect(n?.n).toBe(4);
    });
  });
}
