/**
 * Google's generateContent request and response as the gateway validates and documents them
 * (PROTOCOLS.md section 4). Known fields are checked precisely; unknown fields are allowed, since
 * Google adds fields often and Gemini upstreams receive the client's body unchanged. Which part
 * kinds the gateway can translate is checked after the schema, in `checkGenerateContent`.
 */
import { type Static, Type as T, type TSchema } from "@sinclair/typebox";
import { GEMINI_FINISH_REASONS } from "./wire";

const open = { additionalProperties: true } as const;
const JsonObject = T.Record(T.String(), T.Unknown(), { errorMessage: "a JSON object" });
const Role = T.Union([T.Literal("user"), T.Literal("model"), T.Literal("function")], {
  errorMessage: '"user" or "model"',
});

// ---------------------------------------------------------------------------------------------
// Request

export const GeminiPartSchema = T.Object(
  {
    text: T.Optional(T.String()),
    /** The part is the model's thinking. */
    thought: T.Optional(T.Boolean()),
    thoughtSignature: T.Optional(T.String()),
    inlineData: T.Optional(T.Object({ mimeType: T.String({ minLength: 1 }), data: T.String() }, open)),
    fileData: T.Optional(T.Object({ mimeType: T.Optional(T.String()), fileUri: T.String({ minLength: 1 }) }, open)),
    functionCall: T.Optional(
      T.Object({ id: T.Optional(T.String()), name: T.String({ minLength: 1 }), args: T.Optional(JsonObject) }, open),
    ),
    functionResponse: T.Optional(
      T.Object({ id: T.Optional(T.String()), name: T.String({ minLength: 1 }), response: JsonObject }, open),
    ),
    executableCode: T.Optional(T.Object({ language: T.Optional(T.String()), code: T.String() }, open)),
    codeExecutionResult: T.Optional(
      T.Object({ outcome: T.Optional(T.String()), output: T.Optional(T.String()) }, open),
    ),
    videoMetadata: T.Optional(JsonObject),
  },
  open,
);

export const GeminiContentSchema = T.Object({ role: T.Optional(Role), parts: T.Array(GeminiPartSchema) }, open);

/** The OpenAPI 3.0 subset Gemini uses for `parameters` and `responseSchema` (kept as given). */
const GeminiSchemaObject = T.Record(T.String(), T.Unknown(), { errorMessage: "a schema object" });

export const GeminiFunctionDeclarationSchema = T.Object(
  {
    name: T.String({ minLength: 1, maxLength: 128 }),
    description: T.Optional(T.String()),
    parameters: T.Optional(GeminiSchemaObject),
    parametersJsonSchema: T.Optional(JsonObject),
    response: T.Optional(GeminiSchemaObject),
    responseJsonSchema: T.Optional(JsonObject),
    behavior: T.Optional(T.String()),
  },
  open,
);

export const GeminiToolSchema = T.Object(
  { functionDeclarations: T.Optional(T.Array(GeminiFunctionDeclarationSchema)) },
  { ...open, description: "Function declarations; Gemini's built-in tools (googleSearch, codeExecution, ...)." },
);

const FunctionCallingMode = T.Union(
  [T.Literal("AUTO"), T.Literal("ANY"), T.Literal("NONE"), T.Literal("VALIDATED"), T.Literal("MODE_UNSPECIFIED")],
  { errorMessage: "one of AUTO, ANY, NONE, VALIDATED" },
);

export const GeminiToolConfigSchema = T.Object(
  {
    functionCallingConfig: T.Optional(
      T.Object({ mode: T.Optional(FunctionCallingMode), allowedFunctionNames: T.Optional(T.Array(T.String())) }, open),
    ),
  },
  open,
);

const ThinkingLevel = T.Union(
  [
    T.Literal("MINIMAL"),
    T.Literal("LOW"),
    T.Literal("MEDIUM"),
    T.Literal("HIGH"),
    T.Literal("THINKING_LEVEL_UNSPECIFIED"),
  ],
  { errorMessage: "one of MINIMAL, LOW, MEDIUM, HIGH" },
);

export const GeminiGenerationConfigSchema = T.Object(
  {
    maxOutputTokens: T.Optional(T.Integer({ minimum: 1 })),
    temperature: T.Optional(T.Number({ minimum: 0, maximum: 2 })),
    topP: T.Optional(T.Number({ minimum: 0, maximum: 1 })),
    topK: T.Optional(T.Number({ minimum: 1 })),
    candidateCount: T.Optional(T.Integer({ minimum: 1, maximum: 8 })),
    stopSequences: T.Optional(T.Array(T.String())),
    seed: T.Optional(T.Integer()),
    presencePenalty: T.Optional(T.Number({ minimum: -2, maximum: 2 })),
    frequencyPenalty: T.Optional(T.Number({ minimum: -2, maximum: 2 })),
    responseMimeType: T.Optional(T.String()),
    responseSchema: T.Optional(GeminiSchemaObject),
    responseJsonSchema: T.Optional(JsonObject),
    responseLogprobs: T.Optional(T.Boolean()),
    logprobs: T.Optional(T.Integer()),
    responseModalities: T.Optional(T.Array(T.String())),
    thinkingConfig: T.Optional(
      T.Object(
        {
          /** Tokens; 0 turns thinking off, -1 lets the model decide. */
          thinkingBudget: T.Optional(T.Integer({ minimum: -1 })),
          includeThoughts: T.Optional(T.Boolean()),
          thinkingLevel: T.Optional(ThinkingLevel),
        },
        open,
      ),
    ),
  },
  open,
);

export const GeminiSafetySettingSchema = T.Object({ category: T.String(), threshold: T.String() }, open);

export const GenerateContentRequestSchema = T.Object(
  {
    contents: T.Array(GeminiContentSchema, { minItems: 1 }),
    /** A Content of text parts; a plain string is accepted too. */
    systemInstruction: T.Optional(T.Union([T.String(), GeminiContentSchema])),
    tools: T.Optional(T.Array(GeminiToolSchema)),
    toolConfig: T.Optional(GeminiToolConfigSchema),
    generationConfig: T.Optional(GeminiGenerationConfigSchema),
    safetySettings: T.Optional(T.Array(GeminiSafetySettingSchema)),
    /** `cachedContents/...`: only meaningful to Gemini upstreams, which receive it unchanged. */
    cachedContent: T.Optional(T.String()),
    labels: T.Optional(T.Record(T.String(), T.String())),
  },
  { ...open, title: "GenerateContentRequest" },
);
export type GenerateContentRequestBody = Static<typeof GenerateContentRequestSchema>;
export type GeminiPartIn = Static<typeof GeminiPartSchema>;
export type GeminiContentIn = Static<typeof GeminiContentSchema>;

// ---------------------------------------------------------------------------------------------
// Response (also the shape of every streamed frame)

const Count = T.Integer({ minimum: 0 });
const FinishReason = T.Union(
  GEMINI_FINISH_REASONS.map((r) => T.Literal(r)),
  { description: "Newer values may appear; treat unknown ones as OTHER." },
);
const ModalityCounts = T.Array(T.Object({ modality: T.String(), tokenCount: T.Optional(Count) }, open));

export const GeminiUsageMetadataSchema = T.Object(
  {
    /** The whole prompt, including cachedContentTokenCount. */
    promptTokenCount: T.Optional(Count),
    cachedContentTokenCount: T.Optional(Count),
    /** Visible output only; excludes thoughtsTokenCount. */
    candidatesTokenCount: T.Optional(Count),
    toolUsePromptTokenCount: T.Optional(Count),
    thoughtsTokenCount: T.Optional(Count),
    totalTokenCount: T.Optional(Count),
    promptTokensDetails: T.Optional(ModalityCounts),
    cacheTokensDetails: T.Optional(ModalityCounts),
    candidatesTokensDetails: T.Optional(ModalityCounts),
  },
  open,
);

const ResponsePart = T.Object(
  {
    text: T.Optional(T.String()),
    thought: T.Optional(T.Boolean()),
    thoughtSignature: T.Optional(T.String()),
    functionCall: T.Optional(
      T.Object({ id: T.Optional(T.String()), name: T.String(), args: T.Optional(JsonObject) }, open),
    ),
    inlineData: T.Optional(T.Object({ mimeType: T.String(), data: T.String() }, open)),
  },
  open,
);

export const GeminiCandidateSchema = T.Object(
  {
    content: T.Optional(T.Object({ role: T.Optional(T.Literal("model")), parts: T.Array(ResponsePart) }, open)),
    finishReason: T.Optional(FinishReason),
    finishMessage: T.Optional(T.String()),
    index: T.Optional(Count),
    safetyRatings: T.Optional(T.Array(T.Record(T.String(), T.Unknown()))),
  },
  open,
);

export const GenerateContentResponseSchema = T.Object(
  {
    candidates: T.Optional(T.Array(GeminiCandidateSchema)),
    promptFeedback: T.Optional(
      T.Object(
        {
          blockReason: T.Optional(T.String()),
          blockReasonMessage: T.Optional(T.String()),
          safetyRatings: T.Optional(T.Array(T.Record(T.String(), T.Unknown()))),
        },
        open,
      ),
    ),
    usageMetadata: T.Optional(GeminiUsageMetadataSchema),
    modelVersion: T.Optional(T.String()),
    responseId: T.Optional(T.String()),
  },
  {
    ...open,
    title: "GenerateContentResponse",
    description:
      "The answer of :generateContent, and every `data:` frame of :streamGenerateContent?alt=sse (holding only the new parts; finishReason and usageMetadata on the last frame).",
  },
);
export type GenerateContentResponseBody = Static<typeof GenerateContentResponseSchema>;

/** Google's RPC error envelope, for every failure on these routes and for a failure mid-stream. */
export const GoogleErrorSchema = T.Object(
  {
    error: T.Object(
      {
        code: T.Integer({ description: "The HTTP status." }),
        message: T.String(),
        status: T.String({ description: "INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, ..." }),
        details: T.Optional(T.Array(T.Record(T.String(), T.Unknown()))),
      },
      open,
    ),
  },
  { title: "GoogleError" },
);

/** For the OpenAPI document: every schema of these routes by name. */
export const GENERATE_CONTENT_SCHEMAS: Record<string, TSchema> = {
  GenerateContentRequest: GenerateContentRequestSchema,
  GenerateContentResponse: GenerateContentResponseSchema,
  GoogleError: GoogleErrorSchema,
};
