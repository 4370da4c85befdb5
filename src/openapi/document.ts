/**
 * The public API description: the four inference protocols and the catalog endpoints, no
 * management or internal routes. Request bodies are the very TypeBox schemas the validators
 * compile; response, stream-frame and error bodies are the schemas of what the encoders write.
 * SSE streams are documented as `text/event-stream` with the schema of each frame's data.
 */
import type { TSchema } from "@sinclair/typebox";
import { ModelHub, ModelList, ModelObject } from "../catalog/schema";
import {
  ErrorBody as AnthropicErrorBody,
  CountTokensRequest,
  CountTokensResponse,
  MessagesRequest,
  MessagesResponse,
  MessagesStreamEvent,
} from "../protocols/anthropic/schema";
import {
  GenerateContentRequestSchema,
  GenerateContentResponseSchema,
  GoogleErrorSchema,
} from "../protocols/gemini/schema";
import {
  ChatCompletionChunkSchema,
  ChatCompletionRequest,
  ChatCompletionResponse,
  OpenAIErrorBody,
} from "../protocols/openai-chat/schema";
import {
  ResponseDeleted,
  ResponseObject,
  ResponseStreamEvent,
  ResponsesRequest,
} from "../protocols/openai-responses/schema";

/** A TypeBox schema as plain JSON Schema: symbols dropped, the validators' own hints removed. */
export function jsonSchema(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema), (key, value) => (key === "errorMessage" ? undefined : value));
}

const SCHEMAS: Record<string, TSchema> = {
  ChatCompletionRequest,
  ChatCompletionResponse,
  ChatCompletionChunk: ChatCompletionChunkSchema,
  OpenAIError: OpenAIErrorBody,
  ResponsesRequest,
  Response: ResponseObject,
  ResponseDeleted,
  ResponseStreamEvent,
  MessagesRequest,
  MessagesResponse,
  MessagesStreamEvent,
  CountTokensRequest,
  CountTokensResponse,
  AnthropicError: AnthropicErrorBody,
  GenerateContentRequest: GenerateContentRequestSchema,
  GenerateContentResponse: GenerateContentResponseSchema,
  GoogleError: GoogleErrorSchema,
  ModelList,
  Model: ModelObject,
  ModelHub,
};

const ref = (name: keyof typeof SCHEMAS & string) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: keyof typeof SCHEMAS & string) => ({ "application/json": { schema: ref(name) } });

/** An SSE stream whose `data:` lines each hold one `frame` (event names as the protocol defines). */
const sse = (frame: keyof typeof SCHEMAS & string, description: string) => ({
  "text/event-stream": {
    schema: { type: "string" as const, description },
    "x-sse-data": ref(frame),
  },
});

const errors = (name: "OpenAIError" | "AnthropicError" | "GoogleError") => ({
  "400": { description: "Invalid request (the message names the field)", content: json(name) },
  "401": { description: "Missing, invalid, expired or blocked key", content: json(name) },
  "403": { description: "The key (or its team) may not use this model", content: json(name) },
  "404": { description: "Unknown model", content: json(name) },
  "429": {
    description: "A rate limit, parallel cap or budget was reached; see retry-after and x-ratelimit-* headers",
    content: json(name),
  },
  "5XX": { description: "Upstream or gateway failure, with a faithful status", content: json(name) },
});

/** Plain OpenAPI 3.1 objects (the openapi-types unions of 3.0 and 3.1 do not compose). */
type Json = Record<string, unknown>;

const modelParam: Json = {
  name: "model",
  in: "path",
  required: true,
  description: "A catalog model name, URL-encoded (openai%2Fgpt-4o-mini); the unencoded form is accepted too",
  schema: { type: "string" },
};

const responseIdParam: Json = {
  name: "response_id",
  in: "path",
  required: true,
  description: "The id of a response the gateway returned (resp_gw...)",
  schema: { type: "string" },
};

const storedResponseErrors = {
  "401": { description: "Missing, invalid, expired or blocked key", content: json("OpenAIError") },
  "404": {
    description: "No such response for this key (never stored, another key's, expired or deleted)",
    content: json("OpenAIError"),
  },
  "5XX": { description: "Gateway failure (e.g. the database is unreachable)", content: json("OpenAIError") },
};

function generateContent(stream: boolean, version: "v1beta" | "v1"): Json {
  return {
    tags: ["Google generateContent"],
    operationId: `${stream ? "streamGenerateContent" : "generateContent"}${version === "v1" ? "V1" : ""}`,
    summary: stream ? "Generate content, streamed (alt=sse)" : "Generate content",
    description:
      "Google's generateContent protocol for every catalog model. The key goes in x-goog-api-key, ?key= or Authorization: Bearer." +
      (version === "v1" ? " Same as the /v1beta path (the @google/genai SDK's default)." : ""),
    security: [{ googleApiKey: [] }, { googleQueryKey: [] }, { bearer: [] }],
    parameters: [
      modelParam,
      ...(stream
        ? [
            {
              name: "alt",
              in: "query" as const,
              required: false,
              description: "sse (what SDKs send); without it the stream is one JSON array",
              schema: { type: "string" as const, enum: ["sse"] },
            },
          ]
        : []),
    ],
    requestBody: { required: true, content: json("GenerateContentRequest") },
    responses: {
      "200": {
        description: stream
          ? "SSE frames, each a GenerateContentResponse with the new parts; finishReason and usageMetadata on the last; no [DONE]"
          : "The answer",
        content: stream
          ? sse("GenerateContentResponse", "data: <GenerateContentResponse JSON> frames")
          : json("GenerateContentResponse"),
      },
      ...errors("GoogleError"),
    },
  };
}

export function openApiDocument() {
  const paths: Record<string, Record<string, Json>> = {
    "/v1/chat/completions": {
      post: {
        tags: ["OpenAI chat completions"],
        operationId: "createChatCompletion",
        summary: "Create a chat completion",
        description: "OpenAI's chat completions protocol for every catalog model (`<provider>/<model>`).",
        security: [{ bearer: [] }],
        requestBody: { required: true, content: json("ChatCompletionRequest") },
        responses: {
          "200": {
            description:
              "The completion; with stream: true, SSE frames `data: <chunk>` ending with `data: [DONE]` (a final usage chunk when stream_options.include_usage)",
            content: {
              ...json("ChatCompletionResponse"),
              ...sse("ChatCompletionChunk", "data: <ChatCompletionChunk JSON> frames, then data: [DONE]"),
            },
          },
          ...errors("OpenAIError"),
        },
      },
    },
    "/v1/responses": {
      post: {
        tags: ["OpenAI responses"],
        operationId: "createResponse",
        summary: "Create a response",
        description:
          "OpenAI's responses protocol for every catalog model. Deployments of mode `responses` models on OpenAI-type providers receive the body as sent (their responses API); others are translated. Every answer gets a gateway id and is stored (unless store: false) for previous_response_id and GET /v1/responses/{response_id}.",
        security: [{ bearer: [] }],
        requestBody: { required: true, content: json("ResponsesRequest") },
        responses: {
          "200": {
            description:
              "The response; with stream: true, SSE events (`event: <type>`) with strictly increasing sequence_number, ending with response.completed, response.incomplete or response.failed",
            content: {
              ...json("Response"),
              ...sse("ResponseStreamEvent", "event: <type> / data: <event JSON> frames"),
            },
          },
          ...errors("OpenAIError"),
        },
      },
    },
    "/v1/responses/{response_id}": {
      get: {
        tags: ["OpenAI responses"],
        operationId: "getResponse",
        summary: "A stored response",
        description:
          "A response the gateway stored (store was not false), while its retention lasts, for the key that created it.",
        security: [{ bearer: [] }],
        parameters: [responseIdParam],
        responses: {
          "200": { description: "The response as it was returned", content: json("Response") },
          ...storedResponseErrors,
        },
      },
      delete: {
        tags: ["OpenAI responses"],
        operationId: "deleteResponse",
        summary: "Delete a stored response",
        description: "Removes a stored response of the calling key; it can no longer be continued or read.",
        security: [{ bearer: [] }],
        parameters: [responseIdParam],
        responses: {
          "200": { description: "Deleted", content: json("ResponseDeleted") },
          ...storedResponseErrors,
        },
      },
    },
    "/v1/messages": {
      post: {
        tags: ["Anthropic messages"],
        operationId: "createMessage",
        summary: "Create a message",
        description:
          "Anthropic's messages protocol for every catalog model. The key goes in x-api-key or Authorization: Bearer.",
        security: [{ anthropicApiKey: [] }, { bearer: [] }],
        requestBody: { required: true, content: json("MessagesRequest") },
        responses: {
          "200": {
            description:
              "The message; with stream: true, SSE events message_start ... message_stop (event names on every frame)",
            content: {
              ...json("MessagesResponse"),
              ...sse("MessagesStreamEvent", "event: <type> / data: <event JSON> frames"),
            },
          },
          ...errors("AnthropicError"),
        },
      },
    },
    "/v1/messages/count_tokens": {
      post: {
        tags: ["Anthropic messages"],
        operationId: "countMessageTokens",
        summary: "Count the input tokens of a message (estimate)",
        security: [{ anthropicApiKey: [] }, { bearer: [] }],
        requestBody: { required: true, content: json("CountTokensRequest") },
        responses: {
          "200": { description: "The estimate", content: json("CountTokensResponse") },
          ...errors("AnthropicError"),
        },
      },
    },
    "/v1beta/models/{model}:generateContent": { post: generateContent(false, "v1beta") },
    "/v1beta/models/{model}:streamGenerateContent": { post: generateContent(true, "v1beta") },
    "/v1/models/{model}:generateContent": { post: generateContent(false, "v1") },
    "/v1/models/{model}:streamGenerateContent": { post: generateContent(true, "v1") },
    "/v1/models": {
      get: {
        tags: ["Catalog"],
        operationId: "listModels",
        summary: "Models the calling key may use",
        security: [{ bearer: [] }],
        responses: {
          "200": { description: "OpenAI's model list", content: json("ModelList") },
          ...errors("OpenAIError"),
        },
      },
    },
    "/v1/models/{model}": {
      get: {
        tags: ["Catalog"],
        operationId: "retrieveModel",
        summary: "One model, if the calling key may use it",
        security: [{ bearer: [] }],
        parameters: [modelParam],
        responses: { "200": { description: "The model", content: json("Model") }, ...errors("OpenAIError") },
      },
    },
    "/public/model_hub": {
      get: {
        tags: ["Catalog"],
        operationId: "modelHub",
        summary: "Every served model with prices (null = unpublished, not free), limits and capabilities",
        security: [],
        responses: { "200": { description: "The catalog", content: json("ModelHub") } },
      },
    },
  };
  return {
    info: {
      title: "LLM Gateway",
      version: "0.1.0",
      description:
        "One endpoint for every model: OpenAI chat completions and responses, Anthropic messages and Google generateContent, each reaching every catalog model (`<provider>/<model>`), streaming included.",
    },
    tags: [
      { name: "OpenAI chat completions" },
      { name: "OpenAI responses" },
      { name: "Anthropic messages" },
      { name: "Google generateContent" },
      { name: "Catalog" },
    ],
    paths,
    components: {
      schemas: Object.fromEntries(Object.entries(SCHEMAS).map(([name, s]) => [name, jsonSchema(s)])),
      securitySchemes: {
        bearer: { type: "http" as const, scheme: "bearer", description: "A gateway key: Authorization: Bearer sk-..." },
        anthropicApiKey: { type: "apiKey" as const, in: "header" as const, name: "x-api-key" },
        googleApiKey: { type: "apiKey" as const, in: "header" as const, name: "x-goog-api-key" },
        googleQueryKey: { type: "apiKey" as const, in: "query" as const, name: "key" },
      },
    },
  };
}
