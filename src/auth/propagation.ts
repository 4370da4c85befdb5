/**
 * Key and team changes, carried to every instance before the management call answers:
 * 1. this instance's cache forgets the records at once;
 * 2. the limiter stores the records' new versions, so the very next admission of that key on any
 *    instance answers "stale" and the record is re-read (the guarantee: one Redis round trip
 *    that every request makes anyway);
 * 3. a pub/sub broadcast makes the other instances' caches forget them too (and the cache TTL is
 *    the last safety net).
 * Without Redis (one embedded instance) only the first step has anything to do.
 */

import type { Limiter } from "../limits/types";
import type { Logger } from "../log";
import type { Authenticator, Invalidator, KeyChange, TeamChange } from "./authenticator";

export interface Broadcast {
  publish(message: string): Promise<unknown>;
}

interface Message {
  keys: string[];
  teams: string[];
}

export class Propagator implements Invalidator {
  constructor(
    private readonly auth: Authenticator,
    private readonly log: Logger,
    /** Shared limiter (Redis) that versions are stamped in; not needed by a single instance. */
    private readonly limiter?: Pick<Limiter, "publishVersion">,
    private readonly broadcast?: Broadcast,
  ) {}

  async keys(changes: readonly KeyChange[]): Promise<void> {
    if (changes.length === 0) return;
    this.auth.forgetKeys(changes.map((c) => c.hash));
    const versions = new Map<string, KeyChange>();
    for (const c of changes) versions.set(c.tokenId, c);
    await this.spread(
      [...versions.values()].map((c) => this.limiter?.publishVersion(c.teamId, "key", c.tokenId, c.version)),
      { keys: changes.map((c) => c.hash), teams: [] },
    );
  }

  async teams(changes: readonly TeamChange[]): Promise<void> {
    if (changes.length === 0) return;
    this.auth.forgetTeams(changes.map((c) => c.teamId));
    await this.spread(
      changes.map((c) => this.limiter?.publishVersion(c.teamId, "team", c.teamId, c.version)),
      { keys: [], teams: changes.map((c) => c.teamId) },
    );
  }

  /** A broadcast from any instance (this one included): forget what it names. */
  receive(raw: string): void {
    let msg: Partial<Message>;
    try {
      msg = JSON.parse(raw) as Partial<Message>;
    } catch {
      this.log.warn("ignored a malformed invalidation message");
      return;
    }
    if (Array.isArray(msg.keys)) this.auth.forgetKeys(msg.keys.filter((k): k is string => typeof k === "string"));
    if (Array.isArray(msg.teams)) this.auth.forgetTeams(msg.teams.filter((t): t is string => typeof t === "string"));
  }

  private async spread(versions: (Promise<void> | undefined)[], message: Message): Promise<void> {
    const results = await Promise.allSettled([...versions, this.broadcast?.publish(JSON.stringify(message))]);
    const failed = results.filter((r) => r.status === "rejected");
    if (failed.length) {
      // The change is committed; other instances converge within the cache TTL.
      this.log.error(
        "could not propagate a key/team change to other instances; they will catch up within the key cache TTL",
        {
          failures: failed.length,
          error: String((failed[0] as PromiseRejectedResult).reason),
        },
      );
    }
  }
}
