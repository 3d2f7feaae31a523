/**
 * Smoke test of the FAKE Cloud KMS (test/fakes/gcp-kms-fake.ts: no real GCP KMS emulator
 * installs here, docs/development.md "Fakes") with the real @google-cloud/kms client over gRPC.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { KeyManagementServiceClient } from "@google-cloud/kms";
import { credentials, status } from "@grpc/grpc-js";
import { crc32c } from "../fakes/crc32c.ts";
import { peer, uniqueName } from "../helpers/peers.ts";

const FAKE = "(fake: wire-protocol GCP KMS)";

/** The gRPC status and details a refused call ends with. */
async function refused(p: Promise<unknown>): Promise<{ code: number; details: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as { code?: unknown; details?: unknown };
    assert.equal(typeof e.code, "number", `a gRPC error, got ${String(err)}`);
    return { code: e.code as number, details: String(e.details) };
  }
  assert.fail("the call succeeded but should have been refused");
}

describe(`GCP KMS ${FAKE}`, () => {
  let client: KeyManagementServiceClient;
  let ring: string;
  let keyName: string;
  let otherName: string;
  const parent = "projects/bootseal-test/locations/global";

  before(async () => {
    const [host, port] = peer("GCP_KMS_ENDPOINT").split(":");
    client = new KeyManagementServiceClient({
      apiEndpoint: host,
      port: Number(port),
      sslCreds: credentials.createInsecure(),
      fallback: false,
    });
    const [created] = await client.createKeyRing({ parent, keyRingId: uniqueName("smoke"), keyRing: {} });
    ring = created.name as string;
    const make = async (id: string) =>
      (
        await client.createCryptoKey({
          parent: ring,
          cryptoKeyId: id,
          cryptoKey: { purpose: "ENCRYPT_DECRYPT" },
        })
      )[0].name as string;
    keyName = await make("k");
    otherName = await make("other");
  });
  after(() => client.close());

  test(`key ring and crypto key: create, get, version 1 is primary ${FAKE}`, async () => {
    const [r] = await client.getKeyRing({ name: ring });
    assert.equal(r.name, ring);
    assert.ok(Number(r.createTime?.seconds) > 0);
    const [k] = await client.getCryptoKey({ name: keyName });
    assert.equal(k.name, `${ring}/cryptoKeys/k`);
    assert.equal(k.purpose, "ENCRYPT_DECRYPT");
    assert.equal(k.primary?.name, `${keyName}/cryptoKeyVersions/1`);
    assert.equal(k.primary?.state, "ENABLED");
    assert.equal(k.primary?.algorithm, "GOOGLE_SYMMETRIC_ENCRYPTION");
    const again = await refused(
      client.createKeyRing({ parent, keyRingId: ring.split("/").pop(), keyRing: {} }),
    );
    assert.equal(again.code, status.ALREADY_EXISTS);
  });

  test(`encrypt and decrypt with AAD and crc32c checksums ${FAKE}`, async () => {
    assert.equal(crc32c(Buffer.from("123456789")), 0xe3069283, "CRC-32C check value");
    const plaintext = Buffer.from(new Uint8Array(32).map((_, i) => 255 - i));
    const aad = Buffer.from("bootseal-machine=default/worker-0");
    const [enc] = await client.encrypt({
      name: keyName,
      plaintext,
      additionalAuthenticatedData: aad,
      plaintextCrc32c: { value: crc32c(plaintext) },
      additionalAuthenticatedDataCrc32c: { value: crc32c(aad) },
    });
    assert.equal(enc.name, `${keyName}/cryptoKeyVersions/1`);
    assert.equal(enc.verifiedPlaintextCrc32c, true);
    assert.equal(enc.verifiedAdditionalAuthenticatedDataCrc32c, true);
    const ciphertext = Buffer.from(enc.ciphertext as Uint8Array);
    assert.ok(!ciphertext.includes(plaintext), "the ciphertext does not hold the plaintext");
    assert.equal(Number(enc.ciphertextCrc32c?.value), crc32c(ciphertext));

    const [dec] = await client.decrypt({ name: keyName, ciphertext, additionalAuthenticatedData: aad });
    assert.deepEqual(Buffer.from(dec.plaintext as Uint8Array), plaintext);
    assert.equal(Number(dec.plaintextCrc32c?.value), crc32c(plaintext));
    assert.equal(dec.usedPrimary, true);

    // Without checksums the verified flags stay false; a version name encrypts too.
    const [plain] = await client.encrypt({ name: `${keyName}/cryptoKeyVersions/1`, plaintext });
    assert.equal(plain.verifiedPlaintextCrc32c, false);
    const [back] = await client.decrypt({ name: keyName, ciphertext: plain.ciphertext });
    assert.deepEqual(Buffer.from(back.plaintext as Uint8Array), plaintext);

    const badCrc = await refused(
      client.encrypt({ name: keyName, plaintext, plaintextCrc32c: { value: crc32c(plaintext) ^ 1 } }),
    );
    assert.equal(badCrc.code, status.INVALID_ARGUMENT);
  });

  test(`a wrong or missing AAD is INVALID_ARGUMENT "Decryption failed" ${FAKE}`, async () => {
    const [enc] = await client.encrypt({
      name: keyName,
      plaintext: Buffer.from("secret"),
      additionalAuthenticatedData: Buffer.from("default/m1"),
    });
    for (const aad of [Buffer.from("default/m2"), undefined]) {
      const r = await refused(
        client.decrypt({
          name: keyName,
          ciphertext: enc.ciphertext,
          ...(aad ? { additionalAuthenticatedData: aad } : {}),
        }),
      );
      assert.equal(r.code, status.INVALID_ARGUMENT);
      assert.match(r.details, /^Decryption failed/);
    }
  });

  test(`another key's, a tampered and a malformed ciphertext are INVALID_ARGUMENT ${FAKE}`, async () => {
    const [enc] = await client.encrypt({ name: keyName, plaintext: Buffer.from("secret") });
    const ciphertext = Buffer.from(enc.ciphertext as Uint8Array);
    const tampered = Buffer.from(ciphertext);
    tampered[tampered.length - 20] = (tampered[tampered.length - 20] ?? 0) ^ 1;
    for (const [name, ct] of [
      [otherName, ciphertext],
      [keyName, tampered],
      [keyName, Buffer.from("not a ciphertext")],
    ] as const) {
      const r = await refused(client.decrypt({ name, ciphertext: ct }));
      assert.equal(r.code, status.INVALID_ARGUMENT, `${name}: ${r.details}`);
    }
  });

  test(`an unknown key or key ring is NOT_FOUND; other RPCs are UNIMPLEMENTED ${FAKE}`, async () => {
    const missing = `${ring}/cryptoKeys/missing`;
    for (const p of [
      client.encrypt({ name: missing, plaintext: Buffer.from("x") }),
      client.decrypt({ name: missing, ciphertext: Buffer.alloc(40) }),
      client.getCryptoKey({ name: missing }),
      client.getKeyRing({ name: `${parent}/keyRings/${uniqueName("missing")}` }),
    ]) {
      assert.equal((await refused(p)).code, status.NOT_FOUND);
    }
    const r = await refused(client.generateRandomBytes({ location: parent, lengthBytes: 8 }));
    assert.equal(r.code, status.UNIMPLEMENTED);
  });

  test(`a new primary version: older ciphertexts still decrypt ${FAKE}`, async () => {
    const [old] = await client.encrypt({ name: otherName, plaintext: Buffer.from("v1") });
    const [v2] = await client.createCryptoKeyVersion({ parent: otherName, cryptoKeyVersion: {} });
    assert.equal(v2.name, `${otherName}/cryptoKeyVersions/2`);
    await client.updateCryptoKeyPrimaryVersion({ name: otherName, cryptoKeyVersionId: "2" });
    const [enc] = await client.encrypt({ name: otherName, plaintext: Buffer.from("v2") });
    assert.equal(enc.name, v2.name);
    const [dec] = await client.decrypt({ name: otherName, ciphertext: old.ciphertext });
    assert.equal(Buffer.from(dec.plaintext as Uint8Array).toString(), "v1");
    assert.equal(dec.usedPrimary, false);
  });
});
