import { count, type SQL } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import { badRequest } from "../http/errors";
import type { Db } from "./db";

export interface Page<R> {
  rows: R[];
  total_count: number;
  current_page: number;
  total_pages: number;
}

/** One page of a filtered table plus the totals the list endpoints answer with. */
export async function listPage<T extends PgTable>(
  db: Db,
  table: T,
  where: SQL | undefined,
  orderBy: (SQL | PgColumn)[],
  page = 1,
  size = 10,
): Promise<Page<T["$inferSelect"]>> {
  const offset = (page - 1) * size;
  // The schemas bound page and size; this keeps a caller that skipped them from sending an
  // offset Postgres cannot parse (a 500) instead of a clear 400.
  if (!Number.isSafeInteger(offset) || offset < 0) throw badRequest(`Invalid 'page': ${page} is out of range`, "page");
  const [totals, rows] = await Promise.all([
    db
      .select({ n: count() })
      .from(table as PgTable)
      .where(where),
    db
      .select()
      .from(table as PgTable)
      .where(where)
      .orderBy(...orderBy)
      .limit(size)
      .offset(offset),
  ]);
  const total = totals[0]?.n ?? 0;
  return {
    rows: rows as T["$inferSelect"][],
    total_count: total,
    current_page: page,
    total_pages: Math.ceil(total / size),
  };
}
