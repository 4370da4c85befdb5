/**
 * Durable budget windows: keys and teams whose `budget_reset_at` has passed get `spend = 0` and
 * the next reset time. Each row is reset with a compare-and-set on its old `budget_reset_at`, so
 * every instance may run this and a window is still reset exactly once. (Enforcement does not wait
 * for it: the limiter computes the current window from the record itself.)
 */
import { and, eq, isNotNull, lte } from "drizzle-orm";
import { nextResetAt } from "../limits/windows";
import type { Logger } from "../log";
import { type Db, loggableError } from "../store/db";
import { apiKeys, teams } from "../store/schema";

export interface ResetCounts {
  keys: number;
  teams: number;
}

export async function resetEndedBudgets(db: Db, now: Date): Promise<ResetCounts> {
  const counts: ResetCounts = { keys: 0, teams: 0 };
  const dueKeys = await db
    .select({ id: apiKeys.token_id, duration: apiKeys.budget_duration, at: apiKeys.budget_reset_at })
    .from(apiKeys)
    .where(and(isNotNull(apiKeys.budget_duration), lte(apiKeys.budget_reset_at, now)))
    .limit(1000);
  for (const k of dueKeys) {
    if (!k.duration || !k.at) continue;
    const done = await db
      .update(apiKeys)
      .set({ spend: 0, budget_reset_at: nextResetAt(k.duration, k.at, now.getTime()) })
      .where(and(eq(apiKeys.token_id, k.id), eq(apiKeys.budget_reset_at, k.at)))
      .returning({ id: apiKeys.token_id });
    counts.keys += done.length;
  }
  const dueTeams = await db
    .select({ id: teams.team_id, duration: teams.budget_duration, at: teams.budget_reset_at })
    .from(teams)
    .where(and(isNotNull(teams.budget_duration), lte(teams.budget_reset_at, now)))
    .limit(1000);
  for (const t of dueTeams) {
    if (!t.duration || !t.at) continue;
    const done = await db
      .update(teams)
      .set({ spend: 0, budget_reset_at: nextResetAt(t.duration, t.at, now.getTime()) })
      .where(and(eq(teams.team_id, t.id), eq(teams.budget_reset_at, t.at)))
      .returning({ id: teams.team_id });
    counts.teams += done.length;
  }
  return counts;
}

/** Runs the reset periodically in the background; never throws. */
export function startBudgetResets(
  db: Db,
  log: Logger,
  intervalMs = 60_000,
  now: () => Date = () => new Date(),
): () => void {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const c = await resetEndedBudgets(db, now());
      if (c.keys || c.teams) log.info("budget windows reset", { keys: c.keys, teams: c.teams });
    } catch (e) {
      log.warn("budget reset failed; will retry", { error: loggableError(e) });
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void tick(), intervalMs);
  void tick();
  return () => clearInterval(timer);
}
