/** Bedrock adapter units: SigV4, the event-stream codec, and every canonical <-> Converse mapping. */
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import {
  bedrockConverse,
  bedrockError,
  bedrockFixture,
  bedrockJson,
  bedrockStream,
  encodeStreamItems,
  REQUEST_ID,
  rechunk,
  type StreamItem,
  verifySigV4,
} from "../../../test/mocks/bedrock";
import { startMockUpstream } from "../../../test/mocks/upstream";
import { ConfigError } from "../../config/error";
import type { ProviderConfig } from "../../config/file";
import { GatewayError } from "../../http/errors";
import { createLogger } from "../../log";
import type { CanonicalRequest, StreamEvent } from "../../protocols/canonical";
import { UpstreamError } from "../errors";
import type { CallContext, Deployment } from "../types";
import { createBedrockAdapter } from "./adapter";
import { crc32, decodeEventStream, type EventStreamMessage, encodeMessage, headerString } from "./eventstream";
import { toConverseRequest } from "./request";
import { type ConverseResponse, finishFromConverse, fromConverse, usageFromConverse } from "./response";
import { canonicalQuery, canonicalUri, signingKey, signRequest } from "./sigv4";
import { converseStreamEvents } from "./stream";

const enc = new TextEncoder();

// ---------------------------------------------------------------------------------------------
// SigV4
// ---------------------------------------------------------------------------------------------

/** The AWS SigV4 test suite (awslabs/aws-c-auth tests/aws-signing-test-suite/v4): fixed inputs. */
const SUITE = {
  credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" },
  region: "us-east-1",
  service: "service",
  date: new Date("2015-08-30T12:36:00Z"),
  host: "example.amazonaws.com",
};

function suite(
  method: string,
  path: string,
  opts: { query?: string; headers?: Record<string, string>; body?: string; sessionToken?: string } = {},
) {
  return signRequest({
    method,
    host: SUITE.host,
    path,
    ...(opts.query !== undefined ? { query: opts.query } : {}),
    headers: opts.headers ?? {},
    body: opts.body ?? "",
    region: SUITE.region,
    service: SUITE.service,
    credentials: { ...SUITE.credentials, ...(opts.sessionToken ? { sessionToken: opts.sessionToken } : {}) },
    date: SUITE.date,
  });
}

const authz = (signedHeaders: string, signature: string) =>
  `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=${signedHeaders}, Signature=${signature}`;

describe("SigV4: AWS's published test vectors", () => {
  test("get-vanilla: canonical request, string to sign and authorization", () => {
    const s = suite("GET", "/");
    expect(s.canonicalRequest).toBe(
      [
        "GET",
        "/",
        "",
        "host:example.amazonaws.com",
        "x-amz-date:20150830T123600Z",
        "",
        "host;x-amz-date",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      ].join("\n"),
    );
    expect(s.stringToSign).toBe(
      [
        "AWS4-HMAC-SHA256",
        "20150830T123600Z",
        "20150830/us-east-1/service/aws4_request",
        "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
      ].join("\n"),
    );
    expect(s.headers).toEqual({
      "x-amz-date": "20150830T123600Z",
      authorization: authz("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    });
  });

  test("post-vanilla", () => {
    expect(suite("POST", "/").headers.authorization).toBe(
      authz("host;x-amz-date", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"),
    );
  });

  test("get-vanilla-query-order-key-case: parameters sorted by name", () => {
    const s = suite("GET", "/", { query: "Param2=value2&Param1=value1" });
    expect(s.canonicalRequest.split("\n")[2]).toBe("Param1=value1&Param2=value2");
    expect(s.signature).toBe("b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
  });

  test("get-vanilla-utf8-query: query names are UTF-8 percent-encoded", () => {
    expect(suite("GET", "/", { query: "ሴ=bar" }).signature).toBe(
      "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
    );
  });

  test("paths with characters to encode: get-utf8, get-space-normalized, get-unreserved", () => {
    const utf8 = suite("GET", "/ሴ");
    expect(utf8.canonicalRequest.split("\n")[1]).toBe("/%E1%88%B4");
    expect(utf8.signature).toBe("8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
    const space = suite("GET", "/example space/");
    expect(space.canonicalRequest.split("\n")[1]).toBe("/example%20space/");
    expect(space.signature).toBe("652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741");
    expect(suite("GET", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz").signature).toBe(
      "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
    );
  });

  test("normalised paths: get-slashes-normalized, get-relative-relative-normalized", () => {
    expect(suite("GET", "//example//").signature).toBe(
      "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84",
    );
    expect(suite("GET", "/example1/example2/../..").signature).toBe(
      "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    );
  });

  test("headers: get-header-value-trim and post-header-key-sort", () => {
    const trim = suite("GET", "/", { headers: { "My-Header1": " value1", "My-Header2": ' "a   b   c"' } });
    expect(trim.canonicalRequest).toContain('my-header1:value1\nmy-header2:"a b c"\n');
    expect(trim.headers.authorization).toBe(
      authz(
        "host;my-header1;my-header2;x-amz-date",
        "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
      ),
    );
    expect(suite("POST", "/", { headers: { "My-Header1": "value1" } }).headers.authorization).toBe(
      authz("host;my-header1;x-amz-date", "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"),
    );
  });

  test("get-vanilla-with-session-token: the token is sent and signed", () => {
    const s = suite("GET", "/", { sessionToken: "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267" });
    expect(s.headers["x-amz-security-token"]).toBe("6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267");
    expect(s.headers.authorization).toBe(
      authz("host;x-amz-date;x-amz-security-token", "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"),
    );
  });

  test("post-x-www-form-urlencoded: the payload hash is signed", () => {
    const s = suite("POST", "/", {
      body: "Param1=value1",
      headers: {
        "Content-Type": "application/x-www-form-urlencoded",
        "Content-Length": "13",
        "x-amz-content-sha256": "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
      },
    });
    expect(s.canonicalRequest.endsWith("9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e")).toBe(true);
    expect(s.headers.authorization).toBe(
      authz(
        "content-length;content-type;host;x-amz-content-sha256;x-amz-date",
        "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b",
      ),
    );
  });

  test("the derived signing key matches AWS's documented example", () => {
    expect(signingKey("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam").toString("hex")).toBe(
      "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d",
    );
  });
});

describe("SigV4: Bedrock requests", () => {
  // Expected signatures computed independently with botocore's SigV4Auth for the same request.
  const bedrockInput = (sessionToken?: string) => ({
    method: "POST",
    host: "bedrock-runtime.us-east-1.amazonaws.com",
    path: `/model/${encodeURIComponent("anthropic.claude-sonnet-4-5-20250929-v1:0")}/converse`,
    headers: { "content-type": "application/json" },
    body: '{"messages":[{"role":"user","content":[{"text":"Hello"}]}]}',
    region: "us-east-1",
    service: "bedrock",
    credentials: { ...SUITE.credentials, ...(sessionToken ? { sessionToken } : {}) },
    date: new Date("2025-01-15T12:00:00Z"),
  });

  test("a model id with ':' is encoded once on the wire and twice in the canonical request", () => {
    const s = signRequest(bedrockInput());
    expect(bedrockInput().path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse");
    expect(s.canonicalRequest.split("\n")[1]).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%253A0/converse");
    expect(s.headers.authorization).toBe(
      "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250115/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=1b0e55c7db59e1a6af64ac021997fd75730bb2ae618b8b678b2df7b25f38acf7",
    );
  });

  test("with a session token", () => {
    const s = signRequest(bedrockInput("session-token-example"));
    expect(s.headers["x-amz-security-token"]).toBe("session-token-example");
    expect(s.signature).toBe("6dbd11872667ab79e0e48c6fd475e9ad537954395d66b60ae44f63f6ffd10f03");
  });

  test("canonical pieces: S3 paths are left alone, query values are strictly encoded", () => {
    expect(canonicalUri("/a%3Ab/c", true)).toBe("/a%3Ab/c");
    expect(canonicalUri("/a%3Ab/c")).toBe("/a%253Ab/c");
    expect(canonicalUri("")).toBe("/");
    expect(canonicalQuery("b=2&a=x y&a=1&c")).toBe("a=1&a=x%20y&b=2&c=");
    expect(canonicalQuery("k=a%2Fb+c")).toBe("k=a%2Fb%20c");
  });
});

// ---------------------------------------------------------------------------------------------
// Event stream
// ---------------------------------------------------------------------------------------------

async function collect(chunks: Uint8Array[]): Promise<EventStreamMessage[]> {
  async function* src() {
    for (const c of chunks) yield c;
  }
  const out: EventStreamMessage[] = [];
  for await (const m of decodeEventStream(src())) out.push(m);
  return out;
}

/** Encoded by this module and decoded, both CRCs checked, by botocore's independent EventStreamBuffer. */
const CROSS_CHECKED =
  "AAAA8AAAAKdlpLl/CzpldmVudC10eXBlBwARY29udGVudEJsb2NrRGVsdGENOmNvbnRlbnQtdHlwZQcAEGFwcGxpY2F0aW9uL2pzb24NOm1lc3NhZ2UtdHlwZQcABWV2ZW50BGZsYWcAA29mZgEBYgL5AXMDBNIBaQT//h3AAWwFACAAAAAAAAEDcmF3BgADAP8QAnRzCAAAAZRp1bJ7AmlkCQ8eLTxLWml4h5altMPS4fB7ImNvbnRlbnRCbG9ja0luZGV4IjowLCJkZWx0YSI6eyJ0ZXh0IjoiT2zDoSJ9LCJwIjoiYWJjIn1pljXc";

describe("event stream codec", () => {
  test("CRC-32 check value", () => {
    expect(crc32(enc.encode("123456789"))).toBe(0xcbf43926);
  });

  test("every header type round-trips, byte for byte with a frame an independent decoder accepted", async () => {
    const headers = {
      ":event-type": "contentBlockDelta",
      ":content-type": "application/json",
      ":message-type": "event",
      flag: { type: "bool", value: true },
      off: { type: "bool", value: false },
      b: { type: "byte", value: -7 },
      s: { type: "short", value: 1234 },
      i: { type: "int", value: -123456 },
      l: { type: "long", value: 9007199254740993n },
      raw: { type: "bytes", value: new Uint8Array([0, 255, 16]) },
      ts: { type: "timestamp", value: new Date(1736942400123) },
      id: { type: "uuid", value: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0" },
    } as const;
    const payload = '{"contentBlockIndex":0,"delta":{"text":"Olá"},"p":"abc"}';
    const bytes = encodeMessage({ headers, payload });
    expect(Buffer.from(bytes).toString("base64")).toBe(CROSS_CHECKED);
    const [m] = await collect([Buffer.from(CROSS_CHECKED, "base64")]);
    expect(new TextDecoder().decode(m?.payload)).toBe(payload);
    expect(m?.headers).toEqual({
      ":event-type": { type: "string", value: "contentBlockDelta" },
      ":content-type": { type: "string", value: "application/json" },
      ":message-type": { type: "string", value: "event" },
      flag: { type: "bool", value: true },
      off: { type: "bool", value: false },
      b: { type: "byte", value: -7 },
      s: { type: "short", value: 1234 },
      i: { type: "int", value: -123456 },
      l: { type: "long", value: 9007199254740993n },
      raw: { type: "bytes", value: new Uint8Array([0, 255, 16]) },
      ts: { type: "timestamp", value: new Date(1736942400123) },
      id: { type: "uuid", value: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0" },
    });
  });

  const three = [
    encodeMessage({ headers: { ":event-type": "a" }, payload: "first" }),
    encodeMessage({ headers: { ":event-type": "b" }, payload: "" }),
    encodeMessage({ headers: {}, payload: "x".repeat(1000) }),
  ];
  const summary = (ms: EventStreamMessage[]) =>
    ms.map((m) => `${headerString(m, ":event-type") ?? "-"}:${new TextDecoder().decode(m.payload).length}`);

  test("several messages in one chunk, and messages split at every possible byte", async () => {
    expect(summary(await collect([Buffer.concat(three)]))).toEqual(["a:5", "b:0", "-:1000"]);
    const all = Buffer.concat(three);
    const bytes = [...all].map((b) => new Uint8Array([b]));
    expect(summary(await collect(bytes))).toEqual(["a:5", "b:0", "-:1000"]);
    for (let cut = 1; cut < all.length; cut += 13) {
      expect(summary(await collect([all.subarray(0, cut), all.subarray(cut)]))).toEqual(["a:5", "b:0", "-:1000"]);
    }
    expect(summary(await collect(rechunk(three, [5, 2, 40])))).toEqual(["a:5", "b:0", "-:1000"]);
  });

  test("a ReadableStream source works too", async () => {
    const body = new Response(Buffer.concat(three)).body as ReadableStream<Uint8Array>;
    const out: EventStreamMessage[] = [];
    for await (const m of decodeEventStream(body)) out.push(m);
    expect(summary(out)).toEqual(["a:5", "b:0", "-:1000"]);
  });

  test("CRC mismatches, truncation and absurd lengths are errors", async () => {
    const good = encodeMessage({ headers: { ":event-type": "a" }, payload: "hello" });
    const badPayload = Uint8Array.from(good);
    badPayload[good.length - 6] = (badPayload[good.length - 6] as number) ^ 0x01;
    await expect(collect([badPayload])).rejects.toThrow("message CRC mismatch");
    const badPrelude = Uint8Array.from(good);
    badPrelude[8] = (badPrelude[8] as number) ^ 0xff;
    await expect(collect([badPrelude])).rejects.toThrow("prelude CRC mismatch");
    await expect(collect([good.subarray(0, good.length - 3)])).rejects.toThrow("ended in the middle of a message");
    const huge = new Uint8Array(12);
    const v = new DataView(huge.buffer);
    v.setUint32(0, 0x7fffffff);
    v.setUint32(4, 0);
    v.setUint32(8, crc32(huge, 0, 8));
    await expect(collect([huge])).rejects.toThrow("out of range");
  });
});

// ---------------------------------------------------------------------------------------------
// Request mapping
// ---------------------------------------------------------------------------------------------

const ctx = (over: Partial<CallContext> = {}): CallContext => ({
  signal: new AbortController().signal,
  log: createLogger("error", () => {}),
  fetchImage: async () => ({ mediaType: "image/jpeg", data: "ZmV0Y2hlZA==" }),
  ...over,
});

const base = (over: Partial<CanonicalRequest> = {}): CanonicalRequest => ({
  model: "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0",
  system: [],
  messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }],
  stream: false,
  ...over,
});

const CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const NOVA = "amazon.nova-pro-v1:0";

describe("request: canonical -> Converse", () => {
  test("system parts, cache points after cached parts, and merged turns starting with the user", async () => {
    const body = await toConverseRequest(
      base({
        system: [
          { type: "text", text: "You are terse.", cacheControl: { type: "ephemeral" } },
          { type: "text", text: "Answer in English." },
        ],
        messages: [
          { role: "assistant", content: [{ type: "text", text: "Hello! How can I help?" }] },
          { role: "user", content: [{ type: "text", text: "Weather?", cacheControl: { type: "ephemeral" } }] },
          {
            role: "user",
            content: [
              { type: "text", text: "  " },
              { type: "text", text: "In Lisbon." },
            ],
          },
        ],
      }),
      CLAUDE,
      ctx(),
    );
    expect(body.system).toEqual([
      { text: "You are terse." },
      { cachePoint: { type: "default" } },
      { text: "Answer in English." },
    ]);
    expect(body.messages).toEqual([
      { role: "user", content: [{ text: "." }] },
      { role: "assistant", content: [{ text: "Hello! How can I help?" }] },
      {
        role: "user",
        content: [{ text: "Weather?" }, { cachePoint: { type: "default" } }, { text: "In Lisbon." }],
      },
    ]);
    expect(body.toolConfig).toBeUndefined();
    expect(body.inferenceConfig).toBeUndefined();
    expect(body.additionalModelRequestFields).toBeUndefined();
  });

  test("images: data URLs inline, URLs downloaded through ctx.fetchImage, unsupported types rejected", async () => {
    const fetched: string[] = [];
    const body = await toConverseRequest(
      base({
        messages: [
          {
            role: "user",
            content: [
              { type: "image", source: { kind: "base64", mediaType: "image/png", data: "iVBORw0KGgo=" } },
              { type: "image", source: { kind: "url", url: "https://img.example.com/cat.jpg" } },
              { type: "text", text: "What are these?" },
            ],
          },
        ],
      }),
      NOVA,
      ctx({
        fetchImage: async (url) => {
          fetched.push(url);
          return { mediaType: "image/jpeg", data: "ZmV0Y2hlZA==" };
        },
      }),
    );
    expect(fetched).toEqual(["https://img.example.com/cat.jpg"]);
    expect(body.messages[0]?.content).toEqual([
      { image: { format: "png", source: { bytes: "iVBORw0KGgo=" } } },
      { image: { format: "jpeg", source: { bytes: "ZmV0Y2hlZA==" } } },
      { text: "What are these?" },
    ]);
    const bad = await toConverseRequest(
      base({
        messages: [
          {
            role: "user",
            content: [{ type: "image", source: { kind: "base64", mediaType: "image/bmp", data: "Qk0=" } }],
          },
        ],
      }),
      NOVA,
      ctx(),
    ).catch((e) => e);
    expect(bad).toBeInstanceOf(GatewayError);
    expect(bad.status).toBe(400);
    expect(bad.message).toContain("image/bmp");
  });

  test("tool calls, tool results (json, text, image, error) and signed thinking", async () => {
    const body = await toConverseRequest(
      base({
        messages: [
          { role: "user", content: [{ type: "text", text: "Weather in Lisbon and Porto?" }] },
          {
            role: "assistant",
            content: [
              { type: "thinking", text: "Two calls.", signature: "sig-1" },
              { type: "thinking", text: "unsigned, from another upstream" },
              { type: "thinking", text: "", redacted: "cmVkYWN0ZWQ=" },
              { type: "text", text: "Checking." },
              { type: "tool_call", id: "tooluse_1", name: "get_weather", arguments: '{"city":"Lisbon"}' },
              { type: "tool_call", id: "tooluse_2", name: "get_weather", arguments: "" },
              { type: "tool_call", id: "tooluse_3", name: "get_weather", arguments: "{not json" },
            ],
          },
          {
            role: "user",
            content: [
              { type: "tool_result", toolCallId: "tooluse_1", content: [{ type: "text", text: '{"temp_c":21}' }] },
              {
                type: "tool_result",
                toolCallId: "tooluse_2",
                content: [{ type: "text", text: "city missing" }],
                isError: true,
              },
              {
                type: "tool_result",
                toolCallId: "tooluse_3",
                content: [
                  { type: "text", text: "[1,2]" },
                  { type: "image", source: { kind: "base64", mediaType: "image/webp", data: "UklGRg==" } },
                ],
                cacheControl: { type: "ephemeral" },
              },
            ],
          },
        ],
        tools: [{ name: "get_weather", description: "Weather by city", parameters: { type: "object" } }],
      }),
      CLAUDE,
      ctx(),
    );
    expect(body.messages[1]).toEqual({
      role: "assistant",
      content: [
        { reasoningContent: { reasoningText: { text: "Two calls.", signature: "sig-1" } } },
        { reasoningContent: { redactedContent: "cmVkYWN0ZWQ=" } },
        { text: "Checking." },
        { toolUse: { toolUseId: "tooluse_1", name: "get_weather", input: { city: "Lisbon" } } },
        { toolUse: { toolUseId: "tooluse_2", name: "get_weather", input: {} } },
        { toolUse: { toolUseId: "tooluse_3", name: "get_weather", input: { _raw: "{not json" } } },
      ],
    });
    expect(body.messages[2]).toEqual({
      role: "user",
      content: [
        { toolResult: { toolUseId: "tooluse_1", content: [{ json: { temp_c: 21 } }] } },
        { toolResult: { toolUseId: "tooluse_2", content: [{ text: "city missing" }], status: "error" } },
        {
          toolResult: {
            toolUseId: "tooluse_3",
            content: [{ text: "[1,2]" }, { image: { format: "webp", source: { bytes: "UklGRg==" } } }],
          },
        },
        { cachePoint: { type: "default" } },
      ],
    });
    expect(body.toolConfig).toEqual({
      tools: [
        {
          toolSpec: { name: "get_weather", description: "Weather by city", inputSchema: { json: { type: "object" } } },
        },
      ],
    });
  });

  test("inferenceConfig; top_k and thinking only for Anthropic models; dropped fields", async () => {
    const sampling = {
      maxTokens: 300,
      temperature: 0.2,
      topP: 0.9,
      topK: 40,
      stop: ["END"],
      seed: 7,
      presencePenalty: 0.5,
      user: "u1",
    } satisfies Partial<CanonicalRequest>;
    const claude = await toConverseRequest(base(sampling), CLAUDE, ctx());
    expect(claude.inferenceConfig).toEqual({ maxTokens: 300, temperature: 0.2, topP: 0.9, stopSequences: ["END"] });
    expect(claude.additionalModelRequestFields).toEqual({ top_k: 40 });
    expect(JSON.stringify(claude)).not.toContain("seed");
    const global = await toConverseRequest(base(sampling), `global.${CLAUDE}`, ctx());
    expect(global.additionalModelRequestFields).toEqual({ top_k: 40 });
    const nova = await toConverseRequest(base({ ...sampling, reasoningEffort: "high" }), NOVA, ctx());
    expect(nova.additionalModelRequestFields).toBeUndefined();

    const effort = await toConverseRequest(
      base({ reasoningEffort: "medium" }),
      CLAUDE,
      ctx({ defaultMaxTokens: 64000 }),
    );
    expect(effort.additionalModelRequestFields).toEqual({ thinking: { type: "enabled", budget_tokens: 4096 } });
    expect(effort.inferenceConfig).toEqual({ maxTokens: 64000 });
    const small = await toConverseRequest(base({ thinkingBudget: 2000, maxTokens: 500 }), CLAUDE, ctx());
    expect(small.additionalModelRequestFields).toEqual({ thinking: { type: "enabled", budget_tokens: 2000 } });
    expect(small.inferenceConfig).toEqual({ maxTokens: 2500 });
  });

  test("tool choice: auto, required -> any, tool, none (dropped, or auto when the history has tool blocks)", async () => {
    const tools = [{ name: "f", parameters: { type: "object", properties: {} } }];
    const choose = async (toolChoice: CanonicalRequest["toolChoice"], messages?: CanonicalRequest["messages"]) =>
      (
        await toConverseRequest(
          base({ tools, ...(toolChoice ? { toolChoice } : {}), ...(messages ? { messages } : {}) }),
          CLAUDE,
          ctx(),
        )
      ).toolConfig;
    expect((await choose({ type: "auto" }))?.toolChoice).toEqual({ auto: {} });
    expect((await choose({ type: "required" }))?.toolChoice).toEqual({ any: {} });
    expect((await choose({ type: "tool", name: "f" }))?.toolChoice).toEqual({ tool: { name: "f" } });
    expect((await choose(undefined))?.toolChoice).toBeUndefined();
    expect(await choose({ type: "none" })).toBeUndefined();
    const history: CanonicalRequest["messages"] = [
      { role: "user", content: [{ type: "text", text: "go" }] },
      { role: "assistant", content: [{ type: "tool_call", id: "t1", name: "f", arguments: "{}" }] },
      { role: "user", content: [{ type: "tool_result", toolCallId: "t1", content: [{ type: "text", text: "ok" }] }] },
    ];
    expect(await choose({ type: "none" }, history)).toEqual({
      tools: [{ toolSpec: { name: "f", inputSchema: { json: { type: "object", properties: {} } } } }],
      toolChoice: { auto: {} },
    });
    // No tool definitions but tool blocks in the history: the named tools are declared.
    const bare = await toConverseRequest(base({ messages: history }), CLAUDE, ctx());
    expect(bare.toolConfig).toEqual({
      tools: [{ toolSpec: { name: "f", inputSchema: { json: { type: "object" } } } }],
    });
  });

  test("tools with cacheControl get a cache point; json_schema becomes a forced json_output tool", async () => {
    const body = await toConverseRequest(
      base({
        tools: [{ name: "f", parameters: { type: "object" }, cacheControl: { type: "ephemeral" } }],
        responseFormat: {
          type: "json_schema",
          name: "weather",
          schema: { type: "object", properties: { temp_c: { type: "number" } } },
        },
      }),
      CLAUDE,
      ctx(),
    );
    expect(body.toolConfig).toEqual({
      tools: [
        { toolSpec: { name: "f", inputSchema: { json: { type: "object" } } } },
        { cachePoint: { type: "default" } },
        {
          toolSpec: {
            name: "json_output",
            description: "Respond with the weather object as this tool's input.",
            inputSchema: { json: { type: "object", properties: { temp_c: { type: "number" } } } },
          },
        },
      ],
      toolChoice: { tool: { name: "json_output" } },
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Response mapping
// ---------------------------------------------------------------------------------------------

const rc = { provider: "bedrock", id: "req-1", model: CLAUDE, jsonMode: false };

describe("response: Converse -> canonical", () => {
  test("text with cache usage: canonical input includes cache reads and writes", () => {
    const res = fromConverse(bedrockFixture<ConverseResponse>("converse-text.json"), rc);
    expect(res).toMatchObject({ id: "req-1", model: CLAUDE });
    expect(res.choices).toEqual([
      {
        index: 0,
        content: [{ type: "text", text: "Lisbon is sunny today, around 21 °C." }],
        finishReason: "end_turn",
        stopSequence: null,
      },
    ]);
    expect(res.usage).toEqual({
      inputTokens: 2600,
      cacheReadTokens: 2000,
      cacheWriteTokens: 500,
      outputTokens: 50,
      reasoningTokens: 0,
    });
  });

  test("parallel tool calls: arguments serialised once", () => {
    const res = fromConverse(bedrockFixture<ConverseResponse>("converse-tool-calls.json"), rc);
    expect(res.choices[0]?.finishReason).toBe("tool_calls");
    expect(res.choices[0]?.content).toEqual([
      { type: "text", text: "I'll check both cities." },
      { type: "tool_call", id: "tooluse_Lis1kC0aT7WqZr9xYbN2Qw", name: "get_weather", arguments: '{"city":"Lisbon"}' },
      { type: "tool_call", id: "tooluse_Por2mD1bU8XrAs0zZcO3Rx", name: "get_weather", arguments: '{"city":"Porto"}' },
    ]);
    expect(res.usage.inputTokens).toBe(412);
  });

  test("reasoning blocks (signed and redacted) become thinking parts", () => {
    const res = fromConverse(bedrockFixture<ConverseResponse>("converse-reasoning.json"), rc);
    expect(res.choices[0]?.finishReason).toBe("max_tokens");
    expect(res.choices[0]?.content).toEqual([
      {
        type: "thinking",
        text: "The user wants the capital of Portugal. That is Lisbon.",
        signature: "EqoBCkgIARABGAIiQL7f4Zq2vR1r9sYw0bUc5mTn1eJdQpLxH3aK8oWz6tYgVfC2u",
      },
      { type: "thinking", text: "", redacted: "RXJyb3IgcmVkYWN0ZWQgdGhpbmtpbmc=" },
      { type: "text", text: "Lisbon." },
    ]);
  });

  test("every stop reason", () => {
    const table: Record<string, string> = {
      end_turn: "end_turn",
      tool_use: "tool_calls",
      max_tokens: "max_tokens",
      stop_sequence: "stop_sequence",
      guardrail_intervened: "content_filter",
      content_filtered: "content_filter",
      model_context_window_exceeded: "context_window_exceeded",
      something_new: "end_turn",
    };
    for (const [bedrock, canonical] of Object.entries(table))
      expect(finishFromConverse(bedrock, false)).toBe(canonical as never);
    expect(finishFromConverse(undefined, false)).toBe("end_turn");
    expect(finishFromConverse("tool_use", true)).toBe("end_turn");
  });

  test("json mode: the json_output tool's input is the text answer", () => {
    const res = fromConverse(
      {
        output: {
          message: {
            role: "assistant",
            content: [{ toolUse: { toolUseId: "t", name: "json_output", input: { temp_c: 21 } } }],
          },
        },
        stopReason: "tool_use",
        usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
      },
      { ...rc, jsonMode: true },
    );
    expect(res.choices[0]).toMatchObject({
      content: [{ type: "text", text: '{"temp_c":21}' }],
      finishReason: "end_turn",
    });
  });

  test("usage without cache fields; a body without content is a protocol error", () => {
    expect(usageFromConverse({ inputTokens: 7, outputTokens: 3 })).toMatchObject({
      inputTokens: 7,
      cacheReadTokens: 0,
    });
    expect(() => fromConverse({} as ConverseResponse, rc)).toThrow(UpstreamError);
  });
});

// ---------------------------------------------------------------------------------------------
// Stream mapping
// ---------------------------------------------------------------------------------------------

async function streamEvents(items: StreamItem[], jsonMode = false): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  async function* src() {
    for (const c of rechunk(encodeStreamItems(items), [11, 3, 97])) yield c;
  }
  for await (const ev of converseStreamEvents(src(), { ...rc, jsonMode })) out.push(ev);
  return out;
}

const withoutCreated = (evs: StreamEvent[]) =>
  evs.map((e) => (e.type === "start" ? { type: e.type, id: e.id, model: e.model } : e));

describe("stream: ConverseStream -> canonical events", () => {
  test("text", async () => {
    const evs = await streamEvents(bedrockFixture("converse-stream-text.json"));
    expect(withoutCreated(evs)).toEqual([
      { type: "start", id: "req-1", model: CLAUDE },
      { type: "text_delta", choice: 0, text: "Lisbon is" },
      { type: "text_delta", choice: 0, text: " sunny" },
      { type: "text_delta", choice: 0, text: " today." },
      { type: "finish", choice: 0, reason: "end_turn", stopSequence: null },
      {
        type: "usage",
        usage: { inputTokens: 2600, cacheReadTokens: 2000, cacheWriteTokens: 500, outputTokens: 5, reasoningTokens: 0 },
      },
    ]);
  });

  test("parallel tool calls get tool indexes 0 and 1", async () => {
    const evs = await streamEvents(bedrockFixture("converse-stream-tools.json"));
    expect(withoutCreated(evs).slice(1, -1)).toEqual([
      { type: "text_delta", choice: 0, text: "Checking both." },
      { type: "tool_call_start", choice: 0, index: 0, id: "tooluse_Lis1kC0aT7WqZr9xYbN2Qw", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '{"city": ' },
      { type: "tool_call_delta", choice: 0, index: 0, arguments: '"Lisbon"}' },
      { type: "tool_call_start", choice: 0, index: 1, id: "tooluse_Por2mD1bU8XrAs0zZcO3Rx", name: "get_weather" },
      { type: "tool_call_delta", choice: 0, index: 1, arguments: '{"city": "Po' },
      { type: "tool_call_delta", choice: 0, index: 1, arguments: 'rto"}' },
      { type: "finish", choice: 0, reason: "tool_calls", stopSequence: null },
    ]);
  });

  test("reasoning deltas and signatures", async () => {
    const evs = await streamEvents([
      { event: "messageStart", payload: { role: "assistant" } },
      { event: "contentBlockDelta", payload: { contentBlockIndex: 0, delta: { reasoningContent: { text: "Hmm." } } } },
      {
        event: "contentBlockDelta",
        payload: { contentBlockIndex: 0, delta: { reasoningContent: { signature: "sig" } } },
      },
      { event: "contentBlockDelta", payload: { contentBlockIndex: 1, delta: { text: "Yes." } } },
      { event: "messageStop", payload: { stopReason: "max_tokens" } },
    ]);
    expect(withoutCreated(evs).slice(1)).toEqual([
      { type: "thinking_delta", choice: 0, text: "Hmm." },
      { type: "thinking_delta", choice: 0, text: "", signature: "sig" },
      { type: "text_delta", choice: 0, text: "Yes." },
      { type: "finish", choice: 0, reason: "max_tokens", stopSequence: null },
    ]);
  });

  test("json mode streams the json_output input as text", async () => {
    const evs = await streamEvents(
      [
        { event: "messageStart", payload: { role: "assistant" } },
        {
          event: "contentBlockStart",
          payload: { contentBlockIndex: 0, start: { toolUse: { toolUseId: "t", name: "json_output" } } },
        },
        { event: "contentBlockDelta", payload: { contentBlockIndex: 0, delta: { toolUse: { input: '{"temp_c":' } } } },
        { event: "contentBlockDelta", payload: { contentBlockIndex: 0, delta: { toolUse: { input: "21}" } } } },
        { event: "messageStop", payload: { stopReason: "tool_use" } },
      ],
      true,
    );
    expect(withoutCreated(evs).slice(1)).toEqual([
      { type: "text_delta", choice: 0, text: '{"temp_c":' },
      { type: "text_delta", choice: 0, text: "21}" },
      { type: "finish", choice: 0, reason: "end_turn", stopSequence: null },
    ]);
  });

  test("exceptions become UpstreamErrors with the matching status", async () => {
    const cases: [string, number][] = [
      ["throttlingException", 429],
      ["validationException", 400],
      ["modelStreamErrorException", 502],
      ["internalServerException", 500],
      ["serviceUnavailableException", 503],
      ["modelTimeoutException", 504],
      ["somethingNewException", 502],
    ];
    for (const [type, status] of cases) {
      const seen: StreamEvent[] = [];
      const err = await (async () => {
        async function* src() {
          yield* encodeStreamItems([
            { event: "messageStart", payload: { role: "assistant" } },
            { event: "contentBlockDelta", payload: { contentBlockIndex: 0, delta: { text: "Hi" } } },
            { exception: type, payload: { message: `boom ${type}` } },
          ]);
        }
        for await (const ev of converseStreamEvents(src(), rc)) seen.push(ev);
      })().catch((e) => e);
      expect(seen.map((e) => e.type)).toEqual(["start", "text_delta"]);
      expect(err).toBeInstanceOf(UpstreamError);
      expect(`${type} ${err.status} ${err.kind}`).toBe(`${type} ${status} http`);
      expect(err.upstreamType).toBe(type);
      expect(err.message).toContain(`boom ${type}`);
    }
  });

  test("error messages and broken framing", async () => {
    async function* errorMsg() {
      yield encodeMessage({
        headers: { ":message-type": "error", ":error-code": "InternalFailure", ":error-message": "oops" },
        payload: "",
      });
    }
    const e1 = await (async () => {
      for await (const _ of converseStreamEvents(errorMsg(), rc));
    })().catch((e) => e);
    expect(e1).toMatchObject({ kind: "http", status: 502, upstreamType: "InternalFailure" });
    expect(e1.message).toContain("oops");
    async function* broken() {
      const m = encodeMessage({ headers: { ":message-type": "event", ":event-type": "messageStart" }, payload: "{}" });
      m[m.length - 1] = (m[m.length - 1] as number) ^ 1;
      yield m;
    }
    const e2 = await (async () => {
      for await (const _ of converseStreamEvents(broken(), rc));
    })().catch((e) => e);
    expect(e2).toMatchObject({ kind: "protocol", status: 502 });
    expect(e2.message).toContain("CRC");
  });
});

// ---------------------------------------------------------------------------------------------
// Adapter: configuration, URLs, signing, auth modes, errors
// ---------------------------------------------------------------------------------------------

const CREDS = { accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "bedrock-unit-secret-0123456789abcdef" };
const mock = startMockUpstream();
afterAll(() => mock.close());

const dep = (model = CLAUDE, over: Partial<Deployment> = {}): Deployment => ({
  id: `bedrock/${model}`,
  provider: "bedrock",
  upstreamModel: model,
  weight: 1,
  ...over,
});

const cfg = (over: Partial<ProviderConfig> = {}): ProviderConfig => ({
  type: "bedrock",
  api_base: mock.url,
  region: "eu-west-1",
  access_key_id: CREDS.accessKeyId,
  secret_access_key: CREDS.secretAccessKey,
  ...over,
});

describe("adapter", () => {
  beforeEach(() => mock.reset());

  test("configuration errors name the field", () => {
    const noRegion = () =>
      createBedrockAdapter("aws", { type: "bedrock", access_key_id: "a", secret_access_key: "b" }, { env: {} });
    expect(noRegion).toThrow(ConfigError);
    expect(noRegion).toThrow("providers.aws.region");
    const noCreds = () => createBedrockAdapter("aws", { type: "bedrock", region: "us-east-1" }, { env: {} });
    expect(noCreds).toThrow("providers.aws.access_key_id");
    expect(() =>
      createBedrockAdapter("aws", { type: "bedrock", region: "x", access_key_id: "a" }, { env: {} }),
    ).toThrow("providers.aws.secret_access_key");
    expect(() =>
      createBedrockAdapter(
        "aws",
        { type: "bedrock", region: "x", api_key: "k", access_key_id: "a", secret_access_key: "b" },
        { env: {} },
      ),
    ).toThrow("not both");
    // Region and credentials from the environment.
    expect(
      createBedrockAdapter(
        "aws",
        { type: "bedrock" },
        { env: { AWS_DEFAULT_REGION: "us-west-2", AWS_BEARER_TOKEN_BEDROCK: "k" } },
      ).type,
    ).toBe("bedrock");
    expect(
      createBedrockAdapter(
        "aws",
        { type: "bedrock" },
        { env: { AWS_REGION: "us-west-2", AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "b" } },
      ).type,
    ).toBe("bedrock");
  });

  test("converse: URL with the encoded model id, a valid SigV4 signature for the region, mapped answer", async () => {
    mock.enqueue(() => bedrockJson("converse-text.json"));
    const a = createBedrockAdapter("bedrock", cfg({ session_token: "sess-token-xyz" }), { env: {} });
    const res = await a.chat(base({ maxTokens: 100 }), dep(), ctx());
    const up = mock.requests[0];
    expect(up?.path).toBe("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse");
    expect(up?.headers["content-type"]).toBe("application/json");
    expect(up?.headers["x-amz-security-token"]).toBe("sess-token-xyz");
    expect(up?.headers.authorization).toContain(`Credential=${CREDS.accessKeyId}/`);
    expect(up?.headers.authorization).toContain("/eu-west-1/bedrock/aws4_request");
    const check = up ? verifySigV4(up, CREDS) : undefined;
    expect(check).toMatchObject({ valid: true });
    expect(check?.canonicalRequest?.split("\n")[1]).toBe(
      "/model/anthropic.claude-sonnet-4-5-20250929-v1%253A0/converse",
    );
    expect(check?.signedHeaders).toEqual(["content-type", "host", "x-amz-date", "x-amz-security-token"]);
    expect(verifySigV4(up as never, { ...CREDS, secretAccessKey: "wrong" }).valid).toBe(false);
    expect(up?.json).toEqual({
      messages: [{ role: "user", content: [{ text: "Hi" }] }],
      inferenceConfig: { maxTokens: 100 },
    });
    expect(res).toMatchObject({ id: REQUEST_ID, model: CLAUDE, usage: { inputTokens: 2600 } });
  });

  test("a fixed clock: x-amz-date and the signed body are exactly what goes on the wire", async () => {
    mock.enqueue(() => bedrockConverse("ok", { input: 1, output: 1 }));
    const a = createBedrockAdapter("bedrock", cfg({ region: "us-east-1" }), {
      env: {},
      now: () => new Date("2025-01-15T12:00:00Z"),
    });
    await a.chat(base({ messages: [{ role: "user", content: [{ type: "text", text: "Hello" }] }] }), dep(), ctx());
    expect(mock.requests[0]?.headers["x-amz-date"]).toBe("20250115T120000Z");
    expect(mock.requests[0]?.text).toBe('{"messages":[{"role":"user","content":[{"text":"Hello"}]}]}');
    expect(verifySigV4(mock.requests[0] as never, CREDS).valid).toBe(true);
  });

  test("API key mode sends a bearer token and no SigV4 headers; a deployment api_key overrides", async () => {
    mock.enqueue(
      () => bedrockConverse("ok", { input: 1, output: 1 }),
      () => bedrockConverse("ok", { input: 1, output: 1 }),
    );
    const a = createBedrockAdapter(
      "bedrock",
      { type: "bedrock", api_base: mock.url, region: "us-east-1", api_key: "bedrock-api-key-abc" },
      { env: {} },
    );
    await a.chat(base(), dep(NOVA), ctx());
    expect(mock.requests[0]?.headers.authorization).toBe("Bearer bedrock-api-key-abc");
    expect(mock.requests[0]?.headers["x-amz-date"]).toBeUndefined();
    expect(mock.requests[0]?.path).toBe("/model/amazon.nova-pro-v1%3A0/converse");
    await a.chat(base(), dep(NOVA, { apiKey: "deployment-key-123" }), ctx());
    expect(mock.requests[1]?.headers.authorization).toBe("Bearer deployment-key-123");
  });

  test("n > 1 is a 400 on 'n' before any network call", async () => {
    const a = createBedrockAdapter("bedrock", cfg(), { env: {} });
    const e = await a.chat(base({ n: 2 }), dep(), ctx()).catch((x) => x);
    expect(e).toBeInstanceOf(GatewayError);
    expect(e).toMatchObject({ status: 400, param: "n", code: "unsupported_parameter" });
    const s = await a.chatStream(base({ n: 3, stream: true }), dep(), ctx()).catch((x) => x);
    expect(s).toMatchObject({ status: 400, param: "n" });
    expect(mock.requests).toHaveLength(0);
  });

  test("HTTP errors keep the status and take the type from x-amzn-errortype, with credentials scrubbed", async () => {
    mock.enqueue(
      () => bedrockError(400, "ValidationException", "The model returned the following errors: messages: bad"),
      () => bedrockError(429, "ThrottlingException", "Too many requests, please wait before trying again."),
      () => bedrockError(403, "UnrecognizedClientException", `The security token ${CREDS.secretAccessKey} is invalid.`),
    );
    const a = createBedrockAdapter("bedrock", cfg(), { env: {} });
    const e400 = await a.chat(base(), dep(), ctx()).catch((x) => x);
    expect(e400).toMatchObject({ kind: "http", status: 400, upstreamType: "ValidationException" });
    expect(e400.message).toContain("messages: bad");
    const e429 = await a.chat(base(), dep(), ctx()).catch((x) => x);
    expect(e429).toMatchObject({ status: 429, upstreamType: "ThrottlingException", retryable: true });
    const e403 = await a.chatStream(base({ stream: true }), dep(), ctx()).catch((x) => x);
    expect(e403).toMatchObject({ status: 403, upstreamType: "UnrecognizedClientException" });
    expect(e403.message).not.toContain(CREDS.secretAccessKey);
  });

  test("converse-stream: path, signature and events from the binary stream", async () => {
    mock.enqueue(() => bedrockStream("converse-stream-text.json"));
    const a = createBedrockAdapter("bedrock", cfg(), { env: {} });
    const events = await a.chatStream(base({ stream: true }), dep(`global.${CLAUDE}`), ctx());
    const text: string[] = [];
    for await (const ev of events) if (ev.type === "text_delta") text.push(ev.text);
    expect(text.join("")).toBe("Lisbon is sunny today.");
    expect(mock.requests[0]?.path).toBe("/model/global.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream");
    expect(verifySigV4(mock.requests[0] as never, CREDS).valid).toBe(true);
  });
});
