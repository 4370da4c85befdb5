/**
 * AWS Signature Version 4 for header-signed requests (the IAM user guide's "Create a signed AWS API
 * request"): canonical request, string to sign, derived signing key, `Authorization` header.
 *
 * `path` is the request path exactly as it goes on the wire (already percent-encoded where needed,
 * e.g. `/model/anthropic.claude-v2%3A1/converse`). For every service but S3, SigV4 normalises the
 * path and URI-encodes each segment once more, so that `%3A` appears as `%253A` in the canonical
 * request. Getting this wrong fails every Bedrock model id with a `:` in it.
 */
import { createHash, createHmac } from "node:crypto";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface SignInput {
  method: string;
  /** Host header value: host, plus `:port` when it is not the scheme's default. */
  host: string;
  /** The path as sent (see the module comment). */
  path: string;
  /** The raw query string, without `?`. */
  query?: string;
  /** Headers to sign and send (names in any case). `host` is added; `authorization` is ignored. */
  headers: Record<string, string>;
  body: string | Uint8Array;
  region: string;
  service: string;
  credentials: AwsCredentials;
  /** Signing time; defaults to now. */
  date?: Date;
  /** S3 signs the path as sent, without normalising or encoding it again. */
  s3?: boolean;
}

export interface Signed {
  /** Headers to add to the request: `x-amz-date`, `x-amz-security-token` when any, `authorization`. */
  headers: Record<string, string>;
  canonicalRequest: string;
  stringToSign: string;
  signedHeaders: string;
  signature: string;
}

const ALGORITHM = "AWS4-HMAC-SHA256";

const sha256Hex = (data: string | Uint8Array): string => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Uint8Array, data: string): Buffer => createHmac("sha256", key).update(data).digest();

/** `YYYYMMDDTHHMMSSZ`, as `x-amz-date` wants it. */
export function amzDate(d: Date): string {
  return d
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
}

/** RFC 3986 encoding as SigV4 defines it: only `A-Z a-z 0-9 - . _ ~` stay as they are. */
export function uriEncode(s: string): string {
  let out = "";
  for (const b of new TextEncoder().encode(s)) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** Removes `.` and `..` segments and empty segments (`//`), keeping a trailing slash. */
function normalizePath(path: string): string {
  const out: string[] = [];
  for (const seg of path.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  const trailing = path.endsWith("/") && out.length > 0;
  return `/${out.join("/")}${trailing ? "/" : ""}`;
}

export function canonicalUri(path: string, s3 = false): string {
  const p = path === "" ? "/" : path;
  if (s3) return p;
  return normalizePath(p).split("/").map(uriEncode).join("/");
}

function decodeComponent(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, "%20"));
  } catch {
    return s;
  }
}

/** Parameters decoded, strictly re-encoded, sorted by name then value. */
export function canonicalQuery(query: string | undefined): string {
  if (!query) return "";
  const pairs: [string, string][] = [];
  for (const part of query.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const k = eq < 0 ? part : part.slice(0, eq);
    const v = eq < 0 ? "" : part.slice(eq + 1);
    pairs.push([uriEncode(decodeComponent(k)), uriEncode(decodeComponent(v))]);
  }
  pairs.sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join("&");
}

/** Lower-cased names, sorted; values trimmed with inner runs of spaces collapsed; repeats joined by `,`. */
function canonicalHeaders(headers: Record<string, string>): { text: string; names: string } {
  const merged = new Map<string, string[]>();
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase();
    const v = value.trim().replace(/\s+/g, " ");
    merged.set(n, [...(merged.get(n) ?? []), v]);
  }
  const names = [...merged.keys()].sort();
  return {
    text: names.map((n) => `${n}:${(merged.get(n) as string[]).join(",")}\n`).join(""),
    names: names.join(";"),
  };
}

/** The derived key: HMAC chain over date, region, service and `aws4_request`. */
export function signingKey(secret: string, date: string, region: string, service: string): Buffer {
  const kDate = hmac(`AWS4${secret}`, date);
  const kRegion = hmac(kDate, region);
  const kService = hmac(kRegion, service);
  return hmac(kService, "aws4_request");
}

export function signRequest(input: SignInput): Signed {
  const when = amzDate(input.date ?? new Date());
  const day = when.slice(0, 8);
  const { credentials: cred } = input;
  const toSign: Record<string, string> = {};
  for (const [k, v] of Object.entries(input.headers)) if (k.toLowerCase() !== "authorization") toSign[k] = v;
  toSign.host = input.host;
  toSign["x-amz-date"] = when;
  if (cred.sessionToken) toSign["x-amz-security-token"] = cred.sessionToken;

  const { text, names } = canonicalHeaders(toSign);
  const canonicalRequest = [
    input.method.toUpperCase(),
    canonicalUri(input.path, input.s3),
    canonicalQuery(input.query),
    text,
    names,
    sha256Hex(input.body),
  ].join("\n");
  const scope = `${day}/${input.region}/${input.service}/aws4_request`;
  const stringToSign = [ALGORITHM, when, scope, sha256Hex(canonicalRequest)].join("\n");
  const signature = createHmac("sha256", signingKey(cred.secretAccessKey, day, input.region, input.service))
    .update(stringToSign)
    .digest("hex");
  const headers: Record<string, string> = {
    "x-amz-date": when,
    authorization: `${ALGORITHM} Credential=${cred.accessKeyId}/${scope}, SignedHeaders=${names}, Signature=${signature}`,
  };
  if (cred.sessionToken) headers["x-amz-security-token"] = cred.sessionToken;
  return { headers, canonicalRequest, stringToSign, signedHeaders: names, signature };
}

/** The parts of an `Authorization: AWS4-HMAC-SHA256 ...` header (for verifying a signature). */
export function parseAuthorization(value: string): {
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
  signedHeaders: string[];
  signature: string;
} | null {
  const m =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(
      value.trim(),
    );
  if (!m) return null;
  return {
    accessKeyId: m[1] as string,
    date: m[2] as string,
    region: m[3] as string,
    service: m[4] as string,
    signedHeaders: (m[5] as string).split(";"),
    signature: m[6] as string,
  };
}
