/**
 * The gateway's Redis connection: a thin wrapper over Bun's built-in `RedisClient`.
 *
 * - Every key the gateway writes starts with `prefix` (default `gw`): `redis.key("a", "b")` is `gw:a:b`.
 *   Pub/sub channels are prefixed the same way, so gateways sharing one Redis stay apart.
 * - Fail fast: the offline queue is off, so while disconnected every call rejects at once with an
 *   error (`RedisUnavailableError` or Bun's `ERR_REDIS_CONNECTION_CLOSED`) instead of waiting.
 * - A supervisor reconnects forever (capped exponential backoff) until `close()`. Bun's own
 *   `autoReconnect` gives up after `maxRetries` and never resubscribes, so it is off.
 * - Scripts: `script(source)` registers a Lua script; `run` sends `EVALSHA` (the SHA is computed
 *   locally; `SCRIPT LOAD` is sent once per connection, pipelined ahead of the first call). On a
 *   `NOSCRIPT` error (server restarted, `SCRIPT FLUSH`) the script is loaded again (`SCRIPT LOAD`)
 *   and the call retried once as `EVAL` of the source, in the same pipeline, so the retry cannot
 *   miss the script again.
 * - `subscriber()` opens a separate connection for pub/sub that resubscribes after reconnecting.
 * - A Redis that stops answering while the TCP connection stays open would leave calls waiting
 *   forever: calls given a `timeoutMs` (the limiter's, and `ping`) reject with `RedisTimeoutError`
 *   after it, and when nothing at all came back on the connection since the call was sent, the
 *   connection is dropped and reconnected, so the calls after it fail at once instead of waiting.
 */
import { RedisClient } from "bun";
import { type Logger, silentLogger } from "../log";

export interface RedisConnectOptions {
  /** Key and channel prefix; default `gw`. */
  prefix?: string;
  log?: Logger;
  /** Connect timeout per attempt; default 5 000 ms. */
  connectTimeoutMs?: number;
  /** First and largest delay between reconnect attempts; default 50 ms and 2 000 ms. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
}

export class RedisUnavailableError extends Error {
  readonly code = "ERR_REDIS_UNAVAILABLE";
  constructor(message: string) {
    super(message);
    this.name = "RedisUnavailableError";
  }
}

/** No answer within the call's time limit: treated like an unreachable Redis. */
export class RedisTimeoutError extends RedisUnavailableError {
  constructor(what: string, ms: number) {
    super(`${what} timed out after ${ms} ms: no answer from Redis`);
    this.name = "RedisTimeoutError";
  }
}

export interface CallOptions {
  /** Reject with `RedisTimeoutError` after this long (and reconnect when the connection is silent). */
  timeoutMs?: number;
}

/** A registered Lua script. */
export interface RedisScript {
  readonly sha: string;
  readonly source: string;
  /** One `EVALSHA` (on `NOSCRIPT`: reload and retry once). Pass numbers as strings. */
  run(keys: readonly string[], args: readonly string[], opts?: CallOptions): Promise<unknown>;
}

export type MessageListener = (message: string, channel: string) => void;

export interface RedisSubscriber {
  /** Subscribes to `prefix:channel`; the listener receives the unprefixed channel name. */
  subscribe(channel: string, listener: MessageListener): Promise<void>;
  unsubscribe(channel: string, listener?: MessageListener): Promise<void>;
  readonly isConnected: boolean;
  close(): Promise<void>;
}

export interface Redis {
  readonly prefix: string;
  readonly isConnected: boolean;
  /** `prefix:part:part...` */
  key(...parts: (string | number)[]): string;
  /** One raw command (arguments as strings). Rejects at once while disconnected. */
  send(command: string, args: readonly string[], opts?: CallOptions): Promise<unknown>;
  script(source: string): RedisScript;
  /** Publishes on `prefix:channel`; resolves with the number of receivers. */
  publish(channel: string, message: string): Promise<number>;
  /** Readiness: PING answered within `timeoutMs` (default 1 000). */
  ping(timeoutMs?: number): Promise<void>;
  /** Resolves once connected (or rejects after `timeoutMs`). */
  ready(timeoutMs?: number): Promise<void>;
  subscriber(): RedisSubscriber;
  close(): Promise<void>;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisTimeoutError(what, ms)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

function isNoScript(e: unknown): boolean {
  return e instanceof Error && e.message.startsWith("NOSCRIPT");
}

/** Redacts the password of a URL for logs. */
function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "redis://?";
  }
}

/**
 * One supervised connection: connects now, reconnects on every close with capped backoff, forever,
 * until `stop()`. `onUp` runs after each successful connect (script reloads, resubscriptions).
 */
class Supervisor {
  client: RedisClient;
  private stopped = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private attempt = 0;
  private connecting = false;
  /** Connected since the last successful connect (so a drop is logged once, not every failed retry). */
  private up = false;
  private waiters: (() => void)[] = [];

  constructor(
    private readonly url: string,
    private readonly opts: Required<Omit<RedisConnectOptions, "prefix" | "log">>,
    private readonly log: Logger,
    private readonly role: string,
    private readonly fresh: boolean,
    private readonly onUp: (client: RedisClient) => void,
  ) {
    this.client = this.make();
    void this.connect();
  }

  private make(): RedisClient {
    const c = new RedisClient(this.url, {
      enableOfflineQueue: false,
      autoReconnect: false,
      connectionTimeout: this.opts.connectTimeoutMs,
    });
    c.onclose = (err) => {
      if (c !== this.client) return;
      if (this.up && !this.stopped) this.log.warn("redis disconnected", { role: this.role, error: err?.message });
      this.up = false;
      this.schedule();
    };
    return c;
  }

  get connected(): boolean {
    return !this.stopped && this.client.connected;
  }

  private async connect(): Promise<void> {
    if (this.stopped || this.connecting) return;
    this.connecting = true;
    const c = this.client;
    try {
      await c.connect();
      if (this.stopped || c !== this.client) {
        this.connecting = false;
        return;
      }
      if (this.attempt > 0) this.log.info("redis reconnected", { role: this.role, url: safeUrl(this.url) });
      this.attempt = 0;
      this.up = true;
      this.connecting = false;
      this.onUp(c);
      for (const w of this.waiters.splice(0)) w();
    } catch (e) {
      this.connecting = false;
      if (this.attempt === 0) {
        this.log.warn("redis connect failed", { role: this.role, url: safeUrl(this.url), error: (e as Error).message });
      }
      this.schedule();
    }
  }

  private schedule(): void {
    if (this.stopped || this.timer || this.connecting) return;
    const delay = Math.min(this.opts.maxBackoffMs, this.opts.minBackoffMs * 2 ** Math.min(this.attempt, 20));
    this.attempt++;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.stopped) return;
      if (this.fresh) {
        // A new client per attempt (the subscriber): no stale subscription state survives.
        const old = this.client;
        this.client = this.make();
        old.onclose = null;
        old.close();
      }
      void this.connect();
    }, delay);
    this.timer.unref?.();
  }

  /**
   * Drops a connection that stopped answering and connects anew (a fresh client: the old one may
   * still hold calls waiting for replies that will never come). Calls fail at once meanwhile.
   */
  recycle(c: RedisClient): void {
    if (this.stopped || c !== this.client) return;
    this.log.warn("redis stopped answering; reconnecting", { role: this.role });
    this.client = this.make();
    this.up = false;
    this.attempt = Math.max(this.attempt, 1);
    c.onclose = null;
    c.close();
    clearTimeout(this.timer);
    this.timer = undefined;
    void this.connect();
  }

  /** Resolves when connected (now or later); rejects after `ms`. */
  ready(ms: number): Promise<void> {
    if (this.connected) return Promise.resolve();
    if (this.stopped) return Promise.reject(new RedisUnavailableError("redis client is closed"));
    const p = new Promise<void>((resolve) => this.waiters.push(resolve));
    return withTimeout(p, ms, "redis connect");
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.client.onclose = null;
    this.client.close();
  }

  get isStopped(): boolean {
    return this.stopped;
  }
}

interface ScriptState {
  sha: string;
  source: string;
  /** The connection the script was last sent to with SCRIPT LOAD (undefined: not yet). */
  loadedOn: RedisClient | undefined;
  /** The reload after a NOSCRIPT error, shared by the calls that hit it together. */
  reloading: Promise<unknown> | undefined;
}

export function createRedis(url: string, options: RedisConnectOptions = {}): Redis {
  const prefix = options.prefix ?? "gw";
  const log = options.log ?? silentLogger;
  const timing = {
    connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
    minBackoffMs: options.minBackoffMs ?? 50,
    maxBackoffMs: options.maxBackoffMs ?? 2_000,
  };
  const scripts = new Map<string, ScriptState>();
  const subscribers = new Set<RedisSubscriber>();

  const load = (s: ScriptState, c: RedisClient): Promise<unknown> => {
    s.loadedOn = c;
    const p = c.send("SCRIPT", ["LOAD", s.source]).catch((e: unknown) => {
      if (s.loadedOn === c) s.loadedOn = undefined;
      throw e;
    });
    // A failed load surfaces through the EVALSHA that follows it; never as an unhandled rejection.
    p.catch(() => {});
    return p;
  };

  const sup = new Supervisor(url, timing, log, "main", false, (c) => {
    for (const s of scripts.values()) load(s, c);
  });

  const closedError = () => new RedisUnavailableError("redis client is closed");

  /** When each connection last got any reply (or error) back: silent connections are stalled. */
  const lastReply = new WeakMap<RedisClient, number>();
  const heard = (c: RedisClient) => () => void lastReply.set(c, performance.now());
  const tracked = <T>(c: RedisClient, p: Promise<T>): Promise<T> => {
    p.then(heard(c), heard(c));
    return p;
  };
  /** Applies the time limit; a connection silent since the call was sent is replaced. */
  const limited = <T>(c: RedisClient, p: Promise<T>, what: string, opts?: CallOptions): Promise<T> => {
    const ms = opts?.timeoutMs;
    if (!ms || ms <= 0) return p;
    const sentAt = performance.now();
    return withTimeout(p, ms, what).catch((e: unknown) => {
      if (e instanceof RedisTimeoutError && (lastReply.get(c) ?? Number.NEGATIVE_INFINITY) < sentAt) sup.recycle(c);
      throw e;
    });
  };

  const send = (command: string, args: readonly string[], opts?: CallOptions): Promise<unknown> => {
    if (sup.isStopped) return Promise.reject(closedError());
    const c = sup.client;
    return limited(c, tracked(c, c.send(command, args as string[])), `redis ${command}`, opts);
  };

  const run = (s: ScriptState, keys: readonly string[], args: readonly string[], opts?: CallOptions) => {
    if (sup.isStopped) return Promise.reject(closedError());
    return limited(sup.client, evalsha(s, keys, args), "redis script", opts);
  };

  const evalsha = async (s: ScriptState, keys: readonly string[], args: readonly string[]): Promise<unknown> => {
    const c = sup.client;
    if (s.loadedOn !== c && c.connected) load(s, c);
    const argv = [s.sha, String(keys.length), ...keys, ...args];
    try {
      return await tracked(c, c.send("EVALSHA", argv));
    } catch (e) {
      if (!isNoScript(e)) throw e;
      // Reload (SCRIPT LOAD, for the calls that follow) and retry once with EVAL of the source,
      // pipelined together: the retry runs even if another client flushes the cache in between.
      const c2 = sup.client;
      if (!s.reloading) {
        log.info("redis script missing, reloading", { sha: s.sha });
        s.reloading = load(s, c2).finally(() => {
          s.reloading = undefined;
        });
      }
      return await tracked(c2, c2.send("EVAL", [s.source, ...argv.slice(1)]));
    }
  };

  const redis: Redis = {
    prefix,
    get isConnected() {
      return sup.connected;
    },
    key: (...parts) => [prefix, ...parts].join(":"),
    send,
    script(source) {
      const sha = new Bun.CryptoHasher("sha1").update(source).digest("hex");
      let s = scripts.get(sha);
      if (!s) {
        s = { sha, source, loadedOn: undefined, reloading: undefined };
        scripts.set(sha, s);
        if (sup.connected) load(s, sup.client);
      }
      const state = s;
      return { sha, source, run: (keys, args, opts) => run(state, keys, args, opts) };
    },
    async publish(channel, message) {
      return Number(await send("PUBLISH", [`${prefix}:${channel}`, message]));
    },
    async ping(timeoutMs = 1_000) {
      if (!sup.connected) throw new RedisUnavailableError("redis is not connected");
      const reply = await send("PING", [], { timeoutMs });
      if (reply !== "PONG") throw new RedisUnavailableError(`unexpected PING reply: ${String(reply)}`);
    },
    ready: (timeoutMs = timing.connectTimeoutMs) => sup.ready(timeoutMs),
    subscriber() {
      const sub = createSubscriber(url, prefix, timing, log, () => subscribers.delete(sub));
      subscribers.add(sub);
      return sub;
    },
    async close() {
      for (const s of [...subscribers]) await s.close();
      sup.stop();
    },
  };
  return redis;
}

function createSubscriber(
  url: string,
  prefix: string,
  timing: Required<Omit<RedisConnectOptions, "prefix" | "log">>,
  log: Logger,
  onClosed: () => void,
): RedisSubscriber {
  /** Unprefixed channel -> listeners. One dispatcher per channel is registered with Bun. */
  const listeners = new Map<string, Set<MessageListener>>();
  const dispatchers = new Map<string, (message: string) => void>();
  const dispatcher = (channel: string) => {
    let d = dispatchers.get(channel);
    if (!d) {
      d = (message: string) => {
        for (const l of listeners.get(channel) ?? []) {
          try {
            l(message, channel);
          } catch (e) {
            log.error("redis subscriber listener failed", { channel, error: (e as Error).message });
          }
        }
      };
      dispatchers.set(channel, d);
    }
    return d;
  };
  const full = (channel: string) => `${prefix}:${channel}`;
  const resubscribe = (c: RedisClient) => {
    for (const channel of listeners.keys()) {
      c.subscribe(full(channel), dispatcher(channel)).catch((e: unknown) =>
        log.warn("redis resubscribe failed", { channel, error: (e as Error).message }),
      );
    }
  };
  const sup = new Supervisor(url, timing, log, "subscriber", true, resubscribe);
  return {
    get isConnected() {
      return sup.connected;
    },
    async subscribe(channel, listener) {
      if (sup.isStopped) throw new RedisUnavailableError("redis subscriber is closed");
      let set = listeners.get(channel);
      const first = !set;
      if (!set) {
        set = new Set();
        listeners.set(channel, set);
      }
      set.add(listener);
      // While disconnected the subscription is remembered and made on (re)connect.
      if (first && sup.connected) await sup.client.subscribe(full(channel), dispatcher(channel));
    },
    async unsubscribe(channel, listener) {
      const set = listeners.get(channel);
      if (!set) return;
      if (listener) set.delete(listener);
      else set.clear();
      if (set.size > 0) return;
      listeners.delete(channel);
      const d = dispatchers.get(channel);
      dispatchers.delete(channel);
      if (sup.connected && d) await sup.client.unsubscribe(full(channel), d);
    },
    async close() {
      sup.stop();
      listeners.clear();
      onClosed();
    },
  };
}
