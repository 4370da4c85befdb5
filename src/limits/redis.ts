/**
 * The limiter on Redis, shared by every gateway instance: one `EVALSHA` per admission
 * (`scripts/admit.lua`) and one per settlement (`scripts/settle.lua`, plus one small command per
 * spend tag, sent in the same tick). The scripts read Redis's clock (`TIME`), so instances with
 * skewed clocks agree.
 *
 * Key layout (prefix `gw`; `{scope}` is the request's team, the Cluster hash tag, so one script
 * touches one slot; the scripts derive bucket and window names from the base names they get in KEYS,
 * all under the same hash tag):
 *
 *   gw:{scope}:v:key:<keyId>                 highest published key version     (7 days)
 *   gw:{scope}:v:team:<teamId>               highest published team version    (7 days)
 *   <base>:rpm:<bucket>, <base>:tpm:<bucket> sliding-window buckets, bucket = floor(ms / windowMs) (2 x windowMs)
 *   <base>:par                               sorted set: lease id -> expiry ms  (leaseMs, renewed)
 *   <base>:b:<windowId>:spent | :res         budget spend and reservations      (window end + 1 h, at most 30 days idle)
 *   gw:{scope}:k:<keyId>:b:<windowId>:soft   soft-budget crossed flag (NX)      (as the budget)
 *   gw:{tag:<tag>}:spend                     live spend of a tag                (30 days after the last spend)
 *
 * where <base> is gw:{scope}:t:<teamId> (team), gw:{scope}:k:<keyId> (key) or
 * gw:{scope}:m:<keyId>:<model> (key+model). Absent limits write nothing.
 */
import { readFileSync } from "node:fs";
import { type Logger, silentLogger } from "../log";
import { type CallOptions, createRedis, type Redis, type RedisScript } from "../redis/client";
import {
  baseKeys,
  hasParallel,
  LeaseBook,
  money,
  num,
  type SpendWindow,
  spendWindow,
  subjects,
  TAG_TTL_MS,
  tagKey,
  VERSION_TTL_MS,
  versionKey,
  wholeTokens,
} from "./memory";
import {
  type Admission,
  type AdmissionRequest,
  type Lease,
  LIMITER_DEFAULTS,
  type LimiterOptions,
  type LimitKind,
  type LimitScope,
  type RateState,
  type Settlement,
  type SettleResult,
} from "./types";

const lua = (name: string) => readFileSync(new URL(`./scripts/${name}`, import.meta.url), "utf8");
export const ADMIT_LUA = lua("admit.lua");
export const SETTLE_LUA = lua("settle.lua");

/** Extends this request's parallel leases (Redis time); KEYS: the sorted sets. */
export const RENEW_LUA = `local t = redis.call('TIME')
local exp = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for _, k in ipairs(KEYS) do
  if redis.call('ZADD', k, 'XX', 'GT', 'CH', string.format('%.0f', exp), ARGV[2]) == 1 then
    redis.call('PEXPIRE', k, ARGV[1])
  end
end
return 0`;

/** Keeps the highest version. */
export const VERSION_LUA = `local cur = tonumber(redis.call('GET', KEYS[1]))
if not cur or tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;

/** Adds to a tag's spend. */
export const TAG_LUA = `local v = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return v`;

export interface RedisLimiterOptions extends LimiterOptions {
  /** A client to use (not closed by the limiter), or a URL to connect to (closed on `close()`). */
  redis: Redis | string;
  /** Key prefix when `redis` is a URL; default `gw`. */
  prefix?: string;
  log?: Logger;
  /**
   * A call unanswered this long rejects like an unreachable Redis (the failure policy applies);
   * without it, a Redis that stops answering on an open connection would hold requests forever.
   * Default 1 000 ms.
   */
  commandTimeoutMs?: number;
}

const n = String;
const opt = (v: number | null) => (v === null ? "" : String(v));

function spendArgs(w: SpendWindow | null, forSettle: boolean): string[] {
  if (!w) return ["", "", "0", "0"];
  return forSettle
    ? [w.id, w.limit === null ? "" : "1", n(w.endsAt), n(w.seed)]
    : [w.id, opt(w.limit), n(w.endsAt), n(w.seed)];
}

function rateOf(r: unknown[]): RateState {
  const rate: RateState = {};
  if (Number(r[2]) >= 0) rate.requests = { limit: Number(r[2]), remaining: Number(r[3]), resetMs: Number(r[4]) };
  if (Number(r[5]) >= 0) rate.tokens = { limit: Number(r[5]), remaining: Number(r[6]), resetMs: Number(r[7]) };
  return rate;
}

export class RedisLimiter extends LeaseBook {
  readonly kind = "redis" as const;
  readonly redis: Redis;
  private readonly prefix: string;
  private readonly owned: boolean;
  private readonly admitScript: RedisScript;
  private readonly settleScript: RedisScript;
  private readonly renewScript: RedisScript;
  private readonly versionScript: RedisScript;
  private readonly tagScript: RedisScript;
  private readonly call: CallOptions;

  constructor(options: RedisLimiterOptions) {
    super({ windowMs: options.windowMs, leaseMs: options.leaseMs }, options.log ?? silentLogger);
    this.owned = typeof options.redis === "string";
    this.redis =
      typeof options.redis === "string"
        ? createRedis(options.redis, { prefix: options.prefix, log: options.log })
        : options.redis;
    this.prefix = this.redis.prefix;
    this.call = { timeoutMs: options.commandTimeoutMs ?? LIMITER_DEFAULTS.commandTimeoutMs };
    if (/[{}]/.test(this.prefix)) throw new Error("the Redis key prefix must not contain { or }");
    this.admitScript = this.redis.script(ADMIT_LUA);
    this.settleScript = this.redis.script(SETTLE_LUA);
    this.renewScript = this.redis.script(RENEW_LUA);
    this.versionScript = this.redis.script(VERSION_LUA);
    this.tagScript = this.redis.script(TAG_LUA);
  }

  protected async doAdmit(req: AdmissionRequest): Promise<Admission> {
    const [team, key, model] = subjects(req);
    const args = [
      n(this.options.windowMs),
      n(this.options.leaseMs),
      req.requestId,
      n(wholeTokens(req.estimate.tokens)),
      n(money(req.estimate.cost)),
      n(req.key.version),
      n(req.team.version),
    ];
    for (const [l, i] of [
      [team, 0],
      [key, 1],
      [model, 2],
    ] as const) {
      args.push(
        opt(num(l.rpm)),
        opt(num(l.tpm)),
        i < 2 ? opt(num(l.maxParallel)) : "",
        ...spendArgs(spendWindow(l, false), false),
      );
    }
    const keys = [
      versionKey(this.prefix, req.scope, "key", req.key.id),
      versionKey(this.prefix, req.scope, "team", req.team.id),
      ...baseKeys(this.prefix, req),
    ];
    const r = (await this.admitScript.run(keys, args, this.call)) as unknown[];
    const status = Number(r[0]);
    if (status === 2) return { ok: false, stale: true, which: r[1] === "team" ? "team" : "key" };
    const admittedAt = Number(r[1]);
    if (status === 1)
      return { ok: true, lease: { requestId: req.requestId, request: req, admittedAt }, rate: rateOf(r) };
    return {
      ok: false,
      stale: false,
      kind: String(r[8]) as LimitKind,
      scope: String(r[9]) as LimitScope,
      limit: Number(r[10]),
      retryAfterMs: Number(r[11]),
      rate: rateOf(r),
    };
  }

  protected async doSettle(lease: Lease, actual: Settlement): Promise<SettleResult> {
    const req = lease.request;
    const args = [
      n(this.options.windowMs),
      n(lease.admittedAt),
      req.requestId,
      n(wholeTokens(req.estimate.tokens)),
      n(money(req.estimate.cost)),
      n(actual.tokens),
      n(actual.cost),
    ];
    subjects(req).forEach((l, i) => {
      const w = spendWindow(l, i === 1);
      args.push(
        num(l.tpm) === null ? "" : "1",
        i < 2 && num(l.maxParallel) !== null ? "1" : "",
        ...spendArgs(w, true),
        w?.soft == null ? "" : n(w.soft),
      );
    });
    // Tags live in their own slots: separate commands, sent in the same tick as the settlement.
    const tags =
      actual.cost > 0
        ? [...new Set(actual.tags)].map((t) =>
            this.tagScript.run([tagKey(this.prefix, t)], [n(actual.cost), n(TAG_TTL_MS)], this.call),
          )
        : [];
    const settle = this.settleScript.run(baseKeys(this.prefix, req), args, this.call) as Promise<unknown[]>;
    const [r] = await Promise.all([settle, ...tags]);
    return { keySpend: Number(r[0]), teamSpend: Number(r[1]), keySoftBudgetCrossed: Number(r[2]) === 1 };
  }

  /** One EVALSHA per unsettled lease, all sent in the same tick (one pipelined batch). */
  protected async doRenew(leases: readonly Lease[]): Promise<void> {
    const lm = n(this.options.leaseMs);
    const calls = leases
      .filter((l) => hasParallel(l.request))
      .map((lease) => {
        const [team, key] = baseKeys(this.prefix, lease.request);
        const keys: string[] = [];
        if (num(lease.request.team.maxParallel) !== null) keys.push(`${team}:par`);
        if (num(lease.request.key.maxParallel) !== null) keys.push(`${key}:par`);
        return this.renewScript.run(keys, [lm, lease.requestId], this.call);
      });
    const results = await Promise.allSettled(calls);
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  async publishVersion(scope: string, which: "key" | "team", id: string, version: number): Promise<void> {
    await this.versionScript.run(
      [versionKey(this.prefix, scope, which, id)],
      [n(version), n(VERSION_TTL_MS)],
      this.call,
    );
  }

  async tagSpend(tag: string): Promise<number> {
    const v = await this.redis.send("GET", [tagKey(this.prefix, tag)], this.call);
    return v == null ? 0 : Number(v);
  }

  protected async shutdown(): Promise<void> {
    if (this.owned) await this.redis.close();
  }
}
