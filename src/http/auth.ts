/** The `auth` macros: routes that set `auth: true` (or `googleAuth: true`) receive the caller as `principal`. */
import { Elysia } from "elysia";
import { type Authenticator, bearerToken } from "../auth/authenticator";
import { type ErrorShape, errorShapeFor } from "./error-render";

/** How each protocol's clients send the key, for the message to a caller that sent none. */
const SEND_KEY_AS: Record<ErrorShape, string> = {
  openai: "'Authorization: Bearer <key>'",
  anthropic: "'x-api-key: <key>' (or 'Authorization: Bearer <key>')",
  google: "'x-goog-api-key: <key>', '?key=<key>' or 'Authorization: Bearer <key>'",
};

export function authPlugin(authenticator: Authenticator) {
  return new Elysia().macro({
    /** Bearer, `x-api-key` or `x-goog-api-key`. */
    auth: {
      async resolve({ request }) {
        const sendAs = SEND_KEY_AS[errorShapeFor(request.method, new URL(request.url).pathname)];
        return { principal: await authenticator.authenticate(bearerToken(request.headers), sendAs) };
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
