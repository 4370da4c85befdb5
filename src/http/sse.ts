/**
 * Server-sent events: a reader for upstream streams (bytes -> events) and the one writer every
 * client-facing stream uses.
 */

export interface SseEvent {
  event?: string;
  data: string;
}

/**
 * Reads SSE frames from a byte stream: `data:` lines joined with newlines, `event:` names kept,
 * comments and `id:`/`retry:` ignored, CRLF, LF or CR line endings. Ends when the stream ends.
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  let event: string | undefined;
  const dispatch = (): SseEvent | undefined => {
    if (data.length === 0) {
      event = undefined;
      return undefined;
    }
    const out: SseEvent = event === undefined ? { data: data.join("\n") } : { event, data: data.join("\n") };
    data = [];
    event = undefined;
    return out;
  };
  const line = (text: string): SseEvent | undefined => {
    if (text === "") return dispatch();
    if (text.charCodeAt(0) === 58 /* : */) return undefined;
    const colon = text.indexOf(":");
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? "" : text.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
    return undefined;
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      // A CR at the very end may be the first half of CRLF: wait for more.
      if (c === 13 && i === buffer.length - 1) break;
      const ev = line(buffer.slice(start, i));
      if (ev) yield ev;
      if (c === 13 && buffer.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
    }
    buffer = buffer.slice(start);
  }
  buffer += decoder.decode();
  // A stream may end on the CR of a CRLF (or a lone CR) with no LF to follow.
  if (buffer.endsWith("\r")) buffer = buffer.slice(0, -1);
  if (buffer !== "") {
    const ev = line(buffer);
    if (ev) yield ev;
  }
  const last = dispatch();
  if (last) yield last;
}

const encoder = new TextEncoder();

/** One SSE frame. The event name must be a single line; data may span lines. */
export function sseFrame(data: string, event?: string): Uint8Array {
  let text = "";
  if (event !== undefined) {
    if (/[\r\n]/.test(event)) throw new Error("SSE event names cannot contain newlines");
    text += `event: ${event}\n`;
  }
  if (data.includes("\n")) text += `${data.replace(/\r?\n/g, "\ndata: ")}`.replace(/^/, "data: ");
  else text += `data: ${data}`;
  return encoder.encode(`${text}\n\n`);
}

/** A comment line: every SSE parser ignores it; used as a keep-alive. */
export const SSE_KEEPALIVE = encoder.encode(": keepalive\n\n");

export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
} as const;
