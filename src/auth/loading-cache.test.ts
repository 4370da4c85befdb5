import { describe, expect, test } from "bun:test";
import { LoadingCache } from "./loading-cache";

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("LoadingCache", () => {
  test("loads a miss once, serves hits from memory until the TTL passes", async () => {
    let clock = 0;
    let loads = 0;
    const cache = new LoadingCache(async (id) => `${id}:${++loads}`, {
      ttlMs: 100,
      negativeTtlMs: 10,
      maxEntries: 10,
      now: () => clock,
    });
    const [a, b] = await Promise.all([cache.get("k"), cache.get("k")]);
    expect(a).toBe("k:1");
    expect(b).toBe("k:1");
    expect(cache.get("k")).toBe("k:1");
    clock = 150;
    expect(await cache.get("k")).toBe("k:2");
    expect(loads).toBe(2);
  });

  test("an invalidation during a load keeps the stale result out of the cache", async () => {
    const gate = deferred<string>();
    let version = "old";
    let loads = 0;
    const cache = new LoadingCache(
      async () => {
        loads++;
        if (loads === 1) return gate.promise;
        return version;
      },
      { ttlMs: 60_000, negativeTtlMs: 1000, maxEntries: 10 },
    );
    const first = cache.get("k");
    version = "new";
    cache.invalidate("k");
    gate.resolve("old");
    expect(await first).toBe("old");
    expect(await cache.get("k")).toBe("new");
    expect(loads).toBe(2);
  });

  test("caches not-found for the shorter negative TTL and evicts the oldest entry past the bound", async () => {
    let clock = 0;
    let loads = 0;
    const cache = new LoadingCache<string>(
      async (id) => {
        loads++;
        return id.startsWith("x") ? null : id;
      },
      { ttlMs: 1000, negativeTtlMs: 10, maxEntries: 2, now: () => clock },
    );
    expect(await cache.get("x1")).toBeNull();
    expect(cache.get("x1")).toBeNull();
    clock = 20;
    await cache.get("x1");
    expect(loads).toBe(2);
    await cache.get("a");
    await cache.get("b");
    expect(cache.size).toBe(2);
    await cache.get("a");
    expect(loads).toBe(4);
  });

  test("a TTL of zero disables caching", async () => {
    let loads = 0;
    const cache = new LoadingCache(async () => ++loads, { ttlMs: 0, negativeTtlMs: 0, maxEntries: 10 });
    await cache.get("k");
    await cache.get("k");
    expect(loads).toBe(2);
  });
});
