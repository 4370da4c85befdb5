/**
 * Opens the database: Postgres when a URL is given, embedded PGlite otherwise. Both go through the
 * same drizzle schema and the same committed migrations, run at start.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import * as schema from "./schema";

export type Schema = typeof schema;
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export interface Database {
  db: Db;
  kind: "postgres" | "pglite";
  /** Resolves when a trivial query succeeds; rejects otherwise. */
  ping(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export const MIGRATIONS_DIR = resolve(import.meta.dir, "../../drizzle");
/** Arbitrary constant: serialises migrations when several instances start at once. */
const MIGRATION_LOCK_ID = 727_274_001;

export type DatabaseTarget = { url: string } | { dataDir: string } | { memory: true };

export async function openDatabase(target: DatabaseTarget): Promise<Database> {
  return "url" in target ? openPostgres(target.url) : openPglite(target);
}

async function openPostgres(url: string): Promise<Database> {
  await migratePostgresLocked(url);
  const client = postgres(url, { max: 10, onnotice: () => {}, connect_timeout: 10 });
  const db = drizzlePostgres(client, { schema });
  return {
    db,
    kind: "postgres",
    ping: (timeoutMs = 2000) =>
      withTimeout(
        client`select 1`.then(() => undefined),
        timeoutMs,
      ),
    close: () => client.end({ timeout: 5 }),
  };
}

/** Migrations on their own single connection, under an advisory lock. */
async function migratePostgresLocked(url: string): Promise<void> {
  const client = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await client`select pg_advisory_lock(${MIGRATION_LOCK_ID})`;
    await migratePostgres(drizzlePostgres(client), { migrationsFolder: MIGRATIONS_DIR });
    await client`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`;
  } finally {
    await client.end({ timeout: 5 });
  }
}

async function openPglite(target: { dataDir: string } | { memory: true }): Promise<Database> {
  let client: PGlite;
  if ("dataDir" in target) {
    mkdirSync(target.dataDir, { recursive: true });
    client = new PGlite(join(target.dataDir, "pglite"));
  } else {
    client = new PGlite();
  }
  await client.waitReady;
  const db = drizzlePglite(client, { schema });
  await migratePglite(db, { migrationsFolder: MIGRATIONS_DIR });
  return {
    db,
    kind: "pglite",
    ping: async (timeoutMs = 2000) => {
      if (client.closed) throw new Error("embedded database is closed");
      await withTimeout(
        db.execute(sql`select 1`).then(() => undefined),
        timeoutMs,
      );
    },
    close: async () => {
      if (!client.closed) await client.close();
    },
  };
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Postgres error code of a failed query, looking through drizzle's wrapper. */
export function pgErrorCode(err: unknown): string | undefined {
  let cur: unknown = err;
  for (let depth = 0; cur && depth < 5; depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

export function isUniqueViolation(err: unknown): boolean {
  return pgErrorCode(err) === "23505";
}

/**
 * A foreign key was violated: a row refers to one that does not exist (any more), e.g. a key whose
 * team was just deleted, or a deleted row is still referred to. ON DELETE RESTRICT reports the
 * latter as 23001 (restrict_violation) on some Postgres versions (PGlite's 17), 23503 on others (15).
 */
export function isForeignKeyViolation(err: unknown): boolean {
  const code = pgErrorCode(err);
  return code === "23503" || code === "23001";
}

/** The constraint a failed query ran into, when the driver says. */
export function pgConstraint(err: unknown): string | undefined {
  let cur: unknown = err;
  for (let depth = 0; cur && depth < 5; depth++) {
    const c =
      (cur as { constraint?: unknown; constraint_name?: unknown }).constraint ??
      (cur as { constraint_name?: unknown }).constraint_name;
    if (typeof c === "string") return c;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The rows of a raw `db.execute` result: postgres-js gives an array, PGlite an object with `rows`. */
export function resultRows(result: unknown): Record<string, unknown>[] {
  return (Array.isArray(result) ? result : ((result as { rows?: unknown[] }).rows ?? [])) as Record<string, unknown>[];
}

/**
 * What may be logged about a failure. A failed query's message carries the query's parameters
 * (drizzle: "Failed query: ... params: ..."), and Postgres messages can quote values too: both are
 * request data (aliases, metadata). For database errors only the SQLSTATE code and constraint are
 * kept; other errors keep their name and message.
 */
export function loggableError(err: unknown): string {
  const code = pgErrorCode(err);
  if (code !== undefined) {
    const constraint = pgConstraint(err);
    return `database error ${code}${constraint ? ` (constraint ${constraint})` : ""}`;
  }
  // drizzle's wrapper: its message holds the parameters; what went wrong is in its cause.
  let cur: unknown = err;
  let wrapped = false;
  for (let depth = 0; depth < 5 && cur instanceof Error && "query" in cur && "params" in cur; depth++) {
    cur = cur.cause;
    wrapped = true;
  }
  const text = cur instanceof Error ? `${cur.name}: ${cur.message}` : String(cur);
  return wrapped ? `database query failed${cur instanceof Error ? `: ${text}` : ""}` : text;
}
