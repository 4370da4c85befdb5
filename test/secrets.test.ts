import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { describeEachBackend, type ErrorWire, type GeneratedWire } from "./helpers/gateway";
import { rowsOf } from "./helpers/inference";

describeEachBackend("secrets never stored", (gw) => {
  test("no table or log line holds a full key, after every kind of key operation", async () => {
    const secrets: string[] = [gw().masterKey];
    const mgmt = await gw().newKey({ key_type: "management", key_alias: "ops-bot", metadata: { note: "ci" } });
    secrets.push(mgmt.key);
    for (let i = 0; i < 5; i++) {
      const k = await gw().newKey({ team_id: mgmt.team_id, tags: [`t${i}`] });
      secrets.push(k.key);
      await gw().call("POST", "/key/update", { key: mgmt.key, body: { key: k.key, rpm_limit: i } });
      const regen = await gw().call<GeneratedWire>("POST", "/key/regenerate", { key: mgmt.key, body: { key: k.key } });
      secrets.push(regen.body.key);
      await gw().call("POST", "/key/block", { body: { key: regen.body.key } });
      await gw().call("GET", `/key/info?key=${regen.body.key}`);
      // failed calls carrying secrets too
      await gw().call("POST", "/key/delete", { body: { keys: [regen.body.key, `${regen.body.key}x`] } });
      await gw().call("GET", "/key/info", { key: `${regen.body.key}zz` });
    }
    const last = secrets.at(-1) as string;
    await gw().call("POST", "/key/delete", { body: { keys: [last] } });

    const columns = await gw().opened.database.db.execute<{
      table_schema: string;
      table_name: string;
      column_name: string;
    }>(sql`
      select table_schema, table_name, column_name from information_schema.columns
      where table_schema not in ('pg_catalog', 'information_schema')
        and data_type in ('text', 'character varying', 'character', 'jsonb', 'json')`);
    const list = rowsOf(columns) as { table_schema: string; table_name: string; column_name: string }[];
    expect(list.map((c) => `${c.table_name}.${c.column_name}`)).toContain("api_keys.key_hash");
    let scanned = 0;
    for (const c of list) {
      const values: unknown = await gw().opened.database.db.execute(
        sql.raw(`select "${c.column_name}"::text as v from "${c.table_schema}"."${c.table_name}"`),
      );
      const vs = rowsOf(values) as { v: string | null }[];
      for (const { v } of vs) {
        if (v === null) continue;
        scanned++;
        for (const s of secrets) {
          // the random part alone must not appear either
          expect(v.includes(s.slice(3))).toBe(false);
        }
      }
    }
    expect(scanned).toBeGreaterThan(20);
    const logs = gw().logs.join("\n");
    for (const s of secrets) expect(logs.includes(s.slice(3))).toBe(false);
  });

  test("a failed query's log line holds its error code and constraint, not the request's values", async () => {
    const db = gw().opened.database.db;
    // A constraint the gateway does not know about makes the insert fail inside the database.
    await db.execute(sql`alter table teams add constraint teams_alias_probe check (team_alias <> 'alias-probe-value')`);
    try {
      const before = gw().logs.length;
      const r = await gw().call<ErrorWire>("POST", "/team/new", {
        body: {
          team_alias: "alias-probe-value",
          metadata: { contact: "metadata-probe-value" },
          models: ["model-probe"],
        },
      });
      expect(r.status).toBe(500);
      expect(r.text).not.toContain("probe");
      const lines = gw()
        .logs.slice(before)
        .filter((l) => l.includes('"unhandled error"'));
      expect(lines).toHaveLength(1);
      const line = lines[0] as string;
      expect(line).toContain("23514");
      expect(line).toContain("teams_alias_probe");
      expect(line).not.toContain("alias-probe-value");
      expect(line).not.toContain("metadata-probe-value");
      expect(line).not.toContain("model-probe");
      expect(line).not.toContain("insert into");
    } finally {
      await db.execute(sql`alter table teams drop constraint teams_alias_probe`);
    }
  });
});
