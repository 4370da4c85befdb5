/** Nothing accepted is lost: spend survives a Postgres outage, overflow and a restart, written once. */
import { afterAll, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { silentLogger } from "../src/log";
import { createRedis, type Redis } from "../src/redis/client";
import { SpendLedger } from "../src/spend/ledger";
import { RedisSpill } from "../src/spend/spill";
import { openDatabase } from "../src/store/db";
import type { NewRequestLog } from "../src/store/schema";
import { createTempDatabase, IN_CI, POSTGRES_AVAILABLE } from "./helpers/backends";
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
