/**
 * The ceiling for any proxy on this machine: a bare Bun fetch-forwarder, no parsing, no auth.
 * `UPSTREAM_URL=http://127.0.0.1:<mock> bun bench/forwarder.ts`; prints `forwarder listening <port>`.
 * The upstream's body (JSON or SSE) is streamed through as it arrives.
 */
const upstream = process.env.UPSTREAM_URL as string;
const forwarderServer = Bun.serve({
  port: Number(process.env.FORWARDER_PORT ?? 0),
  hostname: "127.0.0.1",
  idleTimeout: 0,
  async fetch(req) {
    const url = new URL(req.url);
    const res = await fetch(upstream + url.pathname + url.search, {
      method: req.method,
      headers: { "content-type": req.headers.get("content-type") ?? "application/json" },
      body: await req.arrayBuffer(),
    });
    return new Response(res.body, {
      status: res.status,
      headers: { "content-type": res.headers.get("content-type") ?? "" },
    });
  },
});
console.log(`forwarder listening ${forwarderServer.port}`);
