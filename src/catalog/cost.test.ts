import { describe, expect, test } from "bun:test";
import type { Usage } from "../protocols/canonical";
import type { Prices } from "./catalog";
import { costOf } from "./cost";

const usage = (u: Partial<Usage>): Usage => ({
  inputTokens: 0,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  ...u,
});
const prices = (p: Partial<Prices>): Prices => ({
  input: null,
  output: null,
  cacheRead: null,
  cacheWrite: null,
  reasoning: null,
  ...p,
});

describe("cost", () => {
  test("each token kind at its own price", () => {
    const p = prices({ input: 3e-6, output: 15e-6, cacheRead: 0.3e-6, cacheWrite: 3.75e-6 });
    const c = costOf(usage({ inputTokens: 1000, cacheReadTokens: 600, cacheWriteTokens: 100, outputTokens: 50 }), p);
    expect(c.cost).toBeCloseTo(300 * 3e-6 + 600 * 0.3e-6 + 100 * 3.75e-6 + 50 * 15e-6, 15);
    expect(c.estimated).toBe(false);
  });

  test("a null cache price bills those tokens at the input price and marks the cost estimated", () => {
    const p = prices({ input: 1e-6, output: 2e-6, cacheRead: 0.5e-6, cacheWrite: null });
    const c = costOf(usage({ inputTokens: 100, cacheReadTokens: 10, cacheWriteTokens: 20, outputTokens: 5 }), p);
    expect(c.cost).toBeCloseTo(70 * 1e-6 + 10 * 0.5e-6 + 20 * 1e-6 + 5 * 2e-6, 15);
    expect(c.estimated).toBe(true);
    // no cache tokens used: nothing had to be guessed
    expect(costOf(usage({ inputTokens: 100, outputTokens: 5 }), p).estimated).toBe(false);
  });

  test("reasoning is output unless priced apart", () => {
    const u = usage({ inputTokens: 10, outputTokens: 100, reasoningTokens: 60 });
    expect(costOf(u, prices({ input: 1e-6, output: 4e-6 })).cost).toBeCloseTo(10e-6 + 400e-6, 15);
    expect(costOf(u, prices({ input: 1e-6, output: 4e-6, reasoning: 8e-6 })).cost).toBeCloseTo(
      10e-6 + 40 * 4e-6 + 60 * 8e-6,
      15,
    );
  });

  test("a model without prices costs 0 and is estimated", () => {
    expect(costOf(usage({ inputTokens: 10, outputTokens: 10 }), prices({}))).toEqual({ cost: 0, estimated: true });
  });
});
