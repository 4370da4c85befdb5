/**
 * Google's generateContent protocol, so `@google/genai` (and REST clients of the Gemini API) reach
 * every model in the catalog by changing only their base URL:
 *
 *   POST /v1beta/models/{model}:generateContent
 *   POST /v1beta/models/{model}:streamGenerateContent?alt=sse
 *
 * and the same under /v1 (the SDK's default version). `{model}` is a catalog name, its slash
 * escaped (`openai%2Fgpt-4o-mini`) or not (`openai/gpt-4o-mini`, what the SDK sends); a leading
 * `models/` is allowed. The key comes as `x-goog-api-key`, `?key=`, a bearer token or `x-api-key`.
 * Every error is Google's `{"error": {code, message, status}}`.
 */
import { Elysia } from "elysia";
import type { Principal } from "../auth/authenticator";
import type { AuthPlugin } from "../http/auth";
import { renderError } from "../http/error-render";
import { notFound } from "../http/errors";
import { geminiGenerateContent, parseGenerateContent } from "../protocols/gemini/protocol";
import { sseToJsonArray } from "../protocols/gemini/stream";
import { type InferenceDeps, serveInference } from "./pipeline";

const METHODS = { generateContent: false, streamGenerateContent: true } as const;
type Method = keyof typeof METHODS;

export interface ModelTarget {
  model: string;
  method: Method;
  stream: boolean;
}

/**
 * `{model}:{method}` from the path after `/models/`, percent-decoded. The method follows the last
 * colon (model names may hold colons: `local/llama3.2:3b`). Undefined when it names no method
 * served here.
 */
export function parseModelTarget(rest: string): ModelTarget | undefined {
  let decoded: string;
  try {
    decoded = decodeURIComponent(rest);
  } catch {
    return undefined;
  }
  const colon = decoded.lastIndexOf(":");
  if (colon <= 0) return undefined;
  const method = decoded.slice(colon + 1);
  if (!Object.hasOwn(METHODS, method)) return undefined;
  let model = decoded.slice(0, colon);
  if (model.startsWith("models/")) model = model.slice("models/".length);
  if (model === "") return undefined;
  return { model, method: method as Method, stream: METHODS[method as Method] };
}

interface RouteContext {
  body: unknown;
  principal: Principal;
  request: Request;
  server: { timeout(request: Request, seconds: number): void } | null;
}

const DETAIL = {
  tags: ["Google generateContent"],
  description:
    "Google's generateContent protocol for every catalog model. `{model}:generateContent` answers a GenerateContentResponse; `{model}:streamGenerateContent?alt=sse` streams one per SSE frame (without alt=sse, one JSON array). Errors are Google's `{error: {code, message, status}}`.",
};

export function geminiRoutes(deps: InferenceDeps, auth: AuthPlugin) {
  const serve = async (version: "v1beta" | "v1", c: RouteContext): Promise<Response> => {
    const startedAt = performance.now();
    const url = new URL(c.request.url);
    const prefix = `/${version}/models/`;
    const target = parseModelTarget(url.pathname.slice(prefix.length));
    if (!target) {
      return renderError(
        notFound(
          `Unknown method: POST ${url.pathname}. This gateway serves POST ${prefix}{model}:generateContent and ${prefix}{model}:streamGenerateContent`,
          "route_not_found",
        ),
        "google",
      );
    }
    const input = parseGenerateContent(target.model, target.stream, c.body);
    const res = await serveInference(
      deps,
      { request: c.request, server: c.server, principal: c.principal, startedAt },
      `/${version}/models/{model}:${target.method}`,
      geminiGenerateContent,
      input,
    );
    if (!target.stream || url.searchParams.get("alt") === "sse" || !res.body) return res;
    // Without alt=sse Google streams one JSON array.
    const headers = new Headers(res.headers);
    headers.set("content-type", "application/json; charset=UTF-8");
    return new Response(sseToJsonArray(res.body), { status: res.status, headers });
  };

  return new Elysia()
    .use(auth)
    .post("/v1beta/models/*", (c) => serve("v1beta", c), {
      googleAuth: true,
      detail: { ...DETAIL, summary: "generateContent / streamGenerateContent (v1beta)" },
    })
    .post("/v1/models/*", (c) => serve("v1", c), {
      googleAuth: true,
      detail: { ...DETAIL, summary: "generateContent / streamGenerateContent (v1)" },
    });
}
