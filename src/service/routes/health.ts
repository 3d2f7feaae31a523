import type { FastifyInstance } from "fastify";

/** Something that can tell whether the store answers; the embedded default probes its directory. */
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

export function healthRoutes(app: FastifyInstance, probes: readonly ReadinessProbe[]): void {
  app.get("/healthz", { schema: { response: { 200: statusSchema } } }, async () => ({ status: "ok" }));

  app.get(
    "/readyz",
    { schema: { response: { 200: statusSchema, 503: statusSchema } } },
    async (_request, reply) => {
      const checks: Record<string, string> = {};
      let ready = true;
      for (const probe of probes) {
        try {
          await probe.check();
          checks[probe.name] = "ok";
        } catch {
          // The cause goes to the log by the probe's owner; the response says only which check failed.
          checks[probe.name] = "unavailable";
          ready = false;
        }
      }
      if (!ready) reply.code(503).header("retry-after", "5");
      return { status: ready ? "ready" : "unavailable", checks };
    },
  );
}
