/** Canonical request -> OpenAI Responses request body (for `mode: responses` models). */
import { badRequest } from "../../../http/errors";
import type {
  AssistantPart,
  CanonicalRequest,
  ImagePart,
  TextPart,
  ToolResultPart,
  UserPart,
} from "../../../protocols/canonical";
import type {
  ResponsesInputContent,
  ResponsesInputItem,
  ResponsesRequestBody,
  ResponsesTextFormat,
} from "../../../protocols/openai-responses/wire";

function imageUrl(p: ImagePart): string {
  return p.source.kind === "base64" ? `data:${p.source.mediaType};base64,${p.source.data}` : p.source.url;
}

function contentOf(parts: (TextPart | ImagePart)[]): string | ResponsesInputContent[] {
  if (parts.every((p) => p.type === "text")) return parts.map((p) => (p as TextPart).text).join("");
  return parts.map((p) =>
    p.type === "text"
      ? { type: "input_text" as const, text: p.text }
      : { type: "input_image" as const, image_url: imageUrl(p), detail: p.detail ?? "auto" },
  );
}

function toolOutput(r: ToolResultPart): ResponsesInputItem {
  const text = r.content
    .filter((c) => c.type === "text")
    .map((c) => (c as TextPart).text)
    .join("");
  const errorText = r.isError && !text.startsWith("Error") ? `Error: ${text}` : text;
  const images = r.content.filter((c) => c.type === "image");
  // Tool outputs may carry images in the Responses API (unlike chat's tool messages).
  const output = images.length
    ? contentOf([...(errorText ? [{ type: "text" as const, text: errorText }] : []), ...images])
    : errorText;
  return { type: "function_call_output", call_id: r.toolCallId, output };
}

/**
 * Turns -> input items, in order: user text and images -> a user message; tool results ->
 * `function_call_output` items (by call id); assistant text -> an assistant message; tool calls ->
 * `function_call` items. Thinking is not sent: reasoning from another vendor means nothing to the
 * Responses API, and its own reasoning items never reach the canonical form.
 */
function inputItems(req: CanonicalRequest): ResponsesInputItem[] {
  const out: ResponsesInputItem[] = [];
  for (const m of req.messages) {
    if (m.role === "assistant") {
      let text = "";
      const flush = () => {
        if (text !== "") out.push({ type: "message", role: "assistant", content: text });
        text = "";
      };
      for (const p of m.content as AssistantPart[]) {
        if (p.type === "text") text += p.text;
        else if (p.type === "tool_call") {
          flush();
          out.push({ type: "function_call", call_id: p.id, name: p.name, arguments: p.arguments });
        }
      }
      flush();
      continue;
    }
    let rest: (TextPart | ImagePart)[] = [];
    const flush = () => {
      if (rest.length) out.push({ type: "message", role: "user", content: contentOf(rest) });
      rest = [];
    };
    for (const p of m.content as UserPart[]) {
      if (p.type === "tool_result") {
        flush();
        out.push(toolOutput(p));
      } else rest.push(p);
    }
    flush();
  }
  return out;
}

function textFormat(req: CanonicalRequest): ResponsesTextFormat | undefined {
  const f = req.responseFormat;
  if (!f || f.type === "text") return undefined;
  if (f.type === "json_object") return { type: "json_object" };
  return {
    type: "json_schema",
    name: f.name,
    schema: f.schema,
    ...(f.strict !== undefined ? { strict: f.strict } : {}),
    ...(f.description !== undefined ? { description: f.description } : {}),
  };
}

/**
 * The Responses body for a canonical request. The upstream is told not to store the response
 * (`store: false`): the gateway keeps no upstream state for translated calls. What the Responses API
 * cannot do at all is a 400 before any call: several choices (`n`) and stop sequences. Seeds and
 * penalties, which it does not have, are left out.
 */
export function toResponsesBody(req: CanonicalRequest, model: string): ResponsesRequestBody {
  if (req.n !== undefined && req.n > 1) {
    throw badRequest(
      `'n' is ${req.n}, but models served through the Responses API return one answer; n must be 1`,
      "n",
      "unsupported_parameter",
    );
  }
  if (req.stop?.length) {
    throw badRequest(
      `Stop sequences are not supported by the Responses API, which serves '${req.model}'; remove them`,
      "stop",
      "unsupported_parameter",
    );
  }
  const body: ResponsesRequestBody = { model, input: inputItems(req), store: false };
  const system = req.system
    .map((p) => p.text)
    .filter((t) => t !== "")
    .join("\n\n");
  if (system) body.instructions = system;
  if (req.tools?.length) {
    // `strict` defaults to true in the Responses API (false in chat completions): say it explicitly.
    body.tools = req.tools.map((t) => ({
      type: "function",
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      parameters: t.parameters,
      strict: t.strict ?? false,
    }));
    if (req.parallelToolCalls !== undefined) body.parallel_tool_calls = req.parallelToolCalls;
  }
  if (req.toolChoice) {
    const c = req.toolChoice;
    body.tool_choice = c.type === "tool" ? { type: "function", name: c.name } : c.type;
  }
  const format = textFormat(req);
  if (format) body.text = { format };
  if (req.maxTokens !== undefined) body.max_output_tokens = req.maxTokens;
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.topP !== undefined) body.top_p = req.topP;
  if (req.reasoningEffort !== undefined) body.reasoning = { effort: req.reasoningEffort };
  if (req.user !== undefined) body.user = req.user;
  if (req.stream) body.stream = true;
  return body;
}
