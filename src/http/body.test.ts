import { describe, expect, test } from "bun:test";
import { parseJsonBody } from "./body";
import { GatewayError } from "./errors";

const req = (body: string | ReadableStream<Uint8Array>, headers: Record<string, string> = {}) =>
  new Request("http://localhost/x", { method: "POST", body, headers });

async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (e) {
    return e instanceof GatewayError ? e.status : 500;
  }
}

describe("JSON bodies", () => {
  test("parses JSON; empty is undefined", async () => {
    expect(await parseJsonBody(req('{"a":1}'), "application/json", 100)).toEqual({ a: 1 });
    expect(await parseJsonBody(req("  "), "application/json", 100)).toBeUndefined();
    expect(await parseJsonBody(req("[1]"), "application/vnd.api+json", 100)).toEqual([1]);
  });

  test("the limit counts bytes, not characters", async () => {
    const text = JSON.stringify({ s: "é".repeat(60) }); // 68 characters, 128 bytes
    expect(text.length).toBeLessThan(100);
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode(text));
        c.close();
      },
    });
    expect(await statusOf(parseJsonBody(req(stream), "application/json", 100))).toBe(413);
    expect(await statusOf(parseJsonBody(req(text, { "content-length": "128" }), "application/json", 100))).toBe(413);
  });

  test("a chunked body is abandoned as soon as it passes the limit, however long it goes on", async () => {
    let pulls = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(c) {
        pulls++;
        c.enqueue(new Uint8Array(1024));
      },
    });
    expect(await statusOf(parseJsonBody(req(endless), "application/json", 10 * 1024))).toBe(413);
    expect(pulls).toBeLessThan(20);
    // many small chunks under the limit are joined in order
    const parts = ['{"a":', '"x', 'y"', "}"];
    const chunked = new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of parts) c.enqueue(new TextEncoder().encode(p));
        c.close();
      },
    });
    expect(await parseJsonBody(req(chunked), "application/json", 100)).toEqual({ a: "xy" });
  });

  test("415 for other media types, 400 for malformed JSON", async () => {
    expect(await statusOf(parseJsonBody(req("a=1"), "application/x-www-form-urlencoded", 100))).toBe(415);
    expect(await statusOf(parseJsonBody(req("{"), "application/json", 100))).toBe(400);
  });
});
