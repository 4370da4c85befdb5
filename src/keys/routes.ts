import { Elysia } from "elysia";
import type { AuthPlugin } from "../http/auth";
import { queryValidator, validator } from "../http/validate";
import type { KeyRow } from "../store/schema";
import {
  CreateKey,
  DeleteKeys,
  KeyInfoQuery,
  KeyTarget,
  keyInfo,
  keyInfoWithTeam,
  ListKeysQuery,
  UpdateKey,
} from "./model";
import {
  deleteKeys,
  describeKey,
  generateKey,
  type KeyDeps,
  listKeys,
  regenerateKey,
  setKeyBlocked,
  updateKey,
} from "./service";

const parseCreate = validator(CreateKey);
const parseUpdate = validator(UpdateKey);
const parseTarget = validator(KeyTarget);
const parseDelete = validator(DeleteKeys);
const parseInfoQuery = queryValidator(KeyInfoQuery);
const parseListQuery = queryValidator(ListKeysQuery);

/** The secret is shown here and on regenerate, and nowhere else. */
function withSecret(secret: string, info: ReturnType<typeof keyInfo>) {
  const { key_name, expires, token_id, ...rest } = info;
  return { key: secret, key_name, expires, token_id, ...rest };
}

export function keyRoutes(deps: KeyDeps, auth: AuthPlugin) {
  const nowMs = () => (deps.now ? deps.now().getTime() : Date.now());
  const info = (row: KeyRow) => keyInfo(row, nowMs());
  return new Elysia({ prefix: "/key" })
    .use(auth)
    .post(
      "/generate",
      async ({ body, principal }) => {
        const { secret, row } = await generateKey(deps, principal, parseCreate(body));
        return withSecret(secret, info(row));
      },
      { auth: true },
    )
    .post("/update", async ({ body, principal }) => info(await updateKey(deps, principal, parseUpdate(body))), {
      auth: true,
    })
    .post(
      "/regenerate",
      async ({ body, principal }) => {
        const { secret, row } = await regenerateKey(deps, principal, parseUpdate(body));
        return withSecret(secret, info(row));
      },
      { auth: true },
    )
    .post(
      "/block",
      async ({ body, principal }) => info(await setKeyBlocked(deps, principal, parseTarget(body).key, true)),
      {
        auth: true,
      },
    )
    .post(
      "/unblock",
      async ({ body, principal }) => info(await setKeyBlocked(deps, principal, parseTarget(body).key, false)),
      { auth: true },
    )
    .get("/info", async ({ query, principal }) => info(await describeKey(deps, principal, parseInfoQuery(query).key)), {
      auth: true,
    })
    .get(
      "/list",
      async ({ query, principal }) => {
        const q = parseListQuery(query);
        const { rows, teamsById, ...page } = await listKeys(deps, principal, q);
        const keys =
          q.expand === "team" ? rows.map((r) => keyInfoWithTeam(r, teamsById.get(r.team_id), nowMs())) : rows.map(info);
        return { keys, ...page };
      },
      { auth: true },
    )
    .post(
      "/delete",
      async ({ body, principal }) => {
        const deleted = await deleteKeys(deps, principal, parseDelete(body));
        return { deleted_keys: deleted.map((d) => d.token_id), deleted };
      },
      { auth: true },
    );
}
