/**
 * Google's generateContent as a pipeline protocol: POST /v1beta/models/{model}:generateContent and
 * :streamGenerateContent (and the same under /v1). The model and whether to stream come from the
 * URL, so the protocol's input is the URL's model and method plus the validated body. Gemini-type
 * upstreams and Gemini models on Vertex receive the body unchanged.
 */
import { errorBody } from "../../http/error-render";
import { GatewayError } from "../../http/errors";
import { readSse, sseFrame } from "../../http/sse";
import { validator } from "../../http/validate";
import { fetchFailure, UpstreamError } from "../../providers/errors";
import { toClientError } from "../../routing/router";
import type { Protocol, StreamTracker } from "../protocol";
import { checkGenerateContent, decodeGenerateContent } from "./decode";
import { encodeGenerateContent } from "./encode";
import { type GenerateContentRequestBody, GenerateContentRequestSchema } from "./schema";
import { GeminiStreamEncoder } from "./stream";
import { type GenerateContentResponse, usageFromGemini } from "./wire";

export interface GenerateContentInput {
  /** The catalog name from the URL (`openai/gpt-4o-mini`). */
  model: string;
  /** :streamGenerateContent rather than :generateContent. */
  stream: boolean;
  request: GenerateContentRequestBody;
}

const validateBody = validator(GenerateContentRequestSchema);

/** Validates a generateContent body (schema, then what the gateway can translate); throws a 400. */
export function parseGenerateContent(model: string, stream: boolean, body: unknown): GenerateContentInput {
  const request = validateBody(body);
  checkGenerateContent(request);
  return { model, stream, request };
}

const includeThoughts = (i: GenerateContentInput) =>
  i.request.generationConfig?.thinkingConfig?.includeThoughts === true;

function failure(e: unknown, provider: string, signal: AbortSignal): GatewayError {
  if (e instanceof GatewayError) return e;
  return toClientError(e instanceof UpstreamError ? e : fetchFailure(e, provider, signal, "body"));
}

/**
 * A Gemini upstream's frames go to the client unchanged. Usage comes from usageMetadata (each frame
 * carries the totals so far: the last wins, final with the finish reason); text and calls are
 * recorded for an estimate should the stream be cut first. An error frame from the upstream is
 * passed on and ends the stream.
 */
async function* forwardFrames(
  upstream: ReadableStream<Uint8Array>,
  _input: GenerateContentInput,
  t: StreamTracker,
  provider: string,
  signal: AbortSignal,
): AsyncGenerator<Uint8Array> {
  try {
    for await (const ev of readSse(upstream)) {
      if (ev.data.trim() === "") continue;
      let chunk: GenerateContentResponse & { error?: { code?: unknown; message?: unknown } };
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        throw new UpstreamError("protocol", `${provider} sent a malformed stream frame`, { status: 502 });
      }
      if (!chunk || typeof chunk !== "object") {
        throw new UpstreamError("protocol", `${provider} sent a stream frame that is not an object`, { status: 502 });
      }
      if (chunk.error && typeof chunk.error === "object") {
        const code = chunk.error.code;
        const status = typeof code === "number" && code >= 400 && code <= 599 ? code : 502;
        const message = typeof chunk.error.message === "string" ? chunk.error.message : "upstream stream failed";
        t.failed = new GatewayError(status, `${provider} failed: ${message}`, { code: "upstream_error" });
        yield sseFrame(ev.data);
        return;
      }
      // Every frame carries the totals so far; they are final once the answer has a finish reason.
      if (chunk.usageMetadata) {
        const u = usageFromGemini(chunk.usageMetadata);
        if (chunk.candidates?.some((c) => c.finishReason)) t.usage = u;
        else t.partialUsage = u;
      }
      for (const c of chunk.candidates ?? []) {
        for (const p of c.content?.parts ?? []) {
          if (typeof p.text === "string" && p.text !== "") t.token(p.text);
          else if (p.functionCall) t.token(`${p.functionCall.name}${JSON.stringify(p.functionCall.args ?? {})}`);
        }
      }
      yield sseFrame(ev.data);
    }
  } catch (e) {
    const err = failure(e, provider, signal);
    t.failed = err;
    if (!signal.aborted) yield sseFrame(JSON.stringify(errorBody(err, "google")));
  }
}

export const geminiGenerateContent: Protocol<GenerateContentInput> = {
  name: "gemini",
  modes: ["chat", "responses"],
  model: (i) => i.model,
  stream: (i) => i.stream,
  toCanonical: (i) => decodeGenerateContent(i.request, i.model, i.stream),
  encode: (res, i) => encodeGenerateContent(res, { includeThoughts: includeThoughts(i) }),
  encoder: (i, ctx) => new GeminiStreamEncoder({ includeThoughts: includeThoughts(i) }, ctx.model),
  native: {
    body: (i) => i.request,
    usage: (json) => usageFromGemini((json as GenerateContentResponse | null)?.usageMetadata),
    frames: forwardFrames,
  },
};
