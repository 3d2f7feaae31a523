/**
 * The SigV4 signer's SHA-256 (providers/aws-sha256.ts) against node:crypto used directly, and
 * the AWS Signature Version 4 test suite's own example (the key derivation from AWS's
 * documentation: secret `wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY`, 20150830, us-east-1, iam).
 */
import assert from "node:assert/strict";
import { createHash, createHmac } from "node:crypto";
import { test } from "node:test";
import { NodeSha256 } from "../../providers/aws-sha256.ts";

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

async function hmac(secret: string | Uint8Array | ArrayBuffer, data: string): Promise<Uint8Array> {
  const h = new NodeSha256(secret);
  h.update(new TextEncoder().encode(data));
  return h.digest();
}

test("NodeSha256: hash and HMAC equal node:crypto's, for string, byte and ArrayBuffer keys, and after reset", async () => {
  const plain = new NodeSha256();
  plain.update(new TextEncoder().encode("abc"));
  assert.equal(hex(await plain.digest()), createHash("sha256").update("abc").digest("hex"));
  const key = new Uint8Array([0, 1, 2, 255, 128]);
  const want = createHmac("sha256", key).update("message").digest("hex");
  assert.equal(hex(await hmac(key, "message")), want);
  assert.equal(hex(await hmac(key.buffer.slice(0), "message")), want);
  assert.equal(hex(await hmac(new Uint8Array(0), "m")), createHmac("sha256", "").update("m").digest("hex"));
  assert.equal(
    hex(await hmac("ünïcode key", "m")),
    createHmac("sha256", "ünïcode key").update("m").digest("hex"),
  );
  const h = new NodeSha256(key);
  h.update(new TextEncoder().encode("other"));
  h.reset();
  h.update(new TextEncoder().encode("message"));
  assert.equal(hex(await h.digest()), want, "reset starts over with the same key");
});

test("NodeSha256: the SigV4 signing key of AWS's documented example", async () => {
  let key: Uint8Array = await hmac("AWS4wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830");
  for (const part of ["us-east-1", "iam", "aws4_request"]) key = await hmac(key, part);
  assert.equal(hex(key), "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
});
