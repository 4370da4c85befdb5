/**
 * A bounded TTL cache that loads misses once (concurrent misses share one load) and never lets a
 * load that began before an invalidation write its now-stale result back.
 */
export interface LoadingCacheOptions {
  ttlMs: number;
  /** TTL for "not found" results, usually shorter. */
  negativeTtlMs: number;
  maxEntries: number;
  now?: () => number;
}

interface Entry<V> {
  value: V;
  expiresAt: number;
}

export class LoadingCache<V> {
  private readonly entries = new Map<string, Entry<V | null>>();
  private readonly inflight = new Map<string, Promise<V | null>>();
  /** Bumped by every invalidation; a load only stores its result if no invalidation happened meanwhile. */
  private generation = 0;
  private readonly now: () => number;

  constructor(
    private readonly load: (id: string) => Promise<V | null>,
    private readonly opts: LoadingCacheOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  get(id: string): V | null | Promise<V | null> {
    const hit = this.entries.get(id);
    if (hit !== undefined && hit.expiresAt > this.now()) return hit.value;
    const pending = this.inflight.get(id);
    if (pending) return pending;
    const generation = this.generation;
    const promise = this.load(id)
      .then((value) => {
        if (generation === this.generation) this.store(id, value);
        return value;
      })
      .finally(() => {
        if (this.inflight.get(id) === promise) this.inflight.delete(id);
      });
    this.inflight.set(id, promise);
    return promise;
  }

  invalidate(id: string): void {
    this.generation++;
    this.entries.delete(id);
    this.inflight.delete(id);
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
    this.inflight.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private store(id: string, value: V | null): void {
    const ttl = value === null ? Math.min(this.opts.negativeTtlMs, this.opts.ttlMs) : this.opts.ttlMs;
    if (ttl <= 0) return;
    this.entries.delete(id);
    this.entries.set(id, { value, expiresAt: this.now() + ttl });
    if (this.entries.size > this.opts.maxEntries) {
      // Maps iterate in insertion order: the first key is the oldest entry.
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }
}
