import { expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { generateSecret, hashSecret } from "../src/keys/secret";
import {
  describeEachBackend,
  type ErrorWire,
  type GeneratedWire,
  type KeyWire,
  type TeamWire,
  unique,
} from "./helpers/gateway";

type ListWire = {
  keys: (KeyWire & { team?: TeamWire | null })[];
  total_count: number;
  current_page: number;
  total_pages: number;
};
type DeleteWire = {
  deleted_keys: string[];
  deleted: { token_id: string; key_name: string; key_alias: string | null }[];
};

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describeEachBackend("key management", (gw) => {
  test("generate returns the secret once, masked name, token_id and every stored setting", async () => {
    const team = await gw().newTeam();
    const settings = {
      team_id: team.team_id,
      key_alias: unique("alias"),
      models: ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4"],
      max_budget: 25.5,
      soft_budget: 20,
      budget_duration: "30d",
      duration: "7d",
      rpm_limit: 100,
      tpm_limit: 50_000,
      max_parallel_requests: 4,
      model_max_budget: { "openai/gpt-4o-mini": { budget_limit: 5, time_period: "1d" } },
      model_rpm_limit: { "openai/gpt-4o-mini": 10 },
      model_tpm_limit: { "openai/gpt-4o-mini": 1000 },
      metadata: { owner: "search-team", nested: { a: [1, 2] } },
      tags: ["prod", "search"],
      user_id: "user-42",
      blocked: false,
    };
    const before = gw().clock.now();
    const r = await gw().call<GeneratedWire>("POST", "/key/generate", { body: settings });
    expect(r.status).toBe(200);
    const k = r.body;
    expect(k.key).toMatch(/^sk-[0-9A-Za-z]{48}$/);
    expect(k.key_name).toBe(`sk-...${k.key.slice(-4)}`);
    expect(Object.keys(k).slice(0, 4)).toEqual(["key", "key_name", "expires", "token_id"]);
    expect(k.token_id).not.toContain(k.key.slice(3, 20));
    const { team_id, duration: _d, budget_duration, ...rest } = settings;
    expect(k).toMatchObject({ ...rest, team_id, budget_duration, key_type: "llm_api", spend: 0, created_by: "master" });
    const expires = Date.parse(k.expires as string);
    expect(expires - before).toBeGreaterThanOrEqual(7 * DAY - 1000);
    expect(expires - before).toBeLessThanOrEqual(7 * DAY + 5000);
    expect(Date.parse(k.budget_reset_at as string) - before).toBeGreaterThanOrEqual(30 * DAY - 1000);

    const info = await gw().call<KeyWire>("GET", `/key/info?key=${encodeURIComponent(k.key)}`);
    expect(info.status).toBe(200);
    const { key: _secret, ...stored } = k;
    expect(info.body).toEqual(stored);
    expect(JSON.stringify(info.body)).not.toContain(k.key);
  });

  test("a key without duration never expires; duration -1 likewise", async () => {
    const a = await gw().newKey();
    const b = await gw().newKey({ duration: "-1" });
    expect(a.expires).toBeNull();
    expect(b.expires).toBeNull();
    expect(a.models).toEqual([]);
  });

  test("team_id is required and must name an existing team", async () => {
    const missing = await gw().call<ErrorWire>("POST", "/key/generate", { body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({
      param: "team_id",
      code: "missing_field",
      type: "invalid_request_error",
    });
    const unknownTeam = await gw().call<ErrorWire>("POST", "/key/generate", { body: { team_id: "no-such-team" } });
    expect(unknownTeam.status).toBe(400);
    expect(unknownTeam.body.error).toMatchObject({ param: "team_id", code: "team_not_found" });
    expect(unknownTeam.body.error.message).toContain("no-such-team");
  });

  test("key_alias is unique: 409 on generate and on update", async () => {
    const alias = unique("dup");
    const first = await gw().newKey({ key_alias: alias });
    const again = await gw().call<ErrorWire>("POST", "/key/generate", {
      body: { team_id: first.team_id, key_alias: alias },
    });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ param: "key_alias", code: "key_alias_exists" });
    const other = await gw().newKey();
    const upd = await gw().call<ErrorWire>("POST", "/key/update", { body: { key: other.key, key_alias: alias } });
    expect(upd.status).toBe(409);
  });

  test("update changes only the sent fields and answers the updated info", async () => {
    const k = await gw().newKey({ max_budget: 10, rpm_limit: 5, tags: ["a"], metadata: { x: 1 }, models: ["m1"] });
    gw().clock.advance(1000);
    const r = await gw().call<KeyWire>("POST", "/key/update", {
      body: { key: k.key, rpm_limit: 50, tags: ["b", "c"] },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      rpm_limit: 50,
      tags: ["b", "c"],
      max_budget: 10,
      metadata: { x: 1 },
      models: ["m1"],
    });
    expect(Date.parse(r.body.updated_at)).toBeGreaterThan(Date.parse(k.updated_at));
    expect(r.body.created_at).toBe(k.created_at);
    // nulls clear nullable settings
    const cleared = await gw().call<KeyWire>("POST", "/key/update", {
      body: { key: k.token_id, max_budget: null, rpm_limit: null },
    });
    expect(cleared.body).toMatchObject({ max_budget: null, rpm_limit: null, tags: ["b", "c"] });
    // every updatable field
    const all = {
      key_alias: unique("renamed"),
      models: [],
      max_budget: 1,
      soft_budget: 0.5,
      budget_duration: "1h",
      rpm_limit: 1,
      tpm_limit: 2,
      max_parallel_requests: 3,
      model_max_budget: { m: { budget_limit: 0.1, time_period: "1d" } },
      model_rpm_limit: { m: 4 },
      model_tpm_limit: { m: 5 },
      metadata: { y: "z" },
      tags: [],
      blocked: false,
      duration: "2h",
    };
    const full = await gw().call<KeyWire>("POST", "/key/update", { body: { key: k.key, ...all } });
    expect(full.status).toBe(200);
    const { duration: _d, ...shown } = all;
    expect(full.body).toMatchObject(shown);
    expect(full.body.expires).not.toBeNull();
  });

  test("duration on update: a new value counts from now, null and -1 remove the expiry", async () => {
    const k = await gw().newKey({ duration: "1d" });
    gw().clock.advance(HOUR);
    const now = gw().clock.now();
    const moved = await gw().call<KeyWire>("POST", "/key/update", { body: { key: k.key, duration: "2h" } });
    expect(Math.abs(Date.parse(moved.body.expires as string) - (now + 2 * HOUR))).toBeLessThan(2000);
    const removed = await gw().call<KeyWire>("POST", "/key/update", { body: { key: k.key, duration: null } });
    expect(removed.body.expires).toBeNull();
    await gw().call("POST", "/key/update", { body: { key: k.key, duration: "1h" } });
    const minusOne = await gw().call<KeyWire>("POST", "/key/update", { body: { key: k.key, duration: "-1" } });
    expect(minusOne.body.expires).toBeNull();
    const budget = await gw().call<KeyWire>("POST", "/key/update", { body: { key: k.key, budget_duration: "1d" } });
    expect(Math.abs(Date.parse(budget.body.budget_reset_at as string) - (now + DAY))).toBeLessThan(2000);
    const noBudget = await gw().call<KeyWire>("POST", "/key/update", { body: { key: k.key, budget_duration: null } });
    expect(noBudget.body).toMatchObject({ budget_duration: null, budget_reset_at: null });
  });

  test("an expired key is rejected with 401 saying so, and is listed with its expiry", async () => {
    const k = await gw().newKey({ duration: "1h" });
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200);
    gw().clock.advance(HOUR + 1000);
    const r = await gw().call<ErrorWire>("GET", "/key/info", { key: k.key });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe("key_expired");
    expect(r.body.error.message).toContain("expired");
    const listed = await gw().call<ListWire>("GET", `/key/list?team_id=${k.team_id}`);
    expect(listed.body.keys[0]).toMatchObject({ token_id: k.token_id, expires: k.expires, expired: true });
    // removing the expiry revives it on the very next request
    await gw().call("POST", "/key/update", { body: { key: k.key, duration: "-1" } });
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200);
  });

  test("info describes the calling key without ?key, and any key by secret, token_id or key_hash", async () => {
    const k = await gw().newKey({ key_alias: unique("info") });
    const self = await gw().call<KeyWire>("GET", "/key/info", { key: k.key });
    expect(self.status).toBe(200);
    expect(self.body.token_id).toBe(k.token_id);
    for (const ref of [k.key, k.token_id, k.key_hash]) {
      const r = await gw().call<KeyWire>("GET", `/key/info?key=${encodeURIComponent(ref)}`);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        key_alias: k.key_alias,
        models: [],
        max_budget: null,
        spend: 0,
        expires: null,
        team_id: k.team_id,
        rpm_limit: null,
        tpm_limit: null,
        blocked: false,
        budget_reset_at: null,
      });
      expect(r.body).toHaveProperty("created_at");
      expect(r.body).toHaveProperty("updated_at");
      expect(r.body).not.toHaveProperty("key");
    }
    const missing = await gw().call<ErrorWire>(
      "GET",
      "/key/info?key=sk-doesnotexist0000000000000000000000000000000000000",
    );
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).not.toContain("doesnotexist0000000000000000000000000000000000000");
    const master = await gw().call<ErrorWire>("GET", "/key/info");
    expect(master.status).toBe(400);
    expect(master.body.error.param).toBe("key");
  });

  test("list paginates (default size 10) and filters by team_id, user_id, key_hash and key_alias", async () => {
    const team = await gw().newTeam();
    const made: GeneratedWire[] = [];
    for (let i = 0; i < 12; i++) {
      gw().clock.advance(10);
      made.push(
        await gw().newKey({ team_id: team.team_id, user_id: i % 2 ? "odd" : "even", key_alias: unique(`l${i}`) }),
      );
    }
    const first = await gw().call<ListWire>("GET", `/key/list?team_id=${team.team_id}`);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ total_count: 12, current_page: 1, total_pages: 2 });
    expect(first.body.keys).toHaveLength(10);
    expect(first.body.keys[0]?.token_id).toBe((made[11] as GeneratedWire).token_id);
    expect(JSON.stringify(first.body)).not.toMatch(/sk-[0-9A-Za-z]{48}/);
    const pages = [1, 2, 3].map((p) =>
      gw().call<ListWire>("GET", `/key/list?team_id=${team.team_id}&size=5&page=${p}`),
    );
    const [p1, p2, p3] = await Promise.all(pages);
    expect([p1?.body.keys.length, p2?.body.keys.length, p3?.body.keys.length]).toEqual([5, 5, 2]);
    expect(p3?.body).toMatchObject({ total_pages: 3, current_page: 3 });
    const ids = new Set(
      [...(p1?.body.keys ?? []), ...(p2?.body.keys ?? []), ...(p3?.body.keys ?? [])].map((k) => k.token_id),
    );
    expect(ids.size).toBe(12);
    const beyond = await gw().call<ListWire>("GET", `/key/list?team_id=${team.team_id}&size=5&page=9`);
    expect(beyond.body.keys).toEqual([]);

    const odd = await gw().call<ListWire>("GET", `/key/list?team_id=${team.team_id}&user_id=odd&size=100`);
    expect(odd.body.total_count).toBe(6);
    expect(odd.body.keys.every((k) => k.user_id === "odd")).toBe(true);
    const target = made[3] as GeneratedWire;
    const byHash = await gw().call<ListWire>("GET", `/key/list?key_hash=${target.key_hash}`);
    expect(byHash.body.keys.map((k) => k.token_id)).toEqual([target.token_id]);
    const byAlias = await gw().call<ListWire>("GET", `/key/list?key_alias=${target.key_alias}`);
    expect(byAlias.body.keys.map((k) => k.token_id)).toEqual([target.token_id]);
    const expanded = await gw().call<ListWire>("GET", `/key/list?team_id=${team.team_id}&expand=team&size=1`);
    expect(expanded.body.keys[0]?.team).toMatchObject({ team_id: team.team_id, team_alias: team.team_alias });
    expect(first.body.keys[0]).not.toHaveProperty("team");
  });

  test("list rejects bad paging and unknown expand values", async () => {
    for (const q of ["size=101", "size=0", "page=0", "page=-1", "size=abc", "page=1.5", "expand=user"]) {
      const r = await gw().call<ErrorWire>("GET", `/key/list?${q}`);
      expect(r.status).toBe(400);
      expect(r.body.error.param).toBe(q.split("=")[0] as string);
    }
  });

  test("delete by keys (secret, token_id or hash) and by key_aliases; deleted keys stop working at once", async () => {
    const a = await gw().newKey();
    const b = await gw().newKey();
    const c = await gw().newKey();
    const d = await gw().newKey({ key_alias: unique("del") });
    for (const k of [a, b, c, d]) expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200);
    const r = await gw().call<DeleteWire>("POST", "/key/delete", { body: { keys: [a.key, b.token_id, c.key_hash] } });
    expect(r.status).toBe(200);
    expect(r.body.deleted_keys.sort()).toEqual([a.token_id, b.token_id, c.token_id].sort());
    expect(JSON.stringify(r.body)).not.toContain(a.key);
    for (const k of [a, b, c]) {
      const again = await gw().call<ErrorWire>("GET", "/key/info", { key: k.key });
      expect(again.status).toBe(401);
    }
    const byAlias = await gw().call<DeleteWire>("POST", "/key/delete", { body: { key_aliases: [d.key_alias] } });
    expect(byAlias.body.deleted_keys).toEqual([d.token_id]);
    expect((await gw().call("GET", "/key/info", { key: d.key })).status).toBe(401);
  });

  test("delete with an unknown key is a 404 naming it, and deletes nothing", async () => {
    const a = await gw().newKey();
    const ghost = "sk-ghost000000000000000000000000000000000000000000000";
    const r = await gw().call<ErrorWire>("POST", "/key/delete", { body: { keys: [a.key, ghost, "no-such-token"] } });
    expect(r.status).toBe(404);
    expect(r.body.error.message).toContain("sk-...0000");
    expect(r.body.error.message).toContain("no-such-token");
    expect(r.body.error.message).not.toContain(ghost);
    const aliases = await gw().call<ErrorWire>("POST", "/key/delete", { body: { key_aliases: ["nobody-has-this"] } });
    expect(aliases.status).toBe(404);
    expect(aliases.body.error.message).toContain("nobody-has-this");
    expect((await gw().call("GET", "/key/info", { key: a.key })).status).toBe(200);
    const neither = await gw().call<ErrorWire>("POST", "/key/delete", { body: {} });
    expect(neither.status).toBe(400);
  });

  test("regenerate: new secret at once, old one rejected on the next request, settings and spend carried over", async () => {
    const k = await gw().newKey({
      key_alias: unique("regen"),
      max_budget: 10,
      rpm_limit: 7,
      tpm_limit: 700,
      models: ["a/b"],
      tags: ["t"],
      metadata: { m: 1 },
      model_rpm_limit: { "a/b": 3 },
    });
    await gw().opened.database.db.execute(sql`update api_keys set spend = 1.25 where token_id = ${k.token_id}`);
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200); // cached now
    const r = await gw().call<GeneratedWire>("POST", "/key/regenerate", {
      body: { key: k.key, max_budget: 20, duration: "1d" },
    });
    expect(r.status).toBe(200);
    const n = r.body;
    expect(n.key).toMatch(/^sk-[0-9A-Za-z]{48}$/);
    expect(n.key).not.toBe(k.key);
    expect(n.token_id).toBe(k.token_id);
    expect(n.key_name).toBe(`sk-...${n.key.slice(-4)}`);
    expect(n).toMatchObject({
      key_alias: k.key_alias,
      max_budget: 20,
      spend: 1.25,
      rpm_limit: 7,
      tpm_limit: 700,
      models: ["a/b"],
      tags: ["t"],
      metadata: { m: 1 },
      model_rpm_limit: { "a/b": 3 },
      team_id: k.team_id,
    });
    expect(n.expires).not.toBeNull();
    const old = await gw().call<ErrorWire>("GET", "/key/info", { key: k.key });
    expect(old.status).toBe(401);
    const fresh = await gw().call<KeyWire>("GET", "/key/info", { key: n.key });
    expect(fresh.status).toBe(200);
    expect(fresh.body.spend).toBe(1.25);
    // the old secret no longer names the key for management either
    expect((await gw().call("POST", "/key/regenerate", { body: { key: k.key } })).status).toBe(404);
  });

  test("a failed regenerate leaves the old key working", async () => {
    const taken = await gw().newKey({ key_alias: unique("taken") });
    const k = await gw().newKey();
    const r = await gw().call<ErrorWire>("POST", "/key/regenerate", {
      body: { key: k.key, key_alias: taken.key_alias },
    });
    expect(r.status).toBe(409);
    const bad = await gw().call<ErrorWire>("POST", "/key/regenerate", { body: { key: k.key, max_budget: -1 } });
    expect(bad.status).toBe(400);
    const still = await gw().call<KeyWire>("GET", "/key/info", { key: k.key });
    expect(still.status).toBe(200);
    expect(still.body.key_hash).toBe(k.key_hash);
  });

  test("concurrent regenerates of one key: exactly one wins", async () => {
    const k = await gw().newKey();
    const results = await Promise.all(
      Array.from({ length: 4 }, () =>
        gw().call<GeneratedWire>("POST", "/key/regenerate", { body: { key: k.token_id } }),
      ),
    );
    const winners = results.filter((r) => r.status === 200);
    expect(winners.length).toBeGreaterThanOrEqual(1);
    const working = [];
    for (const w of winners)
      if ((await gw().call("GET", "/key/info", { key: w.body.key })).status === 200) working.push(w);
    expect(working).toHaveLength(1);
    for (const r of results) if (r.status !== 200) expect([404, 409]).toContain(r.status);
  });

  test("block and unblock take effect on the next request", async () => {
    const k = await gw().newKey();
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200);
    const blocked = await gw().call<KeyWire>("POST", "/key/block", { body: { key: k.key } });
    expect(blocked.status).toBe(200);
    expect(blocked.body.blocked).toBe(true);
    const denied = await gw().call<ErrorWire>("GET", "/key/info", { key: k.key });
    expect(denied.status).toBe(401);
    expect(denied.body.error.code).toBe("key_blocked");
    const unblocked = await gw().call<KeyWire>("POST", "/key/unblock", { body: { key: k.token_id } });
    expect(unblocked.body.blocked).toBe(false);
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(200);
    // blocked via update as well
    await gw().call("POST", "/key/update", { body: { key: k.key, blocked: true } });
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(401);
    const missing = await gw().call<ErrorWire>("POST", "/key/block", { body: { key: "nope" } });
    expect(missing.status).toBe(404);
  });

  test("a key created blocked cannot authenticate", async () => {
    const k = await gw().newKey({ blocked: true });
    expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(401);
  });

  /**
   * A regenerate that commits between an update's read and its write: the write returns the new
   * hash, whose record a cache may already hold from before the write. A trigger swaps the hash
   * inside the update, as the concurrent regenerate would have.
   */
  const withHashSwap = async (tokenId: string, newHash: string, run: () => Promise<void>) => {
    const db = gw().opened.database.db;
    const fn = `gw_swap_${tokenId.replace(/-/g, "_")}`;
    await db.execute(
      sql.raw(`create function ${fn}() returns trigger language plpgsql as $$
        begin new.key_hash := '${newHash}'; return new; end $$`),
    );
    await db.execute(
      sql.raw(`create trigger ${fn} before update on api_keys for each row
        when (old.token_id = '${tokenId}') execute function ${fn}()`),
    );
    try {
      await run();
    } finally {
      await db.execute(sql.raw(`drop trigger ${fn} on api_keys`));
      await db.execute(sql.raw(`drop function ${fn}()`));
    }
  };

  test("update and block forget the cached record of the hash their write returned, not only the one they read", async () => {
    for (const action of ["update", "block"] as const) {
      const k = await gw().newKey({ rpm_limit: 5 });
      const next = generateSecret();
      // the cache learns that the next secret is unknown
      expect((await gw().call("GET", "/key/info", { key: next })).status).toBe(401);
      await withHashSwap(k.token_id, hashSecret(next), async () => {
        const r =
          action === "update"
            ? await gw().call<KeyWire>("POST", "/key/update", { body: { key: k.token_id, rpm_limit: 7 } })
            : await gw().call<KeyWire>("POST", "/key/block", { body: { key: k.token_id } });
        expect(r.status).toBe(200);
        expect(r.body.key_hash).toBe(hashSecret(next));
      });
      const after = await gw().call<KeyWire & ErrorWire>("GET", "/key/info", { key: next });
      if (action === "update") {
        expect(after.status).toBe(200);
        expect(after.body.rpm_limit).toBe(7);
      } else {
        expect(after.status).toBe(401);
        expect(after.body.error.code).toBe("key_blocked");
      }
      expect((await gw().call("GET", "/key/info", { key: k.key })).status).toBe(401);
    }
  });

  test("updated_at, the record's version, strictly increases on every change, whatever the gateway's clock says", async () => {
    const k = await gw().newKey();
    const stamps = [Date.parse(k.updated_at)];
    const change = async (path: string, body: Record<string, unknown>) => {
      const r = await gw().call<KeyWire>("POST", path, { body: { key: k.token_id, ...body } });
      expect(r.status).toBe(200);
      stamps.push(Date.parse(r.body.updated_at));
    };
    // changes in quick succession, some from an instance whose clock is a minute behind
    for (let i = 0; i < 4; i++) {
      await change("/key/update", { rpm_limit: i });
      gw().clock.advance(i % 2 === 0 ? -60_000 : 60_000);
      await change("/key/block", {});
      await change("/key/unblock", {});
    }
    const regen = await gw().call<GeneratedWire>("POST", "/key/regenerate", { body: { key: k.token_id } });
    stamps.push(Date.parse(regen.body.updated_at));
    for (let i = 1; i < stamps.length; i++) expect(stamps[i] as number).toBeGreaterThan(stamps[i - 1] as number);
    // concurrent changes each get their own version
    const concurrent = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        gw().call<KeyWire>("POST", "/key/update", { body: { key: k.token_id, tpm_limit: i } }),
      ),
    );
    const versions = concurrent.map((r) => Date.parse(r.body.updated_at));
    expect(new Set(versions).size).toBe(8);
    expect(Math.min(...versions)).toBeGreaterThan(stamps.at(-1) as number);
  });

  test("a record whose updated_at is in the future still gets a later version on its next change", async () => {
    const k = await gw().newKey();
    const future = new Date(Date.now() + 86_400_000);
    await gw().opened.database.db.execute(
      sql`update api_keys set updated_at = ${future.toISOString()}::timestamptz where token_id = ${k.token_id}`,
    );
    const r = await gw().call<KeyWire>("POST", "/key/update", { body: { key: k.token_id, rpm_limit: 1 } });
    expect(Date.parse(r.body.updated_at)).toBe(future.getTime() + 1);
    const b = await gw().call<KeyWire>("POST", "/key/block", { body: { key: k.token_id } });
    expect(Date.parse(b.body.updated_at)).toBe(future.getTime() + 2);
  });
});
