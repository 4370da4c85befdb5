/**
 * The Anthropic Messages dialect for upstream calls: canonical -> Messages body, Messages response
 * -> canonical, Messages SSE -> canonical events. Used by the `anthropic` provider and by Claude on
 * Vertex AI, which differ only in URL, auth and where the model and API version go.
 */
export { toAnthropicBody } from "./request";
export { fromAnthropicMessage } from "./response";
export { anthropicStreamEvents } from "./stream";
