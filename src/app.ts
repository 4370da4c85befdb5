/** Composes the gateway from its parts. Exported so tests drive it with `app.handle()`. */
import { openapi } from "@elysiajs/openapi";
import { Elysia } from "elysia";
import type { AlertDispatcher } from "./alerts/webhooks";
import type { Authenticator, Invalidator } from "./auth/authenticator";
import { Propagator } from "./auth/propagation";
import type { Catalog } from "./catalog/catalog";
import { healthRoutes, probe, type ReadinessCheck } from "./health/routes";
import { authPlugin, requireCredential } from "./http/auth";
import { parseJsonBody } from "./http/body";
import { errorShapeFor, renderError } from "./http/error-render";
import { toGatewayError } from "./http/on-error";
import { geminiRoutes } from "./inference/gemini-routes";
import { messagesRoutes } from "./inference/messages-routes";
import { responsesRoutes } from "./inference/responses-routes";
import { inferenceRoutes } from "./inference/routes";
import { keyRoutes } from "./keys/routes";
import type { KeyPrincipal } from "./limits/enforcement";
import { SpendSeeds } from "./limits/seeds";
import type { Limiter } from "./limits/types";
import type { Logger } from "./log";
import { openApiDocument } from "./openapi/document";
import type { ImageFetcher } from "./providers/images";
import type { ProviderAdapter } from "./providers/types";
import type { Router } from "./routing/router";
import type { SpendLedger } from "./spend/ledger";
import { spendRoutes } from "./spend/routes";
import type { Database } from "./store/db";
import { teamRoutes } from "./teams/routes";

export interface AppDeps {
  database: Database;
  authenticator: Authenticator;
  log: Logger;
  maxBodyBytes: number;
  catalog: Catalog;
  router: Router;
  adapters: Map<string, ProviderAdapter>;
  ledger: SpendLedger;
  heartbeatMs: number;
  fetchImage: ImageFetcher;
  limiter: Limiter;
  alerts: AlertDispatcher;
  defaultOutputTokens: number;
  /** Readiness of Redis, when configured; `critical` makes it fail readiness (fail_closed). */
  redisHealth?: { check: ReadinessCheck; critical: boolean };
  /** Where key and team changes go; default: this instance's cache only. */
  invalidator?: Invalidator;
  /** Retention of stored responses (previous_response_id). */
  responsesRetentionMs: number;
  now?: () => Date;
}

export function createApp(deps: AppDeps) {
  const invalidate = deps.invalidator ?? new Propagator(deps.authenticator, deps.log);
  const services = { db: deps.database.db, invalidate, now: deps.now };
  const auth = authPlugin(deps.authenticator);
  const inference = {
    catalog: deps.catalog,
    router: deps.router,
    adapters: deps.adapters,
    ledger: deps.ledger,
    log: deps.log,
    heartbeatMs: deps.heartbeatMs,
    fetchImage: deps.fetchImage,
    limiter: deps.limiter,
    alerts: deps.alerts,
    defaultOutputTokens: deps.defaultOutputTokens,
    reauthenticate: (p: KeyPrincipal) => deps.authenticator.reauthenticate(p),
    seeds: new SpendSeeds(deps.database.db, deps.log, deps.ledger),
  };
  return new Elysia()
    .onParse(({ request, contentType }) => {
      requireCredential(request);
      return parseJsonBody(request, contentType, deps.maxBodyBytes);
    })
    .onError(({ code, error, request, path }) =>
      renderError(toGatewayError(code, error, request.method, path, deps.log), errorShapeFor(request.method, path)),
    )
    .use(
      healthRoutes({
        database: { check: probe(() => deps.database.ping()), critical: true },
        redis: deps.redisHealth ?? { check: async () => ({ status: "not_configured" }), critical: false },
      }),
    )
    .use(inferenceRoutes(inference, auth))
    .use(messagesRoutes(inference, auth))
    .use(geminiRoutes(inference, auth))
    .use(responsesRoutes(inference, auth, { db: deps.database.db, retentionMs: deps.responsesRetentionMs }))
    .use(spendRoutes(deps.database.db, auth))
    .use(
      // The document is built from our TypeBox schemas; every route Elysia knows is excluded from
      // generation so only the public inference and catalog operations are described.
      openapi({
        path: "/docs",
        specPath: "/openapi.json",
        documentation: openApiDocument() as NonNullable<Parameters<typeof openapi>[0]>["documentation"],
        exclude: { paths: [/.*/] },
      }),
    )
    .use(keyRoutes(services, auth))
    .use(teamRoutes(services, auth));
}
export type App = ReturnType<typeof createApp>;
