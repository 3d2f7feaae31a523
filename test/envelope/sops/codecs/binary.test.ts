/**
 * The binary codec: bytes in, the same bytes out, never decoded; the encrypted form is the
 * JSON document sops' BinaryStore writes.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { binaryCodec } from "../../../../src/envelope/sops/codecs/binary.ts";
import { entry, type Mapping, mapping, str } from "../../../../src/envelope/sops/document.ts";
import { BootsealError } from "../../../../src/errors.ts";
import { VECTORS_URL as VECTORS } from "../../../helpers/vectors.ts";
import { type SopsPeer, startSopsPeer } from "./sops-peer.ts";

const FIXTURES = new URL("../../../fixtures/json/", import.meta.url);
const read = (url: URL): Uint8Array => new Uint8Array(readFileSync(url));
const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

function fails(fn: () => unknown, code: string, message?: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof BootsealError, String(e));
    assert.equal(e.code, code);
    if (message) assert.match(e.message, message);
    return true;
  });
}

function roundTrip(bytes: Uint8Array, indent?: number): Uint8Array {
  const { branches, metadata } = binaryCodec.parseEncrypted(bytes);
  return binaryCodec.emitEncrypted(branches, metadata, indent === undefined ? undefined : { indent });
}

function dataOf(branch: Mapping | undefined): unknown {
  const e = branch?.items[0];
  assert.ok(e?.kind === "entry" && e.key === "data" && e.value.kind === "scalar" && e.value.type === "str");
  return e.value.value;
}

describe("binary codec: plaintext", () => {
  it("any bytes round-trip exactly, invalid UTF-8 included", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 512 }), (bytes) => {
        const branches = binaryCodec.parsePlain(bytes);
        assert.equal(branches.length, 1);
        assert.deepEqual(dataOf(branches[0]), bytes);
        assert.deepEqual(binaryCodec.emitPlain(branches), bytes);
      }),
      { numRuns: 300 },
    );
    const invalid = new Uint8Array([0xff, 0xfe, 0x00, 0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xe2, 0x82]);
    assert.deepEqual(binaryCodec.emitPlain(binaryCodec.parsePlain(invalid)), invalid);
  });

  it("holds a copy, so the caller may wipe its buffer", () => {
    const input = utf8("secret");
    const branches = binaryCodec.parsePlain(input);
    input.fill(0);
    assert.deepEqual(binaryCodec.emitPlain(branches), utf8("secret"));
  });

  it("an encrypted-looking file is just bytes to encrypt (sops never sees a sops key in binary)", () => {
    const bytes = read(new URL("sops-repo/binary/example.txt", VECTORS));
    assert.deepEqual(dataOf(binaryCodec.parsePlain(bytes)[0]), bytes);
  });

  it("emitPlain: a string is written as UTF-8, with no newline added", () => {
    assert.deepEqual(binaryCodec.emitPlain([mapping([entry("data", str("héllo"))])]), utf8("héllo"));
    assert.deepEqual(
      binaryCodec.emitPlain([mapping([entry("x", str("a")), entry("data", str(""))])]),
      new Uint8Array(),
    );
  });

  it("emitPlain refuses a tree without string data, or more than one branch", () => {
    fails(
      () => binaryCodec.emitPlain([mapping([entry("x", str("a"))])]),
      "UNREPRESENTABLE",
      /^error emitting binary store: no binary data found in tree$/,
    );
    fails(
      () => binaryCodec.emitPlain([mapping([entry("data", { kind: "scalar", type: "int", value: 1n })])]),
      "BAD_INPUT",
      /not a string/,
    );
    fails(() => binaryCodec.emitPlain([mapping([entry("data", str("a"))]), mapping([])]), "BAD_INPUT");
  });
});

describe("binary codec: encrypted form", () => {
  const expectEncryptedData = (file: string) => {
    const bytes = read(new URL(file, VECTORS));
    const { branches, metadata } = binaryCodec.parseEncrypted(bytes);
    const data = dataOf(branches[0]);
    assert.ok(
      typeof data === "string" && data.startsWith("ENC[AES256_GCM,data:") && data.endsWith("type:str]"),
    );
    assert.ok(metadata.items.some((i) => i.kind === "entry" && i.key === "lastmodified"));
    // Written before 3.10, so without the final newline sops now adds.
    assert.deepEqual(roundTrip(bytes), new Uint8Array([...bytes, 0x0a]));
  };

  it("sops-repo/binary/example.txt (3.5.0, PGP) parses", () => {
    expectEncryptedData("sops-repo/binary/example.txt");
  });

  it("fluxcd-age/file.txt (3.9.0, age) parses", () => {
    expectEncryptedData("fluxcd-age/file.txt");
  });

  it("files sops 3.13.2 wrote round-trip byte for byte (tab and 2-space indent)", () => {
    const tab = read(new URL("enc/binary.enc", FIXTURES));
    assert.deepEqual(roundTrip(tab), tab);
    const two = read(new URL("enc/binary-indent2.enc", FIXTURES));
    assert.deepEqual(roundTrip(two, 2), two);
  });

  it("parseEncrypted: no data -> BAD_INPUT, data not a string -> BAD_INPUT, no sops -> NOT_ENCRYPTED", () => {
    fails(
      () => binaryCodec.parseEncrypted(utf8('{"other": "x", "sops": {}}')),
      "BAD_INPUT",
      /no string 'data'/,
    );
    fails(
      () => binaryCodec.parseEncrypted(utf8('{"data": {}, "sops": {}}')),
      "BAD_INPUT",
      /no string 'data'/,
    );
    fails(() => binaryCodec.parseEncrypted(utf8('{"data": "x"}')), "NOT_ENCRYPTED");
    fails(() => binaryCodec.parseEncrypted(utf8("not json")), "BAD_INPUT", /line 1, column 1/);
  });
});

describe("binary codec: live sops 3.13.2", () => {
  let sops: SopsPeer;
  before(() => {
    sops = startSopsPeer();
  });
  after(() => sops.cleanup());

  it("random bytes: sops' encrypted layout round-trips, and decrypts to what emitPlain writes", () => {
    const samples = fc.sample(fc.uint8Array({ minLength: 1, maxLength: 300 }), { numRuns: 4, seed: 2024 });
    for (const bytes of [...samples, new Uint8Array([0xff, 0x00, 0xe2, 0x82, 0x0a])]) {
      const encrypted = sops.encrypt(bytes, "binary");
      assert.deepEqual(roundTrip(encrypted), encrypted);
      const decrypted = sops.decrypt(encrypted, "binary");
      assert.deepEqual(binaryCodec.emitPlain(binaryCodec.parsePlain(bytes)), decrypted);
    }
  });

  it("our emitted layout is one sops reads: swap in sops' own data and metadata", () => {
    const encrypted = sops.encrypt(utf8("payload\n"), "binary");
    const { branches, metadata } = binaryCodec.parseEncrypted(encrypted);
    const rebuilt = binaryCodec.emitEncrypted(
      [mapping([entry("data", str(dataOf(branches[0]) as string))])],
      metadata,
    );
    assert.deepEqual(sops.decrypt(rebuilt, "binary"), utf8("payload\n"));
  });
});
