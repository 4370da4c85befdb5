import { expect, test } from "bun:test";
import { describeEachBackend, type ErrorWire, type GeneratedWire, type KeyWire, unique } from "./helpers/gateway";

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

  test("a management key cannot touch another team's keys", async () => {
    const { other, mgmt, outsider } = await setup();
    const attempts: Array<[string, string, unknown]> = [
      ["POST", "/key/generate", { team_id: other.team_id }],
      ["POST", "/key/update", { key: outsider.key, rpm_limit: 1 }],
      ["POST", "/key/regenerate", { key: outsider.token_id }],
      ["POST", "/key/block", { key: outsider.key }],
      ["POST", "/key/unblock", { key: outsider.key }],
      ["POST", "/key/delete", { keys: [outsider.key] }],
      ["GET", `/key/info?key=${outsider.token_id}`, undefined],
      ["GET", `/key/list?team_id=${other.team_id}`, undefined],
    ];
    for (const [method, path, body] of attempts) {
      const r = await gw().call<ErrorWire>(method, path, { key: mgmt.key, body });
      expect(`${path} ${r.status}`).toBe(`${path} 403`);
      expect(r.body.error.type).toBe("permission_error");
      expect(r.body.error.message).toContain("own team");
    }
    expect((await gw().call("GET", "/key/info", { key: outsider.key })).status).toBe(200);
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
