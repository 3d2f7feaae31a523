/**
 * Vault / OpenBao transit master keys beyond the contract: sops's URI parsing and identity,
 * the token sources, the allowlist, and error classes against OpenBao.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { keysFromUserInput } from "../../../providers/keys/index.ts";
import { parseVaultKeyUri, vaultTransitKeyType } from "../../../providers/keys/vault-transit.ts";
import type { KeyEntry } from "../../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../../src/errors.ts";
import { peer, uniqueName } from "../../helpers/peers.ts";

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

describe("key URIs as sops parses them (hcvault NewMasterKeyFromURI)", () => {
  test("address, engine path (with /) and key name", () => {
    assert.deepEqual(parseVaultKeyUri("https://vault.example.com:8200/v1/transit/keys/app"), {
      address: "https://vault.example.com:8200",
      enginePath: "transit",
      keyName: "app",
    });
    assert.deepEqual(parseVaultKeyUri("http://127.0.0.1:8200/v1/team/a/transit/keys/k1"), {
      address: "http://127.0.0.1:8200",
      enginePath: "team/a/transit",
      keyName: "k1",
    });
  });

  test("prefixed paths, short paths, missing schemes and credentials are refused", () => {
    assert.throws(() => parseVaultKeyUri("https://h:8200/proxy/v1/transit/keys/k"), code("BAD_INPUT"));
    assert.throws(() => parseVaultKeyUri("https://h:8200/v1/transit/k"), code("BAD_INPUT"));
    assert.throws(() => parseVaultKeyUri("vault.example.com/v1/transit/keys/k"), code("BAD_INPUT"));
    assert.throws(() => parseVaultKeyUri("https://u:p@h/v1/transit/keys/k"), code("BAD_INPUT"));
  });

  test("id and metadata fields in sops's layout", () => {
    const [key] = keysFromUserInput(
      "hc_vault",
      "https://h:8200/v1/transit/keys/k,https://h:8200/v1/t2/keys/j",
      {},
    );
    assert.equal(key?.id, "https://h:8200/v1/transit/keys/k");
    const entry = key?.toMetadata("vault:v1:abc", new Date("2026-01-01T00:00:00Z"));
    assert.deepEqual(
      [...(entry?.fields ?? [])],
      [
        ["vault_address", "https://h:8200"],
        ["engine_path", "transit"],
        ["key_name", "k"],
        ["created_at", "2026-01-01T00:00:00Z"],
        ["enc", "vault:v1:abc"],
      ],
    );
    assert.throws(
      () =>
        vaultTransitKeyType.fromMetadata(
          { kind: "hc_vault", enc: "", fields: new Map([["key_name", "k"]]) },
          {},
        ),
      code("BAD_INPUT"),
    );
  });
});

describe("transit on OpenBao", () => {
  let addr: string;
  let token: string;
  let name: string;
  const home = mkdtempSync(join(tmpdir(), "bootseal-vault-"));
  after(() => rmSync(home, { recursive: true, force: true }));
  before(async () => {
    addr = peer("VAULT_ADDR");
    token = peer("VAULT_TOKEN");
    name = uniqueName("mk-contract");
    const res = await fetch(`${addr}/v1/transit/keys/${name}`, {
      method: "POST",
      headers: { "X-Vault-Token": token },
    });
    assert.ok(res.ok);
  });
  const uri = () => `${addr}/v1/transit/keys/${name}`;

  test("enc is Vault's vault:v1: string verbatim and round trips", async () => {
    const [key] = keysFromUserInput("hc_vault", uri(), { env: { VAULT_TOKEN: token } });
    const secret = new Uint8Array(33).map((_, i) => 255 - i);
    const enc = await key!.wrap(secret);
    assert.match(enc, /^vault:v1:[A-Za-z0-9+/=]+$/);
    // Cross-check with the raw API: the plaintext Vault holds is the raw bytes, base64.
    const res = await fetch(`${addr}/v1/transit/decrypt/${name}`, {
      method: "POST",
      headers: { "X-Vault-Token": token },
      body: JSON.stringify({ ciphertext: enc }),
    });
    const body = (await res.json()) as { data: { plaintext: string } };
    assert.deepEqual(new Uint8Array(Buffer.from(body.data.plaintext, "base64")), secret);
  });

  test("token from ~/.vault-token when VAULT_TOKEN is unset; none at all: unwrap null, wrap refused", async () => {
    writeFileSync(join(home, ".vault-token"), `${token}\n`);
    const [fromFile] = keysFromUserInput("hc_vault", uri(), { env: { HOME: home } });
    const enc = await fromFile!.wrap(new Uint8Array(32).fill(4));
    assert.deepEqual(await fromFile!.unwrap(enc), new Uint8Array(32).fill(4));
    const empty = mkdtempSync(join(tmpdir(), "bootseal-vault-empty-"));
    const [none] = keysFromUserInput("hc_vault", uri(), { env: { HOME: empty } });
    assert.equal(await none!.unwrap(enc), null);
    await assert.rejects(none!.wrap(new Uint8Array(32)), code("KEY_ACCESS_DENIED"));
    rmSync(empty, { recursive: true, force: true });
  });

  test("a wrong token is KEY_ACCESS_DENIED, naming the key", async () => {
    const [key] = keysFromUserInput("hc_vault", uri(), { env: { VAULT_TOKEN: "not-a-token" } });
    await assert.rejects(key!.wrap(new Uint8Array(32)), (err) => {
      assert.ok(err instanceof BootsealError && err.code === "KEY_ACCESS_DENIED", String(err));
      assert.ok(err.message.includes(uri()));
      assert.ok(!err.message.includes("not-a-token"), "the token is not echoed");
      return true;
    });
  });

  test("decrypting with a key that does not exist is KEY_NOT_FOUND; an unmounted engine too", async () => {
    const [key] = keysFromUserInput("hc_vault", uri(), { env: { VAULT_TOKEN: token } });
    const enc = await key!.wrap(new Uint8Array(32));
    const missing: KeyEntry = key!.toMetadata(enc, new Date());
    const fields = new Map(missing.fields);
    fields.set("key_name", uniqueName("mk-contract-missing"));
    const ghost = vaultTransitKeyType.fromMetadata({ ...missing, fields }, { env: { VAULT_TOKEN: token } });
    await assert.rejects(ghost.unwrap(enc), code("KEY_NOT_FOUND"));
    const [unmounted] = keysFromUserInput("hc_vault", `${addr}/v1/no-such-engine/keys/${name}`, {
      env: { VAULT_TOKEN: token },
    });
    await assert.rejects(unmounted!.wrap(new Uint8Array(32)), code("KEY_NOT_FOUND"));
  });

  test("SOPS_HC_VAULT_ALLOWLIST: a listed prefix passes, an unlisted address is refused before any request", async () => {
    const allowed = keysFromUserInput("hc_vault", uri(), {
      env: { VAULT_TOKEN: token, SOPS_HC_VAULT_ALLOWLIST: addr },
    });
    assert.match(await allowed[0]!.wrap(new Uint8Array(32)), /^vault:v1:/);
    const refused = keysFromUserInput("hc_vault", uri(), {
      env: { VAULT_TOKEN: token, SOPS_HC_VAULT_ALLOWLIST: "https://vault.example.com" },
    });
    await assert.rejects(refused[0]!.wrap(new Uint8Array(32)), code("KEY_ACCESS_DENIED"));
  });
});
