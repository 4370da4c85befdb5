/**
 * The permission model (the spec leaves it open; this is ours):
 * - the master key may do everything;
 * - a management key (key_type "management", a team's service account) may manage keys of its own
 *   team, never above the team's limits or models, and cannot manage teams;
 * - an llm_api key may call inference and describe itself with GET /key/info.
 */
import { forbidden } from "../http/errors";
import type { Principal } from "./authenticator";

export function requireMaster(p: Principal, action: string): void {
  if (p.kind !== "master") throw forbidden(`${action} requires the master key`, "master_key_required");
}

export function requireKeyManager(p: Principal, action: string): void {
  if (p.kind === "master" || p.key.key_type === "management") return;
  throw forbidden(
    `${action} requires the key_management permission: use the master key or a management key (key_type "management")`,
    "key_management_required",
  );
}

/** A management key acts on its own team's keys only. */
export function requireSameTeam(p: Principal, teamId: string, action: string): void {
  if (p.kind === "master") return;
  if (p.key.team_id !== teamId) {
    throw forbidden(
      `${action}: a management key can only manage keys of its own team '${p.key.team_id}'`,
      "team_mismatch",
    );
  }
}
