/**
 * Downloads an image named by URL for upstreams that only take inline bytes (Gemini, Bedrock).
 * Fetching URLs on a caller's behalf is an SSRF risk: only http(s), no private, loopback or
 * link-local addresses unless explicitly allowed, bounded size and time, image types only.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { badRequest } from "../http/errors";

export interface InlineImage {
  mediaType: string;
  /** base64 */
  data: string;
}

export type ImageFetcher = (url: string, signal: AbortSignal) => Promise<InlineImage>;

export interface ImageFetchPolicy {
  allowPrivateNetworks: boolean;
  maxBytes: number;
  timeoutMs: number;
}

export const IMAGE_FETCH_DEFAULTS: ImageFetchPolicy = {
  allowPrivateNetworks: false,
  maxBytes: 20 * 1024 * 1024,
  timeoutMs: 10_000,
};

/** True for addresses that must not be reached on a caller's behalf. */
export function isPrivateAddress(ip: string): boolean {
  if (isIP(ip) === 4) {
    const [a, b] = ip.split(".").map(Number) as [number, number];
    return (
      a === 10 ||
      a === 127 ||
      a === 0 ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 100 && b >= 64 && b <= 127) ||
      a >= 224
    );
  }
  const v6 = ip.toLowerCase();
  if (v6.startsWith("::ffff:")) return isPrivateAddress(v6.slice(7));
  return (
    v6 === "::1" ||
    v6 === "::" ||
    v6.startsWith("fc") ||
    v6.startsWith("fd") ||
    v6.startsWith("fe80") ||
    v6.startsWith("ff")
  );
}

export interface AddressChecks {
  resolve(host: string): Promise<string[]>;
  isPrivate(address: string): boolean;
}

const SYSTEM_CHECKS: AddressChecks = {
  resolve: async (host) => (await lookup(host, { all: true }).catch(() => [])).map((a) => a.address),
  isPrivate: isPrivateAddress,
};

export function createImageFetcher(
  policy: ImageFetchPolicy = IMAGE_FETCH_DEFAULTS,
  checks: AddressChecks = SYSTEM_CHECKS,
): ImageFetcher {
  return async (raw, signal) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw badRequest(`Image URL is not a valid URL: ${raw.slice(0, 100)}`, null, "invalid_image_url");
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      throw badRequest(`Image URLs must be http(s) or data: URLs, got ${url.protocol}`, null, "invalid_image_url");
    }
    let target = url;
    const init: RequestInit & { tls?: { serverName: string } } = {
      signal: AbortSignal.any([signal, AbortSignal.timeout(policy.timeoutMs)]),
      redirect: "error",
    };
    if (!policy.allowPrivateNetworks) {
      const host = url.hostname.replace(/^\[|\]$/g, "");
      const addresses = isIP(host) ? [host] : await checks.resolve(host);
      const first = addresses[0];
      if (first === undefined) throw badRequest(`Cannot resolve the image host ${host}`, null, "invalid_image_url");
      if (addresses.some((a) => checks.isPrivate(a))) {
        throw badRequest("Image URLs may not point at private or local network addresses", null, "invalid_image_url");
      }
      if (!isIP(host)) {
        // Dial the address that was checked, so a second DNS answer (rebinding) cannot redirect us.
        target = new URL(url);
        target.hostname = isIP(first) === 6 ? `[${first}]` : first;
        init.headers = { host: url.host };
        if (url.protocol === "https:") init.tls = { serverName: host };
      }
    }
    const res = await fetch(target, init).catch((e) => {
      throw badRequest(
        `Cannot download the image at ${url.host}: ${(e as Error).message}`,
        null,
        "image_download_failed",
      );
    });
    if (!res.ok)
      throw badRequest(`Downloading the image at ${url.host} failed with ${res.status}`, null, "image_download_failed");
    const mediaType = (res.headers.get("content-type") ?? "").split(";")[0]?.trim() ?? "";
    if (!mediaType.startsWith("image/"))
      throw badRequest(
        `The URL did not return an image (${mediaType || "no content type"})`,
        null,
        "invalid_image_url",
      );
    const declared = Number(res.headers.get("content-length") ?? "0");
    if (declared > policy.maxBytes)
      throw badRequest(`The image is larger than ${policy.maxBytes} bytes`, null, "image_too_large");
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.byteLength > policy.maxBytes)
      throw badRequest(`The image is larger than ${policy.maxBytes} bytes`, null, "image_too_large");
    return { mediaType, data: Buffer.from(bytes).toString("base64") };
  };
}
