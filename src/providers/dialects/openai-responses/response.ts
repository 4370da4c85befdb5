/** OpenAI Responses response object -> canonical response (PROTOCOLS.md 2.2). */
import type { AssistantPart, CanonicalResponse } from "../../../protocols/canonical";
import {
  finishFromResponses,
  statusOfResponseError,
  type UpstreamOutputItem,
  type UpstreamResponse,
  usageFromResponses,
} from "../../../protocols/openai-responses/wire";
import { UpstreamError } from "../../errors";

/** A reasoning item's readable text: its summary, else its reasoning text (open-weight models). */
export function reasoningText(item: UpstreamOutputItem): string {
  const summary = (item.summary ?? []).map((s) => s.text ?? "").filter((t) => t !== "");
  if (summary.length) return summary.join("\n\n");
  return (item.content ?? []).map((c) => (c.type === "reasoning_text" ? (c.text ?? "") : "")).join("");
}

/** A response the upstream reports as failed, as the error it is. */
export function failedResponse(res: UpstreamResponse, provider: string): UpstreamError {
  const code = res.error?.code ?? undefined;
  return new UpstreamError("http", `${provider} failed the response: ${res.error?.message ?? code ?? "no reason"}`, {
    status: statusOfResponseError(code),
    ...(code ? { upstreamType: code } : {}),
  });
}

/**
 * Output items -> one choice, in order: reasoning -> thinking (its summary; no signature, since the
 * Responses API's own reasoning cannot be replayed to another vendor), message text -> text, a
 * refusal -> the choice's refusal, function calls -> tool calls by `call_id`. Built-in tool items
 * (web searches and the like) were run by the upstream; their outcome is in the text.
 */
export function fromResponsesObject(body: UpstreamResponse, provider: string): CanonicalResponse {
  if (!body || typeof body !== "object" || !Array.isArray(body.output)) {
    throw new UpstreamError("protocol", `${provider} returned a response without output`, { status: 502 });
  }
  if (body.status === "failed") throw failedResponse(body, provider);
  if (body.status !== undefined && body.status !== "completed" && body.status !== "incomplete") {
    throw new UpstreamError("protocol", `${provider} returned an unfinished response (status ${body.status})`, {
      status: 502,
    });
  }
  const content: AssistantPart[] = [];
  let refusal: string | null = null;
  let calls = 0;
  for (const item of body.output) {
    switch (item.type) {
      case "message":
        for (const c of item.content ?? []) {
          if (c.type === "output_text" && c.text) content.push({ type: "text", text: c.text });
          else if (c.type === "refusal" && c.refusal) refusal = (refusal ?? "") + c.refusal;
        }
        break;
      case "function_call":
        calls++;
        content.push({
          type: "tool_call",
          id: item.call_id ?? item.id ?? "",
          name: item.name ?? "",
          arguments: item.arguments ?? "",
        });
        break;
      case "reasoning": {
        const text = reasoningText(item);
        if (text !== "") content.push({ type: "thinking", text });
        break;
      }
      default:
        break;
    }
  }
  return {
    id: body.id ?? "",
    model: body.model ?? "",
    created: body.created_at ?? Math.floor(Date.now() / 1000),
    choices: [
      {
        index: 0,
        content,
        finishReason: finishFromResponses(body.status, body.incomplete_details?.reason, calls > 0),
        refusal,
      },
    ],
    usage: usageFromResponses(body.usage),
  };
}
