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
