/** Canonical response -> generateContent response (PROTOCOLS.md 4.3, 5.5, 5.6). */
import { type AssistantPart, type CanonicalResponse, type Choice, parseArguments } from "../canonical";
import {
  finishToGemini,
  type GeminiCandidate,
  type GeminiPart,
  type GenerateContentResponse,
  usageToGemini,
} from "./wire";

export interface GeminiEncodeOptions {
  /** The client asked for the model's thoughts (`thinkingConfig.includeThoughts`). */
  includeThoughts: boolean;
}

/** One canonical part as Gemini parts: arguments become an object, thoughts are marked. */
export function partToGemini(p: AssistantPart, opts: GeminiEncodeOptions): GeminiPart | undefined {
  switch (p.type) {
    case "text":
      return p.text === "" ? undefined : { text: p.text };
    case "thinking":
      return opts.includeThoughts && p.text !== "" ? { text: p.text, thought: true } : undefined;
    case "tool_call":
      return { functionCall: { id: p.id, name: p.name, args: parseArguments(p.arguments) } };
    default: {
      const unreachable: never = p;
      return unreachable;
    }
  }
}

export function candidateOf(c: Choice, opts: GeminiEncodeOptions): GeminiCandidate {
  const parts: GeminiPart[] = [];
  for (const p of c.content) {
    const g = partToGemini(p, opts);
    if (g) parts.push(g);
  }
  // A refusal is what the model said: a client reading the text should see it.
  if (c.refusal && !parts.some((p) => p.text !== undefined && !p.thought)) parts.push({ text: c.refusal });
  return {
    content: { role: "model", parts },
    finishReason: finishToGemini(c.finishReason),
    ...(c.refusal ? { finishMessage: c.refusal } : {}),
    index: c.index,
  };
}

export function encodeGenerateContent(res: CanonicalResponse, opts: GeminiEncodeOptions): GenerateContentResponse {
  return {
    candidates: res.choices.map((c) => candidateOf(c, opts)),
    usageMetadata: usageToGemini(res.usage),
    modelVersion: res.model,
    responseId: res.id,
  };
}
