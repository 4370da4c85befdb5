/** Boot: config, database and migrations, master key, listen; graceful shutdown on SIGTERM/SIGINT. */
import { createApp } from "./app";
import { Authenticator } from "./auth/authenticator";
import { resolveMasterKey } from "./auth/master";
import { Propagator } from "./auth/propagation";
import { ConfigError, loadConfig } from "./config";
import { buildInference, type InferenceParts } from "./gateway";
import { probe } from "./health/routes";
import { createLogger } from "./log";
import { createRedis } from "./redis/client";
import { startBudgetResets } from "./spend/budget-reset";
import { openDatabase } from "./store/db";

/** Pub/sub channel (under the Redis key prefix) carrying key and team invalidations. */
const INVALIDATION_CHANNEL = "invalidate";

async function main(): Promise<void> {
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${e.message}\n`);
      process.exit(1);
    }
    throw e;
  }
  const log = createLogger(config.logLevel);

  let database: Awaited<ReturnType<typeof openDatabase>>;
  try {
    database = await openDatabase(config.database);
  } catch (e) {
    const where =
      "url" in config.database
        ? "DATABASE_URL"
        : `embedded database in ${"dataDir" in config.database ? config.database.dataDir : "memory"}`;
    log.error("cannot open the database", { target: where, error: (e as Error).message });
    process.exit(1);
  }

  const master = await resolveMasterKey(database.db, config.masterKey);
  if (master.generated) {
    process.stdout.write(
      `\nGenerated a master key. It is shown only this once and only its hash is stored:\n\n    ${master.generated}\n\nUse it as 'Authorization: Bearer <master key>' on the management API, or set GATEWAY_MASTER_KEY.\n\n`,
    );
  }

  // Redis (optional): shared limits, cross-instance invalidation, ledger overflow. Not reachable
  // at start is not fatal: the client keeps reconnecting and the failure policy applies meanwhile.
  const redis = config.redisUrl ? createRedis(config.redisUrl, { prefix: config.redisPrefix, log }) : undefined;
  if (redis) {
    await redis
      .ready(5000)
      .catch(() => log.error("Redis is not reachable yet; will keep trying", { policy: config.redisFailure }));
  }

  let inference: InferenceParts;
  try {
    inference = buildInference(config, database.db, log, redis ? { redis } : {});
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${e.message}\n`);
      await database.close();
      process.exit(1);
    }
    throw e;
  }

  const authenticator = new Authenticator(database.db, {
    masterKeyHash: master.hash,
    cacheTtlMs: config.keyCacheTtlMs,
    cacheMaxEntries: config.keyCacheMaxEntries,
  });
  const broadcast = redis ? { publish: (m: string) => redis.publish(INVALIDATION_CHANNEL, m) } : undefined;
  const invalidator = new Propagator(authenticator, log, redis ? inference.limiter : undefined, broadcast);
  const subscriber = redis?.subscriber();
  await subscriber
    ?.subscribe(INVALIDATION_CHANNEL, (message) => invalidator.receive(message))
    .catch((e: unknown) => log.error("cannot subscribe to key invalidations yet", { error: (e as Error).message }));

  const app = createApp({
    database,
    authenticator,
    invalidator,
    ...(redis
      ? { redisHealth: { check: probe(() => redis.ping(1000)), critical: config.redisFailure === "fail_closed" } }
      : {}),
    log,
    maxBodyBytes: config.maxBodyBytes,
    responsesRetentionMs: config.responsesRetentionMs,
    ...inference,
  });
  try {
    app.listen({
      port: config.port,
      hostname: config.host,
      // Elysia defaults to SO_REUSEPORT, which lets a second instance share a taken port silently
      // (the kernel then splits connections between them). A taken port must be an error.
      reusePort: false,
      // No cap of Bun's own (it would answer a bare 413 with an empty body): the body reader
      // answers 413 in the error envelope at any size, from Content-Length before reading, or
      // as soon as a chunked body passes server.max_body_bytes.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    });
  } catch (e) {
    if ((e as { code?: unknown }).code !== "EADDRINUSE") throw e;
    process.stderr.write(
      `Cannot start: PORT ${config.port} is already in use on ${config.host} (another gateway or program listens there). Stop it or set PORT to a free port.\n`,
    );
    await inference.ledger.close();
    await inference.limiter.close();
    await subscriber?.close();
    await redis?.close();
    await database.close();
    process.exit(1);
  }
  const server = app.server;
  if (!server) throw new Error("server did not start");
  const stopBudgetResets = startBudgetResets(database.db, log);
  log.info("gateway listening", {
    url: `http://${config.host}:${server.port}`,
    port: server.port ?? config.port,
    database: database.kind,
    models: inference.catalog.list().length,
    providers: inference.adapters.size,
    master_key: config.masterKey
      ? "from GATEWAY_MASTER_KEY"
      : master.generated
        ? "generated (printed above)"
        : "stored hash",
  });
  // Read by Bun once, at start: without it fetch runs 256 upstream requests at once and queues the rest.
  const upstreamConcurrency = Number(process.env.BUN_CONFIG_MAX_HTTP_REQUESTS ?? 256);
  if (!(upstreamConcurrency >= 1024)) {
    log.warn("Bun allows few concurrent upstream requests; streams beyond that wait in the gateway", {
      BUN_CONFIG_MAX_HTTP_REQUESTS: upstreamConcurrency,
      hint: "start with 'npm start' (sets 4096) or set BUN_CONFIG_MAX_HTTP_REQUESTS before Bun starts",
    });
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down: no new connections, finishing in-flight requests", { signal });
    const drained = await Promise.race([
      server.stop(false).then(() => true),
      Bun.sleep(config.shutdownTimeoutMs).then(() => false),
    ]);
    if (!drained) {
      log.warn("shutdown timeout reached; closing remaining connections", { timeout_ms: config.shutdownTimeoutMs });
      await server.stop(true);
    }
    stopBudgetResets();
    await inference.ledger.close();
    await Promise.race([inference.alerts.idle(), Bun.sleep(5000)]);
    await inference.limiter.close();
    await subscriber?.close();
    await redis?.close();
    await database.close();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

await main();
