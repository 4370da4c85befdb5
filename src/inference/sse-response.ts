/**
 * Turns an async sequence of SSE frames into a response body that is written as frames arrive, with
 * a keep-alive comment whenever the upstream goes quiet, and that reports how it ended. A producer
 * silent for longer than `idleMs` is told to stop (`onIdle`); it then ends with its error frames.
 */
import { SSE_KEEPALIVE } from "../http/sse";

export type StreamOutcome = "complete" | "cancelled";

export interface SseBodyOptions {
  heartbeatMs: number;
  /** How long the producer may take for its next frame (while the client waits for it). */
  idleMs?: number;
  /** The producer exceeded `idleMs`: abort the upstream. Called at most once. */
  onIdle?(): void;
  /** The client went away: abort the upstream. */
  onCancel(): void;
  /** Called exactly once, when the stream completed or was cancelled. */
  onEnd(outcome: StreamOutcome): void;
}

const TICK = Symbol("tick");

export function sseBody(frames: AsyncIterator<Uint8Array>, opts: SseBodyOptions): ReadableStream<Uint8Array> {
  let pending: Promise<IteratorResult<Uint8Array>> | undefined;
  // When the frame being waited for is overdue. The clock starts when the frame is asked for, so a
  // client that reads slowly never makes the upstream look silent.
  let idleAt = Number.POSITIVE_INFINITY;
  let idleMs = opts.onIdle ? opts.idleMs : undefined;
  let ended = false;
  const end = (outcome: StreamOutcome) => {
    if (ended) return;
    ended = true;
    opts.onEnd(outcome);
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (!pending) {
          pending = frames.next();
          if (idleMs !== undefined) idleAt = performance.now() + idleMs;
        }
        for (;;) {
          let wait = opts.heartbeatMs;
          let overdue = false;
          if (idleAt !== Number.POSITIVE_INFINITY) {
            const left = idleAt - performance.now();
            if (left <= wait) {
              wait = Math.max(0, left);
              overdue = true;
            }
          }
          let timer: ReturnType<typeof setTimeout> | undefined;
          const tick = new Promise<typeof TICK>((r) => {
            timer = setTimeout(() => r(TICK), wait);
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
            if (overdue) {
              // Once: the producer now fails its upstream read and writes its error frames.
              idleAt = Number.POSITIVE_INFINITY;
              idleMs = undefined;
              opts.onIdle?.();
              continue;
            }
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
          return;
        }
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
