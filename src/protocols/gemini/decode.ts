/**
 * generateContent request -> canonical request (PROTOCOLS.md 4.2 and 5).
 *
 * Everything the gateway refuses is refused by `checkGenerateContent`, when the request is parsed,
 * so that `decodeGenerateContent` never throws on a parsed request: the pipeline also decodes
 * requests that go to Gemini upstreams unchanged (for token estimates), and an estimate must not
 * fail. What has no canonical form but is valid Gemini is kept for Gemini upstreams and left out
 * (or turned into text) for the others: see the notes on each case.
 */
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
  ToolDefinition,
  UserPart,
} from "../canonical";
import type { GeminiContentIn, GeminiPartIn, GenerateContentRequestBody } from "./schema";

/** The fields of a part that hold its data; a part has exactly one. */
export const PART_KINDS = [
  "text",
  "inlineData",
  "fileData",
  "functionCall",
  "functionResponse",
  "executableCode",
  "codeExecutionResult",
] as const;
type PartKind = (typeof PART_KINDS)[number];

/** Fields that qualify a part's data rather than being data. */
const PART_MODIFIERS = new Set(["thought", "thoughtSignature", "videoMetadata", "partMetadata", "mediaResolution"]);

/** An id for a function call the client's history gave none (older Gemini models send none). */
export const mintCallId = (): string => `call_${crypto.randomUUID()}`;

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

function partKinds(p: GeminiPartIn): PartKind[] {
  return PART_KINDS.filter((k) => (p as Record<string, unknown>)[k] !== undefined);
}

/**
 * The checks beyond the schema: each part holds exactly one known kind of data, function calls
 * come from the model and function responses from the user, file URIs are web URLs (the gateway
 * has no Files API) and the system instruction is text. Throws a 400 naming the field.
 */
export function checkGenerateContent(body: GenerateContentRequestBody): void {
  body.contents.forEach((c, i) => {
    const role = c.role === "model" ? "model" : "user";
    c.parts.forEach((p, j) => {
      const at = `contents[${i}].parts[${j}]`;
      const kinds = checkPart(p, at);
      if (kinds === "functionCall" && role !== "model") {
        throw badRequest(`'${at}': a functionCall part belongs in a turn of role "model"`, at, "invalid_part");
      }
      if (kinds === "functionResponse" && role !== "user") {
        throw badRequest(`'${at}': a functionResponse part belongs in a turn of role "user"`, at, "invalid_part");
      }
    });
  });
  const si = body.systemInstruction;
  if (si !== undefined && typeof si !== "string") {
    si.parts.forEach((p, j) => {
      const at = `systemInstruction.parts[${j}]`;
      const kind = checkPart(p, at);
      if (kind !== "text" && kind !== undefined) {
        throw badRequest(`'${at}': the system instruction takes text parts only, got '${kind}'`, at, "invalid_part");
      }
    });
  }
}

function checkPart(p: GeminiPartIn, at: string): PartKind | undefined {
  const kinds = partKinds(p);
  if (kinds.length === 0) {
    const unknown = Object.keys(p).filter((k) => !PART_MODIFIERS.has(k));
    // A thought signature alone (newer models return such parts) carries no data: it is let through.
    if (unknown.length === 0 && p.thoughtSignature !== undefined) return undefined;
    if (unknown.length === 0) {
      throw badRequest(`'${at}' is empty: a part needs one of ${PART_KINDS.join(", ")}`, at, "invalid_part");
    }
    throw badRequest(
      `'${at}': parts of kind ${unknown.map((k) => `'${k}'`).join(", ")} are not supported by this gateway (supported: ${PART_KINDS.join(", ")})`,
      `${at}.${unknown[0]}`,
      "unsupported_content",
    );
  }
  if (kinds.length > 1) {
    throw badRequest(
      `'${at}' holds ${kinds.map((k) => `'${k}'`).join(" and ")}; a part holds exactly one kind of data`,
      at,
      "invalid_part",
    );
  }
  const kind = kinds[0] as PartKind;
  if (kind === "fileData") {
    const uri = p.fileData?.fileUri ?? "";
    if (!/^https?:\/\//i.test(uri)) {
      throw badRequest(
        `'${at}.fileData.fileUri' must be an http(s) URL; this gateway has no Files API and cannot read '${uri.split(":")[0]}:' URIs (send the bytes as inlineData)`,
        `${at}.fileData.fileUri`,
        "unsupported_content",
      );
    }
  }
  return kind;
}

// ---------------------------------------------------------------------------------------------
// Schemas

const INT_FIELDS = new Set(["minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"]);

/**
 * Gemini's OpenAPI-subset schema (upper-case types, `nullable`, `propertyOrdering`) -> JSON Schema
 * for the other upstreams. Keywords JSON Schema shares are kept; Gemini-only ones are dropped.
 */
export function jsonSchemaFromGemini(schema: unknown): Record<string, unknown> {
  if (!isObject(schema)) return {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    switch (k) {
      case "type": {
        const t = typeof v === "string" ? v.toLowerCase() : undefined;
        if (t && t !== "type_unspecified") out.type = t;
        break;
      }
      case "properties":
        if (isObject(v))
          out.properties = Object.fromEntries(Object.entries(v).map(([n, s]) => [n, jsonSchemaFromGemini(s)]));
        break;
      case "items":
        out.items = jsonSchemaFromGemini(v);
        break;
      case "anyOf":
        if (Array.isArray(v)) out.anyOf = v.map(jsonSchemaFromGemini);
        break;
      case "format":
        // `format: enum` marks a string enum in Gemini's dialect; JSON Schema has `enum` for it.
        if (v !== "enum") out.format = v;
        break;
      case "nullable":
      case "propertyOrdering":
      case "example":
        break;
      default:
        // int64 fields arrive as strings in proto JSON ("minItems": "1").
        out[k] = INT_FIELDS.has(k) && typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v;
    }
  }
  if (schema.nullable === true) {
    if (typeof out.type === "string") out.type = [out.type, "null"];
    else if (Array.isArray(out.anyOf)) out.anyOf = [...out.anyOf, { type: "null" }];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Contents

/** Code execution (a Gemini built-in tool) in history has no canonical part: it is kept as text. */
function codeText(p: GeminiPartIn): string | undefined {
  if (p.executableCode)
    return `\`\`\`${(p.executableCode.language ?? "").toLowerCase()}\n${p.executableCode.code}\n\`\`\``;
  if (p.codeExecutionResult) return p.codeExecutionResult.output ?? "";
  return undefined;
}

function imageOf(p: GeminiPartIn): ImagePart | undefined {
  // inlineData of any type goes on as an image part: Gemini upstreams take PDFs and audio as well,
  // and other upstreams refuse what they cannot read with their own 400.
  if (p.inlineData)
    return { type: "image", source: { kind: "base64", mediaType: p.inlineData.mimeType, data: p.inlineData.data } };
  if (p.fileData) return { type: "image", source: { kind: "url", url: p.fileData.fileUri } };
  return undefined;
}

/**
 * Function calls keep their ids; calls without one get a minted `call_<uuid>`, and a response
 * without an id is matched to the earliest unanswered call of the same name (Gemini's rule).
 */
class CallIds {
  private readonly pending = new Map<string, string[]>();

  call(name: string, id: string | undefined): string {
    const callId = id || mintCallId();
    const q = this.pending.get(name) ?? [];
    q.push(callId);
    this.pending.set(name, q);
    return callId;
  }

  response(name: string, id: string | undefined): string {
    const q = this.pending.get(name) ?? [];
    if (id) {
      const at = q.indexOf(id);
      if (at >= 0) q.splice(at, 1);
      return id;
    }
    return q.shift() ?? mintCallId();
  }
}

function modelParts(c: GeminiContentIn, ids: CallIds): AssistantPart[] {
  const out: AssistantPart[] = [];
  for (const p of c.parts) {
    if (p.functionCall) {
      const fc = p.functionCall;
      out.push({
        type: "tool_call",
        id: ids.call(fc.name, fc.id),
        name: fc.name,
        arguments: JSON.stringify(fc.args ?? {}),
      });
      continue;
    }
    // The model's thoughts are not replayed: their signatures belong to the model that wrote them.
    if (p.thought) continue;
    const text = p.text ?? codeText(p);
    if (text) out.push({ type: "text", text });
    // Images the model produced have no place in a canonical assistant turn.
  }
  return out;
}

function userParts(c: GeminiContentIn, ids: CallIds): UserPart[] {
  const out: UserPart[] = [];
  for (const p of c.parts) {
    if (p.functionResponse) {
      const fr = p.functionResponse;
      out.push({
        type: "tool_result",
        toolCallId: ids.response(fr.name, fr.id),
        name: fr.name,
        content: [{ type: "text", text: JSON.stringify(fr.response) }],
      });
      continue;
    }
    const image = imageOf(p);
    if (image) {
      out.push(image);
      continue;
    }
    const text = p.text ?? codeText(p);
    if (text) out.push({ type: "text", text });
  }
  return out;
}

function systemOf(si: GenerateContentRequestBody["systemInstruction"]): TextPart[] {
  if (si === undefined) return [];
  if (typeof si === "string") return si === "" ? [] : [{ type: "text", text: si }];
  return si.parts.flatMap((p) => (p.text ? [{ type: "text" as const, text: p.text }] : []));
}

// ---------------------------------------------------------------------------------------------
// Configuration

function toolsOf(body: GenerateContentRequestBody): ToolDefinition[] {
  const out: ToolDefinition[] = [];
  // Built-in tools (googleSearch, codeExecution, urlContext, ...) reach Gemini upstreams unchanged;
  // the other upstreams have no equivalent and do without them.
  for (const tool of body.tools ?? []) {
    for (const f of tool.functionDeclarations ?? []) {
      let parameters: Record<string, unknown> = f.parametersJsonSchema ?? jsonSchemaFromGemini(f.parameters);
      if (Object.keys(parameters).length === 0) parameters = { type: "object", properties: {} };
      out.push({ name: f.name, ...(f.description !== undefined ? { description: f.description } : {}), parameters });
    }
  }
  return out;
}

function toolChoiceOf(body: GenerateContentRequestBody): ToolChoice | undefined {
  const cfg = body.toolConfig?.functionCallingConfig;
  switch (cfg?.mode) {
    case "ANY": {
      const names = cfg.allowedFunctionNames ?? [];
      // One allowed name is a forced call of that function; several are "some function" (the
      // canonical form cannot restrict the choice to a subset).
      return names.length === 1 ? { type: "tool", name: names[0] as string } : { type: "required" };
    }
    case "NONE":
      return { type: "none" };
    case "AUTO":
    case "VALIDATED":
      return { type: "auto" };
    default:
      return undefined;
  }
}

const JSON_MIME = "application/json";

function responseFormatOf(g: NonNullable<GenerateContentRequestBody["generationConfig"]>): ResponseFormat | undefined {
  const mime = g.responseMimeType?.toLowerCase();
  // Other mime types (text/plain, text/x.enum) have no canonical form: the answer is plain text.
  if (mime !== undefined && mime !== JSON_MIME) return undefined;
  const schema = g.responseJsonSchema ?? (g.responseSchema ? jsonSchemaFromGemini(g.responseSchema) : undefined);
  if (schema) return { type: "json_schema", name: "response", schema };
  return mime === JSON_MIME ? { type: "json_object" } : undefined;
}

const EFFORTS: Record<string, ReasoningEffort> = { MINIMAL: "minimal", LOW: "low", MEDIUM: "medium", HIGH: "high" };

export function decodeGenerateContent(
  body: GenerateContentRequestBody,
  model: string,
  stream: boolean,
): CanonicalRequest {
  const ids = new CallIds();
  const messages: Message[] = [];
  for (const c of body.contents) {
    const m: Message =
      c.role === "model"
        ? { role: "assistant", content: modelParts(c, ids) }
        : { role: "user", content: userParts(c, ids) };
    if (m.content.length === 0) continue;
    const last = messages.at(-1);
    if (last && last.role === m.role) (last.content as unknown[]).push(...m.content);
    else messages.push(m);
  }

  const req: CanonicalRequest = { model, system: systemOf(body.systemInstruction), messages, stream };
  const tools = toolsOf(body);
  if (tools.length) req.tools = tools;
  const choice = toolChoiceOf(body);
  if (choice) req.toolChoice = choice;

  const g = body.generationConfig;
  if (g) {
    if (g.maxOutputTokens !== undefined) req.maxTokens = g.maxOutputTokens;
    if (g.temperature !== undefined) req.temperature = g.temperature;
    if (g.topP !== undefined) req.topP = g.topP;
    if (g.topK !== undefined) req.topK = g.topK;
    if (g.stopSequences?.length) req.stop = g.stopSequences;
    if (g.candidateCount !== undefined) req.n = g.candidateCount;
    if (g.seed !== undefined) req.seed = g.seed;
    if (g.presencePenalty !== undefined) req.presencePenalty = g.presencePenalty;
    if (g.frequencyPenalty !== undefined) req.frequencyPenalty = g.frequencyPenalty;
    const format = responseFormatOf(g);
    if (format) req.responseFormat = format;
    const thinking = g.thinkingConfig;
    // 0 (thinking off) and -1 (the model decides) are every other upstream's default.
    if (thinking?.thinkingBudget !== undefined && thinking.thinkingBudget > 0)
      req.thinkingBudget = thinking.thinkingBudget;
    const effort = thinking?.thinkingLevel ? EFFORTS[thinking.thinkingLevel] : undefined;
    if (effort) req.reasoningEffort = effort;
  }
  return req;
}
