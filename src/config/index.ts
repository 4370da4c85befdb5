/** Everything the gateway reads at start, from the environment and the optional YAML file. */
import { resolve } from "node:path";
import type { WebhookTarget } from "../alerts/webhooks";
import type { LogLevel } from "../log";
import { IMAGE_FETCH_DEFAULTS, type ImageFetchPolicy } from "../providers/images";
import type { DatabaseTarget } from "../store/db";
import { ConfigError } from "./error";
import { type FileConfig, loadConfigFile, type ModelConfig, type ProviderConfig, type RouterConfig } from "./file";

export { ConfigError } from "./error";

export interface Config {
  port: number;
  host: string;
  /** GATEWAY_MASTER_KEY; when absent one is generated on first start. */
  masterKey: string | undefined;
  database: DatabaseTarget;
  redisUrl: string | undefined;
  configPath: string | undefined;
  logLevel: LogLevel;
  maxBodyBytes: number;
  shutdownTimeoutMs: number;
  keyCacheTtlMs: number;
  keyCacheMaxEntries: number;
  providers: Record<string, ProviderConfig>;
  models: ModelConfig[];
  router: RouterConfig;
  /** Serve the shipped catalog's models for configured providers. */
  includeDefaultCatalog: boolean;
  imageFetch: ImageFetchPolicy;
  responsesRetentionMs: number;
  redisFailure: "fail_open" | "fail_closed";
  redisPrefix: string;
  /** Limiter calls to Redis unanswered this long count as Redis unreachable. */
  redisCommandTimeoutMs: number;
  defaultOutputTokens: number;
  leaseMs: number;
  alerts: { webhooks: WebhookTarget[]; maxAttempts: number };
}

export const DEFAULTS = {
  port: 4000,
  host: "0.0.0.0",
  dataDir: "./.data",
  logLevel: "info" as LogLevel,
  maxBodyBytes: 32 * 1024 * 1024,
  shutdownTimeoutSeconds: 30,
  keyCacheTtlSeconds: 30,
  keyCacheMaxEntries: 100_000,
  responsesRetentionDays: 30,
  defaultOutputTokens: 1024,
  leaseSeconds: 120,
  redisCommandTimeoutMs: 1000,
};

const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const value = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === "" ? undefined : v.trim();
  };
  const fail = (name: string, expected: string, got: string): never => {
    throw new ConfigError(`Invalid environment variable ${name}: expected ${expected}, got '${got}'`);
  };

  const portRaw = value("PORT");
  let port = DEFAULTS.port;
  if (portRaw !== undefined) {
    port = Number(portRaw);
    if (!/^\d+$/.test(portRaw) || port < 0 || port > 65535) fail("PORT", "an integer from 0 to 65535", portRaw);
  }

  const masterKey = value("GATEWAY_MASTER_KEY");
  if (masterKey !== undefined && (masterKey.length < 8 || /\s/.test(masterKey))) {
    throw new ConfigError(
      "Invalid environment variable GATEWAY_MASTER_KEY: expected at least 8 characters without spaces",
    );
  }

  const databaseUrl = value("DATABASE_URL");
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\/.+/.test(databaseUrl)) {
    throw new ConfigError("Invalid environment variable DATABASE_URL: expected a postgres:// or postgresql:// URL");
  }
  const database: DatabaseTarget = databaseUrl
    ? { url: databaseUrl }
    : { dataDir: resolve(value("GATEWAY_DATA_DIR") ?? DEFAULTS.dataDir) };

  const redisUrl = value("REDIS_URL");
  if (redisUrl !== undefined && !/^rediss?:\/\/.+/.test(redisUrl)) {
    throw new ConfigError("Invalid environment variable REDIS_URL: expected a redis:// or rediss:// URL");
  }

  const logLevelRaw = value("GATEWAY_LOG_LEVEL") ?? DEFAULTS.logLevel;
  if (!LOG_LEVELS.includes(logLevelRaw as LogLevel)) {
    fail("GATEWAY_LOG_LEVEL", LOG_LEVELS.join(", "), logLevelRaw);
  }

  const configPath = value("GATEWAY_CONFIG");
  const file: FileConfig = configPath ? loadConfigFile(configPath, env) : {};

  return {
    port,
    host: value("GATEWAY_HOST") ?? DEFAULTS.host,
    masterKey,
    database,
    redisUrl,
    configPath,
    logLevel: logLevelRaw as LogLevel,
    maxBodyBytes: file.server?.max_body_bytes ?? DEFAULTS.maxBodyBytes,
    shutdownTimeoutMs: (file.server?.shutdown_timeout_seconds ?? DEFAULTS.shutdownTimeoutSeconds) * 1000,
    keyCacheTtlMs: (file.auth?.key_cache_ttl_seconds ?? DEFAULTS.keyCacheTtlSeconds) * 1000,
    keyCacheMaxEntries: file.auth?.key_cache_max_entries ?? DEFAULTS.keyCacheMaxEntries,
    providers: file.providers ?? {},
    models: file.models ?? [],
    router: file.router ?? {},
    includeDefaultCatalog: file.catalog?.include_defaults ?? true,
    responsesRetentionMs: (file.responses?.retention_days ?? DEFAULTS.responsesRetentionDays) * 86_400_000,
    redisFailure: file.limits?.redis_failure ?? "fail_open",
    redisPrefix: file.redis?.key_prefix ?? "gw",
    redisCommandTimeoutMs: file.redis?.command_timeout_ms ?? DEFAULTS.redisCommandTimeoutMs,
    defaultOutputTokens: file.limits?.default_output_tokens ?? DEFAULTS.defaultOutputTokens,
    leaseMs: (file.limits?.lease_seconds ?? DEFAULTS.leaseSeconds) * 1000,
    alerts: { webhooks: file.alerts?.webhooks ?? [], maxAttempts: file.alerts?.max_attempts ?? 5 },
    imageFetch: {
      allowPrivateNetworks: file.image_fetch?.allow_private_networks ?? IMAGE_FETCH_DEFAULTS.allowPrivateNetworks,
      maxBytes: file.image_fetch?.max_bytes ?? IMAGE_FETCH_DEFAULTS.maxBytes,
      timeoutMs:
        file.image_fetch?.timeout_seconds !== undefined
          ? file.image_fetch.timeout_seconds * 1000
          : IMAGE_FETCH_DEFAULTS.timeoutMs,
    },
  };
}
