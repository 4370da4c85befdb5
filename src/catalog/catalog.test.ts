import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig } from "../config";
import type { ProviderConfig } from "../config/file";
import { GatewayError } from "../http/errors";
import { buildCatalog, loadCatalogFile, type ServedModel } from "./catalog";
import type { CatalogEntry } from "./model";

const providers: Record<string, ProviderConfig> = {
  openai: { type: "openai", api_key: "k" },
  ollama: { type: "openai-compatible", api_base: "http://localhost:11434/v1" },
  azure: { type: "azure", api_base: "https://x.openai.azure.com", api_version: "2024-10-21" },
};
const defaults: CatalogEntry[] = [
  {
    name: "openai/gpt-4o-mini",
    input_cost_per_token: 1e-7,
    output_cost_per_token: 4e-7,
    cache_read_input_token_cost: 5e-8,
    max_output_tokens: 100,
  },
  { name: "anthropic/claude-x", input_cost_per_token: 1e-6 },
];

describe("the served catalog", () => {
  test("default entries are served only for configured providers; config overrides them field by field", () => {
    const c = buildCatalog(providers, [{ name: "openai/gpt-4o-mini", output_cost_per_token: 9e-7 }], defaults);
    expect(c.resolve("anthropic/claude-x")).toBeUndefined();
    const m = c.resolve("openai/gpt-4o-mini");
    expect(m?.prices).toEqual({ input: 1e-7, output: 9e-7, cacheRead: 5e-8, cacheWrite: null, reasoning: null });
    expect(m?.maxOutputTokens).toBe(100);
    expect(m?.deployments).toEqual([
      { id: "openai/gpt-4o-mini", provider: "openai", upstreamModel: "gpt-4o-mini", weight: 1 },
    ]);
  });

  test("deployments, upstream ids, weights, per-deployment settings and fallbacks", () => {
    const c = buildCatalog(
      providers,
      [
        {
          name: "openai/gpt-4o",
          deployments: [
            { provider: "openai", model: "gpt-4o-2024-11-20", weight: 3, timeout_seconds: 30 },
            { provider: "azure", model: "my-gpt4o", api_key: "az", rpm: 100 },
          ],
          fallbacks: ["openai/gpt-4o-mini"],
        },
        { name: "openai/cheap", model: "gpt-4o-mini" },
      ],
      defaults,
    );
    const m = c.resolve("openai/gpt-4o");
    expect(m?.deployments).toEqual([
      {
        id: "openai/gpt-4o-2024-11-20",
        provider: "openai",
        upstreamModel: "gpt-4o-2024-11-20",
        weight: 3,
        timeoutMs: 30_000,
      },
      { id: "azure/my-gpt4o", provider: "azure", upstreamModel: "my-gpt4o", weight: 1, apiKey: "az", rpm: 100 },
    ]);
    expect(m?.fallbacks).toEqual(["openai/gpt-4o-mini"]);
    expect(c.resolve("openai/cheap")?.deployments[0]?.upstreamModel).toBe("gpt-4o-mini");
    // prices of models without any are null: unpublished, not free
    expect(m?.prices.input).toBeNull();
  });

  test("a <provider>/* entry serves any model of that provider by name", () => {
    const c = buildCatalog(providers, [{ name: "ollama/*", input_cost_per_token: 0, output_cost_per_token: 0 }], []);
    const m = c.resolve("ollama/llama3.2:3b");
    expect(m?.deployments[0]).toMatchObject({ provider: "ollama", upstreamModel: "llama3.2:3b" });
    expect(m?.prices.input).toBe(0);
    expect(c.resolve("ollama/")).toBeUndefined();
  });

  test("names resolved through a wildcard are never listed, and only a bounded number is kept", () => {
    const c = buildCatalog(providers, [{ name: "ollama/*" }, { name: "openai/gpt-4o-mini" }], []);
    const first = c.resolve("ollama/llama3.2:3b");
    expect(c.resolve("ollama/llama3.2:3b")).toBe(first);
    // Any caller can ask for any name: none of them reaches /v1/models or stays in memory for good.
    for (let i = 0; i < 5000; i++) expect(c.resolve(`ollama/made-up-${i}`)?.name).toBe(`ollama/made-up-${i}`);
    expect(c.list().map((x) => x.name)).toEqual(["openai/gpt-4o-mini"]);
    const again = c.resolve("ollama/llama3.2:3b");
    expect(again).not.toBe(first);
    expect(again).toEqual(first as ServedModel);
  });

  test("a wildcard name with '.' or '..' path segments is a 400", () => {
    const c = buildCatalog(providers, [{ name: "ollama/*" }], []);
    for (const name of ["ollama/..", "ollama/.", "ollama/../../x", "ollama/a/../b", "ollama/a/."]) {
      let err: unknown;
      try {
        c.resolve(name);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(GatewayError);
      expect(err).toMatchObject({ status: 400, code: "invalid_model_name" });
    }
    // Dots inside a segment are ordinary model ids.
    expect(c.resolve("ollama/qwen2.5..7b")?.deployments[0]?.upstreamModel).toBe("qwen2.5..7b");
    expect(c.resolve("ollama/.hidden")?.deployments[0]?.upstreamModel).toBe(".hidden");
  });

  test("timeouts: the deployment's own, else the model's, else the provider's (a provider's never overrides a model's)", () => {
    const c = buildCatalog(
      {
        slow: { type: "openai", timeout_seconds: 90, stream_idle_timeout_seconds: 45 },
        plain: { type: "openai" },
      },
      [
        {
          name: "slow/model-set",
          timeout_seconds: 20,
          stream_idle_timeout_seconds: 10,
          deployments: [
            { provider: "slow", model: "a" },
            { provider: "slow", model: "b", timeout_seconds: 5, stream_idle_timeout_seconds: 2 },
            { provider: "plain", model: "c" },
          ],
        },
        { name: "slow/provider-only" },
        { name: "plain/nothing" },
      ],
      [],
    );
    const timeouts = (name: string) => c.resolve(name)?.deployments.map((d) => [d.timeoutMs, d.streamIdleTimeoutMs]);
    expect(timeouts("slow/model-set")).toEqual([
      [20_000, 10_000],
      [5_000, 2_000],
      [20_000, 10_000],
    ]);
    expect(timeouts("slow/provider-only")).toEqual([[90_000, 45_000]]);
    expect(timeouts("plain/nothing")).toEqual([[undefined, undefined]]);
  });

  test("configuration mistakes name the field", () => {
    expect(() => buildCatalog(providers, [{ name: "nope/x" }], [])).toThrow("models[0].name");
    expect(() =>
      buildCatalog(providers, [{ name: "openai/x", deployments: [{ provider: "ghost", model: "m" }] }], []),
    ).toThrow("models[0].deployments[0].provider");
    expect(() => buildCatalog(providers, [{ name: "openai/x", fallbacks: ["openai/missing"] }], [])).toThrow(
      ConfigError,
    );
  });

  test("the shipped catalog loads and validates", () => {
    const entries = loadCatalogFile();
    expect(entries.length).toBeGreaterThan(20);
    expect(new Set(entries.map((e) => e.name)).size).toBe(entries.length);
  });

  test("provider and model config errors in the YAML name the field", () => {
    const dir = mkdtempSync(join(tmpdir(), "gw-cat-"));
    const write = (text: string) => {
      const p = join(dir, `${crypto.randomUUID()}.yaml`);
      writeFileSync(p, text);
      return p;
    };
    const fails = (text: string, ...parts: string[]) => {
      let msg = "";
      try {
        loadConfig({ GATEWAY_CONFIG: write(text) });
      } catch (e) {
        msg = (e as Error).message;
      }
      for (const p of parts) expect(msg).toContain(p);
    };
    fails("providers:\n  openai:\n    type: openia\n", "providers.openai.type", "one of openai");
    fails("providers:\n  openai:\n    type: openai\n    apikey: x\n", "providers.openai.apikey");
    fails("models:\n  - name: gpt-4o\n", "models[0].name", "<provider>/<model>");
    fails("models:\n  - name: openai/x\n    input_cost_per_token: -1\n", "models[0].input_cost_per_token");
    fails("router:\n  num_retries: 99\n", "router.num_retries");
    const ok = loadConfig({
      GATEWAY_CONFIG: write(
        "providers:\n  openai:\n    type: openai\n    api_key: ${KEY}\nmodels:\n  - name: openai/gpt-4o-mini\n    cache_creation_input_token_cost: null\nrouter:\n  num_retries: 1\n",
      ),
      KEY: "sk-from-env",
    });
    expect(ok.providers.openai?.api_key).toBe("sk-from-env");
    expect(ok.models[0]?.cache_creation_input_token_cost).toBeNull();
  });
});
