/** Key secrets: generation, hashing and masking. Only the hash is ever stored. */
import { createHash } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
export const SECRET_RANDOM_CHARS = 48;

/** `sk-` plus 48 uniformly random base62 characters (about 285 bits). */
export function generateSecret(): string {
  let out = "sk-";
  const buf = new Uint8Array(64);
  while (out.length < 3 + SECRET_RANDOM_CHARS) {
    crypto.getRandomValues(buf);
    for (const byte of buf) {
      // 248 = 4 * 62: rejecting bytes above it keeps every character equally likely.
      if (byte < 248 && out.length < 3 + SECRET_RANDOM_CHARS) out += BASE62[byte % 62];
    }
  }
  return out;
}

export function hashSecret(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** `sk-...` and the last four characters. */
export function maskSecret(secret: string): string {
  return `${secret.slice(0, 3)}...${secret.slice(-4)}`;
}

const HASH_RE = /^[0-9a-f]{64}$/;

export function looksLikeHash(value: string): boolean {
  return HASH_RE.test(value);
}
