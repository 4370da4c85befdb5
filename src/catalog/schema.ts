/** Response shapes of the catalog endpoints (documentation in /openapi.json). */
import { Type as T } from "@sinclair/typebox";

const Price = T.Union([T.Number(), T.Null()], { description: "USD per token; null = unpublished (not free)" });

export const ModelObject = T.Object({
  id: T.String({ description: "<provider>/<model>" }),
  object: T.Literal("model"),
  created: T.Integer(),
  owned_by: T.String(),
});

export const ModelList = T.Object({ object: T.Literal("list"), data: T.Array(ModelObject) });

export const ModelHub = T.Object({
  data: T.Array(
    T.Object(
      {
        model_name: T.String(),
        mode: T.String(),
        providers: T.Array(T.String()),
        input_cost_per_token: Price,
        output_cost_per_token: Price,
        cache_read_input_token_cost: Price,
        cache_creation_input_token_cost: Price,
        output_cost_per_reasoning_token: Price,
        max_input_tokens: T.Union([T.Integer(), T.Null()]),
        max_output_tokens: T.Union([T.Integer(), T.Null()]),
        supports_function_calling: T.Optional(T.Boolean()),
        supports_vision: T.Optional(T.Boolean()),
        supports_response_schema: T.Optional(T.Boolean()),
        supports_reasoning: T.Optional(T.Boolean()),
        supports_prompt_caching: T.Optional(T.Boolean()),
      },
      { additionalProperties: true },
    ),
  ),
});
