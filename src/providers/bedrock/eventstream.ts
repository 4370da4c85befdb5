/**
 * `application/vnd.amazon.eventstream`: AWS's binary framing for streamed responses (Bedrock
 * ConverseStream, Transcribe, S3 Select...). Every message is
 *
 *   total length (u32 BE) | headers length (u32 BE) | prelude CRC32 (over the 8 bytes before it)
 *   headers: repeated [name length (u8) | name (UTF-8) | type (u8) | value]
 *   payload (total - headers - 16 bytes)
 *   message CRC32 (u32 BE, over everything before it)
 *
 * The decoder is an async generator over a byte stream: messages may be split across chunks, and a
 * chunk may hold several messages. Both CRCs are verified; a mismatch or a truncated stream is an
 * EventStreamError. The encoder exists for tests (mock upstreams) and round-trip checks.
 */

export type HeaderValue =
  | { type: "bool"; value: boolean }
  | { type: "byte"; value: number }
  | { type: "short"; value: number }
  | { type: "int"; value: number }
  | { type: "long"; value: bigint }
  | { type: "bytes"; value: Uint8Array }
  | { type: "string"; value: string }
  | { type: "timestamp"; value: Date }
  | { type: "uuid"; value: string };

export interface EventStreamMessage {
  headers: Record<string, HeaderValue>;
  payload: Uint8Array;
}

export class EventStreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EventStreamError";
  }
}

/** Limits from AWS's implementations: 16 MiB per message, 128 KiB of headers. */
const MAX_MESSAGE = 16 * 1024 * 1024;
const MAX_HEADERS = 128 * 1024;
const PRELUDE = 12;
const MIN_MESSAGE = PRELUDE + 4;

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE 802.3, the zlib one). */
export function crc32(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let c = 0xffffffff;
  for (let i = start; i < end; i++) c = (CRC_TABLE[(c ^ (bytes[i] as number)) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const TYPE_CODES = {
  boolTrue: 0,
  boolFalse: 1,
  byte: 2,
  short: 3,
  int: 4,
  long: 5,
  bytes: 6,
  string: 7,
  timestamp: 8,
  uuid: 9,
} as const;

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
function fromUtf8(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw new EventStreamError("event stream header is not valid UTF-8");
  }
}

function decodeHeaders(bytes: Uint8Array, view: DataView, start: number, end: number): Record<string, HeaderValue> {
  const headers: Record<string, HeaderValue> = {};
  let at = start;
  const need = (n: number) => {
    if (at + n > end) throw new EventStreamError("event stream header runs past the headers section");
  };
  while (at < end) {
    need(1);
    const nameLen = view.getUint8(at++);
    need(nameLen + 1);
    const name = fromUtf8(bytes.subarray(at, at + nameLen));
    at += nameLen;
    const type = view.getUint8(at++);
    let value: HeaderValue;
    switch (type) {
      case TYPE_CODES.boolTrue:
      case TYPE_CODES.boolFalse:
        value = { type: "bool", value: type === TYPE_CODES.boolTrue };
        break;
      case TYPE_CODES.byte:
        need(1);
        value = { type: "byte", value: view.getInt8(at) };
        at += 1;
        break;
      case TYPE_CODES.short:
        need(2);
        value = { type: "short", value: view.getInt16(at) };
        at += 2;
        break;
      case TYPE_CODES.int:
        need(4);
        value = { type: "int", value: view.getInt32(at) };
        at += 4;
        break;
      case TYPE_CODES.long:
        need(8);
        value = { type: "long", value: view.getBigInt64(at) };
        at += 8;
        break;
      case TYPE_CODES.timestamp:
        need(8);
        value = { type: "timestamp", value: new Date(Number(view.getBigInt64(at))) };
        at += 8;
        break;
      case TYPE_CODES.bytes:
      case TYPE_CODES.string: {
        need(2);
        const len = view.getUint16(at);
        at += 2;
        need(len);
        const raw = bytes.slice(at, at + len);
        at += len;
        value = type === TYPE_CODES.string ? { type: "string", value: fromUtf8(raw) } : { type: "bytes", value: raw };
        break;
      }
      case TYPE_CODES.uuid: {
        need(16);
        const hex = Buffer.from(bytes.subarray(at, at + 16)).toString("hex");
        at += 16;
        value = {
          type: "uuid",
          value: `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`,
        };
        break;
      }
      default:
        throw new EventStreamError(`event stream header '${name}' has unknown type ${type}`);
    }
    headers[name] = value;
  }
  return headers;
}

/** Decodes one whole message (exactly `total length` bytes). */
export function decodeMessage(bytes: Uint8Array): EventStreamMessage {
  if (bytes.length < MIN_MESSAGE) throw new EventStreamError("event stream message shorter than its prelude");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const total = view.getUint32(0);
  const headersLen = view.getUint32(4);
  if (total !== bytes.length) throw new EventStreamError("event stream message length does not match its prelude");
  if (crc32(bytes, 0, 8) !== view.getUint32(8)) throw new EventStreamError("event stream prelude CRC mismatch");
  if (crc32(bytes, 0, total - 4) !== view.getUint32(total - 4))
    throw new EventStreamError("event stream message CRC mismatch");
  if (headersLen > MAX_HEADERS || PRELUDE + headersLen + 4 > total)
    throw new EventStreamError("event stream headers length is out of range");
  const headers = decodeHeaders(bytes, view, PRELUDE, PRELUDE + headersLen);
  return { headers, payload: bytes.slice(PRELUDE + headersLen, total - 4) };
}

/** Bytes received but not yet consumed, kept as a list of chunks until a whole message is there. */
class ByteQueue {
  private chunks: Uint8Array[] = [];
  length = 0;

  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  /** The first `n` bytes, without consuming them. */
  peek(n: number): Uint8Array {
    const first = this.chunks[0] as Uint8Array;
    if (first.length >= n) return first.subarray(0, n);
    const out = new Uint8Array(n);
    let at = 0;
    for (const c of this.chunks) {
      const take = Math.min(c.length, n - at);
      out.set(c.subarray(0, take), at);
      at += take;
      if (at === n) break;
    }
    return out;
  }

  take(n: number): Uint8Array {
    const out = this.peek(n);
    let left = n;
    while (left > 0) {
      const c = this.chunks[0] as Uint8Array;
      if (c.length <= left) {
        this.chunks.shift();
        left -= c.length;
      } else {
        this.chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    this.length -= n;
    return out;
  }
}

async function* chunksOf(source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  if (source instanceof ReadableStream) {
    const reader = source.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        yield value;
      }
    } finally {
      // Stops the upstream body when the consumer gives up early.
      await reader.cancel().catch(() => {});
    }
  } else {
    yield* source;
  }
}

/** Messages from a byte stream, in order. */
export async function* decodeEventStream(
  source: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>,
): AsyncGenerator<EventStreamMessage> {
  const queue = new ByteQueue();
  for await (const chunk of chunksOf(source)) {
    queue.push(chunk);
    while (queue.length >= PRELUDE) {
      const prelude = queue.peek(PRELUDE);
      const view = new DataView(prelude.buffer, prelude.byteOffset, PRELUDE);
      if (crc32(prelude, 0, 8) !== view.getUint32(8)) throw new EventStreamError("event stream prelude CRC mismatch");
      const total = view.getUint32(0);
      if (total < MIN_MESSAGE || total > MAX_MESSAGE)
        throw new EventStreamError(`event stream message length ${total} is out of range`);
      if (queue.length < total) break;
      yield decodeMessage(queue.take(total));
    }
  }
  if (queue.length > 0) throw new EventStreamError("event stream ended in the middle of a message");
}

/** Header values may be given as plain strings (the common case). */
export type HeaderInput = string | HeaderValue;

export function encodeMessage(msg: { headers: Record<string, HeaderInput>; payload: Uint8Array | string }): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const [name, input] of Object.entries(msg.headers)) {
    const h: HeaderValue = typeof input === "string" ? { type: "string", value: input } : input;
    const nameBytes = utf8.encode(name);
    if (nameBytes.length > 255) throw new EventStreamError(`event stream header name too long: ${name}`);
    let body: Uint8Array;
    let code: number;
    switch (h.type) {
      case "bool":
        code = h.value ? TYPE_CODES.boolTrue : TYPE_CODES.boolFalse;
        body = new Uint8Array(0);
        break;
      case "byte":
        code = TYPE_CODES.byte;
        body = new Uint8Array(1);
        new DataView(body.buffer).setInt8(0, h.value);
        break;
      case "short":
        code = TYPE_CODES.short;
        body = new Uint8Array(2);
        new DataView(body.buffer).setInt16(0, h.value);
        break;
      case "int":
        code = TYPE_CODES.int;
        body = new Uint8Array(4);
        new DataView(body.buffer).setInt32(0, h.value);
        break;
      case "long":
        code = TYPE_CODES.long;
        body = new Uint8Array(8);
        new DataView(body.buffer).setBigInt64(0, h.value);
        break;
      case "timestamp":
        code = TYPE_CODES.timestamp;
        body = new Uint8Array(8);
        new DataView(body.buffer).setBigInt64(0, BigInt(h.value.getTime()));
        break;
      case "bytes":
      case "string": {
        code = h.type === "string" ? TYPE_CODES.string : TYPE_CODES.bytes;
        const raw = h.type === "string" ? utf8.encode(h.value) : h.value;
        if (raw.length > 0xffff) throw new EventStreamError(`event stream header '${name}' value too long`);
        body = new Uint8Array(2 + raw.length);
        new DataView(body.buffer).setUint16(0, raw.length);
        body.set(raw, 2);
        break;
      }
      case "uuid": {
        code = TYPE_CODES.uuid;
        const hex = h.value.replace(/-/g, "");
        if (!/^[0-9a-f]{32}$/i.test(hex)) throw new EventStreamError(`event stream header '${name}' is not a UUID`);
        body = Uint8Array.from(Buffer.from(hex, "hex"));
        break;
      }
      default: {
        const unreachable: never = h;
        return unreachable;
      }
    }
    const head = new Uint8Array(1 + nameBytes.length + 1);
    head[0] = nameBytes.length;
    head.set(nameBytes, 1);
    head[1 + nameBytes.length] = code;
    parts.push(head, body);
  }
  const headersLen = parts.reduce((n, p) => n + p.length, 0);
  const payload = typeof msg.payload === "string" ? utf8.encode(msg.payload) : msg.payload;
  const total = PRELUDE + headersLen + payload.length + 4;
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  view.setUint32(0, total);
  view.setUint32(4, headersLen);
  view.setUint32(8, crc32(out, 0, 8));
  let at = PRELUDE;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  out.set(payload, at);
  view.setUint32(total - 4, crc32(out, 0, total - 4));
  return out;
}

/** A header's value as a string, when it is a string header. */
export function headerString(msg: EventStreamMessage, name: string): string | undefined {
  const h = msg.headers[name];
  return h?.type === "string" ? h.value : undefined;
}
