/**
 * JSON Schema -> the OpenAPI 3.0 subset Gemini accepts for function parameters and responseSchema
 * (PROTOCOLS.md 5.2). Gemini rejects whole requests over keywords it does not know, so this keeps
 * only what it documents: local `$ref`s are inlined, `type: [x, "null"]` and null branches of
 * `anyOf`/`oneOf` become `nullable`, `allOf` is merged, `const` becomes a one-value enum, and
 * `$schema`, `additionalProperties`, `strict`, `$defs`, `examples`, `not`, etc. are dropped.
 */
import type { GeminiSchema, GeminiSchemaType } from "../../../protocols/gemini/wire";

type Json = Record<string, unknown>;

const TYPES: readonly GeminiSchemaType[] = ["string", "number", "integer", "boolean", "array", "object"];

/** `format` values Gemini understands per type; others make it reject the schema. */
const FORMATS: Partial<Record<GeminiSchemaType, readonly string[]>> = {
  string: ["enum", "date-time"],
  number: ["float", "double"],
  integer: ["int32", "int64"],
};

/** A `$ref` chain deeper than this is taken to be recursive and cut off. */
const MAX_REF_DEPTH = 8;

const isObject = (v: unknown): v is Json => !!v && typeof v === "object" && !Array.isArray(v);
const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const toType = (v: unknown): GeminiSchemaType | undefined =>
  typeof v === "string" && (TYPES as readonly string[]).includes(v.toLowerCase())
    ? (v.toLowerCase() as GeminiSchemaType)
    : undefined;

/** Resolves a local JSON pointer (`#/$defs/Name`, `#/definitions/Name`, `#/properties/a`...). */
function resolvePointer(root: Json, ref: string): Json | undefined {
  if (ref === "#") return root;
  if (!ref.startsWith("#/")) return undefined;
  let node: unknown = root;
  for (const raw of ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (!isObject(node)) return undefined;
    node = node[key];
  }
  return isObject(node) ? node : undefined;
}

/** Converts a JSON Schema to Gemini's schema subset. Never throws; unusable parts are dropped. */
export function toGeminiSchema(schema: Record<string, unknown>): GeminiSchema {
  return convert(schema, schema, 0);
}

function convert(node: Json, root: Json, refDepth: number): GeminiSchema {
  let s = node;
  if (typeof s.$ref === "string") {
    const target = refDepth < MAX_REF_DEPTH ? resolvePointer(root, s.$ref) : undefined;
    const { $ref: _ref, ...siblings } = s;
    // A recursive or unresolvable reference: keep what the siblings say, else allow any object.
    if (!target) return convert(Object.keys(siblings).length ? siblings : { type: "object" }, root, refDepth);
    return convert({ ...target, ...siblings }, root, refDepth + 1);
  }
  if (Array.isArray(s.allOf)) s = mergeAllOf(s, root, refDepth);

  const out: GeminiSchema = {};
  let nullable = s.nullable === true;

  // type: "x" | ["x", "null"] | ["x", "y"]
  const rawTypes = Array.isArray(s.type) ? s.type : s.type !== undefined ? [s.type] : [];
  if (rawTypes.includes("null")) nullable = true;
  const types = rawTypes.map(toType).filter((t): t is GeminiSchemaType => t !== undefined);
  if (types.length > 1) {
    out.anyOf = types.map((t) =>
      convert({ ...s, type: t, nullable: false, title: undefined, description: undefined }, root, refDepth),
    );
    if (nullable) out.nullable = true;
    copyAnnotations(s, out);
    return out;
  }
  let type = types[0];

  // anyOf / oneOf: null branches become `nullable`; one remaining branch is inlined.
  const union = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined;
  if (union) {
    const branches = union.filter(isObject).filter((b) => {
      if (b.type === "null" || (Array.isArray(b.type) && b.type.length === 1 && b.type[0] === "null")) {
        nullable = true;
        return false;
      }
      return true;
    });
    if (branches.length === 1 && type === undefined) {
      const only = convert(branches[0] as Json, root, refDepth);
      copyAnnotations(s, only);
      if (nullable) only.nullable = true;
      return only;
    }
    if (branches.length > 0) out.anyOf = branches.map((b) => convert(b, root, refDepth));
  }

  // const -> a one-value enum (Gemini enums are strings only).
  let enumValues: unknown[] | undefined = Array.isArray(s.enum) ? s.enum : undefined;
  if (s.const !== undefined) enumValues = [s.const];
  if (enumValues) {
    if (enumValues.includes(null)) nullable = true;
    const values = enumValues.filter((v) => v !== null);
    if (values.length > 0 && values.every((v) => typeof v === "string")) {
      out.enum = values as string[];
      type ??= "string";
    }
  }

  if (type === undefined) {
    if (isObject(s.properties)) type = "object";
    else if (s.items !== undefined) type = "array";
  }
  if (type !== undefined) out.type = type;
  if (nullable) out.nullable = true;
  copyAnnotations(s, out);

  if (typeof s.format === "string" && type && FORMATS[type]?.includes(s.format)) out.format = s.format;
  if (out.enum && type === "string") out.format = "enum";

  if (type === "object" || type === undefined) {
    if (isObject(s.properties)) {
      const props: Record<string, GeminiSchema> = {};
      for (const [k, v] of Object.entries(s.properties)) if (isObject(v)) props[k] = convert(v, root, refDepth);
      if (Object.keys(props).length > 0) {
        out.properties = props;
        if (Array.isArray(s.required)) {
          const required = s.required.filter((r): r is string => typeof r === "string" && r in props);
          if (required.length) out.required = required;
        }
        if (Array.isArray(s.propertyOrdering)) {
          const order = s.propertyOrdering.filter((r): r is string => typeof r === "string" && r in props);
          if (order.length) out.propertyOrdering = order;
        }
      }
    }
    if (isNumber(s.minProperties)) out.minProperties = s.minProperties;
    if (isNumber(s.maxProperties)) out.maxProperties = s.maxProperties;
  }
  if (type === "array" || type === undefined) {
    // Tuple forms (`items: [...]`, `prefixItems`) have no Gemini equivalent: use the first shape.
    const items = Array.isArray(s.items) ? s.items[0] : Array.isArray(s.prefixItems) ? s.prefixItems[0] : s.items;
    if (isObject(items)) out.items = convert(items, root, refDepth);
    if (isNumber(s.minItems)) out.minItems = s.minItems;
    if (isNumber(s.maxItems)) out.maxItems = s.maxItems;
  }
  if (type === "string" || type === undefined) {
    if (isNumber(s.minLength)) out.minLength = s.minLength;
    if (isNumber(s.maxLength)) out.maxLength = s.maxLength;
    if (typeof s.pattern === "string") out.pattern = s.pattern;
  }
  if (type === "number" || type === "integer" || type === undefined) {
    if (isNumber(s.minimum)) out.minimum = s.minimum;
    if (isNumber(s.maximum)) out.maximum = s.maximum;
  }
  return out;
}

function copyAnnotations(s: Json, out: GeminiSchema): void {
  if (typeof s.title === "string" && out.title === undefined) out.title = s.title;
  if (typeof s.description === "string" && out.description === undefined) out.description = s.description;
  if (s.default !== undefined && s.default !== null && out.default === undefined) out.default = s.default;
  if (s.example !== undefined && out.example === undefined) out.example = s.example;
  else if (Array.isArray(s.examples) && s.examples.length && out.example === undefined) out.example = s.examples[0];
}

/** `allOf` -> one schema: properties and required merged, the first word on anything else wins. */
function mergeAllOf(s: Json, root: Json, refDepth: number): Json {
  const { allOf, ...rest } = s;
  const merged: Json = { ...rest };
  const properties: Json = isObject(rest.properties) ? { ...rest.properties } : {};
  const required = new Set<string>(Array.isArray(rest.required) ? (rest.required as string[]) : []);
  for (const raw of allOf as unknown[]) {
    if (!isObject(raw)) continue;
    let part = raw;
    for (let d = refDepth; typeof part.$ref === "string" && d < MAX_REF_DEPTH; d++) {
      const { $ref, ...siblings } = part;
      const target = resolvePointer(root, $ref as string);
      if (!target) break;
      part = { ...target, ...siblings };
    }
    if (Array.isArray(part.allOf)) part = mergeAllOf(part, root, refDepth + 1);
    if (isObject(part.properties)) Object.assign(properties, part.properties);
    if (Array.isArray(part.required)) for (const r of part.required) if (typeof r === "string") required.add(r);
    for (const [k, v] of Object.entries(part))
      if (k !== "properties" && k !== "required" && !(k in merged)) merged[k] = v;
  }
  if (Object.keys(properties).length) merged.properties = properties;
  if (required.size) merged.required = [...required];
  return merged;
}
