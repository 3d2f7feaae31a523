/**
 * Azure Key Vault master keys beyond the contract: URL parsing and layout as sops has them,
 * RSA-OAEP-256 encrypt (not wrapKey) with unpadded base64url, the version lookup, and error
 * classes, against the wire-protocol fake test/fakes/azure-kv-fake.ts (lowkey-vault cannot be installed here) over verified TLS (NODE_EXTRA_CA_CERTS).
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import type { TokenCredential } from "@azure/identity";
import { CryptographyClient, KeyClient } from "@azure/keyvault-keys";
import { azureKvKeyType, mapAzureError, parseAzureKeyUrl } from "../../../providers/keys/azure-kv.ts";
import { keysFromUserInput } from "../../../providers/keys/index.ts";
import { BootsealError } from "../../../src/errors.ts";
import { peer, uniqueName } from "../../helpers/peers.ts";

const STATIC_TOKEN: TokenCredential = {
  getToken: async () => ({ token: "fake-azure-kv-any-token", expiresOnTimestamp: Date.now() + 3_600_000 }),
};

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

describe("key URLs and layout (sops azkv/keysource.go)", () => {
  test("https://VAULT/keys/NAME[/VERSION]", () => {
    assert.deepEqual(parseAzureKeyUrl("https://v.vault.azure.net/keys/k1/abc123"), {
      vaultUrl: "https://v.vault.azure.net",
      name: "k1",
      version: "abc123",
    });
    assert.deepEqual(parseAzureKeyUrl(" https://v.vault.azure.net/keys/k1 "), {
      vaultUrl: "https://v.vault.azure.net",
      name: "k1",
      version: "",
    });
    assert.throws(() => parseAzureKeyUrl("http://v.vault.azure.net/keys/k1"), code("BAD_INPUT"));
    assert.throws(() => parseAzureKeyUrl("https://v.vault.azure.net/secrets/k1"), code("BAD_INPUT"));
  });

  test("id vault_url/keys/name/version; fields vault_url, name, version, created_at, enc", () => {
    const [key] = keysFromUserInput("azure_kv", "https://v.vault.azure.net/keys/k1/abc", {});
    assert.equal(key?.id, "https://v.vault.azure.net/keys/k1/abc");
    assert.deepEqual(
      [...(key?.toMetadata("ZW5j", new Date("2026-01-01T00:00:00Z")).fields ?? [])],
      [
        ["vault_url", "https://v.vault.azure.net"],
        ["name", "k1"],
        ["version", "abc"],
        ["created_at", "2026-01-01T00:00:00Z"],
        ["enc", "ZW5j"],
      ],
    );
  });

  test("enc must be unpadded base64url; HTTP statuses map to classes", async () => {
    const [key] = keysFromUserInput("azure_kv", "https://v.vault.azure.net/keys/k1/abc", {});
    await assert.rejects(key!.unwrap("abc+/def="), code("BAD_INPUT"));
    const id = "https://v.vault.azure.net/keys/k1/abc";
    assert.equal(mapAzureError({ statusCode: 403 }, id, "decrypt").code, "KEY_ACCESS_DENIED");
    assert.equal(mapAzureError({ statusCode: 404 }, id, "decrypt").code, "KEY_NOT_FOUND");
    assert.equal(mapAzureError({ statusCode: 400 }, id, "decrypt").code, "BAD_INPUT");
    assert.equal(mapAzureError({ statusCode: 503 }, id, "decrypt").code, "KEY_UNAVAILABLE");
    assert.equal(
      mapAzureError({ name: "RestError", code: "ECONNREFUSED" }, id, "decrypt").code,
      "KEY_UNAVAILABLE",
    );
    const none = { name: "AggregateAuthenticationError", errors: [{ name: "CredentialUnavailableError" }] };
    assert.equal(mapAzureError(none, id, "decrypt").code, "KEY_ACCESS_DENIED");
  });
});

describe("Azure Key Vault (fake: wire-protocol Azure Key Vault)", () => {
  let vaultUrl: string;
  let name: string;
  let version: string;
  let admin: KeyClient;
  const deps = () => ({
    env: {},
    azureKv: { credential: STATIC_TOKEN, disableChallengeResourceVerification: true },
  });
  before(async () => {
    vaultUrl = peer("AZURE_KV_URL").replace(/\/+$/, "");
    admin = new KeyClient(vaultUrl, STATIC_TOKEN, { disableChallengeResourceVerification: true });
    name = uniqueName("mk-contract");
    const key = await admin.createRsaKey(name, { keySize: 2048 });
    version = key.properties.version as string;
  });

  test("no version given: the current one is looked up and recorded", async () => {
    const [key] = keysFromUserInput("azure_kv", `${vaultUrl}/keys/${name}`, deps());
    const enc = await key!.wrap(new Uint8Array(32).fill(2));
    const entry = key!.toMetadata(enc, new Date());
    assert.equal(entry.fields.get("version"), version);
    assert.equal(key!.id, `${vaultUrl}/keys/${name}/${version}`);
    assert.deepEqual(
      await azureKvKeyType.fromMetadata(entry, deps()).unwrap(enc),
      new Uint8Array(32).fill(2),
    );
  });

  test("enc is unpadded base64url of an RSA-OAEP-256 encrypt that the vault's decrypt opens", async () => {
    const [key] = keysFromUserInput("azure_kv", `${vaultUrl}/keys/${name}/${version}`, deps());
    const secret = new Uint8Array(32).map((_, i) => 200 - i);
    const enc = await key!.wrap(secret);
    assert.match(enc, /^[A-Za-z0-9_-]+$/);
    assert.equal(Buffer.from(enc, "base64url").length, 256, "one RSA-2048 block");
    const crypto = new CryptographyClient(`${vaultUrl}/keys/${name}/${version}`, STATIC_TOKEN, {
      disableChallengeResourceVerification: true,
    });
    const out = await crypto.decrypt({
      algorithm: "RSA-OAEP-256",
      ciphertext: Buffer.from(enc, "base64url"),
    });
    assert.deepEqual(new Uint8Array(out.result), secret);
  });

  test("an unknown key is KEY_NOT_FOUND, naming it", async () => {
    const missing = `${vaultUrl}/keys/${uniqueName("mk-contract-missing")}`;
    const [key] = keysFromUserInput("azure_kv", missing, deps());
    await assert.rejects(key!.wrap(new Uint8Array(32)), (err) => {
      assert.ok(err instanceof BootsealError && err.code === "KEY_NOT_FOUND", String(err));
      assert.ok(err.message.includes(missing));
      return true;
    });
  });
});
