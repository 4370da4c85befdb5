/**
 * AWS Bedrock through the Converse and ConverseStream APIs, one interface for every model family
 * Bedrock hosts. Requests are signed with SigV4 (service `bedrock`) from static credentials, or
 * carry a Bedrock API key as a bearer token. Streams come back in AWS's binary event-stream framing.
 */
import { ConfigError } from "../../config/error";
import type { ProviderConfig } from "../../config/file";
import { badRequest } from "../../http/errors";
import type { CanonicalRequest, CanonicalResponse, StreamEvent } from "../../protocols/canonical";
import { fetchFailure, UpstreamError, upstreamFetch, upstreamHttpError } from "../errors";
import type { CallContext, Deployment, ProviderAdapter } from "../types";
import { pathSegment } from "../url";
import { jsonFormat, toConverseRequest } from "./request";
import { type ConverseResponse, fromConverse, type ResponseContext } from "./response";
import { type AwsCredentials, signRequest } from "./sigv4";
import { converseStreamEvents } from "./stream";

export const SIGNING_SERVICE = "bedrock";

type Auth = { kind: "sigv4"; credentials: AwsCredentials } | { kind: "bearer"; token: string };

export interface BedrockAdapterOptions {
  /** Where AWS_* variables are read from (default: the process environment). */
  env?: Record<string, string | undefined>;
  /** The signing clock (tests). */
  now?: () => Date;
}

const set = (v: string | undefined): string | undefined => (v && v.trim() !== "" ? v : undefined);

/**
 * Credentials, in order: the provider's `api_key` (a Bedrock API key, sent as a bearer token) or its
 * `access_key_id`/`secret_access_key`[/`session_token`] (never both); else AWS_BEARER_TOKEN_BEDROCK;
 * else AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN]. Only static credentials: no
 * profiles, SSO or instance roles.
 */
function resolveAuth(name: string, cfg: ProviderConfig, env: Record<string, string | undefined>): Auth {
  const field = (f: string) => `providers.${name}.${f}`;
  const apiKey = set(cfg.api_key);
  const akid = set(cfg.access_key_id);
  const secret = set(cfg.secret_access_key);
  if (apiKey && (akid || secret)) {
    throw new ConfigError(
      `GATEWAY_CONFIG: set either '${field("api_key")}' (a Bedrock API key) or '${field("access_key_id")}'/'${field("secret_access_key")}', not both`,
    );
  }
  if (apiKey) return { kind: "bearer", token: apiKey };
  if (akid || secret) {
    if (!akid)
      throw new ConfigError(`GATEWAY_CONFIG: field '${field("access_key_id")}' is required with secret_access_key`);
    if (!secret)
      throw new ConfigError(`GATEWAY_CONFIG: field '${field("secret_access_key")}' is required with access_key_id`);
    const token = set(cfg.session_token);
    return {
      kind: "sigv4",
      credentials: { accessKeyId: akid, secretAccessKey: secret, ...(token ? { sessionToken: token } : {}) },
    };
  }
  if (set(cfg.session_token)) {
    throw new ConfigError(
      `GATEWAY_CONFIG: field '${field("session_token")}' needs access_key_id and secret_access_key`,
    );
  }
  const bearer = set(env.AWS_BEARER_TOKEN_BEDROCK);
  if (bearer) return { kind: "bearer", token: bearer };
  const envId = set(env.AWS_ACCESS_KEY_ID);
  const envSecret = set(env.AWS_SECRET_ACCESS_KEY);
  if (envId && envSecret) {
    const token = set(env.AWS_SESSION_TOKEN);
    return {
      kind: "sigv4",
      credentials: { accessKeyId: envId, secretAccessKey: envSecret, ...(token ? { sessionToken: token } : {}) },
    };
  }
  throw new ConfigError(
    `GATEWAY_CONFIG: provider '${name}' (bedrock) has no credentials: set '${field("access_key_id")}' and '${field("secret_access_key")}' (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or a Bedrock API key in '${field("api_key")}' (or AWS_BEARER_TOKEN_BEDROCK)`,
  );
}

export function createBedrockAdapter(
  name: string,
  cfg: ProviderConfig,
  opts: BedrockAdapterOptions = {},
): ProviderAdapter {
  const env = opts.env ?? process.env;
  const now = opts.now ?? (() => new Date());
  const region = set(cfg.region) ?? set(env.AWS_REGION) ?? set(env.AWS_DEFAULT_REGION);
  if (!region) {
    throw new ConfigError(
      `GATEWAY_CONFIG: field 'providers.${name}.region' is required for type bedrock (or set AWS_REGION)`,
    );
  }
  const auth = resolveAuth(name, cfg, env);
  const base = (cfg.api_base ?? `https://bedrock-runtime.${region}.amazonaws.com`).replace(/\/+$/, "");

  const authOf = (d: Deployment): Auth => (set(d.apiKey) ? { kind: "bearer", token: d.apiKey as string } : auth);
  const secrets = (d: Deployment): (string | undefined)[] => [
    d.apiKey,
    auth.kind === "bearer" ? auth.token : auth.credentials.secretAccessKey,
    auth.kind === "sigv4" ? auth.credentials.sessionToken : undefined,
    auth.kind === "sigv4" ? auth.credentials.accessKeyId : undefined,
  ];

  const send = async (
    op: "converse" | "converse-stream",
    body: unknown,
    d: Deployment,
    ctx: CallContext,
  ): Promise<Response> => {
    const b = d.apiBase?.replace(/\/+$/, "") ?? base;
    const url = new URL(`${b}/model/${pathSegment(d.upstreamModel)}/${op}`);
    const text = JSON.stringify(body);
    const headers: Record<string, string> = { "content-type": "application/json", ...cfg.headers, ...d.headers };
    const a = authOf(d);
    if (a.kind === "bearer") headers.authorization = `Bearer ${a.token}`;
    else {
      const signed = signRequest({
        method: "POST",
        host: url.host,
        path: url.pathname,
        query: url.search.slice(1),
        headers,
        body: text,
        region,
        service: SIGNING_SERVICE,
        credentials: a.credentials,
        date: now(),
      });
      Object.assign(headers, signed.headers);
    }
    const res = await upstreamFetch(url.href, { method: "POST", headers, body: text }, name, ctx);
    if (!res.ok) {
      const err = await upstreamHttpError(res, name, secrets(d));
      // `x-amzn-errortype: ThrottlingException:http://internal.amazon.com/coral/...`
      const errorType = res.headers.get("x-amzn-errortype")?.split(":")[0];
      if (!errorType) throw err;
      throw new UpstreamError("http", err.message, {
        status: err.status,
        upstreamType: errorType,
        ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
      });
    }
    return res;
  };

  const prepare = async (req: CanonicalRequest, d: Deployment, ctx: CallContext) => {
    if (req.n !== undefined && req.n > 1) {
      throw badRequest(
        `The model '${req.model}' is served by AWS Bedrock, which returns one choice; n must be 1`,
        "n",
        "unsupported_parameter",
      );
    }
    return toConverseRequest(req, d.upstreamModel, ctx);
  };

  const responseContext = (res: Response, req: CanonicalRequest, d: Deployment): ResponseContext => ({
    provider: name,
    id: res.headers.get("x-amzn-requestid") ?? crypto.randomUUID(),
    model: d.upstreamModel,
    jsonMode: jsonFormat(req.responseFormat),
  });

  return {
    type: "bedrock",
    async chat(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<CanonicalResponse> {
      const res = await send("converse", await prepare(req, d, ctx), d, ctx);
      let text: string;
      try {
        text = await res.text();
      } catch (e) {
        throw fetchFailure(e, name, ctx.signal);
      }
      let json: ConverseResponse;
      try {
        json = JSON.parse(text) as ConverseResponse;
      } catch {
        throw new UpstreamError("protocol", `${name} returned a body that is not JSON`, { status: 502 });
      }
      return fromConverse(json, responseContext(res, req, d));
    },
    async chatStream(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
      const res = await send("converse-stream", await prepare(req, d, ctx), d, ctx);
      if (!res.body) throw new UpstreamError("protocol", `${name} returned an empty stream`, { status: 502 });
      return converseStreamEvents(res.body, responseContext(res, req, d));
    },
  };
}
