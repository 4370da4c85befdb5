/**
 * Durable spend of a key on a model within a per-model budget window, from the request log: the
 * seed of that window's live counter when Redis has none (first use, or Redis lost its data).
 * Looked up once per key, model and window on each instance.
 */
import { and, eq, gte, lt, sql } from "drizzle-orm";
import type { Db } from "../store/db";
import { requestLogs } from "../store/schema";

export class ModelSpendSeeds {
  private readonly cache = new Map<string, { endsAt: number; value: Promise<number> }>();

  constructor(private readonly db: Db) {}

  get(tokenId: string, model: string, start: number, endsAt: number): Promise<number> {
    const id = `${tokenId}\u0000${model}\u0000${start}`;
    const hit = this.cache.get(id);
    if (hit) return hit.value;
    if (this.cache.size > 10_000) this.prune(Date.now());
    const value = this.db
      .select({ spend: sql<number>`coalesce(sum(${requestLogs.cost}), 0)::float8` })
      .from(requestLogs)
      .where(
        and(
          eq(requestLogs.token_id, tokenId),
          eq(requestLogs.model, model),
          gte(requestLogs.created_at, new Date(start)),
          lt(requestLogs.created_at, new Date(endsAt)),
        ),
      )
      .then((rows) => Number(rows[0]?.spend ?? 0))
      .catch((e: unknown) => {
        this.cache.delete(id);
        throw e;
      });
    this.cache.set(id, { endsAt, value });
    return value;
  }

  private prune(now: number): void {
    for (const [id, entry] of this.cache) if (entry.endsAt <= now) this.cache.delete(id);
  }
}
