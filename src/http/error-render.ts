/**
 * A GatewayError in the envelope of the protocol the caller speaks: OpenAI's for chat completions,
 * responses, management and everything else; Anthropic's on /v1/messages; Google's on the
 * generateContent routes. The status is the same in every shape.
 */
import { anthropicErrorType } from "../protocols/anthropic/wire";
import { geminiStatusName } from "../protocols/gemini/wire";
import type { GatewayError } from "./errors";

export type ErrorShape = "openai" | "anthropic" | "google";

/**
 * Google's API lives under /v1beta; under /v1 only the generateContent calls the gateway serves
 * there (`POST /v1/models/{model}:generateContent` and `:streamGenerateContent`, the colon possibly
 * escaped) are Google's: `GET /v1/models/{model}` is OpenAI's, even for a model name with a colon.
 */
const GOOGLE_V1_METHOD = /^\/v1\/models\/.+(?::|%3[aA])(?:generateContent|streamGenerateContent)$/;

export function errorShapeFor(method: string, path: string): ErrorShape {
  if (path === "/v1/messages" || path.startsWith("/v1/messages/")) return "anthropic";
  if (path.startsWith("/v1beta/") || (method === "POST" && GOOGLE_V1_METHOD.test(path))) return "google";
  return "openai";
}

export function errorBody(e: GatewayError, shape: ErrorShape): unknown {
  switch (shape) {
    case "anthropic":
      return { type: "error", error: { type: anthropicErrorType(e.status), message: e.message } };
    case "google":
      return { error: { code: e.status, message: e.message, status: geminiStatusName(e.status) } };
    case "openai":
      return { error: { message: e.message, type: e.type, param: e.param, code: e.code } };
    default: {
      const unreachable: never = shape;
      return unreachable;
    }
  }
}

export function renderError(e: GatewayError, shape: ErrorShape): Response {
  return new Response(JSON.stringify(errorBody(e, shape)), {
    status: e.status,
    headers: { "content-type": "application/json", ...e.headers },
  });
}
