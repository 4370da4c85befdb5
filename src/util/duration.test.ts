import { describe, expect, test } from "bun:test";
import { addDuration, durationMs, isDuration, MAX_DURATION_MS } from "./duration";

describe("duration strings", () => {
  test("accepts a whole number with s, m, h or d", () => {
    for (const ok of ["1s", "90s", "15m", "12h", "30d", "365d"]) expect(isDuration(ok)).toBe(true);
  });
  test("rejects everything else", () => {
    for (const bad of ["", "0d", "-1", "1", "d", "1w", "1.5h", " 1d", "1d ", "01d", "1D", "1mo"]) {
      expect(isDuration(bad)).toBe(false);
    }
  });
  test("rejects durations longer than 36500 days, which would overflow dates", () => {
    for (const ok of ["36500d", "876000h", "52560000m", "315360000s"]) expect(isDuration(ok)).toBe(true);
    for (const bad of ["36501d", "3000000d", "99999999h", "999999999d", "999999999m"])
      expect(isDuration(bad)).toBe(false);
    expect(durationMs("36500d")).toBe(MAX_DURATION_MS);
    expect(Number.isNaN(addDuration(new Date(), "36500d").getTime())).toBe(false);
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
