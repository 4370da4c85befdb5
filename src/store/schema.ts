/**
 * The durable state, one drizzle schema for Postgres and embedded PGlite alike.
 * Column names are the API's field names, so records map onto responses without renaming.
 */
import { sql } from "drizzle-orm";
import {
  boolean,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";

export type ModelBudget = { budget_limit: number; time_period: string };
export type Metadata = Record<string, unknown>;

const timestamps = {
  created_at: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  updated_at: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
};

export const teams = pgTable("teams", {
  team_id: text("team_id").primaryKey(),
  team_alias: text("team_alias"),
  models: jsonb("models").$type<string[]>().notNull().default(sql`'[]'::jsonb`),
  spend: doublePrecision("spend").notNull().default(0),
  max_budget: doublePrecision("max_budget"),
  budget_duration: text("budget_duration"),
  budget_reset_at: timestamp("budget_reset_at", { withTimezone: true, mode: "date" }),
  rpm_limit: integer("rpm_limit"),
  tpm_limit: integer("tpm_limit"),
  max_parallel_requests: integer("max_parallel_requests"),
  metadata: jsonb("metadata").$type<Metadata>().notNull().default(sql`'{}'::jsonb`),
  blocked: boolean("blocked").notNull().default(false),
  ...timestamps,
});

export const apiKeys = pgTable(
  "api_keys",
  {
    /** Stable identity of the key record; survives regeneration; never a credential. */
    token_id: text("token_id").primaryKey(),
    /** SHA-256 (hex) of the secret. The secret itself is never stored. */
    key_hash: text("key_hash").notNull(),
    /** Masked secret: `sk-...` and the last four characters. */
    key_name: text("key_name").notNull(),
    key_alias: text("key_alias"),
    key_type: text("key_type").$type<"llm_api" | "management">().notNull().default("llm_api"),
    team_id: text("team_id")
      .notNull()
      .references(() => teams.team_id, { onDelete: "restrict" }),
    user_id: text("user_id"),
    models: jsonb("models").$type<string[]>().notNull().default(sql`'[]'::jsonb`),
    spend: doublePrecision("spend").notNull().default(0),
    max_budget: doublePrecision("max_budget"),
    soft_budget: doublePrecision("soft_budget"),
    budget_duration: text("budget_duration"),
    budget_reset_at: timestamp("budget_reset_at", { withTimezone: true, mode: "date" }),
    expires: timestamp("expires", { withTimezone: true, mode: "date" }),
    rpm_limit: integer("rpm_limit"),
    tpm_limit: integer("tpm_limit"),
    max_parallel_requests: integer("max_parallel_requests"),
    model_max_budget: jsonb("model_max_budget")
      .$type<Record<string, ModelBudget>>()
      .notNull()
      .default(sql`'{}'::jsonb`),
    model_rpm_limit: jsonb("model_rpm_limit").$type<Record<string, number>>().notNull().default(sql`'{}'::jsonb`),
    model_tpm_limit: jsonb("model_tpm_limit").$type<Record<string, number>>().notNull().default(sql`'{}'::jsonb`),
    metadata: jsonb("metadata").$type<Metadata>().notNull().default(sql`'{}'::jsonb`),
    tags: jsonb("tags").$type<string[]>().notNull().default(sql`'[]'::jsonb`),
    blocked: boolean("blocked").notNull().default(false),
    /** `master` or the token_id of the management key that created it. */
    created_by: text("created_by"),
    ...timestamps,
  },
  (t) => [
    uniqueIndex("api_keys_key_hash_idx").on(t.key_hash),
    uniqueIndex("api_keys_key_alias_idx").on(t.key_alias),
    index("api_keys_team_created_idx").on(t.team_id, t.created_at),
    index("api_keys_user_idx").on(t.user_id),
    index("api_keys_created_idx").on(t.created_at),
  ],
);

/** One row per inference request after authentication: who, what, how many tokens, what it cost. */
export const requestLogs = pgTable(
  "request_logs",
  {
    /** Minted by the gateway; writes are idempotent on it. */
    request_id: text("request_id").primaryKey(),
    created_at: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull(),
    endpoint: text("endpoint").notNull(),
    token_id: text("token_id"),
    key_hash: text("key_hash"),
    team_id: text("team_id"),
    /** The public model name that served the request (a fallback's, when one was used). */
    model: text("model").notNull(),
    requested_model: text("requested_model").notNull(),
    provider: text("provider"),
    deployment: text("deployment"),
    upstream_model: text("upstream_model"),
    stream: boolean("stream").notNull().default(false),
    status: integer("status").notNull(),
    error_code: text("error_code"),
    input_tokens: integer("input_tokens").notNull().default(0),
    cache_read_tokens: integer("cache_read_tokens").notNull().default(0),
    cache_write_tokens: integer("cache_write_tokens").notNull().default(0),
    output_tokens: integer("output_tokens").notNull().default(0),
    reasoning_tokens: integer("reasoning_tokens").notNull().default(0),
    /** True when some tokens were counted by the gateway's own estimate (e.g. an aborted stream). */
    usage_estimated: boolean("usage_estimated").notNull().default(false),
    cost: doublePrecision("cost").notNull().default(0),
    cost_estimated: boolean("cost_estimated").notNull().default(false),
    latency_ms: integer("latency_ms"),
    ttft_ms: integer("ttft_ms"),
    attempts: integer("attempts").notNull().default(1),
    tags: jsonb("tags").$type<string[]>().notNull().default(sql`'[]'::jsonb`),
  },
  (t) => [
    index("request_logs_created_idx").on(t.created_at),
    index("request_logs_token_created_idx").on(t.token_id, t.created_at),
    index("request_logs_team_created_idx").on(t.team_id, t.created_at),
    index("request_logs_model_created_idx").on(t.model, t.created_at),
    // `tags @> '["x"]'` (spend queries by tag)
    index("request_logs_tags_idx").using("gin", t.tags.op("jsonb_path_ops")),
  ],
);

/** Small named values the gateway keeps for itself (the generated master key's hash). */
export const gatewaySettings = pgTable("gateway_settings", {
  name: text("name").primaryKey(),
  value: text("value").notNull(),
  updated_at: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

export type TeamRow = typeof teams.$inferSelect;
export type KeyRow = typeof apiKeys.$inferSelect;
export type RequestLogRow = typeof requestLogs.$inferSelect;
export type NewRequestLog = typeof requestLogs.$inferInsert;

/**
 * Responses produced on /v1/responses for models the gateway translates, kept for
 * `previous_response_id` and GET /v1/responses/{id} until `expires_at` (responses.retention_days).
 * Scoped to the key that created them (`token_id`; null for the master key). Looked up by id (the
 * primary key); expired rows are pruned by `expires_at`.
 */
export const storedResponses = pgTable(
  "responses",
  {
    /** `resp_gw…`, minted by the gateway. */
    id: text("id").primaryKey(),
    token_id: text("token_id"),
    /** The public model name that produced it. */
    model: text("model").notNull(),
    request_id: text("request_id"),
    created_at: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull(),
    expires_at: timestamp("expires_at", { withTimezone: true, mode: "date" }).notNull(),
    /** The conversation items up to this response (earlier turns expanded), without `instructions`. */
    input: jsonb("input").$type<unknown[]>().notNull(),
    /** The response object as returned (its `output` items are the turn's answer). */
    response: jsonb("response").$type<Record<string, unknown>>().notNull(),
  },
  (t) => [index("responses_expires_idx").on(t.expires_at)],
);

export type StoredResponseRow = typeof storedResponses.$inferSelect;
