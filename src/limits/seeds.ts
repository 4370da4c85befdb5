/**
 * Seeds of live spend counters: the durable spend of a key, a team, and a key on a model, in the
 * budget windows of one admission. Needed only when a counter does not exist (the first use of a
 * window, a Redis that lost its data, an instance that just started with the in-memory limiter):
 * admission then answers `unseeded` and the pipeline reads them here, fresh from the database
 * (never from the cached key and team records), plus this instance's spend the ledger has not
 * written yet.
 */
import { and, eq, gte, lt, sql } from "drizzle-orm";
import type { Logger } from "../log";
import type { Db } from "../store/db";
import { apiKeys, requestLogs, teams } from "../store/schema";
import { durationMs } from "../util/duration";
import { cachedSeeds, type KeyPrincipal, type Seeds } from "./enforcement";
import { type BudgetWindow, periodWindow, recordWindow } from "./windows";

/** Spend recorded but not yet in the database (the ledger's buffer and the batch being written). */
export interface UnwrittenSpend {
  unwritten(tokenId: string, teamId: string, model: string): { key: number; team: number; model: number };
}

interface StoredRecord {
  spend: number;
  budget_duration: string | null;
  budget_reset_at: Date | null;
}

/** The stored spend, if it belongs to the admission's window (the record may have been reset since it was cached). */
function storedIn(row: StoredRecord | undefined, window: BudgetWindow, now: number): number {
  if (!row) return 0;
  const w = recordWindow(row.budget_duration, row.budget_reset_at, now);
  return w.id === window.id && w.storedSpendCounts ? row.spend : 0;
}

export class SpendSeeds {
  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    private readonly pending?: UnwrittenSpend,
  ) {}

  /** Seeds read fresh; when the database cannot answer, the cached records' (logged). */
  async load(p: KeyPrincipal, model: string, now: number): Promise<Seeds> {
    const { key, team } = p;
    const keyWindow = recordWindow(key.budget_duration, key.budget_reset_at, now);
    const teamWindow = recordWindow(team.budget_duration, team.budget_reset_at, now);
    const modelBudget = key.model_max_budget[model];
    try {
      const [k, t, m] = await Promise.all([
        key.max_budget != null || key.soft_budget != null ? this.keySpend(key.token_id, keyWindow, now) : 0,
        team.max_budget != null ? this.teamSpend(team.team_id, teamWindow, now) : 0,
        modelBudget ? this.modelSpend(key.token_id, model, modelBudget.time_period, now) : 0,
      ]);
      const u = this.pending?.unwritten(key.token_id, team.team_id, model) ?? { key: 0, team: 0, model: 0 };
      return { key: k + u.key, team: t + u.team, model: m + u.model };
    } catch (e) {
      this.log.warn("spend seeds not readable from the database; using the cached records", {
        token_id: key.token_id,
        error: (e as Error).message,
      });
      return cachedSeeds(p, now);
    }
  }

  private async keySpend(tokenId: string, window: BudgetWindow, now: number): Promise<number> {
    const rows = await this.db
      .select({
        spend: apiKeys.spend,
        budget_duration: apiKeys.budget_duration,
        budget_reset_at: apiKeys.budget_reset_at,
      })
      .from(apiKeys)
      .where(eq(apiKeys.token_id, tokenId))
      .limit(1);
    return storedIn(rows[0], window, now);
  }

  private async teamSpend(teamId: string, window: BudgetWindow, now: number): Promise<number> {
    const rows = await this.db
      .select({ spend: teams.spend, budget_duration: teams.budget_duration, budget_reset_at: teams.budget_reset_at })
      .from(teams)
      .where(eq(teams.team_id, teamId))
      .limit(1);
    return storedIn(rows[0], window, now);
  }

  /** Per-model windows are fixed periods: their spend is the request log's within the period. */
  private async modelSpend(tokenId: string, model: string, timePeriod: string, now: number): Promise<number> {
    const w = periodWindow(timePeriod, now);
    const start = w.endsAt - durationMs(timePeriod);
    const rows = await this.db
      .select({ spend: sql<number>`coalesce(sum(${requestLogs.cost}), 0)::float8` })
      .from(requestLogs)
      .where(
        and(
          eq(requestLogs.token_id, tokenId),
          eq(requestLogs.model, model),
          gte(requestLogs.created_at, new Date(start)),
          lt(requestLogs.created_at, new Date(w.endsAt)),
        ),
      );
    return Number(rows[0]?.spend ?? 0);
  }
}
