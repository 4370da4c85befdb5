/**
 * Canonical stream events -> streamGenerateContent frames (PROTOCOLS.md 4.4, 5.10). Every frame is
 * a whole GenerateContentResponse holding only the new parts; a function call goes out whole, once
 * its arguments are complete; the last frame carries every choice's finishReason and the usage.
 * There is no `[DONE]`: the stream just ends. A failure is one `{"error": ...}` frame.
 */
import { errorBody } from "../../http/error-render";
import type { GatewayError } from "../../http/errors";
import { sseFrame } from "../../http/sse";
import { parseArguments, type StreamEvent, type Usage } from "../canonical";
import type { StreamEncoder } from "../protocol";
import type { GeminiEncodeOptions } from "./encode";
import {
  finishToGemini,
  type GeminiCandidate,
  type GeminiFinishReason,
  type GeminiPart,
  type GenerateContentResponse,
  usageToGemini,
} from "./wire";

interface PendingCall {
  id: string;
  name: string;
  arguments: string;
}

interface ChoiceState {
  /** Calls whose arguments are still arriving, by tool index. */
  calls: Map<number, PendingCall>;
  /** Parts held for the last frame (calls completed by the finish). */
  last: GeminiPart[];
  finish?: GeminiFinishReason;
}

export class GeminiStreamEncoder implements StreamEncoder {
  private id = "";
  private model: string;
  private usage: Usage | undefined;
  private readonly choices = new Map<number, ChoiceState>();

  /** `model`: reported until the upstream names its own (the start event). */
  constructor(
    private readonly opts: GeminiEncodeOptions,
    model: string,
  ) {
    this.model = model;
  }

  encode(ev: StreamEvent): Uint8Array[] {
    switch (ev.type) {
      case "start":
        this.id = ev.id;
        this.model = ev.model || this.model;
        return [];
      case "text_delta":
        return ev.text === "" ? [] : this.emit(ev.choice, [{ text: ev.text }]);
      case "thinking_delta":
        return this.opts.includeThoughts && ev.text !== ""
          ? this.emit(ev.choice, [{ text: ev.text, thought: true }])
          : [];
      case "tool_call_start": {
        // The previous call of this choice is complete once the next one starts.
        const s = this.state(ev.choice);
        const done = this.takeCalls(s);
        s.calls.set(ev.index, { id: ev.id, name: ev.name, arguments: "" });
        return done.length ? [this.frame([{ content: { role: "model", parts: done }, index: ev.choice }])] : [];
      }
      case "tool_call_delta": {
        const call = this.state(ev.choice).calls.get(ev.index);
        if (call) call.arguments += ev.arguments;
        return [];
      }
      case "finish": {
        const s = this.state(ev.choice);
        s.last.push(...this.takeCalls(s));
        s.finish = finishToGemini(ev.reason);
        return [];
      }
      case "usage":
        this.usage = ev.usage;
        return [];
      default: {
        const unreachable: never = ev;
        return unreachable;
      }
    }
  }

  /** The last frame: each choice's held parts and finishReason, and the final usage. */
  end(): Uint8Array[] {
    if (this.choices.size === 0) this.state(0);
    const candidates: GeminiCandidate[] = [...this.choices.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, s]) => {
        const parts = [...s.last, ...this.takeCalls(s)];
        s.last = [];
        // An empty text part, as Gemini sends, so `candidates[0].content.parts[0]` always exists.
        return {
          content: { role: "model", parts: parts.length ? parts : [{ text: "" }] },
          finishReason: s.finish ?? "STOP",
          index,
        };
      });
    return [this.frame(candidates, true)];
  }

  /** A failure after the stream started: Google's error envelope as one frame. */
  error(e: GatewayError): Uint8Array[] {
    return [sseFrame(JSON.stringify(errorBody(e, "google")))];
  }

  private state(choice: number): ChoiceState {
    let s = this.choices.get(choice);
    if (!s) {
      s = { calls: new Map(), last: [] };
      this.choices.set(choice, s);
    }
    return s;
  }

  /** The choice's pending calls, in index order, as functionCall parts (and forgets them). */
  private takeCalls(s: ChoiceState): GeminiPart[] {
    const out: GeminiPart[] = [];
    for (const [, c] of [...s.calls.entries()].sort(([a], [b]) => a - b)) {
      out.push({ functionCall: { id: c.id, name: c.name, args: parseArguments(c.arguments) } });
    }
    s.calls.clear();
    return out;
  }

  /** New parts of one choice, after any call of that choice they complete. */
  private emit(choice: number, parts: GeminiPart[]): Uint8Array[] {
    const done = this.takeCalls(this.state(choice));
    return [this.frame([{ content: { role: "model", parts: [...done, ...parts] }, index: choice }])];
  }

  private frame(candidates: GeminiCandidate[], last = false): Uint8Array {
    const body: GenerateContentResponse = { candidates };
    if (last && this.usage) body.usageMetadata = usageToGemini(this.usage);
    body.modelVersion = this.model;
    if (this.id) body.responseId = this.id;
    return sseFrame(JSON.stringify(body));
  }
}

const enc = new TextEncoder();

/**
 * streamGenerateContent without `alt=sse`: Google answers one JSON array written element by
 * element (`[{...}\n,\r\n{...}\n]`). This turns the gateway's SSE body into that: each `data:`
 * frame is an element, keep-alive comments become whitespace (valid anywhere between elements).
 */
export function sseToJsonArray(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const decoder = new TextDecoder();
  let buffer = "";
  let elements = 0;
  const blocks = (flush: boolean): string[] => {
    const out: string[] = [];
    for (;;) {
      const m = /\r?\n\r?\n/.exec(buffer);
      if (!m) break;
      out.push(buffer.slice(0, m.index));
      buffer = buffer.slice(m.index + m[0].length);
    }
    if (flush && buffer.trim() !== "") {
      out.push(buffer);
      buffer = "";
    }
    return out;
  };
  const render = (block: string): string => {
    const data = block
      .split(/\r?\n/)
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, ""));
    if (data.length === 0) return "\n";
    return `${elements++ === 0 ? "[" : "\n,\r\n"}${data.join("\n")}`;
  };
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        buffer += decoder.decode(chunk, { stream: true });
        const text = blocks(false).map(render).join("");
        if (text) controller.enqueue(enc.encode(text));
      },
      flush(controller) {
        buffer += decoder.decode();
        const text = blocks(true).map(render).join("");
        controller.enqueue(enc.encode(`${text}${elements === 0 ? "[]" : "\n]"}`));
      },
    }),
  );
}
