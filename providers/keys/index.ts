/**
 * The one key registry. A new key service is one provider file plus one line in KEY_TYPES:
 * its format (metadata fields, identity, ranks, passphraseURI scheme), `.sops.yaml` syntax,
 * flag, and constructors all live in the provider file. The SOPS core receives KEY_KINDS
 * (the formats) by injection; nothing outside this directory names a kind.
 */
import type { KeyEntry, KeyKinds, KeyResolver, MasterKey } from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";
import { ageKeyType } from "./age.ts";
import { awsKmsKeyType } from "./aws-kms.ts";
import type { AwsKmsDeps } from "./aws-kms-client.ts";
import { type AzureKvDeps, azureKvKeyType } from "./azure-kv.ts";
import { type GcpKmsDeps, gcpKmsKeyType } from "./gcp-kms.ts";
import { type HckmsDeps, hckmsKeyType } from "./hckms.ts";
import type { BaseDeps, MasterKeyType } from "./key-type.ts";
import { type PgpDeps, pgpKeyType } from "./pgp.ts";
import { tpmSealedKeyType } from "./tpm-sealed.ts";
import { type VaultTransitDeps, vaultTransitKeyType } from "./vault-transit.ts";

/** In sops's `.sops.yaml` extraction order (config.go extractMasterKeys): age, pgp, kms, gcp, hckms, azure, vault; then bootseal's own tpm. */
export const KEY_TYPES = [
  ageKeyType,
  pgpKeyType,
  awsKmsKeyType,
  gcpKmsKeyType,
  hckmsKeyType,
  azureKvKeyType,
  vaultTransitKeyType,
  tpmSealedKeyType,
] as const;

/** The sops metadata list a kind lives in: sops.age[], sops.kms[], … */
export type KeyKind = (typeof KEY_TYPES)[number]["kind"];

/** Identities and clients the providers may need; each provider reads only its own part. */
export type ProviderDeps = BaseDeps &
  PgpDeps &
  AwsKmsDeps &
  GcpKmsDeps &
  HckmsDeps &
  AzureKvDeps &
  VaultTransitDeps;

/** The kinds' format descriptions, injected into the SOPS core (metadata, decryption order, passphraseURI). */
export const KEY_KINDS: KeyKinds = KEY_TYPES.map((t) => t.format);

export const KEY_KIND_NAMES: readonly KeyKind[] = KEY_TYPES.map((t) => t.kind);

export function isKeyKind(kind: string): kind is KeyKind {
  return (KEY_KIND_NAMES as readonly string[]).includes(kind);
}

/** The provider of `kind`, or undefined when this build has none. */
export function keyTypeOf(kind: string): MasterKeyType<KeyKind, ProviderDeps> | undefined {
  return KEY_TYPES.find((t) => t.kind === kind);
}

/** sops's default decryption order: age, then PGP, then the others. */
export const DEFAULT_DECRYPTION_ORDER: readonly KeyKind[] = [...KEY_TYPES]
  .sort((a, b) => a.format.decryptionRank - b.format.decryptionRank)
  .map((t) => t.kind);

/** sops's identity string of an entry (MasterKey.ToString); "" for a kind this build lacks. */
export function keyIdentity(entry: KeyEntry): string {
  return keyTypeOf(entry.kind)?.format.identity(entry) ?? "";
}

/**
 * Resolver for unwrapDataKey: builds the MasterKey of a document entry, or null when its
 * kind has no provider here. A malformed entry throws (fromMetadata), which unwrapDataKey
 * records as that key's failure. Pass one deps object per document: providers cache what
 * they load per deps. Carries sops's default decryption order.
 */
export function resolverFor(deps: ProviderDeps = {}): KeyResolver {
  const resolve = (entry: KeyEntry): MasterKey | null =>
    keyTypeOf(entry.kind)?.fromMetadata(entry, deps) ?? null;
  return Object.assign(resolve, { order: DEFAULT_DECRYPTION_ORDER });
}

/** Keys from `--age a,b`, `--pgp FP,FP`, SOPS_AGE_RECIPIENTS and the like. */
export function keysFromUserInput(kind: string, text: string, deps: ProviderDeps = {}): MasterKey[] {
  const type = keyTypeOf(kind);
  if (type === undefined)
    throw new BootsealError("UNSUPPORTED", `${kind} keys are not supported by this build`);
  return type.fromUserInput(text, deps);
}
