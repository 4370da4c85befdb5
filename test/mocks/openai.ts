/** OpenAI chat-completions mock responses, built from the recorded-shape fixtures. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { streamResponse } from "./upstream";

const FIXTURES = join(import.meta.dir, "../../src/providers/openai/fixtures");

export const openaiFixture = (name: string): string => readFileSync(join(FIXTURES, name), "utf8");

export const openaiJson = (name: string, status = 200) =>
  new Response(openaiFixture(name), {
    status,
    headers: { "content-type": "application/json", "x-request-id": "req_upstream_1" },
  });

/** The fixture's SSE frames, one write each, with an optional pause between them. */
export const openaiStream = (name: string, delayMs = 0) =>
  streamResponse(
    openaiFixture(name)
      .split("\n\n")
      .filter((f) => f.trim() !== "")
      .map((f) => `${f}\n\n`),
    { delayMs },
  );

export const openaiError = (status: number, message: string, type: string, headers: Record<string, string> = {}) =>
  Response.json({ error: { message, type, param: null, code: null } }, { status, headers });

/** A completion with given text and usage (for cost arithmetic in tests). */
export function openaiCompletion(
  text: string,
  usage: { prompt: number; completion: number; cached?: number; cacheWrite?: number; reasoning?: number },
  model = "gpt-4o-mini-2024-07-18",
) {
  return Response.json({
    id: `chatcmpl-${crypto.randomUUID()}`,
    object: "chat.completion",
    created: 1761000000,
    model,
    choices: [
      { index: 0, message: { role: "assistant", content: text, refusal: null }, logprobs: null, finish_reason: "stop" },
    ],
    usage: {
      prompt_tokens: usage.prompt,
      completion_tokens: usage.completion,
      total_tokens: usage.prompt + usage.completion,
      prompt_tokens_details: {
        cached_tokens: usage.cached ?? 0,
        ...(usage.cacheWrite !== undefined ? { cache_write_tokens: usage.cacheWrite } : {}),
      },
      completion_tokens_details: { reasoning_tokens: usage.reasoning ?? 0 },
    },
    system_fingerprint: "fp_test",
  });
}

/**
 * A Responses API answer (responses.json: a reasoning item, then a message) with the message text
 * replaced, for tests that tell turns apart.
 */
export function openaiResponse(text: string, id = `resp_${crypto.randomUUID().replace(/-/g, "")}`) {
  const body = JSON.parse(openaiFixture("responses.json")) as {
    id: string;
    output: { type: string; content?: { text?: string }[] }[];
  };
  body.id = id;
  for (const item of body.output) if (item.type === "message" && item.content?.[0]) item.content[0].text = text;
  return Response.json(body, { headers: { "x-request-id": "req_upstream_responses" } });
}
