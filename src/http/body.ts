import { badRequest, GatewayError } from "./errors";

/**
 * Reads a JSON request body with the gateway's rules: a size cap (413), JSON content types only
 * (415), and a 400 that says where the JSON is malformed. An empty body reads as `undefined`.
 */
export async function parseJsonBody(request: Request, contentType: string, maxBytes: number): Promise<unknown> {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  const mediaType = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  if (mediaType !== "" && mediaType !== "application/json" && !mediaType.endsWith("+json")) {
    throw new GatewayError(
      415,
      `Unsupported Content-Type '${mediaType}': send the body as JSON with 'Content-Type: application/json'`,
      { code: "unsupported_media_type" },
    );
  }
  const bytes = await request.arrayBuffer();
  if (bytes.byteLength > maxBytes) throw tooLarge(maxBytes);
  const text = new TextDecoder().decode(bytes);
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(`Malformed JSON body: ${(e as Error).message}`, null, "invalid_json");
  }
}

function tooLarge(maxBytes: number): GatewayError {
  return new GatewayError(413, `Request body is larger than the limit of ${maxBytes} bytes`, {
    code: "request_too_large",
  });
}
