import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { describeEachBackend, type ErrorWire, type TeamWire, unique } from "./helpers/gateway";

type TeamListWire = { teams: TeamWire[]; total_count: number; current_page: number; total_pages: number };

describeEachBackend("teams", (gw) => {
  test("create with every field, then info shows them with a key count", async () => {
    const body = {
      team_id: unique("t"),
      team_alias: "Search",
      models: ["openai/gpt-4o"],
      max_budget: 100,
      budget_duration: "30d",
      rpm_limit: 1000,
      tpm_limit: 100_000,
      max_parallel_requests: 10,
      metadata: { cost_center: "42" },
      blocked: false,
    };
    const r = await gw().call<TeamWire>("POST", "/team/new", { body });
    expect(r.status).toBe(200);
    const { budget_duration, ...rest } = body;
    expect(r.body).toMatchObject({ ...rest, budget_duration, spend: 0 });
    expect(r.body.budget_reset_at).not.toBeNull();
    await gw().newKey({ team_id: body.team_id });
    const info = await gw().call<TeamWire & { key_count: number }>("GET", `/team/info?team_id=${body.team_id}`);
    expect(info.status).toBe(200);
    expect(info.body).toMatchObject({ ...rest, key_count: 1 });
    expect(info.body).toHaveProperty("created_at");
    expect(info.body).toHaveProperty("updated_at");
  });

  test("team_id is generated when omitted; a duplicate team_id is 409", async () => {
    const a = await gw().call<TeamWire>("POST", "/team/new", { body: { team_alias: "x" } });
    expect(a.status).toBe(200);
    expect(a.body.team_id).toMatch(/^[0-9a-f-]{36}$/);
    const dup = await gw().call<ErrorWire>("POST", "/team/new", { body: { team_id: a.body.team_id } });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe("team_exists");
  });

  test("update changes only sent fields; unknown team is 404", async () => {
    const t = await gw().newTeam({ max_budget: 5, rpm_limit: 10, team_alias: "before" });
    const r = await gw().call<TeamWire>("POST", "/team/update", { body: { team_id: t.team_id, rpm_limit: 20 } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ rpm_limit: 20, max_budget: 5, team_alias: "before" });
    const missing = await gw().call<ErrorWire>("POST", "/team/update", {
      body: { team_id: "ghost-team", rpm_limit: 1 },
    });
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).toContain("ghost-team");
    const info404 = await gw().call<ErrorWire>("GET", "/team/info?team_id=ghost-team");
    expect(info404.status).toBe(404);
  });

  test("list paginates and filters by alias", async () => {
    const alias = unique("alias");
    for (let i = 0; i < 3; i++) await gw().newTeam({ team_alias: alias });
    const r = await gw().call<TeamListWire>("GET", `/team/list?team_alias=${alias}&size=2`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ total_count: 3, total_pages: 2, current_page: 1 });
    expect(r.body.teams).toHaveLength(2);
    const all = await gw().call<TeamListWire>("GET", "/team/list");
    expect(all.body.teams.length).toBeLessThanOrEqual(10);
    expect((await gw().call("GET", "/team/list?size=101")).status).toBe(400);
  });

  test("a team with keys is not deleted without force; with force its keys go too and stop working", async () => {
    const k = await gw().newKey();
    const refused = await gw().call<ErrorWire>("POST", "/team/delete", { body: { team_ids: [k.team_id] } });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("team_has_keys");
    expect(refused.body.error.message).toContain(k.team_id);
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200);
    const forced = await gw().call<{ deleted_teams: string[]; deleted_keys: string[] }>("POST", "/team/delete", {
      body: { team_ids: [k.team_id], force: true },
    });
    expect(forced.status).toBe(200);
    expect(forced.body).toEqual({ deleted_teams: [k.team_id], deleted_keys: [k.token_id] });
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(401);
    expect((await gw().call("GET", `/team/info?team_id=${k.team_id}`)).status).toBe(404);
  });

  test("deleting an empty team works; unknown teams are a 404 and nothing is deleted", async () => {
    const t = await gw().newTeam();
    const r = await gw().call<ErrorWire>("POST", "/team/delete", { body: { team_ids: [t.team_id, "missing-team"] } });
    expect(r.status).toBe(404);
    expect(r.body.error.message).toContain("missing-team");
    expect((await gw().call("GET", `/team/info?team_id=${t.team_id}`)).status).toBe(200);
    const ok = await gw().call("POST", "/team/delete", { body: { team_ids: [t.team_id] } });
    expect(ok.status).toBe(200);
  });

  test("a blocked team's keys are rejected on the next request; unblocking restores them", async () => {
    const k = await gw().newKey();
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200);
    const b = await gw().call<TeamWire>("POST", "/team/block", { body: { team_id: k.team_id } });
    expect(b.body.blocked).toBe(true);
    const denied = await gw().call<ErrorWire>("GET", "/key/info", { key: k.key });
    expect(denied.status).toBe(401);
    expect(denied.body.error.code).toBe("team_blocked");
    await gw().call("POST", "/team/unblock", { body: { team_id: k.team_id } });
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200);
    await gw().call("POST", "/team/update", { body: { team_id: k.team_id, blocked: true } });
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(401);
  });

  /**
   * Races between key creation and team deletion, made deterministic with triggers that do the
   * other side's write at the worst moment (what a concurrent request on another instance does).
   */
  const withTrigger = async (setup: string[], teardown: string[], run: () => Promise<void>) => {
    const db = gw().opened.database.db;
    for (const q of setup) await db.execute(sql.raw(q));
    try {
      await run();
    } finally {
      for (const q of teardown) await db.execute(sql.raw(q));
    }
  };

  test("a team deleted while a key is being created in it: 400 team_not_found, not a 500", async () => {
    const t = await gw().newTeam();
    await withTrigger(
      [
        `create function gw_race_drop_team() returns trigger language plpgsql as $$
           begin delete from teams where team_id = new.team_id; return new; end $$`,
        `create trigger gw_race_drop_team before insert on api_keys for each row
           when (new.key_alias = 'race-drop-team') execute function gw_race_drop_team()`,
      ],
      ["drop trigger gw_race_drop_team on api_keys", "drop function gw_race_drop_team()"],
      async () => {
        const r = await gw().call<ErrorWire>("POST", "/key/generate", {
          body: { team_id: t.team_id, key_alias: "race-drop-team" },
        });
        expect(r.status).toBe(400);
        expect(r.body.error).toMatchObject({ code: "team_not_found", param: "team_id" });
        expect(r.body.error.message).toContain(t.team_id);
      },
    );
  });

  test("a key created while its team is being deleted: 409 team_has_keys, nothing deleted, not a 500", async () => {
    const t = await gw().newTeam({ team_alias: "race-add-key" });
    await withTrigger(
      [
        `create function gw_race_add_key() returns trigger language plpgsql as $$
           begin
             insert into api_keys (token_id, key_hash, key_name, team_id)
             values (gen_random_uuid()::text, md5(random()::text), 'sk-...race', old.team_id);
             return old;
           end $$`,
        `create trigger gw_race_add_key before delete on teams for each row
           when (old.team_alias = 'race-add-key') execute function gw_race_add_key()`,
      ],
      ["drop trigger gw_race_add_key on teams", "drop function gw_race_add_key()"],
      async () => {
        const r = await gw().call<ErrorWire>("POST", "/team/delete", { body: { team_ids: [t.team_id] } });
        expect(r.status).toBe(409);
        expect(r.body.error).toMatchObject({ code: "team_has_keys", param: "team_ids" });
        const info = await gw().call<{ key_count: number }>("GET", `/team/info?team_id=${t.team_id}`);
        expect(info.status).toBe(200);
        expect(info.body.key_count).toBe(0);
      },
    );
  });

  test("a team's updated_at strictly increases on every change, from the database's clock", async () => {
    const t = await gw().newTeam();
    const stamps = [Date.parse(t.updated_at)];
    for (let i = 0; i < 3; i++) {
      gw().clock.advance(i % 2 === 0 ? -60_000 : 60_000);
      for (const [path, body] of [
        ["/team/update", { rpm_limit: i }],
        ["/team/block", {}],
        ["/team/unblock", {}],
      ] as const) {
        const r = await gw().call<TeamWire>("POST", path, { body: { team_id: t.team_id, ...body } });
        expect(r.status).toBe(200);
        stamps.push(Date.parse(r.body.updated_at));
      }
    }
    for (let i = 1; i < stamps.length; i++) expect(stamps[i] as number).toBeGreaterThan(stamps[i - 1] as number);
    const future = new Date(Date.now() + 86_400_000);
    await gw().opened.database.db.execute(
      sql`update teams set updated_at = ${future.toISOString()}::timestamptz where team_id = ${t.team_id}`,
    );
    const r = await gw().call<TeamWire>("POST", "/team/update", { body: { team_id: t.team_id, tpm_limit: 5 } });
    expect(Date.parse(r.body.updated_at)).toBe(future.getTime() + 1);
  });
});
