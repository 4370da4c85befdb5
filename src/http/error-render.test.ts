import { describe, expect, test } from "bun:test";
import { errorBody, errorShapeFor, renderError } from "./error-render";
import { GatewayError } from "./errors";

describe("errors in each protocol's envelope", () => {
  test("the shape follows the method and path", () => {
    expect(errorShapeFor("POST", "/v1/chat/completions")).toBe("openai");
    expect(errorShapeFor("POST", "/v1/responses")).toBe("openai");
    expect(errorShapeFor("POST", "/key/generate")).toBe("openai");
    expect(errorShapeFor("POST", "/v1/messages")).toBe("anthropic");
    expect(errorShapeFor("POST", "/v1/messages/count_tokens")).toBe("anthropic");
    expect(errorShapeFor("POST", "/v1beta/models/openai/gpt-4o-mini:generateContent")).toBe("google");
    expect(errorShapeFor("POST", "/v1beta/models/openai%2Fgpt-4o-mini:streamGenerateContent")).toBe("google");
    expect(errorShapeFor("POST", "/v1/models/gemini/gemini-2.5-flash:generateContent")).toBe("google");
    expect(errorShapeFor("POST", "/v1/models/gemini%2Fgemini-2.5-flash%3AstreamGenerateContent")).toBe("google");
    expect(errorShapeFor("GET", "/v1/models/openai/gpt-4o-mini")).toBe("openai");
    expect(errorShapeFor("POST", "/v1beta/models/x:bogus")).toBe("google");
    expect(errorShapeFor("GET", "/v1beta/anything")).toBe("google");
    // Under /v1, only what the generateContent routes serve, and only POST, is Google's.
    expect(errorShapeFor("GET", "/v1/models/zz/llama3:latest")).toBe("openai");
    expect(errorShapeFor("POST", "/v1/models/zz/llama3:latest")).toBe("openai");
    expect(errorShapeFor("GET", "/v1/models/gemini/gemini-2.5-flash:generateContent")).toBe("openai");
    expect(errorShapeFor("POST", "/v1/models/openai/gpt-4o-mini:countTokens")).toBe("openai");
  });

  test("bodies and statuses", async () => {
    const e = new GatewayError(429, "slow down", { code: "rate_limited", headers: { "retry-after": "3" } });
    expect(errorBody(e, "openai")).toEqual({
      error: { message: "slow down", type: "rate_limit_error", param: null, code: "rate_limited" },
    });
    expect(errorBody(e, "anthropic")).toEqual({
      type: "error",
      error: { type: "rate_limit_error", message: "slow down" },
    });
    expect(errorBody(e, "google")).toEqual({
      error: { code: 429, message: "slow down", status: "RESOURCE_EXHAUSTED" },
    });
    expect(errorBody(new GatewayError(401, "bad key"), "anthropic")).toMatchObject({
      error: { type: "authentication_error" },
    });
    expect(errorBody(new GatewayError(404, "no model"), "google")).toMatchObject({ error: { status: "NOT_FOUND" } });
    const res = renderError(e, "google");
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("3");
  });
});
