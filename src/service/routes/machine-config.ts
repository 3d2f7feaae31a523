/**
 * PUT/GET/DELETE /v1/machines/:ns/:name/config. The bodies are raw bytes of any content type
 * (a plaintext payload or a SOPS document), so this group replaces Fastify's parsers with one
 * catch-all buffer parser; it is registered in its own encapsulated context so the JSON
 * parser of the other routes stays as it is.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { WriteCondition } from "../../../providers/stores/object-store.ts";
import { contentTypeOf, sniffFormat } from "../../envelope/document.ts";
import { BootsealError } from "../../errors.ts";
import { etagMatches, quoteEtag, type ServiceContext } from "../context.ts";
import { configKey } from "../machine-store.ts";
import type { MachineRef } from "../names.ts";
import { signalFor } from "../plugins/auth.ts";
import { prepareDocument } from "../publish.ts";
import { stateOf, who } from "../request-state.ts";
import { deleteSchema, fetchSchema, publishSchema } from "../schemas/config.ts";
import { mintToken, sha256Hex } from "../tokens.ts";

type MachineParams = { ns: string; name: string };

function machineOf(request: FastifyRequest): MachineRef {
  const p = request.params as MachineParams;
  return { namespace: p.ns, name: p.name };
}

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

export function machineConfigRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const { machines } = ctx;
  const store = machines.store;

  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: ctx.bodyLimit }, (_req, body, done) => {
    done(null, body);
  });

  app.put(
    "/v1/machines/:ns/:name/config",
    {
      schema: publishSchema,
      bodyLimit: ctx.bodyLimit,
      config: { auth: { scope: "configs:write" }, audit: "publish" },
    },
    async (request, reply) => {
      const m = machineOf(request);
      const condition = writeCondition(request);
      const now = ctx.now();
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      try {
        const prepared = await prepareDocument(
          body,
          request.headers["content-type"],
          (request.query as { format?: "yaml" | "json" }).format,
          m,
          {
            rules: ctx.rules,
            keyDeps: ctx.keyDeps,
            now,
            signal: signalFor(reply),
            instrumentKey: ctx.metrics.instrumentKey,
          },
        );
        // 201 when the machine had no config; a create-only write knows it, otherwise ask first.
        const created =
          "ifNoneMatch" in condition
            ? true
            : "ifMatch" in condition
              ? false
              : (await store.head(configKey(m))) === null;
        const info = await store.put(configKey(m), prepared.bytes, condition, {
          contentType: contentTypeOf(prepared.format),
        });
        const { token, record } = mintToken(m, ctx.bootstrapToken.ttlMs, ctx.bootstrapToken.uses, now);
        await machines.writeToken(m, record);
        const sha256 = sha256Hex(prepared.bytes);
        const etag = quoteEtag(info.etag);
        const status = await machines.recordPublish(
          m,
          { etag, sha256, publishedAt: now.toISOString(), format: prepared.format },
          who(stateOf(request).principal),
          now,
        );
        ctx.events.publish({ ...m, phase: "published", version: status.version, at: status.updatedAt });
        ctx.metrics.publishes.inc({ outcome: "ok" });
        void reply
          .code(created ? 201 : 200)
          .header("etag", etag)
          .header("cache-control", "no-store");
        return {
          version: status.version,
          etag,
          sha256,
          bootstrapToken: token,
          tokenExpiresAt: record.expiresAt,
        };
      } catch (err) {
        ctx.metrics.publishes.inc({ outcome: err instanceof BootsealError ? err.code : "INTERNAL" });
        throw err;
      }
    },
  );

  app.get(
    "/v1/machines/:ns/:name/config",
    {
      schema: fetchSchema,
      config: { auth: { scope: "configs:read", machine: true }, audit: "fetch" },
    },
    async (request, reply) => fetchConfig(ctx, request, reply),
  );

  app.delete(
    "/v1/machines/:ns/:name/config",
    {
      schema: deleteSchema,
      config: { auth: { scope: "configs:write", machine: true }, audit: "delete" },
    },
    async (request, reply) => {
      const m = machineOf(request);
      const now = ctx.now();
      if (stateOf(request).principal?.kind === "machine") {
        await ctx.guard.checkMachine(request, reply, now);
        if (ctx.oneTimeFetch === "off") {
          throw new BootsealError(
            "FORBIDDEN",
            "a machine may delete its config only when one-time fetch is on",
          );
        }
        const status = await machines.readStatus(m);
        if (status?.phase !== "succeeded") {
          throw new BootsealError(
            "FORBIDDEN",
            "a machine may delete its config only after reporting succeeded",
          );
        }
      }
      const existed = await machines.deleteConfigAndToken(m);
      if (!existed)
        throw new BootsealError("NOT_FOUND", `no config is published for ${m.namespace}/${m.name}`);
      await machines.recordDeleted(m, now);
      return reply.code(204).send();
    },
  );
}

async function fetchConfig(ctx: ServiceContext, request: FastifyRequest, reply: FastifyReply) {
  const { machines } = ctx;
  const m = machineOf(request);
  const principal = stateOf(request).principal;
  const now = ctx.now();
  const whoLabel = principal?.kind === "machine" ? "machine" : "controller";
  try {
    const token = principal?.kind === "machine" ? await ctx.guard.checkMachine(request, reply, now) : null;
    const obj = await machines.store.get(configKey(m), { signal: signalFor(reply) });
    if (!obj) throw new BootsealError("NOT_FOUND", `no config is published for ${m.namespace}/${m.name}`);
    const etag = quoteEtag(obj.etag);
    if (etagMatches(header(request, "if-none-match"), etag)) {
      ctx.metrics.fetches.inc({ who: whoLabel, outcome: "not-modified" });
      return reply.code(304).header("etag", etag).send();
    }
    if (token) {
      try {
        await machines.consumeTokenUse(m, token.sha256);
      } catch (err) {
        if (err instanceof BootsealError && (err.code === "TOKEN_EXHAUSTED" || err.code === "UNAUTHORIZED")) {
          return ctx.guard.fail(request, reply, err);
        }
        throw err;
      }
      if (ctx.oneTimeFetch === "after-first-fetch") await deliveredOnce(ctx, m, obj.etag, now);
    }
    const format = sniffFormat(obj.body);
    ctx.metrics.fetches.inc({ who: whoLabel, outcome: "ok" });
    return reply
      .code(200)
      .header("content-type", contentTypeOf(format))
      .header("x-bootseal-format", format)
      .header("etag", etag)
      .header("cache-control", "no-store")
      .send(Buffer.from(obj.body));
  } catch (err) {
    ctx.metrics.fetches.inc({ who: whoLabel, outcome: err instanceof BootsealError ? err.code : "INTERNAL" });
    throw err;
  }
}

/**
 * One-time fetch, `after-first-fetch`: the config is deleted once a machine has fetched it.
 * Conditional on the fetched version, so a publish that raced in is never deleted. The token
 * record stays (it can fetch nothing any more) so the machine can still report its phases.
 */
async function deliveredOnce(ctx: ServiceContext, m: MachineRef, etag: string, now: Date): Promise<void> {
  try {
    await ctx.machines.store.delete(configKey(m), { ifMatch: etag });
    await ctx.machines.recordDeleted(m, now);
  } catch (err) {
    if (!(err instanceof BootsealError && err.code === "PRECONDITION_FAILED")) throw err;
  }
}
