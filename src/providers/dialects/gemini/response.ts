/** Gemini generateContent response -> canonical response (PROTOCOLS.md 4.3 and 5). */
import type { AssistantPart, CanonicalResponse, Choice } from "../../../protocols/canonical";
import {
  finishFromGemini,
  type GeminiPart,
  type GenerateContentResponse,
  type GoogleErrorBody,
  usageFromGemini,
} from "../../../protocols/gemini/wire";
import { UpstreamError, upstreamHttpError } from "../../errors";

/** An id for a function call Gemini did not name (older models send none). */
export const mintCallId = (): string => `call_${crypto.randomUUID()}`;

/** RFC 3339 `createTime` (Vertex) as Unix seconds, else now. */
export function createdOf(body: { createTime?: string }): number {
  const t = body.createTime ? Date.parse(body.createTime) : Number.NaN;
  return Math.floor((Number.isNaN(t) ? Date.now() : t) / 1000);
}

/** The error inside a 200 body or stream frame, as an UpstreamError with Google's code as status. */
export function embeddedError(body: unknown, provider: string): UpstreamError | undefined {
  const err = (body as Partial<GoogleErrorBody> | undefined)?.error;
  if (!err || typeof err !== "object") return undefined;
  const status = typeof err.code === "number" && err.code >= 400 && err.code <= 599 ? err.code : 502;
  return new UpstreamError("http", `${provider} failed: ${err.message ?? "unknown error"}`, {
    status,
    ...(typeof err.status === "string" ? { upstreamType: err.status } : {}),
  });
}

/** Text, thoughts and function calls of one candidate; other part kinds have no canonical form. */
export function partsToCanonical(parts: readonly GeminiPart[]): AssistantPart[] {
  const out: AssistantPart[] = [];
  for (const p of parts) {
    if (p.functionCall) {
      out.push({
        type: "tool_call",
        id: p.functionCall.id || mintCallId(),
        name: p.functionCall.name,
        arguments: JSON.stringify(p.functionCall.args ?? {}),
      });
    } else if (typeof p.text === "string") {
      const last = out.at(-1);
      if (p.thought) {
        if (last?.type === "thinking" && !last.signature) last.text += p.text;
        else
          out.push({
            type: "thinking",
            text: p.text,
            ...(p.thoughtSignature ? { signature: p.thoughtSignature } : {}),
          });
      } else if (p.text !== "") {
        if (last?.type === "text") last.text += p.text;
        else out.push({ type: "text", text: p.text });
      }
    }
  }
  return out;
}

export function fromGeminiResponse(body: GenerateContentResponse, provider: string, model: string): CanonicalResponse {
  if (!body || typeof body !== "object") {
    throw new UpstreamError("protocol", `${provider} returned a response that is not an object`, { status: 502 });
  }
  const failed = embeddedError(body, provider);
  if (failed) throw failed;
  const candidates = Array.isArray(body.candidates) ? body.candidates : [];
  let choices: Choice[];
  if (candidates.length === 0) {
    const blocked = body.promptFeedback?.blockReason;
    if (!blocked) {
      throw new UpstreamError("protocol", `${provider} returned a response without candidates`, { status: 502 });
    }
    // A blocked prompt: no candidates, only the reason.
    choices = [
      {
        index: 0,
        content: [],
        finishReason: "content_filter",
        refusal: body.promptFeedback?.blockReasonMessage ?? `The prompt was blocked (${blocked})`,
      },
    ];
  } else {
    choices = candidates.map((c, i) => {
      const content = partsToCanonical(c.content?.parts ?? []);
      const hasCall = content.some((p) => p.type === "tool_call");
      return { index: c.index ?? i, content, finishReason: finishFromGemini(c.finishReason, hasCall) };
    });
    choices.sort((a, b) => a.index - b.index);
  }
  return {
    id: body.responseId || crypto.randomUUID(),
    model: body.modelVersion || model,
    created: createdOf(body),
    choices,
    usage: usageFromGemini(body.usageMetadata),
  };
}

/**
 * A non-2xx answer as an UpstreamError. Google reports a bad API key as 400 INVALID_ARGUMENT with
 * reason API_KEY_INVALID: that is the gateway's credential failing, not the caller's request, so
 * it is raised as a 401 (the router answers 502 and tries another deployment).
 */
export async function geminiHttpError(
  res: Response,
  provider: string,
  secrets: (string | undefined)[],
): Promise<UpstreamError> {
  const text = await res.text().catch(() => "");
  let status = res.status;
  if (status === 400 && text.includes("API_KEY_INVALID")) {
    try {
      const details = (JSON.parse(text) as Partial<GoogleErrorBody>).error?.details ?? [];
      if (details.some((d) => d.reason === "API_KEY_INVALID")) status = 401;
    } catch {
      // Not Google's error JSON: keep the status.
    }
  }
  return upstreamHttpError(new Response(text, { status, headers: res.headers }), provider, secrets);
}

/** Shared by every adapter; re-exported here for the Gemini-dialect adapters. */
export { readUpstreamJson } from "../../errors";
