import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { dotenvCodec } from "../../../../src/envelope/sops/codecs/dotenv.ts";
import type { Branch, Mapping } from "../../../../src/envelope/sops/document.ts";
import { comment, entry, mapping, str } from "../../../../src/envelope/sops/document.ts";
import { VECTORS_URL as VECTORS } from "../../../helpers/vectors.ts";
import { assertCode, itemsOf, strAt } from "./flat-assert.ts";
import type { SopsPeer } from "./sops-peer.ts";
import { startSopsPeer } from "./sops-peer.ts";

const FIXTURES = new URL("../../../fixtures/dotenv/", import.meta.url);
const vector = (p: string): Buffer => readFileSync(new URL(p, VECTORS));
const fixture = (p: string): Buffer => readFileSync(new URL(p, FIXTURES));
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array): string => Buffer.from(b).toString("utf8");

function roundTripEncrypted(x: Uint8Array): void {
  const { branches, metadata } = dotenvCodec.parseEncrypted(x);
  assert.equal(text(dotenvCodec.emitEncrypted(branches, metadata)), text(x));
  assert.deepEqual(Buffer.from(dotenvCodec.emitEncrypted(branches, metadata)), Buffer.from(x));
}

describe("dotenv vectors", () => {
  it("format.enc.env (3.13.1, PGP): key `foo ` kept untrimmed, metadata unflattened", () => {
    const { branches, metadata } = dotenvCodec.parseEncrypted(vector("sops-repo/dotenv/format.enc.env"));
    assert.equal(branches.length, 1);
    assert.deepEqual(itemsOf(branches[0]), ["foo "]);
    assert.match(String(strAt(branches[0], "foo ")), /^ENC\[AES256_GCM,data:XBV7lQ==,/);
    assert.deepEqual(
      metadata.items.map((i) => (i.kind === "entry" ? i.key : "")),
      ["lastmodified", "mac", "pgp", "unencrypted_suffix", "version"],
    );
    assert.equal(strAt(metadata, "pgp", 0, "fp"), "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4");
    assert.equal(strAt(metadata, "pgp", 0, "created_at"), "2026-05-22T20:15:26Z");
    const enc = String(strAt(metadata, "pgp", 0, "enc"));
    assert.ok(enc.startsWith("-----BEGIN PGP MESSAGE-----\n\nwcBMAyUpShfNkFB/"), "real newlines");
    assert.ok(enc.endsWith("\n=5coz\n-----END PGP MESSAGE-----"));
    assert.equal(strAt(metadata, "version"), "3.13.1");
    roundTripEncrypted(vector("sops-repo/dotenv/format.enc.env"));
  });

  it("decrypted format.enc.env prints exactly what sops prints", () => {
    const [branch] = dotenvCodec.parseEncrypted(vector("sops-repo/dotenv/format.enc.env")).branches;
    const expected = JSON.parse(vector("expected/format.enc.env.expected.json").toString("utf8"));
    // The one leaf's AAD is its key plus ':' (docs/sops-format.md section 3.3), so the key is right.
    assert.equal(expected.leaves_in_mac_order[0].aad, "foo :");
    const plain = mapping([
      entry(itemsOf(branch)[0] as string, str(expected.leaves_in_mac_order[0].plaintext)),
    ]);
    assert.deepEqual(
      Buffer.from(dotenvCodec.emitPlain([plain])),
      vector("expected/format.enc.env.decrypted"),
    );
  });

  it("fluxcd env.env (3.9, age): armour with a final newline", () => {
    const { branches, metadata } = dotenvCodec.parseEncrypted(vector("fluxcd-age/env.env"));
    assert.deepEqual(itemsOf(branches[0]), ["key"]);
    assert.equal(
      strAt(metadata, "age", 0, "recipient"),
      "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29",
    );
    const enc = String(strAt(metadata, "age", 0, "enc"));
    assert.ok(enc.startsWith("-----BEGIN AGE ENCRYPTED FILE-----\nYWdl"));
    assert.ok(enc.endsWith("\n-----END AGE ENCRYPTED FILE-----\n"));
    assert.equal(strAt(metadata, "unencrypted_suffix"), "_unencrypted");
    // 3.9 sorted flattened names; here that equals the alphabetical tree order.
    roundTripEncrypted(vector("fluxcd-age/env.env"));
  });

  it("files written by sops 3.13.2 (age; two key groups, Shamir) re-emit byte for byte", () => {
    roundTripEncrypted(fixture("plain.age.enc.env"));
    const groups = fixture("plain.groups.enc.env");
    const { metadata } = dotenvCodec.parseEncrypted(groups);
    assert.equal(strAt(metadata, "shamir_threshold"), "2");
    assert.match(String(strAt(metadata, "key_groups", 1, "age", 0, "recipient")), /^age1/);
    roundTripEncrypted(groups);
  });
});

describe("dotenv parsing", () => {
  const [branch] = dotenvCodec.parsePlain(fixture("plain.env"));

  it("keeps keys and values verbatim: spaces, '=', quotes, unicode; unescapes \\n", () => {
    assert.ok(branch);
    assert.deepEqual(itemsOf(branch), [
      "# a comment",
      "#no space comment",
      "KEY",
      "key with spaces",
      "EQ",
      "NL",
      "QUOTED",
      "SINGLE",
      "UNI",
      " LEADING",
      "EMPTY",
      "TRAIL",
      "#   indented comment text",
      "BACKSLASH",
      "export EXPORTED",
      "HASH",
    ]);
    assert.equal(strAt(branch, "EQ"), "a=b=c");
    assert.equal(strAt(branch, "NL"), "line1\nline2\n");
    assert.equal(strAt(branch, "QUOTED"), '"double quoted"');
    assert.equal(strAt(branch, "UNI"), "héllo wörld ✓ 日本");
    assert.equal(strAt(branch, " LEADING"), " spaced ");
    assert.equal(strAt(branch, "TRAIL"), "trailing spaces   ");
    assert.equal(strAt(branch, "BACKSLASH"), "a\\\\b\\t");
    assert.equal(strAt(branch, "HASH"), "value # not a comment");
  });

  it("keeps bytes that are not UTF-8, and writes them back unchanged", () => {
    const input = Uint8Array.from([...bytes("K="), 0xff, 0xfe, ...bytes("\\nx\n")]);
    const [b] = dotenvCodec.parsePlain(input);
    const value = strAt(b, "K");
    assert.ok(value instanceof Uint8Array);
    assert.deepEqual([...value], [0xff, 0xfe, 0x0a, 0x78]);
    assert.deepEqual(dotenvCodec.emitPlain([b as Branch]), input);
  });

  it("refuses a line without '=' with its line number (sops refuses it too)", () => {
    assertCode(() => dotenvCodec.parsePlain(bytes("A=1\n#c\n\nnoequals\n")), "BAD_INPUT", /line 4/);
    // A CRLF blank line is "\r", which is not empty: sops refuses it as well.
    assertCode(() => dotenvCodec.parsePlain(bytes("A=1\r\n\r\nB=2\r\n")), "BAD_INPUT", /line 2/);
    assertCode(
      () => dotenvCodec.parsePlain(Uint8Array.from([0x41, 0xff, 0x3d])),
      "BAD_INPUT",
      /UTF-8.*line 1/,
    );
  });

  it("plaintext with sops_ keys is already encrypted; encrypted without them is not", () => {
    assertCode(() => dotenvCodec.parsePlain(bytes("A=1\nsops_version=3.13.2\n")), "ALREADY_ENCRYPTED");
    assertCode(() => dotenvCodec.parseEncrypted(bytes("A=1\n#sops_x=1\n")), "NOT_ENCRYPTED");
  });
});

describe("dotenv emitting", () => {
  it("refuses nested values (sops: cannot use complex value)", () => {
    const tree = mapping([entry("a", mapping([entry("b", str("1"))]))]);
    assertCode(
      () => dotenvCodec.emitPlain([tree]),
      "UNREPRESENTABLE",
      /^cannot use complex value in dotenv file; offending key a$/,
    );
    assertCode(
      () => dotenvCodec.emitPlain([mapping([entry("l", { kind: "seq", items: [] })])]),
      "UNREPRESENTABLE",
    );
  });

  it("refuses a user key with the reserved sops_ prefix, and more than one document", () => {
    const meta = mapping([entry("version", str("3.13.2"))]);
    assertCode(
      () => dotenvCodec.emitEncrypted([mapping([entry("sops_x", str("1"))])], meta),
      "BAD_INPUT",
      /reserved/,
    );
    assertCode(() => dotenvCodec.emitPlain([mapping([]), mapping([])]), "BAD_INPUT", /one document/);
  });

  it("writes comments as #text and every line with a final newline", () => {
    const tree = mapping([comment(" hi"), entry("A", str("x\ny")), entry("B", str(""))]);
    assert.equal(text(dotenvCodec.emitPlain([tree])), "# hi\nA=x\\ny\nB=\n");
    assert.equal(text(dotenvCodec.emitPlain([mapping([])])), "");
  });
});

describe("dotenv against sops 3.13.2", () => {
  let sops: SopsPeer;
  before(() => {
    sops = startSopsPeer();
  });
  after(() => sops.cleanup());

  it("emitPlain(parsePlain(x)) is what `sops decrypt` prints after `sops encrypt`", () => {
    const src = new URL("plain.env", FIXTURES).pathname;
    const enc = sops.run(["encrypt", "--age", sops.recipients[0], src]);
    const dec = sops.run(["decrypt", "--input-type", "dotenv", "--output-type", "dotenv"], { input: enc });
    assert.ok(dec.length > 100);
    assert.deepEqual(Buffer.from(dotenvCodec.emitPlain(dotenvCodec.parsePlain(fixture("plain.env")))), dec);
    roundTripEncrypted(enc);
  });

  it("a fresh two-group Shamir file re-emits byte for byte", () => {
    const dir = sops.groupsDir();
    writeFileSync(join(dir, "s.env"), fixture("plain.env"));
    const enc = sops.run(["encrypt", "s.env"], { cwd: dir });
    assert.match(enc.toString(), /^sops_shamir_threshold=2$/m);
    roundTripEncrypted(enc);
  });

  it("typed scalars print as sops's ValToString (YAML converted to dotenv)", () => {
    const yaml =
      'f1: 1.5\nf2: 1234568000.0\nf3: 100000.0\ni: 42\nb: false\nnl: "a\\nb"\nt: 2024-01-02T03:04:05.5+01:00\nn: null\n';
    writeFileSync(join(sops.dir, "t.yaml"), yaml);
    const enc = sops.run(["encrypt", "--age", sops.recipients[0], "t.yaml"]);
    writeFileSync(join(sops.dir, "t.enc.yaml"), enc);
    const dec = sops.run(["decrypt", "--output-type", "dotenv", "t.enc.yaml"]);
    const tree: Mapping = mapping([
      entry("f1", { kind: "scalar", type: "float", value: 1.5 }),
      entry("f2", { kind: "scalar", type: "float", value: 1234568000 }),
      entry("f3", { kind: "scalar", type: "float", value: 100000 }),
      entry("i", { kind: "scalar", type: "int", value: 42n }),
      entry("b", { kind: "scalar", type: "bool", value: false }),
      entry("nl", str("a\nb")),
      entry("t", { kind: "scalar", type: "time", value: "2024-01-02T03:04:05.5+01:00" }),
      entry("n", { kind: "scalar", type: "null" }),
    ]);
    assert.equal(text(dotenvCodec.emitPlain([tree])), dec.toString());
  });

  it("sops also refuses the inputs we refuse", () => {
    writeFileSync(join(sops.dir, "bad.env"), "A=1\nnoequals\n");
    const bad = sops.fail(["encrypt", "--age", sops.recipients[0], "bad.env"]);
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /invalid dotenv input line/);
    writeFileSync(join(sops.dir, "meta.env"), "sops_version=1\n");
    assert.notEqual(sops.fail(["encrypt", "--age", sops.recipients[0], "meta.env"]).status, 0);
  });
});
