/**
 * Publishing a machine's config: the document is prepared (encrypted, or an upload checked:
 * ../prepare-document.ts), stored under the caller's write condition, a fresh bootstrap token is
 * minted (the previous one stops working), and the publish is recorded in the status.
 *
 * With a derivation key the token is DERIVED from the machine, the new version and a random
 * salt (tokens.ts deriveToken), and the salt is kept in the token record and its mirror, so
 * GET …/userdata can render the same stub again without storing the token. The bootstrap
 * command (the publish's, else the first matching `bootstrapCommands` rule) is stored with
 * the token, never in the encrypted config: the stub carries it to `bootseal fetch --exec`.
 */

import { parsePcrValues } from "../../../providers/keys/tpm-sealed.ts";
import type { ObjectInfo, WriteCondition } from "../../../providers/stores/object-store.ts";
import { checkBootstrapCommand } from "../../config/service-config.ts";
import { contentTypeOf } from "../../envelope/document.ts";
import { BootsealError, hasCode } from "../../errors.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import { quoteEtag, type ServiceContext } from "../context.ts";
import { errorLabel } from "../plugins/metrics.ts";
import { type PreparedDocument, type PublishedTpm, prepareDocument } from "../prepare-document.ts";
import type { CapiRef } from "../status-record.ts";
import { mintDerivedToken, mintToken, newSalt, sha256Hex, type TokenRecord } from "../tokens.ts";

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
  /** The bootstrap command for this version (checked: checkBootstrapCommand); none: the rules'. */
  readonly bootstrapCommand: string | undefined;
  /** The Cluster API objects the publish is for (the controller's), kept with the config. */
  readonly capi?: CapiRef | undefined;
  /** The machine's TPM the rule's `tpm_ek: publish` keys seal to. */
  readonly tpm?: PublishedTpm | undefined;
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
    if (!hasCode(err, "PRECONDITION_FAILED")) throw err;
    return { created: false, info: await put(condition) };
  }
}

export const BOOTSTRAP_COMMAND_HEADER = "x-bootseal-bootstrap-command";

/** A header a publish gives once: an array (how Node may hand over a repeated header) is refused. */
function oneHeader(value: string | string[] | undefined, name: string): string | undefined {
  if (Array.isArray(value)) throw new BootsealError("BAD_INPUT", `${name}: given more than once`);
  return value;
}

/**
 * The publish's `X-Bootseal-Bootstrap-Command` header, checked before anything is stored.
 * Its bytes are UTF-8 (Node hands header bytes over as Latin-1: decoded back here).
 */
export function bootstrapCommandHeader(header: string | string[] | undefined): string | undefined {
  const value = oneHeader(header, BOOTSTRAP_COMMAND_HEADER);
  if (value === undefined) return undefined;
  const bytes = Buffer.from(value, "latin1");
  const text = bytes.toString("utf8");
  if (!Buffer.from(text, "utf8").equals(bytes)) {
    throw new BootsealError("BAD_INPUT", `${BOOTSTRAP_COMMAND_HEADER}: not UTF-8`);
  }
  return checkBootstrapCommand(text, BOOTSTRAP_COMMAND_HEADER);
}

export const TPM_EK_HEADER = "x-bootseal-tpm-ek";
export const TPM_PCRS_HEADER = "x-bootseal-tpm-pcrs";

/**
 * The publish's TPM: `X-Bootseal-Tpm-Ek` (the EK's SubjectPublicKeyInfo, base64 DER, one line)
 * and optionally `X-Bootseal-Tpm-Pcrs` (`7=HEX,16=HEX`: the policy's sha256 PCR values).
 */
export function tpmHeaders(
  ek: string | string[] | undefined,
  pcrs: string | string[] | undefined,
): PublishedTpm | undefined {
  const ekText = oneHeader(ek, TPM_EK_HEADER)?.trim();
  const pcrText = oneHeader(pcrs, TPM_PCRS_HEADER)?.trim();
  if (ekText === undefined) {
    if (pcrText !== undefined)
      throw new BootsealError("BAD_INPUT", `${TPM_PCRS_HEADER}: only with ${TPM_EK_HEADER}`);
    return undefined;
  }
  // An RSA 4096 EK is 550 bytes of DER: 2048 characters leave room and bound the parse.
  if (!/^[A-Za-z0-9+/]{40,2048}={0,2}$/.test(ekText))
    throw new BootsealError("BAD_INPUT", `${TPM_EK_HEADER}: expected base64 DER (SubjectPublicKeyInfo)`);
  if (pcrText === undefined) return { ekPublic: ekText };
  if (pcrText === "" || pcrText.length > 24 * 68)
    throw new BootsealError("BAD_INPUT", `${TPM_PCRS_HEADER}: expected PCR=HEX[,PCR=HEX]…`);
  return { ekPublic: ekText, pcrs: parsePcrValues(pcrText.split(","), TPM_PCRS_HEADER) };
}

/** The bootstrap command of a publish: its own, else the first rule whose `match` finds `<ns>/<name>`. */
export function bootstrapCommandFor(
  ctx: ServiceContext,
  m: MachineId,
  own: string | undefined,
): string | undefined {
  if (own !== undefined) return own;
  const id = formatMachineId(m);
  return ctx.bootstrapCommands.find((r) => r.match.test(id))?.command;
}

/**
 * The publish's token as a function of the version the status record gives it: derived
 * (the same token for the same version, salt and key, on every compare-and-swap attempt) or,
 * without a derivation key, one random token whatever the version.
 */
function publishToken(
  ctx: ServiceContext,
  m: MachineId,
  own: string | undefined,
  configEtag: string,
  now: Date,
): (version: number) => { token: string; record: TokenRecord } {
  const { ttlMs, uses, derivationKey } = ctx.bootstrapToken;
  const command = bootstrapCommandFor(ctx, m, own);
  // Bound to the config just stored, with the publish's bootstrap command.
  const bound = (minted: { token: string; record: TokenRecord }) => ({
    token: minted.token,
    record: { ...minted.record, configEtag, ...(command === undefined ? {} : { command }) },
  });
  if (derivationKey === undefined) {
    const minted = bound(mintToken(m, ttlMs, uses, now));
    return () => minted;
  }
  const salt = newSalt();
  return (version) => bound(mintDerivedToken(derivationKey, m, version, salt, ttlMs, uses, now));
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
      tpm: request.tpm,
    });
    const { created, info } = await storeConfig(ctx, m, prepared, request.condition);
    const sha256 = sha256Hex(prepared.bytes);
    const etag = quoteEtag(info.etag);
    const mint = publishToken(ctx, m, request.bootstrapCommand, etag, now);
    // The status record (with the new token's mirror) before the token record: a publish cut
    // short between the two never answered, so its token was never handed out, and the
    // controller's retry writes both. A new machine most likely has no status record yet.
    const status = await machines.recordPublish(m, {
      config: {
        etag,
        sha256,
        publishedAt: now.toISOString(),
        format: prepared.format,
        ...(request.capi ? { capi: request.capi } : {}),
        ...(prepared.tpmEkSha256 ? { tpmEkSha256: prepared.tpmEkSha256 } : {}),
      },
      by: request.by,
      now,
      token: (version) => mint(version).record,
      seen: created ? null : undefined,
    });
    const { token, record } = mint(status.version);
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
    metrics.publishes.inc({ outcome: errorLabel(err) });
    throw err;
  }
}
