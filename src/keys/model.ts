/** Request schemas of the key-management API and the key info shape it answers with. */
import { type Static, Type as T } from "@sinclair/typebox";
import {
  DURATION_DESCRIPTION,
  Duration,
  Identifier,
  Limit,
  Money,
  Name,
  NameRecord,
  Nullable,
  Page,
  PageSize,
  StringList,
  sharedSettings,
  Text,
} from "../http/schemas";
import type { KeyRow, TeamRow } from "../store/schema";
import { teamInfo } from "../teams/model";

export const KeyType = T.Union([T.Literal("llm_api"), T.Literal("management")], {
  errorMessage: "'llm_api' or 'management'",
});

/** `duration`: key validity, or "-1" (or null) for a key that never expires. */
export const KeyDuration = T.Union([Duration, T.Literal("-1")], {
  errorMessage: `${DURATION_DESCRIPTION}, or "-1" for no expiry`,
});

export const ModelMaxBudget = T.Object({ budget_limit: Money, time_period: Duration }, { additionalProperties: false });

/** Every setting that create, update and regenerate accept. */
const keySettings = {
  ...sharedSettings,
  key_alias: T.Optional(Nullable(Name)),
  soft_budget: T.Optional(Nullable(Money)),
  duration: T.Optional(Nullable(KeyDuration)),
  model_max_budget: T.Optional(NameRecord(ModelMaxBudget)),
  model_rpm_limit: T.Optional(NameRecord(Limit)),
  model_tpm_limit: T.Optional(NameRecord(Limit)),
  tags: T.Optional(StringList),
};

export const CreateKey = T.Object(
  {
    team_id: Identifier,
    key_type: T.Optional(KeyType),
    user_id: T.Optional(Nullable(Name)),
    ...keySettings,
  },
  { additionalProperties: false },
);
export type CreateKey = Static<typeof CreateKey>;

/** `key` names the key: its secret, its token_id or its key_hash. */
export const KeyRef = Text({ minLength: 1, maxLength: 512 });

export const UpdateKey = T.Object({ key: KeyRef, ...keySettings }, { additionalProperties: false });
export type UpdateKey = Static<typeof UpdateKey>;
export type KeySettings = Omit<UpdateKey, "key">;

export const RegenerateKey = UpdateKey;
export type RegenerateKey = UpdateKey;

export const KeyTarget = T.Object({ key: KeyRef }, { additionalProperties: false });
export type KeyTarget = Static<typeof KeyTarget>;

export const DeleteKeys = T.Object(
  {
    keys: T.Optional(T.Array(KeyRef, { minItems: 1, maxItems: 1000 })),
    key_aliases: T.Optional(T.Array(Name, { minItems: 1, maxItems: 1000 })),
  },
  { additionalProperties: false },
);
export type DeleteKeys = Static<typeof DeleteKeys>;

export const KeyInfoQuery = T.Object({ key: T.Optional(KeyRef) });
export type KeyInfoQuery = Static<typeof KeyInfoQuery>;

export const ListKeysQuery = T.Object({
  page: T.Optional(Page),
  size: T.Optional(PageSize),
  team_id: T.Optional(Text()),
  user_id: T.Optional(Text()),
  key_hash: T.Optional(Text()),
  key_alias: T.Optional(Text()),
  expand: T.Optional(T.Literal("team", { errorMessage: "'team'" })),
});
export type ListKeysQuery = Static<typeof ListKeysQuery>;

/** Everything stored about a key, as /key/info and friends show it. Never the secret. */
export function keyInfo(row: KeyRow, now: number = Date.now()) {
  return {
    token_id: row.token_id,
    key_name: row.key_name,
    key_alias: row.key_alias,
    key_hash: row.key_hash,
    key_type: row.key_type,
    team_id: row.team_id,
    user_id: row.user_id,
    models: row.models,
    spend: row.spend,
    max_budget: row.max_budget,
    soft_budget: row.soft_budget,
    budget_duration: row.budget_duration,
    budget_reset_at: row.budget_reset_at,
    expires: row.expires,
    expired: row.expires !== null && row.expires.getTime() <= now,
    rpm_limit: row.rpm_limit,
    tpm_limit: row.tpm_limit,
    max_parallel_requests: row.max_parallel_requests,
    model_max_budget: row.model_max_budget,
    model_rpm_limit: row.model_rpm_limit,
    model_tpm_limit: row.model_tpm_limit,
    metadata: row.metadata,
    tags: row.tags,
    blocked: row.blocked,
    created_by: row.created_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
export type KeyInfo = ReturnType<typeof keyInfo>;

export function keyInfoWithTeam(row: KeyRow, team: TeamRow | undefined, now: number) {
  return { ...keyInfo(row, now), team: team ? teamInfo(team) : null };
}
