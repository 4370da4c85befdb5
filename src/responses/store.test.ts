/** The response store on PGlite and Postgres: key scoping, expiry, pruning, and writes racing reads. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "drizzle-orm";
import { BACKENDS, type OpenedBackend } from "../../test/helpers/backends";
import { createLogger } from "../log";
import { storedResponses } from "../store/schema";
import { isGatewayResponseId, parseResponseId, ResponseStore } from "./store";

const DAY = 86_400_000;

for (const backend of BACKENDS) {
  describe(`response store [${backend.name}]`, () => {
    let opened: OpenedBackend;
    let offset = 0;
    const now = () => Date.now() + offset;
    const logs: string[] = [];
    const log = createLogger("debug", (l) => void logs.push(l));
    /** Two stores on one database: two gateway instances. */
    let a: ResponseStore;
    let b: ResponseStore;

    beforeAll(async () => {
      opened = await backend.open();
      a = new ResponseStore(opened.database.db, { retentionMs: 30 * DAY, log, now, settleMs: 2000 });
      b = new ResponseStore(opened.database.db, { retentionMs: 30 * DAY, log, now, settleMs: 2000 });
    });
    afterAll(async () => {
      await opened?.dispose();
    });

    const record = (id: string, tokenId: string | null) => ({
      id,
      tokenId,
      model: "openai/gpt-4o-mini",
      requestId: "req_1",
      input: [{ role: "user", content: "Hi" }],
      response: {
        id,
        object: "response",
        output: [{ type: "message", content: [{ type: "output_text", text: "Hello" }] }],
      },
    });

    test("ids carry whether they will be stored and when they were minted", () => {
      const id = a.mintId(true);
      expect(id).toMatch(/^resp_gws[0-9a-z]{9}[0-9a-f]{24}$/);
      expect(parseResponseId(id)?.stored).toBe(true);
      expect(Math.abs((parseResponseId(id)?.mintedAt ?? 0) - now())).toBeLessThan(1000);
      expect(parseResponseId(a.mintId(false))?.stored).toBe(false);
      expect(a.mintId(true)).not.toBe(id);
      expect(isGatewayResponseId("resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b")).toBe(false);
    });

    test("a response is readable by its key only, from any instance, and round-trips its JSON", async () => {
      const id = a.mintId(true);
      await a.save(record(id, "tok-1"));
      const got = await b.load(id, "tok-1");
      expect(got).toMatchObject({ id, tokenId: "tok-1", model: "openai/gpt-4o-mini", requestId: "req_1" });
      expect(got?.input).toEqual([{ role: "user", content: "Hi" }]);
      expect(got?.response).toEqual(record(id, "tok-1").response);
      expect(got?.expiresAt.getTime()).toBe((got?.createdAt.getTime() ?? 0) + 30 * DAY);
      expect(await b.load(id, "tok-2")).toBeUndefined();
      expect(await b.load(id, null)).toBeUndefined();

      const master = a.mintId(true);
      await a.save(record(master, null));
      expect((await b.load(master, null))?.id).toBe(master);
      expect(await b.load(master, "tok-1")).toBeUndefined();
    });

    test("past its retention a response is unusable, and pruning removes it", async () => {
      const id = a.mintId(true);
      await a.save(record(id, "tok-1"));
      offset += 30 * DAY + 1000;
      try {
        expect(await b.load(id, "tok-1")).toBeUndefined();
        expect(await b.delete(id, "tok-1")).toBe(false);
        const pruned = await b.prune();
        expect(pruned).toBeGreaterThanOrEqual(1);
        const left = await opened.database.db.select().from(storedResponses).where(sql`${storedResponses.id} = ${id}`);
        expect(left).toHaveLength(0);
      } finally {
        offset -= 30 * DAY + 1000;
      }
    });

    test("a lookup racing the insert on another instance waits for it; ids never to be stored do not wait", async () => {
      const id = a.mintId(true);
      // Instance A's insert lands 300 ms after instance B is asked for the id.
      const late = Bun.sleep(300).then(() => a.save(record(id, "tok-1")));
      const started = performance.now();
      const got = await b.load(id, "tok-1");
      expect(got?.id).toBe(id);
      expect(performance.now() - started).toBeGreaterThanOrEqual(250);
      await late;

      const t0 = performance.now();
      expect(await b.load(a.mintId(false), "tok-1")).toBeUndefined();
      expect(await b.load("resp_unknown", "tok-1")).toBeUndefined();
      expect(performance.now() - t0).toBeLessThan(200);

      // A fresh stored-kind id that never arrives: 404 once the settle window has passed.
      const t1 = performance.now();
      expect(await b.load(a.mintId(true), "tok-1")).toBeUndefined();
      expect(performance.now() - t1).toBeGreaterThanOrEqual(1900);
    });

    test("on the instance that is writing, a lookup waits for the write in flight", async () => {
      const id = a.mintId(true);
      void a.save(record(id, "tok-9"));
      const t0 = performance.now();
      expect((await a.load(id, "tok-9"))?.id).toBe(id);
      expect(performance.now() - t0).toBeLessThan(1000);
    });

    test("an old id that is missing is answered at once", async () => {
      offset += 60_000;
      try {
        const old = a.mintId(true);
        offset += 60_000;
        const t0 = performance.now();
        expect(await b.load(old, "tok-1")).toBeUndefined();
        expect(performance.now() - t0).toBeLessThan(200);
      } finally {
        offset -= 120_000;
      }
    });

    test("delete: only the owner's, once", async () => {
      const id = a.mintId(true);
      await a.save(record(id, "tok-1"));
      expect(await b.delete(id, "tok-2")).toBe(false);
      expect(await b.delete(id, "tok-1")).toBe(true);
      expect(await b.delete(id, "tok-1")).toBe(false);
      expect(await a.load(id, "tok-1")).toBeUndefined();
    });

    test("a failed write is logged, not thrown", async () => {
      const id = a.mintId(true);
      await a.save(record(id, "tok-1"));
      await expect(a.save({ ...record(id, "tok-1"), model: null as unknown as string })).resolves.toBeUndefined();
      expect(logs.some((l) => l.includes("storing a response failed") && l.includes(id))).toBe(true);
    });
  });
}
