/** Query schemas of the spend endpoints. */
import { type Static, Type as T } from "@sinclair/typebox";

const Time = T.String({ format: "date-time", errorMessage: "an ISO 8601 date-time such as 2026-11-01T00:00:00Z" });

const filters = {
  /** A key by secret, token_id or key_hash. */
  key: T.Optional(T.String({ minLength: 1 })),
  team_id: T.Optional(T.String({ minLength: 1 })),
  model: T.Optional(T.String({ minLength: 1 })),
  tag: T.Optional(T.String({ minLength: 1 })),
  start_time: T.Optional(Time),
  end_time: T.Optional(Time),
};

export const SpendLogsQuery = T.Object({
  ...filters,
  limit: T.Optional(T.Integer({ minimum: 1, maximum: 1000 })),
  /** From `next_cursor` of the previous page. */
  cursor: T.Optional(T.String({ minLength: 1 })),
});
export type SpendLogsQuery = Static<typeof SpendLogsQuery>;

export const SpendReportQuery = T.Object({
  ...filters,
  group_by: T.Union([T.Literal("key"), T.Literal("team"), T.Literal("model"), T.Literal("tag")], {
    errorMessage: "'key', 'team', 'model' or 'tag'",
  }),
});
export type SpendReportQuery = Static<typeof SpendReportQuery>;
