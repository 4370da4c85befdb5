/** Shared plumbing for the inference suites: SDK clients on the test gateway and request-log reads. */
import { sql } from "drizzle-orm";
import OpenAI from "openai";
import type { TestGateway } from "./gateway";

export type LogRow = Record<string, unknown>;

/** postgres-js returns an array of rows, PGlite an object with `rows`. */
export const rowsOf = (result: unknown): unknown[] =>
  Array.isArray(result) ? result : ((result as { rows?: unknown[] }).rows ?? []);

/** The request-log rows of one key, oldest first, after flushing the spend ledger. */
export async function logsOf(gw: TestGateway, tokenId: string): Promise<LogRow[]> {
  await gw.flush();
  const res: unknown = await gw.opened.database.db.execute(
    sql`select * from request_logs where token_id = ${tokenId} order by created_at, request_id`,
  );
  return rowsOf(res) as LogRow[];
}

/** The official openai SDK pointed at the gateway (served on a real port), without client retries. */
export function sdkClient(gw: TestGateway, apiKey: string): OpenAI {
  return new OpenAI({ baseURL: `${gw.listen()}/v1`, apiKey, maxRetries: 0 });
}
