/**
 * What the gateways under test need: a config file pointing at the mock, a throwaway Postgres
 * database, a Redis key prefix of their own, a team and keys made through the management API, and
 * (for the auth scenario) many keys written straight into the key table.
 */
import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import postgres from "postgres";

export const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";

/** Prices make cost and budget accounting run for real. */
const PRICES = "input_cost_per_token: 0.0000005, output_cost_per_token: 0.0000015, max_output_tokens: 4096";

export function writeGatewayConfig(path: string, mockUrl: string, redisPrefix?: string): void {
  writeFileSync(
    path,
    `# Written by bench/run.ts for one run.
providers:
  mock: { type: openai-compatible, api_base: "${mockUrl}/v1" }
models:
  - { name: mock/gpt, model: gpt, ${PRICES} }
  - { name: mock/gpt-slow, model: gpt-slow, ${PRICES} }
router:
  num_retries: 0
catalog:
  include_defaults: false
${redisPrefix ? `redis:\n  key_prefix: "${redisPrefix}"\n` : ""}`,
  );
}

/** The database URL of a throwaway database on the same server. */
export function databaseUrl(name: string): string {
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function createDatabase(name: string): Promise<void> {
  const sql = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`CREATE DATABASE "${name}"`);
  } finally {
    await sql.end();
  }
}

export async function dropDatabase(name: string): Promise<void> {
  const sql = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await sql.end();
  }
}

/** Deletes every Redis key under `prefix:`; returns how many. */
export async function deleteRedisPrefix(prefix: string): Promise<number> {
  const client = new Bun.RedisClient(REDIS_URL);
  let deleted = 0;
  try {
    let cursor = "0";
    do {
      const [next, keys] = (await client.send("SCAN", [cursor, "MATCH", `${prefix}:*`, "COUNT", "1000"])) as [
        string,
        string[],
      ];
      cursor = next;
      if (keys.length) deleted += Number(await client.send("DEL", keys));
    } while (cursor !== "0");
  } finally {
    client.close();
  }
  return deleted;
}

async function api(base: string, master: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${master}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

/** Limits high enough never to trigger, so every request runs the full enforcement path. */
export const KEY_LIMITS = {
  rpm_limit: 10_000_000,
  // tpm_limit is a 32-bit integer column: 2e9 is as high as it goes (the issue suggests 1e12).
  tpm_limit: 2_000_000_000,
  max_parallel_requests: 100_000,
  max_budget: 1e9,
};

/** Creates a team and a key with KEY_LIMITS; returns the key's secret. */
export async function createTeamAndKey(base: string, master: string, teamId: string): Promise<string> {
  await api(base, master, "/team/new", { team_id: teamId });
  const key = await api(base, master, "/key/generate", { team_id: teamId, key_alias: `${teamId}-key`, ...KEY_LIMITS });
  return key.key as string;
}

export async function createTeam(base: string, master: string, teamId: string): Promise<void> {
  await api(base, master, "/team/new", { team_id: teamId });
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A secret in the gateway's format: `sk-` and 48 base62 characters. */
export function newSecret(): string {
  const bytes = randomBytes(48);
  let s = "sk-";
  for (const b of bytes) s += BASE62[b % 62];
  return s;
}

/** Inserts `count` keys of one team straight into api_keys (as the gateway stores them); returns the secrets. */
export async function insertKeys(dbUrl: string, teamId: string, count: number, batch = 5000): Promise<string[]> {
  const sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
  const secrets: string[] = [];
  try {
    for (let i = 0; i < count; i += batch) {
      const rows = [];
      for (let j = i; j < Math.min(count, i + batch); j++) {
        const secret = newSecret();
        secrets.push(secret);
        rows.push({
          token_id: crypto.randomUUID(),
          key_hash: createHash("sha256").update(secret).digest("hex"),
          key_name: `sk-...${secret.slice(-4)}`,
          team_id: teamId,
        });
      }
      await sql`INSERT INTO api_keys ${sql(rows, "token_id", "key_hash", "key_name", "team_id")}`;
    }
  } finally {
    await sql.end();
  }
  return secrets;
}

/** Committed transactions so far in a database (to count database round trips per request). */
export async function committedTransactions(dbUrl: string, name: string): Promise<number> {
  const sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`SELECT xact_commit FROM pg_stat_database WHERE datname = ${name}`;
    return Number(row?.xact_commit ?? Number.NaN);
  } finally {
    await sql.end();
  }
}
