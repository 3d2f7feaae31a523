/** /healthz (liveness), /readyz (the store and any other probe answers) and /metrics. */
import type { FastifyInstance } from "fastify";
import type { Registry } from "prom-client";
import { RETRY_AFTER_SECONDS } from "../plugins/error-handler.ts";
import { errorSchema } from "../schemas/common.ts";

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

/** The one error these routes answer: the HTTP edge's refusal of a malformed request. */
const edgeErrors = {
  400: {
    ...errorSchema,
    description: "BAD_INPUT: the HTTP edge refused the request (a duplicated header, no Host)",
  },
  "4xx": { ...errorSchema, description: "another client error (408 REQUEST_TIMEOUT, 431 TOO_LARGE head)" },
} as const;

export function healthRoutes(
  app: FastifyInstance,
  probes: readonly ReadinessProbe[],
  registry?: Registry,
): void {
  app.get(
    "/healthz",
    {
      schema: {
        summary: "Liveness",
        operationId: "healthz",
        tags: ["operations"],
        security: [],
        response: { 200: { ...statusSchema, description: "the process answers" }, ...edgeErrors },
      },
    },
    async () => ({ status: "ok" }),
  );

  app.get(
    "/readyz",
    {
      schema: {
        summary: "Readiness: the object store answers",
        operationId: "readyz",
        tags: ["operations"],
        security: [],
        response: {
          200: { ...statusSchema, description: "every check answers" },
          503: {
            ...statusSchema,
            description: "a check failed (named in `checks`); Retry-After",
            headers: { "retry-after": { type: "integer", description: "seconds to wait" } },
          },
          ...edgeErrors,
        },
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
          operationId: "metrics",
          tags: ["operations"],
          security: [],
          response: {
            200: {
              description: "the Prometheus text exposition format",
              content: { "text/plain; version=0.0.4": { schema: { type: "string" } } },
            },
            ...edgeErrors,
          },
        },
      },
      async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()),
    );
  }
}
