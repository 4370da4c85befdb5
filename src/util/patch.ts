import { addDuration } from "./duration";

/** The listed fields that were sent (not undefined): what an update changes and nothing else. */
export function pickSent<S extends object, K extends keyof S>(source: S, fields: readonly K[]): Partial<Pick<S, K>> {
  const out: Partial<Pick<S, K>> = {};
  for (const f of fields) if (source[f] !== undefined) out[f] = source[f];
  return out;
}

/** Setting `budget_duration` opens a new budget window from now; null removes it. */
export function budgetWindow(budgetDuration: string | null | undefined, now: Date) {
  if (budgetDuration === undefined) return {};
  return {
    budget_duration: budgetDuration,
    budget_reset_at: budgetDuration === null ? null : addDuration(now, budgetDuration),
  };
}
