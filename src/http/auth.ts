/** The `auth` macros: routes that set `auth: true` (or `googleAuth: true`) receive the caller as `principal`. */
import { Elysia } from "elysia";
import { type Authenticator, bearerToken, missingApiKey } from "../auth/authenticator";

export function authPlugin(authenticator: Authenticator) {
  return new Elysia().macro({
    /** Bearer, `x-api-key` or `x-goog-api-key`. */
    auth: {
      async resolve({ request }) {
        return { principal: await authenticator.authenticate(bearerToken(request.headers)) };
      },
    },
    /** As `auth`, plus Google's `?key=` query parameter (generateContent routes only). */
    googleAuth: {
      async resolve({ request }) {
        const fromHeaders = bearerToken(request.headers);
        const key = fromHeaders ?? new URL(request.url).searchParams.get("key");
        return { principal: await authenticator.authenticate(key) };
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
  throw missingApiKey();
}
