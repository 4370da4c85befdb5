/** The single place where failures become responses. No stack trace ever leaves the process. */
import type { Logger } from "../log";
import { loggableError } from "../store/db";
import { badRequest, GatewayError, notFound } from "./errors";
import { toValidationError } from "./validate";

type ValueErrorLike = Parameters<typeof toValidationError>[0];

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "57P01",
  "57P02",
  "57P03",
  "53300",
]);

/** True when a failure comes from a dependency being unreachable rather than from a bug. */
export function isUnavailable(err: unknown): boolean {
  let cur: unknown = err;
  for (let depth = 0; cur && depth < 5; depth++) {
    const code = (cur as { code?: unknown }).code;
    // Class 08 is "connection exception"; 3D000 is a database that no longer exists.
    if (typeof code === "string" && (CONNECTION_CODES.has(code) || code.startsWith("08") || code === "3D000"))
      return true;
    if (cur instanceof Error && /PGlite is closed|database is closed/i.test(cur.message)) return true;
    cur = (cur as { cause?: unknown }).cause;
  }
  return false;
}

export function toGatewayError(
  code: string | number,
  error: unknown,
  method: string,
  path: string,
  log: Logger,
): GatewayError {
  if (error instanceof GatewayError) return error;
  const cause = (error as { cause?: unknown } | null)?.cause;
  if (code === "PARSE") {
    return cause instanceof GatewayError ? cause : badRequest("Malformed request body", null, "invalid_json");
  }
  if (code === "NOT_FOUND") return notFound(`Unknown route: ${method} ${path}`, "route_not_found");
  if (code === "VALIDATION") {
    const valueError = (error as { valueError?: ValueErrorLike }).valueError;
    return valueError ? toValidationError(valueError, "request") : badRequest("Invalid request");
  }
  if (code === "INVALID_COOKIE_SIGNATURE" || code === "INVALID_FILE_TYPE") return badRequest("Invalid request");
  if (isUnavailable(error)) {
    log.error("dependency unavailable", { method, path, error: loggableError(error) });
    return new GatewayError(503, "A storage dependency is unavailable; retry shortly", { code: "service_unavailable" });
  }
  log.error("unhandled error", { method, path, error: loggableError(error) });
  return new GatewayError(500, "Internal server error", { code: "internal_error" });
}
