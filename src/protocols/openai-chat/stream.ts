/** Canonical stream events -> chat-completion chunks as SSE frames, ending with `data: [DONE]`. */
import type { GatewayError } from "../../http/errors";
import { sseFrame } from "../../http/sse";
import type { StreamEvent, Usage } from "../canonical";
import { chatCompletionId } from "./encode";
import { type ChatCompletionChunk, finishToOpenAI, usageToOpenAI } from "./wire";

const DONE = new TextEncoder().encode("data: [DONE]\n\n");

export class ChatStreamEncoder {
  private id = "chatcmpl-gateway";
  private model = "";
  private created = Math.floor(Date.now() / 1000);
  private usage: Usage | undefined;
  private readonly opened = new Set<number>();

  /** `includeUsage`: the client asked for the final usage chunk (stream_options.include_usage). */
  constructor(private readonly includeUsage: boolean) {}

  encode(ev: StreamEvent): Uint8Array[] {
    switch (ev.type) {
      case "start":
        this.id = chatCompletionId(ev.id);
        this.model = ev.model;
        this.created = ev.created;
        return [this.open(0)];
      case "text_delta":
        return this.delta(ev.choice, { content: ev.text });
      case "thinking_delta":
        return ev.text ? this.delta(ev.choice, { reasoning_content: ev.text }) : [];
      case "tool_call_start":
        return this.delta(ev.choice, {
          tool_calls: [{ index: ev.index, id: ev.id, type: "function", function: { name: ev.name, arguments: "" } }],
        });
      case "tool_call_delta":
        return this.delta(ev.choice, { tool_calls: [{ index: ev.index, function: { arguments: ev.arguments } }] });
      case "finish":
        return [
          ...this.ensureOpen(ev.choice),
          this.chunk([{ index: ev.choice, delta: {}, finish_reason: finishToOpenAI(ev.reason) }]),
        ];
      case "usage":
        this.usage = ev.usage;
        return [];
      default: {
        const unreachable: never = ev;
        return unreachable;
      }
    }
  }

  /** The closing frames: the usage chunk when asked for, then `[DONE]`. */
  end(): Uint8Array[] {
    const out: Uint8Array[] = [];
    if (this.includeUsage && this.usage) {
      out.push(this.frame({ ...this.base(), choices: [], usage: usageToOpenAI(this.usage) }));
    }
    out.push(DONE);
    return out;
  }

  /** A failure after the stream started: OpenAI's `data: {"error": ...}` frame. */
  error(e: GatewayError): Uint8Array[] {
    return [sseFrame(JSON.stringify({ error: { message: e.message, type: e.type, param: e.param, code: e.code } }))];
  }

  private base() {
    return { id: this.id, object: "chat.completion.chunk" as const, created: this.created, model: this.model };
  }

  private frame(chunk: ChatCompletionChunk): Uint8Array {
    return sseFrame(JSON.stringify(chunk));
  }

  private chunk(choices: ChatCompletionChunk["choices"]): Uint8Array {
    const c: ChatCompletionChunk = { ...this.base(), choices };
    if (this.includeUsage) c.usage = null;
    return this.frame(c);
  }

  private open(choice: number): Uint8Array {
    this.opened.add(choice);
    return this.chunk([{ index: choice, delta: { role: "assistant", content: "" }, finish_reason: null }]);
  }

  private ensureOpen(choice: number): Uint8Array[] {
    return this.opened.has(choice) ? [] : [this.open(choice)];
  }

  private delta(choice: number, delta: ChatCompletionChunk["choices"][number]["delta"]): Uint8Array[] {
    return [...this.ensureOpen(choice), this.chunk([{ index: choice, delta, finish_reason: null }])];
  }
}
