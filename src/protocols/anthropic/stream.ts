/**
 * Canonical stream events -> Anthropic Messages SSE (PROTOCOLS.md 3.4, 5.10): `message_start`, then
 * per content block `content_block_start` / `content_block_delta`... / `content_block_stop` (one
 * block open at a time), then `message_delta` (stop reason and final usage) and `message_stop`.
 * Every frame carries its `event:` name.
 */
import type { GatewayError } from "../../http/errors";
import { sseFrame } from "../../http/sse";
import { emptyUsage, type FinishReason, type StreamEvent, type Usage } from "../canonical";
import type { StreamEncoder } from "../protocol";
import { messageId } from "./encode";
import {
  type AnthropicDeltaUsage,
  type AnthropicStreamEvent,
  anthropicErrorType,
  stopReasonToAnthropic,
  usageToAnthropic,
} from "./wire";

type OpenBlock =
  | { index: number; kind: "text" }
  | { index: number; kind: "thinking"; sealed: boolean }
  | { index: number; kind: "tool" };

/** One Anthropic SSE frame; the event name is the data's `type`. */
export function eventFrame(ev: AnthropicStreamEvent): Uint8Array {
  return sseFrame(JSON.stringify(ev), ev.type);
}

/** A failure in Anthropic's stream shape: `event: error` with the error envelope. */
export function errorFrame(e: GatewayError): Uint8Array {
  return eventFrame({ type: "error", error: { type: anthropicErrorType(e.status), message: e.message } });
}

const sameInput = (a: Usage, b: Usage) =>
  a.inputTokens === b.inputTokens &&
  a.cacheReadTokens === b.cacheReadTokens &&
  a.cacheWriteTokens === b.cacheWriteTokens;

export class MessagesStreamEncoder implements StreamEncoder {
  private id: string;
  private model: string;
  private started = false;
  /** The usage `message_start` reported (when the upstream gave it before any content). */
  private startUsage: Usage | undefined;
  private usage: Usage | undefined;
  private nextIndex = 0;
  private open: OpenBlock | undefined;
  /** Canonical tool-call index -> content-block index. */
  private readonly tools = new Map<number, number>();
  private stop: { reason: FinishReason; sequence: string | null } | undefined;

  /** `fallbackId` and `model` name the message when the upstream stream does not (no `start`). */
  constructor(fallbackId: string, model: string) {
    this.id = messageId(fallbackId);
    this.model = model;
  }

  encode(ev: StreamEvent): Uint8Array[] {
    if (ev.type === "start") {
      // Held back until the next event, so usage reported up front goes into message_start.
      if (!this.started) {
        this.id = messageId(ev.id);
        this.model = ev.model;
      }
      return [];
    }
    if (ev.type === "usage") {
      this.usage = ev.usage;
      if (this.started) return [];
      this.startUsage = ev.usage;
      return this.ensureStarted();
    }
    // One choice per message in this protocol.
    if (ev.choice !== 0) return [];
    const out = this.ensureStarted();
    switch (ev.type) {
      case "text_delta":
        if (ev.text === "") return out;
        if (this.open?.kind !== "text") {
          out.push(...this.close());
          out.push(this.openBlock({ kind: "text" }, { type: "text", text: "" }));
        }
        out.push(this.delta({ type: "text_delta", text: ev.text }));
        return out;
      case "thinking_delta": {
        if (ev.text === "" && !ev.signature) return out;
        if (this.open?.kind !== "thinking" || this.open.sealed) {
          out.push(...this.close());
          out.push(
            this.openBlock({ kind: "thinking", sealed: false }, { type: "thinking", thinking: "", signature: "" }),
          );
        }
        if (ev.text) out.push(this.delta({ type: "thinking_delta", thinking: ev.text }));
        if (ev.signature) {
          out.push(this.delta({ type: "signature_delta", signature: ev.signature }));
          // A signature ends its thinking block; more thinking opens another.
          if (this.open?.kind === "thinking") this.open.sealed = true;
        }
        return out;
      }
      case "tool_call_start": {
        out.push(...this.close());
        out.push(this.openBlock({ kind: "tool" }, { type: "tool_use", id: ev.id, name: ev.name, input: {} }));
        this.tools.set(ev.index, this.nextIndex - 1);
        return out;
      }
      case "tool_call_delta": {
        const index = this.tools.get(ev.index);
        if (index === undefined || ev.arguments === "") return out;
        out.push(
          eventFrame({
            type: "content_block_delta",
            index,
            delta: { type: "input_json_delta", partial_json: ev.arguments },
          }),
        );
        return out;
      }
      case "finish":
        this.stop = { reason: ev.reason, sequence: ev.stopSequence ?? null };
        out.push(...this.close());
        return out;
      default: {
        const unreachable: never = ev;
        return unreachable;
      }
    }
  }

  /** message_delta (stop reason, final usage) and message_stop; usage may arrive after the finish. */
  end(): Uint8Array[] {
    const out = [...this.ensureStarted(), ...this.close()];
    const reason = stopReasonToAnthropic(this.stop?.reason ?? "end_turn");
    const usage: AnthropicDeltaUsage = { output_tokens: this.usage?.outputTokens ?? 0 };
    if (this.usage && !(this.startUsage && sameInput(this.startUsage, this.usage))) {
      // Input counts only known at the end (OpenAI and Gemini report usage last).
      const u = usageToAnthropic(this.usage);
      usage.input_tokens = u.input_tokens;
      usage.cache_creation_input_tokens = u.cache_creation_input_tokens ?? 0;
      usage.cache_read_input_tokens = u.cache_read_input_tokens ?? 0;
    }
    out.push(
      eventFrame({
        type: "message_delta",
        delta: {
          stop_reason: reason,
          stop_sequence: reason === "stop_sequence" ? (this.stop?.sequence ?? null) : null,
        },
        usage,
      }),
    );
    out.push(eventFrame({ type: "message_stop" }));
    return out;
  }

  error(e: GatewayError): Uint8Array[] {
    return [errorFrame(e)];
  }

  private ensureStarted(): Uint8Array[] {
    if (this.started) return [];
    this.started = true;
    return [
      eventFrame({
        type: "message_start",
        message: {
          id: this.id,
          type: "message",
          role: "assistant",
          model: this.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: usageToAnthropic(this.startUsage ?? emptyUsage()),
        },
      }),
    ];
  }

  private openBlock(
    block: OpenBlock extends infer B ? (B extends { index: number } ? Omit<B, "index"> : never) : never,
    skeleton: Extract<AnthropicStreamEvent, { type: "content_block_start" }>["content_block"],
  ): Uint8Array {
    const index = this.nextIndex++;
    this.open = { ...block, index } as OpenBlock;
    return eventFrame({ type: "content_block_start", index, content_block: skeleton });
  }

  private delta(delta: Extract<AnthropicStreamEvent, { type: "content_block_delta" }>["delta"]): Uint8Array {
    return eventFrame({ type: "content_block_delta", index: this.open?.index ?? 0, delta });
  }

  private close(): Uint8Array[] {
    if (!this.open) return [];
    const index = this.open.index;
    this.open = undefined;
    return [eventFrame({ type: "content_block_stop", index })];
  }
}
