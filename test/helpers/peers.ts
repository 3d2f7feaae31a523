/**
 * Where the real peers are. scripts/peers.sh writes these variables to $BOOTSEAL_PEERS_RUN/env
 * (default .peers/env; see docs/development.md, "Peers"); a test that needs a peer calls
 * peer(NAME) and fails loudly when the variable is missing: a missing peer is a failure, never
 * a silent skip. Endpoints carry the port each run picked: never assume a fixed port.
 */
import { randomBytes } from "node:crypto";
import { env } from "node:process";

export type PeerName =
  | "SOPS_BIN" // path of the real sops 3.13.2
  | "SOPS_3_13_3_BIN" // path of the real sops 3.13.3 (the oracle for comments inside YAML lists)
  | "AGE_BIN" // path of age
  | "AGE_KEYGEN_BIN" // path of age-keygen
  | "AGE_PLUGIN_DIR" // a directory holding only age-plugin-batchpass (filippo.io/age v1.3.1), a real age plugin
  | "GPG_BIN" // path of gpg
  | "GPGCONF_BIN" // path of gpgconf (stops the gpg-agent of a temporary GNUPGHOME)
  | "S3_SEAWEEDFS_ENDPOINT" // http://127.0.0.1:<port>
  | "S3_SEAWEEDFS_ACCESS_KEY" // the admin identity weed mini was started with
  | "S3_SEAWEEDFS_SECRET_KEY"
  | "S3_MOTO_ENDPOINT" // http://127.0.0.1:<port> (moto serves S3 and KMS; any credentials)
  | "KMS_MOTO_ENDPOINT" // the same moto endpoint
  | "STS_MOTO_AUTH_ENDPOINT" // http://127.0.0.1:<port>: a second moto that checks signatures and IAM policies
  | "STS_MOTO_AUTH_ACCESS_KEY" // its admin user's key (made by the peer's set-up)
  | "STS_MOTO_AUTH_SECRET_KEY"
  | "KMS_LOCAL_ENDPOINT" // http://127.0.0.1:<port> (local-kms, region us-east-1)
  | "GCS_ENDPOINT" // http://127.0.0.1:<port> (fake-gcs-server)
  | "GCP_KMS_ENDPOINT" // 127.0.0.1:<port>: test/fakes/gcp-kms-fake.ts (the real emulators cannot be installed here)
  | "AZURE_KV_URL" // https://localhost:<port>: test/fakes/azure-kv-fake.ts (lowkey-vault is not on Maven Central)
  | "VAULT_ADDR" // http://127.0.0.1:<port> (OpenBao dev server, transit enabled)
  | "VAULT_TOKEN"
  | "BAO_BIN" // path of the OpenBao CLI (bao) the openbao peer runs
  | "ZSH_BIN" // path of zsh (Debian package), for the completion script
  | "FISH_BIN" // path of fish (Debian package), for the completion script
  | "CLOUD_INIT_BIN" // path of cloud-init 22.4.2 (Debian package): `cloud-init schema -c FILE`
  | "IGNITION_VALIDATE_BIN" // path of Ignition's validator (github.com/coreos/ignition/v2/validate v2.27.0)
  | "QEMU_AARCH64_BIN" // path of qemu-aarch64-static (Debian qemu-user-static 7.2): runs the linux-arm64 executable
  | "QEMU_AARCH64_SYSROOT" // the arm64 C/C++ runtimes for qemu's -L (Debian libc6-arm64-cross, libstdc++6-arm64-cross)
  | "WINE_BIN" // path of wine64 (Debian wine64 8.0): runs the windows-x64 executable
  | "IGNITION_APPLY_BIN" // Ignition v2.27.0 itself as ignition-apply (github.com/coreos/ignition/v2/internal): the files stage on a directory
  | "KUBE_SERVER" // https://127.0.0.1:<port>: kube-apiserver v1.34.4 on etcd 3.6 (RBAC on)
  | "KUBE_CA_FILE" // its self-signed serving certificate
  | "KUBE_ADMIN_TOKEN" // a static token in system:masters (creates ServiceAccounts, bindings, tokens)
  | "KUBE_SA_KEY_FILE" // the ServiceAccount signing key (to sign an expired token)
  | "KUBE_ISSUER" // the ServiceAccount token issuer
  | "PROMTOOL" // path of promtool 2.42 (Debian 12 prometheus package, binary only): check metrics, check/test rules
  | "HELM_BIN" // path of helm v3.22.0 (helm.sh/helm/v3/cmd/helm): lint and template the chart
  | "CAPI_CRDS_DIR" // Cluster API v1.14.2's CRDs (core and the kubeadm bootstrap provider's)
  | "CAPI_VERSION" // the Cluster API release the capi peer built and runs (v1.14.2)
  | "CAPI_WATCH_FILTER" // the capi peer's managers reconcile only objects labelled cluster.x-k8s.io/watch-filter=<this>
  | "OPENAPI_SPEC_VALIDATOR" // path of openapi-spec-validator 0.9.0 (PyPI): checks the service's OpenAPI document
  | "SPIFFE_CONTROL" // http://127.0.0.1:<port>: the spiffe peer's control API (test/helpers/spiffe-issuer.ts)
  | "SPIFFE_WEB_ENDPOINT" // https://127.0.0.1:<port>: its bundle endpoint, profile https_web (GET /<trust-domain>)
  | "SPIFFE_WEB_CA_FILE" // the root that signs the https_web endpoint's certificate
  | "SPIFFE_TLS_ENDPOINT" // https://127.0.0.1:<port>: its bundle endpoint, profile https_spiffe (X509-SVID spiffe://bootseal.test/bundle-endpoint)
  | "SPIFFE_BOOTSTRAP_BUNDLE" // bootseal.test's bundle as the peer started (authenticates the https_spiffe endpoint)
  | "CHROMIUM_BIN" // path of chromium (Debian 12 package), headless through puppeteer-core (the fleet page, Swagger UI)
  | "SWTPM_TCTI" // swtpm:host=127.0.0.1,port=<port>: a software TPM 2.0 (swtpm 0.7.1) with EK certificates
  | "SWTPM_OTHER_TCTI" // a second one, its EK certificates from a CA of its own
  | "SWTPM_EK_CA"; // PEM bundle: the first TPM's EK CA (issuer and root, swtpm_localca)

export function peer(name: PeerName): string {
  if (env.BOOTSEAL_LANE === "unit") {
    // scripts/test.sh unit runs only files that do not import this module; reaching it means
    // the lane list is wrong. Fail, even when a peer happens to be up: never pass by accident.
    throw new Error(
      `peer ${name} asked for in the unit lane (npm run test:unit): list this test file in test/helpers/peer-tests.txt`,
    );
  }
  const value = env[`BOOTSEAL_TEST_${name}`];
  if (!value) {
    throw new Error(
      `peer variable BOOTSEAL_TEST_${name} is not set: start the peers with 'scripts/peers.sh up' and source .peers/env`,
    );
  }
  return value;
}

/** A name no other test run uses (buckets, keys, objects): lower case, digits and '-'. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
}

/**
 * The peer's value, or undefined when it is not set: for the benchmarks, which report a case
 * as "not measured" instead of failing. Tests use peer(), which fails loudly.
 */
export function optionalPeer(name: PeerName): string | undefined {
  return env[`BOOTSEAL_TEST_${name}`] || undefined;
}
