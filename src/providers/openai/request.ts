/** Canonical request -> OpenAI chat-completions body. */
import type { CanonicalRequest, ImagePart, TextPart } from "../../protocols/canonical";
import type { ChatContentPart, ChatMessage, ChatRequest, ChatToolChoice } from "../../protocols/openai-chat/wire";

export type MaxTokensField = "max_tokens" | "max_completion_tokens";

function imageUrl(p: ImagePart): ChatContentPart {
  const url = p.source.kind === "base64" ? `data:${p.source.mediaType};base64,${p.source.data}` : p.source.url;
  return { type: "image_url", image_url: p.detail ? { url, detail: p.detail } : { url } };
}

function content(parts: (TextPart | ImagePart)[]): string | ChatContentPart[] {
  if (parts.every((p) => p.type === "text")) return parts.map((p) => (p as TextPart).text).join("");
  return parts.map((p) => (p.type === "text" ? { type: "text" as const, text: p.text } : imageUrl(p)));
}

/**
 * Tool results leave the user turn as `tool` messages right after the assistant's calls (OpenAI's
 * order); images in a tool result follow as a user message, since tool messages carry text only.
 */
export function toChatMessages(req: CanonicalRequest): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (req.system.length) out.push({ role: "system", content: req.system.map((p) => p.text).join("\n\n") });
  for (const m of req.messages) {
    if (m.role === "assistant") {
      let text = "";
      const calls = [];
      for (const p of m.content) {
        if (p.type === "text") text += p.text;
        else if (p.type === "tool_call")
          calls.push({ id: p.id, type: "function" as const, function: { name: p.name, arguments: p.arguments } });
      }
      out.push({
        role: "assistant",
        content: text === "" && calls.length ? null : text,
        ...(calls.length ? { tool_calls: calls } : {}),
      });
      continue;
    }
    const rest: (TextPart | ImagePart)[] = [];
    for (const p of m.content) {
      if (p.type !== "tool_result") {
        rest.push(p);
        continue;
      }
      const text = p.content
        .filter((c) => c.type === "text")
        .map((c) => (c as TextPart).text)
        .join("");
      out.push({
        role: "tool",
        tool_call_id: p.toolCallId,
        content: p.isError && !text.startsWith("Error") ? `Error: ${text}` : text,
      });
      const images = p.content.filter((c) => c.type === "image");
      if (images.length) rest.push(...images);
    }
    if (rest.length) out.push({ role: "user", content: content(rest) });
  }
  return out;
}

export function toChatRequest(req: CanonicalRequest, model: string, maxField: MaxTokensField): ChatRequest {
  const body: ChatRequest = { model, messages: toChatMessages(req) };
  if (req.tools?.length) {
    body.tools = req.tools.map((t) => ({
      type: "function",
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.parameters,
        ...(t.strict !== undefined ? { strict: t.strict } : {}),
      },
    }));
  }
  if (req.toolChoice) {
    const c = req.toolChoice;
    const choice: ChatToolChoice = c.type === "tool" ? { type: "function", function: { name: c.name } } : c.type;
    body.tool_choice = choice;
  }
  if (req.parallelToolCalls !== undefined && req.tools?.length) body.parallel_tool_calls = req.parallelToolCalls;
  if (req.responseFormat) {
    const f = req.responseFormat;
    body.response_format =
      f.type === "json_schema"
        ? {
            type: "json_schema",
            json_schema: {
              name: f.name,
              schema: f.schema,
              ...(f.strict !== undefined ? { strict: f.strict } : {}),
              ...(f.description !== undefined ? { description: f.description } : {}),
            },
          }
        : { type: f.type };
  }
  if (req.maxTokens !== undefined) body[maxField] = req.maxTokens;
  if (req.temperature !== undefined) body.temperature = req.temperature;
  if (req.topP !== undefined) body.top_p = req.topP;
  if (req.n !== undefined && req.n !== 1) body.n = req.n;
  if (req.stop?.length) body.stop = req.stop;
  if (req.seed !== undefined) body.seed = req.seed;
  if (req.presencePenalty !== undefined) body.presence_penalty = req.presencePenalty;
  if (req.frequencyPenalty !== undefined) body.frequency_penalty = req.frequencyPenalty;
  if (req.reasoningEffort !== undefined) body.reasoning_effort = req.reasoningEffort;
  if (req.user !== undefined) body.user = req.user;
  if (req.stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return body;
}
