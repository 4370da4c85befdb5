/** The `auth` macros: routes that set `auth: true` (or `googleAuth: true`) receive the caller as `principal`. */
import { Elysia } from "elysia";
import { type Authenticator, bearerToken } from "../auth/authenticator";

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
