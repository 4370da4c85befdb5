/** Anthropic Messages mock responses, built from the recorded-shape fixtures. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { streamResponse } from "./upstream";

const FIXTURES = join(import.meta.dir, "../../src/providers/anthropic/fixtures");

export const anthropicFixture = (name: string): string => readFileSync(join(FIXTURES, name), "utf8");

const RESPONSE_HEADERS = {
  "content-type": "application/json",
  "request-id": "req_011CUupstream0001",
  "anthropic-organization-id": "00000000-0000-0000-0000-000000000000",
};

export const anthropicJson = (name: string, status = 200) =>
  new Response(anthropicFixture(name), { status, headers: RESPONSE_HEADERS });

/** The fixture's SSE frames (split on blank lines), one write each, with an optional pause between them. */
export const anthropicSseFrames = (name: string): string[] =>
  anthropicFixture(name)
    .split("\n\n")
    .filter((f) => f.trim() !== "")
    .map((f) => `${f}\n\n`);

export const anthropicStream = (name: string, delayMs = 0) =>
  streamResponse(anthropicSseFrames(name), {
    delayMs,
    headers: { "request-id": "req_011CUupstream0002", "cache-control": "no-cache" },
  });

/** Anthropic's error envelope with the status its error type goes with. */
export const anthropicError = (status: number, type: string, message: string, headers: Record<string, string> = {}) =>
  Response.json(
    { type: "error", error: { type, message }, request_id: "req_011CUerror00001" },
    { status, headers: { "request-id": "req_011CUerror00001", ...headers } },
  );

export interface MockUsage {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

function usageWire(u: MockUsage) {
  return {
    input_tokens: u.input,
    cache_creation_input_tokens: u.cacheWrite ?? 0,
    cache_read_input_tokens: u.cacheRead ?? 0,
    cache_creation: { ephemeral_5m_input_tokens: u.cacheWrite ?? 0, ephemeral_1h_input_tokens: 0 },
    output_tokens: u.output,
    service_tier: "standard",
  };
}

/** A message with given text and usage (for cost arithmetic in tests). */
export function anthropicMessage(
  text: string,
  usage: MockUsage,
  opts: { model?: string; stopReason?: string; stopSequence?: string | null } = {},
) {
  return Response.json(
    {
      id: `msg_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`,
      type: "message",
      role: "assistant",
      model: opts.model ?? "claude-sonnet-4-5-20250929",
      content: [{ type: "text", text }],
      stop_reason: opts.stopReason ?? "end_turn",
      stop_sequence: opts.stopSequence ?? null,
      usage: usageWire(usage),
    },
    { headers: RESPONSE_HEADERS },
  );
}

/**
 * A streamed message of text deltas with given usage: input counts in message_start, output at the
 * end. `thinking` deltas, when given, come first in a thinking block.
 */
export function anthropicTextStream(deltas: string[], usage: MockUsage, delayMs = 0, thinking: string[] = []) {
  const text = thinking.length ? 1 : 0;
  const id = `msg_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`;
  const ev = (type: string, data: Record<string, unknown>) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  return streamResponse(
    [
      ev("message_start", {
        message: {
          id,
          type: "message",
          role: "assistant",
          model: "claude-sonnet-4-5-20250929",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { ...usageWire(usage), output_tokens: 1 },
        },
      }),
      ...(thinking.length
        ? [
            ev("content_block_start", { index: 0, content_block: { type: "thinking", thinking: "" } }),
            ...thinking.map((t) =>
              ev("content_block_delta", { index: 0, delta: { type: "thinking_delta", thinking: t } }),
            ),
            ev("content_block_delta", { index: 0, delta: { type: "signature_delta", signature: "EqQBCgIYAhIM" } }),
            ev("content_block_stop", { index: 0 }),
          ]
        : []),
      ev("content_block_start", { index: text, content_block: { type: "text", text: "" } }),
      ev("ping", {}),
      ...deltas.map((t) => ev("content_block_delta", { index: text, delta: { type: "text_delta", text: t } })),
      ev("content_block_stop", { index: text }),
      ev("message_delta", {
        delta: { stop_reason: "end_turn", stop_sequence: null },
        usage: { output_tokens: usage.output },
      }),
      ev("message_stop", {}),
    ],
    { delayMs },
  );
}
