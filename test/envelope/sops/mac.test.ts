import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import {
  createMacHasher,
  encryptMac,
  MAC_ONLY_ENCRYPTED_PREFIX,
  macAad,
  verifyMac,
} from "../../../src/envelope/sops/mac.ts";
import { decryptValue } from "../../../src/envelope/sops/value-cipher.ts";

const utf8 = new TextEncoder();
const key = randomBytes(32);
const sha512Hex = (...parts: string[]): string => {
  const h = createHash("sha512");
  for (const p of parts) h.update(p);
  return h.digest("hex").toUpperCase();
};

describe("MAC hashing", () => {
  test("docs/sops-format.md section 5.1 worked example: one leaf `bar`", () => {
    const h = createMacHasher(false);
    h.add(utf8.encode("bar"), true);
    const mac = h.digestHex();
    assert.match(mac, /^D82C4EB5[0-9A-F]{114}E6C181$/);
    assert.equal(mac, sha512Hex("bar"));
  });

  test("concatenation without separators, unencrypted leaves included", () => {
    const h = createMacHasher(false);
    for (const [v, enc] of [
      ["a", true],
      ["bc", false],
      ["", true],
    ] as const)
      h.add(utf8.encode(v), enc);
    assert.equal(h.digestHex(), sha512Hex("abc"));
  });

  test("mac_only_encrypted: SHA-256('sops') prefix, encrypted leaves only", () => {
    assert.equal(Buffer.from(MAC_ONLY_ENCRYPTED_PREFIX).toString("hex").slice(0, 8), "8a3fd2ad");
    assert.equal(Buffer.from(MAC_ONLY_ENCRYPTED_PREFIX).toString("hex").slice(-6), "f27d69");
    const h = createMacHasher(true);
    h.add(utf8.encode("a"), true);
    h.add(utf8.encode("b"), false);
    const want = createHash("sha512")
      .update(MAC_ONLY_ENCRYPTED_PREFIX)
      .update("a")
      .digest("hex")
      .toUpperCase();
    assert.equal(h.digestHex(), want);
    assert.notEqual(createMacHasher(true).digestHex(), createMacHasher(false).digestHex());
  });
});

describe("MAC AAD: lastmodified re-formatted", () => {
  test("fraction dropped, +00:00 becomes Z, other offsets kept", () => {
    assert.equal(macAad("2024-01-01T10:00:00Z"), "2024-01-01T10:00:00Z");
    assert.equal(macAad("2024-01-01T10:00:00.5Z"), "2024-01-01T10:00:00Z");
    assert.equal(macAad("2024-01-01T10:00:00+00:00"), "2024-01-01T10:00:00Z");
    assert.equal(macAad("2024-01-01T10:00:00.999+02:00"), "2024-01-01T10:00:00+02:00");
  });

  test("unparseable lastmodified is BAD_INPUT", () => {
    for (const bad of ["", "2024-01-01", "yesterday", "2024-13-01T00:00:00Z"]) {
      assert.throws(() => macAad(bad), { code: "BAD_INPUT" }, bad);
    }
  });
});

describe("stored MAC", () => {
  const mac = sha512Hex("payload");
  const lm = "2025-08-06T18:55:05Z";

  test("encrypted as a str value under the lastmodified AAD", () => {
    const stored = encryptMac(mac, key, "2025-08-06T18:55:05.25Z");
    const out = decryptValue(stored, key, lm);
    assert.equal(out.type, "str");
    assert.equal(new TextDecoder().decode(out.bytes), mac);
  });

  test("verifies; equivalent lastmodified spellings verify too", () => {
    const stored = encryptMac(mac, key, lm);
    verifyMac(mac, stored, key, lm);
    verifyMac(mac, stored, key, "2025-08-06T18:55:05.7+00:00");
  });

  test("failure modes: NO_MAC, undecryptable, altered lastmodified, mismatch", () => {
    const stored = encryptMac(mac, key, lm);
    assert.throws(() => verifyMac(mac, "", key, lm), { code: "NO_MAC" });
    assert.throws(() => verifyMac(mac, stored, randomBytes(32), lm), { code: "MAC_MISMATCH" });
    assert.throws(() => verifyMac(mac, stored, key, "2025-08-06T18:55:06Z"), { code: "MAC_MISMATCH" });
    assert.throws(() => verifyMac(sha512Hex("other"), stored, key, lm), { code: "MAC_MISMATCH" });
    assert.throws(() => verifyMac(mac.toLowerCase(), stored, key, lm), { code: "MAC_MISMATCH" });
    assert.throws(() => verifyMac(mac, "garbage", key, lm), { code: "MAC_MISMATCH" });
  });

  test("a MAC stored with another type is not accepted", () => {
    const asInt = encryptMac(mac, key, lm).replace("type:str]", "type:int]");
    assert.throws(() => verifyMac(mac, asInt, key, lm), { code: "MAC_MISMATCH" });
  });
});
