/**
 * The storage backends every storage-touching suite runs against: embedded PGlite always, and a
 * throwaway database on a real Postgres server. Under CI=true a missing Postgres fails the suites
 * instead of skipping them.
 */
import postgres from "postgres";
import { type Database, openDatabase } from "../../src/store/db";

export const ADMIN_DATABASE_URL = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const IN_CI = process.env.CI === "true";

export interface OpenedBackend {
  database: Database;
  /** Set for Postgres: the URL of the throwaway database. */
  url?: string;
  dispose(): Promise<void>;
}

export interface Backend {
  name: "pglite" | "postgres";
  open(): Promise<OpenedBackend>;
}

let counter = 0;

/** Creates an empty database on the test server and returns its URL and a function that drops it. */
export async function createTempDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  const name = `gw_test_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 8)}`;
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const a = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {}, connect_timeout: 5 });
      try {
        await a.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await a.end();
      }
    },
  };
}

export const pgliteBackend: Backend = {
  name: "pglite",
  open: async () => {
    const database = await openDatabase({ memory: true });
    return { database, dispose: () => database.close() };
  },
};

export const postgresBackend: Backend = {
  name: "postgres",
  open: async () => {
    const temp = await createTempDatabase();
    const database = await openDatabase({ url: temp.url });
    return {
      database,
      url: temp.url,
      dispose: async () => {
        await database.close();
        await temp.drop();
      },
    };
  },
};

async function postgresReachable(): Promise<string | null> {
  const sql = postgres(ADMIN_DATABASE_URL, { max: 1, onnotice: () => {}, connect_timeout: 3 });
  try {
    await sql`select 1`;
    return null;
  } catch (e) {
    return (e as Error).message;
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

const pgProblem = await postgresReachable();
if (pgProblem !== null && !IN_CI) {
  console.warn(
    `[tests] Postgres at ${ADMIN_DATABASE_URL} is not reachable (${pgProblem}); running the PGlite backend only. ` +
      "Set TEST_DATABASE_URL or start Postgres to run both; under CI=true this is a failure.",
  );
}

/** Under CI a missing Postgres stays in the list and fails loudly when opened. */
export const POSTGRES_AVAILABLE = pgProblem === null;
export const BACKENDS: Backend[] =
  pgProblem === null
    ? [pgliteBackend, postgresBackend]
    : IN_CI
      ? [
          pgliteBackend,
          {
            name: "postgres",
            open: () => Promise.reject(new Error(`CI=true requires Postgres at ${ADMIN_DATABASE_URL}: ${pgProblem}`)),
          },
        ]
      : [pgliteBackend];
