import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { parse as parseYaml } from "yaml";
import { type CatalogEntry, CatalogFile } from "./model";

const CATALOG_PATH = resolve(import.meta.dir, "../../config/catalog.yaml");
const PROVIDERS = ["openai", "anthropic", "gemini", "vertex", "bedrock", "groq", "deepseek", "mistral", "xai"];

const raw: unknown = parseYaml(readFileSync(CATALOG_PATH, "utf8"));
const checker = TypeCompiler.Compile(CatalogFile);

function models(): CatalogEntry[] {
  if (!checker.Check(raw)) throw new Error("catalog.yaml does not match CatalogFile");
  return raw.models;
}

function entry(name: string): CatalogEntry {
  const found = models().find((m) => m.name === name);
  if (!found) throw new Error(`${name} is not in the default catalog`);
  return found;
}

const providerOf = (name: string) => name.slice(0, name.indexOf("/"));

/** Prices are published per 1M tokens; compare in that unit so float noise in the per-token value does not matter. */
function perMillion(price: number | null | undefined): number | null {
  if (price === null || price === undefined) return null;
  return Math.round(price * 1e6 * 1e6) / 1e6;
}

function expectPrices(
  name: string,
  p: { input: number; output: number; cacheRead: number | null; cacheWrite: number | null },
): void {
  const m = entry(name);
  expect(perMillion(m.input_cost_per_token)).toBe(p.input);
  expect(perMillion(m.output_cost_per_token)).toBe(p.output);
  expect(perMillion(m.cache_read_input_token_cost)).toBe(p.cacheRead);
  expect(perMillion(m.cache_creation_input_token_cost)).toBe(p.cacheWrite);
}

/** OpenAI publishes a (30-minute) cache-write price only for the GPT-6 family; every other OpenAI model has none. */
const OPENAI_WITH_CACHE_WRITES = /^openai\/gpt-6(\.\d+)?-/;

describe("default catalog (config/catalog.yaml)", () => {
  test("matches the CatalogFile schema", () => {
    const errors = [...checker.Errors(raw)].map((e) => `${e.path}: ${e.message}`);
    expect(errors).toEqual([]);
    expect(models().length).toBeGreaterThanOrEqual(40);
  });

  test("retrieval date is recorded", () => {
    expect((raw as CatalogFile).retrieved).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });

  test("names are unique", () => {
    const names = models().map((m) => m.name);
    const dupes = names.filter((n, i) => names.indexOf(n) !== i);
    expect(dupes).toEqual([]);
  });

  test("every name's provider prefix is a known provider", () => {
    const unknown = models()
      .map((m) => m.name)
      .filter((n) => !PROVIDERS.includes(providerOf(n)));
    expect(unknown).toEqual([]);
  });

  test("every provider has entries", () => {
    const present = new Set(models().map((m) => providerOf(m.name)));
    expect([...present].sort()).toEqual([...PROVIDERS].sort());
  });

  test("every chat/responses entry has input and output prices", () => {
    const missing = models()
      .filter((m) => m.mode === "chat" || m.mode === "responses")
      .filter((m) => typeof m.input_cost_per_token !== "number" || typeof m.output_cost_per_token !== "number")
      .map((m) => m.name);
    expect(missing).toEqual([]);
  });

  test("every entry has a mode and a source", () => {
    const bad = models()
      .filter((m) => m.mode === undefined || !m.source?.startsWith("https://"))
      .map((m) => m.name);
    expect(bad).toEqual([]);
  });

  test("prices are per token, not per 1M tokens", () => {
    const fields = [
      "input_cost_per_token",
      "output_cost_per_token",
      "cache_read_input_token_cost",
      "cache_creation_input_token_cost",
    ] as const;
    const tooBig = models().filter((m) => fields.some((f) => (m[f] ?? 0) > 0.001));
    expect(tooBig.map((m) => m.name)).toEqual([]);
  });

  test("cache prices are explicit (null when unpublished) and never 0", () => {
    const bad = models()
      .filter(
        (m) =>
          m.cache_read_input_token_cost === undefined ||
          m.cache_creation_input_token_cost === undefined ||
          m.cache_read_input_token_cost === 0 ||
          m.cache_creation_input_token_cost === 0,
      )
      .map((m) => m.name);
    expect(bad).toEqual([]);
  });

  test("every anthropic/ entry has cache read and cache write prices", () => {
    const missing = models()
      .filter((m) => providerOf(m.name) === "anthropic")
      .filter((m) => m.cache_read_input_token_cost == null || m.cache_creation_input_token_cost == null)
      .map((m) => m.name);
    expect(missing).toEqual([]);
  });

  test("gemini/ entries have no cache-write price", () => {
    const withWrite = models()
      .filter((m) => providerOf(m.name) === "gemini" && m.cache_creation_input_token_cost !== null)
      .map((m) => m.name);
    expect(withWrite).toEqual([]);
  });

  test("openai/ entries have no cache-write price, except the GPT-6 family, which publishes one", () => {
    const openai = models().filter((m) => providerOf(m.name) === "openai");
    const unexpectedWrite = openai
      .filter((m) => !OPENAI_WITH_CACHE_WRITES.test(m.name) && m.cache_creation_input_token_cost !== null)
      .map((m) => m.name);
    expect(unexpectedWrite).toEqual([]);
    const missingWrite = openai
      .filter((m) => OPENAI_WITH_CACHE_WRITES.test(m.name) && m.cache_creation_input_token_cost == null)
      .map((m) => m.name);
    expect(missingWrite).toEqual([]);
  });

  test("mode responses only for Responses-API-only models", () => {
    const responses = models()
      .filter((m) => m.mode === "responses")
      .map((m) => m.name)
      .sort();
    expect(responses).toEqual(["openai/gpt-5.5-pro", "openai/o3-pro"]);
  });

  describe("spot values (USD per 1M tokens, from the providers' pages)", () => {
    test("openai", () => {
      expectPrices("openai/gpt-4o-mini", { input: 0.15, output: 0.6, cacheRead: 0.075, cacheWrite: null });
      expectPrices("openai/gpt-6.1-sol", { input: 2, output: 10, cacheRead: 0.1, cacheWrite: 2.5 });
      expectPrices("openai/gpt-6-astra", { input: 10, output: 50, cacheRead: 1, cacheWrite: 12.5 });
      expectPrices("openai/o3-pro", { input: 20, output: 80, cacheRead: null, cacheWrite: null });
    });

    test("anthropic", () => {
      expectPrices("anthropic/claude-sonnet-4-6", { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 });
      expectPrices("anthropic/claude-opus-5-5", { input: 4, output: 20, cacheRead: 0.2, cacheWrite: 5 });
      expectPrices("anthropic/claude-haiku-4-5-20251001", { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 });
      expect(entry("anthropic/claude-opus-4-6").max_input_tokens).toBe(1_000_000);
    });

    test("gemini and vertex", () => {
      expectPrices("gemini/gemini-2.5-pro", { input: 1.25, output: 10, cacheRead: 0.125, cacheWrite: null });
      expectPrices("gemini/gemini-2.5-flash", { input: 0.3, output: 2.5, cacheRead: 0.03, cacheWrite: null });
      expectPrices("vertex/claude-sonnet-4-5@20250929", { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 });
    });

    test("bedrock", () => {
      expectPrices("bedrock/amazon.nova-pro-v1:0", { input: 0.8, output: 3.2, cacheRead: 0.2, cacheWrite: null });
      expectPrices("bedrock/meta.llama3-3-70b-instruct-v1:0", {
        input: 0.72,
        output: 0.72,
        cacheRead: null,
        cacheWrite: null,
      });
    });

    test("groq, deepseek, mistral, xai", () => {
      expectPrices("groq/openai/gpt-oss-120b", { input: 0.15, output: 0.6, cacheRead: 0.075, cacheWrite: null });
      expectPrices("deepseek/deepseek-v4-pro", { input: 1.32, output: 3.96, cacheRead: 0.044, cacheWrite: null });
      expectPrices("mistral/mistral-medium-3.5", { input: 1.5, output: 7.5, cacheRead: null, cacheWrite: null });
      expectPrices("xai/grok-4.3", { input: 1.25, output: 2.5, cacheRead: 0.2, cacheWrite: null });
    });
  });
});
