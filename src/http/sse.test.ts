import { describe, expect, test } from "bun:test";
import { readSse, sseFrame } from "./sse";

function streamOf(...chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
}

async function collect(s: ReadableStream<Uint8Array>) {
  const out = [];
  for await (const e of readSse(s)) out.push(e);
  return out;
}

describe("SSE", () => {
  test("reads data and event lines across arbitrary chunk boundaries", async () => {
    const text = 'event: message_start\ndata: {"a":1}\n\n: comment\n\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n';
    for (let cut = 1; cut < text.length; cut += 7) {
      const events = await collect(streamOf(text.slice(0, cut), text.slice(cut)));
      expect(events).toEqual([
        { event: "message_start", data: '{"a":1}' },
        { data: "line1\nline2" },
        { data: "[DONE]" },
      ]);
    }
  });

  test("handles CRLF and CR line endings, a missing final blank line, and multi-byte characters split across chunks", async () => {
    expect(await collect(streamOf("data: a\r\n\r\ndata: b\r\rdata: c"))).toEqual([
      { data: "a" },
      { data: "b" },
      { data: "c" },
    ]);
    expect(await collect(streamOf("data: x\r"))).toEqual([{ data: "x" }]);
    const bytes = new TextEncoder().encode('data: {"t":"é°"}\n\n');
    const s = new ReadableStream<Uint8Array>({
      start(c) {
        for (const b of bytes) c.enqueue(new Uint8Array([b]));
        c.close();
      },
    });
    expect(await collect(s)).toEqual([{ data: '{"t":"é°"}' }]);
  });

  test("writes frames and round-trips multi-line data", async () => {
    const dec = new TextDecoder();
    expect(dec.decode(sseFrame('{"x":1}'))).toBe('data: {"x":1}\n\n');
    expect(dec.decode(sseFrame("{}", "ping"))).toBe("event: ping\ndata: {}\n\n");
    expect(() => sseFrame("{}", "bad\nname")).toThrow();
    const multi = dec.decode(sseFrame("a\nb"));
    expect(await collect(streamOf(multi))).toEqual([{ data: "a\nb" }]);
  });
});
