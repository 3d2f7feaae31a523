/**
 * The MasterKey contract (test/contracts/master-key.contract.ts) for every implementation,
 * each against its real peer with the real SDK client: one line per implementation and peer.
 */
import { CreateKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import type { TokenCredential } from "@azure/identity";
import { KeyClient } from "@azure/keyvault-keys";
import { KeyManagementServiceClient } from "@google-cloud/kms";
import { credentials as grpcCredentials } from "@grpc/grpc-js";
import { generateIdentity, identityToRecipient } from "age-encryption";
import * as openpgp from "openpgp";
import { ageKeyType } from "../../../providers/keys/age.ts";
import { awsKmsKeyType } from "../../../providers/keys/aws-kms.ts";
import { azureKvKeyType } from "../../../providers/keys/azure-kv.ts";
import { gcpKmsKeyType } from "../../../providers/keys/gcp-kms.ts";
import type { ProviderDeps } from "../../../providers/keys/index.ts";
import type { MasterKeyType } from "../../../providers/keys/key-type.ts";
import { pgpKeyType } from "../../../providers/keys/pgp.ts";
import { vaultTransitKeyType } from "../../../providers/keys/vault-transit.ts";
import type { KeyEntry, MasterKey } from "../../../src/envelope/sops/master-key.ts";
import { type MasterKeyFixture, masterKeyContract } from "../../contracts/master-key.contract.ts";
import { peer, uniqueName } from "../../helpers/peers.ts";

const FAST_FAIL = { attempts: 2, baseDelayMs: 10, maxDelayMs: 20, timeoutMs: 3_000 };
const AWS_CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };

function one(type: MasterKeyType, text: string, deps: ProviderDeps): MasterKey {
  const [key] = type.fromUserInput(text, deps);
  if (!key) throw new Error(`no key from ${text}`);
  return key;
}

function entry(kind: KeyEntry["kind"], fields: [string, string | Record<string, string>][]): KeyEntry {
  return { kind, enc: "", fields: new Map(fields) };
}

async function ageFixture(): Promise<MasterKeyFixture> {
  const mine = await generateIdentity();
  const theirs = await generateIdentity();
  const deps = { env: { SOPS_AGE_KEY: mine } };
  return {
    type: ageKeyType,
    deps,
    key: one(ageKeyType, await identityToRecipient(mine), deps),
    other: one(ageKeyType, await identityToRecipient(theirs), deps),
    secrets: [mine],
  };
}

async function pgpFixture(): Promise<MasterKeyFixture> {
  // Generated: the sops vector keys are RSA-1024, which OpenPGP.js refuses to encrypt to.
  const make = (name: string) =>
    openpgp.generateKey({ type: "ecc", curve: "curve25519Legacy", userIDs: [{ name }], format: "armored" });
  const [mine, theirs] = await Promise.all([make("contract mine"), make("contract theirs")]);
  const fingerprint = async (armored: string) =>
    (await openpgp.readKey({ armoredKey: armored })).getFingerprint().toUpperCase();
  const deps = {
    env: {},
    pgp: { privateKeys: [mine.privateKey], publicKeys: [theirs.publicKey], gpg: false },
  };
  return {
    type: pgpKeyType,
    deps,
    key: one(pgpKeyType, await fingerprint(mine.publicKey), deps),
    other: one(pgpKeyType, await fingerprint(theirs.publicKey), deps),
    secrets: [mine.privateKey],
  };
}

function awsFixture(endpointPeer: "KMS_MOTO_ENDPOINT" | "KMS_LOCAL_ENDPOINT") {
  return async (): Promise<MasterKeyFixture> => {
    const endpoint = peer(endpointPeer);
    const kms = new KMSClient({ endpoint, region: "us-east-1", credentials: AWS_CREDENTIALS });
    const arn = (await kms.send(new CreateKeyCommand({ Description: "bootseal contract" }))).KeyMetadata?.Arn;
    kms.destroy();
    if (!arn) throw new Error("CreateKey gave no ARN");
    const deps = { env: {}, awsKms: { endpoint, credentials: AWS_CREDENTIALS, retry: FAST_FAIL } };
    const withContext = (machine: string, d: ProviderDeps) =>
      awsKmsKeyType.fromMetadata(
        entry("kms", [
          ["arn", arn],
          ["context", { "bootseal-machine": machine }],
          ["aws_profile", ""],
        ]),
        d,
      );
    return {
      type: awsKmsKeyType,
      deps,
      key: withContext("default/m1", deps),
      // The same key, another machine's context: must not open m1's enc.
      other: withContext("default/m2", deps),
      unreachable: (port) =>
        withContext("default/m1", {
          env: {},
          awsKms: { ...deps.awsKms, endpoint: `http://127.0.0.1:${port}` },
        }),
      secrets: [AWS_CREDENTIALS.secretAccessKey],
    };
  };
}

async function vaultFixture(): Promise<MasterKeyFixture> {
  const addr = peer("VAULT_ADDR");
  const token = peer("VAULT_TOKEN");
  const names = [uniqueName("mk-contract"), uniqueName("mk-contract")];
  for (const name of names) {
    const res = await fetch(`${addr}/v1/transit/keys/${name}`, {
      method: "POST",
      headers: { "X-Vault-Token": token },
    });
    if (!res.ok) throw new Error(`cannot create transit key ${name}: HTTP ${res.status}`);
  }
  const deps = { env: { VAULT_TOKEN: token }, vaultTransit: { retry: FAST_FAIL } };
  return {
    type: vaultTransitKeyType,
    deps,
    key: one(vaultTransitKeyType, `${addr}/v1/transit/keys/${names[0]}`, deps),
    other: one(vaultTransitKeyType, `${addr}/v1/transit/keys/${names[1]}`, deps),
    unreachable: (port) =>
      one(vaultTransitKeyType, `http://127.0.0.1:${port}/v1/transit/keys/${names[0]}`, deps),
    secrets: [token],
  };
}

async function gcpFixture(): Promise<MasterKeyFixture> {
  const endpoint = peer("GCP_KMS_ENDPOINT");
  const [host, port] = endpoint.replace(/^[a-z]+:\/\//, "").split(":");
  const admin = new KeyManagementServiceClient({
    apiEndpoint: host,
    port: Number(port),
    sslCreds: grpcCredentials.createInsecure(),
    fallback: false,
  });
  const parent = "projects/bootseal-test/locations/global";
  const ring = uniqueName("mk-contract");
  await admin.createKeyRing({ parent, keyRingId: ring, keyRing: {} });
  const ids: string[] = [];
  for (const name of ["a", "b"]) {
    const [key] = await admin.createCryptoKey({
      parent: `${parent}/keyRings/${ring}`,
      cryptoKeyId: name,
      cryptoKey: { purpose: "ENCRYPT_DECRYPT" },
    });
    ids.push(key.name as string);
  }
  await admin.close();
  const gcpKms = (ep: string) => ({ endpoint: ep, insecure: true, retry: FAST_FAIL });
  const deps = { env: {}, gcpKms: gcpKms(`${host}:${port}`) };
  return {
    type: gcpKmsKeyType,
    deps,
    key: one(gcpKmsKeyType, ids[0] as string, deps),
    other: one(gcpKmsKeyType, ids[1] as string, deps),
    unreachable: (p) => one(gcpKmsKeyType, ids[0] as string, { env: {}, gcpKms: gcpKms(`127.0.0.1:${p}`) }),
  };
}

/** The Azure Key Vault fake (test/fakes) accepts any bearer token. */
export const STATIC_TOKEN: TokenCredential = {
  getToken: async () => ({ token: "fake-azure-kv-any-token", expiresOnTimestamp: Date.now() + 3_600_000 }),
};

async function azureFixture(): Promise<MasterKeyFixture> {
  const vaultUrl = peer("AZURE_KV_URL").replace(/\/+$/, "");
  const admin = new KeyClient(vaultUrl, STATIC_TOKEN, { disableChallengeResourceVerification: true });
  const names = [uniqueName("mk-contract"), uniqueName("mk-contract")];
  for (const name of names) await admin.createRsaKey(name, { keySize: 2048 });
  const azureKv = { credential: STATIC_TOKEN, disableChallengeResourceVerification: true, retry: FAST_FAIL };
  const deps = { env: {}, azureKv };
  return {
    type: azureKvKeyType,
    deps,
    // No version given: the provider looks the current one up and records it.
    key: one(azureKvKeyType, `${vaultUrl}/keys/${names[0]}`, deps),
    other: one(azureKvKeyType, `${vaultUrl}/keys/${names[1]}`, deps),
    unreachable: (port) =>
      one(azureKvKeyType, `https://127.0.0.1:${port}/keys/${names[0]}/0123456789abcdef`, deps),
    secrets: ["fake-azure-kv-any-token"],
  };
}

masterKeyContract("age (generated X25519 identities)", ageFixture);
masterKeyContract("pgp (generated Curve25519 keys, OpenPGP.js)", pgpFixture);
masterKeyContract("AWS KMS on moto", awsFixture("KMS_MOTO_ENDPOINT"));
masterKeyContract("AWS KMS on local-kms", awsFixture("KMS_LOCAL_ENDPOINT"));
masterKeyContract("Vault transit on OpenBao", vaultFixture);
masterKeyContract("GCP KMS (fake: wire-protocol GCP KMS)", gcpFixture);
masterKeyContract("Azure Key Vault (fake: wire-protocol Azure Key Vault)", azureFixture);
