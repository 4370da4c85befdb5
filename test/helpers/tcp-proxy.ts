/**
 * A TCP proxy in front of a real service (Postgres, Redis) that a test can cut and restore, to
 * produce genuine outages: refused connections and reset sockets, then recovery. It can also stall:
 * connections stay open (and new ones are accepted) but nothing is forwarded, like a server that
 * stopped answering or a network path that silently drops packets.
 */
import type { Socket, TCPSocketListener } from "bun";

/** One direction of a connection: a socket and what could not be written to it yet. */
interface Side {
  socket?: Socket<Pair>;
  backlog: Uint8Array[];
}

interface Pair {
  client: Side;
  upstream: Side;
}

function send(side: Side, chunk: Uint8Array): void {
  if (!side.socket || side.backlog.length > 0) {
    side.backlog.push(chunk.slice());
    return;
  }
  const written = side.socket.write(chunk);
  if (written >= 0 && written < chunk.length) side.backlog.push(chunk.slice(written));
}

function flush(side: Side): void {
  while (side.socket && side.backlog.length > 0) {
    const chunk = side.backlog[0] as Uint8Array;
    const written = side.socket.write(chunk);
    if (written < 0) return;
    if (written < chunk.length) {
      side.backlog[0] = chunk.slice(written);
      return;
    }
    side.backlog.shift();
  }
}

export interface TcpProxy {
  readonly port: number;
  /** Resets every open connection and refuses new ones until `restore()`. */
  cut(): void;
  restore(): void;
  /** Keeps connections open but forwards nothing, either way, until `resume()`. */
  stall(): void;
  /** Resets the connections that lost data while stalled and forwards again. */
  resume(): void;
  stop(): void;
}

export function startTcpProxy(targetHost: string, targetPort: number): TcpProxy {
  const pairs = new Set<Pair>();
  let listener: TCPSocketListener<Pair> | undefined;
  let port = 0;
  let stalled = false;
  const forward = (side: Side, chunk: Uint8Array) => {
    if (!stalled) send(side, chunk);
  };

  const close = (pair: Pair) => {
    pair.client.socket?.end();
    pair.upstream.socket?.end();
    pairs.delete(pair);
  };

  const listen = () => {
    listener = Bun.listen<Pair>({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(client) {
          const pair: Pair = { client: { socket: client, backlog: [] }, upstream: { backlog: [] } };
          client.data = pair;
          pairs.add(pair);
          Bun.connect<Pair>({
            hostname: targetHost,
            port: targetPort,
            data: pair,
            socket: {
              open(upstream) {
                pair.upstream.socket = upstream;
                flush(pair.upstream);
              },
              data: (_s, chunk) => forward(pair.client, chunk),
              drain: () => flush(pair.upstream),
              end: () => close(pair),
              close: () => close(pair),
              error: () => close(pair),
            },
          }).catch(() => close(pair));
        },
        data: (client, chunk) => forward(client.data.upstream, chunk),
        drain: (client) => flush(client.data.client),
        end: (client) => close(client.data),
        close: (client) => close(client.data),
        error: (client) => close(client.data),
      },
    });
    port = listener.port;
  };
  listen();

  const cut = () => {
    listener?.stop(true);
    listener = undefined;
    for (const p of pairs) {
      p.client.socket?.terminate();
      p.upstream.socket?.terminate();
    }
    pairs.clear();
  };
  return {
    get port() {
      return port;
    },
    cut,
    restore: () => {
      if (!listener) listen();
    },
    stall: () => {
      stalled = true;
    },
    resume: () => {
      for (const p of pairs) {
        p.client.socket?.terminate();
        p.upstream.socket?.terminate();
      }
      pairs.clear();
      stalled = false;
    },
    stop: cut,
  };
}
