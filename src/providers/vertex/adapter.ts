/**
 * Google Cloud Vertex AI, type `vertex`: Gemini models through generateContent and Claude models
 * through Anthropic's Messages body on `rawPredict`, both authorised by an OAuth access token that
 * a service-account key obtains (RS256-signed JWT -> the key's token_uri), cached until shortly
 * before it expires and shared by concurrent callers.
 */
import { createPrivateKey, type KeyObject, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError } from "../../config/error";
import type { ProviderConfig } from "../../config/file";
import type {
  CanonicalRequest,
  CanonicalResponse,
  ImagePart,
  Message,
  StreamEvent,
  UserPart,
} from "../../protocols/canonical";
import type { GenerateContentResponse } from "../../protocols/gemini/wire";
import { anthropicStreamEvents, fromAnthropicMessage, toAnthropicBody } from "../dialects/anthropic";
import {
  fromGeminiResponse,
  geminiHttpError,
  geminiStreamEvents,
  readUpstreamJson,
  toGeminiBody,
} from "../dialects/gemini";
import { fetchFailure, scrub, UpstreamError, upstreamFetch } from "../errors";
import type { CallContext, Deployment, NativeProtocol, ProviderAdapter } from "../types";
import { pathSegment } from "../url";

export const VERTEX_DEFAULT_LOCATION = "us-central1";
export const CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
export const GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token";
/** The Messages API version Claude on Vertex expects in the body (instead of a header). */
export const VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16";
/** A cached token is renewed this long before it expires. */
export const TOKEN_REFRESH_MARGIN_MS = 60_000;
const TOKEN_LIFETIME_S = 3600;
const TOKEN_TIMEOUT_MS = 30_000;

/** The fields of a service-account JSON key the gateway uses. */
export interface ServiceAccountKey {
  client_email: string;
  private_key: string;
  private_key_id?: string;
  token_uri: string;
  project_id?: string;
}

/**
 * Reads `credentials`: the key's JSON text inline, or the path of a file holding it. Errors name
 * the field and never echo the key's contents.
 */
export function loadServiceAccount(name: string, credentials: string | undefined): ServiceAccountKey {
  const field = `providers.${name}.credentials`;
  if (!credentials) {
    throw new ConfigError(
      `GATEWAY_CONFIG: field '${field}' is required for type vertex (a service-account JSON key, inline or as a file path)`,
    );
  }
  let text = credentials.trim();
  if (!text.startsWith("{")) {
    try {
      text = readFileSync(text, "utf8");
    } catch (e) {
      throw new ConfigError(
        `GATEWAY_CONFIG: field '${field}': cannot read the service-account key file ${text}: ${(e as NodeJS.ErrnoException).code ?? "read failed"}`,
      );
    }
  }
  let raw: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(text);
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
    raw = parsed as Record<string, unknown>;
  } catch {
    throw new ConfigError(`GATEWAY_CONFIG: field '${field}' is not a service-account key in JSON`);
  }
  if (raw.type !== undefined && raw.type !== "service_account") {
    throw new ConfigError(
      `GATEWAY_CONFIG: field '${field}' holds a key of type '${String(raw.type)}'; type vertex needs a service_account key`,
    );
  }
  for (const k of ["client_email", "private_key"] as const) {
    if (typeof raw[k] !== "string" || raw[k] === "") {
      throw new ConfigError(`GATEWAY_CONFIG: field '${field}': the service-account key has no ${k}`);
    }
  }
  const tokenUri = raw.token_uri === undefined ? GOOGLE_TOKEN_URI : raw.token_uri;
  if (typeof tokenUri !== "string" || !/^https?:\/\//.test(tokenUri)) {
    throw new ConfigError(`GATEWAY_CONFIG: field '${field}': the service-account key's token_uri is not a URL`);
  }
  return {
    client_email: raw.client_email as string,
    private_key: raw.private_key as string,
    token_uri: tokenUri,
    ...(typeof raw.private_key_id === "string" ? { private_key_id: raw.private_key_id } : {}),
    ...(typeof raw.project_id === "string" ? { project_id: raw.project_id } : {}),
  };
}

const base64url = (data: string | Buffer): string => Buffer.from(data).toString("base64url");

interface CachedToken {
  token: string;
  /** Epoch ms. */
  expiresAt: number;
}

/**
 * OAuth access tokens for one service account. A token is reused until TOKEN_REFRESH_MARGIN_MS
 * before it expires; callers that arrive while a refresh is under way wait for that one request.
 * A token-endpoint failure is an UpstreamError: a refusal (4xx but 429) is a 401, which the router
 * answers with a 502 that names no credential.
 */
export class ServiceAccountTokens {
  private readonly key: KeyObject;
  private cached: CachedToken | undefined;
  private inflight: Promise<CachedToken> | undefined;

  constructor(
    private readonly account: ServiceAccountKey,
    private readonly provider: string,
    private readonly opts: { now?: () => number; timeoutMs?: number } = {},
  ) {
    this.key = createPrivateKey(account.private_key);
  }

  private now(): number {
    return this.opts.now ? this.opts.now() : Date.now();
  }

  /** A valid access token; waits for at most `signal`. */
  async token(signal: AbortSignal): Promise<string> {
    const c = this.cached;
    if (c && this.now() < c.expiresAt - TOKEN_REFRESH_MARGIN_MS) return c.token;
    if (!this.inflight) {
      const p = this.refresh();
      this.inflight = p;
      p.then(
        () => {
          if (this.inflight === p) this.inflight = undefined;
        },
        () => {
          if (this.inflight === p) this.inflight = undefined;
        },
      );
    }
    return (await abortable(this.inflight, signal, this.provider)).token;
  }

  /** Forgets a token the API refused, so the next call fetches a fresh one. */
  invalidate(token: string): void {
    if (this.cached?.token === token) this.cached = undefined;
  }

  /** The signed JWT assertion exchanged for a token (RFC 7523). */
  assertion(nowMs: number): string {
    const iat = Math.floor(nowMs / 1000);
    const header = {
      alg: "RS256",
      typ: "JWT",
      ...(this.account.private_key_id ? { kid: this.account.private_key_id } : {}),
    };
    const claims = {
      iss: this.account.client_email,
      scope: CLOUD_PLATFORM_SCOPE,
      aud: this.account.token_uri,
      iat,
      exp: iat + TOKEN_LIFETIME_S,
    };
    const input = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
    return `${input}.${base64url(sign("RSA-SHA256", Buffer.from(input), this.key))}`;
  }

  private async refresh(): Promise<CachedToken> {
    const startedAt = this.now();
    const assertion = this.assertion(startedAt);
    const signal = AbortSignal.timeout(this.opts.timeoutMs ?? TOKEN_TIMEOUT_MS);
    const secrets = [assertion, this.account.private_key];
    let res: Response;
    let text: string;
    try {
      res = await fetch(this.account.token_uri, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion }).toString(),
        signal,
      });
      text = await res.text();
    } catch (e) {
      const f = fetchFailure(e, this.provider, signal);
      throw new UpstreamError(f.kind, `${this.provider}: token endpoint: ${scrub(f.message, secrets)}`, {
        status: f.status,
      });
    }
    let body: { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown } = {};
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === "object") body = parsed as typeof body;
    } catch {
      // Described below by status.
    }
    if (!res.ok) {
      const code = typeof body.error === "string" ? body.error : undefined;
      const detail = [code, typeof body.error_description === "string" ? body.error_description : undefined]
        .filter(Boolean)
        .join(": ");
      const refused = res.status >= 400 && res.status < 500 && res.status !== 429;
      throw new UpstreamError(
        "http",
        `${this.provider}: the token endpoint ${refused ? "refused the service account" : "failed"} (${res.status}${detail ? ` ${scrub(detail, secrets)}` : ""})`,
        { status: refused ? 401 : res.status, ...(code ? { upstreamType: code } : {}) },
      );
    }
    if (typeof body.access_token !== "string" || body.access_token === "") {
      throw new UpstreamError("protocol", `${this.provider}: the token endpoint returned no access_token`, {
        status: 502,
      });
    }
    const lifetime = typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in : TOKEN_LIFETIME_S;
    this.cached = { token: body.access_token, expiresAt: startedAt + lifetime * 1000 };
    return this.cached;
  }
}

/** Waits for a shared promise, giving up (without cancelling it) when this caller's signal fires. */
function abortable<T>(p: Promise<T>, signal: AbortSignal, provider: string): Promise<T> {
  if (signal.aborted) return Promise.reject(fetchFailure(signal.reason, provider, signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(fetchFailure(signal.reason, provider, signal));
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/**
 * Claude on Vertex takes images inline only: URL images are downloaded (through the SSRF-guarded
 * fetcher) and the request carries their bytes.
 */
async function inlineImageUrls(req: CanonicalRequest, ctx: CallContext): Promise<CanonicalRequest> {
  const cache = new Map<string, Promise<ImagePart>>();
  const inline = (p: ImagePart): Promise<ImagePart> => {
    const s = p.source;
    if (s.kind !== "url") return Promise.resolve(p);
    let got = cache.get(s.url);
    if (!got) {
      got = ctx.fetchImage(s.url, ctx.signal).then((img) => ({
        ...p,
        source: { kind: "base64", mediaType: img.mediaType, data: img.data },
      }));
      cache.set(s.url, got);
    }
    return got;
  };
  const isUrl = (p: { type: string; source?: ImagePart["source"] }) => p.type === "image" && p.source?.kind === "url";
  const hasUrl = (p: UserPart) => isUrl(p) || (p.type === "tool_result" && p.content.some(isUrl));
  if (!req.messages.some((m) => m.role === "user" && m.content.some(hasUrl))) return req;
  const messages = await Promise.all(
    req.messages.map(async (m): Promise<Message> => {
      if (m.role === "assistant") return m;
      const content = await Promise.all(
        m.content.map(async (p): Promise<UserPart> => {
          if (p.type === "image") return inline(p);
          if (p.type !== "tool_result") return p;
          return {
            ...p,
            content: await Promise.all(p.content.map((c) => (c.type === "image" ? inline(c) : c))),
          };
        }),
      );
      return { role: "user", content };
    }),
  );
  return { ...req, messages };
}

/** Claude models are served by Anthropic's publisher with the Messages body; the rest are Gemini. */
export const isClaudeModel = (model: string): boolean => model.toLowerCase().startsWith("claude");

/** Path segments escaped (`.`/`..` refused), but `@` (Claude versions) kept as Google documents it. */
const segment = (s: string): string => pathSegment(s).replace(/%40/g, "@");

export interface VertexOptions {
  /** The clock for token expiry (tests). */
  now?: () => number;
}

export function createVertexAdapter(name: string, cfg: ProviderConfig, opts: VertexOptions = {}): ProviderAdapter {
  const field = (f: string) => `providers.${name}.${f}`;
  if (!cfg.project) throw new ConfigError(`GATEWAY_CONFIG: field '${field("project")}' is required for type vertex`);
  const location = cfg.location ?? VERTEX_DEFAULT_LOCATION;
  if (!/^[a-z0-9-]+$/.test(location)) {
    throw new ConfigError(
      `GATEWAY_CONFIG: field '${field("location")}' must be a region such as us-central1, europe-west4 or global`,
    );
  }
  const account = loadServiceAccount(name, cfg.credentials);
  let tokens: ServiceAccountTokens;
  try {
    tokens = new ServiceAccountTokens(account, name, { ...(opts.now ? { now: opts.now } : {}) });
  } catch {
    throw new ConfigError(
      `GATEWAY_CONFIG: field '${field("credentials")}': the service-account key's private_key is not a usable PEM private key`,
    );
  }
  const host = location === "global" ? "aiplatform.googleapis.com" : `${location}-aiplatform.googleapis.com`;
  const base = (cfg.api_base ?? `https://${host}/v1`).replace(/\/+$/, "");
  const project = segment(cfg.project);

  const url = (d: Deployment, method: string): string => {
    const b = d.apiBase?.replace(/\/+$/, "") ?? base;
    const publisher = isClaudeModel(d.upstreamModel) ? "anthropic" : "google";
    return `${b}/projects/${project}/locations/${location}/publishers/${publisher}/models/${segment(d.upstreamModel)}:${method}`;
  };

  const send = async (target: string, body: unknown, d: Deployment, ctx: CallContext): Promise<Response> => {
    const token = await tokens.token(ctx.signal);
    const headers: Record<string, string> = {
      "content-type": "application/json",
      ...cfg.headers,
      ...d.headers,
      authorization: `Bearer ${token}`,
    };
    const res = await upstreamFetch(target, { method: "POST", headers, body: JSON.stringify(body) }, name, ctx);
    if (!res.ok) {
      if (res.status === 401) tokens.invalidate(token);
      throw await geminiHttpError(res, name, [token, account.private_key, d.apiKey, cfg.api_key]);
    }
    return res;
  };

  const claudeBody = async (req: CanonicalRequest, ctx: CallContext, stream: boolean) => ({
    ...toAnthropicBody(
      { ...(await inlineImageUrls(req, ctx)), stream },
      undefined,
      ctx.defaultMaxTokens !== undefined ? { defaultMaxTokens: ctx.defaultMaxTokens } : {},
    ),
    anthropic_version: VERTEX_ANTHROPIC_VERSION,
  });

  return {
    type: "vertex",
    async chat(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<CanonicalResponse> {
      if (isClaudeModel(d.upstreamModel)) {
        const res = await send(url(d, "rawPredict"), await claudeBody(req, ctx, false), d, ctx);
        return fromAnthropicMessage(await readUpstreamJson(res, name, ctx.signal), name);
      }
      const body = await toGeminiBody(req, { fetchImage: ctx.fetchImage, signal: ctx.signal });
      const res = await send(url(d, "generateContent"), body, d, ctx);
      return fromGeminiResponse(
        await readUpstreamJson<GenerateContentResponse>(res, name, ctx.signal),
        name,
        d.upstreamModel,
      );
    },
    async chatStream(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
      const claude = isClaudeModel(d.upstreamModel);
      const res = claude
        ? await send(url(d, "streamRawPredict"), await claudeBody(req, ctx, true), d, ctx)
        : await send(
            url(d, "streamGenerateContent?alt=sse"),
            await toGeminiBody(req, { fetchImage: ctx.fetchImage, signal: ctx.signal }),
            d,
            ctx,
          );
      if (!res.body) throw new UpstreamError("protocol", `${name} returned an empty stream`, { status: 502 });
      return claude ? anthropicStreamEvents(res.body, name) : geminiStreamEvents(res.body, name, d.upstreamModel);
    },
    /**
     * Native bodies: a Messages client reaches Claude models (the model moves to the URL and the
     * body carries Vertex's anthropic_version), a generateContent client reaches Gemini models.
     */
    passthrough(
      protocol: NativeProtocol,
      body: Record<string, unknown>,
      d: Deployment,
      ctx: CallContext,
      stream: boolean,
    ) {
      const claude = isClaudeModel(d.upstreamModel);
      if (protocol === "anthropic-messages" && claude) {
        const { model: _model, ...rest } = body;
        const target = url(d, stream ? "streamRawPredict" : "rawPredict");
        return send(target, { ...rest, anthropic_version: VERTEX_ANTHROPIC_VERSION }, d, ctx);
      }
      if (protocol === "gemini" && !claude) {
        return send(url(d, stream ? "streamGenerateContent?alt=sse" : "generateContent"), body, d, ctx);
      }
      return null;
    },
  };
}
