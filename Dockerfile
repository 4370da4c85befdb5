# The gateway on Bun. Build: docker build -t llm-gateway .   Run: docker run -p 4000:4000 -v gw-data:/data llm-gateway
FROM oven/bun:1.4.5-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The npm "bun" package ships Bun through optional dependencies; the image already has Bun.
RUN bun install --production --omit optional --ignore-scripts

FROM oven/bun:1.4.5-slim
WORKDIR /app
# Bun's fetch runs at most 256 requests at once per process by default; a gateway streams far more.
ENV NODE_ENV=production \
    BUN_CONFIG_MAX_HTTP_REQUESTS=4096 \
    PORT=4000 \
    GATEWAY_DATA_DIR=/data
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY drizzle ./drizzle
COPY config ./config
COPY src ./src
RUN mkdir -p /data && chown bun:bun /data
USER bun
EXPOSE 4000
VOLUME ["/data"]
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 4000) + '/health/liveliness').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM is handled by the gateway itself: it drains in-flight requests, then exits 0.
STOPSIGNAL SIGTERM
CMD ["bun", "src/index.ts"]
