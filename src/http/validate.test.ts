import { describe, expect, test } from "bun:test";
import { Type as T } from "@sinclair/typebox";
import { GatewayError } from "./errors";
import { describeSchema, fieldName, queryValidator, validator } from "./validate";

const errorOf = (f: () => unknown): GatewayError => {
  try {
    f();
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new Error("expected a GatewayError");
};

describe("validation messages", () => {
  test("field names from JSON pointers", () => {
    expect(fieldName("/a")).toBe("a");
    expect(fieldName("/a/b/c")).toBe("a.b.c");
    expect(fieldName("/tags/0")).toBe("tags[0]");
    expect(fieldName("/m/openai~1gpt-4o/x")).toBe("m.openai/gpt-4o.x");
    expect(fieldName("")).toBe("");
  });

  test("schema descriptions read as English", () => {
    expect(describeSchema(T.Integer({ minimum: 0 }))).toBe("an integer >= 0");
    expect(describeSchema(T.Union([T.Number({ minimum: 0 }), T.Null()]))).toBe("a number >= 0 or null");
    expect(describeSchema(T.Array(T.String()))).toBe("an array of strings");
    expect(describeSchema(T.String({ errorMessage: "a duration" }))).toBe("a duration");
    expect(describeSchema(T.Union([T.Literal("a"), T.Literal("b"), T.Literal("c")]))).toBe('"a", "b" or "c"');
  });

  test("a validator names the first bad field with what it expected and what it got", () => {
    const check = validator(
      T.Object({ n: T.Integer({ minimum: 1 }), s: T.Optional(T.String()) }, { additionalProperties: false }),
    );
    expect(check({ n: 2 })).toEqual({ n: 2 });
    expect(errorOf(() => check({ n: 1.5 })).message).toBe("Invalid 'n': expected an integer >= 1, got 1.5");
    expect(errorOf(() => check({ n: 1, x: 1 })).param).toBe("x");
    expect(errorOf(() => check({})).message).toBe("Missing required field 'n' in request body");
    expect(errorOf(() => check([])).message).toBe("The request body must be an object");
    const short = validator(T.Object({ s: T.String({ maxLength: 3 }) }));
    const long = errorOf(() => short({ s: "abcd" }));
    expect(long.status).toBe(400);
    expect(long.message).toContain("'s'");
  });

  test("query strings convert exact integers and booleans only", () => {
    const q = queryValidator(T.Object({ page: T.Optional(T.Integer({ minimum: 1 })), all: T.Optional(T.Boolean()) }));
    expect(q({ page: "3", all: "true" })).toEqual({ page: 3, all: true });
    expect(errorOf(() => q({ page: "1.5" })).param).toBe("page");
    expect(errorOf(() => q({ page: "0" })).param).toBe("page");
    expect(errorOf(() => q({ all: "yes" })).param).toBe("all");
  });
});
