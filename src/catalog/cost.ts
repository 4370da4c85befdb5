/**
 * What a request cost. Uncached input, cache reads, cache writes and output are each billed at
 * their own price. A `null` price is unpublished: those tokens are billed at the model's input price
 * and the result is marked estimated; a model without prices at all costs 0, estimated. Reasoning
 * tokens are part of output unless the catalog prices them apart.
 */
import type { Usage } from "../protocols/canonical";
import type { Prices } from "./catalog";

export interface Cost {
  cost: number;
  estimated: boolean;
}

export function costOf(usage: Usage, prices: Prices): Cost {
  let estimated = false;
  const priced = (tokens: number, price: number | null): number => {
    if (tokens <= 0) return 0;
    if (price !== null) return tokens * price;
    estimated = true;
    return prices.input === null ? 0 : tokens * prices.input;
  };
  const uncached = Math.max(0, usage.inputTokens - usage.cacheReadTokens - usage.cacheWriteTokens);
  const reasoningApart = prices.reasoning !== null ? usage.reasoningTokens : 0;
  const cost =
    priced(uncached, prices.input) +
    priced(usage.cacheReadTokens, prices.cacheRead) +
    priced(usage.cacheWriteTokens, prices.cacheWrite) +
    priced(usage.outputTokens - reasoningApart, prices.output) +
    priced(reasoningApart, prices.reasoning);
  if (prices.input === null && prices.output === null) estimated = true;
  return { cost, estimated };
}
