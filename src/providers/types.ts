/**
 * The contract between the router and provider adapters. An adapter is built once per configured
 * provider (credentials parsed, signers prepared) and then called per request with a deployment.
 */
import type { Logger } from "../log";
import type { CanonicalRequest, CanonicalResponse, StreamEvent } from "../protocols/canonical";
import type { ImageFetcher } from "./images";

export const PROVIDER_TYPES = [
  "openai",
  "openai-compatible",
  "azure",
  "anthropic",
  "gemini",
  "vertex",
  "bedrock",
] as const;
export type ProviderType = (typeof PROVIDER_TYPES)[number];

/** One upstream endpoint for one model: where to send it and what to call it there. */
export interface Deployment {
  /** Stable id for logs, cooldowns and headers: `<provider>/<upstream model>` plus an index when repeated. */
  id: string;
  provider: string;
  /** The model id the upstream API expects (Azure: the deployment name). */
  upstreamModel: string;
  weight: number;
  /** Overrides of the provider's settings for this deployment. */
  apiBase?: string;
  apiKey?: string;
  headers?: Record<string, string>;
  /** Until the upstream answers (a stream: until its headers): the deployment's, else its model's, else its provider's. */
  timeoutMs?: number;
  /** How long a started stream may go without a byte from the upstream (same precedence). */
  streamIdleTimeoutMs?: number;
  /** Requests and tokens per minute the router sends this deployment (counted per gateway instance). */
  rpm?: number;
  tpm?: number;
}

/** Time spent waiting for upstream responses, summed over a request's attempts (for the overhead header). */
export interface UpstreamTiming {
  upstreamMs: number;
}

export interface CallContext {
  /** Aborts on client disconnect and on the upstream timeout. */
  signal: AbortSignal;
  log: Logger;
  /** The catalog's max output tokens for the model, for upstreams that require a cap (Anthropic). */
  defaultMaxTokens?: number;
  /** Downloads an image URL for upstreams that only accept inline bytes (Gemini, Bedrock). */
  fetchImage: ImageFetcher;
  /**
   * The model is served only by its provider's Responses API (catalog `mode: responses`):
   * OpenAI-family adapters call `/responses` instead of chat completions; others ignore it.
   */
  responsesApi?: boolean;
  /** Where upstream calls add the time from sending the request to the response's headers. */
  timing?: UpstreamTiming;
}

/** Public protocols an adapter may speak natively, so a client's body can be forwarded as-is. */
export type NativeProtocol = "openai-chat" | "openai-responses" | "anthropic-messages" | "gemini";

export interface ProviderAdapter {
  readonly type: ProviderType;
  /**
   * Forwards a client body in the client's own protocol, unchanged but for what the upstream needs
   * (the model id); resolves with the 2xx response. Returns null when this adapter (or this
   * deployment's model) does not speak that protocol, and the call goes through the canonical form.
   */
  passthrough?(
    protocol: NativeProtocol,
    body: Record<string, unknown>,
    deployment: Deployment,
    ctx: CallContext,
    stream: boolean,
  ): Promise<Response> | null;
  chat(req: CanonicalRequest, deployment: Deployment, ctx: CallContext): Promise<CanonicalResponse>;
  /**
   * Starts a streamed call. Resolves once the upstream has accepted it (2xx and headers read), so the
   * router can still retry or fall back; the events follow from the returned iterable.
   */
  chatStream(req: CanonicalRequest, deployment: Deployment, ctx: CallContext): Promise<AsyncIterable<StreamEvent>>;
}
