import { describe, expect, test } from "bun:test";
import type { CanonicalRequest } from "../protocols/canonical";
import { countTokens, estimatePromptTokens, promptParts, promptText } from "./estimate";

const request = (texts: string[], system = "You are terse."): CanonicalRequest => ({
  model: "p/m",
  system: [{ type: "text", text: system }],
  messages: texts.map((text, i) =>
    i % 2 === 0
      ? { role: "user" as const, content: [{ type: "text" as const, text }] }
      : { role: "assistant" as const, content: [{ type: "text" as const, text }] },
  ),
  tools: [{ name: "lookup", description: "Finds a thing", parameters: { type: "object", properties: {} } }],
  stream: false,
});

describe("prompt estimates", () => {
  test("the parts' counts plus one separator between parts: what the whole text counts, give or take merges", () => {
    const req = request(["Hello there, how are you?", "Fine, thanks.", "What is the weather in Lisbon?"]);
    const parts = promptParts(req);
    expect(parts).toEqual([
      "You are terse.",
      "Hello there, how are you?",
      "Fine, thanks.",
      "What is the weather in Lisbon?",
      "lookup",
      "Finds a thing",
      '{"type":"object","properties":{}}',
    ]);
    const estimate = estimatePromptTokens(req);
    expect(estimate).toBe(parts.reduce((n, p) => n + countTokens(p), parts.length - 1));
    const whole = countTokens(promptText(req));
    expect(Math.abs(estimate - whole)).toBeLessThanOrEqual(parts.length);
  });

  test("a repeated part (a conversation's history) counts the same from the cache", () => {
    const history = ["First question about the gateway's limits.", "A long answer about rpm and tpm windows."];
    const first = estimatePromptTokens(request(history));
    expect(estimatePromptTokens(request(history))).toBe(first);
    const next = request([...history, "And budgets?"]);
    expect(estimatePromptTokens(next)).toBe(first + 1 + countTokens("And budgets?"));
  });

  test("a huge part is counted exactly at its head and extrapolated, within a few percent", () => {
    const huge = "The quick brown fox jumps over the lazy dog. ".repeat(4_000); // 180,000 characters
    const estimate = estimatePromptTokens(request([huge], ""));
    const exact = countTokens(huge);
    expect(Math.abs(estimate - exact) / exact).toBeLessThan(0.05);
  });

  test("empty parts count nothing but their separator", () => {
    expect(estimatePromptTokens({ model: "p/m", system: [], messages: [], stream: false })).toBe(0);
    expect(estimatePromptTokens(request([""], ""))).toBe(estimatePromptTokens(request(["x"], "")) - countTokens("x"));
  });
});
