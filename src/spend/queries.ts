/**
 * Spend logs and reports over `request_logs`. Logs page by (created_at, request_id) keysets, so a
 * deep page costs the same as the first; every filter matches an index.
 */
import { and, desc, eq, gte, lt, lte, or, type SQL, sql } from "drizzle-orm";
import type { Principal } from "../auth/authenticator";
import { badRequest, forbidden, notFound } from "../http/errors";
import { findKey } from "../keys/service";
import { type Db, resultRows } from "../store/db";
import { type RequestLogRow, requestLogs } from "../store/schema";
import type { SpendLogsQuery, SpendReportQuery } from "./model";

const DAY = 86_400_000;

interface Scope {
  where: SQL[];
  start: Date;
  end: Date;
}

/** The filters a caller asked for, narrowed to what the caller may see. */
async function scope(db: Db, p: Principal, q: Omit<SpendLogsQuery, "limit" | "cursor">): Promise<Scope> {
  const where: SQL[] = [];
  const end = q.end_time ? new Date(q.end_time) : new Date();
  const start = q.start_time ? new Date(q.start_time) : new Date(end.getTime() - 30 * DAY);
  if (start.getTime() > end.getTime()) throw badRequest("start_time is after end_time", "start_time", "invalid_value");
  where.push(gte(requestLogs.created_at, start), lte(requestLogs.created_at, end));
  let tokenId: string | undefined;
  if (q.key !== undefined) {
    const row = await findKey(db, q.key);
    if (!row) throw notFound("Key not found", "key_not_found", "key");
    if (p.kind === "key" && p.key.key_type === "management" && row.team_id !== p.key.team_id) {
      throw forbidden("A management key can only see spend of its own team", "team_mismatch");
    }
    tokenId = row.token_id;
  }
  if (p.kind === "key" && p.key.key_type !== "management") {
    if (tokenId !== undefined && tokenId !== p.key.token_id) {
      throw forbidden(
        "An llm_api key may only see its own spend; the key_management permission is needed for others",
        "key_management_required",
      );
    }
    tokenId = p.key.token_id;
  }
  if (tokenId !== undefined) where.push(eq(requestLogs.token_id, tokenId));
  let teamId = q.team_id;
  if (p.kind === "key" && p.key.key_type === "management") {
    if (teamId !== undefined && teamId !== p.key.team_id) {
      throw forbidden("A management key can only see spend of its own team", "team_mismatch");
    }
    teamId = p.key.team_id;
  }
  if (teamId !== undefined) where.push(eq(requestLogs.team_id, teamId));
  if (q.model !== undefined) where.push(eq(requestLogs.model, q.model));
  if (q.tag !== undefined) where.push(sql`${requestLogs.tags} @> ${JSON.stringify([q.tag])}::jsonb`);
  return { where, start, end };
}

function encodeCursor(row: RequestLogRow): string {
  return Buffer.from(JSON.stringify([row.created_at.toISOString(), row.request_id])).toString("base64url");
}

function decodeCursor(cursor: string): { createdAt: Date; requestId: string } {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as [string, string];
    const createdAt = new Date(at);
    if (typeof id !== "string" || Number.isNaN(createdAt.getTime())) throw new Error("bad cursor");
    return { createdAt, requestId: id };
  } catch {
    throw badRequest("Invalid cursor: pass next_cursor from the previous page", "cursor", "invalid_value");
  }
}

export async function spendLogs(db: Db, p: Principal, q: SpendLogsQuery) {
  const { where } = await scope(db, p, q);
  if (q.cursor !== undefined) {
    const c = decodeCursor(q.cursor);
    where.push(
      or(
        lt(requestLogs.created_at, c.createdAt),
        and(eq(requestLogs.created_at, c.createdAt), lt(requestLogs.request_id, c.requestId)),
      ) as SQL,
    );
  }
  const limit = q.limit ?? 100;
  const rows = await db
    .select()
    .from(requestLogs)
    .where(and(...where))
    .orderBy(desc(requestLogs.created_at), desc(requestLogs.request_id))
    .limit(limit + 1);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    logs: page.map(({ key_hash: _h, ...rest }) => rest),
    next_cursor: rows.length > limit && last ? encodeCursor(last) : null,
  };
}

export interface ReportRow {
  group: string | null;
  spend: number;
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
}

export async function spendReport(db: Db, p: Principal, q: SpendReportQuery) {
  const { where, start, end } = await scope(db, p, q);
  const group =
    q.group_by === "key"
      ? sql`${requestLogs.token_id}`
      : q.group_by === "team"
        ? sql`${requestLogs.team_id}`
        : q.group_by === "model"
          ? sql`${requestLogs.model}`
          : sql`t.tag`;
  const from =
    q.group_by === "tag"
      ? sql`${requestLogs}, jsonb_array_elements_text(${requestLogs.tags}) as t(tag)`
      : sql`${requestLogs}`;
  const result: unknown = await db.execute(sql`
    select ${group} as "group",
           coalesce(sum(${requestLogs.cost}), 0)::float8 as spend,
           count(*)::int as requests,
           coalesce(sum(${requestLogs.input_tokens}), 0)::int8 as input_tokens,
           coalesce(sum(${requestLogs.output_tokens}), 0)::int8 as output_tokens,
           coalesce(sum(${requestLogs.cache_read_tokens}), 0)::int8 as cache_read_tokens,
           coalesce(sum(${requestLogs.cache_write_tokens}), 0)::int8 as cache_write_tokens
    from ${from}
    where ${and(...where)}
    group by 1
    order by spend desc, 1`);
  const raw = resultRows(result);
  const rows: ReportRow[] = raw.map((r) => ({
    group: r.group === null ? null : String(r.group),
    spend: Number(r.spend),
    requests: Number(r.requests),
    input_tokens: Number(r.input_tokens),
    output_tokens: Number(r.output_tokens),
    cache_read_tokens: Number(r.cache_read_tokens),
    cache_write_tokens: Number(r.cache_write_tokens),
  }));
  return {
    group_by: q.group_by,
    start_time: start.toISOString(),
    end_time: end.toISOString(),
    total_spend: rows.reduce((s, r) => s + r.spend, 0),
    rows,
  };
}
