/**
 * The one key registry: kind -> MasterKeyType. A new key service is one provider file plus
 * one line here; kinds without a provider in this build map to undefined.
 */
import type { KeyResolver } from "../../src/envelope/sops/key-groups.ts";
import { BootsealError } from "../../src/errors.ts";
import { ageKeyType } from "./age.ts";
import { awsKmsKeyType } from "./aws-kms.ts";
import { azureKvKeyType } from "./azure-kv.ts";
import { gcpKmsKeyType } from "./gcp-kms.ts";
import type { KeyKind, MasterKey, MasterKeyType, ProviderDeps } from "./master-key.ts";
import { pgpKeyType } from "./pgp.ts";
import { vaultTransitKeyType } from "./vault-transit.ts";

export const keyTypes: Readonly<Record<KeyKind, MasterKeyType | undefined>> = {
  age: ageKeyType,
  pgp: pgpKeyType,
  kms: awsKmsKeyType,
  gcp_kms: gcpKmsKeyType,
  azure_kv: azureKvKeyType,
  hc_vault: vaultTransitKeyType,
};

/**
 * Resolver for unwrapDataKey: builds the MasterKey of a document entry, or null when its
 * kind has no provider here. A malformed entry throws (fromMetadata), which unwrapDataKey
 * records as that key's failure. Pass one deps object per document: providers cache what
 * they load per deps.
 */
export function resolverFor(deps: ProviderDeps = {}): KeyResolver {
  return (entry) => keyTypes[entry.kind]?.fromMetadata(entry, deps) ?? null;
}

/** Keys from `--age a,b`, `--pgp FP,FP`, SOPS_AGE_RECIPIENTS and the like. */
export function keysFromUserInput(kind: KeyKind, text: string, deps: ProviderDeps = {}): MasterKey[] {
  const type = keyTypes[kind];
  if (type === undefined)
    throw new BootsealError("UNSUPPORTED", `${kind} keys are not supported by this build`);
  return type.fromUserInput(text, deps);
}
