/** GET /spend/logs and /spend/report: filters, paging, grouping, and who may see what. */
import { beforeAll, expect, test } from "bun:test";
import { describeEachBackend, type ErrorWire, type GeneratedWire, type TeamWire } from "./helpers/gateway";
import { openaiCompletion } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

const mock = startMockUpstream(() => openaiCompletion("ok", { prompt: 1000, completion: 100 }));

type LogsWire = { logs: Record<string, unknown>[]; next_cursor: string | null };
type ReportWire = {
  group_by: string;
  total_spend: number;
  rows: { group: string | null; spend: number; requests: number; input_tokens: number }[];
};

describeEachBackend(
  "spend logs and reports",
  (gw) => {
    let teamA: TeamWire;
    let teamB: TeamWire;
    let a1: GeneratedWire;
    let a2: GeneratedWire;
    let b1: GeneratedWire;
    let mgmtA: GeneratedWire;
    const chat = (key: string, model: string) =>
      gw().call("POST", "/v1/chat/completions", { key, body: { model, messages: [{ role: "user", content: "hi" }] } });

    beforeAll(async () => {
      teamA = await gw().newTeam();
      teamB = await gw().newTeam();
      a1 = await gw().newKey({ team_id: teamA.team_id, tags: ["search", "prod"] });
      a2 = await gw().newKey({ team_id: teamA.team_id, tags: ["search"] });
      b1 = await gw().newKey({ team_id: teamB.team_id, tags: ["batch"] });
      mgmtA = await gw().newKey({ team_id: teamA.team_id, key_type: "management" });
      for (let i = 0; i < 3; i++) expect((await chat(a1.key, "mk/cheap")).status).toBe(200);
      expect((await chat(a1.key, "mk/dear")).status).toBe(200);
      expect((await chat(a2.key, "mk/cheap")).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await chat(b1.key, "mk/dear")).status).toBe(200);
      await gw().flush();
    });

    // cheap: 1000 in x 1e-6 + 100 out x 2e-6 = 0.0012; dear: 1000 x 1e-5 + 100 x 2e-5 = 0.012
    const CHEAP = 0.0012;
    const DEAR = 0.012;

    test("logs filter by key, team, model and tag, newest first, without key hashes", async () => {
      const byKey = await gw().call<LogsWire>("GET", `/spend/logs?key=${a1.token_id}`);
      expect(byKey.status).toBe(200);
      expect(byKey.body.logs).toHaveLength(4);
      expect(byKey.body.logs.every((l) => l.token_id === a1.token_id)).toBe(true);
      expect(byKey.body.logs.find((l) => l.model === "mk/dear")).toMatchObject({
        team_id: teamA.team_id,
        input_tokens: 1000,
        output_tokens: 100,
        status: 200,
      });
      for (const l of byKey.body.logs) expect(l).not.toHaveProperty("key_hash");
      const times = byKey.body.logs.map((l) => Date.parse(l.created_at as string));
      expect([...times].sort((x, y) => y - x)).toEqual(times);
      expect((await gw().call<LogsWire>("GET", `/spend/logs?team_id=${teamB.team_id}`)).body.logs).toHaveLength(2);
      expect(
        (await gw().call<LogsWire>("GET", `/spend/logs?team_id=${teamA.team_id}&model=mk/cheap`)).body.logs,
      ).toHaveLength(4);
      expect((await gw().call<LogsWire>("GET", "/spend/logs?tag=prod")).body.logs.map((l) => l.token_id)).toEqual(
        Array(4).fill(a1.token_id),
      );
      const future = await gw().call<LogsWire>(
        "GET",
        "/spend/logs?start_time=2100-01-01T00:00:00Z&end_time=2100-02-01T00:00:00Z",
      );
      expect(future.body.logs).toEqual([]);
    });

    test("logs page with a cursor and never repeat a row", async () => {
      const seen = new Set<string>();
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r: { body: LogsWire } = await gw().call<LogsWire>(
          "GET",
          `/spend/logs?team_id=${teamA.team_id}&limit=2${cursor ? `&cursor=${cursor}` : ""}`,
        );
        for (const l of r.body.logs) seen.add(l.request_id as string);
        cursor = r.body.next_cursor;
        pages++;
      } while (cursor && pages < 10);
      expect(seen.size).toBe(5);
      expect(pages).toBe(3);
      const bad = await gw().call<ErrorWire>("GET", "/spend/logs?cursor=garbage");
      expect(bad.status).toBe(400);
      expect(bad.body.error.param).toBe("cursor");
    });

    test("reports total spend grouped by key, team, model and tag", async () => {
      const byTeam = await gw().call<ReportWire>("GET", "/spend/report?group_by=team");
      const team = (id: string) => byTeam.body.rows.find((r) => r.group === id);
      expect(team(teamA.team_id)?.spend).toBeCloseTo(4 * CHEAP + DEAR, 12);
      expect(team(teamA.team_id)?.requests).toBe(5);
      expect(team(teamB.team_id)?.spend).toBeCloseTo(2 * DEAR, 12);
      const byModel = await gw().call<ReportWire>("GET", `/spend/report?group_by=model&team_id=${teamA.team_id}`);
      expect(byModel.body.rows.map((r) => [r.group, r.requests])).toEqual([
        ["mk/dear", 1],
        ["mk/cheap", 4],
      ]);
      expect(byModel.body.total_spend).toBeCloseTo(4 * CHEAP + DEAR, 12);
      const byTag = await gw().call<ReportWire>("GET", `/spend/report?group_by=tag&team_id=${teamA.team_id}`);
      const tag = (t: string) => byTag.body.rows.find((r) => r.group === t);
      expect(tag("search")?.spend).toBeCloseTo(4 * CHEAP + DEAR, 12);
      expect(tag("prod")?.spend).toBeCloseTo(3 * CHEAP + DEAR, 12);
      const byKey = await gw().call<ReportWire>("GET", `/spend/report?group_by=key&team_id=${teamA.team_id}`);
      expect(byKey.body.rows.find((r) => r.group === a2.token_id)?.spend).toBeCloseTo(CHEAP, 12);
      expect((await gw().call<ErrorWire>("GET", "/spend/report?group_by=color")).status).toBe(400);
      expect((await gw().call<ErrorWire>("GET", "/spend/report")).status).toBe(400);
      expect(
        (await gw().call<ErrorWire>("GET", "/spend/report?group_by=key&start_time=yesterday")).body.error.param,
      ).toBe("start_time");
    });

    test("a management key sees its team; an llm_api key sees itself; no one sees more", async () => {
      const mine = await gw().call<LogsWire>("GET", "/spend/logs", { key: mgmtA.key });
      expect(mine.body.logs).toHaveLength(5);
      expect(
        (await gw().call<ErrorWire>("GET", `/spend/logs?team_id=${teamB.team_id}`, { key: mgmtA.key })).status,
      ).toBe(403);
      expect((await gw().call<ErrorWire>("GET", `/spend/logs?key=${b1.token_id}`, { key: mgmtA.key })).status).toBe(
        403,
      );
      const self = await gw().call<ReportWire>("GET", "/spend/report?group_by=model", { key: a2.key });
      expect(self.body.rows).toEqual([expect.objectContaining({ group: "mk/cheap", requests: 1 })]);
      expect((await gw().call<ErrorWire>("GET", `/spend/logs?key=${a1.token_id}`, { key: a2.key })).status).toBe(403);
      expect((await gw().call<ErrorWire>("GET", "/spend/logs", { key: null })).status).toBe(401);
    });
  },
  () => ({
    inference: {
      providers: { mk: { type: "openai", api_base: mock.url, api_key: "k" } },
      models: [
        { name: "mk/cheap", input_cost_per_token: 1e-6, output_cost_per_token: 2e-6 },
        { name: "mk/dear", input_cost_per_token: 1e-5, output_cost_per_token: 2e-5 },
      ],
    },
  }),
);

describeEachBackend("spend query plans", (gw) => {
  test("every spend filter can use an index (so they stay fast with millions of rows)", async () => {
    const db = gw().opened.database.db;
    const { sql } = await import("drizzle-orm");
    const { rowsOf } = await import("./helpers/inference");
    const plan = async (where: string) => {
      await db.execute(sql.raw("set enable_seqscan = off"));
      try {
        const rows = rowsOf(
          await db.execute(
            sql.raw(
              `explain select * from request_logs where ${where} and created_at >= now() - interval '30 days' order by created_at desc, request_id desc limit 101`,
            ),
          ),
        ) as Record<string, string>[];
        return rows.map((r) => Object.values(r)[0]).join("\n");
      } finally {
        await db.execute(sql.raw("set enable_seqscan = on"));
      }
    };
    expect(await plan("token_id = 'k'")).toContain("request_logs_token_created_idx");
    expect(await plan("team_id = 't'")).toContain("request_logs_team_created_idx");
    expect(await plan("model = 'm'")).toContain("request_logs_model_created_idx");
    // ordered by time the planner may walk the time index; counting by tag must use the GIN index
    await db.execute(sql.raw("set enable_seqscan = off"));
    const tagPlan = rowsOf(
      await db.execute(sql.raw(`explain select count(*) from request_logs where tags @> '["x"]'::jsonb`)),
    );
    await db.execute(sql.raw("set enable_seqscan = on"));
    expect(JSON.stringify(tagPlan)).toContain("request_logs_tags_idx");
    expect(await plan("true")).toContain("request_logs_created_idx");
  });
});
