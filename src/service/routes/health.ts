/** /healthz (liveness), /readyz (the store and any other probe answers) and /metrics. */
import type { FastifyInstance } from "fastify";
import type { Registry } from "prom-client";
import { RETRY_AFTER_SECONDS } from "../plugins/error-handler.ts";

/** Something that can tell whether a dependency answers (the store: a cheap head). */
export interface ReadinessProbe {
  readonly name: string;
  check(): Promise<void>;
}

const statusSchema = {
  type: "object",
  properties: {
    status: { type: "string" },
    checks: { type: "object", additionalProperties: { type: "string" } },
  },
  required: ["status"],
} as const;

export function healthRoutes(
  app: FastifyInstance,
  probes: readonly ReadinessProbe[],
  registry?: Registry,
): void {
  app.get(
    "/healthz",
    { schema: { summary: "Liveness", tags: ["operations"], response: { 200: statusSchema } } },
    async () => ({ status: "ok" }),
  );

  app.get(
    "/readyz",
    {
      schema: {
        summary: "Readiness: the object store answers",
        tags: ["operations"],
        response: { 200: statusSchema, 503: statusSchema },
      },
    },
    async (request, reply) => {
      const checks: Record<string, string> = {};
      let ready = true;
      await Promise.all(
        probes.map(async (probe) => {
          try {
            await probe.check();
            checks[probe.name] = "ok";
          } catch (err) {
            // The cause goes to the log; the response says only which check failed.
            request.log.warn({ err, probe: probe.name }, "readiness check failed");
            checks[probe.name] = "unavailable";
            ready = false;
          }
        }),
      );
      if (!ready) reply.code(503).header("retry-after", String(RETRY_AFTER_SECONDS));
      return { status: ready ? "ready" : "unavailable", checks };
    },
  );

  if (registry) {
    app.get(
      "/metrics",
      {
        schema: {
          summary: "Prometheus metrics",
          tags: ["operations"],
          response: { 200: { type: "string", description: "Prometheus text format" } },
        },
      },
      async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()),
    );
  }
}
