/**
 * Canonical request -> Bedrock Converse body (the same body serves ConverseStream).
 * Reference: https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html
 */
import { badRequest } from "../../http/errors";
import {
  type CacheControl,
  type CanonicalRequest,
  type ImagePart,
  type Message,
  parseArguments,
  type ReasoningEffort,
  type ResponseFormat,
  type TextPart,
} from "../../protocols/canonical";
import type { CallContext } from "../types";

export type ImageFormat = "png" | "jpeg" | "gif" | "webp";
type CachePointBlock = { cachePoint: { type: "default" } };
type ImageBlock = { image: { format: ImageFormat; source: { bytes: string } } };
export type ToolResultContent = { text: string } | { json: unknown } | ImageBlock;

export type ConverseContentBlock =
  | { text: string }
  | ImageBlock
  | { toolUse: { toolUseId: string; name: string; input: unknown } }
  | { toolResult: { toolUseId: string; content: ToolResultContent[]; status?: "success" | "error" } }
  | { reasoningContent: { reasoningText: { text: string; signature?: string } } | { redactedContent: string } }
  | CachePointBlock;

export interface ConverseMessage {
  role: "user" | "assistant";
  content: ConverseContentBlock[];
}

export type ConverseTool =
  | { toolSpec: { name: string; description?: string; inputSchema: { json: Record<string, unknown> } } }
  | CachePointBlock;

export type ConverseToolChoice =
  | { auto: Record<string, never> }
  | { any: Record<string, never> }
  | { tool: { name: string } };

export interface ConverseRequest {
  messages: ConverseMessage[];
  system?: ({ text: string } | CachePointBlock)[];
  inferenceConfig?: { maxTokens?: number; temperature?: number; topP?: number; stopSequences?: string[] };
  toolConfig?: { tools: ConverseTool[]; toolChoice?: ConverseToolChoice };
  additionalModelRequestFields?: Record<string, unknown>;
}

/** The synthetic tool that carries a JSON answer (Converse has no native JSON mode for every model). */
export const JSON_TOOL = "json_output";

/** Whether the answer comes through JSON_TOOL: JSON mode (`json_object`) or a schema (`json_schema`). */
export const jsonFormat = (f: ResponseFormat | undefined): boolean =>
  f?.type === "json_schema" || f?.type === "json_object";

/** reasoning_effort -> Anthropic thinking budget (Anthropic's minimum budget is 1024). */
export const THINKING_BUDGETS: Record<ReasoningEffort, number> = {
  minimal: 1024,
  low: 1024,
  medium: 4096,
  high: 16384,
};

const CACHE_POINT: CachePointBlock = { cachePoint: { type: "default" } };

export const isAnthropicModel = (modelId: string): boolean => modelId.includes("anthropic.");

const FORMATS: Record<string, ImageFormat> = {
  "image/png": "png",
  "image/jpeg": "jpeg",
  "image/jpg": "jpeg",
  "image/gif": "gif",
  "image/webp": "webp",
};

export function imageFormat(mediaType: string): ImageFormat {
  const f = FORMATS[mediaType.toLowerCase()];
  if (!f) {
    throw badRequest(
      `Bedrock accepts png, jpeg, gif and webp images; got ${mediaType || "an unknown type"}`,
      null,
      "unsupported_image_type",
    );
  }
  return f;
}

async function imageBlock(p: ImagePart, ctx: CallContext): Promise<ImageBlock> {
  const inline = p.source.kind === "base64" ? p.source : await ctx.fetchImage(p.source.url, ctx.signal);
  return { image: { format: imageFormat(inline.mediaType), source: { bytes: inline.data } } };
}

/** A tool result that is one JSON object as text goes as `{json}`, which Converse passes to the model as structured data. */
function jsonObjectOf(text: string): Record<string, unknown> | undefined {
  const t = text.trim();
  if (!t.startsWith("{")) return undefined;
  try {
    const v: unknown = JSON.parse(t);
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

async function toolResultContent(parts: (TextPart | ImagePart)[], ctx: CallContext): Promise<ToolResultContent[]> {
  const only = parts.length === 1 ? parts[0] : undefined;
  if (only?.type === "text") {
    const json = jsonObjectOf(only.text);
    if (json) return [{ json }];
  }
  const out: ToolResultContent[] = [];
  for (const p of parts) {
    if (p.type === "text") {
      if (p.text !== "") out.push({ text: p.text });
    } else out.push(await imageBlock(p, ctx));
  }
  return out;
}

const withCache = (block: ConverseContentBlock, cc: CacheControl | undefined): ConverseContentBlock[] =>
  cc ? [block, CACHE_POINT] : [block];

async function contentBlocks(m: Message, ctx: CallContext): Promise<ConverseContentBlock[]> {
  const out: ConverseContentBlock[] = [];
  if (m.role === "assistant") {
    for (const p of m.content) {
      switch (p.type) {
        case "text":
          // Converse rejects blank text blocks.
          if (p.text.trim() !== "") out.push(...withCache({ text: p.text }, p.cacheControl));
          break;
        case "tool_call":
          out.push(
            ...withCache(
              { toolUse: { toolUseId: p.id, name: p.name, input: parseArguments(p.arguments) } },
              p.cacheControl,
            ),
          );
          break;
        case "thinking":
          // Only signed (or redacted) thinking can be replayed; unsigned thinking from another upstream is dropped.
          if (p.redacted) out.push({ reasoningContent: { redactedContent: p.redacted } });
          else if (p.signature)
            out.push({ reasoningContent: { reasoningText: { text: p.text, signature: p.signature } } });
          break;
        default: {
          const unreachable: never = p;
          return unreachable;
        }
      }
    }
    return out;
  }
  for (const p of m.content) {
    switch (p.type) {
      case "text":
        if (p.text.trim() !== "") out.push(...withCache({ text: p.text }, p.cacheControl));
        break;
      case "image":
        out.push(...withCache(await imageBlock(p, ctx), p.cacheControl));
        break;
      case "tool_result":
        out.push(
          ...withCache(
            {
              toolResult: {
                toolUseId: p.toolCallId,
                content: await toolResultContent(p.content, ctx),
                ...(p.isError ? { status: "error" as const } : {}),
              },
            },
            p.cacheControl,
          ),
        );
        break;
      default: {
        const unreachable: never = p;
        return unreachable;
      }
    }
  }
  return out;
}

/**
 * Converse wants alternating turns that start with the user: consecutive turns of one role are
 * merged, turns left empty are dropped, and a conversation that opens with the assistant gets a
 * minimal user turn in front (Converse rejects it otherwise).
 */
async function converseMessages(req: CanonicalRequest, ctx: CallContext): Promise<ConverseMessage[]> {
  const out: ConverseMessage[] = [];
  for (const m of req.messages) {
    const content = await contentBlocks(m, ctx);
    if (content.length === 0) continue;
    const last = out.at(-1);
    if (last && last.role === m.role) last.content.push(...content);
    else out.push({ role: m.role, content });
  }
  if (out[0]?.role === "assistant") out.unshift({ role: "user", content: [{ text: "." }] });
  return out;
}

const hasToolBlocks = (req: CanonicalRequest): boolean =>
  req.messages.some((m) => m.content.some((p) => p.type === "tool_call" || p.type === "tool_result"));

export async function toConverseRequest(
  req: CanonicalRequest,
  modelId: string,
  ctx: CallContext,
): Promise<ConverseRequest> {
  const body: ConverseRequest = { messages: await converseMessages(req, ctx) };

  const system: NonNullable<ConverseRequest["system"]> = [];
  for (const p of req.system) {
    if (p.text.trim() === "") continue;
    system.push({ text: p.text });
    if (p.cacheControl) system.push(CACHE_POINT);
  }
  if (system.length) body.system = system;

  const anthropic = isAnthropicModel(modelId);
  const additional: Record<string, unknown> = {};
  const inference: NonNullable<ConverseRequest["inferenceConfig"]> = {};
  let maxTokens = req.maxTokens;
  // Anthropic models on Bedrock accept no budget below 1024 tokens.
  const asked = req.thinkingBudget ?? (req.reasoningEffort ? THINKING_BUDGETS[req.reasoningEffort] : undefined);
  const budget = asked === undefined ? undefined : Math.max(1024, asked);
  if (anthropic && budget !== undefined) {
    additional.thinking = { type: "enabled", budget_tokens: budget };
    // Anthropic counts thinking inside max_tokens, which must exceed the budget: the client's cap
    // (or 4096) is kept for the answer on top of the budget.
    maxTokens ??= ctx.defaultMaxTokens;
    if (maxTokens === undefined || maxTokens <= budget) maxTokens = budget + (req.maxTokens ?? 4096);
  }
  if (anthropic && req.topK !== undefined) additional.top_k = req.topK;
  if (maxTokens !== undefined) inference.maxTokens = maxTokens;
  if (req.temperature !== undefined) inference.temperature = req.temperature;
  if (req.topP !== undefined) inference.topP = req.topP;
  if (req.stop?.length) inference.stopSequences = req.stop;
  if (Object.keys(inference).length) body.inferenceConfig = inference;
  if (Object.keys(additional).length) body.additionalModelRequestFields = additional;
  // seed, presence/frequency penalties and user have no Converse field and are dropped.

  const tools: ConverseTool[] = [];
  for (const t of req.tools ?? []) {
    tools.push({
      toolSpec: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        inputSchema: { json: t.parameters },
      },
    });
    if (t.cacheControl) tools.push(CACHE_POINT);
  }
  if (tools.length === 0 && hasToolBlocks(req)) {
    // A history with toolUse/toolResult blocks is rejected without a toolConfig: declare the tools
    // it names, with an open schema, when the client did not send their definitions.
    const names = new Set<string>();
    for (const m of req.messages) for (const p of m.content) if (p.type === "tool_call") names.add(p.name);
    for (const name of names) tools.push({ toolSpec: { name, inputSchema: { json: { type: "object" } } } });
  }
  const fmt = req.responseFormat;
  if (fmt?.type === "json_schema" || fmt?.type === "json_object") {
    // As for Anthropic: a forced tool whose input is the answer (response.ts turns it back into text).
    // JSON mode without a schema gets an open object schema, so every JSON object is an answer.
    tools.push({
      toolSpec: {
        name: JSON_TOOL,
        description:
          fmt.type === "json_schema"
            ? (fmt.description ?? `Respond with the ${fmt.name} object as this tool's input.`)
            : "Respond with the final answer as a JSON object by calling this tool.",
        inputSchema: { json: fmt.type === "json_schema" ? fmt.schema : { type: "object" } },
      },
    });
    body.toolConfig = { tools, toolChoice: { tool: { name: JSON_TOOL } } };
  } else if (tools.length) {
    const choice = req.toolChoice;
    if (choice?.type === "none") {
      // Converse has no "none": leave the tools out. A history with toolUse/toolResult blocks is
      // rejected without a toolConfig, though, so then the tools stay and the choice becomes auto.
      if (hasToolBlocks(req)) body.toolConfig = { tools, toolChoice: { auto: {} } };
    } else {
      body.toolConfig = { tools };
      if (choice?.type === "auto") body.toolConfig.toolChoice = { auto: {} };
      else if (choice?.type === "required") body.toolConfig.toolChoice = { any: {} };
      else if (choice?.type === "tool") body.toolConfig.toolChoice = { tool: { name: choice.name } };
    }
  }
  return body;
}
