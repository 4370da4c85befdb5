/**
 * Canonical request -> Anthropic Messages body (PROTOCOLS.md 3.2, 5.1-5.9). Shared by every
 * upstream that speaks the Messages dialect: the `anthropic` provider and Claude on Vertex AI.
 */
import { badRequest } from "../../../http/errors";
import type {
  AnthropicCacheControl,
  AnthropicImageBlock,
  AnthropicMessageParam,
  AnthropicMessagesRequest,
  AnthropicRequestBlock,
  AnthropicTextBlock,
  AnthropicTool,
  AnthropicToolChoice,
  AnthropicToolResultBlock,
} from "../../../protocols/anthropic/wire";
import {
  type AssistantPart,
  type CacheControl,
  type CanonicalRequest,
  type ImagePart,
  parseArguments,
  type ReasoningEffort,
  type TextPart,
  type ToolChoice,
  type UserPart,
} from "../../../protocols/canonical";

/** The output cap when neither the client nor the catalog gives one. */
export const FALLBACK_MAX_TOKENS = 4096;

/** Name of the synthetic tool that carries structured output (Anthropic has no JSON mode). */
export const JSON_OUTPUT_TOOL = "json_output";

/** reasoning_effort -> thinking budget (PROTOCOLS.md 5.7). 1024 is Anthropic's minimum budget. */
export const THINKING_BUDGETS: Record<ReasoningEffort, number> = {
  minimal: 1024,
  low: 1024,
  medium: 4096,
  high: 16384,
};

/** With thinking on, Anthropic accepts top_p only in [0.95, 1]. */
const MIN_TOP_P_WITH_THINKING = 0.95;

const EMPTY_SCHEMA: Record<string, unknown> = { type: "object", properties: {} };

function cache(c: CacheControl | undefined): { cache_control?: AnthropicCacheControl } {
  return c ? { cache_control: c.ttl ? { type: "ephemeral", ttl: c.ttl } : { type: "ephemeral" } } : {};
}

function textBlock(p: TextPart): AnthropicTextBlock {
  return { type: "text", text: p.text, ...cache(p.cacheControl) };
}

function imageBlock(p: ImagePart): AnthropicImageBlock {
  const source: AnthropicImageBlock["source"] =
    p.source.kind === "base64"
      ? { type: "base64", media_type: p.source.mediaType, data: p.source.data }
      : { type: "url", url: p.source.url };
  return { type: "image", source, ...cache(p.cacheControl) };
}

/** Anthropic requires `input_schema.type == "object"`; parameterless tools get an empty object schema. */
export function objectSchema(schema: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!schema || Object.keys(schema).length === 0) return { ...EMPTY_SCHEMA };
  if (schema.type === undefined) return { type: "object", ...schema };
  return schema;
}

function userBlocks(parts: UserPart[]): AnthropicRequestBlock[] {
  // Tool results must open the user turn that answers the assistant's calls; text and images follow.
  const results: AnthropicToolResultBlock[] = [];
  const rest: AnthropicRequestBlock[] = [];
  for (const p of parts) {
    switch (p.type) {
      case "text":
        if (p.text !== "") rest.push(textBlock(p));
        break;
      case "image":
        rest.push(imageBlock(p));
        break;
      case "tool_result": {
        const content = p.content
          .filter((c) => c.type !== "text" || c.text !== "")
          .map((c) => (c.type === "text" ? textBlock(c) : imageBlock(c)));
        results.push({
          type: "tool_result",
          tool_use_id: p.toolCallId,
          ...(content.length ? { content } : {}),
          ...(p.isError ? { is_error: true } : {}),
          ...cache(p.cacheControl),
        });
        break;
      }
      default: {
        const unreachable: never = p;
        return unreachable;
      }
    }
  }
  return [...results, ...rest];
}

function assistantBlocks(parts: AssistantPart[]): AnthropicRequestBlock[] {
  const out: AnthropicRequestBlock[] = [];
  for (const p of parts) {
    switch (p.type) {
      case "text":
        if (p.text !== "") out.push(textBlock(p));
        break;
      case "tool_call":
        out.push({
          type: "tool_use",
          id: p.id,
          name: p.name,
          input: parseArguments(p.arguments),
          ...cache(p.cacheControl),
        });
        break;
      case "thinking":
        // Replayed so tool loops with thinking verify; thinking without a signature (another
        // vendor's reasoning text) cannot be verified by Anthropic and is dropped.
        if (p.redacted !== undefined) out.push({ type: "redacted_thinking", data: p.redacted });
        else if (p.signature) out.push({ type: "thinking", thinking: p.text, signature: p.signature });
        break;
      default: {
        const unreachable: never = p;
        return unreachable;
      }
    }
  }
  return out;
}

/** Turns in Anthropic's shape: empty turns dropped, same-role neighbours merged, a user turn first. */
export function toAnthropicMessages(req: CanonicalRequest): AnthropicMessageParam[] {
  const out: { role: "user" | "assistant"; content: AnthropicRequestBlock[] }[] = [];
  for (const m of req.messages) {
    const blocks = m.role === "user" ? userBlocks(m.content) : assistantBlocks(m.content);
    if (blocks.length === 0) continue;
    const last = out.at(-1);
    if (last && last.role === m.role) {
      last.content = m.role === "user" ? mergeUser(last.content, blocks) : [...last.content, ...blocks];
    } else out.push({ role: m.role, content: blocks });
  }
  // Anthropic rejects a conversation that opens with the assistant (e.g. a history trimmed by the
  // client, or a prefilled reply with no question). A neutral user turn keeps the history usable.
  if (out[0]?.role === "assistant") out.unshift({ role: "user", content: [{ type: "text", text: "(continued)" }] });
  return out;
}

/** Merging two user turns keeps every tool result ahead of the text and images. */
function mergeUser(a: AnthropicRequestBlock[], b: AnthropicRequestBlock[]): AnthropicRequestBlock[] {
  const all = [...a, ...b];
  return [...all.filter((x) => x.type === "tool_result"), ...all.filter((x) => x.type !== "tool_result")];
}

function toolChoice(c: ToolChoice): AnthropicToolChoice {
  switch (c.type) {
    case "auto":
      return { type: "auto" };
    case "required":
      return { type: "any" };
    case "none":
      return { type: "none" };
    case "tool":
      return { type: "tool", name: c.name };
    default: {
      const unreachable: never = c;
      return unreachable;
    }
  }
}

/** Anthropic's smallest accepted thinking budget; smaller requests (e.g. from Gemini clients) are raised to it. */
export const MIN_THINKING_BUDGET = 1024;

function thinkingBudget(req: CanonicalRequest): number | undefined {
  if (req.thinkingBudget !== undefined) return Math.max(MIN_THINKING_BUDGET, req.thinkingBudget);
  if (req.reasoningEffort !== undefined) return THINKING_BUDGETS[req.reasoningEffort];
  return undefined;
}

/**
 * The Messages body for a canonical request. `model` undefined leaves the field out (Vertex AI names
 * the model in the URL). Throws a 400 for what Anthropic cannot do at all (n > 1), before any call.
 */
export function toAnthropicBody(
  req: CanonicalRequest,
  model: string | undefined,
  opts: { defaultMaxTokens?: number },
): AnthropicMessagesRequest {
  if (req.n !== undefined && req.n > 1) {
    throw badRequest(
      `'n' is ${req.n}, but Anthropic models return one choice; n must be 1`,
      "n",
      "unsupported_parameter",
    );
  }
  const budget = thinkingBudget(req);
  let maxTokens = req.maxTokens ?? opts.defaultMaxTokens ?? FALLBACK_MAX_TOKENS;
  // max_tokens counts thinking too and must exceed the budget: a cap at or below it becomes the
  // room left for the visible answer after thinking.
  if (budget !== undefined && maxTokens <= budget) maxTokens = budget + maxTokens;

  const body: AnthropicMessagesRequest = {
    ...(model !== undefined ? { model } : {}),
    max_tokens: maxTokens,
    messages: toAnthropicMessages(req),
  };
  const system = req.system.filter((p) => p.text !== "").map(textBlock);
  if (system.length) body.system = system;

  const tools: AnthropicTool[] = (req.tools ?? []).map((t) => ({
    name: t.name,
    ...(t.description !== undefined ? { description: t.description } : {}),
    input_schema: objectSchema(t.parameters),
    ...cache(t.cacheControl),
  }));
  let choice = req.toolChoice ? toolChoice(req.toolChoice) : undefined;

  // Structured output: a synthetic tool whose input is the answer. It is forced when it is the only
  // tool; next to the client's own tools the model may still call those (the client's choice stands).
  const format = req.responseFormat;
  if (format && format.type !== "text") {
    const clientTools = tools.length > 0;
    tools.push({
      name: JSON_OUTPUT_TOOL,
      description:
        format.type === "json_schema" && format.description
          ? format.description
          : "Respond with the final answer as JSON by calling this tool.",
      input_schema: objectSchema(format.type === "json_schema" ? format.schema : undefined),
    });
    if (!clientTools) choice = { type: "tool", name: JSON_OUTPUT_TOOL };
  }

  if (budget !== undefined) {
    body.thinking = { type: "enabled", budget_tokens: budget };
    // Thinking cannot be combined with a forced tool: the model decides (PROTOCOLS.md 5.4).
    if (choice && (choice.type === "any" || choice.type === "tool")) choice = { type: "auto" };
  }

  if (tools.length) {
    body.tools = tools;
    if (req.parallelToolCalls === false && choice?.type !== "none") {
      choice = { ...(choice ?? { type: "auto" }), disable_parallel_tool_use: true };
    }
    if (choice) body.tool_choice = choice;
  }

  if (budget === undefined) {
    if (req.temperature !== undefined) body.temperature = Math.min(req.temperature, 1);
    if (req.topK !== undefined) body.top_k = req.topK;
    // Newer Claude models reject temperature and top_p together; temperature wins (PROTOCOLS.md 5.7).
    if (req.topP !== undefined && req.temperature === undefined) body.top_p = req.topP;
  } else if (req.topP !== undefined && req.topP >= MIN_TOP_P_WITH_THINKING) {
    body.top_p = req.topP;
  }
  if (req.stop?.length) body.stop_sequences = req.stop;
  if (req.user !== undefined) body.metadata = { user_id: req.user };
  if (req.stream) body.stream = true;
  return body;
}
