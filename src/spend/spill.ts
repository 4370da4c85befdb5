/**
 * Overflow for the spend ledger: request-log rows that do not fit in memory while the database is
 * unreachable (or are still unwritten at shutdown) wait in a Redis list, and any instance writes
 * them once the database is back.
 *
 * Delivery is at least once and never drops a row that was not written: a drain reads the head of
 * the list without removing it (`LRANGE`), writes it, and only then acknowledges it with a script
 * that trims those rows if the head is still exactly what was read. An instance that dies between
 * the read and the commit leaves the rows in place; two instances draining at once both write the
 * same rows (harmless: the ledger's writes are idempotent by request id) and only one trims them.
 */
import type { Redis, RedisScript } from "../redis/client";
import type { NewRequestLog } from "../store/schema";

/** Rows read from the head of the spill; `ack` removes them once they are written. */
export interface SpillBatch {
  rows: NewRequestLog[];
  /** Removes these rows if they are still the head (false: another instance already did). */
  ack(): Promise<boolean>;
}

export interface SpillStore {
  push(rows: readonly NewRequestLog[]): Promise<void>;
  /** Up to `n` rows, oldest first, left in place until acknowledged; null when empty. */
  peek(n: number): Promise<SpillBatch | null>;
}

/** Trims the first ARGV[1] elements if their SHA-1 (joined by newlines) is still ARGV[2]. */
export const SPILL_ACK_LUA = `local n = tonumber(ARGV[1])
local items = redis.call('LRANGE', KEYS[1], 0, n - 1)
if #items ~= n or redis.sha1hex(table.concat(items, '\\n')) ~= ARGV[2] then return 0 end
redis.call('LTRIM', KEYS[1], n, -1)
return 1`;

function revive(text: string): NewRequestLog {
  const row = JSON.parse(text) as NewRequestLog & { created_at: string | Date };
  return { ...row, created_at: new Date(row.created_at) };
}

/** JSON text has no raw newline, so joining by one is unambiguous. */
function digest(items: readonly string[]): string {
  return new Bun.CryptoHasher("sha1").update(items.join("\n")).digest("hex");
}

export class RedisSpill implements SpillStore {
  private readonly list: string;
  private readonly ackScript: RedisScript;

  constructor(private readonly redis: Redis) {
    this.list = redis.key("ledger", "spill");
    this.ackScript = redis.script(SPILL_ACK_LUA);
  }

  async push(rows: readonly NewRequestLog[]): Promise<void> {
    if (rows.length) await this.redis.send("RPUSH", [this.list, ...rows.map((r) => JSON.stringify(r))]);
  }

  async peek(n: number): Promise<SpillBatch | null> {
    const out = await this.redis.send("LRANGE", [this.list, "0", String(n - 1)]);
    if (!Array.isArray(out) || out.length === 0) return null;
    const items = out.map(String);
    return {
      rows: items.map(revive),
      ack: async () => Number(await this.ackScript.run([this.list], [String(items.length), digest(items)])) === 1,
    };
  }
}
