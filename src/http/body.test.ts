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

  test("415 for other media types, 400 for malformed JSON", async () => {
    expect(await statusOf(parseJsonBody(req("a=1"), "application/x-www-form-urlencoded", 100))).toBe(415);
    expect(await statusOf(parseJsonBody(req("{"), "application/json", 100))).toBe(400);
  });
});
