/**
 * Budget windows, computed the same way on every instance from the stored record alone.
 * - Key and team budgets with `budget_duration` run from `budget_reset_at`: when that moment has
 *   passed (the stored row not yet advanced), the current window is found by stepping forward.
 * - Budgets without a duration never reset: one window forever.
 * - Per-model budgets (`model_max_budget.time_period`) use fixed periods aligned to the epoch.
 */
import { durationMs } from "../util/duration";
import type { BudgetCheck } from "./types";

const FOREVER = Number.MAX_SAFE_INTEGER;

export interface BudgetWindow {
  id: string;
  endsAt: number;
  /** Whether the stored spend belongs to this window (false once the stored window has ended). */
  storedSpendCounts: boolean;
}

/** The window of a key or team budget at `now`. */
export function recordWindow(budgetDuration: string | null, budgetResetAt: Date | null, now: number): BudgetWindow {
  if (!budgetDuration || !budgetResetAt) return { id: "all", endsAt: FOREVER, storedSpendCounts: true };
  const step = durationMs(budgetDuration);
  let end = budgetResetAt.getTime();
  if (end > now) return { id: String(end), endsAt: end, storedSpendCounts: true };
  end += Math.ceil((now - end + 1) / step) * step;
  return { id: String(end), endsAt: end, storedSpendCounts: false };
}

/** The fixed, epoch-aligned window of a per-model budget. */
export function periodWindow(timePeriod: string, now: number): BudgetWindow {
  const step = durationMs(timePeriod);
  const start = Math.floor(now / step) * step;
  return { id: `${timePeriod}:${start}`, endsAt: start + step, storedSpendCounts: false };
}

/** A budget on window `w`, seeded with the durable spend already recorded in it. */
export function budgetCheck(limit: number, w: BudgetWindow, seed: number): BudgetCheck {
  return { limit, windowId: w.id, windowEndsAt: w.endsAt, seed };
}

/** The next reset moment after `now` for a stored window that has ended (for the durable reset). */
export function nextResetAt(budgetDuration: string, budgetResetAt: Date, now: number): Date {
  return new Date(recordWindow(budgetDuration, budgetResetAt, now).endsAt);
}
