/** POST /v1/check: the store and key checks only the service can make (../machines/check.ts). */
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.ts";
import { runServiceCheck } from "../machines/check.ts";
import { signalFor } from "../plugins/auth.ts";
import { checkSchema } from "../schemas/check.ts";

export function checkRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.post(
    "/v1/check",
    { schema: checkSchema, config: { auth: { scopes: ["admin"] }, audit: "check" } },
    async (_request, reply) => runServiceCheck(ctx, signalFor(reply)),
  );
}
