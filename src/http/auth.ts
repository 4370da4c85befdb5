/** The `auth` macros: routes that set `auth: true` (or `googleAuth: true`) receive the caller as `principal`. */
import { Elysia } from "elysia";
import { type Authenticator, bearerToken, missingApiKey } from "../auth/authenticator";
import { type ErrorShape, errorShapeFor } from "./error-render";

/** How each protocol's clients send the key, for the message to a caller that sent none. */
const SEND_KEY_AS: Record<ErrorShape, string> = {
  openai: "'Authorization: Bearer <key>'",
  anthropic: "'x-api-key: <key>' (or 'Authorization: Bearer <key>')",
  google: "'x-goog-api-key: <key>', '?key=<key>' or 'Authorization: Bearer <key>'",
};

/** The 401 for a caller without a key, telling it how its protocol sends one (only computed then). */
function noKey(request: Request): never {
  throw missingApiKey(SEND_KEY_AS[errorShapeFor(request.method, new URL(request.url).pathname)]);
}

export function authPlugin(authenticator: Authenticator) {
  return new Elysia().macro({
    /** Bearer, `x-api-key` or `x-goog-api-key`. */
    auth: {
      async resolve({ request }) {
        const secret = bearerToken(request.headers);
        if (secret === null) noKey(request);
        return { principal: await authenticator.authenticate(secret) };
      },
    },
    /** As `auth`, plus Google's `?key=` query parameter (generateContent routes only). */
    googleAuth: {
      async resolve({ request }) {
        const fromHeaders = bearerToken(request.headers);
        const key = fromHeaders ?? new URL(request.url).searchParams.get("key");
        return { principal: await authenticator.authenticate(key, SEND_KEY_AS.google) };
      },
    },
  });
}
export type AuthPlugin = ReturnType<typeof authPlugin>;

/**
 * The 401 for a request that carries no credential at all (no Authorization, x-api-key or
 * x-goog-api-key header, no `?key=`) or a malformed Authorization header, before anything reads
 * its body: without it, an anonymous caller could make the gateway read and parse a body up to
 * the size limit, and would see a 400 for malformed JSON instead of the 401. Every route that
 * takes a body requires a key; which key, and whether it is valid, the auth macros decide.
 */
export function requireCredential(request: Request): void {
  if (bearerToken(request.headers) !== null) return;
  if (new URL(request.url).searchParams.get("key")) return;
  noKey(request);
}
