/**
 * Turning a publish request body into the document to store (machines/publish.ts stores it).
 *
 * - Plaintext (any content type): encrypted as a SOPS v3 document under a fresh data key
 *   wrapped by every master key of the creation rule matching `<ns>/<name>`. The `binary`
 *   store by default (byte-exact round trip); `?format=yaml|json` parses the payload with
 *   that codec so its keys stay visible.
 * - `application/sops+json` / `application/sops+yaml`: an already-encrypted document, kept
 *   byte for byte after its structure was checked (src/envelope/sops/validate.ts: every value
 *   its selection rule encrypts is a well-formed ENC[], a well-formed MAC, usable key groups)
 *   and every key group was found to name a master key of the matching rule (sops key
 *   identity strings). No key is used: the MAC itself is checked by the machine.
 *
 * AWS KMS keys of the rule are bound to the machine (src/machine/kms-binding.ts), so a
 * machine's IAM policy can allow decrypting its own config only. Only
 * `wrap` is ever called: the service needs no decrypt rights.
 */

import { KEY_KINDS, type ProviderDeps } from "../../providers/keys/index.ts";
import { isEkFromPublish, withPublishedEk } from "../../providers/keys/tpm-sealed.ts";
import { newKeyFromEntry } from "../config/rule-keys.ts";
import { type CreationRule, keyIdentity, matchCreationRule, type SopsConfig } from "../config/sops-config.ts";
import {
  checkGroupsNamed,
  jsonStoreFormat,
  loadValidated,
  mediaTypeOf,
  SOPS_JSON,
  SOPS_YAML,
} from "../envelope/document.ts";
import { codecFor } from "../envelope/sops/codecs/index.ts";
import { encryptDocument } from "../envelope/sops/encrypt.ts";
import type { KeyEntry, MasterKey } from "../envelope/sops/master-key.ts";
import { type Metadata, metadataToTree } from "../envelope/sops/metadata.ts";
import { BootsealError, hasCode } from "../errors.ts";
import { bindKeyGroups } from "../machine/kms-binding.ts";
import { formatMachineId, type MachineId } from "../machine/machine-id.ts";
import type { DocumentFormat } from "./status-record.ts";
import { sha256Hex } from "./tokens.ts";

/** Where rules are matched: a fixed root, so `path_regex` sees exactly `<ns>/<name>`. */
const RULE_ROOT = "/bootseal-machines";

export interface PreparedDocument {
  readonly bytes: Uint8Array;
  readonly format: DocumentFormat;
  /** true when the body was an already-encrypted SOPS upload. */
  readonly uploaded: boolean;
  /** The SHA-256 of the publish's EK, when the rule sealed to it (tpm_ek: publish). */
  readonly tpmEkSha256?: string;
}

/** The machine's TPM a publish seals to (X-Bootseal-Tpm-Ek, X-Bootseal-Tpm-Pcrs). */
export interface PublishedTpm {
  /** The EK's SubjectPublicKeyInfo, base64 DER. */
  readonly ekPublic: string;
  /** PCR values of the policy, in place of the rule's; none: the rule's. */
  readonly pcrs?: ReadonlyMap<number, Buffer> | undefined;
}

export interface PublishContext {
  readonly rules: SopsConfig;
  /** The publish's TPM, for the rule's `tpm_ek: publish` entries. */
  readonly tpm?: PublishedTpm | undefined;
  readonly keyDeps: ProviderDeps;
  readonly now: Date;
  readonly signal?: AbortSignal;
  /** Lets the caller time key-service calls (metrics); the default is the key itself. */
  readonly instrumentKey?: (key: MasterKey) => MasterKey;
}

export function ruleFor(rules: SopsConfig, m: MachineId): CreationRule {
  let rule: CreationRule | null;
  try {
    rule = matchCreationRule(rules, RULE_ROOT, `${RULE_ROOT}/${m.namespace}/${m.name}`);
  } catch (err) {
    if (hasCode(err, "USAGE")) rule = null;
    else throw err;
  }
  if (!rule) throw new BootsealError("BAD_INPUT", `no creation rule matches ${formatMachineId(m)}`);
  return rule;
}

export async function prepareDocument(
  body: Uint8Array,
  contentType: string | undefined,
  format: "yaml" | "json" | undefined,
  m: MachineId,
  ctx: PublishContext,
): Promise<PreparedDocument> {
  const rule = ruleFor(ctx.rules, m);
  const { groups, sealedTo } = sealToPublishedTpm(bindKeyGroups(rule.keyGroups, m), m, ctx.tpm);
  const media = mediaTypeOf(contentType);
  if (media === SOPS_JSON || media === SOPS_YAML) {
    if (format !== undefined) {
      throw new BootsealError("BAD_INPUT", "?format applies to plaintext payloads, not to SOPS uploads");
    }
    const uploadFormat = media === SOPS_JSON ? "json" : "yaml";
    checkUpload(body, uploadFormat, rule, groups);
    return { bytes: body, format: uploadFormat, uploaded: true, ...sealedTo };
  }
  if (body.length === 0) throw new BootsealError("BAD_INPUT", "the payload is empty");
  const storeFormat = format ?? "binary";
  const codec = codecFor(storeFormat);
  const branches = codec.parsePlain(body);
  const instrument = ctx.instrumentKey ?? ((k: MasterKey) => k);
  const keyGroups = groups.map((g) => g.map((e) => instrument(newKeyFromEntry(e, ctx.keyDeps, ctx.now))));
  const encrypted = await encryptDocument(branches, {
    keyGroups,
    ...(rule.threshold !== null ? { threshold: rule.threshold } : {}),
    ...(rule.rule !== null ? { rule: rule.rule } : {}),
    macOnlyEncrypted: rule.macOnlyEncrypted,
    singleValue: codec.singleValue,
    now: ctx.now,
    ...(ctx.signal ? { signal: ctx.signal } : {}),
  });
  // A JSON payload whose only MAC-covered key is `data` beside other (empty) keys could not be
  // told from a binary document when fetched: refused now rather than unfetchable later.
  if (storeFormat === "json") jsonStoreFormat(encrypted.branches, encrypted.metadata);
  const bytes = codec.emitEncrypted(encrypted.branches, metadataToTree(encrypted.metadata, KEY_KINDS));
  return { bytes, format: storeFormat, uploaded: false, ...sealedTo };
}

/**
 * The rule's `tpm_ek: publish` entries with the publish's EK. Both or neither: a rule waiting for
 * an EK gets none (the machine could not decrypt), an EK no rule entry takes would be ignored.
 */
function sealToPublishedTpm(
  groups: KeyEntry[][],
  m: MachineId,
  tpm: PublishedTpm | undefined,
): { groups: KeyEntry[][]; sealedTo: { tpmEkSha256?: string } } {
  const waiting = groups.some((g) => g.some(isEkFromPublish));
  if (waiting && tpm === undefined) {
    throw new BootsealError(
      "BAD_INPUT",
      `the creation rule for ${formatMachineId(m)} seals to the machine's TPM (tpm_ek: publish): send its EK in X-Bootseal-Tpm-Ek`,
    );
  }
  if (tpm === undefined) return { groups, sealedTo: {} };
  if (!waiting) {
    throw new BootsealError(
      "BAD_INPUT",
      `X-Bootseal-Tpm-Ek: the creation rule for ${formatMachineId(m)} has no tpm key to seal to (tpm_ek: publish)`,
    );
  }
  let ekPublic = "";
  const sealed = groups.map((g) =>
    g.map((e) => {
      if (!isEkFromPublish(e)) return e;
      const entry = withPublishedEk(e, tpm.ekPublic, tpm.pcrs, "X-Bootseal-Tpm-Ek");
      ekPublic = entry.fields.get("ek_public") as string;
      return entry;
    }),
  );
  const tpmEkSha256 = sha256Hex(Buffer.from(ekPublic, "base64"));
  return { groups: sealed, sealedTo: { tpmEkSha256 } };
}

function checkUpload(
  body: Uint8Array,
  format: "json" | "yaml",
  rule: CreationRule,
  bound: KeyEntry[][],
): void {
  let metadata: Metadata;
  try {
    // Structure first (envelope/sops/validate.ts): no plaintext where the document's own rule
    // says encrypted, a well-formed MAC and key groups, a json/binary shape the MAC decides.
    metadata = loadValidated(body, format, KEY_KINDS).metadata;
  } catch (err) {
    if (err instanceof BootsealError) {
      // UNSUPPORTED (e.g. hckms entries) and NOT_ENCRYPTED are the client's document too.
      throw new BootsealError("BAD_INPUT", `not a valid SOPS ${format} document: ${err.message}`);
    }
    throw new BootsealError("BAD_INPUT", `not a valid SOPS ${format} document`);
  }
  const wanted = new Set<string>();
  for (const e of [...rule.keyGroups.flat(), ...bound.flat()]) wanted.add(`${e.kind}/${keyIdentity(e)}`);
  // Every group: a group of foreign keys only holds a share (or the whole data key) that no
  // key of the rule opens.
  checkGroupsNamed(metadata, (e) => wanted.has(`${e.kind}/${keyIdentity(e)}`));
}
