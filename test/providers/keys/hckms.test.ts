/**
 * HuaweiCloud KMS master keys beyond the contract: sops's key ids and metadata layout, the
 * SDK's endpoint setting, the request signature against a known answer of the Go SDK, and
 * wrap/unwrap against the hand-written FAKE test/fakes/hckms-fake.ts (in process). The
 * real sops against the same fake: test/interop/sops-hckms.test.ts.
 */
import assert from "node:assert/strict";
import type { Server } from "node:http";
import { after, before, describe, test } from "node:test";
import { hckmsEndpoint, hckmsKeyType, parseHckmsKeyId } from "../../../providers/keys/hckms.ts";
import { signHuaweiRequest } from "../../../providers/keys/hckms-signer.ts";
import { keysFromUserInput } from "../../../providers/keys/index.ts";
import { BootsealError } from "../../../src/errors.ts";
import { startHckmsFake } from "../../fakes/hckms-fake.ts";

const UUID = "0f4d1c5e-8a6b-4c2d-9e3f-1a2b3c4d5e6f";

function code(c: string, message?: RegExp) {
  return (err: unknown) =>
    err instanceof BootsealError && err.code === c && (message === undefined || message.test(err.message));
}

describe("key ids and layout (sops hckms/keysource.go)", () => {
  test("region:key-uuid, split at the first colon; id is the key id; fields key_id, created_at, enc", () => {
    assert.deepEqual(parseHckmsKeyId(` tr-west-1 : ${UUID} `), { region: "tr-west-1", keyUuid: UUID });
    assert.deepEqual(parseHckmsKeyId("r:a:b"), { region: "r", keyUuid: "a:b" });
    const keys = keysFromUserInput("hckms", ` tr-west-1:${UUID} ,, cn-north-4:k2`, {});
    assert.deepEqual(
      keys.map((k) => k.id),
      [`tr-west-1:${UUID}`, "cn-north-4:k2"],
    );
    assert.deepEqual(
      [...(keys[0]?.toMetadata("ZW5j", new Date("2026-01-01T00:00:00.5Z")).fields ?? [])],
      [
        ["key_id", `tr-west-1:${UUID}`],
        ["created_at", "2026-01-01T00:00:00Z"],
        ["enc", "ZW5j"],
      ],
    );
  });

  test("sops's messages for malformed ids", () => {
    assert.throws(
      () => keysFromUserInput("hckms", "tr-west-1", {}),
      code("BAD_INPUT", /^invalid key ID format: expected 'region:key-uuid', got "tr-west-1"$/),
    );
    assert.throws(() => parseHckmsKeyId(":u"), code("BAD_INPUT", /^region cannot be empty in key ID: ":u"$/));
    assert.throws(
      () => parseHckmsKeyId("r: "),
      code("BAD_INPUT", /^key UUID cannot be empty in key ID: "r:"$/),
    );
    assert.throws(
      () => hckmsKeyType.entriesFromConfig(new Map([["key_id", "nocolon"]])),
      code("BAD_INPUT", /invalid key ID format/),
    );
  });

  test("endpoint: HUAWEICLOUD_SDK_REGION_KMS_<REGION> first, else the SDK's region table", () => {
    assert.equal(hckmsEndpoint("tr-west-1", {}), "https://kms.tr-west-1.myhuaweicloud.com");
    assert.equal(hckmsEndpoint("eu-west-101", {}), "https://kms.eu-west-101.myhuaweicloud.eu");
    assert.equal(
      hckmsEndpoint("tr-west-1", { HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1: "http://127.0.0.1:9/,http://x" }),
      "http://127.0.0.1:9",
    );
    assert.throws(() => hckmsEndpoint("mars-1", {}), code("BAD_INPUT", /invalid region "mars-1"/));
  });

  test("signature equals the Go SDK's (core/auth/signer.Sign, v0.1.207) for the same request", () => {
    // Known answer printed by signer.Sign of huaweicloud-sdk-go-v3 v0.1.207 for this request
    // (path segment with a space and a '+', X-Sdk-Date fixed to 20260102T030405Z).
    const body = `{"key_id":"${UUID}","plain_text":"AAEC","encryption_algorithm":"SYMMETRIC_DEFAULT"}`;
    const headers = signHuaweiRequest(
      {
        method: "POST",
        path: "/v1.0/p r+1/kms/encrypt-data",
        headers: { Host: "kms.tr-west-1.myhuaweicloud.com", "X-Project-Id": "p r+1" },
        body,
      },
      "AKEXAMPLE",
      "SKEXAMPLE",
      new Date("2026-01-02T03:04:05Z"),
    );
    assert.equal(headers["X-Sdk-Date"], "20260102T030405Z");
    assert.equal(
      headers.Authorization,
      "SDK-HMAC-SHA256 Access=AKEXAMPLE, SignedHeaders=host;x-project-id;x-sdk-date, Signature=acb56a0a60e4fd6c7714b809f3f966289ea8d56944f17cae9843c4a73d4c1914",
    );
  });
});

describe("HuaweiCloud KMS (fake: wire-protocol KMS in test/fakes/hckms-fake.ts)", () => {
  let server: Server;
  let url: string;
  let keyUuid: string;
  const env = (over: Record<string, string> = {}) => ({
    HUAWEICLOUD_SDK_AK: "fake-ak",
    HUAWEICLOUD_SDK_SK: "fake-sk",
    HUAWEICLOUD_SDK_PROJECT_ID: "proj-1",
    HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1: url,
    ...over,
  });
  before(async () => {
    const fake = await startHckmsFake();
    ({ server, url } = fake);
    keyUuid = fake.createKey();
  });
  after(() => server.close());

  test("wrap then unwrap gives the data key back; enc is the service's cipher_text", async () => {
    const [key] = keysFromUserInput("hckms", `tr-west-1:${keyUuid}`, { env: env() });
    const secret = Uint8Array.from({ length: 32 }, (_, i) => i * 7);
    const enc = await key!.wrap(secret);
    assert.match(enc, /^[A-Za-z0-9+/]+=*$/);
    assert.deepEqual(await key!.unwrap(enc), secret);
  });

  test("temporary credentials (X-Security-Token) are signed and accepted", async () => {
    const [key] = keysFromUserInput("hckms", `tr-west-1:${keyUuid}`, {
      env: env({ HUAWEICLOUD_SDK_SECURITY_TOKEN: "tok" }),
    });
    const secret = new Uint8Array(32).fill(9);
    assert.deepEqual(await key!.unwrap(await key!.wrap(secret)), secret);
  });

  test("no access key: unwrap answers null (next key), wrap is KEY_ACCESS_DENIED", async () => {
    const [key] = keysFromUserInput("hckms", `tr-west-1:${keyUuid}`, {
      env: { HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1: url },
    });
    assert.equal(await key!.unwrap("AAAA"), null);
    await assert.rejects(key!.wrap(new Uint8Array(32)), code("KEY_ACCESS_DENIED"));
  });

  test("a wrong secret key is refused by the service's signature check: KEY_ACCESS_DENIED", async () => {
    const [key] = keysFromUserInput("hckms", `tr-west-1:${keyUuid}`, {
      env: env({ HUAWEICLOUD_SDK_SK: "wrong" }),
      hckms: { retry: { attempts: 1 } },
    });
    await assert.rejects(key!.wrap(new Uint8Array(32)), code("KEY_ACCESS_DENIED", /APIGW\.0301/));
  });

  test("an unknown key is KEY_NOT_FOUND; a damaged cipher_text BAD_INPUT; no project id USAGE", async () => {
    const [missing] = keysFromUserInput("hckms", `tr-west-1:${UUID}`, { env: env() });
    await assert.rejects(missing!.wrap(new Uint8Array(32)), code("KEY_NOT_FOUND"));
    const [key] = keysFromUserInput("hckms", `tr-west-1:${keyUuid}`, { env: env() });
    const enc = await key!.wrap(new Uint8Array(32));
    const damaged = `${enc.slice(0, -8)}AAAAAAA=`;
    await assert.rejects(key!.unwrap(damaged), code("BAD_INPUT"));
    const [noProject] = keysFromUserInput("hckms", `tr-west-1:${keyUuid}`, {
      env: env({ HUAWEICLOUD_SDK_PROJECT_ID: "" }),
    });
    await assert.rejects(noProject!.unwrap(enc), code("USAGE", /HUAWEICLOUD_SDK_PROJECT_ID/));
  });

  test("unreachable endpoint: KEY_UNAVAILABLE", async () => {
    const [key] = keysFromUserInput("hckms", `tr-west-1:${keyUuid}`, {
      env: env({ HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1: "http://127.0.0.1:1" }),
      hckms: { retry: { attempts: 1 } },
    });
    await assert.rejects(key!.wrap(new Uint8Array(32)), code("KEY_UNAVAILABLE"));
  });
});
