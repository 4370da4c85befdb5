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

/**
 * Reads a streamed chat completion until `deltas` content (or reasoning_content) deltas have arrived,
 * then disconnects (as a client that gives up does); returns the text it received.
 */
export async function readThenDisconnect(
  stream: AsyncIterable<OpenAI.ChatCompletionChunk> & { controller: AbortController },
  deltas: number,
): Promise<string> {
  let text = "";
  let seen = 0;
  try {
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined;
      const d = delta?.content || delta?.reasoning_content;
      if (!d) continue;
      text += d;
      if (++seen >= deltas) stream.controller.abort();
    }
  } catch (e) {
    if (!(e instanceof OpenAI.APIUserAbortError)) throw e;
  }
  return text;
}

/** Polls until `done` holds (the gateway records and aborts in the background); fails after ~5 s. */
export async function eventually<T>(probe: () => T | Promise<T>, done: (v: T) => boolean): Promise<T> {
  let v = await probe();
  for (let i = 0; i < 100 && !done(v); i++) {
    await Bun.sleep(50);
    v = await probe();
  }
  if (!done(v)) throw new Error(`condition not reached; last value: ${JSON.stringify(v)}`);
  return v;
}

/** The key's request-log row with the given status, once the ledger has written it. */
export async function logRowWithStatus(gw: TestGateway, tokenId: string, status: number): Promise<LogRow> {
  const rows = await eventually(
    () => logsOf(gw, tokenId),
    (r) => r.some((x) => x.status === status),
  );
  return rows.find((x) => x.status === status) as LogRow;
}
