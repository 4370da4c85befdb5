/** Which models a caller may use: the key's `models` and its team's, each empty meaning all. */
import type { Principal } from "../auth/authenticator";
import type { Catalog, ServedModel } from "../catalog/catalog";
import { forbidden, notFound } from "../http/errors";

/** Exact names, or `<provider>/*` for every model of a provider. */
export function modelAllowed(list: readonly string[], model: string): boolean {
  if (list.length === 0) return true;
  for (const entry of list) {
    if (entry === model) return true;
    if (entry.endsWith("/*") && model.startsWith(entry.slice(0, -1))) return true;
  }
  return false;
}

export function canUse(p: Principal, model: string): boolean {
  return p.kind === "master" || (modelAllowed(p.key.models, model) && modelAllowed(p.team.models, model));
}

/** The served model a caller asked for: 404 when unknown, 403 when the key or team may not use it. */
export function authorizeModel(catalog: Catalog, p: Principal, name: string): ServedModel {
  const model = catalog.resolve(name);
  if (!model) {
    throw notFound(
      `The model '${name}' does not exist or is not served here; GET /v1/models lists yours`,
      "model_not_found",
      "model",
    );
  }
  if (p.kind === "key") {
    if (!modelAllowed(p.key.models, name)) {
      throw forbidden(`This key is not allowed to use the model '${name}'`, "model_not_allowed");
    }
    if (!modelAllowed(p.team.models, name)) {
      throw forbidden(
        `The key's team '${p.team.team_id}' is not allowed to use the model '${name}'`,
        "model_not_allowed",
      );
    }
  }
  return model;
}
