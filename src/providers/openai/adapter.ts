/**
 * OpenAI and everything that speaks its chat-completions API: `openai`, `openai-compatible` (Groq,
 * DeepSeek, Mistral, xAI, Together, Fireworks, OpenRouter, Ollama, vLLM... are configs over it) and
 * `azure` (deployment URLs, `api-key` header, api-version). Models whose catalog mode is
 * `responses` (o3-pro, gpt-5.5-pro, ...) exist only in the provider's Responses API: for them the
 * adapter speaks that API (see providers/dialects/openai-responses), on every provider of the family.
 */
import { ConfigError } from "../../config/error";
import type { ProviderConfig } from "../../config/file";
import type { CanonicalRequest, CanonicalResponse, StreamEvent } from "../../protocols/canonical";
import type { ChatCompletion } from "../../protocols/openai-chat/wire";
import type { UpstreamResponse } from "../../protocols/openai-responses/wire";
import { fromResponsesObject, responsesStreamEvents, toResponsesBody } from "../dialects/openai-responses";
import { readUpstreamJson, UpstreamError, upstreamFetch, upstreamHttpError } from "../errors";
import type { CallContext, Deployment, NativeProtocol, ProviderAdapter } from "../types";
import { pathSegment } from "../url";
import { type MaxTokensField, toChatRequest } from "./request";
import { fromChatCompletion } from "./response";
import { chatChunkEvents } from "./stream";

type OpenAIFamily = "openai" | "openai-compatible" | "azure";

export const OPENAI_API_BASE = "https://api.openai.com/v1";

export interface OpenAIAdapter extends ProviderAdapter {
  readonly type: OpenAIFamily;
}

export function createOpenAIAdapter(name: string, type: OpenAIFamily, cfg: ProviderConfig): OpenAIAdapter {
  const field = (f: string) => `providers.${name}.${f}`;
  if (type === "openai-compatible" && !cfg.api_base) {
    throw new ConfigError(`GATEWAY_CONFIG: field '${field("api_base")}' is required for type openai-compatible`);
  }
  if (type === "azure") {
    if (!cfg.api_base)
      throw new ConfigError(
        `GATEWAY_CONFIG: field '${field("api_base")}' is required for type azure (https://<resource>.openai.azure.com)`,
      );
    if (!cfg.api_version)
      throw new ConfigError(`GATEWAY_CONFIG: field '${field("api_version")}' is required for type azure`);
  }
  const base = (cfg.api_base ?? OPENAI_API_BASE).replace(/\/+$/, "");
  const maxField: MaxTokensField =
    type === "openai-compatible" ? (cfg.max_tokens_field ?? "max_tokens") : "max_completion_tokens";
  const azureV1 = type === "azure" && (cfg.api_version === "v1" || cfg.api_version === "preview");

  /** `chat/completions` or `responses` on this provider, for this deployment. */
  const url = (d: Deployment, api: "chat/completions" | "responses" = "chat/completions"): string => {
    const b = d.apiBase?.replace(/\/+$/, "") ?? base;
    if (type !== "azure") return `${b}/${api}`;
    const version = encodeURIComponent(cfg.api_version as string);
    if (azureV1) return `${b}/openai/v1/${api}${cfg.api_version === "preview" ? "?api-version=preview" : ""}`;
    if (api === "responses") return `${b}/openai/responses?api-version=${version}`;
    return `${b}/openai/deployments/${pathSegment(d.upstreamModel)}/chat/completions?api-version=${version}`;
  };
  const headers = (d: Deployment): Record<string, string> => {
    const key = d.apiKey ?? cfg.api_key;
    const h: Record<string, string> = { "content-type": "application/json", ...cfg.headers, ...d.headers };
    if (key) {
      if (type === "azure") h["api-key"] = key;
      else h.authorization = `Bearer ${key}`;
    }
    return h;
  };
  const secrets = (d: Deployment) => [d.apiKey, cfg.api_key];

  const send = async (body: unknown, d: Deployment, ctx: CallContext, target = url(d)): Promise<Response> => {
    const res = await upstreamFetch(
      target,
      { method: "POST", headers: headers(d), body: JSON.stringify(body) },
      name,
      ctx,
    );
    if (!res.ok) throw await upstreamHttpError(res, name, secrets(d));
    return res;
  };

  return {
    type,
    async chat(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<CanonicalResponse> {
      if (ctx.responsesApi) {
        const res = await send(
          toResponsesBody({ ...req, stream: false }, d.upstreamModel),
          d,
          ctx,
          url(d, "responses"),
        );
        return fromResponsesObject(await readUpstreamJson<UpstreamResponse>(res, name, ctx.signal), name);
      }
      const res = await send(toChatRequest({ ...req, stream: false }, d.upstreamModel, maxField), d, ctx);
      return fromChatCompletion(await readUpstreamJson<ChatCompletion>(res, name, ctx.signal), name);
    },
    async chatStream(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
      const responses = ctx.responsesApi === true;
      const res = responses
        ? await send(toResponsesBody({ ...req, stream: true }, d.upstreamModel), d, ctx, url(d, "responses"))
        : await send(toChatRequest({ ...req, stream: true }, d.upstreamModel, maxField), d, ctx);
      if (!res.body) throw new UpstreamError("protocol", `${name} returned an empty stream`, { status: 502 });
      return responses ? responsesStreamEvents(res.body, name) : chatChunkEvents(res.body, name);
    },
    passthrough(
      protocol: NativeProtocol,
      body: Record<string, unknown>,
      d: Deployment,
      ctx: CallContext,
    ): Promise<Response> | null {
      if (protocol === "openai-responses")
        return send({ ...body, model: d.upstreamModel }, d, ctx, url(d, "responses"));
      if (protocol !== "openai-chat") return null;
      const out: Record<string, unknown> = { ...body, model: d.upstreamModel };
      // Servers that only know the older field (Ollama, many vLLM builds) get it under that name.
      if (maxField === "max_tokens" && out.max_completion_tokens != null && out.max_tokens == null) {
        out.max_tokens = out.max_completion_tokens;
        delete out.max_completion_tokens;
      }
      return send(out, d, ctx);
    },
  };
}
