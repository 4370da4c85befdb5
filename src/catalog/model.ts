/**
 * A model catalog entry: name, mode, prices and capabilities. The same fields appear in the shipped
 * default catalog (config/catalog.yaml) and in the `models:` section of the gateway config, which
 * adds routing fields (see src/config/file.ts).
 *
 * Prices are USD per token. `null` (or absent) means the provider publishes no price for that kind of
 * token: such tokens are billed at the input price and the record is marked `cost_estimated`. It
 * never means free.
 */
import { type Static, Type as T } from "@sinclair/typebox";

const Price = T.Union([T.Number({ minimum: 0 }), T.Null()], {
  errorMessage: "a price in USD per token (>= 0) or null",
});
const TokenCount = T.Union([T.Integer({ minimum: 1 }), T.Null()]);

export const ModelMode = T.Union(
  [
    T.Literal("chat"),
    T.Literal("responses"),
    T.Literal("completion"),
    T.Literal("embedding"),
    T.Literal("image_generation"),
    T.Literal("audio_transcription"),
    T.Literal("audio_speech"),
    T.Literal("rerank"),
  ],
  {
    errorMessage:
      "one of chat, responses, completion, embedding, image_generation, audio_transcription, audio_speech, rerank",
  },
);
export type ModelMode = Static<typeof ModelMode>;

/** `<provider>/<model>`; the provider part names a configured provider. `*` as the model part is a wildcard. */
export const ModelName = T.String({
  pattern: "^[A-Za-z0-9][A-Za-z0-9._-]*/[^\\s]+$",
  errorMessage: "a model name of the form <provider>/<model>",
});

export const catalogFields = {
  name: ModelName,
  mode: T.Optional(ModelMode),
  input_cost_per_token: T.Optional(Price),
  output_cost_per_token: T.Optional(Price),
  cache_read_input_token_cost: T.Optional(Price),
  cache_creation_input_token_cost: T.Optional(Price),
  /** When the provider prices reasoning tokens apart from other output. */
  output_cost_per_reasoning_token: T.Optional(Price),
  max_input_tokens: T.Optional(TokenCount),
  max_output_tokens: T.Optional(TokenCount),
  supports_function_calling: T.Optional(T.Boolean()),
  supports_parallel_function_calling: T.Optional(T.Boolean()),
  supports_vision: T.Optional(T.Boolean()),
  supports_response_schema: T.Optional(T.Boolean()),
  supports_reasoning: T.Optional(T.Boolean()),
  supports_prompt_caching: T.Optional(T.Boolean()),
  /** Where the prices come from (a provider pricing page). */
  source: T.Optional(T.String()),
};

export const CatalogEntry = T.Object(catalogFields, { additionalProperties: false });
export type CatalogEntry = Static<typeof CatalogEntry>;

/** The shipped default catalog file. */
export const CatalogFile = T.Object(
  {
    /** When the prices were last checked against the sources, YYYY-MM-DD. */
    retrieved: T.String({ pattern: "^\\d{4}-\\d{2}-\\d{2}$" }),
    models: T.Array(CatalogEntry),
  },
  { additionalProperties: false },
);
export type CatalogFile = Static<typeof CatalogFile>;
