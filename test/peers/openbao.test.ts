/** Smoke test of OpenBao's transit engine over HTTP (the API sops and bootseal use). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { peer, uniqueName } from "../helpers/peers.ts";

interface BaoAnswer {
  status: number;
  body: { data?: Record<string, unknown>; errors?: string[] };
}

async function bao(method: string, path: string, body?: unknown): Promise<BaoAnswer> {
  const res = await fetch(`${peer("VAULT_ADDR")}/v1/${path}`, {
    method,
    headers: { "X-Vault-Token": peer("VAULT_TOKEN"), "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

test("openbao: transit encrypt and decrypt", async (t) => {
  const key = uniqueName("smoke");
  const other = uniqueName("smoke-other");
  for (const k of [key, other]) assert.equal((await bao("POST", `transit/keys/${k}`)).status, 200);

  const dataKey = new Uint8Array(32).map((_, i) => 255 - i);
  const plaintext = Buffer.from(dataKey).toString("base64");

  await t.test("round trip through the transit key", async () => {
    const enc = await bao("POST", `transit/encrypt/${key}`, { plaintext });
    assert.equal(enc.status, 200);
    const ciphertext = String(enc.body.data?.ciphertext);
    assert.match(ciphertext, /^vault:v1:[A-Za-z0-9+/=]+$/);
    const dec = await bao("POST", `transit/decrypt/${key}`, { ciphertext });
    assert.equal(dec.status, 200);
    assert.deepEqual(Buffer.from(String(dec.body.data?.plaintext), "base64"), Buffer.from(dataKey));
  });

  await t.test("another key, a tampered ciphertext and a wrong token are refused", async () => {
    const enc = await bao("POST", `transit/encrypt/${key}`, { plaintext });
    const ciphertext = String(enc.body.data?.ciphertext);
    const wrongKey = await bao("POST", `transit/decrypt/${other}`, { ciphertext });
    assert.equal(wrongKey.status, 400);
    assert.match(wrongKey.body.errors?.join(" ") ?? "", /cipher: message authentication failed/);
    const body = Buffer.from(ciphertext.slice("vault:v1:".length), "base64");
    body[body.length - 1] = (body[body.length - 1] ?? 0) ^ 1;
    const tampered = await bao("POST", `transit/decrypt/${key}`, {
      ciphertext: `vault:v1:${body.toString("base64")}`,
    });
    assert.equal(tampered.status, 400);
    const res = await fetch(`${peer("VAULT_ADDR")}/v1/transit/decrypt/${key}`, {
      method: "POST",
      headers: { "X-Vault-Token": "not-the-token" },
      body: JSON.stringify({ ciphertext }),
    });
    assert.equal(res.status, 403);
  });

  await t.test("the key made by scripts/peers.sh exists", async () => {
    const res = await bao("GET", "transit/keys/bootseal-smoke");
    assert.equal(res.status, 200);
    assert.equal(res.body.data?.type, "aes256-gcm96");
  });
});
