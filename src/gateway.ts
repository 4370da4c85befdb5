/** Assembles the inference side from configuration: catalog, provider adapters, router, spend ledger. */
import { ALERT_DEFAULTS, AlertDispatcher, type WebhookTarget } from "./alerts/webhooks";
import { buildCatalog, type Catalog, loadCatalogFile } from "./catalog/catalog";
import type { ModelConfig, ProviderConfig, RouterConfig } from "./config/file";
import { createLimiter, LIMITER_DEFAULTS, type Limiter } from "./limits";
import { type RedisFailureMode, ResilientLimiter } from "./limits/resilient";
import type { Logger } from "./log";
import { createImageFetcher, IMAGE_FETCH_DEFAULTS, type ImageFetcher, type ImageFetchPolicy } from "./providers/images";
import { createAdapters } from "./providers/registry";
import type { ProviderAdapter } from "./providers/types";
import type { Redis } from "./redis/client";
import { ROUTER_DEFAULTS, Router } from "./routing/router";
import { LEDGER_DEFAULTS, type LedgerOptions, SpendLedger } from "./spend/ledger";
import { RedisSpill } from "./spend/spill";
import type { Db } from "./store/db";

export interface InferenceConfig {
  providers: Record<string, ProviderConfig>;
  models: ModelConfig[];
  router: RouterConfig;
  includeDefaultCatalog: boolean;
  imageFetch?: ImageFetchPolicy;
  /** Limits: what to do when Redis is unreachable, reservations, lease length. */
  redisFailure?: RedisFailureMode;
  defaultOutputTokens?: number;
  leaseMs?: number;
  /** Limiter calls to Redis unanswered this long count as Redis unreachable (default 1000). */
  redisCommandTimeoutMs?: number;
  alerts?: { webhooks: WebhookTarget[]; maxAttempts: number };
}

export interface InferenceParts {
  catalog: Catalog;
  adapters: Map<string, ProviderAdapter>;
  router: Router;
  ledger: SpendLedger;
  heartbeatMs: number;
  fetchImage: ImageFetcher;
  limiter: Limiter;
  alerts: AlertDispatcher;
  defaultOutputTokens: number;
}

export const DEFAULT_HEARTBEAT_SECONDS = 15;

export function buildInference(
  cfg: InferenceConfig,
  db: Db,
  log: Logger,
  opts: {
    ledger?: LedgerOptions;
    sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
    /** Shared Redis: limits across instances and the ledger's overflow. */
    redis?: Redis;
    /** Memory limiter clock (tests). */
    now?: () => number;
    /** The router's clock: cooldowns and deployments' rpm/tpm minutes (tests). */
    routerNow?: () => number;
  } = {},
): InferenceParts {
  const adapters = createAdapters(cfg.providers);
  const catalog = buildCatalog(cfg.providers, cfg.models, cfg.includeDefaultCatalog ? loadCatalogFile() : []);
  const r = cfg.router;
  const router = new Router(
    (name) => catalog.resolve(name),
    {
      numRetries: r.num_retries ?? ROUTER_DEFAULTS.numRetries,
      backoffMs: r.retry_backoff_ms ?? ROUTER_DEFAULTS.backoffMs,
      maxRetryWaitMs: r.max_retry_wait_ms ?? ROUTER_DEFAULTS.maxRetryWaitMs,
      allowedFails: r.allowed_fails ?? ROUTER_DEFAULTS.allowedFails,
      cooldownMs: r.cooldown_seconds !== undefined ? r.cooldown_seconds * 1000 : ROUTER_DEFAULTS.cooldownMs,
      timeoutMs: r.timeout_seconds !== undefined ? r.timeout_seconds * 1000 : ROUTER_DEFAULTS.timeoutMs,
      ...(r.stream_idle_timeout_seconds !== undefined
        ? { streamIdleTimeoutMs: r.stream_idle_timeout_seconds * 1000 }
        : {}),
    },
    log,
    opts.routerNow ?? Date.now,
    Math.random,
    ...(opts.sleep ? [opts.sleep] : []),
  );
  const leaseMs = cfg.leaseMs ?? LIMITER_DEFAULTS.leaseMs;
  const local = createLimiter({ leaseMs, log, ...(opts.now ? { now: opts.now } : {}) });
  const limiter = opts.redis
    ? new ResilientLimiter(
        createLimiter({
          redis: opts.redis,
          leaseMs,
          log,
          commandTimeoutMs: cfg.redisCommandTimeoutMs ?? LIMITER_DEFAULTS.commandTimeoutMs,
        }),
        local,
        cfg.redisFailure ?? "fail_open",
        log,
      )
    : local;
  const ledgerOptions = opts.ledger ?? LEDGER_DEFAULTS;
  return {
    catalog,
    adapters,
    router,
    limiter,
    alerts: new AlertDispatcher(cfg.alerts?.webhooks ?? [], log, {
      ...ALERT_DEFAULTS,
      maxAttempts: cfg.alerts?.maxAttempts ?? ALERT_DEFAULTS.maxAttempts,
    }),
    defaultOutputTokens: cfg.defaultOutputTokens ?? 1024,
    ledger: new SpendLedger(
      db,
      log,
      opts.redis ? { ...ledgerOptions, spill: new RedisSpill(opts.redis) } : ledgerOptions,
    ),
    heartbeatMs: (r.stream_heartbeat_seconds ?? DEFAULT_HEARTBEAT_SECONDS) * 1000,
    fetchImage: createImageFetcher(cfg.imageFetch ?? IMAGE_FETCH_DEFAULTS),
  };
}
