import { afterAll, describe, expect, test } from "bun:test";
import { GatewayError } from "../http/errors";
import { createImageFetcher, isPrivateAddress } from "./images";

const png = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]);
let lastHost = "";
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: (req) => {
    lastHost = req.headers.get("host") ?? "";
    const path = new URL(req.url).pathname;
    if (path === "/img.png") return new Response(png, { headers: { "content-type": "image/png" } });
    if (path === "/big.png") return new Response(new Uint8Array(2048), { headers: { "content-type": "image/png" } });
    if (path === "/page") return new Response("<html>", { headers: { "content-type": "text/html" } });
    return new Response("nope", { status: 404 });
  },
});
afterAll(() => void server.stop(true));
const base = `http://127.0.0.1:${server.port}`;
const signal = new AbortController().signal;

async function codeOf(p: Promise<unknown>): Promise<string | null> {
  try {
    await p;
    return "ok";
  } catch (e) {
    return e instanceof GatewayError ? e.code : "other";
  }
}

describe("image fetching for inline-only upstreams", () => {
  test("private and local addresses are refused by default", async () => {
    for (const ip of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "::1",
      "fd00::1",
      "::ffff:127.0.0.1",
    ]) {
      expect(isPrivateAddress(ip)).toBe(true);
    }
    for (const ip of ["8.8.8.8", "1.1.1.1", "2606:4700::1111"]) expect(isPrivateAddress(ip)).toBe(false);
    const fetcher = createImageFetcher();
    expect(await codeOf(fetcher(`${base}/img.png`, signal))).toBe("invalid_image_url");
    expect(await codeOf(fetcher("file:///etc/passwd", signal))).toBe("invalid_image_url");
    expect(await codeOf(fetcher("http://[::1]:80/x.png", signal))).toBe("invalid_image_url");
  });

  test("when allowed: downloads images, refuses non-images, errors and oversize bodies", async () => {
    const fetcher = createImageFetcher({ allowPrivateNetworks: true, maxBytes: 1024, timeoutMs: 2000 });
    expect(await fetcher(`${base}/img.png`, signal)).toEqual({
      mediaType: "image/png",
      data: Buffer.from(png).toString("base64"),
    });
    expect(await codeOf(fetcher(`${base}/page`, signal))).toBe("invalid_image_url");
    expect(await codeOf(fetcher(`${base}/missing.png`, signal))).toBe("image_download_failed");
    expect(await codeOf(fetcher(`${base}/big.png`, signal))).toBe("image_too_large");
  });

  test("the fetch dials the address that was checked, naming the host in the Host header", async () => {
    // `images.test` does not resolve through real DNS: only the pinned address can reach the server.
    const fetcher = createImageFetcher(
      { allowPrivateNetworks: false, maxBytes: 1024, timeoutMs: 2000 },
      { resolve: async (h) => (h === "images.test" ? ["127.0.0.1"] : []), isPrivate: () => false },
    );
    const img = await fetcher(`http://images.test:${server.port}/img.png`, signal);
    expect(img.mediaType).toBe("image/png");
    expect(lastHost).toBe(`images.test:${server.port}`);
    const blocked = createImageFetcher(
      { allowPrivateNetworks: false, maxBytes: 1024, timeoutMs: 2000 },
      { resolve: async () => ["93.184.216.34", "10.0.0.5"], isPrivate: isPrivateAddress },
    );
    expect(await codeOf(blocked(`http://rebind.test:${server.port}/img.png`, signal))).toBe("invalid_image_url");
  });
});
