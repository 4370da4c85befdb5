/**
 * Request validation with compiled TypeBox checkers. Elysia's own body validation is not used:
 * it strips unknown fields, coerces arrays into records and answers 422 in its own shape, while
 * callers here need a 400 that names the field in the gateway's error envelope.
 */
import { FormatRegistry, Kind, type Static, type TObject, type TSchema } from "@sinclair/typebox";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { type ValueError, ValueErrorType } from "@sinclair/typebox/errors";
import { Value } from "@sinclair/typebox/value";
import { badRequest, type GatewayError } from "./errors";
import { NO_NUL_PATTERN, STORED_JSON_KIND, storedJsonProblem } from "./schemas";

// Formats the schemas use; TypeBox checks only registered ones.
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;
if (!FormatRegistry.Has("date-time")) {
  FormatRegistry.Set("date-time", (v) => ISO_DATE_TIME.test(v) && !Number.isNaN(Date.parse(v)));
}

/** `/model_max_budget/gpt-4o/budget_limit` -> `model_max_budget.gpt-4o.budget_limit`, `/tags/0` -> `tags[0]`. */
export function fieldName(path: string): string {
  let out = "";
  for (const raw of path.split("/").slice(1)) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    out += /^\d+$/.test(seg) ? `[${seg}]` : out === "" ? seg : `.${seg}`;
  }
  return out;
}

/** A short English description of what a schema accepts, for error messages. */
export function describeSchema(schema: TSchema): string {
  if (typeof schema.errorMessage === "string") return schema.errorMessage;
  if (Array.isArray(schema.anyOf)) {
    const parts = (schema.anyOf as TSchema[]).map(describeSchema);
    return parts.length > 2 ? `${parts.slice(0, -1).join(", ")} or ${parts.at(-1)}` : parts.join(" or ");
  }
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  const range = (noun: string) => {
    const bounds: string[] = [];
    if (schema.minimum !== undefined) bounds.push(`>= ${schema.minimum}`);
    if (schema.maximum !== undefined) bounds.push(`<= ${schema.maximum}`);
    return bounds.length ? `${noun} ${bounds.join(" and ")}` : noun;
  };
  switch (schema[Kind]) {
    case "Integer":
      return range("an integer");
    case "Number":
      return range("a number");
    case "String":
      return "a string";
    case "Boolean":
      return "true or false";
    case "Null":
      return "null";
    case "Array":
      return `an array of ${plural(describeSchema(schema.items as TSchema))}`;
    case "Object":
    case "Record":
      return "an object";
    default:
      return "a valid value";
  }
}

function plural(description: string): string {
  return description.replace(/^an? (\w+)/, (_, noun: string) => `${noun}s`);
}

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return value.length > 40 ? "a string" : JSON.stringify(value);
  return String(value);
}

const DISCRIMINATORS = ["type", "role", "kind"] as const;

function tagConsts(s: TSchema | undefined): unknown[] {
  if (!s) return [];
  if (s.const !== undefined) return [s.const];
  if (Array.isArray(s.anyOf)) return (s.anyOf as TSchema[]).flatMap(tagConsts);
  return [];
}

/**
 * The member of a union a value meant: the array form of `string | X[]`; the only object shape of
 * `X | null`; the object whose `type`/`role`/`kind` literal matches; when the tag is absent, the
 * member where it is optional; for an unknown string tag, the member that takes any string.
 */
function chosenVariant(variants: TSchema[], value: unknown): TSchema | undefined {
  if (Array.isArray(value)) return variants.find((v) => v[Kind] === "Array");
  if (!value || typeof value !== "object") return undefined;
  const obj = value as Record<string, unknown>;
  for (const tag of DISCRIMINATORS) {
    const props = variants.map((v) => (v.properties as Record<string, TSchema> | undefined)?.[tag]);
    if (props.every((p) => p === undefined)) continue;
    const exact = variants.find((_v, i) => tagConsts(props[i]).includes(obj[tag]));
    if (exact) return exact;
    if (obj[tag] === undefined) {
      return variants.find(
        (v, i) => props[i] !== undefined && !((v.required as string[] | undefined) ?? []).includes(tag),
      );
    }
    if (typeof obj[tag] === "string") {
      return variants.find((_v, i) => props[i]?.[Kind] === "String" && props[i]?.const === undefined);
    }
    return undefined;
  }
  const objects = variants.filter((v) => v[Kind] === "Object" || v[Kind] === "Record");
  return objects.length === 1 ? objects[0] : undefined;
}

/** For a union: the error inside the member the value chose, or a clear message when it chose none. */
function unionError(error: ValueError, what: string): GatewayError | undefined {
  const variants = error.schema.anyOf as TSchema[] | undefined;
  if (!variants) return undefined;
  const chosen = chosenVariant(variants, error.value);
  if (chosen) {
    const inner = Value.Errors(chosen, error.value).First();
    return inner ? toValidationError({ ...inner, path: `${error.path}${inner.path}` }, what) : undefined;
  }
  const value = error.value as Record<string, unknown> | null;
  if (!value || typeof value !== "object" || Array.isArray(value)) return undefined;
  for (const key of DISCRIMINATORS) {
    const literals = variants.flatMap((v) => tagConsts((v.properties as Record<string, TSchema> | undefined)?.[key]));
    if (literals.length === 0) continue;
    const field = fieldName(`${error.path}/${key}`);
    return badRequest(
      `Invalid '${field}': expected one of ${literals.map((l) => JSON.stringify(l)).join(", ")}, got ${jsonType(value[key])}`,
      field,
      value[key] === undefined ? "missing_field" : "invalid_value",
    );
  }
  return undefined;
}

const NUL = "\u0000";
const NUL_MESSAGE = "contains a NUL character (\\u0000), which cannot be stored";

/** A string schema (or a union with one) that exists to keep NUL out of the database. */
function excludesNul(schema: TSchema): boolean {
  return schema.pattern === NO_NUL_PATTERN || (Array.isArray(schema.anyOf) && schema.anyOf.some(excludesNul));
}

/**
 * Values the database cannot store get their own message: a NUL character in a string or in an
 * object key (then the field named is the object), or a problem inside free-form JSON (metadata).
 */
function storageError(error: ValueError): GatewayError | undefined {
  const field = fieldName(error.path);
  if (typeof error.value === "string" && error.value.includes(NUL) && excludesNul(error.schema)) {
    return badRequest(`Invalid '${field}': ${NUL_MESSAGE}`, field || null, "invalid_value");
  }
  const keys = error.schema.patternProperties as Record<string, unknown> | undefined;
  if (error.type === ValueErrorType.ObjectAdditionalProperties && keys?.[NO_NUL_PATTERN] !== undefined) {
    const parent = fieldName(error.path.slice(0, error.path.lastIndexOf("/")));
    if (parent !== "") return badRequest(`Invalid '${parent}': a key ${NUL_MESSAGE}`, parent, "invalid_value");
  }
  if (error.type === ValueErrorType.Kind && error.schema[Kind] === STORED_JSON_KIND) {
    const problem = storedJsonProblem(error.value);
    if (problem) {
      const at = problem.path === "" ? "" : `'${field}${problem.path}' `;
      return badRequest(`Invalid '${field}': ${at}${problem.reason}`, field || null, "invalid_value");
    }
  }
  return undefined;
}

/** Turns the first TypeBox error into a 400 that names the field. */
export function toValidationError(error: ValueError, what: string): GatewayError {
  const storage = storageError(error);
  if (storage) return storage;
  if (error.type === ValueErrorType.Union) {
    const inner = unionError(error, what);
    if (inner) return inner;
  }
  const field = fieldName(error.path);
  if (error.type === ValueErrorType.ArrayMinItems && error.schema.minItems === 1) {
    return badRequest(`Invalid '${field}': must not be empty`, field, "invalid_value");
  }
  switch (error.type) {
    case ValueErrorType.ObjectAdditionalProperties:
      return badRequest(`Unknown field '${field}' in ${what}`, field, "unknown_field");
    case ValueErrorType.ObjectRequiredProperty:
      return badRequest(`Missing required field '${field}' in ${what}`, field, "missing_field");
    default:
      break;
  }
  if (field === "") return badRequest(`The ${what} must be ${describeSchema(error.schema)}`, null, "invalid_body");
  if (error.type === ValueErrorType.StringMaxLength || error.type === ValueErrorType.ArrayMaxItems) {
    return badRequest(`Invalid '${field}': ${error.message.toLowerCase()}`, field, "invalid_value");
  }
  return badRequest(
    `Invalid '${field}': expected ${describeSchema(error.schema)}, got ${jsonType(error.value)}`,
    field,
    "invalid_value",
  );
}

export type Validator<T extends TSchema> = (value: unknown) => Static<T>;

/** Compiles once; the returned function checks a value and throws a 400 GatewayError on failure. */
export function validator<T extends TSchema>(schema: T, what = "request body"): Validator<T> {
  const check = TypeCompiler.Compile(schema);
  return (value) => {
    if (check.Check(value)) return value;
    if (value === undefined && what === "request body") {
      throw badRequest("The request body is empty: send a JSON object", null, "invalid_body");
    }
    const first = check.Errors(value).First();
    throw first ? toValidationError(first, what) : badRequest(`Invalid ${what}`);
  };
}

/**
 * Query strings arrive as strings. Integer and boolean parameters are converted only when the text
 * is exactly an integer or `true`/`false` (so `page=1.5` is an error, not page 1); then checked.
 */
export function queryValidator<T extends TObject>(schema: T): Validator<T> {
  const check = validator(schema, "query string");
  const kinds = new Map<string, string>();
  for (const [name, prop] of Object.entries(schema.properties)) kinds.set(name, (prop as TSchema)[Kind]);
  return (query) => {
    const out: Record<string, unknown> = {};
    for (const [name, raw] of Object.entries((query ?? {}) as Record<string, unknown>)) {
      const kind = kinds.get(name);
      if (typeof raw !== "string") out[name] = raw;
      else if (kind === "Integer" && /^-?\d+$/.test(raw)) out[name] = Number(raw);
      else if (kind === "Boolean" && (raw === "true" || raw === "false")) out[name] = raw === "true";
      else out[name] = raw;
    }
    return check(out);
  };
}
