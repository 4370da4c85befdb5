/** Probes for orchestrators: liveness never needs auth or dependencies; readiness checks them. */
import { Elysia } from "elysia";

export type DependencyStatus = { status: "up" } | { status: "down"; error: string } | { status: "not_configured" };
export type ReadinessCheck = () => Promise<DependencyStatus>;

/** A dependency's probe; a critical one that is down makes the instance unready (503). */
export interface Dependency {
  check: ReadinessCheck;
  critical: boolean;
}

export function healthRoutes(deps: Record<string, Dependency>) {
  const alive = () => ({ status: "alive" });
  const names = Object.keys(deps);
  return new Elysia({ prefix: "/health" })
    .get("/liveliness", alive)
    .get("/liveness", alive)
    .get("/readiness", async ({ set }) => {
      const results = await Promise.all(names.map((n) => (deps[n] as Dependency).check()));
      const dependencies = Object.fromEntries(names.map((n, i) => [n, results[i]]));
      const down = names.filter((_, i) => results[i]?.status === "down");
      const ready = down.every((n) => !deps[n]?.critical);
      set.status = ready ? 200 : 503;
      return { status: !ready ? "unavailable" : down.length ? "degraded" : "ready", dependencies };
    });
}

/** Runs a probe and turns its failure into a `down` status with a short reason. */
export function probe(run: () => Promise<void>): ReadinessCheck {
  return async () => {
    try {
      await run();
      return { status: "up" };
    } catch (e) {
      return { status: "down", error: e instanceof Error ? e.message : String(e) };
    }
  };
}
