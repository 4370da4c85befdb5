/**
 * The chat-completions request as the gateway validates it (and documents it in /openapi.json).
 * Known fields are checked precisely; unknown top-level fields are allowed, since OpenAI adds
 * fields often and OpenAI-type upstreams receive them unchanged.
 */
import { type Static, Type as T, type TSchema } from "@sinclair/typebox";

const Text = T.String();
const Detail = T.Union([T.Literal("auto"), T.Literal("low"), T.Literal("high")]);

export const ChatTextPart = T.Object({ type: T.Literal("text"), text: Text }, { additionalProperties: true });
export const ChatImagePart = T.Object(
  {
    type: T.Literal("image_url"),
    image_url: T.Object(
      { url: T.String({ minLength: 1 }), detail: T.Optional(Detail) },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true },
);
const ChatAudioPart = T.Object(
  { type: T.Literal("input_audio"), input_audio: T.Object({ data: T.String(), format: T.String() }) },
  { additionalProperties: true },
);
const ChatFilePart = T.Object(
  { type: T.Literal("file"), file: T.Record(T.String(), T.Unknown()) },
  { additionalProperties: true },
);
const ChatRefusalPart = T.Object({ type: T.Literal("refusal"), refusal: T.String() }, { additionalProperties: true });

const UserContent = T.Union([T.String(), T.Array(T.Union([ChatTextPart, ChatImagePart, ChatAudioPart, ChatFilePart]))]);
const TextContent = T.Union([T.String(), T.Array(ChatTextPart)]);

export const ChatToolCallSchema = T.Object(
  {
    id: T.String(),
    type: T.Literal("function"),
    function: T.Object({ name: T.String({ minLength: 1 }), arguments: T.String() }, { additionalProperties: true }),
  },
  { additionalProperties: true },
);

export const ChatMessageSchema = T.Union([
  T.Object(
    {
      role: T.Union([T.Literal("system"), T.Literal("developer")]),
      content: TextContent,
      name: T.Optional(T.String()),
    },
    { additionalProperties: true },
  ),
  T.Object(
    { role: T.Literal("user"), content: UserContent, name: T.Optional(T.String()) },
    { additionalProperties: true },
  ),
  T.Object(
    {
      role: T.Literal("assistant"),
      content: T.Optional(T.Union([T.String(), T.Array(T.Union([ChatTextPart, ChatRefusalPart])), T.Null()])),
      tool_calls: T.Optional(T.Array(ChatToolCallSchema)),
      refusal: T.Optional(T.Union([T.String(), T.Null()])),
      name: T.Optional(T.String()),
    },
    { additionalProperties: true },
  ),
  T.Object(
    { role: T.Literal("tool"), content: TextContent, tool_call_id: T.String({ minLength: 1 }) },
    { additionalProperties: true },
  ),
  T.Object(
    { role: T.Literal("function"), content: T.Union([T.String(), T.Null()]), name: T.String({ minLength: 1 }) },
    { additionalProperties: true },
  ),
]);

export const ChatToolSchema = T.Object(
  {
    type: T.Literal("function"),
    function: T.Object(
      {
        name: T.String({ minLength: 1, maxLength: 128 }),
        description: T.Optional(T.String()),
        parameters: T.Optional(T.Record(T.String(), T.Unknown())),
        strict: T.Optional(T.Union([T.Boolean(), T.Null()])),
      },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true },
);

const ToolChoice = T.Union([
  T.Literal("none"),
  T.Literal("auto"),
  T.Literal("required"),
  T.Object(
    { type: T.Literal("function"), function: T.Object({ name: T.String({ minLength: 1 }) }) },
    { additionalProperties: true },
  ),
]);

const ResponseFormat = T.Union([
  T.Object({ type: T.Literal("text") }, { additionalProperties: true }),
  T.Object({ type: T.Literal("json_object") }, { additionalProperties: true }),
  T.Object(
    {
      type: T.Literal("json_schema"),
      json_schema: T.Object(
        {
          name: T.String({ minLength: 1 }),
          schema: T.Optional(T.Record(T.String(), T.Unknown())),
          strict: T.Optional(T.Union([T.Boolean(), T.Null()])),
          description: T.Optional(T.String()),
        },
        { additionalProperties: true },
      ),
    },
    { additionalProperties: true },
  ),
]);

const OptionalNullable = <S extends TSchema>(s: S) => T.Optional(T.Union([s, T.Null()]));

export const ChatCompletionRequest = T.Object(
  {
    model: T.String({ minLength: 1 }),
    messages: T.Array(ChatMessageSchema, { minItems: 1 }),
    tools: T.Optional(T.Array(ChatToolSchema)),
    tool_choice: T.Optional(ToolChoice),
    parallel_tool_calls: T.Optional(T.Boolean()),
    response_format: T.Optional(ResponseFormat),
    stream: T.Optional(T.Union([T.Boolean(), T.Null()])),
    stream_options: T.Optional(
      T.Union([T.Object({ include_usage: T.Optional(T.Boolean()) }, { additionalProperties: true }), T.Null()]),
    ),
    max_tokens: OptionalNullable(T.Integer({ minimum: 1 })),
    max_completion_tokens: OptionalNullable(T.Integer({ minimum: 1 })),
    temperature: OptionalNullable(T.Number({ minimum: 0, maximum: 2 })),
    top_p: OptionalNullable(T.Number({ minimum: 0, maximum: 1 })),
    n: OptionalNullable(T.Integer({ minimum: 1, maximum: 128 })),
    stop: T.Optional(T.Union([T.String(), T.Array(T.String(), { maxItems: 4 }), T.Null()])),
    seed: OptionalNullable(T.Integer()),
    presence_penalty: OptionalNullable(T.Number({ minimum: -2, maximum: 2 })),
    frequency_penalty: OptionalNullable(T.Number({ minimum: -2, maximum: 2 })),
    reasoning_effort: T.Optional(
      T.Union([T.Literal("minimal"), T.Literal("low"), T.Literal("medium"), T.Literal("high"), T.Null()]),
    ),
    user: T.Optional(T.String()),
  },
  { additionalProperties: true },
);
export type ChatCompletionRequest = Static<typeof ChatCompletionRequest>;

// ---------------------------------------------------------------------------------------------
// Response shapes (documentation in /openapi.json; responses are built by the encoders)
// ---------------------------------------------------------------------------------------------

const ChatUsageSchema = T.Object({
  prompt_tokens: T.Integer(),
  completion_tokens: T.Integer(),
  total_tokens: T.Integer(),
  prompt_tokens_details: T.Optional(
    T.Object({ cached_tokens: T.Optional(T.Integer()) }, { additionalProperties: true }),
  ),
  completion_tokens_details: T.Optional(
    T.Object({ reasoning_tokens: T.Optional(T.Integer()) }, { additionalProperties: true }),
  ),
});

const FinishReasonSchema = T.Union([
  T.Literal("stop"),
  T.Literal("length"),
  T.Literal("tool_calls"),
  T.Literal("content_filter"),
  T.Null(),
]);

export const ChatCompletionResponse = T.Object(
  {
    id: T.String(),
    object: T.Literal("chat.completion"),
    created: T.Integer(),
    model: T.String(),
    system_fingerprint: T.Optional(T.Union([T.String(), T.Null()])),
    choices: T.Array(
      T.Object({
        index: T.Integer(),
        message: T.Object(
          {
            role: T.Literal("assistant"),
            content: T.Union([T.String(), T.Null()]),
            refusal: T.Optional(T.Union([T.String(), T.Null()])),
            tool_calls: T.Optional(T.Array(ChatToolCallSchema)),
            reasoning_content: T.Optional(T.String({ description: "Reasoning text, when the upstream returns it" })),
          },
          { additionalProperties: true },
        ),
        logprobs: T.Optional(T.Unknown()),
        finish_reason: FinishReasonSchema,
      }),
    ),
    usage: T.Optional(ChatUsageSchema),
  },
  { additionalProperties: true },
);

/** One `data:` frame of a chat-completions stream (the stream ends with `data: [DONE]`). */
export const ChatCompletionChunkSchema = T.Object(
  {
    id: T.String(),
    object: T.Literal("chat.completion.chunk"),
    created: T.Integer(),
    model: T.String(),
    choices: T.Array(
      T.Object({
        index: T.Integer(),
        delta: T.Object(
          {
            role: T.Optional(T.Literal("assistant")),
            content: T.Optional(T.Union([T.String(), T.Null()])),
            reasoning_content: T.Optional(T.String()),
            tool_calls: T.Optional(
              T.Array(
                T.Object({
                  index: T.Integer(),
                  id: T.Optional(T.String()),
                  type: T.Optional(T.Literal("function")),
                  function: T.Optional(T.Object({ name: T.Optional(T.String()), arguments: T.Optional(T.String()) })),
                }),
              ),
            ),
          },
          { additionalProperties: true },
        ),
        finish_reason: FinishReasonSchema,
      }),
    ),
    usage: T.Optional(T.Union([ChatUsageSchema, T.Null()])),
  },
  { additionalProperties: true },
);

/** OpenAI's error envelope: chat completions, responses, models and every management route. */
export const OpenAIErrorBody = T.Object({
  error: T.Object({
    message: T.String(),
    type: T.String(),
    param: T.Union([T.String(), T.Null()]),
    code: T.Union([T.String(), T.Null()]),
  }),
});
