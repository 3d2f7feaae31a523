/**
 * Where the real peers are. scripts/peers.sh exports these variables (see
 * docs/development.md); a test that needs a peer calls peer(NAME) and fails loudly when the
 * variable is missing: a missing peer is a failure, never a silent skip.
 */
import { env } from "node:process";

export type PeerName =
  | "SOPS_BIN" // path of the real sops 3.13.2
  | "AGE_BIN" // path of age
  | "AGE_KEYGEN_BIN" // path of age-keygen
  | "GPG_BIN" // path of gpg
  | "S3_SEAWEEDFS_ENDPOINT" // http://127.0.0.1:8333
  | "S3_MOTO_ENDPOINT" // http://127.0.0.1:5000 (moto serves S3 and KMS)
  | "KMS_MOTO_ENDPOINT" // http://127.0.0.1:5000
  | "KMS_LOCAL_ENDPOINT" // http://127.0.0.1:4599 (local-kms)
  | "GCS_ENDPOINT" // http://127.0.0.1:4443 (fake-gcs-server)
  | "GCP_KMS_ENDPOINT" // 127.0.0.1:9010 (fake-cloud-kms, gRPC, insecure)
  | "AZURE_KV_URL" // https://localhost:8443 (lowkey-vault)
  | "VAULT_ADDR" // http://127.0.0.1:8200 (OpenBao dev server)
  | "VAULT_TOKEN";

export function peer(name: PeerName): string {
  const value = env[`BOOTSEAL_TEST_${name}`];
  if (!value) {
    throw new Error(
      `peer variable BOOTSEAL_TEST_${name} is not set: start the peers with 'scripts/peers.sh up' and source .peers/env`,
    );
  }
  return value;
}
