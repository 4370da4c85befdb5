/**
 * OpenAI's Responses API: POST /v1/responses for every chat and responses model in the catalog, and
 * GET / DELETE /v1/responses/{id} for the responses the gateway stored (same key only). Errors use
 * OpenAI's envelope.
 */
import { Elysia } from "elysia";
import type { AuthPlugin } from "../http/auth";
import { GatewayError } from "../http/errors";
import { openAIResponses, parseResponsesRequest } from "../protocols/openai-responses/protocol";
import type { ResponseDeleted } from "../protocols/openai-responses/schema";
import { ResponseStore } from "../responses/store";
import type { Db } from "../store/db";
import { type InferenceDeps, serveInference } from "./pipeline";

export interface ResponsesStoreOptions {
  db: Db;
  /** How long stored responses stay usable as `previous_response_id`. */
  retentionMs: number;
  /** How long a lookup waits for a fresh response another instance may still be writing (default 10 s). */
  settleMs?: number;
}

const responseNotFound = (id: string) =>
  new GatewayError(404, `No response found with id '${id}'.`, {
    type: "invalid_request_error",
    code: "response_not_found",
    param: "response_id",
  });

export function responsesRoutes(deps: InferenceDeps, auth: AuthPlugin, store: ResponsesStoreOptions) {
  const responses = new ResponseStore(store.db, {
    retentionMs: store.retentionMs,
    log: deps.log,
    ...(store.settleMs !== undefined ? { settleMs: store.settleMs } : {}),
  });
  const protocol = openAIResponses({ store: responses, catalog: deps.catalog, adapters: deps.adapters });
  const tokenOf = (p: { kind: string; key?: { token_id: string } }) =>
    p.kind === "key" ? (p.key?.token_id ?? null) : null;

  return new Elysia()
    .use(auth)
    .post(
      "/v1/responses",
      ({ body, principal, request, server }) => {
        return serveInference(
          deps,
          { request, server, principal },
          "/v1/responses",
          protocol,
          parseResponsesRequest(body),
        );
      },
      { auth: true },
    )
    .get(
      "/v1/responses/:id",
      async ({ params, principal }) => {
        const stored = await responses.load(params.id, tokenOf(principal));
        if (!stored) throw responseNotFound(params.id);
        return stored.response;
      },
      { auth: true },
    )
    .delete(
      "/v1/responses/:id",
      async ({ params, principal }) => {
        if (!(await responses.delete(params.id, tokenOf(principal)))) throw responseNotFound(params.id);
        return { id: params.id, object: "response", deleted: true } satisfies ResponseDeleted;
      },
      { auth: true },
    );
}
