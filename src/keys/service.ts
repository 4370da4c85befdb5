/**
 * Key management: create, update, describe, list, delete, regenerate, block. Functions take plain
 * arguments (the database, the invalidator, the caller) and return plain records.
 */
import { and, desc, eq, inArray, type SQL } from "drizzle-orm";
import type { Invalidator, KeyChange, Principal } from "../auth/authenticator";
import { requireKeyManager, requireSameTeam } from "../auth/permissions";
import { badRequest, conflict, forbidden, notFound } from "../http/errors";
import { modelAllowed } from "../inference/access";
import { type Db, isForeignKeyViolation, isUniqueViolation } from "../store/db";
import { listPage } from "../store/paging";
import { apiKeys, type KeyRow, type TeamRow, teams } from "../store/schema";
import { databaseNow, nextVersion } from "../store/versions";
import { addDuration } from "../util/duration";
import { budgetWindow, pickSent } from "../util/patch";
import type { CreateKey, DeleteKeys, KeySettings, ListKeysQuery, UpdateKey } from "./model";
import { generateSecret, hashSecret, looksLikeHash, maskSecret } from "./secret";

export interface KeyDeps {
  db: Db;
  invalidate: Invalidator;
  now?: () => Date;
}

type KeyPatch = Partial<typeof apiKeys.$inferInsert>;

const clock = (deps: KeyDeps) => (deps.now ? deps.now() : new Date());

/** A key change for the invalidator: by default under the key's current hash. */
function changeOf(row: KeyRow, hash = row.key_hash): KeyChange {
  return { hash, tokenId: row.token_id, teamId: row.team_id, version: row.updated_at.getTime() };
}

/**
 * The changes a write makes: under the hash read before it and under the hash the write returned.
 * They differ when a regenerate committed in between; a cache may already hold the new hash's record
 * with the settings from before this write.
 */
function changesOf(updated: KeyRow, readHash: string): KeyChange[] {
  return readHash === updated.key_hash ? [changeOf(updated)] : [changeOf(updated, readHash), changeOf(updated)];
}

/** A deleted key is newer than any version of it a cache may hold. */
export function deletedKey(row: { key_hash: string; token_id: string; team_id: string }): KeyChange {
  return { hash: row.key_hash, tokenId: row.token_id, teamId: row.team_id, version: Number.MAX_SAFE_INTEGER };
}

/** Finds a key by its secret (`sk-...`), its key_hash or its token_id. */
export async function findKey(db: Db, ref: string): Promise<KeyRow | undefined> {
  const where = ref.startsWith("sk-")
    ? eq(apiKeys.key_hash, hashSecret(ref))
    : looksLikeHash(ref)
      ? eq(apiKeys.key_hash, ref)
      : eq(apiKeys.token_id, ref);
  const rows = await db.select().from(apiKeys).where(where).limit(1);
  return rows[0];
}

/** How a key reference may appear in a message: never a full secret. */
export function describeRef(ref: string): string {
  return ref.startsWith("sk-") ? maskSecret(ref) : ref;
}

const keyNotFound = (ref: string) => notFound(`Key not found: ${describeRef(ref)}`, "key_not_found", "key");

/**
 * The key a caller may see: for a management key only keys of its own team. Another team's key
 * is "not found" exactly like a key that does not exist, so a management key cannot probe which
 * keys exist elsewhere.
 */
function visibleTo(p: Principal, row: KeyRow | undefined): KeyRow | undefined {
  return row && (p.kind === "master" || row.team_id === p.key.team_id) ? row : undefined;
}

async function requireKey(db: Db, p: Principal, ref: string): Promise<KeyRow> {
  const row = visibleTo(p, await findKey(db, ref));
  if (!row) throw keyNotFound(ref);
  return row;
}

/** Whether a reference (secret, key_hash or token_id) names the given key. */
function refersTo(ref: string, key: KeyRow): boolean {
  return ref === key.token_id || ref === key.key_hash || (ref.startsWith("sk-") && hashSecret(ref) === key.key_hash);
}

async function findTeam(db: Db, teamId: string): Promise<TeamRow | undefined> {
  const rows = await db.select().from(teams).where(eq(teams.team_id, teamId)).limit(1);
  return rows[0];
}

/** Turns sent settings into column values; fields not sent stay out of the patch. */
const COPIED = [
  "key_alias",
  "models",
  "max_budget",
  "soft_budget",
  "rpm_limit",
  "tpm_limit",
  "max_parallel_requests",
  "model_max_budget",
  "model_rpm_limit",
  "model_tpm_limit",
  "metadata",
  "tags",
  "blocked",
] as const;

function settingsPatch(s: KeySettings, now: Date): KeyPatch {
  const patch: KeyPatch = { ...pickSent(s, COPIED), ...budgetWindow(s.budget_duration, now) };
  if (s.duration !== undefined) {
    patch.expires = s.duration === null || s.duration === "-1" ? null : addDuration(now, s.duration);
  }
  return patch;
}

/**
 * A management key may not give a key more than its team has: models outside the team's list,
 * budgets or limits above the team's, or no limit at all (an explicit null) where the team has
 * one. A limit that is simply not sent leaves the key without its own limit, which the team's
 * limit still bounds at inference; likewise `models: []` means "every model of the team".
 */
function assertWithinTeam(p: Principal, team: TeamRow, s: KeySettings): void {
  if (p.kind === "master") return;
  const deny = (field: string, message: string) =>
    forbidden(`${message}; a management key cannot raise a key above its team`, "exceeds_team_limit", field);
  if (team.models.length > 0) {
    for (const m of s.models ?? []) {
      if (!modelAllowed(team.models, m)) {
        throw forbidden(`Model '${m}' is not in team '${team.team_id}' models`, "model_not_allowed_for_team", "models");
      }
    }
  }
  const caps: Array<[keyof KeySettings, number | null, string]> = [
    ["max_budget", team.max_budget, "max_budget"],
    ["soft_budget", team.max_budget, "max_budget"],
    ["rpm_limit", team.rpm_limit, "rpm_limit"],
    ["tpm_limit", team.tpm_limit, "tpm_limit"],
    ["max_parallel_requests", team.max_parallel_requests, "max_parallel_requests"],
  ];
  for (const [field, cap, what] of caps) {
    const value = s[field];
    if (cap === null) continue;
    if (typeof value === "number" && value > cap) {
      throw deny(field, `'${field}' (${value}) is above the team's ${what} (${cap})`);
    }
    // No soft budget only means no alert; no max_budget or limit means unlimited.
    if (value === null && field !== "soft_budget") {
      throw deny(field, `'${field}': null (unlimited) is above the team's ${what} (${cap})`);
    }
  }
  const perModel: Array<[string, Record<string, number> | undefined, number | null, string]> = [
    ["model_rpm_limit", s.model_rpm_limit, team.rpm_limit, "rpm_limit"],
    ["model_tpm_limit", s.model_tpm_limit, team.tpm_limit, "tpm_limit"],
    [
      "model_max_budget",
      s.model_max_budget && Object.fromEntries(Object.entries(s.model_max_budget).map(([m, b]) => [m, b.budget_limit])),
      team.max_budget,
      "max_budget",
    ],
  ];
  for (const [field, values, cap, what] of perModel) {
    if (cap === null || values === undefined) continue;
    for (const [model, value] of Object.entries(values)) {
      if (value > cap) throw deny(field, `'${field}.${model}' (${value}) is above the team's ${what} (${cap})`);
    }
  }
}

const teamNotFound = (teamId: string) => badRequest(`Team '${teamId}' does not exist`, "team_id", "team_not_found");

function aliasTaken(alias: string | null | undefined) {
  return conflict(`key_alias '${alias}' is already used by another key`, "key_alias", "key_alias_exists");
}

export async function generateKey(deps: KeyDeps, p: Principal, input: CreateKey) {
  requireKeyManager(p, "POST /key/generate");
  requireSameTeam(p, input.team_id, "POST /key/generate");
  const team = await findTeam(deps.db, input.team_id);
  if (!team) throw teamNotFound(input.team_id);
  const keyType = input.key_type ?? "llm_api";
  if (keyType === "management" && input.user_id) {
    throw badRequest("A management key belongs to its team and cannot have a user_id", "user_id");
  }
  assertWithinTeam(p, team, input);

  const now = clock(deps);
  const secret = generateSecret();
  const row = {
    token_id: crypto.randomUUID(),
    key_hash: hashSecret(secret),
    key_name: maskSecret(secret),
    key_type: keyType,
    team_id: input.team_id,
    user_id: input.user_id ?? null,
    created_by: p.kind === "master" ? "master" : p.key.token_id,
    created_at: now,
    updated_at: databaseNow(),
    ...settingsPatch(input, now),
  };
  let inserted: KeyRow | undefined;
  try {
    [inserted] = await deps.db.insert(apiKeys).values(row).returning();
  } catch (e) {
    if (isUniqueViolation(e)) throw aliasTaken(input.key_alias);
    // The team was deleted between the check above and the insert.
    if (isForeignKeyViolation(e)) throw teamNotFound(input.team_id);
    throw e;
  }
  if (!inserted) throw new Error("insert returned no row");
  await deps.invalidate.keys([changeOf(inserted)]);
  return { secret, row: inserted };
}

async function loadManagedKey(deps: KeyDeps, p: Principal, ref: string, action: string) {
  requireKeyManager(p, action);
  return requireKey(deps.db, p, ref);
}

async function teamForLimits(deps: KeyDeps, p: Principal, row: KeyRow): Promise<TeamRow | undefined> {
  return p.kind === "master" ? undefined : findTeam(deps.db, row.team_id);
}

export async function updateKey(deps: KeyDeps, p: Principal, input: UpdateKey): Promise<KeyRow> {
  const row = await loadManagedKey(deps, p, input.key, "POST /key/update");
  const { key: _ref, ...settings } = input;
  const team = await teamForLimits(deps, p, row);
  if (team) assertWithinTeam(p, team, settings);
  const now = clock(deps);
  const patch = settingsPatch(settings, now);
  if (Object.keys(patch).length === 0) return row;
  let updated: KeyRow | undefined;
  try {
    [updated] = await deps.db
      .update(apiKeys)
      .set({ ...patch, updated_at: nextVersion(apiKeys.updated_at) })
      .where(eq(apiKeys.token_id, row.token_id))
      .returning();
  } catch (e) {
    if (isUniqueViolation(e)) throw aliasTaken(settings.key_alias);
    throw e;
  }
  if (!updated) throw keyNotFound(input.key);
  await deps.invalidate.keys(changesOf(updated, row.key_hash));
  return updated;
}

/**
 * A new secret for the same key record, with every setting carried over and the sent fields
 * applied, in one conditional UPDATE: it either fully happens or leaves the old secret working.
 */
export async function regenerateKey(deps: KeyDeps, p: Principal, input: UpdateKey) {
  const row = await loadManagedKey(deps, p, input.key, "POST /key/regenerate");
  const { key: _ref, ...settings } = input;
  const team = await teamForLimits(deps, p, row);
  if (team) assertWithinTeam(p, team, settings);
  const now = clock(deps);
  const secret = generateSecret();
  let updated: KeyRow | undefined;
  try {
    [updated] = await deps.db
      .update(apiKeys)
      .set({
        ...settingsPatch(settings, now),
        key_hash: hashSecret(secret),
        key_name: maskSecret(secret),
        updated_at: nextVersion(apiKeys.updated_at),
      })
      // Only if nobody regenerated it meanwhile: two concurrent calls cannot both succeed.
      .where(and(eq(apiKeys.token_id, row.token_id), eq(apiKeys.key_hash, row.key_hash)))
      .returning();
  } catch (e) {
    if (isUniqueViolation(e)) throw aliasTaken(settings.key_alias);
    throw e;
  }
  if (!updated) {
    throw conflict("The key was changed by another request while regenerating; retry", "key", "concurrent_update");
  }
  await deps.invalidate.keys(changesOf(updated, row.key_hash));
  return { secret, row: updated };
}

export async function setKeyBlocked(deps: KeyDeps, p: Principal, ref: string, blocked: boolean): Promise<KeyRow> {
  const action = blocked ? "POST /key/block" : "POST /key/unblock";
  const row = await loadManagedKey(deps, p, ref, action);
  const [updated] = await deps.db
    .update(apiKeys)
    .set({ blocked, updated_at: nextVersion(apiKeys.updated_at) })
    .where(eq(apiKeys.token_id, row.token_id))
    .returning();
  if (!updated) throw keyNotFound(ref);
  await deps.invalidate.keys(changesOf(updated, row.key_hash));
  return updated;
}

/**
 * GET /key/info: without `key`, the calling key; llm_api keys may only describe themselves (a 403
 * for any other reference, whether or not it exists); management keys, keys of their team.
 */
export async function describeKey(deps: KeyDeps, p: Principal, ref: string | undefined): Promise<KeyRow> {
  if (ref === undefined) {
    if (p.kind === "master") {
      throw badRequest("The master key has no key record: pass ?key=<key, token_id or key_hash>", "key");
    }
    return requireKey(deps.db, p, p.key.token_id);
  }
  if (p.kind === "key" && p.key.key_type !== "management" && !refersTo(ref, p.key)) {
    throw forbidden(
      "GET /key/info about another key requires the key_management permission; an llm_api key may only describe itself",
      "key_management_required",
    );
  }
  return requireKey(deps.db, p, ref);
}

export async function listKeys(deps: KeyDeps, p: Principal, q: ListKeysQuery) {
  requireKeyManager(p, "GET /key/list");
  let teamId = q.team_id;
  if (p.kind === "key") {
    if (teamId !== undefined) requireSameTeam(p, teamId, "GET /key/list");
    teamId = p.key.team_id;
  }
  const filters: SQL[] = [];
  if (teamId !== undefined) filters.push(eq(apiKeys.team_id, teamId));
  if (q.user_id !== undefined) filters.push(eq(apiKeys.user_id, q.user_id));
  if (q.key_hash !== undefined) filters.push(eq(apiKeys.key_hash, q.key_hash));
  if (q.key_alias !== undefined) filters.push(eq(apiKeys.key_alias, q.key_alias));
  const where = filters.length ? and(...filters) : undefined;
  const page = await listPage(
    deps.db,
    apiKeys,
    where,
    [desc(apiKeys.created_at), desc(apiKeys.token_id)],
    q.page,
    q.size,
  );
  const rows = page.rows;
  let teamsById = new Map<string, TeamRow>();
  if (q.expand === "team" && rows.length > 0) {
    const ids = [...new Set(rows.map((r) => r.team_id))];
    const found = await deps.db.select().from(teams).where(inArray(teams.team_id, ids));
    teamsById = new Map(found.map((t) => [t.team_id, t]));
  }
  return { ...page, teamsById };
}

/** Deletes keys named by reference or alias, all or none: unknown names are a 404 naming them. */
export async function deleteKeys(deps: KeyDeps, p: Principal, input: DeleteKeys) {
  requireKeyManager(p, "POST /key/delete");
  if (!input.keys && !input.key_aliases) {
    throw badRequest("Send 'keys' (key values, token_ids or key hashes) or 'key_aliases'", "keys", "missing_field");
  }
  // A management key sees only its own team's keys: others are "not found" like unknown ones.
  const found = new Map<string, KeyRow>();
  const missing: string[] = [];
  for (const ref of input.keys ?? []) {
    const row = visibleTo(p, await findKey(deps.db, ref));
    if (row) found.set(row.token_id, row);
    else missing.push(describeRef(ref));
  }
  if (input.key_aliases?.length) {
    const rows = (await deps.db.select().from(apiKeys).where(inArray(apiKeys.key_alias, input.key_aliases))).filter(
      (r) => visibleTo(p, r),
    );
    const byAlias = new Set(rows.map((r) => r.key_alias));
    for (const row of rows) found.set(row.token_id, row);
    for (const alias of input.key_aliases) if (!byAlias.has(alias)) missing.push(`alias '${alias}'`);
  }
  if (missing.length) throw notFound(`Keys not found: ${missing.join(", ")}`, "key_not_found", "keys");
  const ids = [...found.keys()];
  const deleted = await deps.db.delete(apiKeys).where(inArray(apiKeys.token_id, ids)).returning({
    token_id: apiKeys.token_id,
    key_hash: apiKeys.key_hash,
    key_name: apiKeys.key_name,
    key_alias: apiKeys.key_alias,
    team_id: apiKeys.team_id,
  });
  await deps.invalidate.keys(deleted.map((d) => deletedKey(d)));
  return deleted.map(({ key_hash: _h, team_id: _t, ...rest }) => rest);
}
