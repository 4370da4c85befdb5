/**
 * One error family for the whole gateway. Every failure a caller can see is a GatewayError,
 * rendered once (in onError) in the caller's protocol shape.
 */
export interface ErrorOptions {
  type?: string;
  code?: string | null;
  param?: string | null;
  headers?: Record<string, string>;
}

const DEFAULT_TYPE: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "invalid_request_error",
  409: "conflict_error",
  413: "invalid_request_error",
  415: "invalid_request_error",
  429: "rate_limit_error",
  500: "server_error",
  503: "service_unavailable",
};

export class GatewayError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string | null;
  readonly param: string | null;
  readonly headers: Record<string, string> | undefined;

  constructor(status: number, message: string, opts: ErrorOptions = {}) {
    super(message);
    this.name = "GatewayError";
    this.status = status;
    this.type = opts.type ?? DEFAULT_TYPE[status] ?? (status >= 500 ? "server_error" : "invalid_request_error");
    this.code = opts.code ?? null;
    this.param = opts.param ?? null;
    this.headers = opts.headers;
  }

  /** OpenAI's error envelope: `{"error": {"message", "type", "param", "code"}}`. */
  toResponse(): Response {
    const body = JSON.stringify({
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
    });
    return new Response(body, {
      status: this.status,
      headers: { "content-type": "application/json", ...this.headers },
    });
  }
}

export const badRequest = (message: string, param: string | null = null, code = "invalid_request") =>
  new GatewayError(400, message, { param, code });
export const unauthorized = (message: string, code = "invalid_api_key") => new GatewayError(401, message, { code });
export const forbidden = (message: string, code = "permission_denied", param: string | null = null) =>
  new GatewayError(403, message, { code, param });
export const notFound = (message: string, code = "not_found", param: string | null = null) =>
  new GatewayError(404, message, { code, param });
export const conflict = (message: string, param: string | null = null, code = "conflict") =>
  new GatewayError(409, message, { param, code });
