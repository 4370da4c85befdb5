/**
 * Anthropic's Messages API (`POST /v1/messages`). Translation lives in the shared Anthropic dialect;
 * this file only knows the URL, the headers and how a response is read.
 */
import type { ProviderConfig } from "../../config/file";
import type { AnthropicMessage } from "../../protocols/anthropic/wire";
import type { CanonicalRequest, CanonicalResponse, StreamEvent } from "../../protocols/canonical";
import { anthropicStreamEvents, fromAnthropicMessage, toAnthropicBody } from "../dialects/anthropic";
import { UpstreamError, upstreamFetch, upstreamHttpError } from "../errors";
import type { CallContext, Deployment, NativeProtocol, ProviderAdapter } from "../types";

export const ANTHROPIC_API_BASE = "https://api.anthropic.com";
export const ANTHROPIC_VERSION = "2023-06-01";

/** `https://host` and `https://host/v1` (as other tools configure it) both reach `/v1/messages`. */
export function messagesUrl(apiBase: string): string {
  const base = apiBase.replace(/\/+$/, "");
  return /\/v1$/.test(base) ? `${base}/messages` : `${base}/v1/messages`;
}

export function createAnthropicAdapter(name: string, cfg: ProviderConfig): ProviderAdapter {
  const defaultUrl = messagesUrl(cfg.api_base ?? ANTHROPIC_API_BASE);
  const version = cfg.anthropic_version ?? ANTHROPIC_VERSION;

  const url = (d: Deployment): string => (d.apiBase ? messagesUrl(d.apiBase) : defaultUrl);
  const headers = (d: Deployment): Record<string, string> => {
    const key = d.apiKey ?? cfg.api_key;
    // Configured headers (e.g. `anthropic-beta`) may add to or override the defaults; the key is last.
    const h: Record<string, string> = {
      "content-type": "application/json",
      "anthropic-version": version,
      ...cfg.headers,
      ...d.headers,
    };
    if (key) h["x-api-key"] = key;
    return h;
  };

  const post = async (body: unknown, d: Deployment, ctx: CallContext): Promise<Response> => {
    const res = await upstreamFetch(
      url(d),
      { method: "POST", headers: headers(d), body: JSON.stringify(body) },
      name,
      ctx,
    );
    if (!res.ok) throw await upstreamHttpError(res, name, [d.apiKey, cfg.api_key]);
    return res;
  };

  const send = (req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<Response> =>
    // Built before the call: a request Anthropic cannot serve (n > 1) fails here with a 400.
    post(
      toAnthropicBody(req, d.upstreamModel, {
        ...(ctx.defaultMaxTokens !== undefined ? { defaultMaxTokens: ctx.defaultMaxTokens } : {}),
      }),
      d,
      ctx,
    );

  return {
    type: "anthropic",
    async chat(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<CanonicalResponse> {
      const res = await send({ ...req, stream: false }, d, ctx);
      let json: AnthropicMessage;
      try {
        json = (await res.json()) as AnthropicMessage;
      } catch {
        throw new UpstreamError("protocol", `${name} returned a body that is not JSON`, { status: 502 });
      }
      return fromAnthropicMessage(json, name);
    },
    async chatStream(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
      const res = await send({ ...req, stream: true }, d, ctx);
      if (!res.body) throw new UpstreamError("protocol", `${name} returned an empty stream`, { status: 502 });
      return anthropicStreamEvents(res.body, name);
    },
    /** A Messages client's body goes upstream as it came, with the deployment's model id. */
    passthrough(protocol: NativeProtocol, body: Record<string, unknown>, d: Deployment, ctx: CallContext) {
      return protocol === "anthropic-messages" ? post({ ...body, model: d.upstreamModel }, d, ctx) : null;
    },
  };
}
