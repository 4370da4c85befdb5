/**
 * The Gemini generateContent dialect, upstream direction: canonical -> request body, response ->
 * canonical, SSE stream -> canonical events. Shared by the `gemini` and `vertex` adapters.
 */
export { type GeminiRequestContext, toGeminiBody } from "./request";
export { fromGeminiResponse, geminiHttpError, readUpstreamJson } from "./response";
export { toGeminiSchema } from "./schema";
export { geminiStreamEvents } from "./stream";
