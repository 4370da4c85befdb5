/**
 * Google AI Studio's Gemini API (`generativelanguage.googleapis.com`), type `gemini`. The key goes in
 * the `x-goog-api-key` header, never in the URL, so it stays out of every log on the way.
 */
import type { ProviderConfig } from "../../config/file";
import type { CanonicalRequest, CanonicalResponse, StreamEvent } from "../../protocols/canonical";
import type { GenerateContentResponse } from "../../protocols/gemini/wire";
import {
  fromGeminiResponse,
  geminiHttpError,
  geminiStreamEvents,
  readUpstreamJson,
  toGeminiBody,
} from "../dialects/gemini";
import { UpstreamError, upstreamFetch } from "../errors";
import type { CallContext, Deployment, NativeProtocol, ProviderAdapter } from "../types";
import { pathSegment } from "../url";

export const GEMINI_API_BASE = "https://generativelanguage.googleapis.com/v1beta";

/**
 * `models/{model}` for a plain id; ids that already name their collection (`models/…`,
 * `tunedModels/…`) are used as they are. Each path segment is escaped; `.`/`..` segments are a 400.
 */
export function geminiModelPath(model: string): string {
  const path = /^(models|tunedModels)\//.test(model) ? model : `models/${model}`;
  return path.split("/").map(pathSegment).join("/");
}

export function createGeminiAdapter(name: string, cfg: ProviderConfig): ProviderAdapter {
  const base = (cfg.api_base ?? GEMINI_API_BASE).replace(/\/+$/, "");

  const url = (d: Deployment, stream: boolean): string => {
    const b = d.apiBase?.replace(/\/+$/, "") ?? base;
    const m = geminiModelPath(d.upstreamModel);
    return stream ? `${b}/${m}:streamGenerateContent?alt=sse` : `${b}/${m}:generateContent`;
  };
  const headers = (d: Deployment): Record<string, string> => {
    const key = d.apiKey ?? cfg.api_key;
    const h: Record<string, string> = { "content-type": "application/json", ...cfg.headers, ...d.headers };
    if (key) h["x-goog-api-key"] = key;
    return h;
  };

  const post = async (body: unknown, d: Deployment, ctx: CallContext, stream: boolean) => {
    const res = await upstreamFetch(
      url(d, stream),
      { method: "POST", headers: headers(d), body: JSON.stringify(body) },
      name,
      ctx,
    );
    if (!res.ok) throw await geminiHttpError(res, name, [d.apiKey, cfg.api_key]);
    return res;
  };
  const send = async (req: CanonicalRequest, d: Deployment, ctx: CallContext, stream: boolean) =>
    post(await toGeminiBody(req, { fetchImage: ctx.fetchImage, signal: ctx.signal }), d, ctx, stream);

  return {
    type: "gemini",
    async chat(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<CanonicalResponse> {
      const res = await send(req, d, ctx, false);
      return fromGeminiResponse(
        await readUpstreamJson<GenerateContentResponse>(res, name, ctx.signal),
        name,
        d.upstreamModel,
      );
    },
    async chatStream(req: CanonicalRequest, d: Deployment, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
      const res = await send(req, d, ctx, true);
      if (!res.body) throw new UpstreamError("protocol", `${name} returned an empty stream`, { status: 502 });
      return geminiStreamEvents(res.body, name, d.upstreamModel);
    },
    /** A generateContent client's body goes upstream as it came; the model is in the URL. */
    passthrough(
      protocol: NativeProtocol,
      body: Record<string, unknown>,
      d: Deployment,
      ctx: CallContext,
      stream: boolean,
    ) {
      return protocol === "gemini" ? post(body, d, ctx, stream) : null;
    },
  };
}
