/**
 * Stored responses for `previous_response_id` and GET /v1/responses/{id}, in the database every
 * gateway instance shares (Postgres or PGlite), so a response created on one instance continues on
 * any other.
 *
 * Writes never hold up the answer: `save` starts one insert and returns; the caller does not wait.
 * A follow-up that races the write still finds it:
 * - on the same instance, a lookup first waits for that id's insert in flight;
 * - on another instance, the id itself says when it was minted and whether it is to be stored
 *   (`resp_gw` + `s`/`n` + base-36 milliseconds + random). A lookup that misses an id minted
 *   moments ago with `s` polls (with backoff) until `settleMs` after its minting before answering
 *   404. Ids that were never to be stored (`store: false`), ids minted long ago and ids the gateway
 *   did not mint are answered at once, so the wait only ever delays a request that would otherwise
 *   have failed.
 * Rows past their retention are unusable at once and pruned in batches, at most once per
 * `pruneIntervalMs` per instance, in the background of a write. A deleted response is expired at
 * once (and emptied), so lookups of it do not wait either.
 */
import { and, eq, gt, inArray, isNull, lt } from "drizzle-orm";
import type { Logger } from "../log";
import { type Db, loggableError } from "../store/db";
import { type StoredResponseRow, storedResponses } from "../store/schema";

export interface StoredResponse {
  id: string;
  tokenId: string | null;
  model: string;
  requestId: string | null;
  /** Conversation items up to this response, earlier turns expanded; no `instructions`. */
  input: unknown[];
  /** The response object as it was returned. */
  response: Record<string, unknown>;
  createdAt: Date;
  expiresAt: Date;
}

export type NewStoredResponse = Omit<StoredResponse, "createdAt" | "expiresAt">;

export interface ResponseStoreOptions {
  /** How long a stored response stays usable. */
  retentionMs: number;
  log: Logger;
  /** The clock, in ms (tests move it). */
  now?: () => number;
  /** How long after its minting a missing, to-be-stored id may still be in flight on another instance. */
  settleMs?: number;
  pruneIntervalMs?: number;
  pruneBatch?: number;
}

const PREFIX = "resp_gw";
const TIME_DIGITS = 9;
const ID_PATTERN = /^resp_gw([sn])([0-9a-z]{9})[0-9a-f]{24}$/;

export interface MintedId {
  /** Whether the response was to be stored when the id was minted. */
  stored: boolean;
  /** When it was minted, in ms. */
  mintedAt: number;
}

/** The facts a gateway-minted id carries; undefined for any other id (an upstream's, or made up). */
export function parseResponseId(id: string): MintedId | undefined {
  const m = ID_PATTERN.exec(id);
  if (!m) return undefined;
  return { stored: m[1] === "s", mintedAt: Number.parseInt(m[2] as string, 36) };
}

export const isGatewayResponseId = (id: string): boolean => ID_PATTERN.test(id);

function randomHex(bytes: number): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class ResponseStore {
  private readonly pending = new Map<string, Promise<void>>();
  private readonly now: () => number;
  private readonly settleMs: number;
  private readonly pruneIntervalMs: number;
  private readonly pruneBatch: number;
  private lastPrune = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly db: Db,
    private readonly opts: ResponseStoreOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.settleMs = opts.settleMs ?? 10_000;
    this.pruneIntervalMs = opts.pruneIntervalMs ?? 10 * 60_000;
    this.pruneBatch = opts.pruneBatch ?? 1000;
  }

  /** A new response id; `stored` says whether it will be saved (lookups of the others never wait). */
  mintId(stored: boolean): string {
    const time = Math.max(0, Math.floor(this.now())).toString(36).padStart(TIME_DIGITS, "0").slice(-TIME_DIGITS);
    return `${PREFIX}${stored ? "s" : "n"}${time}${randomHex(12)}`;
  }

  /**
   * Starts writing a response; resolves when the row is written or the write failed (failures are
   * logged, never thrown: the client already has its answer). Callers need not wait.
   */
  save(rec: NewStoredResponse): Promise<void> {
    const created = this.now();
    const write = this.db
      .insert(storedResponses)
      .values({
        id: rec.id,
        token_id: rec.tokenId,
        model: rec.model,
        request_id: rec.requestId,
        created_at: new Date(created),
        expires_at: new Date(created + this.opts.retentionMs),
        input: rec.input,
        response: rec.response,
      })
      .onConflictDoNothing()
      .then(
        () => undefined,
        (e: unknown) =>
          this.opts.log.error("storing a response failed", {
            response_id: rec.id,
            request_id: rec.requestId,
            error: loggableError(e),
          }),
      )
      .finally(() => this.pending.delete(rec.id));
    this.pending.set(rec.id, write);
    this.maybePrune();
    return write;
  }

  /**
   * The stored response for `id` when it exists, belongs to `tokenId` (null: the master key) and has
   * not expired; otherwise undefined. Waits for a write of it still in flight (see the file comment).
   */
  async load(id: string, tokenId: string | null): Promise<StoredResponse | undefined> {
    const minted = parseResponseId(id);
    if (!minted) return undefined;
    await this.pending.get(id);
    let row = await this.read(id);
    if (!row && minted.stored) row = await this.awaitWrite(id, minted.mintedAt);
    if (!row || row.token_id !== tokenId || row.expires_at.getTime() <= this.now()) return undefined;
    return {
      id: row.id,
      tokenId: row.token_id,
      model: row.model,
      requestId: row.request_id,
      input: row.input,
      response: row.response,
      createdAt: row.created_at,
      expiresAt: row.expires_at,
    };
  }

  /**
   * Deletes a response of this key; false when there was none (or it had expired). The row stays,
   * emptied and expired, until pruned: a lookup then finds it gone at once, on every instance,
   * instead of waiting for a write that might still be in flight.
   */
  async delete(id: string, tokenId: string | null): Promise<boolean> {
    if (!parseResponseId(id)) return false;
    await this.pending.get(id);
    const now = new Date(this.now());
    const rows = await this.db
      .update(storedResponses)
      .set({ expires_at: now, input: [], response: {} })
      .where(
        and(
          eq(storedResponses.id, id),
          tokenId === null ? isNull(storedResponses.token_id) : eq(storedResponses.token_id, tokenId),
          gt(storedResponses.expires_at, now),
        ),
      )
      .returning({ id: storedResponses.id });
    return rows.length > 0;
  }

  /** Deletes up to one batch of expired rows; returns how many. */
  async prune(): Promise<number> {
    const expired = this.db
      .select({ id: storedResponses.id })
      .from(storedResponses)
      .where(lt(storedResponses.expires_at, new Date(this.now())))
      .limit(this.pruneBatch);
    const rows = await this.db
      .delete(storedResponses)
      .where(inArray(storedResponses.id, expired))
      .returning({ id: storedResponses.id });
    return rows.length;
  }

  /** Resolves when every write started so far has finished (for shutdown and tests). */
  async settled(): Promise<void> {
    await Promise.all([...this.pending.values()]);
  }

  private maybePrune(): void {
    const now = this.now();
    if (now - this.lastPrune < this.pruneIntervalMs) return;
    this.lastPrune = now;
    this.prune().then(
      (n) => {
        if (n > 0) this.opts.log.debug("pruned expired responses", { count: n });
      },
      (e: unknown) => this.opts.log.warn("pruning expired responses failed", { error: loggableError(e) }),
    );
  }

  private async read(id: string): Promise<StoredResponseRow | undefined> {
    const rows = await this.db.select().from(storedResponses).where(eq(storedResponses.id, id)).limit(1);
    return rows[0];
  }

  /** Polls for a row another instance may still be writing, until `settleMs` after its minting. */
  private async awaitWrite(id: string, mintedAt: number): Promise<StoredResponseRow | undefined> {
    const now = this.now();
    // An id from the future (clock skew, or made up) waits no longer than a fresh one.
    const remaining = Math.min(mintedAt, now) + this.settleMs - now;
    const until = performance.now() + remaining;
    let delay = 25;
    while (performance.now() < until) {
      await sleep(Math.min(delay, Math.max(1, until - performance.now())));
      delay = Math.min(delay * 2, 1000);
      const row = await this.read(id);
      if (row) return row;
    }
    return undefined;
  }
}
