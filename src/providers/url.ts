/** Model ids in upstream URL paths (Gemini, Vertex, Bedrock, Azure deployments). */
import { badRequest } from "../http/errors";

/**
 * One URL path segment: percent-encoded, and never `.` or `..`, which URL parsing resolves away
 * (`/model/../converse` is `/converse`), sending the provider's credentials to another endpoint.
 */
export function pathSegment(s: string): string {
  if (s === "." || s === "..") {
    throw badRequest(
      `The model id '${s}' cannot be sent upstream: '.' and '..' are not model ids`,
      "model",
      "invalid_model_name",
    );
  }
  return encodeURIComponent(s);
}
