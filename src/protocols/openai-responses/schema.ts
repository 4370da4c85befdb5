/**
 * The OpenAI Responses API as the gateway validates it and documents it: the request
 * (`ResponsesRequest`), the response object (`ResponseObject`) and the stream events
 * (`ResponseStreamEvent`). Known fields are checked precisely; unknown fields are allowed everywhere,
 * since OpenAI adds fields often and models served natively (mode: responses) receive the body as-is.
 * Item and tool types the gateway does not translate (built-in tools, their call items) are accepted
 * here and refused later, only for models that are not forwarded natively.
 */
import { type Static, Type as T, type TLiteral, type TSchema, type TUnion } from "@sinclair/typebox";

const open = { additionalProperties: true } as const;
const OptionalNullable = <S extends TSchema>(s: S) => T.Optional(T.Union([s, T.Null()]));
type LiteralsOf<L extends readonly string[]> = { -readonly [K in keyof L]: TLiteral<L[K]> };
function Literals<const L extends readonly string[]>(...values: L): TUnion<LiteralsOf<L>> {
  return T.Union(values.map((v) => T.Literal(v))) as never;
}
/** A string that is none of the given words (the "anything else" branch of a tagged union). */
const OtherThan = (words: readonly string[]) =>
  T.String({ minLength: 1, pattern: `^(?!(?:${words.map((w) => w.replace(/\./g, "\\.")).join("|")})$)` });

export const ImageDetail = Literals("auto", "low", "high", "original");

// ---- content parts ---------------------------------------------------------------------------

export const InputTextPart = T.Object({ type: T.Literal("input_text"), text: T.String() }, open);
export const InputImagePart = T.Object(
  {
    type: T.Literal("input_image"),
    /** A `data:` URL or an https URL. */
    image_url: OptionalNullable(T.String({ minLength: 1 })),
    /** Uploaded files are not available through the gateway (400 for translated models). */
    file_id: OptionalNullable(T.String()),
    detail: T.Optional(ImageDetail),
  },
  open,
);
export const InputFilePart = T.Object({ type: T.Literal("input_file") }, open);
export const OutputTextPart = T.Object(
  { type: T.Literal("output_text"), text: T.String(), annotations: T.Optional(T.Array(T.Unknown())) },
  open,
);
export const RefusalPart = T.Object({ type: T.Literal("refusal"), refusal: T.String() }, open);
export const ReasoningTextPart = T.Object({ type: T.Literal("reasoning_text"), text: T.String() }, open);
export const SummaryTextPart = T.Object({ type: T.Literal("summary_text"), text: T.String() }, open);

const MessageContent = T.Union([
  T.String(),
  T.Array(T.Union([InputTextPart, InputImagePart, InputFilePart, OutputTextPart, RefusalPart])),
]);

// ---- input items -----------------------------------------------------------------------------

export const MessageRole = Literals("user", "assistant", "system", "developer");

/** `{role, content}`, or the same with `type: "message"`. */
export const MessageItem = T.Object(
  {
    type: T.Optional(T.Literal("message")),
    role: MessageRole,
    content: MessageContent,
    id: T.Optional(T.String()),
    status: T.Optional(T.String()),
  },
  open,
);
export const FunctionCallItem = T.Object(
  {
    type: T.Literal("function_call"),
    call_id: T.String({ minLength: 1 }),
    name: T.String({ minLength: 1 }),
    arguments: T.String(),
    id: T.Optional(T.String()),
    status: T.Optional(T.String()),
  },
  open,
);
export const FunctionCallOutputItem = T.Object(
  {
    type: T.Literal("function_call_output"),
    call_id: T.String({ minLength: 1 }),
    output: T.Union([T.String(), T.Array(T.Union([InputTextPart, InputImagePart, InputFilePart]))]),
    id: OptionalNullable(T.String()),
    status: OptionalNullable(T.String()),
  },
  open,
);
/**
 * Reasoning from an earlier turn. Only the gateway's own items (reasoning text plus, for Anthropic
 * models, the signature in `encrypted_content`) can be replayed to a translated model; others are dropped.
 */
export const ReasoningItem = T.Object(
  {
    type: T.Literal("reasoning"),
    id: T.Optional(T.String()),
    summary: T.Optional(T.Array(SummaryTextPart)),
    content: OptionalNullable(T.Array(ReasoningTextPart)),
    encrypted_content: OptionalNullable(T.String()),
  },
  open,
);
export const ItemReference = T.Object({ type: T.Literal("item_reference"), id: T.String({ minLength: 1 }) }, open);

export const KNOWN_INPUT_ITEM_TYPES = [
  "message",
  "function_call",
  "function_call_output",
  "reasoning",
  "item_reference",
] as const;
/** Built-in tool calls and outputs (web_search_call, computer_call_output, mcp_call, ...). */
export const OtherInputItem = T.Object({ type: OtherThan(KNOWN_INPUT_ITEM_TYPES) }, open);

export const InputItem = T.Union([
  MessageItem,
  FunctionCallItem,
  FunctionCallOutputItem,
  ReasoningItem,
  ItemReference,
  OtherInputItem,
]);
export type InputItem = Static<typeof InputItem>;
export type MessageItem = Static<typeof MessageItem>;

// ---- tools and options -----------------------------------------------------------------------

/** Responses tools are flat: no nested `function` object as in chat completions. */
export const FunctionTool = T.Object(
  {
    type: T.Literal("function"),
    name: T.String({ minLength: 1, maxLength: 128 }),
    description: OptionalNullable(T.String()),
    parameters: OptionalNullable(T.Record(T.String(), T.Unknown())),
    strict: OptionalNullable(T.Boolean()),
  },
  open,
);
/** web_search, file_search, code_interpreter, mcp, ...: forwarded to mode: responses models only. */
export const BuiltinTool = T.Object({ type: OtherThan(["function"]) }, open);
export const Tool = T.Union([FunctionTool, BuiltinTool]);
export type FunctionTool = Static<typeof FunctionTool>;

export const ToolChoice = T.Union(
  [
    Literals("none", "auto", "required"),
    T.Object({ type: T.Literal("function"), name: T.String({ minLength: 1 }) }, open),
    T.Object({ type: OtherThan(["function"]) }, open),
  ],
  { errorMessage: '"none", "auto", "required" or {"type": "function", "name": ...}' },
);

export const TextFormat = T.Union([
  T.Object({ type: T.Literal("text") }, open),
  T.Object({ type: T.Literal("json_object") }, open),
  T.Object(
    {
      type: T.Literal("json_schema"),
      name: T.String({ minLength: 1, maxLength: 64 }),
      schema: T.Record(T.String(), T.Unknown()),
      strict: OptionalNullable(T.Boolean()),
      description: T.Optional(T.String()),
    },
    open,
  ),
]);
export const TextConfig = T.Object(
  { format: T.Optional(TextFormat), verbosity: OptionalNullable(Literals("low", "medium", "high")) },
  open,
);

export const ReasoningEffortIn = Literals("none", "minimal", "low", "medium", "high", "xhigh");
export const ReasoningConfig = T.Object(
  {
    effort: OptionalNullable(ReasoningEffortIn),
    summary: OptionalNullable(Literals("auto", "concise", "detailed")),
  },
  open,
);

export const Metadata = T.Record(T.String({ maxLength: 64 }), T.String({ maxLength: 512 }));

export const ResponsesRequest = T.Object(
  {
    model: T.String({ minLength: 1 }),
    input: T.Optional(
      T.Union([T.String(), T.Array(InputItem)], { errorMessage: "a string or an array of input items" }),
    ),
    /** System text ahead of the input; not carried over by previous_response_id. */
    instructions: OptionalNullable(T.String()),
    tools: T.Optional(T.Array(Tool)),
    tool_choice: T.Optional(ToolChoice),
    parallel_tool_calls: OptionalNullable(T.Boolean()),
    text: OptionalNullable(TextConfig),
    max_output_tokens: OptionalNullable(T.Integer({ minimum: 1 })),
    temperature: OptionalNullable(T.Number({ minimum: 0, maximum: 2 })),
    top_p: OptionalNullable(T.Number({ minimum: 0, maximum: 1 })),
    reasoning: OptionalNullable(ReasoningConfig),
    user: T.Optional(T.String()),
    metadata: OptionalNullable(Metadata),
    /** Default true: the response is kept for previous_response_id and GET /v1/responses/{id}. */
    store: OptionalNullable(T.Boolean()),
    stream: OptionalNullable(T.Boolean()),
    previous_response_id: OptionalNullable(T.String({ minLength: 1 })),
    include: OptionalNullable(T.Array(T.String())),
    truncation: OptionalNullable(Literals("auto", "disabled")),
    background: OptionalNullable(T.Boolean()),
  },
  open,
);
export type ResponsesRequest = Static<typeof ResponsesRequest>;

// ---- the response object ---------------------------------------------------------------------

export const ResponseUsage = T.Object(
  {
    input_tokens: T.Integer({ minimum: 0 }),
    input_tokens_details: T.Object(
      { cached_tokens: T.Integer({ minimum: 0 }), cache_write_tokens: T.Optional(T.Integer({ minimum: 0 })) },
      open,
    ),
    output_tokens: T.Integer({ minimum: 0 }),
    output_tokens_details: T.Object({ reasoning_tokens: T.Integer({ minimum: 0 }) }, open),
    total_tokens: T.Integer({ minimum: 0 }),
  },
  open,
);

const ItemStatus = Literals("in_progress", "completed", "incomplete");
export const OutputTextPartOut = T.Object(
  { type: T.Literal("output_text"), text: T.String(), annotations: T.Array(T.Unknown()) },
  open,
);
export const OutputMessage = T.Object(
  {
    type: T.Literal("message"),
    id: T.String({ minLength: 1 }),
    status: ItemStatus,
    role: T.Literal("assistant"),
    content: T.Array(T.Union([OutputTextPartOut, RefusalPart])),
  },
  open,
);
export const OutputFunctionCall = T.Object(
  {
    type: T.Literal("function_call"),
    id: T.String({ minLength: 1 }),
    call_id: T.String({ minLength: 1 }),
    name: T.String({ minLength: 1 }),
    arguments: T.String(),
    status: ItemStatus,
  },
  open,
);
export const OutputReasoning = T.Object(
  {
    type: T.Literal("reasoning"),
    id: T.String({ minLength: 1 }),
    summary: T.Array(SummaryTextPart),
    content: T.Optional(T.Array(ReasoningTextPart)),
    /** For Anthropic-family models: the thinking signature, needed to replay this item. */
    encrypted_content: OptionalNullable(T.String()),
    status: T.Optional(ItemStatus),
  },
  open,
);
/** Items of natively served models the gateway does not produce itself (web_search_call, ...). */
export const OtherOutputItem = T.Object({ type: OtherThan(["message", "function_call", "reasoning"]) }, open);
export const OutputItem = T.Union([OutputMessage, OutputFunctionCall, OutputReasoning, OtherOutputItem]);

export const ResponseStatus = Literals("completed", "failed", "in_progress", "cancelled", "queued", "incomplete");

export const ResponseObject = T.Object(
  {
    id: T.String({ pattern: "^resp_" }),
    object: T.Literal("response"),
    created_at: T.Number(),
    status: ResponseStatus,
    error: T.Union([T.Object({ code: T.String(), message: T.String() }, open), T.Null()]),
    incomplete_details: T.Union([
      T.Object({ reason: Literals("max_output_tokens", "content_filter") }, open),
      T.Null(),
    ]),
    instructions: T.Union([T.String(), T.Array(T.Unknown()), T.Null()]),
    model: T.String(),
    output: T.Array(OutputItem),
    /** Convenience: every output_text part of the output, concatenated. */
    output_text: T.Optional(T.String()),
    usage: T.Union([ResponseUsage, T.Null()]),
    previous_response_id: T.Union([T.String(), T.Null()]),
    parallel_tool_calls: T.Boolean(),
    temperature: T.Union([T.Number(), T.Null()]),
    top_p: T.Union([T.Number(), T.Null()]),
    tool_choice: ToolChoice,
    tools: T.Array(Tool),
    text: T.Optional(TextConfig),
    max_output_tokens: T.Optional(T.Union([T.Integer(), T.Null()])),
    reasoning: T.Optional(T.Union([ReasoningConfig, T.Null()])),
    metadata: T.Union([Metadata, T.Null()]),
    store: T.Optional(T.Boolean()),
    user: T.Optional(T.Union([T.String(), T.Null()])),
    truncation: T.Optional(T.Union([Literals("auto", "disabled"), T.Null()])),
    background: T.Optional(T.Union([T.Boolean(), T.Null()])),
  },
  open,
);

/** DELETE /v1/responses/{id}. */
export const ResponseDeleted = T.Object(
  { id: T.String({ pattern: "^resp_" }), object: T.Literal("response"), deleted: T.Literal(true) },
  open,
);
export type ResponseDeleted = Static<typeof ResponseDeleted>;

// ---- stream events ---------------------------------------------------------------------------

const Seq = T.Integer({ minimum: 0 });
const ev = <P extends Record<string, TSchema>>(type: string, props: P) =>
  T.Object({ type: T.Literal(type), sequence_number: Seq, ...props }, open);
const itemRef = { item_id: T.String({ minLength: 1 }), output_index: T.Integer({ minimum: 0 }) };
const partRef = { ...itemRef, content_index: T.Integer({ minimum: 0 }) };
const lifecycle = (type: string) => ev(type, { response: ResponseObject });

const KNOWN_EVENTS = [
  "response.created",
  "response.in_progress",
  "response.queued",
  "response.completed",
  "response.incomplete",
  "response.failed",
  "response.output_item.added",
  "response.output_item.done",
  "response.content_part.added",
  "response.content_part.done",
  "response.output_text.delta",
  "response.output_text.done",
  "response.function_call_arguments.delta",
  "response.function_call_arguments.done",
  "response.reasoning_text.delta",
  "response.reasoning_text.done",
  "error",
] as const;

const ContentPartOut = T.Union([OutputTextPartOut, RefusalPart, ReasoningTextPart]);

export const ResponseStreamEvent = T.Union([
  lifecycle("response.created"),
  lifecycle("response.in_progress"),
  lifecycle("response.queued"),
  lifecycle("response.completed"),
  lifecycle("response.incomplete"),
  lifecycle("response.failed"),
  ev("response.output_item.added", { output_index: T.Integer({ minimum: 0 }), item: OutputItem }),
  ev("response.output_item.done", { output_index: T.Integer({ minimum: 0 }), item: OutputItem }),
  ev("response.content_part.added", { ...partRef, part: ContentPartOut }),
  ev("response.content_part.done", { ...partRef, part: ContentPartOut }),
  ev("response.output_text.delta", { ...partRef, delta: T.String(), logprobs: T.Optional(T.Array(T.Unknown())) }),
  ev("response.output_text.done", { ...partRef, text: T.String(), logprobs: T.Optional(T.Array(T.Unknown())) }),
  ev("response.function_call_arguments.delta", { ...itemRef, delta: T.String() }),
  ev("response.function_call_arguments.done", { ...itemRef, name: T.Optional(T.String()), arguments: T.String() }),
  ev("response.reasoning_text.delta", { ...partRef, delta: T.String() }),
  ev("response.reasoning_text.done", { ...partRef, text: T.String() }),
  ev("error", {
    code: T.Union([T.String(), T.Null()]),
    message: T.String(),
    param: T.Union([T.String(), T.Null()]),
  }),
  /** Every other event of natively served models (web_search_call progress, summaries, refusals, ...). */
  T.Object({ type: OtherThan(KNOWN_EVENTS), sequence_number: Seq }, open),
]);
