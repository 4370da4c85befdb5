/** Responses request -> canonical request (for models translated through the canonical form). */
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
import { imageFromUrl } from "../openai-chat/decode";
import type { InputItem, MessageItem, ResponsesRequest } from "./schema";

/**
 * `strict` (the default) is for models the request is translated for: what cannot be translated
 * (built-in tools, uploaded files, item references, ...) is a 400 naming the field. Lenient decoding
 * skips those instead; it serves only token estimates for models that are forwarded natively.
 */
export interface DecodeOptions {
  strict?: boolean;
}

/** The request's input as a list of items: a string is one user message. */
export function inputItems(body: Pick<ResponsesRequest, "input">): InputItem[] {
  if (body.input === undefined) return [];
  if (typeof body.input === "string") return [{ type: "message", role: "user", content: body.input }];
  return body.input;
}

const unsupported = (message: string, param: string, code = "unsupported_parameter") =>
  badRequest(message, param, code);

const NATIVE_ONLY = "is only available for models served through an upstream Responses API (catalog mode: responses)";

type ContentPart = Exclude<MessageItem["content"], string>[number];
type OutputPart = Exclude<Extract<InputItem, { type: "function_call_output" }>["output"], string>[number];

function imageDetail(d: string | undefined): ImagePart["detail"] {
  return d === "low" || d === "high" || d === "auto" ? d : d === "original" ? "high" : undefined;
}

/** An `input_image` part: its URL (data or https); uploaded files (`file_id`) cannot be reached. */
function imagePart(
  p: { image_url?: string | null; file_id?: string | null; detail?: string },
  at: string,
  strict: boolean,
): ImagePart | undefined {
  if (p.image_url) return imageFromUrl(p.image_url, imageDetail(p.detail));
  if (!strict) return undefined;
  if (p.file_id)
    throw unsupported(
      `'${at}.file_id': uploaded files are not available through this gateway; send the image as a data URL or an https URL in 'image_url'`,
      `${at}.file_id`,
      "unsupported_content",
    );
  throw badRequest(`Missing required field '${at}.image_url'`, `${at}.image_url`, "missing_field");
}

function userParts(content: MessageItem["content"], at: string, strict: boolean): UserPart[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  const out: UserPart[] = [];
  content.forEach((p: ContentPart, i) => {
    const where = `${at}.content[${i}]`;
    switch (p.type) {
      case "input_text":
      case "output_text":
        if (p.text !== "") out.push({ type: "text", text: p.text });
        break;
      case "refusal":
        if (p.refusal !== "") out.push({ type: "text", text: p.refusal });
        break;
      case "input_image": {
        const img = imagePart(p, where, strict);
        if (img) out.push(img);
        break;
      }
      case "input_file":
        if (strict)
          throw unsupported(
            `'${where}': file inputs are not supported by this gateway for this model`,
            `${where}.type`,
            "unsupported_content",
          );
        break;
      default: {
        const unreachable: never = p;
        void unreachable;
      }
    }
  });
  return out;
}

function assistantParts(content: MessageItem["content"], at: string, strict: boolean): AssistantPart[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  const out: AssistantPart[] = [];
  content.forEach((p: ContentPart, i) => {
    if (p.type === "output_text" || p.type === "input_text") {
      if (p.text !== "") out.push({ type: "text", text: p.text });
    } else if (p.type === "refusal") {
      if (p.refusal !== "") out.push({ type: "text", text: p.refusal });
    } else if (strict) {
      throw badRequest(
        `'${at}.content[${i}]': assistant messages carry text only (output_text or refusal), got '${p.type}'`,
        `${at}.content[${i}].type`,
        "invalid_value",
      );
    }
  });
  return out;
}

function systemParts(content: MessageItem["content"], at: string, strict: boolean): TextPart[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  const out: TextPart[] = [];
  content.forEach((p: ContentPart, i) => {
    if ((p.type === "input_text" || p.type === "output_text") && p.text !== "")
      out.push({ type: "text", text: p.text });
    else if (strict && p.type !== "input_text" && p.type !== "output_text") {
      throw badRequest(
        `'${at}.content[${i}]': system and developer messages carry text only, got '${p.type}'`,
        `${at}.content[${i}].type`,
        "invalid_value",
      );
    }
  });
  return out;
}

function toolOutput(output: string | OutputPart[], at: string, strict: boolean): (TextPart | ImagePart)[] {
  if (typeof output === "string") return [{ type: "text", text: output }];
  const out: (TextPart | ImagePart)[] = [];
  output.forEach((p, i) => {
    const where = `${at}.output[${i}]`;
    if (p.type === "input_text") out.push({ type: "text", text: p.text });
    else if (p.type === "input_image") {
      const img = imagePart(p, where, strict);
      if (img) out.push(img);
    } else if (strict) {
      throw unsupported(
        `'${where}': file inputs are not supported by this gateway for this model`,
        `${where}.type`,
        "unsupported_content",
      );
    }
  });
  return out;
}

/**
 * Items -> system prompt and turns. `instructions` come first in the system prompt, then system and
 * developer items in order (hoisted: Anthropic and Gemini have one system slot). function_call items
 * join the assistant turn, function_call_output items a user turn (linked by `call_id`); neighbouring
 * turns of one role are merged. Reasoning items become thinking only when they carry reasoning text
 * (the gateway's own, with the Anthropic signature in `encrypted_content`); OpenAI's opaque ones are
 * dropped.
 */
export function decodeResponsesRequest(
  body: ResponsesRequest,
  items: readonly InputItem[] = inputItems(body),
  opts: DecodeOptions = {},
): CanonicalRequest {
  const strict = opts.strict ?? true;
  const system: TextPart[] = [];
  if (body.instructions) system.push({ type: "text", text: body.instructions });
  const messages: Message[] = [];
  const toolNames = new Map<string, string>();
  const push = (m: Message) => {
    if (m.content.length === 0) return;
    const last = messages.at(-1);
    if (last && last.role === m.role) (last.content as unknown[]).push(...m.content);
    else messages.push(m);
  };

  items.forEach((item, i) => {
    const at = `input[${i}]`;
    const type = item.type ?? "message";
    switch (type) {
      case "message": {
        const m = item as MessageItem;
        if (m.role === "system" || m.role === "developer") system.push(...systemParts(m.content, at, strict));
        else if (m.role === "user") push({ role: "user", content: userParts(m.content, at, strict) });
        else push({ role: "assistant", content: assistantParts(m.content, at, strict) });
        break;
      }
      case "function_call": {
        const c = item as Extract<InputItem, { type: "function_call" }>;
        toolNames.set(c.call_id, c.name);
        push({
          role: "assistant",
          content: [{ type: "tool_call", id: c.call_id, name: c.name, arguments: c.arguments }],
        });
        break;
      }
      case "function_call_output": {
        const r = item as Extract<InputItem, { type: "function_call_output" }>;
        const name = toolNames.get(r.call_id);
        push({
          role: "user",
          content: [
            {
              type: "tool_result",
              toolCallId: r.call_id,
              ...(name ? { name } : {}),
              content: toolOutput(r.output, at, strict),
            },
          ],
        });
        break;
      }
      case "reasoning": {
        const r = item as Extract<InputItem, { type: "reasoning" }>;
        const text = (r.content ?? []).map((p) => p.text).join("");
        if (r.content?.length) {
          push({
            role: "assistant",
            content: [{ type: "thinking", text, ...(r.encrypted_content ? { signature: r.encrypted_content } : {}) }],
          });
        }
        break;
      }
      default:
        if (strict) {
          throw unsupported(
            type === "item_reference"
              ? `'${at}': item references are not supported by this gateway; send the item itself or use previous_response_id`
              : `'${at}': items of type '${type}' (built-in tool calls) ${NATIVE_ONLY}`,
            `${at}.type`,
            "unsupported_item",
          );
        }
    }
  });

  const req: CanonicalRequest = { model: body.model, system, messages, stream: body.stream === true };
  const tools = (body.tools ?? []).flatMap((t, i) => {
    if (t.type === "function") {
      const f = t as Extract<typeof t, { type: "function" }>;
      return [
        {
          name: f.name,
          ...(typeof f.description === "string" ? { description: f.description } : {}),
          parameters: f.parameters ?? { type: "object", properties: {} },
          ...(typeof f.strict === "boolean" ? { strict: f.strict } : {}),
        },
      ];
    }
    if (strict)
      throw unsupported(`The built-in tool '${t.type}' ${NATIVE_ONLY}`, `tools[${i}].type`, "unsupported_tool");
    return [];
  });
  if (tools.length) req.tools = tools;
  const choice = toolChoice(body.tool_choice, strict);
  if (choice) req.toolChoice = choice;
  if (typeof body.parallel_tool_calls === "boolean") req.parallelToolCalls = body.parallel_tool_calls;
  const format = responseFormat(body.text?.format);
  if (format) req.responseFormat = format;
  if (typeof body.max_output_tokens === "number") req.maxTokens = body.max_output_tokens;
  if (typeof body.temperature === "number") req.temperature = body.temperature;
  if (typeof body.top_p === "number") req.topP = body.top_p;
  const effort = reasoningEffort(body.reasoning?.effort);
  if (effort) req.reasoningEffort = effort;
  if (body.user !== undefined) req.user = body.user;
  if (strict) {
    const extra = body as Record<string, unknown>;
    if (body.background === true)
      throw unsupported(`Background responses ${NATIVE_ONLY}`, "background", "unsupported_parameter");
    if (extra.conversation != null)
      throw unsupported(
        `'conversation' ${NATIVE_ONLY}; use previous_response_id to continue a conversation`,
        "conversation",
      );
  }
  return req;
}

function toolChoice(c: ResponsesRequest["tool_choice"], strict: boolean): ToolChoice | undefined {
  if (c === undefined) return undefined;
  if (c === "auto" || c === "none" || c === "required") return { type: c };
  if (c.type === "function") return { type: "tool", name: (c as { name: string }).name };
  if (strict) throw unsupported(`tool_choice of type '${c.type}' ${NATIVE_ONLY}`, "tool_choice.type");
  return undefined;
}

function responseFormat(f: NonNullable<NonNullable<ResponsesRequest["text"]>["format"]> | undefined) {
  if (!f || f.type === "text") return undefined;
  if (f.type === "json_object") return { type: "json_object" } satisfies ResponseFormat;
  const s = f as Extract<typeof f, { type: "json_schema" }>;
  return {
    type: "json_schema",
    name: s.name,
    schema: s.schema,
    ...(typeof s.strict === "boolean" ? { strict: s.strict } : {}),
    ...(s.description !== undefined ? { description: s.description } : {}),
  } satisfies ResponseFormat;
}

/** `none` asks for no reasoning (left to the model's default off); `xhigh` is the highest canonical level. */
function reasoningEffort(e: string | null | undefined): ReasoningEffort | undefined {
  if (e === "minimal" || e === "low" || e === "medium" || e === "high") return e;
  if (e === "xhigh") return "high";
  return undefined;
}
