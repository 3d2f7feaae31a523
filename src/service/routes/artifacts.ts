/**
 * GET /v1/artifacts/:file: the fetcher executables the service serves itself (../artifacts.ts),
 * their Ed25519 signatures (`<file>.sig`, 64 raw bytes), `SHA256SUMS` and the signing public
 * key (`signing-key.pem`). No authentication, like any download page of a release: nothing
 * here is secret, and the stubs pin the hash anyway. Only these fixed names are answered;
 * anything else is 404 before a file is touched, so no request can name a path.
 */
import { createReadStream } from "node:fs";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { BootsealError } from "../../errors.ts";
import {
  type ArtifactSet,
  artifactByFile,
  checkUnchanged,
  SIGNING_KEY_FILE,
  SUMS_FILE,
} from "../artifacts.ts";
import { etagMatches, type ServiceContext } from "../context.ts";
import { errorResponses } from "../schemas/common.ts";
import { sha256Hex } from "../tokens.ts";

const artifactSchema = {
  summary: "A fetcher executable the service serves, its signature, SHA256SUMS or the signing key",
  description:
    "`bootseal-linux-x64`, `bootseal-linux-arm64`, `bootseal-windows-x64.exe` (those present in " +
    "artifacts.dir), each with `<name>.sig` (raw Ed25519 signature), `SHA256SUMS` and `signing-key.pem`. " +
    "No authentication; ETag is the content's SHA-256.",
  operationId: "getArtifact",
  tags: ["artifacts"],
  security: [],
  params: {
    type: "object",
    properties: { file: { type: "string", maxLength: 64 } },
    required: ["file"],
    additionalProperties: false,
  },
  headers: {
    type: "object",
    properties: { "if-none-match": { type: "string", description: "an ETag: 304 when it is still current" } },
  },
  response: {
    200: {
      description: "the file",
      headers: { etag: { type: "string", description: "the content's SHA-256" } },
      content: {
        "application/octet-stream": {
          schema: { type: "string", format: "binary", description: "an executable or a `.sig`" },
        },
        "text/plain": { schema: { type: "string", description: "SHA256SUMS" } },
        "application/x-pem-file": { schema: { type: "string", description: "signing-key.pem" } },
      },
    },
    304: { description: "not modified", type: "null" },
    ...errorResponses(400, 404, 503),
  },
} as const;

type Body = { readonly type: string; readonly etag: string; readonly bytes: Uint8Array };

/** The small, in-memory answers: a signature, the sums, the key. */
function smallFile(set: ArtifactSet, file: string): Body | undefined {
  const text = (type: string, s: string) => ({ type, etag: sha256Hex(s), bytes: Buffer.from(s, "utf8") });
  if (file === SUMS_FILE && set.sums !== "") return text("text/plain; charset=utf-8", set.sums);
  if (file === SIGNING_KEY_FILE && set.publicKeyPem !== undefined) {
    return text("application/x-pem-file", set.publicKeyPem);
  }
  if (file.endsWith(".sig")) {
    const a = artifactByFile(set, file.slice(0, -".sig".length));
    if (a) return { type: "application/octet-stream", etag: sha256Hex(a.signature), bytes: a.signature };
  }
  return undefined;
}

function notModified(request: FastifyRequest, reply: FastifyReply, etag: string): boolean {
  reply.header("etag", etag).header("cache-control", "no-cache");
  if (!etagMatches(request.headers["if-none-match"], etag)) return false;
  void reply.code(304).send();
  return true;
}

export function artifactsRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  // Hashed and signed once, when the service starts listening; requests before that wait for it.
  app.addHook("onListen", async function warm() {
    ctx.artifacts.get().catch((err: unknown) => {
      if ((err as Error).name !== "AbortError")
        app.log.error({ err }, "cannot prepare the fetcher artifacts");
    });
  });
  app.addHook("onClose", async () => ctx.artifacts.close());

  app.get<{ Params: { file: string } }>(
    "/v1/artifacts/:file",
    { schema: artifactSchema },
    async (request, reply) => {
      const { file } = request.params;
      const set = await ctx.artifacts.get();
      const small = smallFile(set, file);
      if (small) {
        const etag = `"${small.etag}"`;
        if (notModified(request, reply, etag)) return reply;
        return reply.code(200).header("content-type", small.type).send(Buffer.from(small.bytes));
      }
      const a = artifactByFile(set, file);
      if (!a) throw new BootsealError("NOT_FOUND", `no artifact ${JSON.stringify(file.slice(0, 64))}`);
      if (notModified(request, reply, `"${a.sha256}"`)) return reply;
      await checkUnchanged(a);
      return reply
        .code(200)
        .header("content-type", "application/octet-stream")
        .header("content-length", String(a.size))
        .send(createReadStream(a.path));
    },
  );
}
