/**
 * Overflow for the spend ledger: request-log rows that do not fit in memory while the database is
 * unreachable (or are still unwritten at shutdown) wait in a Redis list, and any instance writes
 * them once the database is back. Delivery is at least once; the ledger's writes are idempotent by
 * request id.
 */
import type { Redis } from "../redis/client";
import type { NewRequestLog } from "../store/schema";

export interface SpillStore {
  push(rows: readonly NewRequestLog[]): Promise<void>;
  /** Removes and returns up to `n` rows, oldest first. */
  take(n: number): Promise<NewRequestLog[]>;
  /** Puts rows back at the front (their write failed). */
  unshift(rows: readonly NewRequestLog[]): Promise<void>;
}

function revive(text: string): NewRequestLog {
  const row = JSON.parse(text) as NewRequestLog & { created_at: string | Date };
  return { ...row, created_at: new Date(row.created_at) };
}

export class RedisSpill implements SpillStore {
  private readonly list: string;

  constructor(private readonly redis: Redis) {
    this.list = redis.key("ledger", "spill");
  }

  async push(rows: readonly NewRequestLog[]): Promise<void> {
    if (rows.length) await this.redis.send("RPUSH", [this.list, ...rows.map((r) => JSON.stringify(r))]);
  }

  async take(n: number): Promise<NewRequestLog[]> {
    const out = await this.redis.send("LPOP", [this.list, String(n)]);
    return Array.isArray(out) ? out.map((t) => revive(String(t))) : [];
  }

  async unshift(rows: readonly NewRequestLog[]): Promise<void> {
    // LPUSH reverses its arguments: push newest first so the oldest ends up in front.
    if (rows.length) await this.redis.send("LPUSH", [this.list, ...[...rows].reverse().map((r) => JSON.stringify(r))]);
  }
}
