import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { iniCodec } from "../../../../src/envelope/sops/codecs/ini.ts";
import type { Branch, Entry, Mapping, Value } from "../../../../src/envelope/sops/document.ts";
import { comment, entry, mapping, str } from "../../../../src/envelope/sops/document.ts";
import { VECTORS_URL as VECTORS } from "../../../helpers/vectors.ts";
import { assertCode, itemsOf, sectionOf, strAt } from "./flat-assert.ts";
import type { SopsPeer } from "./sops-peer.ts";
import { startSopsPeer } from "./sops-peer.ts";

const FIXTURES = new URL("../../../fixtures/ini/", import.meta.url);
const vector = (p: string): Buffer => readFileSync(new URL(p, VECTORS));
const fixture = (p: string): Buffer => readFileSync(new URL(p, FIXTURES));
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array): string => Buffer.from(b).toString("utf8");
const PLAIN_FIXTURES = ["plain.ini", "edge.ini", "crlf-bom.ini"];

function roundTripEncrypted(x: Uint8Array): void {
  const { branches, metadata } = iniCodec.parseEncrypted(x);
  const out = iniCodec.emitEncrypted(branches, metadata);
  assert.equal(text(out), text(x));
  assert.deepEqual(Buffer.from(out), Buffer.from(x));
}

/** The AAD of every leaf in walk order, and of every comment (docs/sops-format.md section 3.3). */
function aads(branch: Branch): { leaves: string[]; comments: string[] } {
  const leaves: string[] = [];
  const comments: string[] = [];
  for (const section of branch.items) {
    if (section.kind !== "entry" || section.value.kind !== "map") continue;
    for (const item of section.value.items) {
      if (item.kind === "comment") comments.push(`${section.key}:`);
      else leaves.push(`${section.key}:${item.key}:`);
    }
  }
  return { leaves, comments };
}

/** Replace the walk's leaves and comments, in order, with the given plaintexts. */
function substitute(branch: Branch, leaves: string[], comments: string[]): Branch {
  let l = 0;
  let c = 0;
  return mapping(
    branch.items.map((s): Entry => {
      assert.ok(s.kind === "entry" && s.value.kind === "map");
      const items = s.value.items.map((i) =>
        i.kind === "comment" ? comment(comments[c++] as string) : entry(i.key, str(leaves[l++] as string)),
      );
      return entry(s.key, mapping(items));
    }),
  );
}

describe("INI vectors", () => {
  it("format.enc.ini (3.13.2): empty DEFAULT first, [foo], metadata unflattened; re-emits exactly", () => {
    const x = vector("sops-repo/ini/format.enc.ini");
    const { branches, metadata } = iniCodec.parseEncrypted(x);
    assert.deepEqual(itemsOf(branches[0]), ["DEFAULT", "foo"]);
    assert.deepEqual(itemsOf(sectionOf(branches[0], "DEFAULT")), []);
    assert.match(String(strAt(branches[0], "foo", "bar")), /^ENC\[AES256_GCM,data:Upwq,/);
    assert.equal(strAt(metadata, "pgp", 0, "fp"), "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4");
    const enc = String(strAt(metadata, "pgp", 0, "enc"));
    assert.ok(enc.startsWith("-----BEGIN PGP MESSAGE-----\n\nwcBMAyUpShfNkFB/AQf/daFI"), "real newlines");
    assert.ok(enc.endsWith("\n=Axgz\n-----END PGP MESSAGE-----"));
    assert.equal(strAt(metadata, "version"), "3.13.2");
    roundTripEncrypted(x);
  });

  it("decrypted format.enc.ini prints exactly what sops prints", () => {
    const [branch] = iniCodec.parseEncrypted(vector("sops-repo/ini/format.enc.ini")).branches;
    const expected = JSON.parse(vector("expected/format.enc.ini.expected.json").toString("utf8"));
    const leaves = expected.leaves_in_mac_order as { aad: string; plaintext: string }[];
    assert.deepEqual(
      aads(branch as Branch).leaves,
      leaves.map((l) => l.aad),
    );
    const plain = substitute(
      branch as Branch,
      leaves.map((l) => l.plaintext),
      [],
    );
    assert.deepEqual(Buffer.from(iniCodec.emitPlain([plain])), vector("expected/format.enc.ini.decrypted"));
  });

  it("example.ini (3.5): section comment first, section with a space, unordered [sops] keys", () => {
    const { branches, metadata } = iniCodec.parseEncrypted(vector("sops-repo/ini/example.ini"));
    const branch = branches[0] as Branch;
    assert.deepEqual(itemsOf(branch), ["DEFAULT", "name", "address", "phoneNumbers", "not private"]);
    const name = itemsOf(sectionOf(branch, "name"));
    assert.match(name[0] as string, /^#ENC\[AES256_GCM,data:EexYkXJH.*type:comment\]$/);
    assert.deepEqual(name.slice(1), ["firstName", "lastName", "age"]);
    assert.equal(strAt(branch, "not private", "notsecret_unencrypted"), "hi there!");
    // The independent checker's AADs for every leaf and comment match our tree's paths.
    const expected = JSON.parse(vector("expected/example.ini.expected.json").toString("utf8"));
    assert.deepEqual(aads(branch), {
      leaves: expected.leaves_in_mac_order.map((l: { aad: string }) => l.aad),
      comments: expected.encrypted_comments_in_file_order.map((c: { aad: string }) => c.aad),
    });
    assert.deepEqual(itemsOf(metadata), ["lastmodified", "mac", "pgp", "unencrypted_suffix", "version"]);
    assert.equal(strAt(metadata, "pgp", 0, "fp"), "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4");
    assert.equal(strAt(metadata, "pgp", 1, "fp"), "D7229043384BCC60326C6FB9D8720D957C3D3074");
    assert.equal(strAt(metadata, "pgp", 1, "created_at"), "2019-12-10T22:45:52Z");
    assert.ok(String(strAt(metadata, "pgp", 1, "enc")).startsWith("-----BEGIN PGP MESSAGE-----\n\nwYwDXFUl"));
    // Re-emitted in the 3.13 order: the [sops] names come out alphabetical.
    const out = text(iniCodec.emitEncrypted(branches, metadata));
    const names = out
      .slice(out.indexOf("[sops]\n"))
      .split("\n")
      .slice(1, -1)
      .map((l) => l.split(" ")[0]);
    assert.deepEqual(names, [...(names as string[])].sort());
    assert.equal(names.length, 10);
  });

  it("reads the 3.13.0/3.13.1 triple-quoted metadata the same as the escaped form", () => {
    const x = vector("sops-repo/ini/format.enc.ini").toString("utf8");
    // What 3.13.1 wrote: real newlines, which the INI writer wraps in """ … """.
    const tripled = x.replace(/^(pgp__list_0__map_enc\s+= )(.*)$/m, (_, head: string, v: string) => {
      return `${head}"""${v.replaceAll("\\n", "\n")}"""`;
    });
    assert.notEqual(tripled, x);
    assert.match(tripled, /= """-----BEGIN PGP MESSAGE-----\n\nwcBM/);
    const a = iniCodec.parseEncrypted(bytes(x));
    const b = iniCodec.parseEncrypted(bytes(tripled));
    assert.deepEqual(b, a);
    // And writes it back in the 3.13.2 escaped form.
    assert.equal(text(iniCodec.emitEncrypted(b.branches, b.metadata)), x);
  });

  it("files written by sops 3.13.2 (age; two key groups; edge syntax) re-emit byte for byte", () => {
    for (const f of [
      "plain.age.enc.ini",
      "plain.groups.enc.ini",
      "edge.age.enc.ini",
      "crlf-bom.age.enc.ini",
    ]) {
      roundTripEncrypted(fixture(f));
    }
    const { metadata } = iniCodec.parseEncrypted(fixture("plain.groups.enc.ini"));
    assert.equal(strAt(metadata, "shamir_threshold"), "2");
    assert.match(
      String(strAt(metadata, "key_groups", 0, "age", 0, "enc")),
      /^-----BEGIN AGE ENCRYPTED FILE-----\n/,
    );
  });
});

describe("INI parsing", () => {
  const [branch] = iniCodec.parsePlain(fixture("plain.ini"));

  it("puts keys before any section in DEFAULT; the comment above a key follows it", () => {
    assert.deepEqual(itemsOf(branch), ["DEFAULT", "database", "section with spaces", "empty"]);
    assert.deepEqual(itemsOf(sectionOf(branch, "DEFAULT")), ["top", "other", "#comment on a default key"]);
    assert.deepEqual(itemsOf(sectionOf(branch, "empty")), []);
  });

  it("section comment first; quotes, inline comments, '=' and ':' values as the library reads them", () => {
    const db = sectionOf(branch, "database");
    assert.deepEqual(itemsOf(db).slice(0, 4), ["#section comment", "host", "port", "#comment on port"]);
    assert.equal(strAt(db, "password"), "quoted value");
    assert.equal(strAt(db, "dsn"), "postgres://u:p@h/db?x=1");
    assert.equal(strAt(db, "eq"), "a=b");
    assert.equal(strAt(db, "colon"), "value with colon");
    assert.equal(strAt(db, "inline"), "value");
    assert.deepEqual(itemsOf(db).slice(8, 12), ["inline", "#inline comment", "hash", "#hash comment"]);
    assert.equal(strAt(db, "single"), "single quoted");
    assert.equal(strAt(db, "spaced"), "  padded  ");
    assert.equal(strAt(db, "empty"), "");
    const spaced = sectionOf(branch, "section with spaces");
    assert.equal(strAt(spaced, "key one"), "1");
    assert.equal(strAt(spaced, "multi"), "line1\nline2");
    assert.equal(strAt(spaced, "backtick"), "a;b");
    assert.equal(strAt(spaced, "ünï"), "çødé ✓");
  });

  it("duplicate keys overwrite in place; non-unique sections stay apart; `-` auto-numbers", () => {
    const [edge] = iniCodec.parsePlain(fixture("edge.ini"));
    assert.deepEqual(itemsOf(edge), ["DEFAULT", " spaced section ", "DEFAULT", "dup", "dup"]);
    const def = sectionOf(edge, "DEFAULT");
    assert.deepEqual(itemsOf(def).slice(0, 3), ["dup", "#inline on dup", "key"]);
    assert.equal(strAt(def, "dup"), "second");
    assert.equal(strAt(def, "cont"), "line one line two");
    assert.equal(strAt(def, "quoted key"), "qv");
    assert.equal(strAt(def, "back=tick"), "bt");
    const [auto] = iniCodec.parsePlain(bytes("- = a\n- = b\n"));
    assert.deepEqual(itemsOf(sectionOf(auto, "DEFAULT")), ["#1", "#2"]);
  });

  it("refuses malformed input with the line number (as the ini library does)", () => {
    assertCode(() => iniCodec.parsePlain(bytes("[a]\nk = v\nnodelim\n")), "BAD_INPUT", /delimiter.*line 3/);
    assertCode(() => iniCodec.parsePlain(bytes("k = v\n[open\n")), "BAD_INPUT", /unclosed section at line 2/);
    assertCode(() => iniCodec.parsePlain(bytes("[]\n")), "BAD_INPUT", /empty section name at line 1/);
    assertCode(() => iniCodec.parsePlain(bytes("a=1\n = v\n")), "BAD_INPUT", /empty key name at line 2/);
    assertCode(() => iniCodec.parsePlain(bytes('a=1\nk = """x\ny\n')), "BAD_INPUT", /closing quote.*line 2/);
    assertCode(() => iniCodec.parsePlain(bytes('"k = v\n')), "BAD_INPUT", /key quote at line 1/);
  });

  it("[sops] in plaintext is already encrypted; without it nothing is; two are refused", () => {
    assertCode(() => iniCodec.parsePlain(bytes("[sops]\nversion = 1\n")), "ALREADY_ENCRYPTED");
    assertCode(() => iniCodec.parseEncrypted(bytes("[a]\nb = c\n")), "NOT_ENCRYPTED");
    assertCode(() => iniCodec.parseEncrypted(bytes("[sops]\n")), "NOT_ENCRYPTED");
    assertCode(() => iniCodec.parseEncrypted(bytes("[sops]\na=1\n[sops]\nb=2\n")), "BAD_INPUT", /duplicate/);
  });
});

describe("INI emitting", () => {
  it("refuses what the store cannot write: non-mapping sections, nesting, a user [sops]", () => {
    assertCode(
      () => iniCodec.emitPlain([mapping([entry("a", str("x"))])]),
      "UNREPRESENTABLE",
      /^Error marshaling to INI: Error encoding section: Section values should always be TreeBranches$/,
    );
    const nested = mapping([entry("s", mapping([entry("k", mapping([]))]))]);
    assertCode(() => iniCodec.emitPlain([nested]), "BAD_INPUT", /nested/);
    const user = mapping([entry("sops", mapping([]))]);
    assertCode(() => iniCodec.emitEncrypted([user], mapping([])), "BAD_INPUT", /reserved/);
    // The library would index an empty comment line and panic.
    const blank = mapping([entry("s", mapping([comment("a\n\nb")]))]);
    assertCode(() => iniCodec.emitPlain([blank]), "BAD_INPUT", /empty line/);
  });

  it("drops top-level comments and orphan comments; the last comment after a key wins", () => {
    const tree = mapping([
      comment("top"),
      entry(
        "s",
        mapping([comment("sec"), comment("orphan?"), entry("k", str("v")), comment("c1"), comment("c2")]),
      ),
    ]);
    assert.equal(text(iniCodec.emitPlain([tree])), "; sec\n[s]\n; c2\nk = v\n");
  });
});

describe("INI against sops 3.13.2", () => {
  let sops: SopsPeer;
  before(() => {
    sops = startSopsPeer();
  });
  after(() => sops.cleanup());

  for (const name of PLAIN_FIXTURES) {
    it(`${name}: emitPlain(parsePlain(x)) is what sops decrypt prints after encrypt`, () => {
      const enc = sops.run(["encrypt", "--age", sops.recipients[0], new URL(name, FIXTURES).pathname]);
      const dec = sops.run(["decrypt", "--input-type", "ini", "--output-type", "ini"], { input: enc });
      assert.ok(dec.length > 50);
      assert.deepEqual(Buffer.from(iniCodec.emitPlain(iniCodec.parsePlain(fixture(name)))), dec);
      roundTripEncrypted(enc);
    });
  }

  it("a fresh two-group Shamir file re-emits byte for byte", () => {
    const dir = sops.groupsDir();
    writeFileSync(join(dir, "s.ini"), fixture("plain.ini"));
    const enc = sops.run(["encrypt", "s.ini"], { cwd: dir });
    assert.match(enc.toString(), /^shamir_threshold +=+ 2$/m);
    roundTripEncrypted(enc);
  });

  it("typed scalars and quoting match sops's writer (YAML converted to INI)", () => {
    const yaml = [
      "sec:",
      "  f1: 1.5",
      "  f2: 1234568000.0",
      "  f3: 100000.0",
      "  f4: 0.00001",
      "  f5: -0.0",
      "  f6: .inf",
      "  i: 42",
      "  b: true",
      '  nb: "x\\u00a0"',
      '  s: "  lead"',
      '  nl: "a\\nb"',
      "  t: 2024-01-02T03:04:05.123Z",
      "  n: null",
      '  bt: "a`b"',
      '  semi: "a;b"',
      '  "k=q": v',
      '  "k`q": v',
      "",
    ].join("\n");
    writeFileSync(join(sops.dir, "types.yaml"), yaml);
    writeFileSync(
      join(sops.dir, "types.enc.yaml"),
      sops.run(["encrypt", "--age", sops.recipients[0], "types.yaml"]),
    );
    const dec = sops.run(["decrypt", "--output-type", "ini", "types.enc.yaml"]);
    const f = (value: number): Value => ({ kind: "scalar", type: "float", value });
    const tree: Mapping = mapping([
      entry(
        "sec",
        mapping([
          entry("f1", f(1.5)),
          entry("f2", f(1234568000)),
          entry("f3", f(100000)),
          entry("f4", f(0.00001)),
          entry("f5", f(-0)),
          entry("f6", f(Number.POSITIVE_INFINITY)),
          entry("i", { kind: "scalar", type: "int", value: 42n }),
          entry("b", { kind: "scalar", type: "bool", value: true }),
          entry("nb", str("x\u00a0")),
          entry("s", str("  lead")),
          entry("nl", str("a\nb")),
          entry("t", { kind: "scalar", type: "time", value: "2024-01-02T03:04:05.123Z" }),
          entry("n", { kind: "scalar", type: "null" }),
          entry("bt", str("a`b")),
          entry("semi", str("a;b")),
          entry("k=q", str("v")),
          entry("k`q", str("v")),
        ]),
      ),
    ]);
    assert.equal(text(iniCodec.emitPlain([tree])), dec.toString("utf8"));
  });

  it("sops also refuses the malformed inputs we refuse", () => {
    for (const [i, bad] of [
      "[a]\nk = v\nnodelim\n",
      "k = v\n[open\n",
      "[]\n",
      'a=1\nk = """x\ny\n',
    ].entries()) {
      writeFileSync(join(sops.dir, `bad${i}.ini`), bad);
      const result = sops.fail(["encrypt", "--age", sops.recipients[0], `bad${i}.ini`]);
      assert.notEqual(result.status, 0, `sops accepted ${JSON.stringify(bad)}`);
      assertCode(() => iniCodec.parsePlain(bytes(bad)), "BAD_INPUT");
    }
  });
});
