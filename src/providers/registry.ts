/** Builds one adapter per configured provider, validating each provider's settings at start. */
import type { ProviderConfig } from "../config/file";
import { createAnthropicAdapter } from "./anthropic/adapter";
import { createBedrockAdapter } from "./bedrock/adapter";
import { createGeminiAdapter } from "./gemini/adapter";
import { createOpenAIAdapter } from "./openai/adapter";
import type { ProviderAdapter } from "./types";
import { createVertexAdapter } from "./vertex/adapter";

export function createAdapters(providers: Record<string, ProviderConfig>): Map<string, ProviderAdapter> {
  const out = new Map<string, ProviderAdapter>();
  for (const [name, cfg] of Object.entries(providers)) out.set(name, createAdapter(name, cfg));
  return out;
}

export function createAdapter(name: string, cfg: ProviderConfig): ProviderAdapter {
  switch (cfg.type) {
    case "openai":
    case "openai-compatible":
    case "azure":
      return createOpenAIAdapter(name, cfg.type, cfg);
    case "anthropic":
      return createAnthropicAdapter(name, cfg);
    case "gemini":
      return createGeminiAdapter(name, cfg);
    case "vertex":
      return createVertexAdapter(name, cfg);
    case "bedrock":
      return createBedrockAdapter(name, cfg);
    default: {
      const unreachable: never = cfg.type;
      return unreachable;
    }
  }
}
