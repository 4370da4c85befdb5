/**
 * The OpenAI Responses dialect, upstream direction: canonical -> request body, response object ->
 * canonical, SSE events -> canonical events. The OpenAI-family adapters speak it for models whose
 * catalog mode is `responses` (served only by the provider's Responses API).
 */
export { toResponsesBody } from "./request";
export { fromResponsesObject } from "./response";
export { responsesStreamEvents } from "./stream";
