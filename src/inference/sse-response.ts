/**
 * Turns an async sequence of SSE frames into a response body that is written as frames arrive, with
 * a keep-alive comment whenever the upstream goes quiet, and that reports how it ended.
 */
import { SSE_KEEPALIVE } from "../http/sse";

export type StreamOutcome = "complete" | "cancelled";

export interface SseBodyOptions {
  heartbeatMs: number;
  /** The client went away: abort the upstream. */
  onCancel(): void;
  /** Called exactly once, when the stream completed or was cancelled. */
  onEnd(outcome: StreamOutcome): void;
}

const TICK = Symbol("tick");

export function sseBody(frames: AsyncIterator<Uint8Array>, opts: SseBodyOptions): ReadableStream<Uint8Array> {
  let pending: Promise<IteratorResult<Uint8Array>> | undefined;
  let ended = false;
  const end = (outcome: StreamOutcome) => {
    if (ended) return;
    ended = true;
    opts.onEnd(outcome);
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        pending ??= frames.next();
        let timer: ReturnType<typeof setTimeout> | undefined;
        const tick = new Promise<typeof TICK>((r) => {
          timer = setTimeout(() => r(TICK), opts.heartbeatMs);
        });
        let result: IteratorResult<Uint8Array> | typeof TICK;
        try {
          result = await Promise.race([pending, tick]);
        } catch {
          // Producers turn failures into error frames; anything left is a closed stream.
          result = { done: true, value: undefined };
        } finally {
          clearTimeout(timer);
        }
        if (result === TICK) {
          controller.enqueue(SSE_KEEPALIVE);
          return;
        }
        pending = undefined;
        if (result.done) {
          controller.close();
          end("complete");
          return;
        }
        controller.enqueue(result.value);
      },
      cancel() {
        opts.onCancel();
        void frames.return?.(undefined);
        end("cancelled");
      },
    },
    { highWaterMark: 0 },
  );
}
