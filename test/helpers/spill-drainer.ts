/**
 * A process that drains a ledger spill once (`bun test/helpers/spill-drainer.ts <database url>
 * <redis url> <prefix>`): the ledger tests kill it mid-write to play an instance that crashes.
 */
import { silentLogger } from "../../src/log";
import { createRedis } from "../../src/redis/client";
import { SpendLedger } from "../../src/spend/ledger";
import { RedisSpill } from "../../src/spend/spill";
import { openDatabase } from "../../src/store/db";

const [databaseUrl, redisUrl, prefix] = process.argv.slice(2) as [string, string, string];
const database = await openDatabase({ url: databaseUrl });
const redis = createRedis(redisUrl, { prefix });
await redis.ready(5000);
const ledger = new SpendLedger(database.db, silentLogger, {
  batchSize: 10,
  flushIntervalMs: 1_000_000,
  maxBuffered: 100,
  spill: new RedisSpill(redis),
  spillDrainMs: 1_000_000,
});
await ledger.flush();
process.exit(0);
