/**
 * Publishing a machine's config: the document is prepared (encrypted, or an upload checked:
 * ../publish.ts), stored under the caller's write condition, a fresh bootstrap token is
 * minted (the previous one stops working), and the publish is recorded in the status.
 */
import type { ObjectInfo, WriteCondition } from "../../../providers/stores/object-store.ts";
import { contentTypeOf } from "../../envelope/document.ts";
import { BootsealError } from "../../errors.ts";
import type { MachineId } from "../../machine/machine-id.ts";
import { quoteEtag, type ServiceContext } from "../context.ts";
import { type PreparedDocument, prepareDocument } from "../publish.ts";
import { mintToken, sha256Hex } from "../tokens.ts";

export interface PublishRequest {
  readonly body: Uint8Array;
  readonly contentType: string | undefined;
  /** `?format`: a plaintext YAML or JSON payload keeps its keys visible. */
  readonly format: "yaml" | "json" | undefined;
  readonly condition: WriteCondition;
  /** Who publishes, for the status history. */
  readonly by: string;
  /** For the key-service calls only: a half-made publish is worse than a finished one. */
  readonly signal: AbortSignal;
}

export interface PublishResult {
  /** The machine had no config before. */
  readonly created: boolean;
  readonly version: number;
  readonly etag: string;
  readonly sha256: string;
  readonly bootstrapToken: string;
  readonly tokenExpiresAt: string;
}

/**
 * Stores the document under the caller's condition. A create-only or replace-exactly write
 * knows whether it creates; an unconditional one is tried create-only first (a new machine,
 * the common case, costs one write) and replaces when the machine had a config.
 */
async function storeConfig(
  ctx: ServiceContext,
  m: MachineId,
  prepared: PreparedDocument,
  condition: WriteCondition,
): Promise<{ created: boolean; info: ObjectInfo }> {
  const contentType = contentTypeOf(prepared.format);
  const put = (c: WriteCondition) => ctx.machines.putConfig(m, prepared.bytes, c, contentType);
  if (!("unconditional" in condition))
    return { created: "ifNoneMatch" in condition, info: await put(condition) };
  try {
    return { created: true, info: await put({ ifNoneMatch: "*" }) };
  } catch (err) {
    if (!(err instanceof BootsealError && err.code === "PRECONDITION_FAILED")) throw err;
    return { created: false, info: await put(condition) };
  }
}

export async function publishConfig(
  ctx: ServiceContext,
  m: MachineId,
  request: PublishRequest,
): Promise<PublishResult> {
  const { machines, metrics } = ctx;
  const now = ctx.now();
  try {
    const prepared = await prepareDocument(request.body, request.contentType, request.format, m, {
      rules: ctx.rules,
      keyDeps: ctx.keyDeps,
      now,
      signal: request.signal,
      instrumentKey: metrics.instrumentKey,
    });
    const { created, info } = await storeConfig(ctx, m, prepared, request.condition);
    const { token, record } = mintToken(m, ctx.bootstrapToken.ttlMs, ctx.bootstrapToken.uses, now);
    const sha256 = sha256Hex(prepared.bytes);
    const etag = quoteEtag(info.etag);
    // The status record (with the new token's mirror) before the token record: a publish cut
    // short between the two never answered, so its token was never handed out, and the
    // controller's retry writes both. A new machine most likely has no status record yet.
    const status = await machines.recordPublish(m, {
      config: { etag, sha256, publishedAt: now.toISOString(), format: prepared.format },
      by: request.by,
      now,
      token: record,
      seen: created ? null : undefined,
    });
    await machines.writeToken(m, record);
    ctx.events.publish({ ...m, phase: "published", version: status.version, at: status.updatedAt });
    metrics.publishes.inc({ outcome: "ok" });
    return {
      created,
      version: status.version,
      etag,
      sha256,
      bootstrapToken: token,
      tokenExpiresAt: record.expiresAt,
    };
  } catch (err) {
    metrics.publishes.inc({ outcome: err instanceof BootsealError ? err.code : "INTERNAL" });
    throw err;
  }
}
