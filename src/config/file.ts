/**
 * The optional YAML config file (GATEWAY_CONFIG). `${VAR}` and `${VAR:-default}` in string values
 * are read from the environment. Unknown fields are errors, so a typo never silently does nothing.
 */
import { readFileSync } from "node:fs";
import { type Static, Type as T } from "@sinclair/typebox";
import { parse as parseYaml } from "yaml";
import { catalogFields, ModelName } from "../catalog/model";
import { GatewayError } from "../http/errors";
import { validator } from "../http/validate";
import { PROVIDER_TYPES } from "../providers/types";
import { ConfigError } from "./error";

const PositiveInt = (max?: number) => T.Integer({ minimum: 1, ...(max ? { maximum: max } : {}) });
const Seconds = T.Number({ exclusiveMinimum: 0, maximum: 86_400, errorMessage: "a number of seconds > 0" });
const Headers = T.Record(T.String(), T.String(), { errorMessage: "an object of header names to string values" });

export const ProviderConfig = T.Object(
  {
    /** Which adapter speaks to this provider. */
    type: T.Union(
      PROVIDER_TYPES.map((p) => T.Literal(p)),
      { errorMessage: `one of ${PROVIDER_TYPES.join(", ")}` },
    ),
    /** Base URL; every provider's can be overridden (tests, proxies, regional endpoints). */
    api_base: T.Optional(T.String({ minLength: 1 })),
    api_key: T.Optional(T.String()),
    /** Extra headers sent upstream on every call. */
    headers: T.Optional(Headers),
    timeout_seconds: T.Optional(Seconds),
    stream_idle_timeout_seconds: T.Optional(Seconds),
    /** azure: the api-version query parameter ("v1" selects the v1 API with the model in the body). */
    api_version: T.Optional(T.String({ minLength: 1 })),
    /** anthropic: the anthropic-version header. */
    anthropic_version: T.Optional(T.String({ minLength: 1 })),
    /** openai-compatible: which field carries the output cap (default max_tokens). */
    max_tokens_field: T.Optional(T.Union([T.Literal("max_tokens"), T.Literal("max_completion_tokens")])),
    /** vertex: Google Cloud project and region. */
    project: T.Optional(T.String({ minLength: 1 })),
    location: T.Optional(T.String({ minLength: 1 })),
    /** vertex: a service-account JSON key, inline or as a file path. */
    credentials: T.Optional(T.String({ minLength: 1 })),
    /** bedrock: AWS region and credentials. */
    region: T.Optional(T.String({ minLength: 1 })),
    access_key_id: T.Optional(T.String({ minLength: 1 })),
    secret_access_key: T.Optional(T.String({ minLength: 1 })),
    session_token: T.Optional(T.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);
export type ProviderConfig = Static<typeof ProviderConfig>;

export const DeploymentConfig = T.Object(
  {
    /** A configured provider name. */
    provider: T.String({ minLength: 1 }),
    /** The model id upstream (Azure: the deployment name). */
    model: T.String({ minLength: 1 }),
    weight: T.Optional(T.Number({ exclusiveMinimum: 0, errorMessage: "a number > 0" })),
    api_base: T.Optional(T.String({ minLength: 1 })),
    api_key: T.Optional(T.String()),
    headers: T.Optional(Headers),
    timeout_seconds: T.Optional(Seconds),
    stream_idle_timeout_seconds: T.Optional(Seconds),
    /** Requests and tokens per minute this deployment may take (per gateway instance). */
    rpm: T.Optional(PositiveInt()),
    tpm: T.Optional(PositiveInt()),
  },
  { additionalProperties: false },
);
export type DeploymentConfig = Static<typeof DeploymentConfig>;

export const ModelConfig = T.Object(
  {
    ...catalogFields,
    /** Upstream model id when it differs from the part after the slash (single deployment). */
    model: T.Optional(T.String({ minLength: 1 })),
    deployments: T.Optional(T.Array(DeploymentConfig, { minItems: 1 })),
    /** Models tried in order when every deployment of this one failed. */
    fallbacks: T.Optional(T.Array(ModelName)),
    timeout_seconds: T.Optional(Seconds),
    stream_idle_timeout_seconds: T.Optional(Seconds),
    max_retries: T.Optional(T.Integer({ minimum: 0, maximum: 10 })),
  },
  { additionalProperties: false },
);
export type ModelConfig = Static<typeof ModelConfig>;

export const RouterConfig = T.Object(
  {
    /** Retries per model after the first attempt (on 429, 5xx, timeouts, connection errors). */
    num_retries: T.Optional(T.Integer({ minimum: 0, maximum: 10 })),
    /** First backoff; doubles per retry, with jitter. */
    retry_backoff_ms: T.Optional(T.Integer({ minimum: 0, maximum: 60_000 })),
    /** A retry that would have to wait longer than this (e.g. a long retry-after) is not made. */
    max_retry_wait_ms: T.Optional(T.Integer({ minimum: 0, maximum: 600_000 })),
    /** Consecutive failures after which a deployment is cooled down (a 429 cools it at once). */
    allowed_fails: T.Optional(PositiveInt(100)),
    cooldown_seconds: T.Optional(T.Number({ minimum: 0, maximum: 86_400 })),
    /** Upstream timeout until the response (a stream: its headers) arrives. */
    timeout_seconds: T.Optional(Seconds),
    /** A started stream whose upstream sends nothing for this long is ended with a 504 (default: timeout_seconds). */
    stream_idle_timeout_seconds: T.Optional(Seconds),
    /** Keep-alive comment on a silent stream after this many seconds. */
    stream_heartbeat_seconds: T.Optional(Seconds),
  },
  { additionalProperties: false },
);
export type RouterConfig = Static<typeof RouterConfig>;

export const FileConfig = T.Object(
  {
    server: T.Optional(
      T.Object(
        {
          /** Largest accepted request body, in bytes. */
          max_body_bytes: T.Optional(PositiveInt()),
          /** How long SIGTERM waits for in-flight requests before closing them. */
          shutdown_timeout_seconds: T.Optional(PositiveInt(3600)),
        },
        { additionalProperties: false },
      ),
    ),
    providers: T.Optional(
      T.Record(T.String({ pattern: "^[A-Za-z0-9][A-Za-z0-9._-]*$" }), ProviderConfig, {
        errorMessage: "an object of provider names (letters, digits, '.', '_', '-') to provider settings",
      }),
    ),
    models: T.Optional(T.Array(ModelConfig)),
    router: T.Optional(RouterConfig),
    image_fetch: T.Optional(
      T.Object(
        {
          /** Let image URLs resolve to private, loopback or link-local addresses (default false). */
          allow_private_networks: T.Optional(T.Boolean()),
          max_bytes: T.Optional(PositiveInt()),
          timeout_seconds: T.Optional(Seconds),
        },
        { additionalProperties: false },
      ),
    ),
    limits: T.Optional(
      T.Object(
        {
          /** With Redis unreachable: serve and enforce per instance (fail_open), or answer 503 (fail_closed). */
          redis_failure: T.Optional(T.Union([T.Literal("fail_open"), T.Literal("fail_closed")])),
          /** Output tokens reserved for tpm and budgets when a request sets no cap (default 1024). */
          default_output_tokens: T.Optional(PositiveInt(1_000_000)),
          /** A parallel slot held by an instance that died is freed after this long (default 120). */
          lease_seconds: T.Optional(PositiveInt(86_400)),
        },
        { additionalProperties: false },
      ),
    ),
    redis: T.Optional(
      T.Object(
        {
          /** Prefix of every Redis key and channel the gateway uses (default "gw"). */
          key_prefix: T.Optional(T.String({ pattern: "^[A-Za-z0-9_.:-]{1,64}$" })),
          /** Limiter calls (admission, settlement, lease renewal) unanswered this long count as Redis unreachable (default 1000). */
          command_timeout_ms: T.Optional(PositiveInt(60_000)),
        },
        { additionalProperties: false },
      ),
    ),
    alerts: T.Optional(
      T.Object(
        {
          webhooks: T.Optional(
            T.Array(
              T.Object(
                {
                  url: T.String({ pattern: "^https?://", errorMessage: "an http(s) URL" }),
                  /** Signs each delivery: x-gateway-signature = sha256 HMAC of "<timestamp>.<body>". */
                  secret: T.Optional(T.String({ minLength: 1 })),
                  headers: T.Optional(Headers),
                },
                { additionalProperties: false },
              ),
            ),
          ),
          max_attempts: T.Optional(PositiveInt(20)),
        },
        { additionalProperties: false },
      ),
    ),
    responses: T.Optional(
      T.Object(
        {
          /** How long responses produced by /v1/responses stay usable as previous_response_id (default 30). */
          retention_days: T.Optional(T.Number({ exclusiveMinimum: 0, maximum: 3650 })),
        },
        { additionalProperties: false },
      ),
    ),
    catalog: T.Optional(
      T.Object(
        {
          /** Serve the shipped default catalog's models for every configured provider (default true). */
          include_defaults: T.Optional(T.Boolean()),
        },
        { additionalProperties: false },
      ),
    ),
    auth: T.Optional(
      T.Object(
        {
          /** How long a key record stays cached on an instance without being re-read. */
          key_cache_ttl_seconds: T.Optional(T.Integer({ minimum: 0, maximum: 86_400 })),
          key_cache_max_entries: T.Optional(PositiveInt()),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type FileConfig = Static<typeof FileConfig>;

const checkFileConfig = validator(FileConfig, "config file");

export function loadConfigFile(path: string, env: Record<string, string | undefined>): FileConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new ConfigError(`GATEWAY_CONFIG: cannot read ${path}: ${(e as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text) ?? {};
  } catch (e) {
    throw new ConfigError(`GATEWAY_CONFIG: ${path} is not valid YAML: ${(e as Error).message}`);
  }
  const expanded = expandEnv(raw, env, "");
  try {
    return checkFileConfig(expanded);
  } catch (e) {
    if (e instanceof GatewayError) throw new ConfigError(`GATEWAY_CONFIG (${path}): ${e.message}`);
    throw e;
  }
}

const WHOLE_VAR_RE = /^\$\{[^}]+\}$/;
const VAR_RE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** Replaces `${VAR}` / `${VAR:-default}` in every string value; a missing variable names its field. */
export function expandEnv(value: unknown, env: Record<string, string | undefined>, path: string): unknown {
  if (typeof value === "string") {
    const expanded = value.replace(VAR_RE, (_, name: string, fallback: string | undefined) => {
      const v = env[name];
      if (v !== undefined && v !== "") return v;
      if (fallback !== undefined) return fallback;
      throw new ConfigError(`GATEWAY_CONFIG: field '${path || "(root)"}' uses \${${name}}, which is not set`);
    });
    // A value that is exactly one variable takes the variable's YAML type: `${PORT}` can be a number.
    if (expanded !== value && WHOLE_VAR_RE.test(value)) {
      const scalar: unknown = parseYaml(expanded);
      if (typeof scalar === "number" || typeof scalar === "boolean") return scalar;
    }
    return expanded;
  }
  if (Array.isArray(value)) return value.map((v, i) => expandEnv(v, env, `${path}[${i}]`));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = expandEnv(v, env, path ? `${path}.${k}` : k);
    return out;
  }
  return value;
}
