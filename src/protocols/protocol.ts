/**
 * What a public inference protocol gives the pipeline: how to read its requests, turn them into the
 * canonical form, and write canonical answers and streams back in its own wire format. A protocol
 * that an upstream also speaks natively can forward the client's body as-is (see `native`).
 */
import type { Principal } from "../auth/authenticator";
import type { ServedModel } from "../catalog/catalog";
import type { ModelMode } from "../catalog/model";
import type { GatewayError } from "../http/errors";
import type { NativeProtocol } from "../providers/types";
import type { CanonicalRequest, CanonicalResponse, StreamEvent, Usage } from "./canonical";

export interface ProtocolContext {
  requestId: string;
  principal: Principal;
  /** The public model name that is serving the request (a fallback's when one is used). */
  model: string;
}

/** Writes canonical stream events as the protocol's SSE frames. */
export interface StreamEncoder {
  encode(ev: StreamEvent): Uint8Array[];
  /** Closing frames after the last event (usage chunk, `[DONE]`, `message_stop`, ...). */
  end(): Uint8Array[];
  /** Frames for a failure after the stream started, in the protocol's own error shape. */
  error(e: GatewayError): Uint8Array[];
}

/** Follows a stream for billing: usage when the upstream reports it, else the text for an estimate. */
export interface StreamTracker {
  /** The upstream's final count for the whole answer. */
  usage: Usage | undefined;
  /**
   * Counts reported before the end (input at the start, running totals): kept for a stream cut off
   * before its final count, whose output is then billed by estimate (at least this output count).
   */
  partialUsage?: Usage | undefined;
  failed: GatewayError | undefined;
  /** Records produced text (and the time of the first token). */
  token(text: string): void;
}

/** Forwarding a client's body to an upstream that speaks the same protocol. */
export interface NativeForwarding<B> {
  /** Whether forwarding is wanted for this model at all (default: always, when the adapter can). */
  applies?(model: ServedModel): boolean;
  /** The body to send: the client's, with what the gateway needs (e.g. streamed usage forced on). */
  body(input: B, stream: boolean): Record<string, unknown>;
  /** Usage from a non-streamed upstream answer (already parsed JSON). */
  usage(json: unknown): Usage;
  /**
   * The client's answer from the upstream's (parsed) one, when the gateway must adjust it (e.g. give
   * it the gateway's id and store it); without it the upstream's bytes go out unchanged.
   */
  answer?(json: unknown, input: B, ctx: ProtocolContext): unknown;
  /**
   * The client's frames from the upstream's stream, unchanged except where the gateway must adjust
   * them; records usage, produced text and failures on the tracker. Ends the stream as the
   * protocol does (and writes an error frame in its shape on failure).
   */
  frames(
    upstream: ReadableStream<Uint8Array>,
    input: B,
    t: StreamTracker,
    provider: string,
    signal: AbortSignal,
    ctx: ProtocolContext,
  ): AsyncGenerator<Uint8Array>;
}

export interface Protocol<B> {
  readonly name: NativeProtocol;
  /** Model modes this endpoint serves; other modes are a 400. */
  readonly modes: readonly ModelMode[];
  model(input: B): string;
  stream(input: B): boolean;
  /** Async preparation after authentication (e.g. expanding stored conversation state). */
  prepare?(input: B, ctx: ProtocolContext): Promise<B>;
  /**
   * The model as this (prepared) request may be routed, when only some of its deployments and
   * fallbacks can serve it (e.g. only those that forward the body natively). Default: all of them.
   */
  route?(input: B, model: ServedModel): ServedModel;
  toCanonical(input: B): CanonicalRequest;
  encode(res: CanonicalResponse, input: B, ctx: ProtocolContext): unknown;
  encoder(input: B, ctx: ProtocolContext): StreamEncoder;
  native?: NativeForwarding<B>;
}
