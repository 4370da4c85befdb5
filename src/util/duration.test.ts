import { describe, expect, test } from "bun:test";
import { addDuration, durationMs, isDuration } from "./duration";

describe("duration strings", () => {
  test("accepts a whole number with s, m, h or d", () => {
    for (const ok of ["1s", "90s", "15m", "12h", "30d", "365d"]) expect(isDuration(ok)).toBe(true);
  });
  test("rejects everything else", () => {
    for (const bad of ["", "0d", "-1", "1", "d", "1w", "1.5h", " 1d", "1d ", "01d", "1D", "1mo"]) {
      expect(isDuration(bad)).toBe(false);
    }
  });
  test("converts to milliseconds", () => {
    expect(durationMs("90s")).toBe(90_000);
    expect(durationMs("15m")).toBe(900_000);
    expect(durationMs("2h")).toBe(7_200_000);
    expect(durationMs("30d")).toBe(2_592_000_000);
    expect(() => durationMs("1w")).toThrow();
    expect(addDuration(new Date("2026-01-01T00:00:00Z"), "1d").toISOString()).toBe("2026-01-02T00:00:00.000Z");
  });
});
