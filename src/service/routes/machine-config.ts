/**
 * PUT/GET/DELETE /v1/machines/:ns/:name/config. The bodies are raw bytes of any content type
 * (a plaintext payload or a SOPS document), so this group replaces Fastify's parsers with one
 * catch-all buffer parser; it is registered in its own encapsulated context so the JSON
 * parser of the other routes stays as it is. Who may call each route is its `config.auth`
 * (plugins/auth.ts); the work is in ../machines/.
 */
import { isUtf8 } from "node:buffer";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { WriteCondition } from "../../../providers/stores/object-store.ts";
import { BootsealError } from "../../errors.ts";
import type { ServiceContext } from "../context.ts";
import { deleteConfig } from "../machines/delete.ts";
import { fetchConfig } from "../machines/fetch.ts";
import { bootstrapCommandHeader, publishConfig, tpmHeaders } from "../machines/publish.ts";
import { signalFor } from "../plugins/auth.ts";
import { labelValue } from "../plugins/metrics.ts";
import { machineTokenOf, mayMintTokens, stateOf, who } from "../request-state.ts";
import { deleteSchema, fetchSchema, publishRequestBody, publishSchema } from "../schemas/config.ts";
import type { RequestTypeProvider } from "../schemas/type-provider.ts";

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v.join(",") : v;
}

function writeCondition(request: FastifyRequest): WriteCondition {
  const ifMatch = header(request, "if-match")?.trim();
  const ifNoneMatch = header(request, "if-none-match")?.trim();
  if (ifMatch && ifNoneMatch)
    throw new BootsealError("BAD_INPUT", "send If-Match or If-None-Match, not both");
  if (ifNoneMatch !== undefined) {
    if (ifNoneMatch !== "*") throw new BootsealError("BAD_INPUT", "If-None-Match on a publish must be *");
    return { ifNoneMatch: "*" };
  }
  if (ifMatch !== undefined) {
    if (ifMatch === "" || ifMatch === "*" || ifMatch.includes(",")) {
      throw new BootsealError("BAD_INPUT", "If-Match on a publish must be one ETag");
    }
    return { ifMatch };
  }
  return { unconditional: true };
}

/**
 * Fetch outcomes are counted for every request that got past validation (the token check
 * included), whatever answered it: marked in the route's first preHandler, counted onResponse.
 */
const fetchCounted = new WeakSet<FastifyRequest>();

export function machineConfigRoutes(parent: FastifyInstance, ctx: ServiceContext): void {
  const app = parent.withTypeProvider<RequestTypeProvider>();
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: ctx.bodyLimit }, (_req, body, done) => {
    done(null, body);
  });

  app.put(
    "/v1/machines/:ns/:name/config",
    {
      schema: publishSchema,
      bodyLimit: ctx.bodyLimit,
      config: {
        auth: { scopes: ["configs:write"] },
        audit: "publish",
        // The body is raw bytes (no body schema, so nothing validates a Buffer): the document
        // gets its content types from publishRequestBody.
        swaggerTransform: ({ schema, url }: { schema: object; url: string }) => ({
          schema: { ...schema, body: publishRequestBody },
          url,
        }),
      },
    },
    async (request, reply) => {
      const condition = writeCondition(request);
      const payload = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      // A YAML or JSON payload is text: bytes that are not UTF-8 would be replaced (U+FFFD) on
      // the way in, so the machine would get another secret than the one sent.
      if (request.query.format && !isUtf8(payload)) {
        throw new BootsealError("BAD_INPUT", `a ?format=${request.query.format} payload must be UTF-8 text`);
      }
      const bootstrapCommand = bootstrapCommandHeader(request.headers["x-bootseal-bootstrap-command"]);
      const tpm = tpmHeaders(request.headers["x-bootseal-tpm-ek"], request.headers["x-bootseal-tpm-pcrs"]);
      const {
        capiCluster: cluster,
        capiMachine: machine,
        capiBootsealConfig: bootsealConfig,
      } = request.query;
      const capi =
        cluster || machine || bootsealConfig
          ? {
              ...(cluster ? { cluster } : {}),
              ...(machine ? { machine } : {}),
              ...(bootsealConfig ? { bootsealConfig } : {}),
            }
          : undefined;
      const result = await publishConfig(
        ctx,
        { namespace: request.params.ns, name: request.params.name },
        {
          bootstrapCommand,
          capi,
          tpm,
          body: payload,
          contentType: request.headers["content-type"],
          format: request.query.format,
          condition,
          by: who(stateOf(request).principal),
          signal: signalFor(reply),
        },
      );
      // The machine's token only to a controller that may mint tokens here (docs/security.md).
      const { created, bootstrapToken, tokenExpiresAt, ...rest } = result;
      const body = mayMintTokens(request, request.params.ns)
        ? { ...rest, bootstrapToken, tokenExpiresAt }
        : rest;
      return reply
        .code(created ? 201 : 200)
        .header("etag", result.etag)
        .header("cache-control", "no-store")
        .send(body);
    },
  );

  app.get(
    "/v1/machines/:ns/:name/config",
    {
      schema: fetchSchema,
      config: {
        auth: { scopes: ["configs:read"], machine: "params", confirmedBy: "token-record" },
        audit: "fetch",
      },
      // Callback hooks, not async ones: no promise per fetch.
      preHandler: (request, _reply, done) => {
        fetchCounted.add(request);
        done();
      },
      onResponse: (request, reply, done) => {
        if (fetchCounted.has(request)) {
          const errorCode = stateOf(request).errorCode;
          ctx.metrics.fetches.inc({
            who: stateOf(request).principal?.kind === "machine" ? "machine" : "controller",
            outcome: reply.statusCode === 304 ? "not_modified" : labelValue(errorCode ?? "ok"),
          });
        }
        done();
      },
    },
    async (request, reply) => {
      const result = await fetchConfig(
        ctx,
        { namespace: request.params.ns, name: request.params.name },
        {
          token: machineTokenOf(request),
          storedToken: stateOf(request).storedToken,
          ifNoneMatch: header(request, "if-none-match"),
          signal: signalFor(reply),
        },
      );
      if (result.kind === "not-modified") return reply.code(304).header("etag", result.etag).send();
      if (result.kind === "already-fetched") {
        // One-time fetch: someone (the machine, or a thief racing it) already took the one fetch.
        throw new BootsealError(
          "ALREADY_FETCHED",
          "this one-time config was already fetched with this token; a second fetch was refused",
        );
      }
      return (
        reply
          .code(200)
          .header("content-type", result.contentType)
          .header("x-bootseal-format", result.format)
          .header("etag", result.etag)
          .header("cache-control", "no-store")
          // A Buffer over the stored body's memory, not a copy of it.
          .send(Buffer.from(result.body.buffer, result.body.byteOffset, result.body.byteLength))
      );
    },
  );

  app.delete(
    "/v1/machines/:ns/:name/config",
    {
      schema: deleteSchema,
      config: { auth: { scopes: ["configs:write"], machine: "params" }, audit: "delete" },
    },
    async (request, reply) => {
      const byMachine = stateOf(request).principal?.kind === "machine";
      await deleteConfig(ctx, { namespace: request.params.ns, name: request.params.name }, byMachine);
      return reply.code(204).send();
    },
  );
}
