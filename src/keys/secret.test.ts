import { describe, expect, test } from "bun:test";
import { generateSecret, hashSecret, looksLikeHash, maskSecret } from "./secret";

describe("key secrets", () => {
  test("are sk- plus 48 base62 characters and never repeat", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const s = generateSecret();
      expect(s).toMatch(/^sk-[0-9A-Za-z]{48}$/);
      seen.add(s);
    }
    expect(seen.size).toBe(2000);
  });
  test("use every base62 character", () => {
    const chars = new Set(Array.from({ length: 200 }, generateSecret).join("").slice(3));
    expect(chars.size).toBeGreaterThanOrEqual(62);
  });
  test("hash to SHA-256 hex and mask to the last four characters", () => {
    expect(hashSecret("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(looksLikeHash(hashSecret("x"))).toBe(true);
    expect(looksLikeHash("sk-abc")).toBe(false);
    expect(maskSecret("sk-0123456789abcdefWXYZ")).toBe("sk-...WXYZ");
  });
});
