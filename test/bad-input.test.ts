import { expect, test } from "bun:test";
import { describeEachBackend, type ErrorWire, type KeyWire, type Reply, unique } from "./helpers/gateway";

const POST_ENDPOINTS = [
  "/key/generate",
  "/key/update",
  "/key/regenerate",
  "/key/block",
  "/key/unblock",
  "/key/delete",
  "/team/new",
  "/team/update",
  "/team/block",
  "/team/unblock",
  "/team/delete",
];

/** Every error: the envelope with all four fields, JSON, no stack trace, never Elysia's 422. */
function expectEnvelope(r: Reply<ErrorWire>, status: number, label: string) {
  expect(`${label} -> ${r.status}`).toBe(`${label} -> ${status}`);
  expect(r.headers.get("content-type")).toContain("application/json");
  expect(Object.keys(r.body.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(typeof r.body.error.message).toBe("string");
  expect(r.text).not.toMatch(/\bat .+:\d+:\d+|node_modules|\.ts:\d+/);
}

const MISSING = "Missing API key: send it as 'Authorization: Bearer <key>'";
/** Each protocol's clients are told how they send a key. */
const MISSING_ANTHROPIC = "Missing API key: send it as 'x-api-key: <key>' (or 'Authorization: Bearer <key>')";
const MISSING_GOOGLE =
  "Missing API key: send it as 'x-goog-api-key: <key>', '?key=<key>' or 'Authorization: Bearer <key>'";
function expectOpenAi401(body: Record<string, unknown>) {
  expect(body).toEqual({
    error: { message: MISSING, type: "authentication_error", param: null, code: "missing_api_key" },
  });
}
function expectGoogle401(body: Record<string, unknown>) {
  expect(body).toEqual({ error: { code: 401, message: MISSING_GOOGLE, status: "UNAUTHENTICATED" } });
}

describeEachBackend("bad input", (gw) => {
  test("malformed JSON, non-object bodies and empty bodies are 400 on every POST endpoint", async () => {
    for (const path of POST_ENDPOINTS) {
      const bad = await gw().call<ErrorWire>("POST", path, {
        raw: '{"team_id": "x",',
        headers: { "content-type": "application/json" },
      });
      expectEnvelope(bad, 400, `${path} malformed`);
      expect(bad.body.error.code).toBe("invalid_json");
      for (const raw of ["[1,2]", '"text"', "42", "null", "true"]) {
        const r = await gw().call<ErrorWire>("POST", path, { raw, headers: { "content-type": "application/json" } });
        expectEnvelope(r, 400, `${path} ${raw}`);
      }
      expectEnvelope(
        await gw().call<ErrorWire>("POST", path, { raw: "", headers: { "content-type": "application/json" } }),
        400,
        `${path} empty`,
      );
    }
  });

  test("non-JSON content types are 415; bodies over the limit are 413", async () => {
    for (const path of POST_ENDPOINTS) {
      for (const type of ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"]) {
        const r = await gw().call<ErrorWire>("POST", path, { raw: "a=1", headers: { "content-type": type } });
        expectEnvelope(r, 415, `${path} ${type}`);
      }
      const big = JSON.stringify({ team_id: "t", metadata: { blob: "x".repeat(70 * 1024) } });
      expectEnvelope(
        await gw().call<ErrorWire>("POST", path, { raw: big, headers: { "content-type": "application/json" } }),
        413,
        `${path} big`,
      );
      const chunked = await gw().app.handle(
        new Request(`http://localhost${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${gw().masterKey}` },
          body: new ReadableStream({
            start(c) {
              c.enqueue(new TextEncoder().encode(big));
              c.close();
            },
          }),
        }),
      );
      expect(chunked.status).toBe(413);
    }
    // charset parameters and +json types are fine
    const ok = await gw().call("POST", "/team/new", {
      raw: "{}",
      headers: { "content-type": "application/json; charset=utf-8" },
    });
    expect(ok.status).toBe(200);
  });

  test("without any credential, a body is never read: 401 in the route's protocol shape, not 400 or 413", async () => {
    const routes: Array<[string, (body: Record<string, unknown>) => void]> = [
      ...POST_ENDPOINTS.map((p): [string, (b: Record<string, unknown>) => void] => [p, expectOpenAi401]),
      ["/v1/chat/completions", expectOpenAi401],
      ["/v1/responses", expectOpenAi401],
      [
        "/v1/messages",
        (b) =>
          expect(b).toEqual({ type: "error", error: { type: "authentication_error", message: MISSING_ANTHROPIC } }),
      ],
      ["/v1beta/models/gemini-2.5-flash:generateContent", expectGoogle401],
      ["/v1beta/models/gemini-2.5-flash:streamGenerateContent", expectGoogle401],
      ["/v1/models/gemini-2.5-flash:generateContent", expectGoogle401],
    ];
    for (const [path, expectShape] of routes) {
      let pulled = false;
      const body = new ReadableStream<Uint8Array>(
        {
          pull(c) {
            pulled = true;
            c.enqueue(new TextEncoder().encode('{"malformed": '));
            c.close();
          },
        },
        { highWaterMark: 0 },
      );
      for (const req of [
        new Request(`http://localhost${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        }),
        new Request(`http://localhost${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", "content-length": String(100 * 1024 * 1024) },
          body: "{",
        }),
        new Request(`http://localhost${path}`, {
          method: "POST",
          headers: { "content-type": "text/plain" },
          body: "x",
        }),
      ]) {
        const res = await gw().app.handle(req);
        expect(`${path} ${res.status}`).toBe(`${path} 401`);
        expect(res.headers.get("content-type")).toContain("application/json");
        expectShape((await res.json()) as Record<string, unknown>);
      }
      expect(`${path} read: ${pulled}`).toBe(`${path} read: false`);
      // a malformed Authorization header is refused before the body too
      const malformed = await gw().app.handle(
        new Request(`http://localhost${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: "Basic abc" },
          body: "{",
        }),
      );
      expect(`${path} ${malformed.status}`).toBe(`${path} 401`);
    }
    // with a key (valid or not), the body is read and its problems reported as before
    const withKey = await gw().call<ErrorWire>("POST", "/key/generate", {
      raw: "{",
      headers: { "content-type": "application/json" },
    });
    expect(withKey.status).toBe(400);
    const google = await gw().app.handle(
      new Request("http://localhost/v1beta/models/gemini-2.5-flash:generateContent?key=sk-wrong", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      }),
    );
    expect(google.status).toBe(401);
    expect(((await google.json()) as { error: { message: string } }).error.message).toBe("Invalid API key");
  });

  test("unknown fields are 400 naming the field on every POST endpoint", async () => {
    for (const path of POST_ENDPOINTS) {
      const r = await gw().call<ErrorWire>("POST", path, {
        body: { team_id: "t", key: "k", team_ids: ["t"], keys: ["k"], rpm_limt: 5 },
      });
      expectEnvelope(r, 400, path);
      expect(r.body.error).toMatchObject({ code: "unknown_field" });
    }
  });

  test("wrong types and out-of-range values name the field", async () => {
    const team = await gw().newTeam();
    const key = await gw().newKey({ team_id: team.team_id });
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ["/key/generate", { team_id: 5 }, "team_id"],
      ["/key/generate", { team_id: "has space" }, "team_id"],
      ["/key/generate", { team_id: team.team_id, models: "openai/gpt-4o" }, "models"],
      ["/key/generate", { team_id: team.team_id, models: [1] }, "models[0]"],
      ["/key/generate", { team_id: team.team_id, max_budget: -1 }, "max_budget"],
      ["/key/generate", { team_id: team.team_id, max_budget: "10" }, "max_budget"],
      ["/key/generate", { team_id: team.team_id, soft_budget: -0.5 }, "soft_budget"],
      ["/key/generate", { team_id: team.team_id, rpm_limit: 1.5 }, "rpm_limit"],
      ["/key/generate", { team_id: team.team_id, tpm_limit: -1 }, "tpm_limit"],
      ["/key/generate", { team_id: team.team_id, max_parallel_requests: 2.5 }, "max_parallel_requests"],
      ["/key/generate", { team_id: team.team_id, duration: "10x" }, "duration"],
      ["/key/generate", { team_id: team.team_id, duration: "-2" }, "duration"],
      ["/key/generate", { team_id: team.team_id, duration: 30 }, "duration"],
      ["/key/generate", { team_id: team.team_id, budget_duration: "-1" }, "budget_duration"],
      ["/key/generate", { team_id: team.team_id, budget_duration: "1w" }, "budget_duration"],
      [
        "/key/generate",
        { team_id: team.team_id, model_max_budget: { m: { budget_limit: 1 } } },
        "model_max_budget.m.time_period",
      ],
      [
        "/key/generate",
        { team_id: team.team_id, model_max_budget: { m: { budget_limit: 1, time_period: "1y" } } },
        "model_max_budget.m.time_period",
      ],
      [
        "/key/generate",
        { team_id: team.team_id, model_max_budget: { m: { budget_limit: -1, time_period: "1d" } } },
        "model_max_budget.m.budget_limit",
      ],
      [
        "/key/generate",
        { team_id: team.team_id, model_max_budget: { m: { budget_limit: 1, time_period: "1d", x: 1 } } },
        "model_max_budget.m.x",
      ],
      ["/key/generate", { team_id: team.team_id, model_rpm_limit: { m: "5" } }, "model_rpm_limit.m"],
      ["/key/generate", { team_id: team.team_id, model_tpm_limit: { m: 0.5 } }, "model_tpm_limit.m"],
      ["/key/generate", { team_id: team.team_id, metadata: [1] }, "metadata"],
      ["/key/generate", { team_id: team.team_id, metadata: "x" }, "metadata"],
      ["/key/generate", { team_id: team.team_id, tags: "t" }, "tags"],
      ["/key/generate", { team_id: team.team_id, tags: [""] }, "tags[0]"],
      ["/key/generate", { team_id: team.team_id, blocked: "yes" }, "blocked"],
      ["/key/generate", { team_id: team.team_id, key_type: "admin" }, "key_type"],
      ["/key/generate", { team_id: team.team_id, key_alias: "" }, "key_alias"],
      ["/key/generate", { team_id: team.team_id, key_alias: "a".repeat(300) }, "key_alias"],
      ["/key/update", { rpm_limit: 5 }, "key"],
      ["/key/update", { key: key.key, rpm_limit: "5" }, "rpm_limit"],
      ["/key/update", { key: key.key, team_id: "other" }, "team_id"],
      ["/key/update", { key: 5 }, "key"],
      ["/key/regenerate", { key: key.key, duration: "forever" }, "duration"],
      ["/key/block", {}, "key"],
      ["/key/delete", { keys: "sk-x" }, "keys"],
      ["/key/delete", { keys: [] }, "keys"],
      ["/key/delete", { key_aliases: [5] }, "key_aliases[0]"],
      ["/team/new", { team_id: "bad/slash" }, "team_id"],
      ["/team/new", { max_budget: -3 }, "max_budget"],
      ["/team/new", { models: {} }, "models"],
      ["/team/update", { rpm_limit: 1 }, "team_id"],
      ["/team/update", { team_id: team.team_id, tpm_limit: "lots" }, "tpm_limit"],
      ["/team/delete", { team_ids: "x" }, "team_ids"],
      ["/team/delete", { team_ids: ["x"], force: "yes" }, "force"],
      ["/team/block", { team_id: 1 }, "team_id"],
    ];
    for (const [path, body, param] of cases) {
      const r = await gw().call<ErrorWire>("POST", path, { body });
      expectEnvelope(r, 400, `${path} ${JSON.stringify(body).slice(0, 80)}`);
      expect(r.body.error.param).toBe(param);
      expect(r.body.error.message).toContain(param);
    }
    // nothing was created or changed by any of the above
    const info = await gw().call<{ rpm_limit: number | null }>("GET", `/key/info?key=${key.token_id}`);
    expect(info.body.rpm_limit).toBeNull();
  });

  test("NUL characters, which Postgres cannot store, are 400 naming the field, never a 500", async () => {
    const team = await gw().newTeam();
    const key = await gw().newKey({ team_id: team.team_id });
    const t = team.team_id;
    const N = "\u0000";
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ["/key/generate", { team_id: t, key_alias: `a${N}b` }, "key_alias"],
      ["/key/generate", { team_id: t, user_id: `u${N}` }, "user_id"],
      ["/key/generate", { team_id: t, tags: ["ok", `t${N}`] }, "tags[1]"],
      ["/key/generate", { team_id: t, models: [`m${N}`] }, "models[0]"],
      ["/key/generate", { team_id: t, metadata: { [`k${N}`]: 1 } }, "metadata"],
      ["/key/generate", { team_id: t, metadata: { note: `v${N}` } }, "metadata"],
      ["/key/generate", { team_id: t, metadata: { a: { b: [1, { c: `deep${N}` }] } } }, "metadata"],
      ["/key/generate", { team_id: t, metadata: { a: [{ [`x${N}y`]: true }] } }, "metadata"],
      ["/key/generate", { team_id: t, model_rpm_limit: { [`m${N}`]: 1 } }, "model_rpm_limit"],
      ["/key/generate", { team_id: t, model_tpm_limit: { [`openai/m${N}`]: 1 } }, "model_tpm_limit"],
      [
        "/key/generate",
        { team_id: t, model_max_budget: { [`m${N}`]: { budget_limit: 1, time_period: "1d" } } },
        "model_max_budget",
      ],
      ["/key/update", { key: `abc${N}`, rpm_limit: 1 }, "key"],
      ["/key/update", { key: key.key, key_alias: N }, "key_alias"],
      ["/key/update", { key: key.key, metadata: { x: [N] } }, "metadata"],
      ["/key/regenerate", { key: `${key.token_id}${N}` }, "key"],
      ["/key/regenerate", { key: key.key, tags: [N] }, "tags[0]"],
      ["/key/block", { key: `sk-${N}` }, "key"],
      ["/key/unblock", { key: `x${N}` }, "key"],
      ["/key/delete", { keys: [`x${N}`] }, "keys[0]"],
      ["/key/delete", { key_aliases: [`a${N}`] }, "key_aliases[0]"],
      ["/team/new", { team_alias: `a${N}` }, "team_alias"],
      ["/team/new", { models: [`m${N}`] }, "models[0]"],
      ["/team/new", { metadata: { a: { [`b${N}`]: 1 } } }, "metadata"],
      ["/team/update", { team_id: `t${N}` }, "team_id"],
      ["/team/update", { team_id: t, metadata: { a: `${N}` } }, "metadata"],
      ["/team/block", { team_id: `t${N}` }, "team_id"],
      ["/team/unblock", { team_id: `t${N}` }, "team_id"],
      ["/team/delete", { team_ids: [`t${N}`] }, "team_ids[0]"],
    ];
    for (const [path, body, param] of cases) {
      const r = await gw().call<ErrorWire>("POST", path, { body });
      expectEnvelope(r, 400, `${path} ${JSON.stringify(body).slice(0, 80)}`);
      expect(r.body.error.param).toBe(param);
      expect(r.body.error.message).toContain(param);
      expect(r.body.error.message).toContain("NUL");
    }
    const queries: Array<[string, string]> = [
      ["/key/list?key_alias=a%00b", "key_alias"],
      ["/key/list?team_id=%00", "team_id"],
      ["/key/list?user_id=u%00", "user_id"],
      ["/key/list?key_hash=%00", "key_hash"],
      [`/key/info?key=${key.token_id}%00`, "key"],
      ["/team/info?team_id=a%00b", "team_id"],
      ["/team/list?team_alias=%00", "team_alias"],
    ];
    for (const [path, param] of queries) {
      const r = await gw().call<ErrorWire>("GET", path);
      expectEnvelope(r, 400, path);
      expect(r.body.error.param).toBe(param);
      expect(r.body.error.message).toContain("NUL");
    }
    // other control characters are stored and read back as sent
    const ok = await gw().call<KeyWire>("POST", "/key/update", {
      body: { key: key.key, key_alias: unique("tab\there"), metadata: { a: "line\nbreak\u0001" } },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.metadata).toEqual({ a: "line\nbreak\u0001" });
  });

  test("durations long enough to overflow a date are 400 naming the field", async () => {
    const team = await gw().newTeam();
    const key = await gw().newKey({ team_id: team.team_id });
    const t = team.team_id;
    for (const d of ["3000000d", "99999999h", "999999999d", "999999999m", "36501d"]) {
      const cases: Array<[string, Record<string, unknown>, string]> = [
        ["/key/generate", { team_id: t, duration: d }, "duration"],
        ["/key/generate", { team_id: t, budget_duration: d }, "budget_duration"],
        [
          "/key/generate",
          { team_id: t, model_max_budget: { m: { budget_limit: 1, time_period: d } } },
          "model_max_budget.m.time_period",
        ],
        ["/key/update", { key: key.key, duration: d }, "duration"],
        ["/key/update", { key: key.key, budget_duration: d }, "budget_duration"],
        ["/key/regenerate", { key: key.key, duration: d }, "duration"],
        ["/team/new", { budget_duration: d }, "budget_duration"],
        ["/team/update", { team_id: t, budget_duration: d }, "budget_duration"],
      ];
      for (const [path, body, param] of cases) {
        const r = await gw().call<ErrorWire>("POST", path, { body });
        expectEnvelope(r, 400, `${path} ${JSON.stringify(body)}`);
        expect(r.body.error.param).toBe(param);
        expect(r.body.error.message).toContain("at most 36500d");
      }
    }
    // the longest accepted duration works
    const longest = await gw().call<KeyWire>("POST", "/key/update", {
      body: { key: key.key, duration: "36500d", budget_duration: "876000h" },
    });
    expect(longest.status).toBe(200);
    expect(new Date(longest.body.expires ?? "").getUTCFullYear()).toBeGreaterThan(2100);
  });

  test("GET endpoints validate their query strings", async () => {
    const cases: Array<[string, string]> = [
      ["/key/list?page=x", "page"],
      ["/key/list?size=1000", "size"],
      ["/team/list?page=0", "page"],
      ["/key/list?page=99999999999999999999", "page"],
      ["/key/list?page=1000001", "page"],
      ["/team/list?page=99999999999999999999", "page"],
      ["/team/list?page=99999999999999999", "page"],
      ["/team/info", "team_id"],
    ];
    for (const [path, param] of cases) {
      const r = await gw().call<ErrorWire>("GET", path);
      expectEnvelope(r, 400, path);
      expect(r.body.error.param).toBe(param);
    }
  });

  test("unknown routes and wrong methods are 404 in the error envelope", async () => {
    for (const [method, path] of [
      ["GET", "/nope"],
      ["GET", "/key/generate"],
      ["POST", "/key/info"],
      ["DELETE", "/key/delete"],
      ["PUT", "/team/new"],
      ["GET", "/key"],
    ] as const) {
      const r = await gw().call<ErrorWire>(method, path);
      expectEnvelope(r, 404, `${method} ${path}`);
      expect(r.body.error.code).toBe("route_not_found");
    }
  });
});

describeEachBackend(
  "bad input: deeply nested metadata",
  (gw) => {
    const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
    test("metadata nested deeper than 32 levels is 400 naming the field, however deep", async () => {
      const team = await gw().newTeam();
      const key = await gw().newKey({ team_id: team.team_id });
      // 200,000 nested arrays (~400 KB) once overflowed the stack while being stored
      for (const depth of [32, 1000, 200_000]) {
        const bodies: Array<[string, string]> = [
          ["/key/generate", `{"team_id":"${team.team_id}","metadata":{"a":${nested(depth)}}}`],
          ["/key/update", `{"key":"${key.key}","metadata":{"a":${nested(depth)}}}`],
          ["/team/new", `{"metadata":{"a":${nested(depth)}}}`],
          ["/team/update", `{"team_id":"${team.team_id}","metadata":{"a":${nested(depth)}}}`],
        ];
        for (const [path, raw] of bodies) {
          const r = await gw().call<ErrorWire>("POST", path, { raw, headers: { "content-type": "application/json" } });
          expectEnvelope(r, 400, `${path} depth ${depth}`);
          expect(r.body.error.param).toBe("metadata");
          expect(r.body.error.message).toContain("deeper than 32 levels");
        }
      }
      // 32 levels counting metadata itself are fine, and stored as sent
      const ok = await gw().call<KeyWire>("POST", "/key/update", {
        raw: `{"key":"${key.key}","metadata":{"a":${nested(31)}}}`,
        headers: { "content-type": "application/json" },
      });
      expect(ok.status).toBe(200);
      expect(JSON.stringify(ok.body.metadata)).toBe(`{"a":${nested(31)}}`);
    });
  },
  () => ({ maxBodyBytes: 1 << 20 }),
);
