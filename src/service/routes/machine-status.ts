/** POST (the machine) and GET (controllers) /v1/machines/:ns/:name/status; the work is in ../machines/status.ts. */
import { Ajv } from "ajv";
import type { FastifyInstance } from "fastify";
import { BootsealError } from "../../errors.ts";
import { REPORT_MESSAGE_MAX_BYTES, REPORT_OUTPUT_MAX_BYTES } from "../../machine/status-protocol.ts";
import { etagMatches, type ServiceContext } from "../context.ts";
import { readStatus, reportPhase } from "../machines/status.ts";
import { signalFor } from "../plugins/auth.ts";
import { machineTokenOf, stateOf } from "../request-state.ts";
import { getStatusSchema, postStatusSchema } from "../schemas/status.ts";
import type { RequestTypeProvider } from "../schemas/type-provider.ts";
import type { TokenRecord } from "../tokens.ts";

function checkBytes(value: string | undefined, limit: number, field: string): void {
  // The schema bounds characters; the limit is in UTF-8 bytes.
  if (value !== undefined && Buffer.byteLength(value) > limit) {
    throw new BootsealError("BAD_INPUT", `${field} is longer than ${limit} bytes`);
  }
}

/**
 * A report is checked as sent: Fastify's shared Ajv coerces types (`"1"` to 1, `["running"]`
 * to "running", `null` to 0 or ""), which is right for query strings and wrong for a JSON body.
 */
const asSent = new Ajv({ coerceTypes: false, removeAdditional: false, allErrors: false });

export function machineStatusRoutes(parent: FastifyInstance, ctx: ServiceContext): void {
  const app = parent.withTypeProvider<RequestTypeProvider>();

  app.post(
    "/v1/machines/:ns/:name/status",
    {
      schema: postStatusSchema,
      bodyLimit: 64 * 1024,
      validatorCompiler: ({ schema }) => asSent.compile(schema),
      config: { auth: { machine: "params", confirmedBy: "status-record" }, audit: "status" },
      // Part of validation, so it answers before the token is checked against the store. A
      // callback hook (a throw fails the request): no promise per report.
      preHandler: (request, _reply, done) => {
        checkBytes(request.body.message, REPORT_MESSAGE_MAX_BYTES, "message");
        checkBytes(request.body.output, REPORT_OUTPUT_MAX_BYTES, "output");
        done();
      },
    },
    async (request, reply) => {
      const { statusCode, ...answer } = await reportPhase(
        ctx,
        { namespace: request.params.ns, name: request.params.name },
        request.body,
        { token: machineTokenOf(request) as TokenRecord, seen: stateOf(request).storedStatus },
      );
      return reply.code(statusCode).send(answer);
    },
  );

  app.get(
    "/v1/machines/:ns/:name/status",
    { schema: getStatusSchema, config: { auth: { scopes: ["status:read"] } } },
    async (request, reply) => {
      const m = { namespace: request.params.ns, name: request.params.name };
      const { record, etag } = await readStatus(ctx, m, signalFor(reply));
      reply.header("etag", etag);
      if (etagMatches(request.headers["if-none-match"], etag)) return reply.code(304).send();
      return { ...record, published: record.config !== null };
    },
  );
}
