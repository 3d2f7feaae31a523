/**
 * GCP KMS master keys beyond the contract: resource ids and metadata layout as sops has them,
 * the endpoint variables, and error classes against the wire-protocol fake test/fakes/gcp-kms-fake.ts (fake-cloud-kms cannot be installed here) with the real client.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { KeyManagementServiceClient } from "@google-cloud/kms";
import { credentials as grpcCredentials } from "@grpc/grpc-js";
import { gcpKmsKeyType, mapGcpError } from "../../../providers/keys/gcp-kms.ts";
import { keysFromUserInput } from "../../../providers/keys/index.ts";
import { BootsealError } from "../../../src/errors.ts";
import { peer, uniqueName } from "../../helpers/peers.ts";

const ID = "projects/p1/locations/global/keyRings/r1/cryptoKeys/k1";

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

describe("resource ids and layout (sops gcpkms/keysource.go)", () => {
  test("comma list, spaces removed; id is the resource id; fields resource_id, created_at, enc", () => {
    const keys = keysFromUserInput("gcp_kms", ` ${ID} ,${ID.replace("k1", "k2")}`, {});
    assert.deepEqual(
      keys.map((k) => k.id),
      [ID, ID.replace("k1", "k2")],
    );
    assert.deepEqual(
      [...(keys[0]?.toMetadata("ZW5j", new Date("2026-01-01T00:00:00.5Z")).fields ?? [])],
      [
        ["resource_id", ID],
        ["created_at", "2026-01-01T00:00:00Z"],
        ["enc", "ZW5j"],
      ],
    );
  });

  test("ids that are not a CryptoKey are refused", () => {
    assert.throws(
      () => keysFromUserInput("gcp_kms", "projects/p1/locations/global/keyRings/r1", {}),
      code("BAD_INPUT"),
    );
    assert.throws(() => keysFromUserInput("gcp_kms", `${ID}/cryptoKeyVersions/1`, {}), code("BAD_INPUT"));
    assert.throws(
      () =>
        gcpKmsKeyType.fromMetadata({ kind: "gcp_kms", enc: "", fields: new Map([["resource_id", ""]]) }, {}),
      code("BAD_INPUT"),
    );
  });

  test("gRPC status codes map to error classes", () => {
    assert.equal(mapGcpError({ code: 7 }, ID, "decrypt").code, "KEY_ACCESS_DENIED");
    assert.equal(mapGcpError({ code: 16 }, ID, "decrypt").code, "KEY_ACCESS_DENIED");
    assert.equal(mapGcpError({ code: 5 }, ID, "decrypt").code, "KEY_NOT_FOUND");
    assert.equal(mapGcpError({ code: 3 }, ID, "decrypt").code, "BAD_INPUT");
    assert.equal(mapGcpError({ code: 14 }, ID, "decrypt").code, "KEY_UNAVAILABLE");
    assert.equal(mapGcpError({ code: 8 }, ID, "decrypt").code, "KEY_UNAVAILABLE");
    assert.ok(mapGcpError({ code: 14 }, ID, "decrypt").message.includes(ID));
  });
});

describe("GCP KMS (fake: wire-protocol GCP KMS)", () => {
  let endpoint: string;
  let keyId: string;
  before(async () => {
    endpoint = peer("GCP_KMS_ENDPOINT").replace(/^[a-z]+:\/\//, "");
    const [host, port] = endpoint.split(":");
    const admin = new KeyManagementServiceClient({
      apiEndpoint: host,
      port: Number(port),
      sslCreds: grpcCredentials.createInsecure(),
      fallback: false,
    });
    const parent = "projects/bootseal-test/locations/global";
    const ring = uniqueName("mk-contract");
    await admin.createKeyRing({ parent, keyRingId: ring, keyRing: {} });
    const [key] = await admin.createCryptoKey({
      parent: `${parent}/keyRings/${ring}`,
      cryptoKeyId: "k",
      cryptoKey: { purpose: "ENCRYPT_DECRYPT" },
    });
    keyId = key.name as string;
    await admin.close();
  });

  test("endpoint and plaintext gRPC from BOOTSEAL_GCP_KMS_ENDPOINT / BOOTSEAL_GCP_KMS_INSECURE; enc is standard base64", async () => {
    const env = { BOOTSEAL_GCP_KMS_ENDPOINT: endpoint, BOOTSEAL_GCP_KMS_INSECURE: "1" };
    const [key] = keysFromUserInput("gcp_kms", keyId, { env });
    const secret = new Uint8Array(32).map((_, i) => i);
    const enc = await key!.wrap(secret);
    assert.match(enc, /^[A-Za-z0-9+/]+={0,2}$/);
    assert.deepEqual(await key!.unwrap(enc), secret);
    // The raw API agrees: the ciphertext decrypts to the raw bytes, no AAD.
    const [host, port] = endpoint.split(":");
    const raw = new KeyManagementServiceClient({
      apiEndpoint: host,
      port: Number(port),
      sslCreds: grpcCredentials.createInsecure(),
      fallback: false,
    });
    const [out] = await raw.decrypt({ name: keyId, ciphertext: Buffer.from(enc, "base64") });
    await raw.close();
    assert.deepEqual(new Uint8Array(out.plaintext as Uint8Array), secret);
  });

  test("an unknown key is KEY_NOT_FOUND, naming the resource", async () => {
    const missing = keyId.replace(/cryptoKeys\/.*/, "cryptoKeys/missing");
    const [key] = keysFromUserInput("gcp_kms", missing, {
      env: {},
      gcpKms: { endpoint, insecure: true },
    });
    await assert.rejects(key!.wrap(new Uint8Array(32)), (err) => {
      assert.ok(err instanceof BootsealError && err.code === "KEY_NOT_FOUND", String(err));
      assert.ok(err.message.includes(missing));
      return true;
    });
  });
});
