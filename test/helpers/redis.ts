/**
 * The Redis the real-service suites use (TEST_REDIS_URL, default the local one). Without it they
 * are skipped with a warning, except under CI=true, where they fail.
 */
import { RedisClient } from "bun";
import { IN_CI } from "./backends";

export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

async function redisProblem(): Promise<string | null> {
  const client = new RedisClient(TEST_REDIS_URL, {
    connectionTimeout: 2000,
    autoReconnect: false,
    enableOfflineQueue: false,
  });
  try {
    await client.connect();
    await client.send("PING", []);
    return null;
  } catch (e) {
    return (e as Error).message;
  } finally {
    client.close();
  }
}

const problem = await redisProblem();
if (problem !== null && !IN_CI) {
  console.warn(
    `[tests] Redis at ${TEST_REDIS_URL} is not reachable (${problem}); Redis suites are skipped. Under CI=true this is a failure.`,
  );
}

export const REDIS_AVAILABLE = problem === null;

/** Throws under CI when Redis is missing; tells the caller to skip otherwise. */
export function requireRedis(): boolean {
  if (REDIS_AVAILABLE) return true;
  if (IN_CI) throw new Error(`CI=true requires Redis at ${TEST_REDIS_URL}: ${problem}`);
  return false;
}

/** A key prefix no other test run shares. */
export const uniquePrefix = (label: string) =>
  `gwtest-${label}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
