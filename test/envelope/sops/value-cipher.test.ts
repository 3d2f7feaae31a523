import assert from "node:assert/strict";
import { createDecipheriv, randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import fc from "fast-check";
import { decryptValue, encryptValue, isEncryptedValue } from "../../../src/envelope/sops/value-cipher.ts";

const utf8 = new TextEncoder();
const key = randomBytes(32);
const FORMAT =
  /^ENC\[AES256_GCM,data:([A-Za-z0-9+/=]+),iv:([A-Za-z0-9+/=]+),tag:([A-Za-z0-9+/=]+),type:(\w+)\]$/;

describe("encryptValue", () => {
  test("writes sops's layout: padded standard base64, 32-byte IV, 16-byte tag, same-length data", () => {
    const out = encryptValue(utf8.encode("hello world"), "str", key, "a:b:");
    const m = FORMAT.exec(out);
    assert.ok(m, out);
    assert.equal(Buffer.from(m[1]!, "base64").length, 11);
    assert.equal(Buffer.from(m[2]!, "base64").length, 32);
    assert.equal(Buffer.from(m[3]!, "base64").length, 16);
    assert.equal(m[4], "str");
    assert.ok(isEncryptedValue(out));
  });

  test("is plain AES-256-GCM with the path as AAD (checked with a separate decipher)", () => {
    const iv = randomBytes(32);
    const out = encryptValue(utf8.encode("42"), "int", key, "n:", iv);
    const m = FORMAT.exec(out)!;
    const d = createDecipheriv("aes-256-gcm", key, iv);
    d.setAAD(utf8.encode("n:"));
    d.setAuthTag(Buffer.from(m[3]!, "base64"));
    const plain = Buffer.concat([d.update(Buffer.from(m[1]!, "base64")), d.final()]);
    assert.equal(plain.toString(), "42");
  });

  test("fresh IV every time", () => {
    const a = encryptValue(utf8.encode("x"), "str", key, ":");
    const b = encryptValue(utf8.encode("x"), "str", key, ":");
    assert.notEqual(a, b);
  });

  test("refuses a key that is not 32 bytes", () => {
    assert.throws(() => encryptValue(utf8.encode("x"), "str", randomBytes(16), ":"), { code: "INTERNAL" });
  });
});

describe("decryptValue", () => {
  test("property: round trip of any non-empty bytes, type and path", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), fc.string(), (bytes, aad) => {
        const out = decryptValue(encryptValue(bytes, "str", key, aad), key, aad);
        assert.equal(out.type, "str");
        assert.deepEqual(out.bytes, bytes);
      }),
    );
  });

  test("ignores text after the closing bracket, as sops's parser does", () => {
    const v = encryptValue(utf8.encode("x"), "bool", key, "k:");
    assert.deepEqual(decryptValue(`${v} trailing`, key, "k:").bytes, utf8.encode("x"));
  });

  test("accepts any non-empty IV length (sops builds GCM with the IV's own length)", () => {
    const v = encryptValue(utf8.encode("twelve"), "str", key, "k:", randomBytes(12));
    assert.deepEqual(decryptValue(v, key, "k:").bytes, utf8.encode("twelve"));
  });

  test("wrong AAD, wrong key, or tampering: MAC_MISMATCH, no plaintext", () => {
    const v = encryptValue(utf8.encode("secret"), "str", key, "a:");
    assert.throws(() => decryptValue(v, key, "b:"), { code: "MAC_MISMATCH" });
    assert.throws(() => decryptValue(v, randomBytes(32), "a:"), { code: "MAC_MISMATCH" });
    const m = FORMAT.exec(v)!;
    const tag = Buffer.from(m[3]!, "base64");
    tag[15]! ^= 1;
    assert.throws(() => decryptValue(v.replace(m[3]!, tag.toString("base64")), key, "a:"), {
      code: "MAC_MISMATCH",
    });
    const data = Buffer.from(m[1]!, "base64");
    data[0]! ^= 0x80;
    assert.throws(() => decryptValue(v.replace(m[1]!, data.toString("base64")), key, "a:"), {
      code: "MAC_MISMATCH",
    });
  });

  test("a truncated tag is refused even though GCM could check a short one", () => {
    const v = encryptValue(utf8.encode("secret"), "str", key, "a:");
    const m = FORMAT.exec(v)!;
    const short = Buffer.from(m[3]!, "base64").subarray(0, 12).toString("base64");
    assert.throws(() => decryptValue(v.replace(m[3]!, short), key, "a:"), { code: "MAC_MISMATCH" });
  });

  test("malformed values are BAD_INPUT", () => {
    const v = encryptValue(utf8.encode("secret"), "str", key, "a:");
    const m = FORMAT.exec(v)!;
    const bad = [
      "plain",
      "",
      "ENC[AES256_GCM,data:,iv:AAAA,tag:AAAA,type:str]",
      v.replace("AES256_GCM", "AES128_GCM"),
      ` ${v}`,
      v.replace(m[2]!, m[2]!.replace(/=+$/, "")), // unpadded base64
      v.replace(m[2]!, m[2]!.replace(/[+/]/g, "-")), // URL-safe alphabet
      v.replace(m[1]!, `${m[1]!.slice(0, -1)}!`),
      v.replace(/\]$/, ""),
    ];
    for (const b of bad) {
      if (b === v) continue; // e.g. an IV without + or / has nothing to make URL-safe
      assert.throws(() => decryptValue(b, key, "a:"), { code: "BAD_INPUT" }, b);
    }
    assert.equal(isEncryptedValue("plain"), false);
  });

  test("an IV made only of padding is refused", () => {
    const v = encryptValue(utf8.encode("x"), "str", key, "a:");
    const m = FORMAT.exec(v)!;
    assert.throws(() => decryptValue(v.replace(`iv:${m[2]}`, "iv:===="), key, "a:"), { code: "BAD_INPUT" });
  });
});
