import { afterAll, expect, test } from "bun:test";
import { describeRef } from "../src/keys/service";
import { describeEachBackend, type ErrorWire, type GeneratedWire, type KeyWire, unique } from "./helpers/gateway";
import { openaiCompletion } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

type ListWire = { keys: KeyWire[]; total_count: number };

describeEachBackend("permission model", (gw) => {
  const setup = async () => {
    const team = await gw().newTeam({
      models: ["openai/gpt-4o", "openai/gpt-4o-mini"],
      max_budget: 100,
      rpm_limit: 60,
      tpm_limit: 1000,
    });
    const other = await gw().newTeam();
    const mgmt = await gw().newKey({ team_id: team.team_id, key_type: "management" });
    const member = await gw().newKey({ team_id: team.team_id });
    const outsider = await gw().newKey({ team_id: other.team_id });
    return { team, other, mgmt, member, outsider };
  };

  test("a management key manages keys of its own team", async () => {
    const { team, mgmt } = await setup();
    expect(mgmt.key_type).toBe("management");
    expect(mgmt.user_id).toBeNull();
    const made = await gw().call<GeneratedWire>("POST", "/key/generate", {
      key: mgmt.key,
      body: { team_id: team.team_id, models: ["openai/gpt-4o"], max_budget: 50, rpm_limit: 60 },
    });
    expect(made.status).toBe(200);
    expect(made.body.created_by).toBe(mgmt.token_id);
    const k = made.body.key;
    expect((await gw().call("POST", "/key/update", { key: mgmt.key, body: { key: k, tpm_limit: 10 } })).status).toBe(
      200,
    );
    expect((await gw().call("GET", `/key/info?key=${made.body.token_id}`, { key: mgmt.key })).status).toBe(200);
    expect((await gw().call("POST", "/key/block", { key: mgmt.key, body: { key: k } })).status).toBe(200);
    expect((await gw().call("POST", "/key/unblock", { key: mgmt.key, body: { key: k } })).status).toBe(200);
    const regen = await gw().call<GeneratedWire>("POST", "/key/regenerate", { key: mgmt.key, body: { key: k } });
    expect(regen.status).toBe(200);
    const list = await gw().call<ListWire>("GET", "/key/list?size=100", { key: mgmt.key });
    expect(list.status).toBe(200);
    expect(list.body.keys.every((x) => x.team_id === team.team_id)).toBe(true);
    expect(list.body.total_count).toBe(3);
    const del = await gw().call("POST", "/key/delete", { key: mgmt.key, body: { keys: [regen.body.key] } });
    expect(del.status).toBe(200);
  });

  test("a management key cannot touch another team's keys, nor tell them from keys that do not exist", async () => {
    const { team, other, mgmt, outsider } = await setup();
    const denied: Array<[string, string, unknown]> = [
      ["POST", "/key/generate", { team_id: other.team_id }],
      ["GET", `/key/list?team_id=${other.team_id}`, undefined],
    ];
    for (const [method, path, body] of denied) {
      const r = await gw().call<ErrorWire>(method, path, { key: mgmt.key, body });
      expect(`${path} ${r.status}`).toBe(`${path} 403`);
      expect(r.body.error.type).toBe("permission_error");
      expect(r.body.error.message).toContain("own team");
    }
    // Another team's key answers exactly like an unknown one: a 404 naming the reference.
    const unknownRefs = { secret: `sk-${"x".repeat(48)}`, token_id: crypto.randomUUID(), key_hash: "ab".repeat(32) };
    const refs: Array<[string, string]> = [
      [outsider.key, unknownRefs.secret],
      [outsider.token_id, unknownRefs.token_id],
      [outsider.key_hash, unknownRefs.key_hash],
    ];
    for (const [ref, unknown] of refs) {
      const attempts: Array<(r: string) => [string, string, unknown]> = [
        (r) => ["POST", "/key/update", { key: r, rpm_limit: 1 }],
        (r) => ["POST", "/key/regenerate", { key: r }],
        (r) => ["POST", "/key/block", { key: r }],
        (r) => ["POST", "/key/unblock", { key: r }],
        (r) => ["POST", "/key/delete", { keys: [r] }],
        (r) => ["GET", `/key/info?key=${encodeURIComponent(r)}`, undefined],
      ];
      for (const attempt of attempts) {
        const [method, path, body] = attempt(ref);
        const theirs = await gw().call<ErrorWire>(method, path, { key: mgmt.key, body });
        const [, unknownPath, unknownBody] = attempt(unknown);
        const none = await gw().call<ErrorWire>(method, unknownPath, { key: mgmt.key, body: unknownBody });
        const masked = (r: ErrorWire, value: string) => ({
          ...r.error,
          message: r.error.message.replace(describeRef(value), "<ref>"),
        });
        expect(`${path} ${theirs.status}`).toBe(`${path} 404`);
        expect(masked(theirs.body, ref)).toEqual(masked(none.body, unknown));
        expect(theirs.body.error.code).toBe("key_not_found");
      }
    }
    // by alias too
    const aliased = await gw().newKey({ team_id: other.team_id, key_alias: unique("theirs") });
    const byAlias = await gw().call<ErrorWire>("POST", "/key/delete", {
      key: mgmt.key,
      body: { key_aliases: [aliased.key_alias] },
    });
    expect(byAlias.status).toBe(404);
    expect(byAlias.body.error.message).toBe(`Keys not found: alias '${aliased.key_alias}'`);
    // nothing happened to them
    const info = await gw().call<KeyWire>("GET", "/key/info", { key: outsider.key });
    expect(info.status).toBe(200);
    expect(info.body).toMatchObject({ rpm_limit: null, blocked: false });
    expect((await gw().call("GET", "/key/info", { key: aliased.key })).status).toBe(200);
    // a key list of its own team shows only its own team
    const own = await gw().call<ListWire>("GET", `/key/list?key_hash=${outsider.key_hash}`, { key: mgmt.key });
    expect(own.body.total_count).toBe(0);
    expect((await gw().call("GET", `/key/list?team_id=${team.team_id}`, { key: mgmt.key })).status).toBe(200);
  });

  test("a management key cannot make a key unlimited where its team has a limit", async () => {
    const { team, mgmt, member } = await setup();
    const capped = await gw().newTeam({ max_budget: 100, rpm_limit: 60, tpm_limit: 1000, max_parallel_requests: 4 });
    const capper = await gw().newKey({ team_id: capped.team_id, key_type: "management" });
    const inCapped = await gw().newKey({ team_id: capped.team_id, rpm_limit: 10 });
    for (const field of ["max_budget", "rpm_limit", "tpm_limit", "max_parallel_requests"]) {
      const calls: Array<[string, Record<string, unknown>]> = [
        ["/key/generate", { team_id: capped.team_id, [field]: null }],
        ["/key/update", { key: inCapped.key, [field]: null }],
        ["/key/regenerate", { key: inCapped.token_id, [field]: null }],
      ];
      for (const [path, body] of calls) {
        const r = await gw().call<ErrorWire>("POST", path, { key: capper.key, body });
        expect(`${path} ${field} ${r.status}`).toBe(`${path} ${field} 403`);
        expect(r.body.error).toMatchObject({ type: "permission_error", code: "exceeds_team_limit", param: field });
        expect(r.body.error.message).toContain(`'${field}'`);
        expect(r.body.error.message).toContain("unlimited");
      }
    }
    // soft_budget above the team's max_budget too; null (no alert) is fine
    const soft = await gw().call<ErrorWire>("POST", "/key/generate", {
      key: capper.key,
      body: { team_id: capped.team_id, soft_budget: 150 },
    });
    expect(soft.status).toBe(403);
    expect(soft.body.error.param).toBe("soft_budget");
    const softNull = await gw().call("POST", "/key/update", {
      key: capper.key,
      body: { key: inCapped.key, soft_budget: null },
    });
    expect(softNull.status).toBe(200);
    // the key is unchanged by the refused calls
    const info = await gw().call<KeyWire>("GET", `/key/info?key=${inCapped.token_id}`);
    expect(info.body).toMatchObject({ rpm_limit: 10, max_budget: null });
    // not sent: the key has no limit of its own (the team's still applies); models [] means the team's
    const plain = await gw().call<GeneratedWire>("POST", "/key/generate", {
      key: capper.key,
      body: { team_id: capped.team_id, models: [] },
    });
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({ max_budget: null, rpm_limit: null, models: [] });
    // where the team has no cap, null is allowed
    expect(
      (
        await gw().call("POST", "/key/update", {
          key: mgmt.key,
          body: { key: member.key, max_parallel_requests: null },
        })
      ).status,
    ).toBe(200);
    expect(team.max_parallel_requests).toBeNull();
    // the master key may do anything
    expect((await gw().call("POST", "/key/update", { body: { key: inCapped.key, rpm_limit: null } })).status).toBe(200);
  });

  test("a management key cannot raise a key above its team's limits or models", async () => {
    const { team, mgmt, member } = await setup();
    const over: Record<string, unknown>[] = [
      { max_budget: 101 },
      { rpm_limit: 61 },
      { tpm_limit: 1001 },
      { models: ["anthropic/claude-opus-4"] },
      { model_rpm_limit: { "openai/gpt-4o": 61 } },
      { model_tpm_limit: { "openai/gpt-4o": 5000 } },
      { model_max_budget: { "openai/gpt-4o": { budget_limit: 500, time_period: "1d" } } },
    ];
    for (const fields of over) {
      const gen = await gw().call<ErrorWire>("POST", "/key/generate", {
        key: mgmt.key,
        body: { team_id: team.team_id, ...fields },
      });
      expect(`${JSON.stringify(fields)} ${gen.status}`).toBe(`${JSON.stringify(fields)} 403`);
      const upd = await gw().call<ErrorWire>("POST", "/key/update", {
        key: mgmt.key,
        body: { key: member.key, ...fields },
      });
      expect(upd.status).toBe(403);
      const regen = await gw().call<ErrorWire>("POST", "/key/regenerate", {
        key: mgmt.key,
        body: { key: member.key, ...fields },
      });
      expect(regen.status).toBe(403);
    }
    // the master key is not bound by team limits
    const master = await gw().call("POST", "/key/update", { body: { key: member.key, max_budget: 1000 } });
    expect(master.status).toBe(200);
    // at the limit is fine
    const atLimit = await gw().call("POST", "/key/generate", {
      key: mgmt.key,
      body: { team_id: team.team_id, max_budget: 100, rpm_limit: 60, models: ["openai/gpt-4o-mini"] },
    });
    expect(atLimit.status).toBe(200);
  });

  test("a team's provider/* entry covers that provider's models for a management key", async () => {
    const team = await gw().newTeam({ models: ["openai/*"] });
    const mgmt = await gw().newKey({ team_id: team.team_id, key_type: "management" });
    const gen = (models: string[]) =>
      gw().call<ErrorWire>("POST", "/key/generate", { key: mgmt.key, body: { team_id: team.team_id, models } });
    expect((await gen(["openai/gpt-4o", "openai/*"])).status).toBe(200);
    const other = await gen(["anthropic/claude-haiku-4-5"]);
    expect(other.status).toBe(403);
    expect(other.body.error).toMatchObject({ code: "model_not_allowed_for_team", param: "models" });
  });

  test("a management key cannot manage teams", async () => {
    const { team, mgmt } = await setup();
    const attempts: Array<[string, string, unknown]> = [
      ["POST", "/team/new", { team_id: unique("nope") }],
      ["POST", "/team/update", { team_id: team.team_id, max_budget: 1e6 }],
      ["POST", "/team/block", { team_id: team.team_id }],
      ["POST", "/team/unblock", { team_id: team.team_id }],
      ["POST", "/team/delete", { team_ids: [team.team_id] }],
      ["GET", `/team/info?team_id=${team.team_id}`, undefined],
      ["GET", "/team/list", undefined],
    ];
    for (const [method, path, body] of attempts) {
      const r = await gw().call<ErrorWire>(method, path, { key: mgmt.key, body });
      expect(`${path} ${r.status}`).toBe(`${path} 403`);
      expect(r.body.error.message).toContain("master key");
    }
  });

  test("a management key cannot have a user_id", async () => {
    const team = await gw().newTeam();
    const r = await gw().call<ErrorWire>("POST", "/key/generate", {
      body: { team_id: team.team_id, key_type: "management", user_id: "u" },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe("user_id");
  });

  test("an llm_api key may only describe itself", async () => {
    const { team, member, mgmt } = await setup();
    const self = await gw().call<KeyWire>("GET", "/key/info", { key: member.key });
    expect(self.status).toBe(200);
    expect(self.body.token_id).toBe(member.token_id);
    expect((await gw().call("GET", `/key/info?key=${member.token_id}`, { key: member.key })).status).toBe(200);
    expect((await gw().call("GET", `/key/info?key=${member.key}`, { key: member.key })).status).toBe(200);
    const peek = await gw().call<ErrorWire>("GET", `/key/info?key=${mgmt.token_id}`, { key: member.key });
    expect(peek.status).toBe(403);
    expect(peek.body.error.message).toContain("key_management");
    const denied: Array<[string, string, unknown]> = [
      ["POST", "/key/generate", { team_id: team.team_id }],
      ["POST", "/key/update", { key: member.key, rpm_limit: 1 }],
      ["POST", "/key/regenerate", { key: member.key }],
      ["POST", "/key/block", { key: member.key }],
      ["POST", "/key/delete", { keys: [member.key] }],
      ["GET", "/key/list", undefined],
      ["POST", "/team/new", {}],
      ["GET", "/team/list", undefined],
    ];
    for (const [method, path, body] of denied) {
      const r = await gw().call<ErrorWire>(method, path, { key: member.key, body });
      expect(`${path} ${r.status}`).toBe(`${path} 403`);
      expect(r.body.error.message).toMatch(/key_management|master key/);
    }
  });

  test("missing, malformed, unknown credentials; token_id and key_hash are not credentials", async () => {
    const k = await gw().newKey();
    const none = await gw().call<ErrorWire>("GET", "/key/info", { key: null });
    expect(none.status).toBe(401);
    expect(none.body.error).toMatchObject({ type: "authentication_error", code: "missing_api_key" });
    const basic = await gw().call<ErrorWire>("GET", "/key/info", {
      key: null,
      headers: { authorization: "Basic abc" },
    });
    expect(basic.status).toBe(401);
    for (const wrong of [k.token_id, k.key_hash, `${k.key}x`, "sk-unknown"]) {
      const r = await gw().call<ErrorWire>("GET", "/key/info", { key: wrong });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe("invalid_api_key");
    }
    const bearerCase = await gw().call("GET", "/key/info", {
      key: null,
      headers: { authorization: `bearer ${k.key}` },
    });
    expect(bearerCase.status).toBe(200);
    for (const [method, path] of [
      ["POST", "/key/generate"],
      ["GET", "/key/list"],
      ["POST", "/team/new"],
      ["GET", "/team/list"],
    ] as const) {
      expect((await gw().call(method, path, { key: null, body: {} })).status).toBe(401);
    }
  });
});

const upstream = startMockUpstream(() => openaiCompletion("ok", { prompt: 10, completion: 1 }));
afterAll(() => upstream.close());

describeEachBackend(
  "keys a management key creates are bounded by their team at inference",
  (gw) => {
    const chat = (key: string, model: string) =>
      gw().call<ErrorWire>("POST", "/v1/chat/completions", {
        key,
        body: { model, messages: [{ role: "user", content: "hi" }] },
      });

    test("without limits of its own and with models [], a key gets the team's models and the team's limits", async () => {
      const team = await gw().newTeam({ models: ["up/a"], rpm_limit: 2 });
      const mgmt = await gw().newKey({ team_id: team.team_id, key_type: "management" });
      const made = await gw().call<GeneratedWire>("POST", "/key/generate", {
        key: mgmt.key,
        body: { team_id: team.team_id, models: [] },
      });
      expect(made.status).toBe(200);
      expect(made.body).toMatchObject({ models: [], rpm_limit: null });
      const outside = await chat(made.body.key, "up/b");
      expect(outside.status).toBe(403);
      expect(outside.body.error.message).toContain(`team '${team.team_id}'`);
      expect((await chat(made.body.key, "up/a")).status).toBe(200);
      expect((await chat(made.body.key, "up/a")).status).toBe(200);
      const third = await chat(made.body.key, "up/a");
      expect(third.status).toBe(429);
      expect(third.body.error.message).toContain("the team's rpm limit (2 requests per minute)");
    });
  },
  () => ({
    inference: {
      providers: { up: { type: "openai", api_base: upstream.url, api_key: "k" } },
      models: [{ name: "up/a" }, { name: "up/b" }],
      router: { num_retries: 0 },
    },
  }),
);
