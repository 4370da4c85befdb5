/** Byte streams cut at chosen sizes, and draining async iterables: for stream-parsing tests. */

/** The text (or bytes) as a stream of `cut`-byte chunks, to split frames and characters anywhere. */
export function chunkedStream(input: string | Uint8Array, cut = 17): ReadableStream<Uint8Array> {
  const bytes = typeof input === "string" ? new TextEncoder().encode(input) : input;
  return new ReadableStream({
    start(c) {
      for (let i = 0; i < bytes.length; i += cut) c.enqueue(bytes.slice(i, i + cut));
      c.close();
    },
  });
}

export async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of it) out.push(e);
  return out;
}
