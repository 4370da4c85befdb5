import { Elysia } from "elysia";
import type { Catalog, ServedModel } from "../catalog/catalog";
import type { AuthPlugin } from "../http/auth";
import { notFound } from "../http/errors";
import { openAIChat, parseChatRequest } from "../protocols/openai-chat/protocol";
import { canUse } from "./access";
import { type InferenceDeps, serveInference } from "./pipeline";

const CREATED = Math.floor(Date.now() / 1000);

function openAIModel(m: ServedModel) {
  return { id: m.name, object: "model" as const, created: CREATED, owned_by: m.provider };
}

/** The public model hub: names, modes, prices (nulls kept: unpublished, not free), limits, capabilities. */
export function modelHub(catalog: Catalog) {
  return {
    data: catalog.list().map((m) => ({
      model_name: m.name,
      mode: m.mode,
      providers: [...new Set(m.deployments.map((d) => d.provider))],
      input_cost_per_token: m.prices.input,
      output_cost_per_token: m.prices.output,
      cache_read_input_token_cost: m.prices.cacheRead,
      cache_creation_input_token_cost: m.prices.cacheWrite,
      output_cost_per_reasoning_token: m.prices.reasoning,
      max_input_tokens: m.maxInputTokens,
      max_output_tokens: m.maxOutputTokens,
      ...m.capabilities,
    })),
  };
}

export function inferenceRoutes(deps: InferenceDeps, auth: AuthPlugin) {
  const hub = JSON.stringify(modelHub(deps.catalog));
  return new Elysia()
    .use(auth)
    .post(
      "/v1/chat/completions",
      ({ body, principal, request, server }) => {
        return serveInference(
          deps,
          { request, server, principal },
          "/v1/chat/completions",
          openAIChat,
          parseChatRequest(body),
        );
      },
      { auth: true },
    )
    .get(
      "/v1/models",
      ({ principal }) => ({
        object: "list" as const,
        data: deps.catalog
          .list()
          .filter((m) => canUse(principal, m.name))
          .map(openAIModel),
      }),
      { auth: true },
    )
    .get(
      "/v1/models/*",
      ({ params, principal }) => {
        const name = decodeURIComponent(params["*"]);
        const m = deps.catalog.resolve(name);
        if (!m || !canUse(principal, name))
          throw notFound(
            `The model '${name}' does not exist or is not available to this key`,
            "model_not_found",
            "model",
          );
        return openAIModel(m);
      },
      { auth: true },
    )
    .get("/public/model_hub", () => new Response(hub, { headers: { "content-type": "application/json" } }));
}
