/**
 * Bedrock Converse mock responses, built from the recorded-shape fixtures. Streams are framed with
 * the real binary event-stream encoding and delivered in irregular chunks, so a message is often
 * split across reads and several messages often share one. `verifySigV4` re-signs a received
 * request with the shared secret and compares signatures, as AWS does.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { encodeMessage } from "../../src/providers/bedrock/eventstream";
import { type AwsCredentials, parseAuthorization, signRequest } from "../../src/providers/bedrock/sigv4";
import type { RecordedRequest } from "./upstream";

const FIXTURES = join(import.meta.dir, "../../src/providers/bedrock/fixtures");

export const bedrockFixture = <T = unknown>(name: string): T =>
  JSON.parse(readFileSync(join(FIXTURES, name), "utf8")) as T;

export type StreamItem = { event: string; payload: unknown } | { exception: string; payload: unknown };

export const REQUEST_ID = "5f0c9d1e-8a7b-4c3d-9e2f-1a2b3c4d5e6f";

export function bedrockJson(nameOrBody: string | unknown, requestId = REQUEST_ID): Response {
  const body = typeof nameOrBody === "string" ? bedrockFixture(nameOrBody) : nameOrBody;
  return Response.json(body, { headers: { "x-amzn-requestid": requestId } });
}

/** A Converse answer with given text and usage. */
export function bedrockConverse(
  text: string,
  usage: { input: number; output: number; cacheRead?: number; cacheWrite?: number },
  stopReason = "end_turn",
): Response {
  return bedrockJson({
    metrics: { latencyMs: 321 },
    output: { message: { role: "assistant", content: [{ text }] } },
    stopReason,
    usage: {
      inputTokens: usage.input,
      outputTokens: usage.output,
      totalTokens: usage.input + usage.output + (usage.cacheRead ?? 0) + (usage.cacheWrite ?? 0),
      ...(usage.cacheRead !== undefined ? { cacheReadInputTokens: usage.cacheRead } : {}),
      ...(usage.cacheWrite !== undefined ? { cacheWriteInputTokens: usage.cacheWrite } : {}),
    },
  });
}

/** One binary event-stream message per item, as ConverseStream frames them. */
export function encodeStreamItems(items: StreamItem[]): Uint8Array[] {
  return items.map((it) =>
    "event" in it
      ? encodeMessage({
          headers: { ":event-type": it.event, ":content-type": "application/json", ":message-type": "event" },
          payload: JSON.stringify(it.payload),
        })
      : encodeMessage({
          headers: {
            ":exception-type": it.exception,
            ":content-type": "application/json",
            ":message-type": "exception",
          },
          payload: JSON.stringify(it.payload),
        }),
  );
}

/** Cuts bytes into chunks of cycling, irregular sizes. */
export function rechunk(frames: Uint8Array[], sizes: number[] = [7, 61, 3, 180, 29]): Uint8Array[] {
  const all = Buffer.concat(frames);
  const out: Uint8Array[] = [];
  let at = 0;
  for (let i = 0; at < all.length; i++) {
    const n = sizes[i % sizes.length] as number;
    out.push(new Uint8Array(all.subarray(at, at + n)));
    at += n;
  }
  return out;
}

export function bedrockStream(
  itemsOrFixture: string | StreamItem[],
  opts: { delayMs?: number; requestId?: string; sizes?: number[] } = {},
): Response {
  const items = typeof itemsOrFixture === "string" ? bedrockFixture<StreamItem[]>(itemsOrFixture) : itemsOrFixture;
  const chunks = rechunk(encodeStreamItems(items), opts.sizes);
  const body = new ReadableStream<Uint8Array>({
    async start(c) {
      for (const ch of chunks) {
        if (opts.delayMs) await Bun.sleep(opts.delayMs);
        c.enqueue(ch);
      }
      c.close();
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "application/vnd.amazon.eventstream",
      "x-amzn-requestid": opts.requestId ?? REQUEST_ID,
    },
  });
}

/** A Bedrock error: `{message}` body and the `x-amzn-errortype` header. */
export function bedrockError(status: number, type: string, message: string): Response {
  return Response.json(
    { message },
    {
      status,
      headers: {
        "x-amzn-errortype": `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
        "x-amzn-requestid": REQUEST_ID,
      },
    },
  );
}

export interface SigCheck {
  valid: boolean;
  reason?: string;
  canonicalRequest?: string;
  signedHeaders?: string[];
}

const fromAmzDate = (s: string): Date =>
  new Date(
    `${s.slice(0, 4)}-${s.slice(4, 6)}-${s.slice(6, 8)}T${s.slice(9, 11)}:${s.slice(11, 13)}:${s.slice(13, 15)}Z`,
  );

/** Recomputes the request's SigV4 signature from what arrived and the shared secret. */
export function verifySigV4(
  rec: RecordedRequest,
  creds: Pick<AwsCredentials, "accessKeyId" | "secretAccessKey">,
): SigCheck {
  const auth = parseAuthorization(rec.headers.authorization ?? "");
  if (!auth) return { valid: false, reason: "no AWS4-HMAC-SHA256 authorization header" };
  if (auth.accessKeyId !== creds.accessKeyId) return { valid: false, reason: `unknown access key ${auth.accessKeyId}` };
  const date = rec.headers["x-amz-date"];
  if (!date?.startsWith(auth.date)) return { valid: false, reason: "x-amz-date missing or outside the scope" };
  for (const required of ["host", "x-amz-date"]) {
    if (!auth.signedHeaders.includes(required)) return { valid: false, reason: `${required} is not signed` };
  }
  const headers: Record<string, string> = {};
  for (const n of auth.signedHeaders) {
    const v = rec.headers[n];
    if (v === undefined) return { valid: false, reason: `signed header ${n} was not received` };
    if (n !== "host" && n !== "x-amz-date" && n !== "x-amz-security-token") headers[n] = v;
  }
  const token = auth.signedHeaders.includes("x-amz-security-token") ? rec.headers["x-amz-security-token"] : undefined;
  const signed = signRequest({
    method: rec.method,
    host: rec.headers.host as string,
    path: rec.path,
    query: rec.query.toString(),
    headers,
    body: rec.text,
    region: auth.region,
    service: auth.service,
    credentials: { ...creds, ...(token ? { sessionToken: token } : {}) },
    date: fromAmzDate(date),
  });
  const valid = signed.signature === auth.signature && signed.signedHeaders === auth.signedHeaders.join(";");
  return {
    valid,
    ...(valid ? {} : { reason: "signature mismatch" }),
    canonicalRequest: signed.canonicalRequest,
    signedHeaders: auth.signedHeaders,
  };
}
