/**
 * Canonical stream events -> Responses stream events (PROTOCOLS.md 2.3): `response.created` and
 * `response.in_progress` first; each output item opened (`output_item.added`, and for messages and
 * reasoning `content_part.added`) before its deltas and closed (`.done` events) before the next item
 * starts; a terminal `response.completed` or `response.incomplete` carrying the whole
 * response with usage. Every frame has an `event:` name and a `sequence_number` counting from 0.
 * A failure after the start is `response.failed` (the SDK resolves the stream with that response);
 * before anything was sent, an `error` event (the SDK raises it). There is no `[DONE]`.
 */
import type { GatewayError } from "../../http/errors";
import { sseFrame } from "../../http/sse";
import type { FinishReason, StreamEvent, Usage } from "../canonical";
import type { StreamEncoder } from "../protocol";
import { type ResponseMeta, responseObject } from "./encode";
import type { ResponsesRequest } from "./schema";
import {
  type ItemStatus,
  itemId,
  type OutputFunctionCallItem,
  type OutputItem,
  type OutputMessageItem,
  type OutputReasoningItem,
  outcomeOf,
  type ResponseObject,
  responseErrorOf,
} from "./wire";

interface OpenMessage {
  kind: "message";
  index: number;
  id: string;
  text: string;
}
interface OpenReasoning {
  kind: "reasoning";
  index: number;
  id: string;
  text: string;
  signature?: string;
}
interface OpenCall {
  kind: "call";
  /** The canonical tool-call index. */
  key: number;
  index: number;
  id: string;
  callId: string;
  name: string;
  args: string;
}

export interface ResponsesStreamOptions {
  /** The response id (minted by the store, so it says whether the response will be kept). */
  id: string;
  previousResponseId: string | null;
  /**
   * The final response (completed, incomplete or failed), before its terminal event is written. Not
   * called when the stream failed before anything was sent, or the client went away.
   */
  onFinal?(response: ResponseObject): void;
}

export class ResponsesStreamEncoder implements StreamEncoder {
  private seq = 0;
  private meta: ResponseMeta;
  private started = false;
  /** Items by output index; open ones are filled in when they close. */
  private readonly output: (OutputItem | undefined)[] = [];
  private message: OpenMessage | undefined;
  private reasoning: OpenReasoning | undefined;
  /** Open function calls by the canonical tool-call index. */
  private readonly calls = new Map<number, OpenCall>();
  private finish: FinishReason | undefined;
  private usage: Usage | undefined;

  constructor(
    private readonly body: ResponsesRequest,
    private readonly opts: ResponsesStreamOptions,
  ) {
    this.meta = {
      id: opts.id,
      createdAt: Math.floor(Date.now() / 1000),
      model: body.model,
      previousResponseId: opts.previousResponseId,
    };
  }

  encode(ev: StreamEvent): Uint8Array[] {
    if (ev.type === "start") return this.start(ev.model, ev.created);
    const out = this.started ? [] : this.start(this.meta.model, this.meta.createdAt);
    switch (ev.type) {
      case "text_delta":
        if (ev.choice !== 0 || ev.text === "") break;
        this.closeReasoning(out);
        this.closeCalls(out);
        this.text(ev.text, out);
        break;
      case "thinking_delta":
        if (ev.choice !== 0) break;
        this.closeMessage(out);
        this.closeCalls(out);
        this.thinking(ev.text, ev.signature, out);
        break;
      case "tool_call_start": {
        if (ev.choice !== 0) break;
        // As the API does, one item at a time: the previous call is done when the next starts (every
        // adapter streams calls one after another; a late fragment of a closed call is dropped).
        this.closeMessage(out);
        this.closeReasoning(out);
        this.closeCalls(out);
        const call: OpenCall = {
          kind: "call",
          key: ev.index,
          index: this.output.length,
          id: itemId("fc"),
          callId: ev.id,
          name: ev.name,
          args: "",
        };
        this.output.push(undefined);
        this.calls.set(ev.index, call);
        out.push(
          this.event("response.output_item.added", {
            output_index: call.index,
            item: this.callItem(call, "in_progress"),
          }),
        );
        break;
      }
      case "tool_call_delta": {
        const call = ev.choice === 0 ? this.calls.get(ev.index) : undefined;
        if (!call || ev.arguments === "") break;
        call.args += ev.arguments;
        out.push(
          this.event("response.function_call_arguments.delta", {
            item_id: call.id,
            output_index: call.index,
            delta: ev.arguments,
          }),
        );
        break;
      }
      case "finish":
        if (ev.choice === 0) this.finish = ev.reason;
        break;
      case "usage":
        this.usage = ev.usage;
        break;
      default: {
        const unreachable: never = ev;
        void unreachable;
      }
    }
    return out;
  }

  /** Closes what is open and writes the terminal event with the final response. */
  end(): Uint8Array[] {
    const out = this.started ? [] : this.start(this.meta.model, this.meta.createdAt);
    const outcome = outcomeOf(this.finish);
    const last: ItemStatus = outcome.status === "incomplete" ? "incomplete" : "completed";
    this.closeAll(out, last);
    const response = responseObject(this.body, this.meta, this.items(), outcome, this.usage);
    this.opts.onFinal?.(response);
    const type =
      outcome.status === "completed"
        ? "response.completed"
        : outcome.status === "incomplete"
          ? "response.incomplete"
          : "response.failed";
    out.push(this.event(type, { response }));
    return out;
  }

  error(e: GatewayError): Uint8Array[] {
    if (!this.started) {
      return [this.event("error", { code: e.code, message: e.message, param: e.param })];
    }
    // Items cut off stay in the output as incomplete, with what they had.
    const output = this.items();
    for (const open of [this.message, this.reasoning, ...this.calls.values()]) {
      if (open) output[open.index] = this.itemOf(open, "incomplete");
    }
    const response = responseObject(
      this.body,
      this.meta,
      output.filter((i): i is OutputItem => i !== undefined),
      { status: "failed", incomplete_details: null, error: responseErrorOf(e) },
      this.usage,
    );
    this.opts.onFinal?.(response);
    return [this.event("response.failed", { response })];
  }

  private start(model: string, created: number): Uint8Array[] {
    if (this.started) return [];
    this.started = true;
    this.meta = { ...this.meta, model: model || this.meta.model, createdAt: created || this.meta.createdAt };
    const response = responseObject(
      this.body,
      this.meta,
      [],
      { status: "in_progress", incomplete_details: null, error: null },
      undefined,
    );
    return [this.event("response.created", { response }), this.event("response.in_progress", { response })];
  }

  private text(delta: string, out: Uint8Array[]): void {
    if (!this.message) {
      const m: OpenMessage = { kind: "message", index: this.output.length, id: itemId("msg"), text: "" };
      this.output.push(undefined);
      this.message = m;
      out.push(
        this.event("response.output_item.added", {
          output_index: m.index,
          item: { type: "message", id: m.id, status: "in_progress", role: "assistant", content: [] },
        }),
        this.event("response.content_part.added", {
          item_id: m.id,
          output_index: m.index,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [], logprobs: [] },
        }),
      );
    }
    const m = this.message;
    m.text += delta;
    out.push(
      this.event("response.output_text.delta", {
        item_id: m.id,
        output_index: m.index,
        content_index: 0,
        delta,
        logprobs: [],
      }),
    );
  }

  /** A signature ends a thinking block: thinking text after it is a new reasoning item. */
  private thinking(text: string, signature: string | undefined, out: Uint8Array[]): void {
    if (this.reasoning?.signature !== undefined && text !== "") this.closeReasoning(out);
    if (!this.reasoning) {
      if (text === "" && signature === undefined) return;
      const r: OpenReasoning = { kind: "reasoning", index: this.output.length, id: itemId("rs"), text: "" };
      this.output.push(undefined);
      this.reasoning = r;
      out.push(
        this.event("response.output_item.added", {
          output_index: r.index,
          item: { type: "reasoning", id: r.id, summary: [], content: [] },
        }),
        this.event("response.content_part.added", {
          item_id: r.id,
          output_index: r.index,
          content_index: 0,
          part: { type: "reasoning_text", text: "" },
        }),
      );
    }
    const r = this.reasoning;
    if (text !== "") {
      r.text += text;
      out.push(
        this.event("response.reasoning_text.delta", {
          item_id: r.id,
          output_index: r.index,
          content_index: 0,
          delta: text,
        }),
      );
    }
    if (signature !== undefined) r.signature = (r.signature ?? "") + signature;
  }

  private closeMessage(out: Uint8Array[], status: ItemStatus = "completed"): void {
    const m = this.message;
    if (!m) return;
    this.message = undefined;
    const item = this.itemOf(m, status) as OutputMessageItem;
    this.output[m.index] = item;
    out.push(
      this.event("response.output_text.done", {
        item_id: m.id,
        output_index: m.index,
        content_index: 0,
        text: m.text,
        logprobs: [],
      }),
      this.event("response.content_part.done", {
        item_id: m.id,
        output_index: m.index,
        content_index: 0,
        part: item.content[0],
      }),
      this.event("response.output_item.done", { output_index: m.index, item }),
    );
  }

  private closeReasoning(out: Uint8Array[]): void {
    const r = this.reasoning;
    if (!r) return;
    this.reasoning = undefined;
    const item = this.itemOf(r, "completed") as OutputReasoningItem;
    this.output[r.index] = item;
    out.push(
      this.event("response.reasoning_text.done", {
        item_id: r.id,
        output_index: r.index,
        content_index: 0,
        text: r.text,
      }),
      this.event("response.content_part.done", {
        item_id: r.id,
        output_index: r.index,
        content_index: 0,
        part: { type: "reasoning_text", text: r.text },
      }),
      this.event("response.output_item.done", { output_index: r.index, item }),
    );
  }

  private closeCalls(out: Uint8Array[]): void {
    for (const c of [...this.calls.values()].sort((a, b) => a.index - b.index)) this.closeCall(c, "completed", out);
  }

  private closeCall(c: OpenCall, status: ItemStatus, out: Uint8Array[]): void {
    this.calls.delete(c.key);
    const item = this.callItem(c, status);
    this.output[c.index] = item;
    out.push(
      this.event("response.function_call_arguments.done", {
        item_id: c.id,
        output_index: c.index,
        name: c.name,
        arguments: c.args,
      }),
      this.event("response.output_item.done", { output_index: c.index, item }),
    );
  }

  /** At the end: open items close in output order; the last one takes `last` (incomplete when cut off). */
  private closeAll(out: Uint8Array[], last: ItemStatus): void {
    const open = [this.message, this.reasoning, ...this.calls.values()]
      .filter((o) => o !== undefined)
      .sort((a, b) => a.index - b.index);
    const lastIndex = open.at(-1)?.index;
    for (const o of open) {
      const status = o.index === lastIndex ? last : "completed";
      if (o.kind === "message") this.closeMessage(out, status);
      else if (o.kind === "reasoning") this.closeReasoning(out);
      else this.closeCall(o, status, out);
    }
  }

  private items(): OutputItem[] {
    return this.output.filter((i): i is OutputItem => i !== undefined);
  }

  private itemOf(o: OpenMessage | OpenReasoning | OpenCall, status: ItemStatus): OutputItem {
    switch (o.kind) {
      case "message":
        return {
          type: "message",
          id: o.id,
          status,
          role: "assistant",
          content: [{ type: "output_text", text: o.text, annotations: [], logprobs: [] }],
        };
      case "reasoning":
        return {
          type: "reasoning",
          id: o.id,
          summary: [],
          content: [{ type: "reasoning_text", text: o.text }],
          ...(o.signature ? { encrypted_content: o.signature } : {}),
        };
      case "call":
        return this.callItem(o, status);
    }
  }

  private callItem(c: OpenCall, status: ItemStatus): OutputFunctionCallItem {
    return { type: "function_call", id: c.id, call_id: c.callId, name: c.name, arguments: c.args, status };
  }

  private event(type: string, fields: Record<string, unknown>): Uint8Array {
    return sseFrame(JSON.stringify({ type, sequence_number: this.seq++, ...fields }), type);
  }
}
