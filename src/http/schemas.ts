/** Building blocks shared by the management models. */
import { Type as T, type TSchema } from "@sinclair/typebox";
import { DURATION_PATTERN } from "../util/duration";

export const Nullable = <S extends TSchema>(schema: S) => T.Union([schema, T.Null()]);

/** USD amounts. */
export const Money = T.Number({ minimum: 0, maximum: 1e12 });
/** Integer limits (rpm, tpm, parallel requests). */
export const Limit = T.Integer({ minimum: 0, maximum: 2_147_483_647 });
export const Duration = T.String({
  pattern: DURATION_PATTERN,
  errorMessage: "a duration such as 30s, 15m, 12h or 30d",
});
export const Name = T.String({ minLength: 1, maxLength: 256 });
export const StringList = T.Array(T.String({ minLength: 1, maxLength: 256 }), { maxItems: 1000 });
export const Metadata = T.Record(T.String(), T.Unknown(), { errorMessage: "an object" });

/** Identifiers that end up inside Redis keys and URLs: no braces, spaces or slashes. */
export const Identifier = T.String({
  pattern: "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
  errorMessage: "an identifier of 1-128 letters, digits, '.', '_', ':', '@' or '-'",
});

export const Page = T.Integer({ minimum: 1 });
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
