/**
 * Anthropic Messages request -> canonical request (PROTOCOLS.md 3.2 and 5.1-5.9). The other
 * direction of the Anthropic dialect in src/providers/dialects/anthropic/request.ts.
 *
 * Decoding never fails on a valid body: the pipeline also decodes requests that are forwarded
 * natively, to estimate their tokens. What only Anthropic itself can serve (PDF documents, Files API
 * sources, server tools) is left out of the canonical form and named by `nativeOnlyFeature`, so the
 * route can refuse it before a model that needs translation is called.
 */
import type {
  AssistantPart,
  CacheControl,
  CanonicalRequest,
  ImagePart,
  Message,
  ReasoningEffort,
  TextPart,
  ToolChoice,
  ToolDefinition,
  ToolResultPart,
  UserPart,
} from "../canonical";
import type { CountTokensRequest, MessagesRequest } from "./schema";

type Input = MessagesRequest | CountTokensRequest;
type MessageIn = Input["messages"][number];
type UserBlockIn = Exclude<Extract<MessageIn, { role: "user" }>["content"], string>[number];
type AssistantBlockIn = Exclude<Extract<MessageIn, { role: "assistant" }>["content"], string>[number];
type TextBlockIn = Extract<UserBlockIn, { type: "text" }>;
type ImageBlockIn = Extract<UserBlockIn, { type: "image" }>;
type DocumentBlockIn = Extract<UserBlockIn, { type: "document" }>;
type SearchResultIn = Extract<UserBlockIn, { type: "search_result" }>;
type ToolResultIn = Extract<UserBlockIn, { type: "tool_result" }>;
type CacheIn = { type: "ephemeral"; ttl?: "5m" | "1h" } | null | undefined;

function cache(c: CacheIn): { cacheControl?: CacheControl } {
  if (!c) return {};
  return { cacheControl: c.ttl ? { type: "ephemeral", ttl: c.ttl } : { type: "ephemeral" } };
}

function text(t: string, c?: CacheIn): TextPart {
  return { type: "text", text: t, ...cache(c) };
}

/** Base64 and URL images; a Files API source has no canonical form (see nativeOnlyFeature). */
function image(b: ImageBlockIn): ImagePart | undefined {
  const s = b.source;
  if (s.type === "base64")
    return {
      type: "image",
      source: { kind: "base64", mediaType: s.media_type, data: s.data },
      ...cache(b.cache_control),
    };
  if (s.type === "url") return { type: "image", source: { kind: "url", url: s.url }, ...cache(b.cache_control) };
  return undefined;
}

/** Plain-text and content documents become text (and images); PDFs and files are native-only. */
function document(b: DocumentBlockIn): (TextPart | ImagePart)[] {
  const s = b.source;
  const title = b.title ? `${b.title}\n\n` : "";
  let out: (TextPart | ImagePart)[] = [];
  if (s.type === "text") out = [text(`${title}${s.data}`)];
  else if (s.type === "content") {
    if (typeof s.content === "string") out = [text(`${title}${s.content}`)];
    else {
      if (title) out.push(text(title.trimEnd()));
      for (const c of s.content) {
        const p = c.type === "text" ? text(c.text) : image(c);
        if (p) out.push(p);
      }
    }
  }
  const last = out.at(-1);
  if (last && b.cache_control) Object.assign(last, cache(b.cache_control));
  return out;
}

function searchResult(b: SearchResultIn): TextPart {
  const body = b.content.map((c) => c.text).join("\n");
  return text(`${b.title} (${b.source})\n${body}`, b.cache_control);
}

function toolResultContent(content: ToolResultIn["content"]): (TextPart | ImagePart)[] {
  if (content === undefined) return [];
  if (typeof content === "string") return content === "" ? [] : [text(content)];
  const out: (TextPart | ImagePart)[] = [];
  for (const c of content) {
    switch (c.type) {
      case "text":
        if (c.text !== "") out.push(text(c.text));
        break;
      case "image": {
        const p = image(c);
        if (p) out.push(p);
        break;
      }
      case "search_result":
        out.push(searchResult(c));
        break;
      case "document":
        out.push(...document(c));
        break;
    }
  }
  return out;
}

function userParts(content: string | UserBlockIn[], toolNames: Map<string, string>): UserPart[] {
  if (typeof content === "string") return content === "" ? [] : [text(content)];
  const out: UserPart[] = [];
  for (const b of content) {
    switch (b.type) {
      case "text":
        if (b.text !== "") out.push(text(b.text, (b as TextBlockIn).cache_control));
        break;
      case "image": {
        const p = image(b);
        if (p) out.push(p);
        break;
      }
      case "document":
        out.push(...document(b));
        break;
      case "search_result":
        out.push(searchResult(b));
        break;
      case "tool_result": {
        const name = toolNames.get(b.tool_use_id);
        const part: ToolResultPart = {
          type: "tool_result",
          toolCallId: b.tool_use_id,
          ...(name ? { name } : {}),
          content: toolResultContent(b.content),
          ...(b.is_error ? { isError: true } : {}),
          ...cache(b.cache_control),
        };
        out.push(part);
        break;
      }
      default:
        // Server-tool blocks: Anthropic ran those; the text around them carries their outcome.
        break;
    }
  }
  return out;
}

function assistantParts(content: string | AssistantBlockIn[], toolNames: Map<string, string>): AssistantPart[] {
  if (typeof content === "string") return content === "" ? [] : [text(content)];
  const out: AssistantPart[] = [];
  for (const b of content) {
    switch (b.type) {
      case "text":
        if (b.text !== "") out.push(text(b.text, b.cache_control));
        break;
      case "tool_use":
        toolNames.set(b.id, b.name);
        // The input object becomes argument text once; it is never re-encoded after that.
        out.push({
          type: "tool_call",
          id: b.id,
          name: b.name,
          arguments: JSON.stringify(b.input),
          ...cache(b.cache_control),
        });
        break;
      case "thinking":
        out.push({ type: "thinking", text: b.thinking, signature: b.signature });
        break;
      case "redacted_thinking":
        out.push({ type: "thinking", text: "", redacted: b.data });
        break;
      default:
        break;
    }
  }
  return out;
}

function toolChoice(c: NonNullable<Input["tool_choice"]>): ToolChoice {
  switch (c.type) {
    case "auto":
      return { type: "auto" };
    case "any":
      return { type: "required" };
    case "none":
      return { type: "none" };
    case "tool":
      return { type: "tool", name: c.name };
  }
}

const EFFORTS: Record<string, ReasoningEffort> = {
  minimal: "minimal",
  low: "low",
  medium: "medium",
  high: "high",
  xhigh: "high",
  max: "high",
};

/** Whether a tool entry is a client tool (the model calls it, the client runs it). */
export function isClientTool(t: { type?: string }): boolean {
  return t.type === undefined || t.type === "custom";
}

/** The top-level `cache_control` (automatic caching): a breakpoint on the last cacheable block. */
function applyTopLevelCache(messages: Message[], c: CacheControl): void {
  for (let i = messages.length - 1; i >= 0; i--) {
    const content = messages[i]?.content as { type: string; cacheControl?: CacheControl }[];
    for (let j = content.length - 1; j >= 0; j--) {
      const p = content[j];
      if (!p || p.type === "thinking") continue;
      p.cacheControl ??= c;
      return;
    }
  }
}

export function decodeMessagesRequest(body: Input): CanonicalRequest {
  const toolNames = new Map<string, string>();
  const messages: Message[] = [];
  for (const m of body.messages) {
    const next: Message =
      m.role === "user"
        ? { role: "user", content: userParts(m.content, toolNames) }
        : { role: "assistant", content: assistantParts(m.content, toolNames) };
    if (next.content.length === 0) continue;
    const last = messages.at(-1);
    if (last && last.role === next.role) (last.content as unknown[]).push(...next.content);
    else messages.push(next);
  }

  let system: TextPart[] = [];
  if (typeof body.system === "string") system = body.system === "" ? [] : [text(body.system)];
  else if (body.system) system = body.system.filter((b) => b.text !== "").map((b) => text(b.text, b.cache_control));

  const req: CanonicalRequest = {
    model: body.model,
    system,
    messages,
    stream: "stream" in body && body.stream === true,
  };
  const top = cache(body.cache_control).cacheControl;
  if (top) applyTopLevelCache(messages, top);

  const tools: ToolDefinition[] = [];
  for (const t of body.tools ?? []) {
    if (!isClientTool(t)) continue;
    const c = t as Extract<typeof t, { input_schema: unknown }>;
    tools.push({
      name: c.name,
      ...(c.description !== undefined ? { description: c.description } : {}),
      parameters: c.input_schema as Record<string, unknown>,
      ...cache(c.cache_control),
    });
  }
  if (tools.length) req.tools = tools;
  if (body.tool_choice) {
    req.toolChoice = toolChoice(body.tool_choice);
    if ("disable_parallel_tool_use" in body.tool_choice && body.tool_choice.disable_parallel_tool_use === true)
      req.parallelToolCalls = false;
  }
  if (body.thinking?.type === "enabled") req.thinkingBudget = body.thinking.budget_tokens;
  const effort = body.output_config?.effort;
  if (typeof effort === "string" && EFFORTS[effort]) req.reasoningEffort = EFFORTS[effort];
  const format = body.output_config?.format;
  if (format) req.responseFormat = { type: "json_schema", name: "output", schema: format.schema };

  if ("max_tokens" in body && typeof body.max_tokens === "number") req.maxTokens = body.max_tokens;
  if ("temperature" in body && body.temperature !== undefined) req.temperature = body.temperature;
  if ("top_p" in body && body.top_p !== undefined) req.topP = body.top_p;
  if ("top_k" in body && body.top_k !== undefined) req.topK = body.top_k;
  if ("stop_sequences" in body && body.stop_sequences?.length) req.stop = body.stop_sequences;
  if ("metadata" in body && typeof body.metadata?.user_id === "string") req.user = body.metadata.user_id;
  return req;
}

/**
 * The first part of a request that only Anthropic's own API can serve (so it cannot be translated
 * for another upstream), described for a 400; undefined when everything translates.
 */
export function nativeOnlyFeature(body: Input): string | undefined {
  const imageSource = (b: ImageBlockIn, at: string) =>
    b.source.type === "file" ? `'${at}' (an image with a Files API source)` : undefined;
  const doc = (b: DocumentBlockIn, at: string): string | undefined => {
    const s = b.source;
    if (s.type === "base64" || s.type === "url" || s.type === "file")
      return `'${at}' (a document with a ${s.type} source)`;
    if (s.type === "content" && typeof s.content !== "string") {
      for (const [i, c] of s.content.entries()) {
        const f = c.type === "image" ? imageSource(c, `${at}.source.content[${i}]`) : undefined;
        if (f) return f;
      }
    }
    return undefined;
  };
  for (const [i, t] of (body.tools ?? []).entries()) {
    if (!isClientTool(t)) return `'tools[${i}]' (the server tool '${t.type}')`;
  }
  const mcp = (body as { mcp_servers?: unknown }).mcp_servers;
  if (Array.isArray(mcp) && mcp.length > 0) return "'mcp_servers' (MCP connectors)";
  for (const [i, m] of body.messages.entries()) {
    if (m.role !== "user" || typeof m.content === "string") continue;
    for (const [j, b] of m.content.entries()) {
      const at = `messages[${i}].content[${j}]`;
      let found: string | undefined;
      if (b.type === "image") found = imageSource(b, at);
      else if (b.type === "document") found = doc(b, at);
      else if (b.type === "tool_result" && Array.isArray(b.content)) {
        for (const [k, c] of b.content.entries()) {
          const cat = `${at}.content[${k}]`;
          found = c.type === "image" ? imageSource(c, cat) : c.type === "document" ? doc(c, cat) : undefined;
          if (found) break;
        }
      }
      if (found) return found;
    }
  }
  return undefined;
}
