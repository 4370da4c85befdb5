/**
 * A scriptable mock upstream on a real port. Tests queue responses (JSON, SSE streams with delays,
 * raw bytes, failures) and inspect every request it received: path, query, headers and body.
 */
import type { Server } from "bun";

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: Record<string, string>;
  text: string;
  /** The body parsed as JSON, when it is JSON. */
  json: unknown;
}

export type MockHandler = (req: RecordedRequest, raw: Request) => Response | Promise<Response>;

export interface MockUpstream {
  url: string;
  requests: RecordedRequest[];
  /** Handlers used once each, in order, before the default. */
  enqueue(...handlers: MockHandler[]): void;
  setDefault(handler: MockHandler): void;
  /** Requests still open (streams in progress). */
  readonly open: number;
  reset(): void;
  close(): void;
}

export function startMockUpstream(defaultHandler?: MockHandler): MockUpstream {
  const queue: MockHandler[] = [];
  let fallback: MockHandler =
    defaultHandler ?? (() => Response.json({ error: { message: "no mock response queued" } }, { status: 500 }));
  const requests: RecordedRequest[] = [];
  let open = 0;
  const server: Server<undefined> = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(raw) {
      const url = new URL(raw.url);
      const text = await raw.text();
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      const rec: RecordedRequest = {
        method: raw.method,
        path: url.pathname,
        query: url.searchParams,
        headers: Object.fromEntries(raw.headers.entries()),
        text,
        json,
      };
      requests.push(rec);
      const handler = queue.shift() ?? fallback;
      open++;
      try {
        const res = await handler(rec, raw);
        if (res.body) {
          const reader = res.body.getReader();
          // Closed once, whichever comes first: the end, or the client going away (which also
          // ends a read that is still pending).
          let closed = false;
          const tracked = new ReadableStream<Uint8Array>({
            async pull(c) {
              const { done, value } = await reader.read();
              if (closed) return;
              if (done) {
                closed = true;
                open--;
                c.close();
              } else c.enqueue(value);
            },
            cancel() {
              if (!closed) open--;
              closed = true;
              void reader.cancel();
            },
          });
          return new Response(tracked, { status: res.status, headers: res.headers });
        }
        open--;
        return res;
      } catch (e) {
        open--;
        throw e;
      }
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    enqueue: (...h) => void queue.push(...h),
    setDefault: (h) => {
      fallback = h;
    },
    get open() {
      return open;
    },
    reset: () => {
      queue.length = 0;
      requests.length = 0;
    },
    close: () => void server.stop(true),
  };
}

const enc = new TextEncoder();

/** A response whose body is written frame by frame, with a pause before each frame. */
export function streamResponse(
  frames: string[],
  opts: { delayMs?: number; status?: number; headers?: Record<string, string>; contentType?: string } = {},
): Response {
  const body = new ReadableStream<Uint8Array>({
    async start(c) {
      for (const f of frames) {
        if (opts.delayMs) await Bun.sleep(opts.delayMs);
        c.enqueue(enc.encode(f));
      }
      c.close();
    },
  });
  return new Response(body, {
    status: opts.status ?? 200,
    headers: { "content-type": opts.contentType ?? "text/event-stream", ...opts.headers },
  });
}

/** SSE frames from data objects (and optional event names). */
export function sse(events: (unknown | { event: string; data: unknown })[]): string[] {
  return events.map((e) => {
    if (e && typeof e === "object" && "event" in e && "data" in e) {
      const ev = e as { event: string; data: unknown };
      return `event: ${ev.event}\ndata: ${typeof ev.data === "string" ? ev.data : JSON.stringify(ev.data)}\n\n`;
    }
    return `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`;
  });
}

/**
 * An upstream that answers every request with a 200, sends the first part of a body and then closes
 * the connection: a provider that drops mid-answer or mid-stream (a truncated JSON body, or SSE
 * frames without their end). Speaks raw HTTP/1.1 so the cut is a real one.
 */
export function startCuttingUpstream(
  partial: string,
  contentType = "text/event-stream",
): { url: string; hits: number; close(): void } {
  const state = { hits: 0 };
  const server = Bun.listen<{ buffered: string }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        socket.data = { buffered: "" };
      },
      data(socket, chunk) {
        socket.data.buffered += new TextDecoder().decode(chunk);
        const head = socket.data.buffered.indexOf("\r\n\r\n");
        if (head < 0) return;
        const length = /content-length:\s*(\d+)/i.exec(socket.data.buffered.slice(0, head))?.[1];
        if (socket.data.buffered.length < head + 4 + Number(length ?? 0)) return;
        state.hits++;
        const body = new TextEncoder().encode(partial);
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: ${contentType}\r\ncontent-length: ${body.length + 4096}\r\n\r\n`,
        );
        socket.write(body);
        setTimeout(() => socket.end(), 20);
      },
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    get hits() {
      return state.hits;
    },
    close: () => server.stop(true),
  };
}
