/** Teams: create, update, describe, list, delete (with or without their keys), block. Master key only. */
import { count, desc, eq, inArray, type SQL, sql } from "drizzle-orm";
import type { Invalidator, Principal } from "../auth/authenticator";
import { requireMaster } from "../auth/permissions";
import { conflict, notFound } from "../http/errors";
import { deletedKey } from "../keys/service";
import { type Db, isForeignKeyViolation, isUniqueViolation } from "../store/db";
import { listPage } from "../store/paging";
import { apiKeys, type TeamRow, teams } from "../store/schema";
import { databaseNow, nextVersion } from "../store/versions";
import { budgetWindow, pickSent } from "../util/patch";
import type { CreateTeam, DeleteTeams, ListTeamsQuery, TeamSettings, UpdateTeam } from "./model";

export interface TeamDeps {
  db: Db;
  invalidate: Invalidator;
  now?: () => Date;
}

type TeamPatch = Partial<typeof teams.$inferInsert>;

const COPIED = [
  "team_alias",
  "models",
  "max_budget",
  "rpm_limit",
  "tpm_limit",
  "max_parallel_requests",
  "metadata",
  "blocked",
] as const;

function settingsPatch(s: TeamSettings, now: Date): TeamPatch {
  return { ...pickSent(s, COPIED), ...budgetWindow(s.budget_duration, now) };
}

const teamNotFound = (ids: string[]) =>
  notFound(`Team${ids.length > 1 ? "s" : ""} not found: ${ids.join(", ")}`, "team_not_found", "team_id");

const teamsStillHaveKeys = (detail: string) =>
  conflict(`Cannot delete team(s) that still have keys: ${detail}`, "team_ids", "team_has_keys");

export async function createTeam(deps: TeamDeps, p: Principal, input: CreateTeam): Promise<TeamRow> {
  requireMaster(p, "POST /team/new");
  const now = deps.now?.() ?? new Date();
  const { team_id, ...settings } = input;
  try {
    const [row] = await deps.db
      .insert(teams)
      .values({
        team_id: team_id ?? crypto.randomUUID(),
        created_at: now,
        updated_at: databaseNow(),
        ...settingsPatch(settings, now),
      })
      .returning();
    if (!row) throw new Error("insert returned no row");
    return row;
  } catch (e) {
    if (isUniqueViolation(e)) throw conflict(`Team '${team_id}' already exists`, "team_id", "team_exists");
    throw e;
  }
}

export async function updateTeam(deps: TeamDeps, p: Principal, input: UpdateTeam): Promise<TeamRow> {
  requireMaster(p, "POST /team/update");
  const now = deps.now?.() ?? new Date();
  const { team_id, ...settings } = input;
  const patch = settingsPatch(settings, now);
  const [row] =
    Object.keys(patch).length === 0
      ? await deps.db.select().from(teams).where(eq(teams.team_id, team_id))
      : await deps.db
          .update(teams)
          .set({ ...patch, updated_at: nextVersion(teams.updated_at) })
          .where(eq(teams.team_id, team_id))
          .returning();
  if (!row) throw teamNotFound([team_id]);
  await deps.invalidate.teams([{ teamId: team_id, version: row.updated_at.getTime() }]);
  return row;
}

export async function setTeamBlocked(deps: TeamDeps, p: Principal, teamId: string, blocked: boolean) {
  requireMaster(p, blocked ? "POST /team/block" : "POST /team/unblock");
  const [row] = await deps.db
    .update(teams)
    .set({ blocked, updated_at: nextVersion(teams.updated_at) })
    .where(eq(teams.team_id, teamId))
    .returning();
  if (!row) throw teamNotFound([teamId]);
  await deps.invalidate.teams([{ teamId, version: row.updated_at.getTime() }]);
  return row;
}

export async function describeTeam(deps: TeamDeps, p: Principal, teamId: string) {
  requireMaster(p, "GET /team/info");
  const [row] = await deps.db.select().from(teams).where(eq(teams.team_id, teamId));
  if (!row) throw teamNotFound([teamId]);
  const [keys] = await deps.db.select({ n: count() }).from(apiKeys).where(eq(apiKeys.team_id, teamId));
  return { row, keyCount: keys?.n ?? 0 };
}

export async function listTeams(deps: TeamDeps, p: Principal, q: ListTeamsQuery) {
  requireMaster(p, "GET /team/list");
  const where: SQL | undefined = q.team_alias !== undefined ? eq(teams.team_alias, q.team_alias) : undefined;
  return listPage(deps.db, teams, where, [desc(teams.created_at), desc(teams.team_id)], q.page, q.size);
}

/**
 * Deletes teams, all or none. A team that still has keys is refused (409) unless `force` is sent,
 * in which case its keys are deleted with it in the same transaction.
 */
export async function deleteTeams(deps: TeamDeps, p: Principal, input: DeleteTeams) {
  requireMaster(p, "POST /team/delete");
  const ids = [...new Set(input.team_ids)];
  const result = await deps.db
    .transaction(async (tx) => {
      // Locking the teams makes a concurrent key insert into them wait for this transaction (its
      // foreign-key check needs a share lock on the team row), so the count below sees every key.
      const existing = await tx
        .select({ team_id: teams.team_id })
        .from(teams)
        .where(inArray(teams.team_id, ids))
        .for("update");
      const known = new Set(existing.map((t) => t.team_id));
      const missing = ids.filter((id) => !known.has(id));
      if (missing.length) throw teamNotFound(missing);
      const keyCounts = await tx
        .select({ team_id: apiKeys.team_id, n: count() })
        .from(apiKeys)
        .where(inArray(apiKeys.team_id, ids))
        .groupBy(apiKeys.team_id);
      if (keyCounts.length > 0 && !input.force) {
        const list = keyCounts.map((k) => `'${k.team_id}' (${k.n} key${k.n === 1 ? "" : "s"})`).join(", ");
        throw teamsStillHaveKeys(`${list}. Delete the keys first or send "force": true`);
      }
      const deletedKeys = await tx
        .delete(apiKeys)
        .where(inArray(apiKeys.team_id, ids))
        .returning({ token_id: apiKeys.token_id, key_hash: apiKeys.key_hash, team_id: apiKeys.team_id });
      // The deletion's version: later than every version of the deleted teams, on the same clock.
      const [stamp] = await tx
        .select({ version: sql`max(${nextVersion(teams.updated_at)})`.mapWith(teams.updated_at) })
        .from(teams)
        .where(inArray(teams.team_id, ids));
      await tx.delete(teams).where(inArray(teams.team_id, ids));
      return { deletedKeys, version: stamp?.version };
    })
    .catch((e: unknown) => {
      // A key still refers to a team: one was created in it while this call ran.
      if (isForeignKeyViolation(e)) throw teamsStillHaveKeys("a key was created in one of them meanwhile; retry");
      throw e;
    });
  await deps.invalidate.keys(result.deletedKeys.map(deletedKey));
  // Newer than the deleted rows; a team created again later under the same id is at least as new.
  const version = result.version ? result.version.getTime() : Date.now();
  await deps.invalidate.teams(ids.map((teamId) => ({ teamId, version })));
  return { deleted_teams: ids, deleted_keys: result.deletedKeys.map((k) => k.token_id) };
}
