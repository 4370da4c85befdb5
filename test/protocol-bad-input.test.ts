/**
 * Bad input on each of the four inference protocols, answered in that protocol's own envelope and
 * status: malformed JSON, wrong types, missing required fields, unknown models, and a missing key
 * (whose message says how that protocol's clients send one). Nothing reaches the upstream.
 */
import { afterAll, beforeEach, expect, test } from "bun:test";
import { describeEachBackend, type GeneratedWire, type TestGateway } from "./helpers/gateway";
import { startMockUpstream } from "./mocks/upstream";

const mock = startMockUpstream();
afterAll(() => mock.close());

const MODEL = "openai/gpt-4o-mini";

type Shape = "openai" | "anthropic" | "google";

interface Case {
  label: string;
  /** The raw body (sent as-is) or a value to JSON-encode. */
  body: string | Record<string, unknown>;
  status: number;
  /** OpenAI's `param`, when the protocol names the field in its own field. */
  param?: string | null;
  code?: string;
  /** A fragment of the message (every shape has one). */
  message: string;
}

interface Endpoint {
  name: string;
  shape: Shape;
  path: (model: string) => string;
  /** A valid body for `model` (the model goes in the URL for Google's routes). */
  valid: (model: string) => Record<string, unknown>;
  /** How the key is sent by this protocol's clients. */
  keyHeader: (key: string) => Record<string, string>;
  cases: Case[];
}

const ENDPOINTS: Endpoint[] = [
  {
    name: "chat completions",
    shape: "openai",
    path: () => "/v1/chat/completions",
    valid: (model) => ({ model, messages: [{ role: "user", content: "hi" }] }),
    keyHeader: (key) => ({ authorization: `Bearer ${key}` }),
    cases: [
      { label: "malformed JSON", body: "{bad", status: 400, param: null, code: "invalid_json", message: "Malformed" },
      {
        label: "wrong type",
        body: { model: MODEL, messages: [{ role: "user", content: "hi" }], temperature: "hot" },
        status: 400,
        param: "temperature",
        code: "invalid_value",
        message: "Invalid 'temperature'",
      },
      {
        label: "missing field",
        body: { model: MODEL },
        status: 400,
        param: "messages",
        code: "missing_field",
        message: "'messages'",
      },
    ],
  },
  {
    name: "responses",
    shape: "openai",
    path: () => "/v1/responses",
    valid: (model) => ({ model, input: "hi" }),
    keyHeader: (key) => ({ authorization: `Bearer ${key}` }),
    cases: [
      { label: "malformed JSON", body: "{bad", status: 400, param: null, code: "invalid_json", message: "Malformed" },
      {
        label: "wrong type",
        body: { model: MODEL, input: "hi", max_output_tokens: "many" },
        status: 400,
        param: "max_output_tokens",
        code: "invalid_value",
        message: "Invalid 'max_output_tokens'",
      },
      {
        label: "missing field",
        body: { input: "hi" },
        status: 400,
        param: "model",
        code: "missing_field",
        message: "'model'",
      },
    ],
  },
  {
    name: "messages",
    shape: "anthropic",
    path: () => "/v1/messages",
    valid: (model) => ({ model, max_tokens: 10, messages: [{ role: "user", content: "hi" }] }),
    keyHeader: (key) => ({ "x-api-key": key }),
    cases: [
      { label: "malformed JSON", body: "{bad", status: 400, message: "Malformed" },
      {
        label: "wrong type",
        body: { model: MODEL, max_tokens: "ten", messages: [{ role: "user", content: "hi" }] },
        status: 400,
        message: "Invalid 'max_tokens'",
      },
      {
        label: "missing field",
        body: { model: MODEL, messages: [{ role: "user", content: "hi" }] },
        status: 400,
        message: "Missing required field 'max_tokens'",
      },
    ],
  },
  {
    name: "generateContent",
    shape: "google",
    path: (model) => `/v1beta/models/${model}:generateContent`,
    valid: () => ({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }),
    keyHeader: (key) => ({ "x-goog-api-key": key }),
    cases: [
      { label: "malformed JSON", body: "{bad", status: 400, message: "Malformed" },
      {
        label: "wrong type",
        body: { contents: [{ role: "user", parts: [{ text: "hi" }] }], generationConfig: { maxOutputTokens: "ten" } },
        status: 400,
        message: "Invalid 'generationConfig.maxOutputTokens'",
      },
      {
        label: "missing field",
        body: { systemInstruction: { parts: [{ text: "x" }] } },
        status: 400,
        message: "'contents'",
      },
    ],
  },
  {
    name: "streamGenerateContent under /v1",
    shape: "google",
    path: (model) => `/v1/models/${model}:streamGenerateContent?alt=sse`,
    valid: () => ({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }),
    keyHeader: (key) => ({ "x-goog-api-key": key }),
    cases: [
      { label: "malformed JSON", body: "{bad", status: 400, message: "Malformed" },
      { label: "wrong type", body: { contents: "hi" }, status: 400, message: "Invalid 'contents'" },
    ],
  },
];

/** Checks the envelope is exactly the protocol's and returns its message. */
function envelope(shape: Shape, status: number, body: unknown, label: string): string {
  const b = body as Record<string, Record<string, unknown>>;
  switch (shape) {
    case "openai":
      expect([label, Object.keys(b.error ?? {}).sort()]).toEqual([label, ["code", "message", "param", "type"]]);
      return String(b.error?.message);
    case "anthropic":
      expect([label, b.type, Object.keys(b.error ?? {}).sort()]).toEqual([label, "error", ["message", "type"]]);
      return String(b.error?.message);
    case "google": {
      expect([label, Object.keys(b.error ?? {}).sort()]).toEqual([label, ["code", "message", "status"]]);
      expect([label, b.error?.code]).toEqual([label, status]);
      return String(b.error?.message);
    }
  }
}

const ANTHROPIC_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  404: "not_found_error",
};
const GOOGLE_STATUS: Record<number, string> = { 400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND" };

async function send(
  gw: TestGateway,
  ep: Endpoint,
  model: string,
  body: string | Record<string, unknown>,
  headers: Record<string, string>,
) {
  const res = await gw.app.handle(
    new Request(`http://localhost${ep.path(model)}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    }),
  );
  const text = await res.text();
  expect(text).not.toMatch(/\bat .+:\d+:\d+|node_modules|\.ts:\d+/);
  return { status: res.status, body: JSON.parse(text) as unknown };
}

describeEachBackend(
  "bad input in each protocol's own shape",
  (gw) => {
    let key: GeneratedWire;
    beforeEach(async () => {
      mock.reset();
      key ??= await gw().newKey();
    });

    for (const ep of ENDPOINTS) {
      test(`${ep.name}: malformed JSON, wrong types, missing fields are 400; an unknown model is 404`, async () => {
        for (const c of ep.cases) {
          const r = await send(gw(), ep, MODEL, c.body, ep.keyHeader(key.key));
          const label = `${ep.name} ${c.label}`;
          expect([label, r.status]).toEqual([label, c.status]);
          const message = envelope(ep.shape, c.status, r.body, label);
          expect([label, message]).toEqual([label, expect.stringContaining(c.message)]);
          const b = r.body as Record<string, Record<string, unknown>>;
          if (ep.shape === "openai") {
            expect([label, b.error?.type, b.error?.param, b.error?.code]).toEqual([
              label,
              "invalid_request_error",
              c.param,
              c.code,
            ]);
          } else if (ep.shape === "anthropic") expect(b.error?.type).toBe(ANTHROPIC_TYPES[c.status] as string);
          else expect(b.error?.status).toBe(GOOGLE_STATUS[c.status] as string);
        }
        const unknown = await send(
          gw(),
          ep,
          "openai/no-such-model",
          ep.valid("openai/no-such-model"),
          ep.keyHeader(key.key),
        );
        expect([ep.name, unknown.status]).toEqual([ep.name, 404]);
        const message = envelope(ep.shape, 404, unknown.body, `${ep.name} unknown model`);
        expect(message).toContain("'openai/no-such-model' does not exist");
        expect(mock.requests).toHaveLength(0);
      });
    }

    test("a missing key is 401 in each protocol's shape, saying how that protocol's clients send it", async () => {
      const hints: Record<string, string> = {
        "chat completions": "send it as 'Authorization: Bearer <key>'",
        responses: "send it as 'Authorization: Bearer <key>'",
        messages: "send it as 'x-api-key: <key>' (or 'Authorization: Bearer <key>')",
        generateContent: "send it as 'x-goog-api-key: <key>', '?key=<key>' or 'Authorization: Bearer <key>'",
        "streamGenerateContent under /v1":
          "send it as 'x-goog-api-key: <key>', '?key=<key>' or 'Authorization: Bearer <key>'",
      };
      for (const ep of ENDPOINTS) {
        const r = await send(gw(), ep, MODEL, ep.valid(MODEL), {});
        expect([ep.name, r.status]).toEqual([ep.name, 401]);
        const message = envelope(ep.shape, 401, r.body, ep.name);
        expect([ep.name, message]).toEqual([ep.name, `Missing API key: ${hints[ep.name]}`]);
      }
      const count = await gw().app.handle(
        new Request("http://localhost/v1/messages/count_tokens", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: MODEL, messages: [] }),
        }),
      );
      expect(((await count.json()) as { error: { message: string } }).error.message).toContain("x-api-key");
    });

    test("GET /v1/models/{model} is OpenAI's even when the model name has a colon; only the generateContent methods under /v1 are Google's", async () => {
      for (const path of ["/v1/models/zz/llama3:latest", "/v1/models/zz%2Fllama3:latest"]) {
        const r = await gw().call("GET", path, { key: key.key });
        expect([path, r.status]).toEqual([path, 404]);
        envelope("openai", 404, r.body, path);
      }
      const noKey = await gw().call("GET", "/v1/models/zz/llama3:latest", { key: null });
      expect(noKey.status).toBe(401);
      envelope("openai", 401, noKey.body, "GET without a key");
      const google = await gw().call("POST", "/v1/models/openai/gpt-4o-mini:generateContent", {
        key: null,
        body: { contents: [] },
      });
      expect(google.status).toBe(401);
      envelope("google", 401, google.body, "generateContent without a key");
    });
  },
  () => ({
    inference: {
      providers: { openai: { type: "openai", api_base: `${mock.url}/v1`, api_key: "sk-provider" } },
      models: [{ name: MODEL }],
      router: { num_retries: 0 },
    },
  }),
);
