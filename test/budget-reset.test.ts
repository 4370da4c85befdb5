import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { resetEndedBudgets } from "../src/spend/budget-reset";
import { describeEachBackend, type KeyWire, type TeamWire } from "./helpers/gateway";

const DAY = 86_400_000;

describeEachBackend("budget windows in the database", (gw) => {
  test("ended windows reset spend once and move budget_reset_at to the next window; others are untouched", async () => {
    const db = gw().opened.database.db;
    const team = await gw().newTeam({ budget_duration: "1d", max_budget: 100 });
    const daily = await gw().newKey({ team_id: team.team_id, budget_duration: "1d", max_budget: 5 });
    const forever = await gw().newKey({ team_id: team.team_id, max_budget: 5 });
    await db.execute(sql`update api_keys set spend = 3 where team_id = ${team.team_id}`);
    await db.execute(sql`update teams set spend = 6 where team_id = ${team.team_id}`);
    const resetAt = Date.parse(daily.budget_reset_at as string);

    expect(await resetEndedBudgets(db, new Date(resetAt - 1000))).toEqual({ keys: 0, teams: 0 });
    const later = new Date(resetAt + 2.5 * DAY);
    const first = await resetEndedBudgets(db, later);
    expect(first.keys).toBeGreaterThanOrEqual(1);
    expect(first.teams).toBeGreaterThanOrEqual(1);
    // a second run (another instance) finds nothing left to do
    expect(await resetEndedBudgets(db, later)).toEqual({ keys: 0, teams: 0 });

    const d = await gw().call<KeyWire>("GET", `/key/info?key=${daily.token_id}`);
    expect(d.body.spend).toBe(0);
    expect(Date.parse(d.body.budget_reset_at as string)).toBe(resetAt + 3 * DAY);
    const f = await gw().call<KeyWire>("GET", `/key/info?key=${forever.token_id}`);
    expect(f.body.spend).toBe(3);
    const t = await gw().call<TeamWire>("GET", `/team/info?team_id=${team.team_id}`);
    expect(t.body.spend).toBe(0);
    expect(Date.parse(t.body.budget_reset_at as string)).toBeGreaterThan(later.getTime());
  });
});
