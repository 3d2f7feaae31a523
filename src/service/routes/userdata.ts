/**
 * GET /v1/machines/:ns/:name/userdata?format=cloud-init|ignition|powershell: the non-secret
 * stub that installs and runs `bootseal fetch`, with a freshly minted bootstrap token
 * (../machines/userdata.ts).
 */
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.ts";
import { mintUserdata } from "../machines/userdata.ts";
import { userdataSchema } from "../schemas/config.ts";
import type { RequestTypeProvider } from "../schemas/type-provider.ts";

export function userdataRoutes(parent: FastifyInstance, ctx: ServiceContext): void {
  const app = parent.withTypeProvider<RequestTypeProvider>();
  app.get(
    "/v1/machines/:ns/:name/userdata",
    { schema: userdataSchema, config: { auth: { scopes: ["configs:write"] }, audit: "mint-token" } },
    async (request, reply) => {
      const stub = await mintUserdata(
        ctx,
        { namespace: request.params.ns, name: request.params.name },
        request.query.format,
        ctx.publicUrl ?? `${request.protocol}://${request.host}`,
      );
      return reply
        .code(200)
        .header("content-type", stub.contentType)
        .header("cache-control", "no-store")
        .header("x-bootseal-token-expires-at", stub.tokenExpiresAt)
        .send(stub.body);
    },
  );
}
