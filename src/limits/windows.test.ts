import { describe, expect, test } from "bun:test";
import { nextResetAt, periodWindow, recordWindow } from "./windows";

const H = 3_600_000;
const D = 24 * H;

describe("budget windows", () => {
  test("no duration: one window forever, stored spend counts", () => {
    expect(recordWindow(null, null, 123)).toEqual({
      id: "all",
      endsAt: Number.MAX_SAFE_INTEGER,
      storedSpendCounts: true,
    });
  });

  test("a window that has not ended yet is the stored one", () => {
    const reset = new Date(10 * D);
    expect(recordWindow("1d", reset, 9.5 * D)).toEqual({ id: String(10 * D), endsAt: 10 * D, storedSpendCounts: true });
  });

  test("an ended window steps forward; every instance computes the same one; stored spend no longer counts", () => {
    const reset = new Date(10 * D);
    expect(recordWindow("1d", reset, 10 * D)).toEqual({ id: String(11 * D), endsAt: 11 * D, storedSpendCounts: false });
    expect(recordWindow("1d", reset, 12.5 * D)).toEqual({
      id: String(13 * D),
      endsAt: 13 * D,
      storedSpendCounts: false,
    });
    expect(nextResetAt("1d", reset, 12.5 * D).getTime()).toBe(13 * D);
  });

  test("per-model periods are aligned to the epoch", () => {
    expect(periodWindow("1h", 5.5 * H)).toEqual({ id: `1h:${5 * H}`, endsAt: 6 * H, storedSpendCounts: false });
    expect(periodWindow("1d", 3 * D + 1).id).toBe(`1d:${3 * D}`);
  });
});
