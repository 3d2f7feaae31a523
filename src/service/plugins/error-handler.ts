/**
 * The one map from error codes to HTTP statuses, and the error handler that applies it. Every
 * error leaves as `{code, message}`; a BootsealError's message is safe to show by contract
 * (src/errors.ts), its cause goes to the log only. Anything else is a bug: 500 "internal
 * error", logged with its stack, never echoed.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { BootsealError, type ErrorCode } from "../../errors.ts";
import { stateOf } from "../request-state.ts";

export const HTTP_STATUS: Record<ErrorCode, number> = {
  USAGE: 500, // a configuration mistake of the service, not of the client
  BAD_INPUT: 400,
  UNSUPPORTED: 501,
  MAC_MISMATCH: 400,
  NO_MAC: 400,
  NO_KEY_AVAILABLE: 500, // the service never decrypts; reaching this is a bug
  KEY_ACCESS_DENIED: 502, // the key service refused the service's own credential
  KEY_NOT_FOUND: 502,
  KEY_UNAVAILABLE: 503,
  ALREADY_ENCRYPTED: 400,
  NOT_ENCRYPTED: 400,
  NOT_FOUND: 404,
  PRECONDITION_FAILED: 412,
  STORE_FORBIDDEN: 502,
  STORE_UNAVAILABLE: 503,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  TOKEN_EXPIRED: 401,
  TOKEN_EXHAUSTED: 401,
  ALREADY_FETCHED: 409,
  MINT_REQUIRED: 409,
  TOO_LARGE: 413,
  REQUEST_TIMEOUT: 408,
  RATE_LIMITED: 429,
  IO_ERROR: 500,
  LISTEN_FAILED: 500, // client-side (bootseal serve at start-up); never an HTTP answer
  SERVICE_UNAVAILABLE: 503, // a client-side code (bootseal fetch); never raised by the service
  PATH_NOT_ALLOWED: 500, // client-side (bootseal fetch)
  EXEC_FAILED: 500, // client-side (bootseal fetch)
  CONFLICTING_FLAGS: 500, // client-side (the CLI's sops commands), as are the ones below
  NO_FILE: 500,
  KEYS_ON_MISSING_FILE: 500,
  READ_FAILED: 500,
  WRITE_FAILED: 500,
  UNREPRESENTABLE: 400, // the document cannot be written in the format asked for
  EMPTY_DOCUMENT: 400,
  DECRYPTION_FAILED: 400,
  BAD_ENCRYPTION_CONTEXT: 500,
  BAD_TREE_PATH: 500,
  BAD_SET_VALUE: 500,
  DUPLICATE_KEY_KIND: 500,
  NOT_MODIFIED: 500,
  NO_EDITOR: 500,
  // The CLI's own (bootseal check); no route answers it.
  CHECK_FAILED: 500,
  INTERNAL: 500,
};

/** Seconds a client should wait after a 503 before trying again. */
export const RETRY_AFTER_SECONDS = 5;

/** Fastify's own errors that are the client's doing. */
const FASTIFY_CODES: Readonly<
  Record<string, { status: number; code: ErrorCode | "UNSUPPORTED_MEDIA_TYPE" }>
> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, code: "TOO_LARGE" },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: { status: 415, code: "UNSUPPORTED_MEDIA_TYPE" },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, code: "BAD_INPUT" },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, code: "BAD_INPUT" },
  FST_ERR_CTP_INVALID_JSON_BODY: { status: 400, code: "BAD_INPUT" },
  FST_ERR_BAD_STATUS_CODE: { status: 500, code: "INTERNAL" },
};

export interface ErrorBody {
  readonly code: string;
  readonly message: string;
}

export function errorReply(reply: FastifyReply, status: number, body: ErrorBody): FastifyReply {
  stateOf(reply.request).errorCode = body.code;
  if (status === 503) void reply.header("retry-after", String(RETRY_AFTER_SECONDS));
  return reply.code(status).type("application/json").send(body);
}

export function statusOf(err: BootsealError): number {
  return HTTP_STATUS[err.code];
}

export function handleError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error instanceof BootsealError) {
    const status = statusOf(error);
    if (status >= 500) request.log.warn({ err: error, code: error.code }, "request failed");
    return errorReply(reply, status, { code: error.code, message: error.message });
  }
  const fe = error as FastifyError;
  if (fe.validation) {
    return errorReply(reply, 400, { code: "BAD_INPUT", message: fe.message });
  }
  const known = fe.code ? FASTIFY_CODES[fe.code] : undefined;
  if (known) {
    return errorReply(reply, known.status, { code: known.code, message: fe.message });
  }
  if (fe.statusCode === 429) {
    return errorReply(reply, 429, { code: "RATE_LIMITED", message: "too many requests" });
  }
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    // Other Fastify client errors (malformed URL, header...): their messages name no input value.
    return errorReply(reply, fe.statusCode, { code: "BAD_INPUT", message: fe.message });
  }
  request.log.error({ err: error }, "request failed");
  return errorReply(reply, 500, { code: "INTERNAL", message: "internal error" });
}

export function errorHandlerPlugin(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => handleError(error, request, reply));
  app.setNotFoundHandler((_request, reply) => {
    void errorReply(reply, 404, { code: "NOT_FOUND", message: "no such route" });
  });
}
