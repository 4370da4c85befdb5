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
  // With a Content-Length (checked above) HTTP framing bounds the body: read it in one go.
  const bytes = declared !== null ? new Uint8Array(await request.arrayBuffer()) : await readCapped(request, maxBytes);
  const text = new TextDecoder().decode(bytes);
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(`Malformed JSON body: ${(e as Error).message}`, null, "invalid_json");
  }
}

/**
 * The body's bytes, read chunk by chunk and abandoned as soon as they pass the limit: a body sent
 * without a Content-Length (chunked) is never held in memory beyond the limit, whatever its size.
 */
async function readCapped(request: Request, maxBytes: number): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

function tooLarge(maxBytes: number): GatewayError {
  return new GatewayError(413, `Request body is larger than the limit of ${maxBytes} bytes`, {
    code: "request_too_large",
  });
}
