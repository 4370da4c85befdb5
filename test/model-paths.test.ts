/**
 * Model ids that reach upstream URL paths (Gemini, Vertex, Bedrock, Azure deployments): escaped
 * segment by segment, `.`/`..` segments refused with a 400 before anything is sent with the
 * provider's credentials; and wildcard names, which any caller may invent, never listed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { pgliteBackend } from "./helpers/backends";
import { type ErrorWire, type GeneratedWire, startGateway, type TestGateway } from "./helpers/gateway";
import { sdkClient } from "./helpers/inference";
import { anthropicMessage } from "./mocks/anthropic";
import { bedrockConverse } from "./mocks/bedrock";
import { geminiText, testServiceAccount } from "./mocks/gemini";
import { openaiCompletion } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

const mock = startMockUpstream((r) => {
  if (r.path.includes("/model/")) return bedrockConverse("ok", { input: 1, output: 1 });
  if (r.path.endsWith(":rawPredict")) return anthropicMessage("ok", { input: 1, output: 1 });
  if (r.path.includes(":generateContent")) return geminiText("ok", { prompt: 1, candidates: 1 });
  return openaiCompletion("ok", { prompt: 1, completion: 1 });
});
const tokens = startMockUpstream(() =>
  Response.json({ access_token: "ya29.paths-token", expires_in: 3599, token_type: "Bearer" }),
);
const sa = testServiceAccount(`${tokens.url}/token`, "gw-paths");
let gw: TestGateway;
let key: GeneratedWire;
let client: OpenAI;

beforeAll(async () => {
  gw = await startGateway(pgliteBackend, {
    inference: {
      providers: {
        gemini: { type: "gemini", api_base: `${mock.url}/v1beta`, api_key: "AIzaGeminiProviderKey0123456789" },
        vertex: {
          type: "vertex",
          project: "gw-paths",
          location: "us-east5",
          credentials: sa.json,
          api_base: `${mock.url}/v1`,
        },
        bedrock: {
          type: "bedrock",
          api_base: mock.url,
          region: "us-east-1",
          api_key: "bedrock-provider-key-0123456789",
        },
        azure: {
          type: "azure",
          api_base: mock.url,
          api_version: "2024-10-21",
          api_key: "azure-provider-key-0123456789",
        },
        local: { type: "openai-compatible", api_base: `${mock.url}/v1` },
      },
      models: [
        { name: "gemini/*" },
        { name: "vertex/*" },
        { name: "bedrock/*" },
        { name: "azure/*" },
        { name: "local/*" },
        { name: "local/listed" },
        // Configured ids are trusted, but a dot-segment one is still never put in a URL.
        { name: "bedrock/dots", model: ".." },
        { name: "azure/dots", model: "." },
      ],
      router: { num_retries: 0 },
    },
  });
  key = await gw.newKey();
  client = sdkClient(gw, key.key);
});
afterAll(async () => {
  await gw.close();
  mock.close();
  tokens.close();
});

const ask = (model: string) => client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] });

describe("model ids in upstream URLs", () => {
  test("'.' and '..' segments are a 400 naming the model, and nothing goes upstream", async () => {
    mock.reset();
    for (const model of [
      "gemini/../../x",
      "gemini/models/../tunedModels/x",
      "vertex/..",
      "bedrock/..",
      "bedrock/a/../b",
      "azure/..",
      "azure/.",
      "bedrock/dots",
      "azure/dots",
    ]) {
      const err = await ask(model).catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.error).toMatchObject({ code: "invalid_model_name", param: "model" });
      const streamed = await client.chat.completions
        .create({ model, messages: [{ role: "user", content: "hi" }], stream: true })
        .catch((e) => e);
      expect(streamed).toBeInstanceOf(OpenAI.BadRequestError);
    }
    expect(mock.requests).toHaveLength(0);
  });

  test("the generateContent route refuses the same names, however the URL encodes them", async () => {
    mock.reset();
    for (const path of [
      "/v1beta/models/gemini%2F..%2F..%2Fx:generateContent",
      "/v1beta/models/gemini%2F%2E%2E%2Fx:generateContent",
    ]) {
      const r = await gw.call<{ error: { code: number; status: string } }>("POST", path, {
        key: key.key,
        body: { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
      });
      expect(r.status).toBe(400);
    }
    expect(mock.requests).toHaveLength(0);
  });

  test("other ids are escaped per segment: dots inside a segment, ':', '%', spaces and slashes stay in their segment", async () => {
    mock.reset();
    await ask("gemini/tunedModels/my-tuned.v2");
    await ask("gemini/a%2F..");
    await ask("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0");
    await ask("bedrock/arn:aws:bedrock:us-east-1:123456789012:inference-profile/x");
    await ask("azure/my deployment");
    await ask("vertex/claude-sonnet-4-5@20250929");
    expect(mock.requests.map((r) => r.path)).toEqual([
      "/v1beta/tunedModels/my-tuned.v2:generateContent",
      "/v1beta/models/a%252F..:generateContent",
      "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
      "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fx/converse",
      "/openai/deployments/my%20deployment/chat/completions",
      "/v1/projects/gw-paths/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
    ]);
  });
});

describe("wildcard names", () => {
  test("names asked for through a wildcard do not appear in /v1/models, for this key or any other", async () => {
    mock.reset();
    for (let i = 0; i < 5; i++) await ask(`local/invented-${i}`);
    const other = await gw.newKey();
    for (const k of [key.key, other.key]) {
      const ids = (await sdkClient(gw, k).models.list()).data.map((m) => m.id);
      expect(ids).toEqual(["azure/dots", "bedrock/dots", "local/listed"]);
    }
    // A name can still be looked up by itself.
    const one = await gw.call<{ id: string } & Partial<ErrorWire>>("GET", "/v1/models/local/invented-1", {
      key: key.key,
    });
    expect(one.body.id).toBe("local/invented-1");
  });
});
