import { Elysia } from "elysia";
import type { AuthPlugin } from "../http/auth";
import { queryValidator, validator } from "../http/validate";
import { CreateTeam, DeleteTeams, ListTeamsQuery, TeamInfoQuery, TeamTarget, teamInfo, UpdateTeam } from "./model";
import { createTeam, deleteTeams, describeTeam, listTeams, setTeamBlocked, type TeamDeps, updateTeam } from "./service";

const parseCreate = validator(CreateTeam);
const parseUpdate = validator(UpdateTeam);
const parseTarget = validator(TeamTarget);
const parseDelete = validator(DeleteTeams);
const parseInfoQuery = queryValidator(TeamInfoQuery);
const parseListQuery = queryValidator(ListTeamsQuery);

export function teamRoutes(deps: TeamDeps, auth: AuthPlugin) {
  return new Elysia({ prefix: "/team" })
    .use(auth)
    .post("/new", async ({ body, principal }) => teamInfo(await createTeam(deps, principal, parseCreate(body))), {
      auth: true,
    })
    .post("/update", async ({ body, principal }) => teamInfo(await updateTeam(deps, principal, parseUpdate(body))), {
      auth: true,
    })
    .post(
      "/block",
      async ({ body, principal }) => teamInfo(await setTeamBlocked(deps, principal, parseTarget(body).team_id, true)),
      { auth: true },
    )
    .post(
      "/unblock",
      async ({ body, principal }) => teamInfo(await setTeamBlocked(deps, principal, parseTarget(body).team_id, false)),
      { auth: true },
    )
    .get(
      "/info",
      async ({ query, principal }) => {
        const { row, keyCount } = await describeTeam(deps, principal, parseInfoQuery(query).team_id);
        return { ...teamInfo(row), key_count: keyCount };
      },
      { auth: true },
    )
    .get(
      "/list",
      async ({ query, principal }) => {
        const { rows, ...page } = await listTeams(deps, principal, parseListQuery(query));
        return { teams: rows.map(teamInfo), ...page };
      },
      { auth: true },
    )
    .post("/delete", async ({ body, principal }) => deleteTeams(deps, principal, parseDelete(body)), { auth: true });
}
