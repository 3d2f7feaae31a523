import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createCipheriv, createDecipheriv, randomBytes, webcrypto } from "node:crypto";
import { describe, it } from "node:test";
import fc from "fast-check";
import { KEY_KINDS, type KeyKind } from "../../../providers/keys/index.ts";
import { decryptConfig, encryptConfig } from "../../../src/envelope/encrypted-config/encrypted-config.ts";
import type { MasterKey } from "../../../src/envelope/sops/master-key.ts";
import { isBootsealError } from "../../../src/errors.ts";

// ---- Known-answer vector 1 (docs/envelope-format.md, "Known-answer vectors") ----
const KAT_DATA_KEY = Uint8Array.from({ length: 32 }, (_, i) => i);
const KAT_SALT = Uint8Array.from({ length: 32 }, (_, i) => 0xa0 + i);
const KAT_IV = Uint8Array.from({ length: 12 }, (_, i) => 0xf0 + i);
const KAT_PLAINTEXT = "#cloud-config\nruncmd: [kubeadm join]\n";
const KAT_KEY_ID =
  "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab|bootseal-machine:default/worker-0";
const KAT_ENC = Buffer.alloc(48, 0xc3).toString("base64");
const KAT_URI =
  "kms://w8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PDw8PD@arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab%7Cbootseal-machine:default/worker-0";
/** PBKDF2-HMAC-SHA512(data key, salt, 50000, 32), from `openssl kdf` (see the docs). */
const KAT_DERIVED_HEX = "01f00269f2b5a0bb3f4e4420ede66ebe9be624b43af3cd0fd08c2c2e5aceaad2";
const KAT_CT_MACHINE = "yDa8HLc11/E8UV61mnDp5Sylzrbb7NFyqskW3O4Wca39Z2/Zm9KG8SXQmBgQeOOJuPBEx1I=";
const KAT_CT_NONE = "yDa8HLc11/E8UV61mnDp5Sylzrbb7NFyqskW3O4Wca39Z2/Zm9cCKsuVyoe/HvRL8wQuM8Q=";

function katDocument(ciphertext: string): string {
  return `{
  "apiVersion": "bootseal.dev/v1alpha1",
  "kind": "EncryptedConfig",
  "provider": "aws",
  "passphraseURI": "${KAT_URI}",
  "keyDerivationAlgorithm": "pbkdf2",
  "digestAlgorithm": "sha-512",
  "iterations": 50000,
  "salt": "oKGio6SlpqeoqaqrrK2ur7CxsrO0tba3uLm6u7y9vr8=",
  "cipherAlgorithm": "aes-256-gcm",
  "iv": "8PHy8/T19vf4+fr7",
  "ciphertext": "${ciphertext}"
}
`;
}

/** The additional data written out by hand from the spec, not by the implementation. */
function katAad(machineId: string): string {
  return (
    "bootseal EncryptedConfig v1\n" +
    "apiVersion=bootseal.dev/v1alpha1\n" +
    "kind=EncryptedConfig\n" +
    "provider=aws\n" +
    `passphraseURI=${KAT_URI}\n` +
    "keyDerivationAlgorithm=pbkdf2\n" +
    "digestAlgorithm=sha-512\n" +
    "iterations=50000\n" +
    "salt=oKGio6SlpqeoqaqrrK2ur7CxsrO0tba3uLm6u7y9vr8=\n" +
    "cipherAlgorithm=aes-256-gcm\n" +
    "iv=8PHy8/T19vf4+fr7\n" +
    `machineId=${machineId}\n`
  );
}

/** Test double: returns fixed bytes as enc and the KAT data key on unwrap, whatever enc is. */
function fixedKey(id = KAT_KEY_ID): MasterKey {
  return {
    kind: "kms",
    id,
    wrap: async () => KAT_ENC,
    unwrap: async () => Uint8Array.from(KAT_DATA_KEY),
    toMetadata: () => {
      throw new Error("not used");
    },
  };
}

/**
 * Test double for a real master key: AES key wrap (RFC 3394) under a random KEK, with
 * `enc` in the sops text form of the chosen kind, so every passphraseURI scheme is used.
 */
function aesKwKey(kind: KeyKind, id: string): MasterKey {
  const kek = randomBytes(32);
  const iv = Buffer.from("a6a6a6a6a6a6a6a6", "hex");
  const toEnc = (b: Buffer): string =>
    kind === "kms" || kind === "gcp_kms"
      ? b.toString("base64")
      : kind === "azure_kv"
        ? b.toString("base64url")
        : `-----BEGIN TEST-----\n${b.toString("base64")}\n-----END TEST-----\n`;
  const fromEnc = (enc: string): Buffer =>
    kind === "kms" || kind === "gcp_kms"
      ? Buffer.from(enc, "base64")
      : kind === "azure_kv"
        ? Buffer.from(enc, "base64url")
        : Buffer.from(enc.split("\n")[1] ?? "", "base64");
  return {
    kind,
    id,
    wrap: async (secret) => {
      const c = createCipheriv("id-aes256-wrap", kek, iv);
      return toEnc(Buffer.concat([c.update(secret), c.final()]));
    },
    unwrap: async (enc) => {
      const d = createDecipheriv("id-aes256-wrap", kek, iv);
      return new Uint8Array(Buffer.concat([d.update(fromEnc(enc)), d.final()]));
    },
    toMetadata: () => {
      throw new Error("not used");
    },
  };
}

const resolveTo =
  (key: MasterKey) =>
  (kind: string, keyId: string): MasterKey | null =>
    kind === key.kind && keyId === key.id ? key : null;

async function rejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isBootsealError(err), `expected a BootsealError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    return true;
  });
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

describe("EncryptedConfig known-answer vectors", () => {
  it("encryptConfig produces the documented documents exactly", async () => {
    const opts = { kinds: KEY_KINDS, key: fixedKey(), dataKey: KAT_DATA_KEY, salt: KAT_SALT, iv: KAT_IV };
    const bound = await encryptConfig(utf8(KAT_PLAINTEXT), { ...opts, machineId: "default/worker-0" });
    assert.equal(bound, katDocument(KAT_CT_MACHINE));
    assert.equal(await encryptConfig(utf8(KAT_PLAINTEXT), opts), katDocument(KAT_CT_NONE));
    // The caller's data key is theirs: it is copied, not zeroed.
    assert.deepEqual(
      KAT_DATA_KEY,
      Uint8Array.from({ length: 32 }, (_, i) => i),
    );
  });

  it("the vectors hold under a second computation path (WebCrypto PBKDF2 + AES-GCM)", async () => {
    const base = await webcrypto.subtle.importKey("raw", KAT_DATA_KEY, "PBKDF2", false, ["deriveBits"]);
    const bits = await webcrypto.subtle.deriveBits(
      { name: "PBKDF2", hash: "SHA-512", salt: KAT_SALT, iterations: 50_000 },
      base,
      256,
    );
    assert.equal(Buffer.from(bits).toString("hex"), KAT_DERIVED_HEX);
    const aesKey = await webcrypto.subtle.importKey("raw", bits, "AES-GCM", false, ["encrypt"]);
    for (const [machineId, expected] of [
      ["default/worker-0", KAT_CT_MACHINE],
      ["", KAT_CT_NONE],
    ] as const) {
      const sealed = await webcrypto.subtle.encrypt(
        { name: "AES-GCM", iv: KAT_IV, additionalData: utf8(katAad(machineId)), tagLength: 128 },
        aesKey,
        utf8(KAT_PLAINTEXT),
      );
      assert.equal(Buffer.from(sealed).toString("base64"), expected);
    }
  });

  it("the derived key matches the openssl CLI when it is installed", (t) => {
    let out: string;
    try {
      out = execFileSync("openssl", [
        "kdf",
        "-keylen",
        "32",
        "-kdfopt",
        "digest:SHA512",
        "-kdfopt",
        `hexpass:${Buffer.from(KAT_DATA_KEY).toString("hex")}`,
        "-kdfopt",
        `hexsalt:${Buffer.from(KAT_SALT).toString("hex")}`,
        "-kdfopt",
        "iter:50000",
        "PBKDF2",
      ]).toString();
    } catch {
      t.skip("openssl 3 with `kdf` not available");
      return;
    }
    assert.equal(out.trim().replaceAll(":", "").toLowerCase(), KAT_DERIVED_HEX);
  });

  it("decryptConfig opens both vectors", async () => {
    const resolve = resolveTo(fixedKey());
    const bound = await decryptConfig(katDocument(KAT_CT_MACHINE), {
      kinds: KEY_KINDS,
      resolve,
      machineId: "default/worker-0",
    });
    assert.equal(new TextDecoder().decode(bound), KAT_PLAINTEXT);
    const unbound = await decryptConfig(utf8(katDocument(KAT_CT_NONE)), { kinds: KEY_KINDS, resolve });
    assert.equal(new TextDecoder().decode(unbound), KAT_PLAINTEXT);
  });
});

describe("EncryptedConfig round trip", () => {
  // Every kind with a passphraseURI (a tpm key seals to one machine and has none).
  const ids: Record<Exclude<KeyKind, "tpm">, string> = {
    age: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p",
    pgp: "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4",
    kms: "arn:aws:kms:us-east-1:111122223333:key/k+arn:aws:iam::111122223333:role/r|bootseal-machine:ns/m",
    gcp_kms: "projects/p/locations/global/keyRings/r/cryptoKeys/k",
    hckms: "tr-west-1:0f4d1c5e-8a6b-4c2d-9e3f-1a2b3c4d5e6f",
    azure_kv: "https://v.vault.azure.net/keys/k/0123456789abcdef",
    hc_vault: "https://vault.example.com:8200/v1/transit/keys/bootseal",
  };
  for (const [kind, id] of Object.entries(ids) as [Exclude<KeyKind, "tpm">, string][]) {
    it(`wraps and unwraps through a ${kind} passphraseURI`, async () => {
      const key = aesKwKey(kind, id);
      const plaintext = randomBytes(300);
      const doc = await encryptConfig(plaintext, {
        kinds: KEY_KINDS,
        key,
        machineId: "ns/m",
        iterations: 10_000,
      });
      const parsed = JSON.parse(doc) as Record<string, unknown>;
      assert.match(String(parsed.passphraseURI), /^[a-z]+:\/\/[A-Za-z0-9_-]+@/);
      const back = await decryptConfig(doc, { kinds: KEY_KINDS, resolve: resolveTo(key), machineId: "ns/m" });
      assert.deepEqual(Buffer.from(back), plaintext);
    });
  }

  it("uses the caller's wrapped key (GenerateDataKey) without calling wrap", async () => {
    const key = { ...fixedKey(), wrap: async () => assert.fail("wrap must not be called") };
    const doc = await encryptConfig(utf8("x"), {
      kinds: KEY_KINDS,
      key,
      dataKey: KAT_DATA_KEY,
      enc: KAT_ENC,
      iterations: 10_000,
    });
    assert.ok(doc.includes(KAT_URI));
    assert.equal(
      new TextDecoder().decode(await decryptConfig(doc, { kinds: KEY_KINDS, resolve: resolveTo(key) })),
      "x",
    );
  });

  it("random salt and IV differ between two encryptions of the same input", async () => {
    const key = aesKwKey("kms", "arn:aws:kms:us-east-1:1:key/a");
    const a = JSON.parse(
      await encryptConfig(utf8("same"), { kinds: KEY_KINDS, key, iterations: 10_000 }),
    ) as Record<string, string>;
    const b = JSON.parse(
      await encryptConfig(utf8("same"), { kinds: KEY_KINDS, key, iterations: 10_000 }),
    ) as Record<string, string>;
    assert.notEqual(a.salt, b.salt);
    assert.notEqual(a.iv, b.iv);
    assert.notEqual(a.ciphertext, b.ciphertext);
  });

  it("refuses a data key of the wrong length and enc without a data key", async () => {
    await rejectsWith(
      encryptConfig(utf8("x"), { kinds: KEY_KINDS, key: fixedKey(), dataKey: new Uint8Array(16) }),
      "BAD_INPUT",
    );
    await rejectsWith(encryptConfig(utf8("x"), { kinds: KEY_KINDS, key: fixedKey(), enc: KAT_ENC }), "USAGE");
    await rejectsWith(
      encryptConfig(utf8("x"), { kinds: KEY_KINDS, key: fixedKey(), salt: new Uint8Array(16) }),
      "BAD_INPUT",
    );
    await rejectsWith(
      encryptConfig(utf8("x"), { kinds: KEY_KINDS, key: fixedKey(), machineId: "Bad/Name" }),
      "BAD_INPUT",
    );
  });

  it("NO_KEY_AVAILABLE when the key is not configured or cannot unwrap", async () => {
    const doc = katDocument(KAT_CT_NONE);
    await rejectsWith(decryptConfig(doc, { kinds: KEY_KINDS, resolve: () => null }), "NO_KEY_AVAILABLE");
    const noCred = { ...fixedKey(), unwrap: async () => null };
    await rejectsWith(decryptConfig(doc, { kinds: KEY_KINDS, resolve: () => noCred }), "NO_KEY_AVAILABLE");
  });
});

/** Replace one JSON field of the KAT document (keeps the layout valid). */
function withField(doc: string, name: string, value: string | number): string {
  const obj = JSON.parse(doc) as Record<string, unknown>;
  obj[name] = value;
  return JSON.stringify(obj);
}

describe("EncryptedConfig tamper detection", () => {
  // The resolver hands out the key for any id and the double unwraps any enc to the right
  // data key, so only the GCM tag stands between a tampered header and plaintext.
  const resolve = (): MasterKey => fixedKey();
  const machineId = "default/worker-0";
  const doc = katDocument(KAT_CT_MACHINE);
  const tampered: [string, string | number][] = [
    ["provider", "gcp"],
    ["passphraseURI", KAT_URI.replace("worker-0", "worker-1")],
    ["passphraseURI", KAT_URI.replace("kms://w8PD", "kms://w8PE")],
    ["iterations", 50_001],
    ["salt", Buffer.alloc(32, 1).toString("base64")],
    ["iv", Buffer.alloc(12, 1).toString("base64")],
  ];
  for (const [name, value] of tampered) {
    it(`altered ${name} (${String(value).slice(-12)}) -> MAC_MISMATCH`, async () => {
      await rejectsWith(
        decryptConfig(withField(doc, name, value), { kinds: KEY_KINDS, resolve, machineId }),
        "MAC_MISMATCH",
      );
    });
  }

  it("a wrong, missing or unexpected machine id -> MAC_MISMATCH", async () => {
    await rejectsWith(
      decryptConfig(doc, { kinds: KEY_KINDS, resolve, machineId: "default/worker-1" }),
      "MAC_MISMATCH",
    );
    await rejectsWith(
      decryptConfig(doc, { kinds: KEY_KINDS, resolve, machineId: "other/worker-0" }),
      "MAC_MISMATCH",
    );
    await rejectsWith(decryptConfig(doc, { kinds: KEY_KINDS, resolve }), "MAC_MISMATCH");
    await rejectsWith(
      decryptConfig(katDocument(KAT_CT_NONE), { kinds: KEY_KINDS, resolve, machineId }),
      "MAC_MISMATCH",
    );
  });

  it("fixed-value fields cannot be changed at all (BAD_INPUT before any key is used)", async () => {
    const unused = (): MasterKey => assert.fail("no key may be resolved for a malformed document");
    for (const name of [
      "apiVersion",
      "kind",
      "cipherAlgorithm",
      "digestAlgorithm",
      "keyDerivationAlgorithm",
    ]) {
      await rejectsWith(
        decryptConfig(withField(doc, name, "other"), { kinds: KEY_KINDS, resolve: unused }),
        "BAD_INPUT",
      );
    }
  });
});

describe("EncryptedConfig strict parsing", () => {
  const resolve = (): MasterKey => assert.fail("no key may be resolved for a malformed document");
  const doc = katDocument(KAT_CT_NONE);
  const dropField = (name: string): string => {
    const obj = JSON.parse(doc) as Record<string, unknown>;
    delete obj[name];
    return JSON.stringify(obj);
  };

  it("iterations below 10,000 or above 10,000,000 are refused on encrypt and decrypt", async () => {
    await rejectsWith(
      encryptConfig(utf8("x"), { kinds: KEY_KINDS, key: fixedKey(), iterations: 9_999 }),
      "BAD_INPUT",
    );
    await rejectsWith(
      encryptConfig(utf8("x"), { kinds: KEY_KINDS, key: fixedKey(), iterations: 10_000_001 }),
      "BAD_INPUT",
    );
    await rejectsWith(
      encryptConfig(utf8("x"), { kinds: KEY_KINDS, key: fixedKey(), iterations: 10_000.5 }),
      "BAD_INPUT",
    );
    await rejectsWith(
      decryptConfig(withField(doc, "iterations", 9_999), { kinds: KEY_KINDS, resolve }),
      "BAD_INPUT",
    );
    await rejectsWith(
      decryptConfig(withField(doc, "iterations", 10_000_001), { kinds: KEY_KINDS, resolve }),
      "BAD_INPUT",
    );
    await rejectsWith(
      decryptConfig(withField(doc, "iterations", "50000"), { kinds: KEY_KINDS, resolve }),
      "BAD_INPUT",
    );
  });

  const cases: [string, string | Uint8Array][] = [
    ["not JSON", "{"],
    ["not an object", "[]"],
    ["not UTF-8", Uint8Array.of(0x7b, 0xff, 0x7d)],
    ["unknown field", withField(doc, "extra", "x")],
    ["bad base64 salt", withField(doc, "salt", "!!!!")],
    ["non-canonical base64", withField(doc, "salt", "oKGio6SlpqeoqaqrrK2ur7CxsrO0tba3uLm6u7y9vr9=")],
    ["short salt", withField(doc, "salt", Buffer.alloc(16).toString("base64"))],
    ["long iv", withField(doc, "iv", Buffer.alloc(16).toString("base64"))],
    ["ciphertext shorter than a tag", withField(doc, "ciphertext", Buffer.alloc(15).toString("base64"))],
    ["unknown scheme", withField(doc, "passphraseURI", KAT_URI.replace("kms://", "foo://"))],
    ["URI without key id", withField(doc, "passphraseURI", "kms://w8PD@")],
    ["non-canonical key id", withField(doc, "passphraseURI", KAT_URI.replace("arn:", "%61rn:"))],
    ["bad provider", withField(doc, "provider", "AWS KMS")],
    ["string iterations", withField(doc, "iterations", "50000")],
  ];
  for (const name of ["provider", "passphraseURI", "salt", "iv", "ciphertext", "iterations", "kind"]) {
    cases.push([`missing ${name}`, dropField(name)]);
  }
  for (const [label, input] of cases) {
    it(`${label} -> BAD_INPUT`, async () => {
      await rejectsWith(decryptConfig(input, { kinds: KEY_KINDS, resolve }), "BAD_INPUT");
    });
  }
});

describe("EncryptedConfig properties", () => {
  const key = aesKwKey("kms", "arn:aws:kms:us-east-1:111122223333:key/prop");

  it("round-trips any payload, and any single-byte flip of the ciphertext is MAC_MISMATCH", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ minLength: 0, maxLength: 512 }),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        async (payload, where, mask) => {
          const doc = await encryptConfig(payload, {
            kinds: KEY_KINDS,
            key,
            machineId: "ns/m",
            iterations: 10_000,
          });
          const back = await decryptConfig(doc, {
            kinds: KEY_KINDS,
            resolve: resolveTo(key),
            machineId: "ns/m",
          });
          assert.deepEqual(back, payload);
          const obj = JSON.parse(doc) as Record<string, string>;
          const body = Buffer.from(obj.ciphertext ?? "", "base64");
          const at = where % body.length;
          body[at] = (body[at] ?? 0) ^ mask;
          obj.ciphertext = body.toString("base64");
          await rejectsWith(
            decryptConfig(JSON.stringify(obj), {
              kinds: KEY_KINDS,
              resolve: resolveTo(key),
              machineId: "ns/m",
            }),
            "MAC_MISMATCH",
          );
        },
      ),
      { numRuns: 25 },
    );
  });
});
