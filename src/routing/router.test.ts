/** The router with a controlled clock and sleep: retry waits, retry-after, fallbacks, rpm/tpm, traces. */
import { describe, expect, test } from "bun:test";
import type { ServedModel } from "../catalog/catalog";
import { GatewayError } from "../http/errors";
import { silentLogger } from "../log";
import { UpstreamError } from "../providers/errors";
import type { Deployment } from "../providers/types";
import { ROUTER_DEFAULTS, Router, type RouterOptions, type RouteTrace } from "./router";

const MINUTE = 60_000;

function served(name: string, deployments: Partial<Deployment>[], extra: Partial<ServedModel> = {}): ServedModel {
  const provider = name.slice(0, name.indexOf("/"));
  return {
    name,
    provider,
    mode: "chat",
    prices: { input: null, output: null, cacheRead: null, cacheWrite: null, reasoning: null },
    maxInputTokens: null,
    maxOutputTokens: null,
    capabilities: {},
    fallbacks: [],
    deployments: deployments.map((d, i) => ({
      id: `${name}#${i}`,
      provider,
      upstreamModel: name,
      weight: 1,
      ...d,
    })),
    ...extra,
  };
}

/** A router over the given models, its clock (moved by sleeps) and the sleeps it asked for. */
function setup(models: ServedModel[], opts: Partial<RouterOptions> = {}) {
  const byName = new Map(models.map((m) => [m.name, m]));
  let now = 10 * MINUTE;
  const sleeps: number[] = [];
  const router = new Router(
    (n) => byName.get(n),
    { ...ROUTER_DEFAULTS, backoffMs: 100, ...opts },
    silentLogger,
    () => now,
    () => 0.5,
    async (ms) => {
      sleeps.push(ms);
      now += ms;
    },
  );
  return {
    router,
    sleeps,
    advance: (ms: number) => {
      now += ms;
    },
    at: () => now,
  };
}

const rateLimited = (retryAfterMs?: number) =>
  new UpstreamError("http", "slow down", { status: 429, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) });
const never = new AbortController().signal;

describe("retries", () => {
  test("a retry of the same deployment waits for its retry-after", async () => {
    const m = served("pa/one", [{}]);
    const { router, sleeps } = setup([m]);
    const seen: string[] = [];
    const routed = await router.run(m, never, async (_m, d) => {
      seen.push(d.id);
      if (seen.length === 1) throw rateLimited(2500);
      return "ok";
    });
    expect(routed.value).toBe("ok");
    expect(seen).toEqual(["pa/one#0", "pa/one#0"]);
    expect(sleeps).toEqual([2500]);
    expect(routed.attempts).toBe(2);
  });

  test("another healthy deployment is tried after the normal backoff, not the retry-after", async () => {
    const m = served("pa/two", [{}, {}]);
    const { router, sleeps } = setup([m]);
    const seen: string[] = [];
    await router.run(m, never, async (_m, d) => {
      seen.push(d.id);
      if (seen.length === 1) throw rateLimited(30_000);
      return "ok";
    });
    expect(new Set(seen).size).toBe(2);
    // backoff 100 ms for the first retry, jittered between half and all of it (random is 0.5 here)
    expect(sleeps).toEqual([75]);
  });

  test("a retry-after longer than max_retry_wait_ms is not waited for: the fallback serves at once", async () => {
    const primary = served("pa/primary", [{}], { fallbacks: ["pb/backup"] });
    const backup = served("pb/backup", [{}]);
    const { router, sleeps } = setup([primary, backup], { maxRetryWaitMs: 10_000 });
    const trace: RouteTrace = { attempts: 0, waitedMs: 0 };
    const routed = await router.run(
      primary,
      never,
      async (m) => {
        if (m.name === "pa/primary") throw rateLimited(60_000);
        return m.name;
      },
      trace,
    );
    expect(routed.value).toBe("pb/backup");
    expect(routed.model.name).toBe("pb/backup");
    expect(sleeps).toEqual([]);
    expect(trace).toMatchObject({ attempts: 2, waitedMs: 0 });
  });

  test("without a fallback the long retry-after reaches the client: 429 with retry-after, after one attempt", async () => {
    const m = served("pa/alone", [{}]);
    const { router, sleeps } = setup([m], { maxRetryWaitMs: 10_000 });
    let calls = 0;
    const err = await router
      .run(m, never, async () => {
        calls++;
        throw rateLimited(60_000);
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ status: 429, headers: { "retry-after": "60" } });
    expect(calls).toBe(1);
    expect(sleeps).toEqual([]);
  });

  test("a connection error is retried; the trace names the deployment of every attempt", async () => {
    const m = served("pa/flaky", [{}], { maxRetries: 2 });
    const { router, sleeps } = setup([m]);
    const trace: RouteTrace = { attempts: 0, waitedMs: 0 };
    let calls = 0;
    const routed = await router.run(
      m,
      never,
      async () => {
        if (++calls < 3) throw new UpstreamError("connection", "cannot reach pa: ECONNREFUSED", { status: 502 });
        return "ok";
      },
      trace,
    );
    expect(routed.value).toBe("ok");
    expect(calls).toBe(3);
    expect(sleeps).toEqual([75, 150]);
    expect(trace).toMatchObject({ attempts: 3, waitedMs: 225, deployment: { id: "pa/flaky#0" } });
  });

  test("a failed run leaves the last attempt in the trace", async () => {
    const m = served("pa/down", [{}], { maxRetries: 1 });
    const { router } = setup([m]);
    const trace: RouteTrace = { attempts: 0, waitedMs: 0 };
    const err = await router
      .run(
        m,
        never,
        async () => {
          throw new UpstreamError("http", "unavailable", { status: 503 });
        },
        trace,
      )
      .catch((e) => e);
    expect(err).toMatchObject({ status: 503 });
    expect(trace).toMatchObject({ attempts: 2, model: { name: "pa/down" }, deployment: { id: "pa/down#0" } });
  });
});

describe("timeouts", () => {
  test("a stream's idle timeout: the deployment's setting, else the router's, else the attempt timeout", async () => {
    const own = served("pa/own", [{ timeoutMs: 5000, streamIdleTimeoutMs: 700 }], { timeoutMs: 20_000 });
    const inherited = served("pa/inherited", [{ timeoutMs: 3000 }], { timeoutMs: 20_000 });
    const { router } = setup([own, inherited], { timeoutMs: 60_000 });
    expect((await router.run(own, never, async () => "ok")).streamIdleMs).toBe(700);
    expect((await router.run(inherited, never, async () => "ok")).streamIdleMs).toBe(3000);
    const plain = served("pa/plain", [{}]);
    const r = await setup([plain], { timeoutMs: 60_000, streamIdleTimeoutMs: 9000 }).router.run(
      plain,
      never,
      async () => "ok",
    );
    expect(r.streamIdleMs).toBe(9000);
  });

  test("an attempt is aborted after its timeout", async () => {
    const m = served("pa/slow", [{ timeoutMs: 30 }], { maxRetries: 0 });
    const router = new Router(() => undefined, { ...ROUTER_DEFAULTS, timeoutMs: 60_000 }, silentLogger);
    const err = await router
      .run(m, never, (_m, _d, signal) => {
        return new Promise((_resolve, reject) => {
          signal.addEventListener("abort", () =>
            reject(new UpstreamError("timeout", "pa did not answer in time", { status: 504 })),
          );
        });
      })
      .catch((e) => e);
    expect(err).toMatchObject({ status: 504, code: "upstream_timeout" });
  });
});

describe("deployments' rpm and tpm", () => {
  test("a deployment at its rpm is skipped for the rest of the minute; with all at their limit, 429 with retry-after", async () => {
    const m = served("pa/rpm", [{ rpm: 2 }, { rpm: 1 }]);
    const { router, advance, at } = setup([m]);
    advance(MINUTE - (at() % MINUTE) + 15_000); // 15 s into a minute
    const used: string[] = [];
    for (let i = 0; i < 3; i++) used.push((await router.run(m, never, async () => "ok")).deployment.id);
    expect(used.sort()).toEqual(["pa/rpm#0", "pa/rpm#0", "pa/rpm#1"]);
    let calls = 0;
    const err = await router
      .run(m, never, async () => {
        calls++;
        return "ok";
      })
      .catch((e) => e);
    expect(calls).toBe(0);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ status: 429, code: "deployment_rate_limited", headers: { "retry-after": "45" } });
    advance(45_000);
    expect((await router.run(m, never, async () => "ok")).value).toBe("ok");
  });

  test("a deployment past its tpm (counted from usage) is skipped; the fallback serves", async () => {
    const primary = served("pa/tpm", [{ tpm: 1000 }], { fallbacks: ["pb/spare"] });
    const spare = served("pb/spare", [{}]);
    const { router } = setup([primary, spare]);
    const first = await router.run(primary, never, async (m) => m.name);
    expect(first.value).toBe("pa/tpm");
    router.recordTokens(first.deployment, 600);
    expect((await router.run(primary, never, async (m) => m.name)).value).toBe("pa/tpm");
    router.recordTokens(first.deployment, 600);
    expect((await router.run(primary, never, async (m) => m.name)).value).toBe("pb/spare");
  });

  test("deployments without limits are never counted or skipped", async () => {
    const m = served("pa/free", [{}]);
    const { router } = setup([m]);
    for (let i = 0; i < 500; i++) {
      const r = await router.run(m, never, async () => "ok");
      router.recordTokens(r.deployment, 1_000_000);
    }
    expect((await router.run(m, never, async () => "ok")).value).toBe("ok");
  });
});
