/** POST (the machine) and GET (controllers) /v1/machines/:ns/:name/status. */
import type { FastifyInstance } from "fastify";
import { BootsealError } from "../../errors.ts";
import type { ServiceContext } from "../context.ts";
import type { StatusEntry } from "../machine-store.ts";
import { signalFor } from "../plugins/auth.ts";
import { getStatusSchema, MESSAGE_MAX_BYTES, OUTPUT_MAX_BYTES, postStatusSchema } from "../schemas/status.ts";

type MachineParams = { ns: string; name: string };
type StatusBody = {
  phase: "fetching" | "decrypted" | "written" | "running" | "succeeded" | "failed";
  message?: string;
  attempt?: number;
  exitCode?: number;
  output?: string;
};

function checkBytes(value: string | undefined, limit: number, field: string): void {
  // The schema bounds characters; the limit is in UTF-8 bytes.
  if (value !== undefined && Buffer.byteLength(value) > limit) {
    throw new BootsealError("BAD_INPUT", `${field} is longer than ${limit} bytes`);
  }
}

export function machineStatusRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const { machines } = ctx;

  app.post(
    "/v1/machines/:ns/:name/status",
    {
      schema: postStatusSchema,
      bodyLimit: 64 * 1024,
      config: { auth: { machine: true, controller: false }, audit: "status" },
    },
    async (request, reply) => {
      const p = request.params as MachineParams;
      const m = { namespace: p.ns, name: p.name };
      const body = request.body as StatusBody;
      checkBytes(body.message, MESSAGE_MAX_BYTES, "message");
      checkBytes(body.output, OUTPUT_MAX_BYTES, "output");
      const now = ctx.now();
      await ctx.guard.checkMachine(request, reply, now);
      const entry: Omit<StatusEntry, "version"> = {
        phase: body.phase,
        at: now.toISOString(),
        by: "machine",
        ...(body.message !== undefined ? { message: body.message } : {}),
        ...(body.attempt !== undefined ? { attempt: body.attempt } : {}),
        ...(body.exitCode !== undefined ? { exitCode: body.exitCode } : {}),
        ...(body.output !== undefined ? { output: body.output } : {}),
      };
      const record = await machines.recordPhase(m, entry);
      ctx.metrics.statusPosts.inc({ phase: body.phase });
      ctx.events.publish({ ...m, phase: body.phase, version: record.version, at: record.updatedAt });
      if (body.phase === "succeeded" && ctx.oneTimeFetch === "after-success") {
        // One-time fetch: the secret is not kept once the machine says it is bootstrapped.
        if (await machines.deleteConfigAndToken(m)) await machines.recordDeleted(m, now);
      }
      return { phase: record.phase, version: record.version, updatedAt: record.updatedAt };
    },
  );

  app.get(
    "/v1/machines/:ns/:name/status",
    { schema: getStatusSchema, config: { auth: { scope: "status:read" } } },
    async (request, reply) => {
      const p = request.params as MachineParams;
      const record = await machines.readStatus(
        { namespace: p.ns, name: p.name },
        { signal: signalFor(reply) },
      );
      if (!record) throw new BootsealError("NOT_FOUND", `no status for ${p.ns}/${p.name}`);
      return { ...record, published: record.config !== null };
    },
  );
}
