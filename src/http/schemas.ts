/** Building blocks shared by the management models. */
import { FormatRegistry, Kind, type StringOptions, Type as T, type TSchema, TypeRegistry } from "@sinclair/typebox";
import { DURATION_PATTERN, isDuration, MAX_DURATION_DAYS } from "../util/duration";

export const Nullable = <S extends TSchema>(schema: S) => T.Union([schema, T.Null()]);

/**
 * Postgres cannot store NUL (U+0000) in text or jsonb, and rejects it even as a query parameter:
 * every string that reaches the database excludes it, so it is a 400 here rather than a failed query.
 */
export const NO_NUL_PATTERN = "^[^\\u0000]*$";
export const Text = (options: StringOptions = {}) => T.String({ pattern: NO_NUL_PATTERN, ...options });

/** USD amounts. */
export const Money = T.Number({ minimum: 0, maximum: 1e12 });
/** Integer limits (rpm, tpm, parallel requests). */
export const Limit = T.Integer({ minimum: 0, maximum: 2_147_483_647 });

// Our own format name: Elysia registers ISO 8601 "duration" in the same global registry.
FormatRegistry.Set("gateway-duration", isDuration);
export const DURATION_DESCRIPTION = `a duration such as 30s, 15m, 12h or 30d, at most ${MAX_DURATION_DAYS}d`;
export const Duration = T.String({
  pattern: DURATION_PATTERN,
  format: "gateway-duration",
  errorMessage: DURATION_DESCRIPTION,
});

export const Name = Text({ minLength: 1, maxLength: 256 });
export const StringList = T.Array(Text({ minLength: 1, maxLength: 256 }), { maxItems: 1000 });
/** An object keyed by (model) names; keys are stored in jsonb, so they exclude NUL too. */
export const NameRecord = <S extends TSchema>(value: S) =>
  T.Record(Text(), value, { additionalProperties: false, errorMessage: "an object" });

/** How deep metadata may nest: deeper values cannot be serialised without exhausting the stack. */
export const MAX_JSON_DEPTH = 32;

/**
 * Why a free-form JSON value cannot be stored, or undefined: a NUL character in any string or
 * object key, or nesting deeper than MAX_JSON_DEPTH. Walks iteratively, so an absurdly deep value
 * (a body of 200,000 nested arrays) is rejected instead of overflowing the stack. `path` is
 * relative to the value, in the notation error messages use (`.a.b[3]`).
 */
export function storedJsonProblem(value: unknown): { path: string; reason: string } | undefined {
  const stack: Array<{ v: unknown; path: string; depth: number }> = [{ v: value, path: "", depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop() as { v: unknown; path: string; depth: number };
    if (typeof v === "string") {
      if (v.includes("\u0000")) return { path, reason: "contains a NUL character (\\u0000), which cannot be stored" };
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    if (depth >= MAX_JSON_DEPTH) return { path, reason: `is nested deeper than ${MAX_JSON_DEPTH} levels` };
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: `${path}[${i}]`, depth: depth + 1 });
      continue;
    }
    for (const [k, child] of Object.entries(v)) {
      if (k.includes("\u0000")) {
        return { path, reason: "has a key with a NUL character (\\u0000), which cannot be stored" };
      }
      stack.push({ v: child, path: `${path}.${k}`, depth: depth + 1 });
    }
  }
  return undefined;
}

/** Schema kind of free-form JSON objects stored as jsonb (metadata). */
export const STORED_JSON_KIND = "StoredJsonObject";
if (!TypeRegistry.Has(STORED_JSON_KIND)) {
  TypeRegistry.Set(
    STORED_JSON_KIND,
    (_schema, value) =>
      typeof value === "object" && value !== null && !Array.isArray(value) && storedJsonProblem(value) === undefined,
  );
}
export const Metadata = T.Unsafe<Record<string, unknown>>({
  [Kind]: STORED_JSON_KIND,
  type: "object",
  errorMessage: "an object",
});

/** Identifiers that end up inside Redis keys and URLs: no braces, spaces or slashes. */
export const Identifier = T.String({
  pattern: "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
  errorMessage: "an identifier of 1-128 letters, digits, '.', '_', ':', '@' or '-'",
});

/** Bounded so that (page - 1) * size stays a valid row offset. */
export const Page = T.Integer({ minimum: 1, maximum: 1_000_000 });
export const PageSize = T.Integer({ minimum: 1, maximum: 100 });

/** Settings keys and teams share: allowed models, budget, rate limits, metadata, blocking. */
export const sharedSettings = {
  models: T.Optional(StringList),
  max_budget: T.Optional(Nullable(Money)),
  budget_duration: T.Optional(Nullable(Duration)),
  rpm_limit: T.Optional(Nullable(Limit)),
  tpm_limit: T.Optional(Nullable(Limit)),
  max_parallel_requests: T.Optional(Nullable(Limit)),
  metadata: T.Optional(Metadata),
  blocked: T.Optional(T.Boolean()),
};
