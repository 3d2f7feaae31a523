/** GET /v1/machines?namespace=&phase=&limit=&after=: one page of machines (../machines/list.ts). */
import type { FastifyInstance } from "fastify";
import { BootsealError } from "../../errors.ts";
import type { ServiceContext } from "../context.ts";
import { listMachines } from "../machines/list.ts";
import { signalFor } from "../plugins/auth.ts";
import { mayList } from "../request-state.ts";
import { listSchema } from "../schemas/status.ts";
import type { RequestTypeProvider } from "../schemas/type-provider.ts";

export function machinesRoutes(parent: FastifyInstance, ctx: ServiceContext): void {
  const app = parent.withTypeProvider<RequestTypeProvider>();
  app.get(
    "/v1/machines",
    { schema: listSchema, config: { auth: { scopes: ["status:read"] } } },
    async (request, reply) => {
      // The schema's default fills `limit` in, and the derived type knows it. The shared Ajv's
      // coercion lets `Infinity` through as a number: bound it here too (one page, 1 to 1000).
      const { limit } = request.query;
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) {
        throw new BootsealError("BAD_INPUT", "limit must be an integer from 1 to 1000");
      }
      const query = { ...request.query, visible: (ns: string) => mayList(request, ns) };
      const page = await listMachines(ctx, query, signalFor(reply));
      return page.next ? { items: page.items, next: page.next } : { items: page.items };
    },
  );
}
