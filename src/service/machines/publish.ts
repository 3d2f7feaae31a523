/**
 * Publishing a machine's config: the document is prepared (encrypted, or an upload checked:
 * ../publish.ts), stored under the caller's write condition, a fresh bootstrap token is
 * minted (the previous one stops working), and the publish is recorded in the status.
 */
import type { WriteCondition } from "../../../providers/stores/object-store.ts";
import { contentTypeOf } from "../../envelope/document.ts";
import { BootsealError } from "../../errors.ts";
import type { MachineId } from "../../machine/machine-id.ts";
import { quoteEtag, type ServiceContext } from "../context.ts";
import { prepareDocument } from "../publish.ts";
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
    // A create-only write knows whether it creates, and a replace-exactly write knows it does
    // not; an unconditional one asks first.
    const { condition } = request;
    const created =
      "ifNoneMatch" in condition ? true : "ifMatch" in condition ? false : !(await machines.hasConfig(m));
    const info = await machines.putConfig(m, prepared.bytes, condition, contentTypeOf(prepared.format));
    const { token, record } = mintToken(m, ctx.bootstrapToken.ttlMs, ctx.bootstrapToken.uses, now);
    await machines.writeToken(m, record);
    const sha256 = sha256Hex(prepared.bytes);
    const etag = quoteEtag(info.etag);
    const status = await machines.recordPublish(
      m,
      { etag, sha256, publishedAt: now.toISOString(), format: prepared.format },
      request.by,
      now,
    );
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
