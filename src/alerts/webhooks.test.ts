import { afterAll, describe, expect, test } from "bun:test";
import { createLogger } from "../log";
import { AlertDispatcher, type SoftBudgetEvent, signature } from "./webhooks";

const received: { headers: Headers; body: string }[] = [];
let failuresLeft = 0;
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    const body = await req.text();
    const path = new URL(req.url).pathname;
    if (path === "/reject") return new Response("no", { status: 400 });
    if (failuresLeft > 0) {
      failuresLeft--;
      return new Response("busy", { status: 503 });
    }
    received.push({ headers: req.headers, body });
    return new Response("ok");
  },
});
afterAll(() => void server.stop(true));

const event: SoftBudgetEvent = {
  type: "soft_budget_crossed",
  event_id: "evt_1",
  time: "2026-11-22T00:00:00.000Z",
  key: { token_id: "tok", key_alias: "search-prod", key_name: "sk-...abcd" },
  team: { team_id: "search", team_alias: null },
  spend: 8.5,
  soft_budget: 8,
  max_budget: 10,
  window_ends_at: null,
};

describe("alert webhooks", () => {
  test("POSTs the event as JSON, signed, retrying 5xx with backoff; every event is logged", async () => {
    const logs: string[] = [];
    const sleeps: number[] = [];
    failuresLeft = 2;
    const d = new AlertDispatcher(
      [{ url: `http://127.0.0.1:${server.port}/hook?token=secret-in-url`, secret: "whsec" }],
      createLogger("debug", (l) => void logs.push(l)),
      { maxAttempts: 5, backoffMs: 10, timeoutMs: 1000 },
      async (ms) => void sleeps.push(ms),
    );
    d.emit(event);
    await d.idle();
    expect(received).toHaveLength(1);
    const got = received[0] as { headers: Headers; body: string };
    expect(JSON.parse(got.body)).toEqual(event);
    const ts = got.headers.get("x-gateway-timestamp") as string;
    expect(got.headers.get("x-gateway-signature")).toBe(signature("whsec", ts, got.body));
    expect(got.headers.get("content-type")).toBe("application/json");
    expect(sleeps).toEqual([10, 20]);
    expect(logs.some((l) => l.includes('"msg":"alert"') && l.includes("search-prod"))).toBe(true);
    expect(logs.join("\n")).not.toContain("secret-in-url");
  });

  test("a 4xx refusal is not retried; an unreachable hook gives up after max attempts", async () => {
    const logs: string[] = [];
    const sleeps: number[] = [];
    const d = new AlertDispatcher(
      [{ url: `http://127.0.0.1:${server.port}/reject` }, { url: "http://127.0.0.1:1/hook" }],
      createLogger("debug", (l) => void logs.push(l)),
      { maxAttempts: 3, backoffMs: 5, timeoutMs: 500 },
      async (ms) => void sleeps.push(ms),
    );
    d.emit(event);
    await d.idle();
    expect(sleeps).toEqual([5, 10]);
    expect(logs.filter((l) => l.includes("alert webhook delivery failed"))).toHaveLength(2);
  });
});
