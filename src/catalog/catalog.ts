/**
 * The models this gateway serves: the shipped default catalog's entries for every configured
 * provider, plus (and overridden by) the `models:` of the config file. Each served model has one or
 * more deployments. A `<provider>/*` entry serves any model of that provider by name.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { ConfigError } from "../config/error";
import type { ModelConfig, ProviderConfig } from "../config/file";
import { badRequest, GatewayError } from "../http/errors";
import { validator } from "../http/validate";
import type { Deployment } from "../providers/types";
import { type CatalogEntry, CatalogFile, type ModelMode } from "./model";

export const DEFAULT_CATALOG_PATH = resolve(import.meta.dir, "../../config/catalog.yaml");

export interface Prices {
  input: number | null;
  output: number | null;
  cacheRead: number | null;
  cacheWrite: number | null;
  reasoning: number | null;
}

export interface ServedModel {
  name: string;
  /** The part before the slash. */
  provider: string;
  mode: ModelMode;
  prices: Prices;
  maxInputTokens: number | null;
  maxOutputTokens: number | null;
  capabilities: Record<string, boolean>;
  deployments: Deployment[];
  fallbacks: string[];
  timeoutMs?: number;
  streamIdleTimeoutMs?: number;
  maxRetries?: number;
}

const CAPABILITIES = [
  "supports_function_calling",
  "supports_parallel_function_calling",
  "supports_vision",
  "supports_response_schema",
  "supports_reasoning",
  "supports_prompt_caching",
] as const;

export function providerOf(name: string): string {
  return name.slice(0, name.indexOf("/"));
}

function upstreamOf(name: string): string {
  return name.slice(name.indexOf("/") + 1);
}

const checkCatalogFile = validator(CatalogFile, "default catalog");

export function loadCatalogFile(path = DEFAULT_CATALOG_PATH): CatalogEntry[] {
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(path, "utf8"));
  } catch (e) {
    throw new ConfigError(`Cannot read the model catalog ${path}: ${(e as Error).message}`);
  }
  try {
    return checkCatalogFile(raw).models;
  } catch (e) {
    if (e instanceof GatewayError) throw new ConfigError(`Model catalog ${path}: ${e.message}`);
    throw e;
  }
}

/**
 * How many `<provider>/*` resolutions are kept. Clients choose those names, so the cache is bounded
 * (oldest first out) and never listed: a resolution costs a few small objects when it is rebuilt.
 */
const WILDCARD_CACHE_MAX = 1024;

/**
 * Whether a model id requested through a wildcard could be sent upstream as given. Adapters put the
 * id in URL paths, where `.` and `..` segments would be resolved away and carry the provider's
 * credentials to another endpoint (`gemini/../../x` -> `/x:generateContent`).
 */
function hasDotSegment(id: string): boolean {
  for (const s of id.split("/")) if (s === "." || s === "..") return true;
  return false;
}

export class Catalog {
  private readonly exact = new Map<string, ServedModel>();
  private readonly wildcards = new Map<string, ServedModel>();
  private readonly resolved = new Map<string, ServedModel>();

  constructor(models: ServedModel[]) {
    for (const m of models) {
      if (m.name.endsWith("/*")) this.wildcards.set(m.provider, m);
      else this.exact.set(m.name, m);
    }
  }

  /**
   * The served model for a requested name, or undefined (a 404 for the caller). A name that a
   * wildcard would send upstream with `.`/`..` path segments is a 400.
   */
  resolve(name: string): ServedModel | undefined {
    const hit = this.exact.get(name) ?? this.resolved.get(name);
    if (hit) return hit;
    const slash = name.indexOf("/");
    if (slash <= 0 || slash === name.length - 1) return undefined;
    const wild = this.wildcards.get(name.slice(0, slash));
    if (!wild) return undefined;
    const upstream = upstreamOf(name);
    if (hasDotSegment(upstream)) {
      throw badRequest(`The model name '${name}' has '.' or '..' path segments`, "model", "invalid_model_name");
    }
    const model: ServedModel = {
      ...wild,
      name,
      deployments: wild.deployments.map((d) => ({ ...d, id: `${d.provider}/${upstream}`, upstreamModel: upstream })),
    };
    if (this.resolved.size >= WILDCARD_CACHE_MAX) this.resolved.delete(this.resolved.keys().next().value as string);
    this.resolved.set(name, model);
    return model;
  }

  /** Every configured model with a concrete name (wildcards, and names resolved through them, are not listed). */
  list(): ServedModel[] {
    return [...this.exact.values()].sort((a, b) => a.name.localeCompare(b.name));
  }
}

/**
 * Builds the catalog from the default entries and the configured models. Configured fields override
 * a default entry of the same name field by field.
 */
export function buildCatalog(
  providers: Record<string, ProviderConfig>,
  configured: ModelConfig[],
  defaults: CatalogEntry[],
): Catalog {
  const merged = new Map<string, ModelConfig>();
  for (const entry of defaults) if (providers[providerOf(entry.name)]) merged.set(entry.name, entry);
  configured.forEach((m, i) => {
    const base = merged.get(m.name);
    merged.set(m.name, base ? { ...base, ...m } : m);
    validateRouting(m, i, providers);
  });
  const served: ServedModel[] = [];
  for (const m of merged.values()) served.push(toServed(m, providers));
  for (const m of served) {
    for (const f of m.fallbacks) {
      if (!merged.has(f) && !merged.has(`${providerOf(f)}/*`)) {
        throw new ConfigError(`GATEWAY_CONFIG: model '${m.name}' falls back to '${f}', which is not a served model`);
      }
    }
  }
  return new Catalog(served);
}

function validateRouting(m: ModelConfig, index: number, providers: Record<string, ProviderConfig>): void {
  const where = `models[${index}]`;
  if (m.deployments) {
    m.deployments.forEach((d, j) => {
      if (!providers[d.provider]) {
        throw new ConfigError(
          `GATEWAY_CONFIG: field '${where}.deployments[${j}].provider' names provider '${d.provider}', which is not configured under 'providers'`,
        );
      }
    });
  } else if (!providers[providerOf(m.name)]) {
    throw new ConfigError(
      `GATEWAY_CONFIG: field '${where}.name': provider '${providerOf(m.name)}' of model '${m.name}' is not configured under 'providers'`,
    );
  }
}

function toServed(m: ModelConfig, providers: Record<string, ProviderConfig>): ServedModel {
  const provider = providerOf(m.name);
  const deployments: Deployment[] = (m.deployments ?? [{ provider, model: m.model ?? upstreamOf(m.name) }]).map(
    (d, i, all) => {
      const base = `${d.provider}/${d.model}`;
      const repeated = all.filter((x) => `${x.provider}/${x.model}` === base).length > 1;
      // The most specific setting wins: the deployment's own, the model's, then its provider's.
      const own = providers[d.provider];
      const timeout = d.timeout_seconds ?? m.timeout_seconds ?? own?.timeout_seconds;
      const idle = d.stream_idle_timeout_seconds ?? m.stream_idle_timeout_seconds ?? own?.stream_idle_timeout_seconds;
      return {
        id: repeated ? `${base}#${i}` : base,
        provider: d.provider,
        upstreamModel: d.model,
        weight: d.weight ?? 1,
        ...("api_base" in d && d.api_base !== undefined ? { apiBase: d.api_base } : {}),
        ...("api_key" in d && d.api_key !== undefined ? { apiKey: d.api_key } : {}),
        ...("headers" in d && d.headers !== undefined ? { headers: d.headers } : {}),
        ...(timeout !== undefined ? { timeoutMs: timeout * 1000 } : {}),
        ...(idle !== undefined ? { streamIdleTimeoutMs: idle * 1000 } : {}),
        ...("rpm" in d && d.rpm !== undefined ? { rpm: d.rpm } : {}),
        ...("tpm" in d && d.tpm !== undefined ? { tpm: d.tpm } : {}),
      };
    },
  );
  const capabilities: Record<string, boolean> = {};
  for (const c of CAPABILITIES) if (m[c] !== undefined) capabilities[c] = m[c] as boolean;
  return {
    name: m.name,
    provider,
    mode: m.mode ?? "chat",
    prices: {
      input: m.input_cost_per_token ?? null,
      output: m.output_cost_per_token ?? null,
      cacheRead: m.cache_read_input_token_cost ?? null,
      cacheWrite: m.cache_creation_input_token_cost ?? null,
      reasoning: m.output_cost_per_reasoning_token ?? null,
    },
    maxInputTokens: m.max_input_tokens ?? null,
    maxOutputTokens: m.max_output_tokens ?? null,
    capabilities,
    deployments,
    fallbacks: m.fallbacks ?? [],
    ...(m.timeout_seconds !== undefined ? { timeoutMs: m.timeout_seconds * 1000 } : {}),
    ...(m.stream_idle_timeout_seconds !== undefined
      ? { streamIdleTimeoutMs: m.stream_idle_timeout_seconds * 1000 }
      : {}),
    ...(m.max_retries !== undefined ? { maxRetries: m.max_retries } : {}),
  };
}
