/**
 * The JSON codec against what the real sops writes: the shared vectors, fixtures sops 3.13.2
 * encrypted (test/fixtures/json/README.md), and live encrypt/decrypt runs of the plaintext
 * fixtures and of generated floats and strings.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { jsonCodec } from "../../../../src/envelope/sops/codecs/json.ts";
import type { Mapping, Value } from "../../../../src/envelope/sops/document.ts";
import { VECTORS_URL as VECTORS } from "../../../helpers/vectors.ts";
import { type SopsPeer, startSopsPeer } from "./sops-peer.ts";

const FIXTURES = new URL("../../../fixtures/json/", import.meta.url);
const read = (url: URL): Uint8Array => new Uint8Array(readFileSync(url));
const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

function get(m: Mapping, key: string): Value {
  const e = m.items.find((i) => i.kind === "entry" && i.key === key);
  assert.ok(e?.kind === "entry", `no key ${key}`);
  return e.value;
}

function keys(v: Value): string[] {
  assert.equal(v.kind, "map");
  return v.kind === "map" ? v.items.map((i) => (i.kind === "entry" ? i.key : "#")) : [];
}

function roundTrip(bytes: Uint8Array, indent?: number): Uint8Array {
  const { branches, metadata } = jsonCodec.parseEncrypted(bytes);
  return jsonCodec.emitEncrypted(branches, metadata, indent === undefined ? undefined : { indent });
}

describe("json: shared vectors", () => {
  it("format.enc.json (sops 3.13.1) round-trips byte for byte", () => {
    const bytes = read(new URL("sops-repo/json/format.enc.json", VECTORS));
    assert.deepEqual(roundTrip(bytes), bytes);
  });

  it("example.json (sops 3.5.0) parses to the right tree and re-emits with the 3.10+ newline", () => {
    const bytes = read(new URL("sops-repo/json/example.json", VECTORS));
    const { branches, metadata } = jsonCodec.parseEncrypted(bytes);
    const doc = branches[0]!;
    assert.deepEqual(keys(doc), ["firstName", "lastName", "age", "address", "phoneNumbers", "anEmptyValue"]);
    assert.deepEqual(get(doc, "anEmptyValue"), { kind: "scalar", type: "str", value: "" });
    const phones = get(doc, "phoneNumbers");
    assert.ok(phones.kind === "seq" && phones.items.length === 2);
    for (const p of phones.items) assert.deepEqual(keys(p as Value), ["number", "type"]);
    assert.deepEqual(keys(metadata), [
      "kms",
      "gcp_kms",
      "azure_kv",
      "lastmodified",
      "mac",
      "pgp",
      "unencrypted_suffix",
      "version",
    ]);
    assert.deepEqual(get(metadata, "kms"), { kind: "scalar", type: "null" });
    const pgp = get(metadata, "pgp");
    assert.ok(pgp.kind === "seq" && pgp.items.length === 2);
    const enc = get(pgp.items[0] as Mapping, "enc");
    assert.ok(enc.kind === "scalar" && enc.type === "str" && typeof enc.value === "string");
    assert.match(enc.value, /^-----BEGIN PGP MESSAGE-----\n\n/);
    assert.deepEqual(roundTrip(bytes), new Uint8Array([...bytes, 0x0a]));
  });

  it("static_github.json (sops 3.5.0): empty object, null key lists, _unencrypted values", () => {
    const bytes = read(new URL("sops-repo/json/static_github.json", VECTORS));
    const { branches, metadata } = jsonCodec.parseEncrypted(bytes);
    const doc = branches[0]!;
    assert.deepEqual(keys(doc), ["common", "development", "test", "production"]);
    assert.deepEqual(get(doc, "development"), { kind: "map", items: [] });
    assert.deepEqual(get(get(doc, "test") as Mapping, "github_username_unencrypted"), {
      kind: "scalar",
      type: "str",
      value: "test-user",
    });
    assert.deepEqual(get(metadata, "gcp_kms"), { kind: "scalar", type: "null" });
    assert.deepEqual(roundTrip(bytes), new Uint8Array([...bytes, 0x0a]));
  });
});

describe("json: fixtures written by sops 3.13.2", () => {
  const dir = new URL("enc/", FIXTURES);
  const files = readdirSync(dir).filter((f) => f.endsWith(".enc.json"));

  it("covers every plaintext fixture", () => {
    assert.ok(files.length >= 10, files.join());
  });

  for (const file of files) {
    it(`${file} round-trips byte for byte`, () => {
      const bytes = read(new URL(file, dir));
      assert.deepEqual(roundTrip(bytes, file.includes("indent2") ? 2 : undefined), bytes);
    });
  }

  it("metadata keeps its types: shamir_threshold int, mac_only_encrypted bool, empty lists", () => {
    const { metadata } = jsonCodec.parseEncrypted(read(new URL("nested-groups.enc.json", dir)));
    assert.deepEqual(get(metadata, "shamir_threshold"), { kind: "scalar", type: "int", value: 2n });
    assert.deepEqual(get(metadata, "mac_only_encrypted"), { kind: "scalar", type: "bool", value: true });
    const groups = get(metadata, "key_groups");
    assert.ok(groups.kind === "seq" && groups.items.length === 2);
    assert.deepEqual(get(groups.items[0] as Mapping, "hc_vault"), { kind: "seq", items: [] });
  });
});

describe("json: live sops 3.13.2 encrypt/decrypt", () => {
  let sops: SopsPeer;
  before(() => {
    sops = startSopsPeer();
  });
  after(() => sops.cleanup());

  const plainDir = new URL("plain/", FIXTURES);
  for (const file of readdirSync(plainDir)) {
    it(`${file}: emitPlain(parsePlain(x)) equals sops' decrypted output; encrypted output round-trips`, () => {
      const input = read(new URL(file, plainDir));
      const encrypted = sops.encrypt(input, "json");
      const decrypted = sops.decrypt(encrypted, "json");
      assert.equal(
        new TextDecoder().decode(jsonCodec.emitPlain(jsonCodec.parsePlain(input))),
        new TextDecoder().decode(decrypted),
      );
      assert.deepEqual(jsonCodec.emitPlain(jsonCodec.parsePlain(input)), decrypted);
      assert.deepEqual(roundTrip(encrypted), encrypted);
    });
  }

  it("generated floats are written exactly as Go writes them", () => {
    const doubles = fc.sample(fc.double({ noNaN: true, noDefaultInfinity: true }), {
      numRuns: 400,
      seed: 4242,
    });
    const extra = [1e21, 1e-7, 1e-6, 9.999999999999999e20, 123e-20, 2 ** 63, 2 ** 64, -0];
    // toExponential() gives the shortest round-trip digits and always an exponent, so each
    // literal is a float to Go as well (a bare "1" would be an int).
    const literals = [...doubles, ...extra].map((d) => (Object.is(d, -0) ? "-0.0" : d.toExponential()));
    const input = utf8(`{"f": [${literals.join(", ")}]}`);
    const decrypted = sops.decrypt(sops.encrypt(input, "json"), "json");
    assert.equal(
      new TextDecoder().decode(jsonCodec.emitPlain(jsonCodec.parsePlain(input))),
      new TextDecoder().decode(decrypted),
    );
  });

  it("generated strings and keys are escaped exactly as Go escapes them", () => {
    const strings = fc.sample(fc.string({ unit: "binary", maxLength: 30 }), { numRuns: 300, seed: 777 });
    const specials = ["\u2028\u2029", "<>&", "\u0000\u001f\u007f", "\ud800", "\udfff\ud800", "\b\f\v"];
    const all = [...strings, ...specials];
    // JSON.stringify writes lone surrogates as escapes, so the input is valid UTF-8 JSON.
    const members = all.map((s, i) => `${JSON.stringify(`${i}${s}`)}: ${JSON.stringify(s)}`);
    const input = utf8(`{${members.join(", ")}}`);
    const decrypted = sops.decrypt(sops.encrypt(input, "json"), "json");
    assert.equal(
      new TextDecoder().decode(jsonCodec.emitPlain(jsonCodec.parsePlain(input))),
      new TextDecoder().decode(decrypted),
    );
  });

  it("generated ints (int64 range and beyond) are written exactly as sops writes them", () => {
    const ints = fc.sample(fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }), { numRuns: 300, seed: 99 });
    const input = utf8(`{"i": [${ints.join(", ")}]}`);
    const decrypted = sops.decrypt(sops.encrypt(input, "json"), "json");
    assert.deepEqual(jsonCodec.emitPlain(jsonCodec.parsePlain(input)), decrypted);
  });
});
