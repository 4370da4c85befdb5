/**
 * The durable record of spend: request-log rows and key/team spend, written in the background in
 * batches (bounded size and interval), never on the client's critical path. One transaction per
 * batch inserts the rows (skipping request ids already written) and adds exactly the inserted rows'
 * cost to their keys and teams, so a retried batch never counts twice. When the database is down,
 * rows stay buffered and are written once it is back; beyond the memory bound (and at shutdown)
 * they spill to Redis when one is configured, and every instance drains the spill once the
 * database answers again.
 */
import { getTableColumns, sql } from "drizzle-orm";
import type { Logger } from "../log";
import { type Db, loggableError, pgErrorCode } from "../store/db";
import { apiKeys, type NewRequestLog, requestLogs, teams } from "../store/schema";
import type { SpillBatch, SpillStore } from "./spill";

export interface LedgerOptions {
  batchSize: number;
  flushIntervalMs: number;
  /** Rows kept in memory while the database is unreachable; beyond this the oldest spill (or are dropped, loudly). */
  maxBuffered: number;
  /** Where overflow waits (Redis); without one, overflow is dropped and logged. */
  spill?: SpillStore;
  /** How often the spill is checked for rows to write. */
  spillDrainMs?: number;
}

export const LEDGER_DEFAULTS: LedgerOptions = { batchSize: 500, flushIntervalMs: 200, maxBuffered: 200_000 };

export class SpendLedger {
  private buffer: NewRequestLog[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private flushing: Promise<void> | undefined;
  private failures = 0;
  /** Rows of the batch being written (out of the buffer meanwhile). */
  private writing = 0;
  /** Cost of the rows not yet written (buffered or being written), by key, team and key+model. */
  private readonly unwrittenCost = new Map<string, number>();
  private readonly spillTimer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly opts: LedgerOptions = LEDGER_DEFAULTS,
  ) {
    if (opts.spill) {
      this.spillTimer = setInterval(() => void this.flush(), opts.spillDrainMs ?? 5000);
      this.spillTimer.unref?.();
    }
  }

  record(row: NewRequestLog): void {
    writable(row);
    this.account([row], 1);
    this.buffer.push(row);
    if (this.buffer.length > this.opts.maxBuffered)
      this.overflow(this.buffer.splice(0, this.buffer.length - this.opts.maxBuffered));
    this.schedule(this.buffer.length >= this.opts.batchSize ? 0 : this.opts.flushIntervalMs);
  }

  private overflow(rows: NewRequestLog[]): void {
    this.account(rows, -1);
    const spill = this.opts.spill;
    if (!spill) {
      this.log.error("spend buffer full: oldest request logs dropped", { dropped: rows.length });
      return;
    }
    spill.push(rows).then(
      () => this.log.warn("spend buffer full: request logs spilled to Redis", { rows: rows.length }),
      (e: unknown) =>
        this.log.error("spend buffer full and Redis unreachable: request logs dropped", {
          dropped: rows.length,
          error: (e as Error).message,
        }),
    );
  }

  /** Rows not yet written: buffered, plus the batch being written. */
  get pending(): number {
    return this.buffer.length + this.writing;
  }

  /**
   * Spend this instance recorded but has not written yet, of a key, a team and a key on a model:
   * part of the seeds of live counters rebuilt meanwhile (the database does not have it yet).
   */
  unwritten(tokenId: string, teamId: string, model: string): { key: number; team: number; model: number } {
    const get = (id: string) => this.unwrittenCost.get(id) ?? 0;
    return { key: get(`k:${tokenId}`), team: get(`t:${teamId}`), model: get(`m:${tokenId}\u0000${model}`) };
  }

  private account(rows: readonly NewRequestLog[], sign: 1 | -1): void {
    for (const r of rows) {
      const cost = r.cost ?? 0;
      if (!(cost > 0)) continue;
      const ids = r.token_id ? [`k:${r.token_id}`, `m:${r.token_id}\u0000${r.model}`] : [];
      if (r.team_id) ids.push(`t:${r.team_id}`);
      for (const id of ids) {
        const v = (this.unwrittenCost.get(id) ?? 0) + sign * cost;
        if (v > 1e-12) this.unwrittenCost.set(id, v);
        else this.unwrittenCost.delete(id);
      }
    }
  }

  /** Writes everything buffered now; resolves when done or when the database refused (rows kept). */
  flush(): Promise<void> {
    if (!this.flushing) {
      this.flushing = this.drain().finally(() => {
        this.flushing = undefined;
      });
    }
    return this.flushing;
  }

  /** Final flush at shutdown: keeps trying until the buffer is empty or the deadline passes, then spills the rest. */
  async close(deadlineMs = 10_000): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    if (this.spillTimer) clearInterval(this.spillTimer);
    this.timer = undefined;
    const until = Date.now() + deadlineMs;
    while (this.pending > 0 && Date.now() < until) {
      await this.flush();
      if (this.pending > 0) await Bun.sleep(200);
    }
    // A write started meanwhile (a retry timer) finishes, or puts its batch back, first.
    if (this.flushing) await this.flushing;
    if (this.timer) clearTimeout(this.timer);
    if (this.buffer.length === 0) return;
    const rest = this.buffer.splice(0);
    this.account(rest, -1);
    try {
      if (!this.opts.spill) throw new Error("no Redis configured");
      await this.opts.spill.push(rest);
      this.log.warn("shutdown: unwritten request logs spilled to Redis", { count: rest.length });
    } catch (e) {
      this.log.error("shutdown: request logs not written", { count: rest.length, error: (e as Error).message });
    }
  }

  private schedule(delayMs: number): void {
    if (this.timer) {
      if (delayMs > 0) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs);
  }

  private async drain(): Promise<void> {
    while (this.buffer.length > 0) {
      // The batch leaves the buffer before the write: rows recorded meanwhile may push the oldest
      // buffered rows out to the spill, and that must never touch rows not yet written.
      const batch = this.buffer.splice(0, this.opts.batchSize);
      this.writing = batch.length;
      const ok = await this.tryWrite(batch);
      this.writing = 0;
      if (!ok) {
        this.putBack(batch);
        return;
      }
      this.account(batch, -1);
    }
    await this.drainSpill();
  }

  /** A failed batch goes back to the front (it is the oldest); beyond the bound the oldest spill. */
  private putBack(batch: NewRequestLog[]): void {
    this.buffer = batch.concat(this.buffer);
    if (this.buffer.length > this.opts.maxBuffered)
      this.overflow(this.buffer.splice(0, this.buffer.length - this.opts.maxBuffered));
  }

  /**
   * Rows spilled by any instance, written once the database takes writes again. A batch leaves
   * the spill only after its write committed (see `spill.ts`): a crash in between re-delivers it.
   */
  private async drainSpill(): Promise<void> {
    const spill = this.opts.spill;
    if (!spill) return;
    for (;;) {
      let batch: SpillBatch | null;
      try {
        batch = await spill.peek(this.opts.batchSize);
      } catch {
        return; // Redis unreachable: the next drain tries again.
      }
      if (!batch) return;
      if (!(await this.tryWrite(batch.rows))) return; // the rows stay in the spill
      try {
        // false: another instance wrote and removed the same rows; read the new head.
        await batch.ack();
      } catch (e) {
        // Written but not removed: the next drain writes them again, which counts nothing twice.
        this.log.warn("spilled request logs written but not yet removed from Redis", {
          rows: batch.rows.length,
          error: (e as Error).message,
        });
        return;
      }
    }
  }

  private async tryWrite(batch: NewRequestLog[]): Promise<boolean> {
    try {
      await this.write(batch);
      this.failures = 0;
      return true;
    } catch (e) {
      if (rejected(e)) return this.writeOneByOne(batch);
      this.failures++;
      this.log.error("spend write failed; will retry", { rows: batch.length, error: loggableError(e) });
      this.schedule(Math.min(30_000, 250 * 2 ** Math.min(this.failures, 7)));
      return false;
    }
  }

  /**
   * The database refused the batch itself (a value it cannot store), not the connection: retrying
   * it would stall every later write, so its rows go one by one and a row refused on its own is
   * dropped, loudly, with what an operator needs to account for it.
   */
  private async writeOneByOne(batch: NewRequestLog[]): Promise<boolean> {
    for (const row of batch) {
      try {
        await this.write([row]);
      } catch (e) {
        if (!rejected(e)) {
          this.failures++;
          this.log.error("spend write failed; will retry", { rows: batch.length, error: loggableError(e) });
          this.schedule(Math.min(30_000, 250 * 2 ** Math.min(this.failures, 7)));
          return false; // rows already written are skipped on the retry (idempotent by request id)
        }
        this.log.error("request log row refused by the database and dropped", {
          request_id: row.request_id,
          token_id: row.token_id ?? null,
          team_id: row.team_id ?? null,
          cost: row.cost ?? 0,
          error: loggableError(e),
        });
      }
    }
    this.failures = 0;
    return true;
  }

  private async write(batch: NewRequestLog[]): Promise<void> {
    // One statement, one round trip: the batch goes as one JSON parameter (building a 30-column,
    // 500-row parameterised insert cost more CPU than the rest of the request path), and the
    // spend of exactly the rows inserted (not those already written) is added to keys and teams
    // in the same statement, so nothing comes back but a count. In a transaction of its own: a
    // writer that dies before its COMMIT leaves nothing behind.
    await this.db.transaction((tx) =>
      tx.execute(sql`
      with inserted as (
        insert into ${requestLogs} (${sql.raw(LOG_COLUMNS)})
        select ${sql.raw(LOG_COLUMNS)}
        from json_populate_recordset(json_populate_record(null::request_logs, ${LOG_DEFAULTS}::json), ${JSON.stringify(batch)}::json)
        on conflict (request_id) do nothing
        returning token_id, team_id, cost
      ),
      keys as (
        update ${apiKeys} set spend = ${apiKeys}.spend + s.cost
        from (select token_id, sum(cost) as cost from inserted where cost > 0 and token_id is not null group by token_id) s
        where ${apiKeys}.token_id = s.token_id
      ),
      teams as (
        update ${teams} set spend = ${teams}.spend + s.cost
        from (select team_id, sum(cost) as cost from inserted where cost > 0 and team_id is not null group by team_id) s
        where ${teams}.team_id = s.team_id
      )
      select count(*)::int as inserted from inserted`),
    );
  }
}

const logColumns = Object.values(getTableColumns(requestLogs));
const LOG_COLUMNS = logColumns.map((c) => `"${c.name}"`).join(", ");
/** The columns' defaults, for fields a record leaves out (the base record of json_populate_recordset). */
const LOG_DEFAULTS = JSON.stringify({
  ...Object.fromEntries(
    logColumns.filter((c) => c.hasDefault && typeof c.default !== "object").map((c) => [c.name, c.default]),
  ),
  tags: [],
});

/** A data exception (22xxx) or constraint violation (23xxx): the rows are at fault, not the database. */
function rejected(e: unknown): boolean {
  const code = pgErrorCode(e);
  return code !== undefined && (code.startsWith("22") || code.startsWith("23"));
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is exactly what Postgres text cannot hold.
const UNSTORABLE = /[\u0000\ud800-\udfff]/;

/**
 * Makes a row's text storable: Postgres text holds no NUL, and JSON cannot carry lone surrogates
 * into it. Model names come from clients, so a request for "a\u0000" must not make its row, and the
 * batch around it, unwritable.
 */
function writable(row: NewRequestLog): void {
  const r = row as Record<string, unknown>;
  for (const k in r) {
    const v = r[k];
    if (typeof v === "string" && UNSTORABLE.test(v)) r[k] = v.toWellFormed().replaceAll("\u0000", "");
  }
  if (row.tags?.some((t) => UNSTORABLE.test(t)))
    row.tags = row.tags.map((t) => t.toWellFormed().replaceAll("\u0000", ""));
}
