/**
 * The SOPS core against documents written by the real sops: the shared vectors (value by
 * value, with the data keys recorded in expected/*.expected.json) and four small sops
 * 3.13.2 documents made for these tests (int/time/float types, the comment rules and
 * mac_only_encrypted, which no shared vector exercises), decrypted as whole trees.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { describe, test } from "node:test";
import { decryptBranches } from "../../../src/envelope/sops/decrypt.ts";
import type { Branch, Comment, Mapping, Scalar, Value } from "../../../src/envelope/sops/document.ts";
import { createMacHasher, macAad, verifyMac } from "../../../src/envelope/sops/mac.ts";
import type { Metadata, SelectionRule } from "../../../src/envelope/sops/metadata.ts";
import { decryptValue } from "../../../src/envelope/sops/value-cipher.ts";
import { BootsealError } from "../../../src/errors.ts";
import { VECTORS_DIR } from "../../helpers/vectors.ts";

const VECTORS = `${VECTORS_DIR}/`;
const utf8 = new TextEncoder();
const text = (b: Uint8Array): string => new TextDecoder().decode(b);

interface Expected {
  vector: string;
  data_key_hex: string;
  lastmodified_as_mac_aad: string;
  mac_only_encrypted: boolean;
  mac_plaintext: string | null;
  mac_recomputed: string;
  leaves_in_mac_order: { aad: string; encrypted: boolean; type: string; plaintext: string }[];
  encrypted_comments_in_file_order: { aad: string; plaintext: string }[];
}

function findFile(dir: string, name: string): string | undefined {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory() && e.name !== "expected") {
      const hit = findFile(p, name);
      if (hit) return hit;
    } else if (e.name === name) return p;
  }
  return undefined;
}

/** Encrypted values in file order, split into leaves, comments and the metadata `mac`. */
function scan(file: string): {
  leaves: string[];
  comments: string[];
  mac: string | null;
  lastModified: string;
} {
  const src = readFileSync(file, "utf8");
  const leaves: string[] = [];
  const comments: string[] = [];
  let mac: string | null = null;
  for (const m of src.matchAll(/ENC\[AES256_GCM,data:[^,\]]*,iv:[^,\]]*,tag:[^,\]]*,type:[a-z]+\]/g)) {
    const lineStart = src.lastIndexOf("\n", m.index) + 1;
    if (/(?:^|[^A-Za-z])mac"?\s*[:=]\s*"?$/.test(src.slice(lineStart, m.index))) mac = m[0];
    else if (m[0].endsWith("type:comment]")) comments.push(m[0]);
    else leaves.push(m[0]);
  }
  const lm = /lastmodified"?\s*[:=]\s*['"]?([0-9TZ:.+-]+)/.exec(src);
  assert.ok(lm, "vector has a lastmodified");
  return { leaves, comments, mac, lastModified: lm[1]! };
}

const expectedDir = join(VECTORS, "expected");
const expectedFiles = readdirSync(expectedDir).filter((f) => f.endsWith(".expected.json"));

describe("shared sops vectors, value by value", () => {
  test("all vectors are present", () => assert.ok(expectedFiles.length >= 15));

  for (const name of expectedFiles) {
    const exp = JSON.parse(readFileSync(join(expectedDir, name), "utf8")) as Expected;
    const file = findFile(VECTORS, exp.vector);
    const key = Buffer.from(exp.data_key_hex, "hex");

    test(`${name}: every encrypted value and comment decrypts to the expected plaintext`, () => {
      assert.ok(file, `vector file ${exp.vector} found`);
      const found = scan(file);
      const encryptedLeaves = exp.leaves_in_mac_order.filter((l) => l.encrypted && l.plaintext !== "");
      assert.equal(found.leaves.length, encryptedLeaves.length);
      encryptedLeaves.forEach((leaf, i) => {
        const out = decryptValue(found.leaves[i]!, key, leaf.aad);
        assert.equal(out.type, leaf.type);
        assert.equal(text(out.bytes), leaf.plaintext);
      });
      assert.equal(found.comments.length, exp.encrypted_comments_in_file_order.length);
      exp.encrypted_comments_in_file_order.forEach((c, i) => {
        const out = decryptValue(found.comments[i]!, key, c.aad);
        assert.equal(out.type, "comment");
        assert.equal(text(out.bytes), c.plaintext);
      });
    });

    test(`${name}: recomputed MAC and the stored MAC`, () => {
      assert.ok(file);
      const found = scan(file);
      const hasher = createMacHasher(exp.mac_only_encrypted);
      for (const leaf of exp.leaves_in_mac_order) hasher.add(utf8.encode(leaf.plaintext), leaf.encrypted);
      const mac = hasher.digestHex();
      assert.equal(mac, exp.mac_recomputed);
      assert.equal(macAad(found.lastModified), exp.lastmodified_as_mac_aad);
      if (exp.mac_plaintext === null) {
        assert.equal(found.mac, null);
        assert.throws(() => verifyMac(mac, "", key, found.lastModified), { code: "NO_MAC" });
        return;
      }
      assert.ok(found.mac);
      assert.equal(text(decryptValue(found.mac, key, exp.lastmodified_as_mac_aad).bytes), exp.mac_plaintext);
      verifyMac(mac, found.mac, key, found.lastModified);
      // A MAC over anything else is refused.
      const other = createMacHasher(!exp.mac_only_encrypted).digestHex();
      assert.throws(() => verifyMac(other, found.mac!, key, found.lastModified), { code: "MAC_MISMATCH" });
    });

    test(`${name}: one changed byte anywhere fails closed`, () => {
      assert.ok(file);
      const found = scan(file);
      const firstLeaf = exp.leaves_in_mac_order.find((l) => l.encrypted && l.plaintext !== "");
      const targets: { value: string; aad: string }[] = [];
      if (firstLeaf) targets.push({ value: found.leaves[0]!, aad: firstLeaf.aad });
      if (found.mac) targets.push({ value: found.mac, aad: exp.lastmodified_as_mac_aad });
      for (const { value, aad } of targets) {
        for (const part of ["data", "iv", "tag"]) {
          const tampered = flipBase64Char(value, part);
          assertRejected(() => decryptValue(tampered, key, aad));
        }
        // A different path (AAD) or key is as good as tampering.
        assertRejected(() => decryptValue(value, key, `${aad}x`));
        const wrongKey = Buffer.from(key);
        wrongKey[0]! ^= 1;
        assertRejected(() => decryptValue(value, wrongKey, aad));
      }
      if (found.mac) {
        const lm = found.lastModified.replace(/\d(?=Z|[+-]\d\d:\d\d$)/, (d) => String((Number(d) + 1) % 10));
        assertRejected(() => verifyMac(exp.mac_recomputed, found.mac!, key, lm));
      }
    });
  }
});

/** Change one base64 character inside a field, keeping it valid base64. */
function flipBase64Char(value: string, part: string): string {
  const start = value.indexOf(`${part}:`) + part.length + 1;
  const c = value[start]!;
  return value.slice(0, start) + (c === "A" ? "B" : "A") + value.slice(start + 1);
}

function assertRejected(fn: () => unknown): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof BootsealError);
    assert.ok(["MAC_MISMATCH", "DECRYPTION_FAILED", "BAD_INPUT"].includes(err.code), err.code);
    return true;
  });
}

// ---- sops 3.13.2 documents made for these tests (age test key generated for them) ----------

const s = (value: string): Scalar => ({ kind: "scalar", type: "str", value });
const int = (value: bigint): Scalar => ({ kind: "scalar", type: "int", value });
const float = (value: number): Scalar => ({ kind: "scalar", type: "float", value });
const time = (value: string): Scalar => ({ kind: "scalar", type: "time", value });
const c = (t: string): Comment => ({ kind: "comment", text: t });
const map = (...items: ([string, Value] | Comment)[]): Mapping => ({
  kind: "map",
  items: items.map((i) => (Array.isArray(i) ? { kind: "entry", key: i[0], value: i[1] } : i)),
});
const seq = (...items: (Value | Comment)[]): Value => ({ kind: "seq", items });
const enc = (body: string, type: string): string => `ENC[AES256_GCM,${body},type:${type}]`;

function meta(lastModified: string, mac: string, rule: SelectionRule, macOnlyEncrypted = false): Metadata {
  return { keyGroups: [], lastModified, mac, rule, macOnlyEncrypted, version: "3.13.2" };
}

interface MadeDoc {
  name: string;
  keyHex: string;
  encrypted: Branch;
  plain: Branch;
  metadata: Metadata;
}

const MADE: MadeDoc[] = [
  {
    name: "types: int, float, time, bool, null, empty, nested lists, comments",
    keyHex: "c5d94cb98900db3e048fb44b9b0f54f93bbfd2ba6ff0feb14e141eb3ac553085",
    encrypted: map(
      c(
        enc(
          "data:XvWkFsycnNpCE1H8,iv:BhD1V5uXB9rg+Ia6INjXTtoTyK3VUEQb4j7IM1x4kG0=,tag:ltuYpTZ/rnMRRhdOsKbsNw==",
          "comment",
        ),
      ),
      [
        "n",
        s(
          enc(
            "data:xjI=,iv:HL037oGixQ9RXPwqZuDNVXpwG76v4Gz3Y7s2cgDASsg=,tag:RkEJglER92wrdIcXCZrCag==",
            "int",
          ),
        ),
      ],
      [
        "neg",
        s(
          enc(
            "data:Gtw=,iv:XQCeSk6fC5XoUeIJoHuADEO5am3IZhu+qZypRhMO32s=,tag:ey0Q2omvUk3uuhuTb9luTA==",
            "int",
          ),
        ),
      ],
      [
        "f",
        s(
          enc(
            "data:aw==,iv:Idn6zel8SCBiRmOOuUPk641SeTCQ2mQbkAM2Afo4vus=,tag:t2h3PK5Kyj317Yc+CcGe+Q==",
            "float",
          ),
        ),
      ],
      [
        "big",
        s(
          enc(
            "data:YJ5ddC1Lc+tBSYFIiThIHid04sxvAg==,iv:xgJzteFZEM+UpgIuDnqNOaaYI2ZKK6Y9OEg1pRmd4WM=,tag:zjfaSClev4gWHw4mCpn+Ug==",
            "float",
          ),
        ),
      ],
      [
        "t",
        s(
          enc(
            "data:3tTF+tHTZes3RIvqvKNgTVgAqmM=,iv:0JQOlCE5ml+/k2O5/yAshHSqcUtQ2INhBEuugbLyiK4=,tag:UwoFb6f5In4b5uLflBJIIw==",
            "time",
          ),
        ),
      ],
      [
        "t2",
        s(
          enc(
            "data:YyAJtIAUWJBkHLCRZq6LWnLkzj8nj1MU6EgFUQ==,iv:/a8v7BLCPi8wWWigyVSao70YOjhU94FU1vdeJ9liYqQ=,tag:Y4PbEfjY8YfFpIz8kvAVyw==",
            "time",
          ),
        ),
      ],
      [
        "b",
        s(
          enc(
            "data:ClcYpg==,iv:2q6T4D4dFiMt4wcnsxjmying03zaWzzbt2ycjm9QAYU=,tag:5/KUYoyJYrr7nvnNOY9D+g==",
            "bool",
          ),
        ),
      ],
      ["nothing", { kind: "scalar", type: "null" }],
      ["empty", s("")],
      [
        "list",
        seq(
          s(
            enc(
              "data:hA==,iv:BmBHeOzwDQmF2Vi0+J4KvNm2xAIv787nqjzkNQumndc=,tag:eFcnus5oiEpbGxQ4FSw/+g==",
              "str",
            ),
          ),
          c(
            enc(
              "data:OLHnPZ9mI5I=,iv:5tcExbLcEsG3qzWRBHdgndrbwdQHuJv6CR2RfqsheWc=,tag:wjLzNQqJ/yZkFw/euk8bQw==",
              "comment",
            ),
          ),
          s(
            enc(
              "data:m58=,iv:liL/OQaYz60P7g/+M3BkmvVuoGi64qzZVDLJKvJvSEU=,tag:1HpEwT0Fmq0ZkT3Xg4Sgtw==",
              "int",
            ),
          ),
          seq(
            s(
              enc(
                "data:tYdpPPWD,iv:QqrSBY+mTJIsdBzib+uQ5PRzFARNcSAZQ8IDMPkZSTg=,tag:wHSImUF5sq83epEITHX2eA==",
                "str",
              ),
            ),
            s(
              enc(
                "data:MLZTHq6x9Cqc,iv:EmYegN+48JwT7UprRMl+yUMoR69AdiqCAuw0iIFuF0U=,tag:n7EeHFqY1UOOyxMkGKjgPw==",
                "float",
              ),
            ),
          ),
        ),
      ],
      ["plain_unencrypted", int(5n)],
    ),
    plain: map(
      c(" top comment"),
      ["n", int(42n)],
      ["neg", int(-7n)],
      ["f", float(1)],
      ["big", float(1e21)],
      ["t", time("2024-01-01T00:00:00Z")],
      ["t2", time("2024-05-06T07:08:09.12+02:00")],
      ["b", { kind: "scalar", type: "bool", value: true }],
      ["nothing", { kind: "scalar", type: "null" }],
      ["empty", s("")],
      ["list", seq(s("x"), c(" in list"), int(15n), seq(s("nested"), float(1e-7)))],
      ["plain_unencrypted", int(5n)],
    ),
    metadata: meta(
      "2026-11-30T06:38:39Z",
      enc(
        "data:JVm36wbKCDfYKhW3UBGfGPyaWsTaaa9u4VaaZiokq6nTNAf4DFg2o6ZFfIFQkfe/xUfXt5GHum8UHfbzEXUSR689QPCcQQVr/kvQNgVavwhZzPGHycTtkTJBWcKC+wYH5BgJ4skAmR7uRtgXuqmpCU07Am4yELQ46RwKm0ClPLI=,iv:oF81NkjbKp5yLgITWzvkrwuSvv50bCcsKGNEdH9deGU=,tag:Pps6LNCqzhYyuwiRNToXhw==",
        "str",
      ),
      { kind: "unencrypted_suffix", value: "_unencrypted" },
    ),
  },
  {
    name: "encrypted_comment_regex: marker comments, nesting, comments after a marker",
    keyHex: "8ff048b1723e23095820e92872a390bcd086e5bae28f7ea78429c9281d058449",
    encrypted: map(
      ["a", s("open")],
      c(" sops:enc"),
      [
        "secret",
        s(
          enc(
            "data:/UQ=,iv:gFTaytquVqljm6HO/4xIAajHAJv9RH22KzImCsjQ37U=,tag:qyDpXAhONA6Eqjyqid1DUQ==",
            "str",
          ),
        ),
      ],
      c(" note after marker"),
      ["other", s("o1")],
      [
        "nested",
        map(
          c(" sops:enc"),
          [
            "inner",
            s(
              enc(
                "data:8J0=,iv:3AZeDIds5YAY2LCK7JImN7h7yrzBnaySOdnrS894bF0=,tag:X8f/salk6bUTvDhsp4kw8w==",
                "str",
              ),
            ),
          ],
          ["inner2", s("i2")],
          c(" sops:enc"),
          c(
            enc(
              "data:A07S5/hRbA==,iv:MmgnWyv2+YLluo7Jz7vS8C+htZni7L6L3OQdtGDHRyY=,tag:4OtHbRliDGa9pnpqQrBnfQ==",
              "comment",
            ),
          ),
          [
            "deep",
            map([
              "x",
              s(
                enc(
                  "data:80o=,iv:8i2D8m8NYRRccBcW4xMX+RAqETpKj4HoY1yuqlBCCJ4=,tag:b1n0THqf+ANmgdrAlgNEaA==",
                  "str",
                ),
              ),
            ]),
          ],
        ),
      ],
      ["last", s("l1")],
    ),
    plain: map(
      ["a", s("open")],
      c(" sops:enc"),
      ["secret", s("s1")],
      c(" note after marker"),
      ["other", s("o1")],
      [
        "nested",
        map(c(" sops:enc"), ["inner", s("i1")], ["inner2", s("i2")], c(" sops:enc"), c(" second"), [
          "deep",
          map(["x", s("d1")]),
        ]),
      ],
      ["last", s("l1")],
    ),
    metadata: meta(
      "2026-11-30T06:38:42Z",
      enc(
        "data:YwhEZjUAFno1Mz3NVjjgzcf9RPXtEyRXSHYp3EoybzI7Sra4BDe11hD+WOp5YIuwvwB0gaiZYSFAsxgfBZSGYVfTi4mRimZh+hgMcY3N27VLdFXmNUekMOXGllnSs9NsA/fumE8mhE+LVZqtc/QNdoB1K8kcldVppFV6hbvUvAA=,iv:jcvlQ5uksgm0w5Md00EVK+iFW5bgf530GkreGfSPlUg=,tag:yEZKpNa3lJgdGoz3B0Y3Nw==",
        "str",
      ),
      { kind: "encrypted_comment_regex", value: "sops:enc" },
    ),
  },
  {
    name: "unencrypted_comment_regex: markers and what they cover stay plaintext",
    keyHex: "d3c74c1868ea2bb6f851f8989ab9dc2830b9cd7154440823231995fe939ba5c7",
    encrypted: map(
      [
        "a",
        s(
          enc(
            "data:DrFW5g==,iv:mFh5YXN6BWERbYJwMJjlr+G9p+Q+v5xXSWbTGcyfevE=,tag:eoRN5M6qQEOOlzyATGC60Q==",
            "str",
          ),
        ),
      ],
      c(" sops:plain"),
      ["secret", s("s1")],
      c(
        enc(
          "data:o32iheSynFZvV9ROo1z5lshZ,iv:ZQAPUqUzbKGYn7+gHdRXeccaAMNtGoWbSqfwxZB7D84=,tag:vz+NfedUjsfOyw2iBBcc7A==",
          "comment",
        ),
      ),
      [
        "other",
        s(
          enc(
            "data:TZU=,iv:F6o/vWsqV5JePl/aTDUqfDP5EciX/M7CRmub8QXd3CQ=,tag:Rmc2qwUHmpWnJGg4uyDX+A==",
            "str",
          ),
        ),
      ],
      [
        "nested",
        map(
          c(" sops:plain"),
          ["inner", s("i1")],
          [
            "inner2",
            s(
              enc(
                "data:NVE=,iv:t0HPd8a+/hInbAxk3VkGKLUCHRYdo5JRLZh9ij9tyuA=,tag:ZzFEiN7AzmFGwXTBJhaHjg==",
                "str",
              ),
            ),
          ],
          c(" sops:plain"),
          c(" second"),
          ["deep", map(["x", s("d1")])],
        ),
      ],
      [
        "last",
        s(
          enc(
            "data:Nss=,iv:HtX1sz62jZp0xXD80r/JkAqNNjqmNIxpVw3v5cFgNJg=,tag:VClz4DTIhqwicaOupYDbJg==",
            "str",
          ),
        ),
      ],
    ),
    plain: map(
      ["a", s("open")],
      c(" sops:plain"),
      ["secret", s("s1")],
      c(" note after marker"),
      ["other", s("o1")],
      [
        "nested",
        map(c(" sops:plain"), ["inner", s("i1")], ["inner2", s("i2")], c(" sops:plain"), c(" second"), [
          "deep",
          map(["x", s("d1")]),
        ]),
      ],
      ["last", s("l1")],
    ),
    metadata: meta(
      "2026-11-30T06:38:42Z",
      enc(
        "data:WebCw87NXWUIym7jtqYAcbj8uNkDmkIWDY1QX54PfjpNFg7kD/UPblAV4L127Cyp99mo7o7dYBVBdeV8F5BrzgTFS2aYkUs+svnQesLCM3CxCm6lz/dLWqj6zSNPfcrswqJ4fYrjvDs4Yj6XzOhTufQqhdsIFP/msmdzeTVlM8o=,iv:Bz2hB9y0h+jYbpPZgbGBf6xNr6uhjuIajAhiMt/BWpc=,tag:6kkvEmgEU75hPrMsGjfsTw==",
        "str",
      ),
      { kind: "unencrypted_comment_regex", value: "sops:plain" },
    ),
  },
  {
    name: "mac_only_encrypted with encrypted_regex",
    keyHex: "a1f0ad1aa1c92faac89bf1d9646d09bdb09c605123ea8c8e9b08bd29d62644e1",
    encrypted: map(
      [
        "data",
        map([
          "k",
          s(
            enc(
              "data:5g==,iv:whk3LBqbcAghCS/cO9Jl6eViCu8MeqTLtO1I6zeKpr8=,tag:ptDiNtO5KeAFslabQ6LuyA==",
              "str",
            ),
          ),
        ]),
      ],
      ["meta", s("m")],
      ["num", int(3n)],
    ),
    plain: map(["data", map(["k", s("v")])], ["meta", s("m")], ["num", int(3n)]),
    metadata: meta(
      "2026-11-30T06:38:42Z",
      enc(
        "data:y2SmhU5TQUP3xugssX2iqsApmMDT9m/3krxbXzp8QAnLLe4c/dIsSSDkjdlOmztPIJqm+YAoc/KWwkdsjyEm0Jkuk4BmdupdE8WDoDC09LWSz75DNvYxcQeFDKRO35oI/wS/LyQv34Wb2GNRQFk2qlibZapdL/S3DbofW/txu0g=,iv:hnb58ynl4XPMJzCE4jtaMTmzcyxd+JA3Qv3efYAzh/8=,tag:tGpkhPSojCoizBc7w0JGWA==",
        "str",
      ),
      { kind: "encrypted_regex", value: "^data$" },
      true,
    ),
  },
];

describe("sops 3.13.2 documents, whole-tree decryption", () => {
  for (const doc of MADE) {
    test(doc.name, () => {
      const key = Buffer.from(doc.keyHex, "hex");
      const out = decryptBranches([doc.encrypted], key, doc.metadata);
      assert.deepEqual(out, [doc.plain]);
    });
  }

  test("mac_only_encrypted: unencrypted values are outside the MAC, encrypted ones inside", () => {
    const doc = MADE[3]!;
    const key = Buffer.from(doc.keyHex, "hex");
    const changedPlain = map(
      ["data", (doc.encrypted.items[0] as { value: Value }).value],
      ["meta", s("changed")],
      ["num", int(4n)],
    );
    assert.doesNotThrow(() => decryptBranches([changedPlain], key, doc.metadata));
    // Without the flag the same document does not verify.
    assert.throws(() => decryptBranches([doc.encrypted], key, { ...doc.metadata, macOnlyEncrypted: false }), {
      code: "MAC_MISMATCH",
    });
  });

  test("the binary vector decrypts to the exact expected bytes", () => {
    const exp = JSON.parse(readFileSync(join(expectedDir, "example.txt.expected.json"), "utf8")) as Expected;
    const file = findFile(VECTORS, "example.txt");
    assert.ok(file);
    const found = scan(file);
    const want = readFileSync(join(expectedDir, "example.txt.decrypted"));
    const key = Buffer.from(exp.data_key_hex, "hex");
    const tree = map(["data", s(found.leaves[0]!)]);
    const md = meta(found.lastModified, found.mac!, { kind: "unencrypted_suffix", value: "_unencrypted" });
    const [out] = decryptBranches([tree], key, md);
    const value = (out!.items[0] as { value: Scalar }).value;
    assert.equal(value.type, "str");
    const bytes = typeof value.value === "string" ? utf8.encode(value.value) : (value.value as Uint8Array);
    assert.deepEqual(Buffer.from(bytes), want);
    assert.equal(basename(file), "example.txt");
  });
});
