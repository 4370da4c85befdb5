/**
 * `updated_at` is the version of a key or team record: the limiter compares versions across
 * instances to spot a stale cached record. So it comes from one clock, the database's, and never
 * goes backwards or repeats for a row: two instances with skewed clocks, or two updates within one
 * millisecond, still give each change a later version. Milliseconds, because versions are `Date`
 * milliseconds in JavaScript.
 */
import { type SQL, sql } from "drizzle-orm";
import type { PgColumn } from "drizzle-orm/pg-core";

/** The database's clock, to the millisecond. */
export const databaseNow = (): SQL<Date> => sql<Date>`date_trunc('milliseconds', clock_timestamp())`;

/** The next version of a row: the database's clock, or 1 ms past the current version if that is later. */
export const nextVersion = (updatedAt: PgColumn): SQL<Date> =>
  sql<Date>`greatest(${databaseNow()}, ${updatedAt} + interval '1 millisecond')`;
