/**
 * Enforcement around one inference request: build the admission (limits of key, key+model and team,
 * their budget windows, an estimate when tpm or a budget needs one), turn refusals into 429s that
 * name the limit, and settle exactly once with what the request really used.
 */
import type { Principal } from "../auth/authenticator";
import type { ServedModel } from "../catalog/catalog";
import { GatewayError } from "../http/errors";
import type { KeyRow, TeamRow } from "../store/schema";
import type { AdmissionRequest, LimitKind, LimitScope, Limits, RateState, Subject } from "./types";
import { budgetCheck, periodWindow, recordWindow } from "./windows";

export type KeyPrincipal = Extract<Principal, { kind: "key" }>;

/** Whether anything about this request needs a token or cost estimate (tpm limits or budgets). */
export function needsEstimate(key: KeyRow, team: TeamRow, model: string): boolean {
  return (
    key.tpm_limit != null ||
    team.tpm_limit != null ||
    key.model_tpm_limit[model] != null ||
    key.max_budget != null ||
    team.max_budget != null ||
    key.model_max_budget[model] != null
  );
}

/** Durable spend of the key, the team, and the key on the model, in the windows of one admission. */
export interface Seeds {
  key: number;
  team: number;
  model: number;
}

/**
 * Seeds from the cached records alone (their spend as of when they were read; per-model spend
 * unknown): provisional, used until a spend counter has to be created (see `SpendSeeds`).
 */
export function cachedSeeds(p: KeyPrincipal, now: number): Seeds {
  const keyWindow = recordWindow(p.key.budget_duration, p.key.budget_reset_at, now);
  const teamWindow = recordWindow(p.team.budget_duration, p.team.budget_reset_at, now);
  return {
    key: keyWindow.storedSpendCounts ? p.key.spend : 0,
    team: teamWindow.storedSpendCounts ? p.team.spend : 0,
    model: 0,
  };
}

export function admissionRequest(
  p: KeyPrincipal,
  model: ServedModel,
  requestId: string,
  estimate: { tokens: number; cost: number },
  now: number,
  /**
   * Seeds read fresh from the database. Absent: the cached records' (provisional: a spend counter
   * that does not exist yet is not created from them; admission answers `unseeded` instead).
   */
  seeds?: Seeds,
): AdmissionRequest {
  const { key, team } = p;
  const s = seeds ?? cachedSeeds(p, now);
  const keyWindow = recordWindow(key.budget_duration, key.budget_reset_at, now);
  const teamWindow = recordWindow(team.budget_duration, team.budget_reset_at, now);
  const modelBudget = key.model_max_budget[model.name];
  const keySubject: Subject = {
    id: key.token_id,
    version: key.updated_at.getTime(),
    rpm: key.rpm_limit,
    tpm: key.tpm_limit,
    maxParallel: key.max_parallel_requests,
    budget:
      key.max_budget != null
        ? budgetCheck(key.max_budget, keyWindow, s.key)
        : key.soft_budget != null
          ? // A soft budget alone: spend tracked on the key's real window (and stored spend), never blocking.
            budgetCheck(Number.POSITIVE_INFINITY, keyWindow, s.key)
          : null,
    softBudget: key.soft_budget,
  };
  const keyModel: Limits & { model: string } = {
    model: model.name,
    rpm: key.model_rpm_limit[model.name] ?? null,
    tpm: key.model_tpm_limit[model.name] ?? null,
    budget: modelBudget
      ? budgetCheck(modelBudget.budget_limit, periodWindow(modelBudget.time_period, now), s.model)
      : null,
  };
  const teamSubject: Subject = {
    id: team.team_id,
    version: team.updated_at.getTime(),
    rpm: team.rpm_limit,
    tpm: team.tpm_limit,
    maxParallel: team.max_parallel_requests,
    budget: team.max_budget != null ? budgetCheck(team.max_budget, teamWindow, s.team) : null,
  };
  return {
    scope: team.team_id,
    requestId,
    key: keySubject,
    keyModel,
    team: teamSubject,
    estimate,
    provisionalSeeds: seeds === undefined,
  };
}

const SCOPE_TEXT: Record<LimitScope, (model: string) => string> = {
  key: () => "this key's",
  model: (model) => `this key's per-model (${model})`,
  team: () => "the team's",
};

const KIND_TEXT: Record<LimitKind, (limit: number) => string> = {
  rpm: (n) => `rpm limit (${n} requests per minute)`,
  tpm: (n) => `tpm limit (${n} tokens per minute)`,
  parallel: (n) => `parallel request limit (${n} at once)`,
  budget: (n) => `budget ($${n})`,
};

/** `x-ratelimit-*` headers, OpenAI's names: the tightest requests and tokens limits that applied. */
export function rateHeaders(rate: RateState | undefined): Record<string, string> {
  const h: Record<string, string> = {};
  if (rate?.requests) {
    h["x-ratelimit-limit-requests"] = String(rate.requests.limit);
    h["x-ratelimit-remaining-requests"] = String(Math.max(0, Math.floor(rate.requests.remaining)));
    h["x-ratelimit-reset-requests"] = `${Math.max(0, Math.ceil(rate.requests.resetMs / 1000))}s`;
  }
  if (rate?.tokens) {
    h["x-ratelimit-limit-tokens"] = String(rate.tokens.limit);
    h["x-ratelimit-remaining-tokens"] = String(Math.max(0, Math.floor(rate.tokens.remaining)));
    h["x-ratelimit-reset-tokens"] = `${Math.max(0, Math.ceil(rate.tokens.resetMs / 1000))}s`;
  }
  return h;
}

/** The 429 for a refused admission, naming the limit; budgets carry type `budget_exceeded`. */
export function refusalError(
  refusal: { kind: LimitKind; scope: LimitScope; limit: number; retryAfterMs: number; rate: RateState },
  model: string,
): GatewayError {
  const what = `${SCOPE_TEXT[refusal.scope](model)} ${KIND_TEXT[refusal.kind](refusal.limit)}`;
  const headers = rateHeaders(refusal.rate);
  if (refusal.retryAfterMs > 0) headers["retry-after"] = String(Math.max(1, Math.ceil(refusal.retryAfterMs / 1000)));
  if (refusal.kind === "budget") {
    return new GatewayError(429, `Budget exceeded: ${what} is spent`, {
      type: "budget_exceeded",
      code: "budget_exceeded",
      headers,
    });
  }
  const wait = headers["retry-after"] ? `; retry after ${headers["retry-after"]}s` : "";
  return new GatewayError(429, `Rate limit exceeded: ${what} is reached${wait}`, {
    type: "rate_limit_error",
    code: `${refusal.kind}_limit_exceeded`,
    headers,
  });
}
