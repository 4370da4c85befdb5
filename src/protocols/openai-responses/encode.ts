/** Canonical response -> Responses response object. */
import type { AssistantPart, CanonicalResponse, Usage } from "../canonical";
import type { ResponsesRequest } from "./schema";
import {
  type ItemStatus,
  itemId,
  type Outcome,
  type OutputItem,
  outcomeOf,
  type ResponseObject,
  usageToResponses,
} from "./wire";

export interface ResponseMeta {
  id: string;
  createdAt: number;
  model: string;
  /** The id the client continued from, echoed as the API does. */
  previousResponseId: string | null;
}

/** Every output_text part of the output, concatenated (the SDKs' `output_text`). */
export function outputTextOf(output: readonly OutputItem[]): string {
  let text = "";
  for (const item of output) {
    if (item.type !== "message") continue;
    for (const c of item.content) if (c.type === "output_text") text += c.text;
  }
  return text;
}

/**
 * The response object around an output: the request's settings echoed (with the API's defaults
 * where the client set none), status, usage and the convenience `output_text`.
 */
export function responseObject(
  body: ResponsesRequest,
  meta: ResponseMeta,
  output: OutputItem[],
  outcome: Outcome | { status: "in_progress"; incomplete_details: null; error: null },
  usage: Usage | undefined,
): ResponseObject {
  return {
    id: meta.id,
    object: "response",
    created_at: meta.createdAt,
    status: outcome.status,
    error: outcome.error,
    incomplete_details: outcome.incomplete_details,
    instructions: body.instructions ?? null,
    model: meta.model,
    output,
    output_text: outputTextOf(output),
    usage: usage ? usageToResponses(usage) : null,
    previous_response_id: meta.previousResponseId,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    temperature: body.temperature ?? 1,
    top_p: body.top_p ?? 1,
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    text: body.text ?? { format: { type: "text" } },
    max_output_tokens: body.max_output_tokens ?? null,
    reasoning: body.reasoning ?? { effort: null, summary: null },
    metadata: body.metadata ?? {},
    store: body.store !== false,
    user: body.user ?? null,
    truncation: body.truncation ?? "disabled",
    background: false,
  };
}

/**
 * Assistant parts -> output items, in order: thinking -> a reasoning item (reasoning text, with the
 * signature in `encrypted_content`; redacted thinking has no item), neighbouring text parts -> one
 * message, each tool call -> a function_call item whose `call_id` is the upstream's call id.
 * `finalStatus` is the status of the last item (incomplete when the output was cut off).
 */
export function outputItems(parts: readonly AssistantPart[], finalStatus: ItemStatus = "completed"): OutputItem[] {
  const out: OutputItem[] = [];
  for (const p of parts) {
    const last = out.at(-1);
    switch (p.type) {
      case "text":
        if (p.text === "") break;
        if (last?.type === "message" && last.content[0]?.type === "output_text") last.content[0].text += p.text;
        else
          out.push({
            type: "message",
            id: itemId("msg"),
            status: "completed",
            role: "assistant",
            content: [{ type: "output_text", text: p.text, annotations: [] }],
          });
        break;
      case "tool_call":
        out.push({
          type: "function_call",
          id: itemId("fc"),
          call_id: p.id,
          name: p.name,
          arguments: p.arguments,
          status: "completed",
        });
        break;
      case "thinking":
        if (p.redacted !== undefined) break;
        out.push({
          type: "reasoning",
          id: itemId("rs"),
          summary: [],
          content: [{ type: "reasoning_text", text: p.text }],
          ...(p.signature ? { encrypted_content: p.signature } : {}),
        });
        break;
      default: {
        const unreachable: never = p;
        void unreachable;
      }
    }
  }
  const last = out.at(-1);
  if (last && last.type !== "reasoning") last.status = finalStatus;
  return out;
}

/** A translated model's answer as a response object (first choice; the Responses API has no `n`). */
export function encodeResponse(res: CanonicalResponse, body: ResponsesRequest, meta: ResponseMeta): ResponseObject {
  const choice = res.choices[0];
  const outcome = outcomeOf(choice?.finishReason);
  const output = outputItems(choice?.content ?? [], outcome.status === "incomplete" ? "incomplete" : "completed");
  if (choice?.refusal) {
    // A refusal is a part of the assistant's message, after any text.
    const last = output.at(-1);
    const part = { type: "refusal" as const, refusal: choice.refusal };
    if (last?.type === "message") last.content.push(part);
    else output.push({ type: "message", id: itemId("msg"), status: "completed", role: "assistant", content: [part] });
  }
  return responseObject(body, meta, output, outcome, res.usage);
}
