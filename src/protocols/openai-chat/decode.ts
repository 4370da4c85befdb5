/** Chat-completions request -> canonical request. */
import { badRequest } from "../../http/errors";
import type {
  AssistantPart,
  CanonicalRequest,
  ImagePart,
  Message,
  ReasoningEffort,
  ResponseFormat,
  TextPart,
  ToolChoice,
  UserPart,
} from "../canonical";
import type { ChatCompletionRequest } from "./schema";

type ChatMessageIn = ChatCompletionRequest["messages"][number];
type PartIn = Exclude<Extract<ChatMessageIn, { role: "user" }>["content"], string>[number];

/** `data:<mime>;base64,<data>` URLs become inline images; anything else stays a URL. */
export function imageFromUrl(url: string, detail?: "auto" | "low" | "high"): ImagePart {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
  const source: ImagePart["source"] = m
    ? { kind: "base64", mediaType: m[1] as string, data: m[2] as string }
    : { kind: "url", url };
  return detail ? { type: "image", source, detail } : { type: "image", source };
}

function textParts(content: string | { type: "text"; text: string }[] | null | undefined): TextPart[] {
  if (content === null || content === undefined) return [];
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  return content.filter((p) => p.text !== "").map((p) => ({ type: "text", text: p.text }));
}

function userParts(content: string | PartIn[], at: string): UserPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return content.map((p, i): UserPart => {
    switch (p.type) {
      case "text":
        return { type: "text", text: p.text };
      case "image_url":
        return imageFromUrl(p.image_url.url, p.image_url.detail);
      default:
        throw badRequest(
          `'${at}.content[${i}]': content parts of type '${p.type}' are not supported by this gateway`,
          `${at}.content[${i}].type`,
          "unsupported_content",
        );
    }
  });
}

/**
 * System and developer messages are hoisted, in order, into the system prompt (the only place
 * Anthropic and Gemini have for them). Tool results become user turns; consecutive turns of one role
 * are merged, which every upstream accepts.
 */
export function decodeChatRequest(body: ChatCompletionRequest): CanonicalRequest {
  const system: TextPart[] = [];
  const messages: Message[] = [];
  const toolNames = new Map<string, string>();
  const push = (m: Message) => {
    const last = messages.at(-1);
    if (last && last.role === m.role) (last.content as unknown[]).push(...m.content);
    else messages.push(m);
  };
  body.messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    switch (m.role) {
      case "system":
      case "developer":
        system.push(...textParts(m.content));
        break;
      case "user":
        push({ role: "user", content: userParts(m.content, at) });
        break;
      case "assistant": {
        const content: AssistantPart[] = [];
        if (typeof m.content === "string") {
          if (m.content !== "") content.push({ type: "text", text: m.content });
        } else if (Array.isArray(m.content)) {
          for (const p of m.content)
            if (p.type === "text" && p.text !== "") content.push({ type: "text", text: p.text });
        }
        for (const call of m.tool_calls ?? []) {
          toolNames.set(call.id, call.function.name);
          content.push({
            type: "tool_call",
            id: call.id,
            name: call.function.name,
            arguments: call.function.arguments,
          });
        }
        push({ role: "assistant", content });
        break;
      }
      case "tool": {
        const name = toolNames.get(m.tool_call_id);
        push({
          role: "user",
          content: [
            {
              type: "tool_result",
              toolCallId: m.tool_call_id,
              ...(name ? { name } : {}),
              content: typeof m.content === "string" ? [{ type: "text", text: m.content }] : textParts(m.content),
            },
          ],
        });
        break;
      }
      case "function":
        push({
          role: "user",
          content: [{ type: "tool_result", toolCallId: m.name, name: m.name, content: textParts(m.content) }],
        });
        break;
    }
  });

  const req: CanonicalRequest = { model: body.model, system, messages, stream: body.stream === true };
  if (body.tools?.length) {
    req.tools = body.tools.map((t) => ({
      name: t.function.name,
      ...(t.function.description !== undefined ? { description: t.function.description } : {}),
      parameters: t.function.parameters ?? { type: "object", properties: {} },
      ...(typeof t.function.strict === "boolean" ? { strict: t.function.strict } : {}),
    }));
  }
  if (body.tool_choice !== undefined) req.toolChoice = toolChoice(body.tool_choice);
  if (body.parallel_tool_calls !== undefined) req.parallelToolCalls = body.parallel_tool_calls;
  if (body.response_format !== undefined) req.responseFormat = responseFormat(body.response_format);
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (typeof maxTokens === "number") req.maxTokens = maxTokens;
  if (typeof body.temperature === "number") req.temperature = body.temperature;
  if (typeof body.top_p === "number") req.topP = body.top_p;
  if (typeof body.n === "number") req.n = body.n;
  if (typeof body.stop === "string") req.stop = [body.stop];
  else if (Array.isArray(body.stop) && body.stop.length) req.stop = body.stop;
  if (typeof body.seed === "number") req.seed = body.seed;
  if (typeof body.presence_penalty === "number") req.presencePenalty = body.presence_penalty;
  if (typeof body.frequency_penalty === "number") req.frequencyPenalty = body.frequency_penalty;
  if (typeof body.reasoning_effort === "string") req.reasoningEffort = body.reasoning_effort as ReasoningEffort;
  if (body.user !== undefined) req.user = body.user;
  return req;
}

function toolChoice(c: NonNullable<ChatCompletionRequest["tool_choice"]>): ToolChoice {
  if (c === "auto" || c === "none" || c === "required") return { type: c };
  return { type: "tool", name: c.function.name };
}

function responseFormat(f: NonNullable<ChatCompletionRequest["response_format"]>): ResponseFormat {
  if (f.type === "json_schema") {
    return {
      type: "json_schema",
      name: f.json_schema.name,
      schema: f.json_schema.schema ?? {},
      ...(typeof f.json_schema.strict === "boolean" ? { strict: f.json_schema.strict } : {}),
      ...(f.json_schema.description !== undefined ? { description: f.json_schema.description } : {}),
    };
  }
  return { type: f.type };
}
