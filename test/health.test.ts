import { afterAll, expect, test } from "bun:test";
import { openDatabase } from "../src/store/db";
import { createTempDatabase, IN_CI, POSTGRES_AVAILABLE, pgliteBackend } from "./helpers/backends";
import { describeEachBackend, type ErrorWire, startGateway, type TestGateway } from "./helpers/gateway";
import { startTcpProxy } from "./helpers/tcp-proxy";

type Readiness = { status: string; dependencies: Record<string, { status: string; error?: string }> };

describeEachBackend("health", (gw) => {
  test("liveness answers 200 without auth on both paths", async () => {
    for (const path of ["/health/liveliness", "/health/liveness"]) {
      const r = await gw().call<{ status: string }>("GET", path, { key: null });
      expect(r.status).toBe(200);
      expect(r.body.status).toBe("alive");
    }
  });

  test("readiness reports the database up and Redis not configured", async () => {
    const r = await gw().call<Readiness>("GET", "/health/readiness", { key: null });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      status: "ready",
      dependencies: { database: { status: "up" }, redis: { status: "not_configured" } },
    });
  });
});

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups) await c();
});

test("embedded database closed underneath: readiness 503, management calls 503 in the envelope", async () => {
  const gw: TestGateway = await startGateway(pgliteBackend);
  cleanups.push(() => gw.close());
  const key = await gw.newKey();
  await gw.opened.database.close();
  const ready = await gw.call<Readiness>("GET", "/health/readiness", { key: null });
  expect(ready.status).toBe(503);
  expect(ready.body.status).toBe("unavailable");
  expect(ready.body.dependencies.database?.status).toBe("down");
  const r = await gw.call<ErrorWire>("POST", "/team/new", { body: {} });
  expect(r.status).toBe(503);
  expect(r.body.error.code).toBe("service_unavailable");
  expect(r.text).not.toContain("PGlite");
  // an authenticated management read fails the same way, not with a 500
  const info = await gw.call<ErrorWire>("GET", `/key/info?key=${key.token_id}`);
  expect(info.status).toBe(503);
});

test("Postgres outage: readiness 503 and management 503 while it lasts, recovery without restart", async () => {
  if (!POSTGRES_AVAILABLE) {
    if (IN_CI) throw new Error("CI=true requires Postgres for the outage test");
    return;
  }
  const temp = await createTempDatabase();
  const url = new URL(temp.url);
  const proxy = startTcpProxy(url.hostname, Number(url.port || 5432));
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  const database = await openDatabase({ url: url.toString() });
  const gw = await startGateway({ name: "postgres", open: async () => ({ database, dispose: async () => {} }) });
  cleanups.push(async () => {
    await database.close().catch(() => {});
    proxy.stop();
    await temp.drop();
  });
  expect((await gw.call("GET", "/health/readiness", { key: null })).status).toBe(200);

  proxy.cut();
  const ready = await gw.call<Readiness>("GET", "/health/readiness", { key: null });
  expect(ready.status).toBe(503);
  expect(ready.body.dependencies.database?.status).toBe("down");
  const r = await gw.call<ErrorWire>("POST", "/team/new", { body: {} });
  expect(r.status).toBe(503);
  expect(r.body.error.type).toBe("service_unavailable");

  proxy.restore();
  let status = 0;
  for (let i = 0; i < 50 && status !== 200; i++) {
    status = (await gw.call("GET", "/health/readiness", { key: null })).status;
    if (status !== 200) await Bun.sleep(100);
  }
  expect(status).toBe(200);
  expect((await gw.call("POST", "/team/new", { body: {} })).status).toBe(200);
});
