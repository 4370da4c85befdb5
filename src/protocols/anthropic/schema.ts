/**
 * The Anthropic Messages protocol as the gateway validates it (POST /v1/messages and
 * /v1/messages/count_tokens) and documents it in /openapi.json: the request, the response, the
 * stream events and the error body. Known fields are checked precisely; objects stay open
 * (additionalProperties) because Anthropic adds fields often and Anthropic-type upstreams receive
 * the client's body unchanged.
 */
import { type Static, Type as T, type TSchema } from "@sinclair/typebox";

const open = { additionalProperties: true } as const;
const Nullable = <S extends TSchema>(s: S) => T.Union([s, T.Null()]);
const OptionalNullable = <S extends TSchema>(s: S) => T.Optional(Nullable(s));

export const CacheControl = T.Object(
  { type: T.Literal("ephemeral"), ttl: T.Optional(T.Union([T.Literal("5m"), T.Literal("1h")])) },
  open,
);
const Cache = OptionalNullable(CacheControl);

// ---------------------------------------------------------------------------------------------
// Content blocks
// ---------------------------------------------------------------------------------------------

export const TextBlock = T.Object(
  {
    type: T.Literal("text"),
    text: T.String(),
    cache_control: Cache,
    citations: OptionalNullable(T.Array(T.Unknown())),
  },
  open,
);

export const ImageBlock = T.Object(
  {
    type: T.Literal("image"),
    source: T.Union([
      T.Object(
        { type: T.Literal("base64"), media_type: T.String({ minLength: 1 }), data: T.String({ minLength: 1 }) },
        open,
      ),
      T.Object({ type: T.Literal("url"), url: T.String({ minLength: 1 }) }, open),
      T.Object({ type: T.Literal("file"), file_id: T.String({ minLength: 1 }) }, open),
    ]),
    cache_control: Cache,
  },
  open,
);

const DocumentContent = T.Union([T.String(), T.Array(T.Union([TextBlock, ImageBlock]))], {
  errorMessage: "a string or an array of text and image blocks",
});

export const DocumentBlock = T.Object(
  {
    type: T.Literal("document"),
    source: T.Union([
      T.Object({ type: T.Literal("text"), data: T.String(), media_type: T.Optional(T.String()) }, open),
      T.Object({ type: T.Literal("content"), content: DocumentContent }, open),
      T.Object(
        { type: T.Literal("base64"), media_type: T.String({ minLength: 1 }), data: T.String({ minLength: 1 }) },
        open,
      ),
      T.Object({ type: T.Literal("url"), url: T.String({ minLength: 1 }) }, open),
      T.Object({ type: T.Literal("file"), file_id: T.String({ minLength: 1 }) }, open),
    ]),
    title: OptionalNullable(T.String()),
    context: OptionalNullable(T.String()),
    cache_control: Cache,
  },
  open,
);

export const SearchResultBlock = T.Object(
  {
    type: T.Literal("search_result"),
    source: T.String(),
    title: T.String(),
    content: T.Array(TextBlock),
    cache_control: Cache,
  },
  open,
);

export const ToolUseBlock = T.Object(
  {
    type: T.Literal("tool_use"),
    id: T.String({ minLength: 1 }),
    name: T.String({ minLength: 1 }),
    input: T.Record(T.String(), T.Unknown(), { errorMessage: "a JSON object" }),
    cache_control: Cache,
  },
  open,
);

export const ToolResultBlock = T.Object(
  {
    type: T.Literal("tool_result"),
    tool_use_id: T.String({ minLength: 1 }),
    content: T.Optional(
      T.Union([T.String(), T.Array(T.Union([TextBlock, ImageBlock, SearchResultBlock, DocumentBlock]))], {
        errorMessage: "a string or an array of content blocks",
      }),
    ),
    is_error: T.Optional(T.Boolean()),
    cache_control: Cache,
  },
  open,
);

export const ThinkingBlock = T.Object(
  { type: T.Literal("thinking"), thinking: T.String(), signature: T.String() },
  open,
);

export const RedactedThinkingBlock = T.Object({ type: T.Literal("redacted_thinking"), data: T.String() }, open);

/**
 * Blocks of Anthropic's server tools (web search, code execution, ...) echoed back in a
 * conversation's history. Forwarded as they are to Anthropic; dropped when translating, since the
 * model's text after them already carries their outcome.
 */
export const SERVER_BLOCK_TYPES = [
  "server_tool_use",
  "web_search_tool_result",
  "web_fetch_tool_result",
  "code_execution_tool_result",
  "bash_code_execution_tool_result",
  "text_editor_code_execution_tool_result",
  "tool_search_tool_result",
  "mcp_tool_use",
  "mcp_tool_result",
  "container_upload",
] as const;

export const ServerBlock = T.Object({ type: T.Union(SERVER_BLOCK_TYPES.map((t) => T.Literal(t))) }, open);

export const UserBlock = T.Union([
  TextBlock,
  ImageBlock,
  DocumentBlock,
  SearchResultBlock,
  ToolResultBlock,
  ServerBlock,
]);
export const AssistantBlock = T.Union([TextBlock, ToolUseBlock, ThinkingBlock, RedactedThinkingBlock, ServerBlock]);

const content = { errorMessage: "a string or an array of content blocks" };
export const MessageParam = T.Union(
  [
    T.Object({ role: T.Literal("user"), content: T.Union([T.String(), T.Array(UserBlock)], content) }, open),
    T.Object({ role: T.Literal("assistant"), content: T.Union([T.String(), T.Array(AssistantBlock)], content) }, open),
  ],
  { errorMessage: "a message {role, content}" },
);

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

/** A client tool: the model calls it and the client runs it. */
export const ClientTool = T.Object(
  {
    type: T.Optional(T.Literal("custom")),
    name: T.String({ minLength: 1, maxLength: 128 }),
    description: T.Optional(T.String()),
    input_schema: T.Object({ type: T.Literal("object") }, open),
    cache_control: Cache,
  },
  open,
);

/** An Anthropic server tool (`web_search_20250305`, `bash_20250124`, ...): only Anthropic runs these. */
export const ServerTool = T.Object(
  { type: T.String({ minLength: 1 }), name: T.String({ minLength: 1 }), cache_control: Cache },
  open,
);

export const ToolParam = T.Union([ClientTool, ServerTool], {
  errorMessage: "a tool: {name, input_schema} for client tools, {type, name} for Anthropic server tools",
});

const DisableParallel = T.Optional(T.Boolean());
export const ToolChoice = T.Union([
  T.Object({ type: T.Literal("auto"), disable_parallel_tool_use: DisableParallel }, open),
  T.Object({ type: T.Literal("any"), disable_parallel_tool_use: DisableParallel }, open),
  T.Object(
    { type: T.Literal("tool"), name: T.String({ minLength: 1 }), disable_parallel_tool_use: DisableParallel },
    open,
  ),
  T.Object({ type: T.Literal("none") }, open),
]);

export const ThinkingConfig = T.Union([
  T.Object({ type: T.Literal("enabled"), budget_tokens: T.Integer({ minimum: 1024 }) }, open),
  T.Object({ type: T.Literal("disabled") }, open),
  // The model decides how much to think: nothing to translate.
  T.Object({ type: T.Union([T.Literal("adaptive"), T.Literal("between_tools")]) }, open),
]);

const OutputConfig = T.Object(
  {
    effort: OptionalNullable(T.String()),
    format: OptionalNullable(
      T.Object({ type: T.Literal("json_schema"), schema: T.Record(T.String(), T.Unknown()) }, open),
    ),
  },
  open,
);

export const SystemParam = T.Union([T.String(), T.Array(TextBlock)], {
  errorMessage: "a string or an array of text blocks",
});

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

export const MessagesRequest = T.Object(
  {
    /** The catalog's public name, e.g. `openai/gpt-4o-mini` or `anthropic/claude-sonnet-4-5`. */
    model: T.String({ minLength: 1 }),
    /** Required, as on Anthropic's API. */
    max_tokens: T.Integer({ minimum: 0 }),
    messages: T.Array(MessageParam, { minItems: 1 }),
    system: T.Optional(SystemParam),
    tools: T.Optional(T.Array(ToolParam)),
    tool_choice: T.Optional(ToolChoice),
    stream: T.Optional(T.Boolean()),
    temperature: T.Optional(T.Number({ minimum: 0, maximum: 1 })),
    top_p: T.Optional(T.Number({ minimum: 0, maximum: 1 })),
    top_k: T.Optional(T.Integer({ minimum: 0 })),
    stop_sequences: T.Optional(T.Array(T.String())),
    thinking: T.Optional(ThinkingConfig),
    metadata: T.Optional(T.Object({ user_id: OptionalNullable(T.String()) }, open)),
    service_tier: T.Optional(T.String()),
    /** Automatic prompt caching: a breakpoint on the last cacheable block. */
    cache_control: Cache,
    output_config: T.Optional(OutputConfig),
  },
  open,
);
export type MessagesRequest = Static<typeof MessagesRequest>;

export const CountTokensRequest = T.Object(
  {
    model: T.String({ minLength: 1 }),
    messages: T.Array(MessageParam, { minItems: 1 }),
    system: T.Optional(SystemParam),
    tools: T.Optional(T.Array(ToolParam)),
    tool_choice: T.Optional(ToolChoice),
    thinking: T.Optional(ThinkingConfig),
    cache_control: Cache,
    output_config: T.Optional(OutputConfig),
  },
  open,
);
export type CountTokensRequest = Static<typeof CountTokensRequest>;

export const CountTokensResponse = T.Object({ input_tokens: T.Integer({ minimum: 0 }) });
export type CountTokensResponse = Static<typeof CountTokensResponse>;

// ---------------------------------------------------------------------------------------------
// Response, stream events, errors (documentation; the gateway writes these, it does not parse them)
// ---------------------------------------------------------------------------------------------

const StopReason = Nullable(
  T.Union(
    [
      "end_turn",
      "max_tokens",
      "stop_sequence",
      "tool_use",
      "pause_turn",
      "refusal",
      "model_context_window_exceeded",
    ].map((r) => T.Literal(r)),
  ),
);

export const Usage = T.Object(
  {
    /** Uncached input only: the whole prompt is input + cache_creation + cache_read. */
    input_tokens: T.Integer(),
    cache_creation_input_tokens: OptionalNullable(T.Integer()),
    cache_read_input_tokens: OptionalNullable(T.Integer()),
    output_tokens: T.Integer(),
  },
  open,
);

export const ResponseBlock = T.Union([
  T.Object({ type: T.Literal("text"), text: T.String() }, open),
  T.Object(
    { type: T.Literal("tool_use"), id: T.String(), name: T.String(), input: T.Record(T.String(), T.Unknown()) },
    open,
  ),
  T.Object({ type: T.Literal("thinking"), thinking: T.String(), signature: T.String() }, open),
  T.Object({ type: T.Literal("redacted_thinking"), data: T.String() }, open),
  ServerBlock,
]);

export const MessagesResponse = T.Object(
  {
    id: T.String(),
    type: T.Literal("message"),
    role: T.Literal("assistant"),
    model: T.String(),
    content: T.Array(ResponseBlock),
    stop_reason: StopReason,
    stop_sequence: Nullable(T.String()),
    usage: Usage,
  },
  open,
);
export type MessagesResponse = Static<typeof MessagesResponse>;

export const ErrorBody = T.Object(
  {
    type: T.Literal("error"),
    error: T.Object({ type: T.String(), message: T.String() }, open),
    request_id: T.Optional(T.String()),
  },
  open,
);

const ContentDelta = T.Union([
  T.Object({ type: T.Literal("text_delta"), text: T.String() }, open),
  T.Object({ type: T.Literal("input_json_delta"), partial_json: T.String() }, open),
  T.Object({ type: T.Literal("thinking_delta"), thinking: T.String() }, open),
  T.Object({ type: T.Literal("signature_delta"), signature: T.String() }, open),
  T.Object({ type: T.Literal("citations_delta"), citation: T.Unknown() }, open),
]);

/** The SSE events of a streamed answer; each frame's `event:` name equals its data's `type`. */
export const MessagesStreamEvent = T.Union([
  T.Object(
    {
      type: T.Literal("message_start"),
      message: T.Composite([
        T.Omit(MessagesResponse, ["stop_reason", "stop_sequence"]),
        T.Object({ stop_reason: T.Null(), stop_sequence: T.Null() }),
      ]),
    },
    open,
  ),
  T.Object({ type: T.Literal("content_block_start"), index: T.Integer(), content_block: ResponseBlock }, open),
  T.Object({ type: T.Literal("content_block_delta"), index: T.Integer(), delta: ContentDelta }, open),
  T.Object({ type: T.Literal("content_block_stop"), index: T.Integer() }, open),
  T.Object(
    {
      type: T.Literal("message_delta"),
      delta: T.Object({ stop_reason: StopReason, stop_sequence: Nullable(T.String()) }, open),
      usage: T.Object(
        {
          output_tokens: T.Integer(),
          input_tokens: OptionalNullable(T.Integer()),
          cache_creation_input_tokens: OptionalNullable(T.Integer()),
          cache_read_input_tokens: OptionalNullable(T.Integer()),
        },
        open,
      ),
    },
    open,
  ),
  T.Object({ type: T.Literal("message_stop") }, open),
  T.Object({ type: T.Literal("ping") }, open),
  ErrorBody,
]);
export type MessagesStreamEvent = Static<typeof MessagesStreamEvent>;
