/**
 * Smoke test of the FAKE Azure Key Vault (test/fakes/azure-kv-fake.ts: no real Key Vault
 * emulator installs here, docs/development.md "Fakes") with the real @azure/keyvault-keys
 * clients over verified TLS (the fake's CA comes in through NODE_EXTRA_CA_CERTS).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { constants, createPublicKey, publicEncrypt, randomBytes } from "node:crypto";
import { before, describe, test } from "node:test";
import type { TokenCredential } from "@azure/core-auth";
import { CryptographyClient, KeyClient, type KeyVaultKey } from "@azure/keyvault-keys";
import { peer, uniqueName } from "../helpers/peers.ts";

const FAKE = "(fake: wire-protocol Azure Key Vault)";
/** The fake accepts any bearer token (unless started with BOOTSEAL_FAKE_AZURE_KV_TOKEN). */
const STATIC_TOKEN: TokenCredential = {
  getToken: async () => ({ token: "fake-any-token", expiresOnTimestamp: Date.now() + 3_600_000 }),
};
const OPTIONS = { disableChallengeResourceVerification: true, retryOptions: { maxRetries: 0 } };

/** The HTTP status and Key Vault error code a refused call ends with. */
async function refused(p: Promise<unknown>): Promise<{ status: number; code: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as { statusCode?: number; code?: string; details?: { error?: { code?: string } } };
    assert.equal(typeof e.statusCode, "number", `a RestError, got ${String(err)}`);
    return { status: e.statusCode as number, code: e.details?.error?.code ?? e.code ?? "" };
  }
  assert.fail("the call succeeded but should have been refused");
}

function jwkPublicKey(key: KeyVaultKey) {
  const jwk = key.key;
  assert.ok(jwk?.n && jwk.e, "the key has n and e");
  return createPublicKey({
    key: {
      kty: "RSA",
      n: Buffer.from(jwk.n).toString("base64url"),
      e: Buffer.from(jwk.e).toString("base64url"),
    },
    format: "jwk",
  });
}

describe(`Azure Key Vault ${FAKE}`, () => {
  let vaultUrl: string;
  let keys: KeyClient;
  let key: KeyVaultKey;
  let other: KeyVaultKey;
  const crypto = (k: KeyVaultKey) => new CryptographyClient(k.id as string, STATIC_TOKEN, OPTIONS);

  before(async () => {
    vaultUrl = peer("AZURE_KV_URL").replace(/\/+$/, "");
    keys = new KeyClient(vaultUrl, STATIC_TOKEN, OPTIONS);
    key = await keys.createRsaKey(uniqueName("smoke"), { keySize: 2048 });
    other = await keys.createRsaKey(uniqueName("smoke-other"), { keySize: 3072 });
  });

  test(`an unauthenticated request gets the Key Vault challenge ${FAKE}`, async () => {
    const res = await fetch(`${vaultUrl}/keys/${key.name}?api-version=7.4`);
    assert.equal(res.status, 401);
    const challenge = res.headers.get("www-authenticate") ?? "";
    assert.match(challenge, /^Bearer authorization="https:\/\/login\.microsoftonline\.com\/[^"]+"/);
    assert.match(challenge, /resource="https:\/\/vault\.azure\.net"/);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "Unauthorized");
  });

  test(`createRsaKey and getKey: a version, the public JWK, the kid ${FAKE}`, async () => {
    assert.match(key.properties.version ?? "", /^[0-9a-f]{32}$/);
    assert.equal(key.id, `${vaultUrl}/keys/${key.name}/${key.properties.version}`);
    assert.equal(key.keyType, "RSA");
    assert.equal(key.key?.n?.length, 256);
    assert.equal(jwkPublicKey(other).asymmetricKeyDetails?.modulusLength, 3072);
    assert.ok(key.keyOperations?.includes("decrypt"));
    assert.equal(key.properties.enabled, true);
    const latest = await keys.getKey(key.name);
    assert.equal(latest.id, key.id);
    const pinned = await keys.getKey(key.name, { version: key.properties.version as string });
    assert.deepEqual(pinned.key?.n, key.key?.n);
    // A second create makes a new current version; the old one stays readable.
    const v2 = await keys.createRsaKey(other.name);
    assert.notEqual(v2.properties.version, other.properties.version);
    assert.equal((await keys.getKey(other.name)).id, v2.id);
    assert.equal(
      (await keys.getKey(other.name, { version: other.properties.version as string })).id,
      other.id,
    );
  });

  test(`RSA-OAEP-256 encrypt and decrypt round trip ${FAKE}`, async () => {
    const secret = randomBytes(32);
    const client = crypto(key);
    const enc = await client.encrypt({ algorithm: "RSA-OAEP-256", plaintext: secret });
    assert.equal(enc.keyID, key.id);
    assert.equal(enc.result.length, 256);
    const dec = await client.decrypt({ algorithm: "RSA-OAEP-256", ciphertext: enc.result });
    assert.deepEqual(Buffer.from(dec.result), secret);
  });

  test(`a local RSA-OAEP-256 encrypt with the JWK decrypts through the fake ${FAKE}`, async () => {
    const secret = randomBytes(32);
    const publicKey = jwkPublicKey(key);
    const oaep = (oaepHash: string) =>
      publicEncrypt({ key: publicKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash }, secret);
    const dec = await crypto(key).decrypt({ algorithm: "RSA-OAEP-256", ciphertext: oaep("sha256") });
    assert.deepEqual(Buffer.from(dec.result), secret);
    // The hash matters: a SHA-1 OAEP ciphertext opens as RSA-OAEP only.
    const sha1 = oaep("sha1");
    const wrongAlg = await refused(crypto(key).decrypt({ algorithm: "RSA-OAEP-256", ciphertext: sha1 }));
    assert.deepEqual(wrongAlg, { status: 400, code: "BadParameter" });
    const ok = await crypto(key).decrypt({ algorithm: "RSA-OAEP", ciphertext: sha1 });
    assert.deepEqual(Buffer.from(ok.result), secret);
  });

  test(`RSA-OAEP and RSA1_5, encrypt/decrypt and wrapKey/unwrapKey ${FAKE}`, async () => {
    const client = crypto(key);
    for (const algorithm of ["RSA-OAEP", "RSA1_5"] as const) {
      const secret = randomBytes(32);
      const enc = await client.encrypt({ algorithm, plaintext: secret });
      assert.deepEqual(
        Buffer.from((await client.decrypt({ algorithm, ciphertext: enc.result })).result),
        secret,
      );
    }
    for (const algorithm of ["RSA-OAEP-256", "RSA-OAEP", "RSA1_5"] as const) {
      const dataKey = randomBytes(32);
      const wrapped = await client.wrapKey(algorithm, dataKey);
      assert.deepEqual(Buffer.from((await client.unwrapKey(algorithm, wrapped.result)).result), dataKey);
    }
  });

  test(`another key's ciphertext and garbage are 400 BadParameter; unknown keys 404 KeyNotFound ${FAKE}`, async () => {
    const enc = await crypto(other).encrypt({ algorithm: "RSA-OAEP-256", plaintext: randomBytes(32) });
    for (const [algorithm, ciphertext] of [
      ["RSA-OAEP-256", enc.result],
      ["RSA-OAEP-256", randomBytes(256)],
      ["RSA1_5", randomBytes(256)],
      ["RSA-OAEP-256", Buffer.from("short")],
    ] as const) {
      assert.deepEqual(await refused(crypto(key).decrypt({ algorithm, ciphertext })), {
        status: 400,
        code: "BadParameter",
      });
    }
    const missing = uniqueName("smoke-missing");
    assert.deepEqual(await refused(keys.getKey(missing)), { status: 404, code: "KeyNotFound" });
    const ghost = new CryptographyClient(
      `${vaultUrl}/keys/${missing}/0123456789abcdef`,
      STATIC_TOKEN,
      OPTIONS,
    );
    assert.deepEqual(await refused(ghost.decrypt({ algorithm: "RSA-OAEP-256", ciphertext: enc.result })), {
      status: 404,
      code: "KeyNotFound",
    });
  });

  test(`TLS is verified: without the fake's CA the SDK refuses the server ${FAKE}`, async () => {
    // A child Node with and without NODE_EXTRA_CA_CERTS (it is read once, at start-up).
    const script = `
      import { KeyClient } from "@azure/keyvault-keys";
      const token = { getToken: async () => ({ token: "t", expiresOnTimestamp: Date.now() + 3600000 }) };
      const c = new KeyClient(process.argv[1], token, ${JSON.stringify(OPTIONS)});
      try { await c.getKey("tls-probe-missing"); console.log("OK"); }
      catch (e) { console.log(e.statusCode ?? e.code ?? e.name); }`;
    const run = (env: NodeJS.ProcessEnv) =>
      new Promise<string>((resolve, reject) => {
        execFile(
          process.execPath,
          ["--input-type=module", "-e", script, vaultUrl],
          { env, cwd: process.cwd() },
          (err, stdout) => (err ? reject(err) : resolve(stdout.trim())),
        );
      });
    const { NODE_EXTRA_CA_CERTS, ...withoutCa } = process.env;
    assert.ok(NODE_EXTRA_CA_CERTS, "scripts/peers.sh exports NODE_EXTRA_CA_CERTS");
    assert.equal(await run(process.env), "404", "with the CA: the fake answers (KeyNotFound)");
    assert.match(
      await run(withoutCa),
      /UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER/,
    );
  });
});
