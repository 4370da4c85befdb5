/** /openapi.json: valid OpenAPI 3.1, only the public inference and catalog operations, built from the validators' schemas. */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { compileErrors, validate } from "@readme/openapi-parser";
import { Value } from "@sinclair/typebox/value";
import Ajv2020 from "ajv/dist/2020";
import { ModelHub } from "../src/catalog/schema";
import { jsonSchema } from "../src/openapi/document";
import { MessagesRequest } from "../src/protocols/anthropic/schema";
import { GenerateContentRequestSchema } from "../src/protocols/gemini/schema";
import { ChatCompletionRequest, ChatCompletionResponse, OpenAIErrorBody } from "../src/protocols/openai-chat/schema";
import { ResponseDeleted, ResponseObject, ResponsesRequest } from "../src/protocols/openai-responses/schema";
import { pgliteBackend } from "./helpers/backends";
import { startGateway, type TestGateway } from "./helpers/gateway";
import { openaiJson } from "./mocks/openai";
import { startMockUpstream } from "./mocks/upstream";

const mock = startMockUpstream(() => openaiJson("chat-completion.json"));
let gw: TestGateway;
type Doc = {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        requestBody?: { content: Record<string, unknown> };
        responses: Record<string, { content?: Record<string, unknown> }>;
      }
    >
  >;
  components: { schemas: Record<string, unknown> };
};
let doc: Doc;

beforeAll(async () => {
  gw = await startGateway(pgliteBackend, {
    inference: {
      providers: { up: { type: "openai", api_base: mock.url } },
      models: [{ name: "up/m", input_cost_per_token: 1e-6, output_cost_per_token: null }],
    },
  });
  doc = (await gw.call<Doc>("GET", "/openapi.json", { key: null })).body;
});
afterAll(async () => {
  await gw.close();
  mock.close();
});

describe("/openapi.json", () => {
  test("is a valid OpenAPI 3.1 document", async () => {
    expect(doc.openapi).toStartWith("3.1");
    const result = await validate(structuredClone(doc) as never);
    if (!result.valid) throw new Error(compileErrors(result));
    expect(result.valid).toBe(true);
  });

  test("every component schema is valid JSON Schema 2020-12, and every operation documents its answer", () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    // OpenAPI's own keywords inside schemas (e.g. x- extensions) are annotations to JSON Schema.
    for (const [name, schema] of Object.entries(doc.components.schemas)) {
      expect(() => ajv.compile(schema as object), name).not.toThrow();
    }
    expect(() => ajv.compile({ type: "objectt" })).toThrow();
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) expect(op.responses["200"], `${method} ${path}`).toBeDefined();
    }
  });

  test("describes the four inference protocols and the catalog, and nothing else", () => {
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        "/public/model_hub",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/models",
        "/v1/models/{model}",
        "/v1/models/{model}:generateContent",
        "/v1/models/{model}:streamGenerateContent",
        "/v1/responses",
        "/v1/responses/{response_id}",
        "/v1beta/models/{model}:generateContent",
        "/v1beta/models/{model}:streamGenerateContent",
      ].sort(),
    );
    const text = JSON.stringify(doc);
    for (const hidden of ["/key/", "/team/", "/spend/", "/health/", "master"]) expect(text).not.toContain(hidden);
  });

  test("stored responses can be read and deleted: GET and DELETE /v1/responses/{response_id}", () => {
    const item = doc.paths["/v1/responses/{response_id}"] ?? {};
    expect(Object.keys(item).sort()).toEqual(["delete", "get"]);
    expect(item.get?.responses["200"]?.content).toEqual({
      "application/json": { schema: { $ref: "#/components/schemas/Response" } },
    });
    expect(item.delete?.responses["200"]?.content).toEqual({
      "application/json": { schema: { $ref: "#/components/schemas/ResponseDeleted" } },
    });
    expect(doc.components.schemas.ResponseDeleted).toEqual(jsonSchema(ResponseDeleted));
    expect(item.get?.responses["404"]).toBeDefined();
  });

  test("request bodies are the validators' own schemas; responses and SSE streams are documented", () => {
    expect(doc.components.schemas.ChatCompletionRequest).toEqual(jsonSchema(ChatCompletionRequest));
    expect(doc.components.schemas.ResponsesRequest).toEqual(jsonSchema(ResponsesRequest));
    expect(doc.components.schemas.MessagesRequest).toEqual(jsonSchema(MessagesRequest));
    expect(doc.components.schemas.GenerateContentRequest).toEqual(jsonSchema(GenerateContentRequestSchema));
    for (const path of [
      "/v1/chat/completions",
      "/v1/responses",
      "/v1/messages",
      "/v1beta/models/{model}:streamGenerateContent",
    ]) {
      const op = doc.paths[path]?.post;
      expect(op?.requestBody?.content["application/json"]).toBeDefined();
      const ok = op?.responses["200"]?.content ?? {};
      expect(Object.keys(ok)).toContain("text/event-stream");
      expect(op?.responses["429"]).toBeDefined();
    }
  });

  test("what the gateway really answers matches the documented shapes", async () => {
    const key = await gw.newKey();
    const chat = await gw.call("POST", "/v1/chat/completions", {
      key: key.key,
      body: { model: "up/m", messages: [{ role: "user", content: "hi" }] },
    });
    expect(Value.Check(ChatCompletionResponse, chat.body)).toBe(true);
    const err = await gw.call("POST", "/v1/chat/completions", {
      key: key.key,
      body: { model: "up/none", messages: [] },
    });
    expect(Value.Check(OpenAIErrorBody, err.body)).toBe(true);
    const created = await gw.call<{ id: string }>("POST", "/v1/responses", {
      key: key.key,
      body: { model: "up/m", input: "hi" },
    });
    expect(Value.Check(ResponseObject, created.body)).toBe(true);
    const got = await gw.call("GET", `/v1/responses/${created.body.id}`, { key: key.key });
    expect(got.status).toBe(200);
    expect(Value.Check(ResponseObject, got.body)).toBe(true);
    const deleted = await gw.call("DELETE", `/v1/responses/${created.body.id}`, { key: key.key });
    expect(Value.Check(ResponseDeleted, deleted.body)).toBe(true);
    const gone = await gw.call("GET", `/v1/responses/${created.body.id}`, { key: key.key });
    expect(gone.status).toBe(404);
    expect(Value.Check(OpenAIErrorBody, gone.body)).toBe(true);
    const hub = await gw.call("GET", "/public/model_hub", { key: null });
    expect(Value.Check(ModelHub, hub.body)).toBe(true);
    expect((hub.body as { data: { output_cost_per_token: unknown }[] }).data[0]?.output_cost_per_token).toBeNull();
  });

  test("/docs renders the document", async () => {
    const page = await gw.call("GET", "/docs", { key: null });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.text).toContain("openapi.json");
  });
});
