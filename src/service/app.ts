/**
 * buildApp(deps) assembles the Fastify instance and never listens: unit tests call
 * app.inject(), server.ts binds it to a socket.
 */
import Fastify, { type FastifyError, type FastifyInstance } from "fastify";
import { healthRoutes, type ReadinessProbe } from "./routes/health.ts";

export interface AppDeps {
  readonly probes: readonly ReadinessProbe[];
  /** false in tests that want silence; a pino options object otherwise. */
  readonly logger?: boolean | { level: string };
  readonly bodyLimit?: number;
}

export function buildApp(deps: AppDeps): FastifyInstance {
  const app = Fastify({
    logger: deps.logger ?? { level: "info" },
    bodyLimit: deps.bodyLimit ?? 1024 * 1024,
    // Request ids come from us, never from a client header that could be forged into the audit log.
    genReqId: () => crypto.randomUUID(),
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status =
      error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: error }, "request failed");
    void reply.code(status).send({
      code: status === 500 ? "INTERNAL" : (error.code ?? "BAD_INPUT"),
      message: status === 500 ? "internal error" : error.message,
    });
  });
  app.setNotFoundHandler((_request, reply) => {
    void reply.code(404).send({ code: "NOT_FOUND", message: "no such route" });
  });
  healthRoutes(app, deps.probes);
  return app;
}
