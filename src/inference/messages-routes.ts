/**
 * Anthropic's Messages API for every model in the catalog: POST /v1/messages (answers and SSE
 * streams, forwarded as-is to Anthropic-type upstreams and Claude on Vertex AI, translated for the
 * rest) and POST /v1/messages/count_tokens. Errors on these paths are rendered in Anthropic's
 * envelope by the app's error handler (src/http/error-render.ts).
 */
import { Elysia } from "elysia";
import type { Principal } from "../auth/authenticator";
import type { ServedModel } from "../catalog/catalog";
import type { AuthPlugin } from "../http/auth";
import { badRequest } from "../http/errors";
import { decodeMessagesRequest, nativeOnlyFeature } from "../protocols/anthropic/decode";
import { anthropicMessages, parseCountTokensRequest, parseMessagesRequest } from "../protocols/anthropic/protocol";
import type { CountTokensResponse } from "../protocols/anthropic/schema";
import { isClaudeModel } from "../providers/vertex/adapter";
import { authorizeModel, canUse } from "./access";
import { countTokens, promptText } from "./estimate";
import { type InferenceDeps, serveInference } from "./pipeline";

/** Whether a deployment receives a Messages body as-is (see the adapters' `passthrough`). */
function speaksMessages(deps: InferenceDeps, provider: string, upstreamModel: string): boolean {
  const type = deps.adapters.get(provider)?.type;
  return type === "anthropic" || (type === "vertex" && isClaudeModel(upstreamModel));
}

/** The model and its fallbacks that could serve the request, whichever the router picks. */
function candidates(deps: InferenceDeps, model: ServedModel): ServedModel[] {
  const out = [model];
  for (const f of model.fallbacks) {
    const m = deps.catalog.resolve(f);
    if (m) out.push(m);
  }
  return out;
}

/**
 * What only Anthropic itself can serve (PDF documents, Files API sources, server tools) is refused
 * with a 400 when any deployment of the model (or a fallback) would need a translation. Unknown or
 * forbidden models are left to the pipeline, which answers 404/403 and records the request.
 */
function refuseUntranslatable(
  deps: InferenceDeps,
  principal: Principal,
  body: Parameters<typeof nativeOnlyFeature>[0],
) {
  const feature = nativeOnlyFeature(body);
  if (!feature) return;
  const model = deps.catalog.resolve(body.model);
  if (!model || !canUse(principal, body.model)) return;
  for (const m of candidates(deps, model)) {
    const translated = m.deployments.find((d) => !speaksMessages(deps, d.provider, d.upstreamModel));
    if (translated) {
      throw badRequest(
        `${feature} can only be sent to models served by Anthropic's own API (an anthropic provider, or Claude on Vertex AI); '${m.name}' is served by '${translated.provider}' through translation`,
        null,
        "unsupported_content",
      );
    }
  }
}

/** Anthropic's clients read the request id from `request-id`; the gateway's id is also `x-request-id`. */
function withRequestId(res: Response): Response {
  const id = res.headers.get("x-request-id");
  if (id) res.headers.set("request-id", id);
  return res;
}

export function messagesRoutes(deps: InferenceDeps, auth: AuthPlugin) {
  return new Elysia()
    .use(auth)
    .post(
      "/v1/messages",
      async ({ body, principal, request, server }) => {
        const parsed = parseMessagesRequest(body);
        refuseUntranslatable(deps, principal, parsed);
        const res = await serveInference(
          deps,
          { request, server, principal },
          "/v1/messages",
          anthropicMessages,
          parsed,
        );
        return withRequestId(res);
      },
      { auth: true },
    )
    .post(
      "/v1/messages/count_tokens",
      ({ body, principal }): CountTokensResponse => {
        const parsed = parseCountTokensRequest(body);
        authorizeModel(deps.catalog, principal, parsed.model);
        // An estimate with the gateway's tokenizer (o200k) over the prompt's text, for every model:
        // the upstream's own count endpoint is not reachable through the adapters.
        return { input_tokens: countTokens(promptText(decodeMessagesRequest(parsed))) };
      },
      { auth: true },
    );
}
