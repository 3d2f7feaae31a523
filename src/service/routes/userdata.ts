/**
 * /v1/machines/:ns/:name/userdata?format=cloud-init|ignition|powershell[&arch=x64|arm64]: the
 * non-secret stub that installs and runs `bootseal fetch` (../machines/userdata.ts).
 * GET renders the published version's stub again (safe, idempotent); POST mints a fresh token
 * into it. Both need `tokens:mint`: the stub carries a token. The service URL in the stub is
 * never taken from the request (../stub-origin.ts).
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import type { ServiceContext } from "../context.ts";
import { getUserdata, mintUserdata, type UserdataRequest, type UserdataStub } from "../machines/userdata.ts";
import { userdataMintSchema, userdataSchema } from "../schemas/config.ts";
import type { RequestTypeProvider } from "../schemas/type-provider.ts";
import { type ListenerSocket, stubOrigin } from "../stub-origin.ts";

export function userdataRoutes(parent: FastifyInstance, ctx: ServiceContext): void {
  const app = parent.withTypeProvider<RequestTypeProvider>();
  const answer = (reply: FastifyReply, stub: UserdataStub) => {
    reply.code(200).header("content-type", stub.contentType).header("cache-control", "no-store");
    if (stub.tokenExpiresAt !== undefined) reply.header("x-bootseal-token-expires-at", stub.tokenExpiresAt);
    return reply.send(stub.body);
  };
  const requestOf = (request: {
    query: {
      format: UserdataRequest["format"];
      arch?: UserdataRequest["arch"];
      skipModule?: readonly string[];
    };
    protocol: string;
    socket: ListenerSocket;
  }): UserdataRequest => ({
    format: request.query.format,
    arch: request.query.arch ?? "x64",
    serviceUrl: stubOrigin(ctx.publicUrl, request.protocol, request.socket),
    ...(request.query.skipModule ? { skipModules: request.query.skipModule } : {}),
  });
  app.get(
    "/v1/machines/:ns/:name/userdata",
    { schema: userdataSchema, config: { auth: { scopes: ["tokens:mint"] }, audit: "userdata" } },
    async (request, reply) => {
      const m = { namespace: request.params.ns, name: request.params.name };
      const stub = await getUserdata(ctx, m, requestOf(request));
      return answer(reply as FastifyReply, stub);
    },
  );
  app.post(
    "/v1/machines/:ns/:name/userdata",
    { schema: userdataMintSchema, config: { auth: { scopes: ["tokens:mint"] }, audit: "mint-token" } },
    async (request, reply) => {
      const m = { namespace: request.params.ns, name: request.params.name };
      const stub = await mintUserdata(ctx, m, requestOf(request));
      return answer(reply as FastifyReply, stub);
    },
  );
}
