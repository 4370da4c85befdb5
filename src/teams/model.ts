/** Request schemas of the team API and the team shape it answers with. */
import { type Static, Type as T } from "@sinclair/typebox";
import { Identifier, Name, Nullable, Page, PageSize, sharedSettings, Text } from "../http/schemas";
import type { TeamRow } from "../store/schema";

/** Looks a team up by id, whatever its text; an id that cannot exist is simply not found. */
const TeamRef = Text({ minLength: 1, maxLength: 512 });

const teamSettings = { ...sharedSettings, team_alias: T.Optional(Nullable(Name)) };

export const CreateTeam = T.Object(
  { team_id: T.Optional(Identifier), ...teamSettings },
  { additionalProperties: false },
);
export type CreateTeam = Static<typeof CreateTeam>;

export const UpdateTeam = T.Object({ team_id: TeamRef, ...teamSettings }, { additionalProperties: false });
export type UpdateTeam = Static<typeof UpdateTeam>;
export type TeamSettings = Omit<UpdateTeam, "team_id">;

export const TeamTarget = T.Object({ team_id: TeamRef }, { additionalProperties: false });
export type TeamTarget = Static<typeof TeamTarget>;

export const DeleteTeams = T.Object(
  {
    team_ids: T.Array(TeamRef, { minItems: 1, maxItems: 1000 }),
    /** Also delete the teams' keys; without it a team that still has keys is not deleted. */
    force: T.Optional(T.Boolean()),
  },
  { additionalProperties: false },
);
export type DeleteTeams = Static<typeof DeleteTeams>;

export const TeamInfoQuery = T.Object({ team_id: TeamRef });
export const ListTeamsQuery = T.Object({
  page: T.Optional(Page),
  size: T.Optional(PageSize),
  team_alias: T.Optional(Text()),
});
export type ListTeamsQuery = Static<typeof ListTeamsQuery>;

export function teamInfo(row: TeamRow) {
  return {
    team_id: row.team_id,
    team_alias: row.team_alias,
    models: row.models,
    spend: row.spend,
    max_budget: row.max_budget,
    budget_duration: row.budget_duration,
    budget_reset_at: row.budget_reset_at,
    rpm_limit: row.rpm_limit,
    tpm_limit: row.tpm_limit,
    max_parallel_requests: row.max_parallel_requests,
    metadata: row.metadata,
    blocked: row.blocked,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
