/**
 * The limiter on Redis, shared by every gateway instance: one `EVALSHA` per admission
 * (`scripts/admit.lua`) and one per settlement (`scripts/settle.lua`); a second admission only when
 * a spend counter must be created (`provisionalSeeds`). The scripts read Redis's clock (`TIME`) and
 * answer it, so every instance learns its offset to that one clock (`now()`).
 *
 * Key layout (prefix `gw`; `{scope}` is the request's team, the Cluster hash tag, so one script
 * touches one slot; the scripts derive bucket and window names from the base names they get in KEYS,
 * all under the same hash tag):
 *
 *   gw:{scope}:v:key:<keyId>                 highest published key version     (7 days)
 *   gw:{scope}:v:team:<teamId>               highest published team version    (7 days)
 *   gw:{scope}:live                          sorted set: request id -> lease expiry ms, requests
 *                                            whose settlement counts something (30 days idle)
 *   gw:{scope}:lres                          hash: request id -> its cost reservation ("amount\nkey...")
 *   <base>:rpm:<bucket>, <base>:tpm:<bucket> sliding-window buckets, bucket = floor(ms / windowMs) (2 x windowMs)
 *   <base>:par                               sorted set: lease id -> expiry ms  (leaseMs, renewed)
 *   <base>:b:<windowId>:spent | :res         budget spend and reservations      (window end + 1 h, at most 30 days idle)
 *   <base>:b:<windowId>:born                 when the spend counter was created (as the budget)
 *   gw:{scope}:k:<keyId>:b:<windowId>:soft   soft budget crossed: the request id (NX, as the budget)
 *   gw:{scope}:rp:<requestId>                outage spend of this request replayed (1 day)
 *
 * where <base> is gw:{scope}:t:<teamId> (team), gw:{scope}:k:<keyId> (key) or
 * gw:{scope}:m:<keyId>:<model> (key+model). Absent limits write nothing.
 *
 * A reservation belongs to one request: it is entered in `live` with the lease's expiry and in
 * `lres` with its amount. Settling takes it out (exactly once: a settlement counts only when its
 * request is still in `live`); a request whose instance died stops being renewed, and the next
 * admission in the scope releases it once its lease has expired.
 */
import { readFileSync } from "node:fs";
import { type Logger, silentLogger } from "../log";
import { type CallOptions, createRedis, type Redis, type RedisScript } from "../redis/client";
import {
  baseKeys,
  costArg,
  hasParallel,
  LeaseBook,
  liveKeys,
  money,
  num,
  REPLAY_MARK_TTL_MS,
  replayKey,
  reserves,
  type SpendWindow,
  spendWindow,
  subjects,
  tracked,
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
  type ReplayEntry,
  type Settlement,
  type SettleResult,
} from "./types";

const lua = (name: string) => readFileSync(new URL(`./scripts/${name}`, import.meta.url), "utf8");
export const ADMIT_LUA = lua("admit.lua");
export const SETTLE_LUA = lua("settle.lua");

/**
 * Extends one request's leases (Redis time) and answers that time. KEYS: the scope's in-flight
 * set when ARGV[3] is '1', then the parallel sorted sets (whose TTL follows their leases).
 */
export const RENEW_LUA = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = string.format('%.0f', now + tonumber(ARGV[1]))
local first = 1
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], 'XX', 'GT', exp, ARGV[2])
  first = 2
end
for i = first, #KEYS do
  if redis.call('ZADD', KEYS[i], 'XX', 'GT', 'CH', exp, ARGV[2]) == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[1])
  end
end
return now`;

/**
 * Adds one request's spend, counted elsewhere during an outage, to the spend counters that existed
 * before it began (`ReplayEntry`); once per request (a mark in its scope).
 * KEYS[1..3] base names (team, key, key+model), KEYS[4] the mark; ARGV[1] cost, [2] outage start
 * (ms), [3] mark TTL, [4..6] spend window ids ('' = none).
 */
export const REPLAY_LUA = `if not redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[3]) then return 0 end
for i = 1, 3 do
  local wid = ARGV[3 + i]
  if wid ~= '' then
    local sk = KEYS[i] .. ':b:' .. wid .. ':spent'
    if redis.call('EXISTS', sk) == 1 then
      local born = tonumber(redis.call('GET', KEYS[i] .. ':b:' .. wid .. ':born'))
      if not born or born <= tonumber(ARGV[2]) then redis.call('INCRBYFLOAT', sk, ARGV[1]) end
    end
  end
end
return 1`;

/** Keeps the highest version. */
export const VERSION_LUA = `local cur = tonumber(redis.call('GET', KEYS[1]))
if not cur or tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;

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
  /** This instance's clock (tests inject a skewed one); `now()` corrects it to Redis's. */
  localNow?: () => number;
}

const n = String;
const opt = (v: number | null) => (v === null ? "" : String(v));
const flag = (b: boolean) => (b ? "1" : "");

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

/** A clock sample older than this is replaced by the next one, however slow its round trip. */
const CLOCK_SAMPLE_MAX_AGE_MS = 10_000;

export class RedisLimiter extends LeaseBook {
  readonly kind = "redis" as const;
  readonly redis: Redis;
  private readonly prefix: string;
  private readonly owned: boolean;
  private readonly admitScript: RedisScript;
  private readonly settleScript: RedisScript;
  private readonly renewScript: RedisScript;
  private readonly versionScript: RedisScript;
  private readonly replayScript: RedisScript;
  private readonly call: CallOptions;
  private readonly localNow: () => number;
  /** Redis time minus local time, from the reply with the shortest recent round trip. */
  private offset = 0;
  private sampleRtt = Number.POSITIVE_INFINITY;
  private sampleAt = Number.NEGATIVE_INFINITY;

  constructor(options: RedisLimiterOptions) {
    super(
      {
        windowMs: options.windowMs,
        leaseMs: options.leaseMs,
        ...(options.settleRetryDelaysMs ? { settleRetryDelaysMs: options.settleRetryDelaysMs } : {}),
      },
      options.log ?? silentLogger,
    );
    this.owned = typeof options.redis === "string";
    this.redis =
      typeof options.redis === "string"
        ? createRedis(options.redis, { prefix: options.prefix, log: options.log })
        : options.redis;
    this.prefix = this.redis.prefix;
    if (/[{}]/.test(this.prefix)) throw new Error("the Redis key prefix must not contain { or }");
    this.call = { timeoutMs: options.commandTimeoutMs ?? LIMITER_DEFAULTS.commandTimeoutMs };
    this.localNow = options.localNow ?? Date.now;
    this.admitScript = this.redis.script(ADMIT_LUA);
    this.settleScript = this.redis.script(SETTLE_LUA);
    this.renewScript = this.redis.script(RENEW_LUA);
    this.versionScript = this.redis.script(VERSION_LUA);
    this.replayScript = this.redis.script(REPLAY_LUA);
    // Learn the offset as soon as Redis answers; every admission and settlement refines it.
    this.redis
      .ready()
      .then(() => this.syncClock())
      .catch(() => {});
  }

  /** Redis's time: this instance's clock plus the learned offset (within half a round trip). */
  now(): number {
    return Math.floor(this.localNow() + this.offset);
  }

  /**
   * Learns the offset from one reply carrying Redis's time: Redis read its clock between `sentAt`
   * and `receivedAt`, so the midpoint is off by at most half the round trip. The sample with the
   * shortest round trip wins, unless it is old or this one contradicts it (the local clock moved).
   */
  private learn(remote: number, sentAt: number, receivedAt: number): void {
    if (!Number.isFinite(remote)) return;
    const rtt = Math.max(0, receivedAt - sentAt);
    const offset = remote - (sentAt + receivedAt) / 2;
    const moved = Math.abs(offset - this.offset) > (rtt + this.sampleRtt) / 2 + 1;
    if (moved || rtt <= this.sampleRtt || receivedAt - this.sampleAt > CLOCK_SAMPLE_MAX_AGE_MS) {
      this.offset = offset;
      this.sampleRtt = rtt;
      this.sampleAt = receivedAt;
    }
  }

  /** Runs a script that answers Redis's time at `timeAt` in its reply, and learns the offset. */
  private async timed(script: RedisScript, keys: string[], args: string[], timeAt: number): Promise<unknown[]> {
    const sentAt = this.localNow();
    const r = (await script.run(keys, args, this.call)) as unknown[];
    this.learn(Number(r[timeAt]), sentAt, this.localNow());
    return r;
  }

  /** Reads Redis's TIME once (at start, before the first admission) to learn the offset. */
  async syncClock(): Promise<void> {
    const sentAt = this.localNow();
    const [s, us] = (await this.redis.send("TIME", [], this.call)) as [string, string];
    this.learn(Number(s) * 1000 + Math.floor(Number(us) / 1000), sentAt, this.localNow());
  }

  protected async doAdmit(req: AdmissionRequest): Promise<Admission> {
    const [team, key, model] = subjects(req);
    const args = [
      n(this.options.windowMs),
      n(this.options.leaseMs),
      req.requestId,
      n(wholeTokens(req.estimate.tokens)),
      costArg(req),
      n(req.key.version),
      n(req.team.version),
      flag(tracked(req)),
      flag(req.provisionalSeeds === true),
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
      ...liveKeys(this.prefix, req.scope),
    ];
    const r = await this.timed(this.admitScript, keys, args, 1);
    const status = Number(r[0]);
    if (status === 2) return { ok: false, stale: true, which: r[1] === "team" ? "team" : "key" };
    if (status === 3) return { ok: false, stale: false, unseeded: true };
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
      costArg(req),
      n(actual.tokens),
      n(actual.cost),
      flag(tracked(req)),
      flag(reserves(req)),
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
    const keys = [...baseKeys(this.prefix, req), ...liveKeys(this.prefix, req.scope)];
    const r = await this.timed(this.settleScript, keys, args, 3);
    return { keySpend: Number(r[0]), teamSpend: Number(r[1]), keySoftBudgetCrossed: Number(r[2]) === 1 };
  }

  /** One EVALSHA per unsettled lease, all sent in the same tick (one pipelined batch). */
  protected async doRenew(leases: readonly Lease[]): Promise<void> {
    const lm = n(this.options.leaseMs);
    const calls = leases.map((lease) => {
      const req = lease.request;
      const [team, key] = baseKeys(this.prefix, req);
      const keys: string[] = [];
      const inLive = tracked(req);
      if (inLive) keys.push(liveKeys(this.prefix, req.scope)[0]);
      if (hasParallel(req)) {
        if (num(req.team.maxParallel) !== null) keys.push(`${team}:par`);
        if (num(req.key.maxParallel) !== null) keys.push(`${key}:par`);
      }
      const sentAt = this.localNow();
      return this.renewScript
        .run(keys, [lm, lease.requestId, flag(inLive)], this.call)
        .then((t) => this.learn(Number(t), sentAt, this.localNow()));
    });
    const results = await Promise.allSettled(calls);
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /** One EVALSHA per request, all sent in the same tick. */
  async replay(entries: readonly ReplayEntry[]): Promise<void> {
    const calls = entries
      .filter((e) => money(e.cost) > 0)
      .map(({ request: req, cost, since }) =>
        this.replayScript.run(
          [...baseKeys(this.prefix, req), replayKey(this.prefix, req.scope, req.requestId)],
          [
            n(money(cost)),
            n(since),
            n(REPLAY_MARK_TTL_MS),
            ...subjects(req).map((l, i) => spendWindow(l, i === 1)?.id ?? ""),
          ],
          this.call,
        ),
      );
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

  protected async shutdown(): Promise<void> {
    if (this.owned) await this.redis.close();
  }
}
