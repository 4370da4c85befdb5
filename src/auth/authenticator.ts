/**
 * Who is calling: the master key, or a key record (with its team), resolved through a cache so the
 * hot path rarely touches the database. Every key or team change invalidates the cache entry.
 */
import { timingSafeEqual } from "node:crypto";
import { eq } from "drizzle-orm";
import { unauthorized } from "../http/errors";
import { hashSecret } from "../keys/secret";
import type { Db } from "../store/db";
import { apiKeys, type KeyRow, type TeamRow, teams } from "../store/schema";
import { LoadingCache } from "./loading-cache";

export type Principal = { kind: "master" } | { kind: "key"; key: KeyRow; team: TeamRow };

/** A changed key: every hash it was known by, its record and team, and the record's new version. */
export interface KeyChange {
  hash: string;
  tokenId: string;
  teamId: string;
  /** `updated_at` in ms after the change; deleted keys use Number.MAX_SAFE_INTEGER. */
  version: number;
}

export interface TeamChange {
  teamId: string;
  version: number;
}

/**
 * Where key and team changes go before the management call answers: this instance's cache, and
 * (with Redis) every other instance's, so no instance serves a stale key on its next request.
 */
export interface Invalidator {
  keys(changes: readonly KeyChange[]): Promise<void>;
  teams(changes: readonly TeamChange[]): Promise<void>;
}

export interface AuthenticatorOptions {
  masterKeyHash: string;
  cacheTtlMs: number;
  cacheMaxEntries: number;
  now?: () => number;
}

const NEGATIVE_TTL_MS = 5_000;

export const missingApiKey = (sendAs = "'Authorization: Bearer <key>'") =>
  unauthorized(`Missing API key: send it as ${sendAs}`, "missing_api_key");

export class Authenticator {
  private readonly keyCache: LoadingCache<KeyRow>;
  private readonly teamCache: LoadingCache<TeamRow>;
  private readonly masterHash: Buffer;
  private readonly now: () => number;

  constructor(db: Db, opts: AuthenticatorOptions) {
    this.masterHash = Buffer.from(opts.masterKeyHash, "hex");
    this.now = opts.now ?? Date.now;
    const cacheOpts = {
      ttlMs: opts.cacheTtlMs,
      negativeTtlMs: NEGATIVE_TTL_MS,
      maxEntries: opts.cacheMaxEntries,
      now: this.now,
    };
    this.keyCache = new LoadingCache(async (hash) => {
      const rows = await db.select().from(apiKeys).where(eq(apiKeys.key_hash, hash)).limit(1);
      return rows[0] ?? null;
    }, cacheOpts);
    this.teamCache = new LoadingCache(async (teamId) => {
      const rows = await db.select().from(teams).where(eq(teams.team_id, teamId)).limit(1);
      return rows[0] ?? null;
    }, cacheOpts);
  }

  /**
   * Resolves a secret to a principal, or throws a 401 that says why. `sendAs` tells a caller without
   * a key how its protocol sends one (the routes know which protocol they serve).
   */
  async authenticate(secret: string | null, sendAs?: string): Promise<Principal> {
    if (secret === null || secret === "") throw missingApiKey(sendAs);
    const hash = hashSecret(secret);
    const hashBytes = Buffer.from(hash, "hex");
    if (timingSafeEqual(hashBytes, this.masterHash)) return { kind: "master" };
    return this.byHash(hash);
  }

  /** Forgets a key principal's cached records and checks it again from the database. */
  async reauthenticate(p: Extract<Principal, { kind: "key" }>): Promise<Principal> {
    this.keyCache.invalidate(p.key.key_hash);
    this.teamCache.invalidate(p.team.team_id);
    return this.byHash(p.key.key_hash);
  }

  private async byHash(hash: string): Promise<Principal> {
    const key = await this.keyCache.get(hash);
    if (key === null) throw unauthorized("Invalid API key", "invalid_api_key");
    if (key.expires !== null && key.expires.getTime() <= this.now()) {
      throw unauthorized(`API key expired at ${key.expires.toISOString()}`, "key_expired");
    }
    if (key.blocked) throw unauthorized("API key is blocked", "key_blocked");
    const team = await this.teamCache.get(key.team_id);
    if (team === null) throw unauthorized("Invalid API key", "invalid_api_key");
    if (team.blocked) throw unauthorized(`The key's team '${team.team_id}' is blocked`, "team_blocked");
    return { kind: "key", key, team };
  }

  /** Drops cached key records (this instance only). */
  forgetKeys(hashes: readonly string[]): void {
    for (const h of hashes) this.keyCache.invalidate(h);
  }

  /** Drops cached team records (this instance only). */
  forgetTeams(teamIds: readonly string[]): void {
    for (const id of teamIds) this.teamCache.invalidate(id);
  }
}

/**
 * The caller's key: `Authorization: Bearer <key>`, else `x-api-key` (Anthropic clients), else
 * `x-goog-api-key` (Google clients); null when none is sent.
 */
export function bearerToken(headers: Headers): string | null {
  const header = headers.get("authorization");
  if (header !== null) {
    const match = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) {
      throw unauthorized("Malformed Authorization header: expected 'Bearer <key>'", "invalid_authorization_header");
    }
    return match[1] ?? null;
  }
  return headers.get("x-api-key")?.trim() || headers.get("x-goog-api-key")?.trim() || null;
}
