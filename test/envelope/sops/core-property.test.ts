/**
 * Properties of the core as a whole: arbitrary trees survive encrypt -> decrypt under every
 * rule, and every kind of tampering the MAC and the AAD are meant to catch is rejected.
 */

import assert from "node:assert/strict";
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import fc from "fast-check";
import { KEY_KINDS } from "../../../providers/keys/index.ts";
import { formatTimeText, plaintextBytes } from "../../../src/envelope/sops/canonical.ts";
import { decryptBranches, decryptDocument } from "../../../src/envelope/sops/decrypt.ts";
import type { Branch, Comment, Entry, Mapping, Scalar, Value } from "../../../src/envelope/sops/document.ts";
import { encryptBranches, encryptDocument } from "../../../src/envelope/sops/encrypt.ts";
import type { KeyEntry, MasterKey } from "../../../src/envelope/sops/master-key.ts";
import {
  type Metadata,
  metadataFromTree,
  metadataToTree,
  type SelectionRule,
} from "../../../src/envelope/sops/metadata.ts";
import { BootsealError } from "../../../src/errors.ts";

const LM = "2025-01-02T03:04:05Z";
const s = (value: string): Scalar => ({ kind: "scalar", type: "str", value });

const scalarArb: fc.Arbitrary<Scalar> = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 12 }).map(s),
  fc
    .uint8Array({ maxLength: 8 })
    .map((b): Scalar => ({ kind: "scalar", type: "str", value: new Uint8Array([0xff, ...b]) })),
  fc
    .bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
    .map((value): Scalar => ({ kind: "scalar", type: "int", value })),
  fc.double().map((value): Scalar => ({ kind: "scalar", type: "float", value })),
  fc.boolean().map((value): Scalar => ({ kind: "scalar", type: "bool", value })),
  fc
    .record({
      t: fc.integer({ min: 0, max: 253402300799 }),
      nanos: fc.integer({ min: 0, max: 999999999 }),
      off: fc.integer({ min: -23 * 60, max: 23 * 60 }),
    })
    .map(({ t, nanos, off }): Scalar => {
      const d = new Date(t * 1000);
      const value = formatTimeText({
        year: d.getUTCFullYear(),
        month: d.getUTCMonth() + 1,
        day: d.getUTCDate(),
        hour: d.getUTCHours(),
        minute: d.getUTCMinutes(),
        second: d.getUTCSeconds(),
        nanos,
        offsetMinutes: off,
      });
      return { kind: "scalar", type: "time", value };
    }),
  fc.constant<Scalar>({ kind: "scalar", type: "null" }),
);
const keyArb = fc.oneof(
  fc.constantFrom("a", "b_unencrypted", "x_enc", "data", "a:b", ""),
  fc.string({ maxLength: 6 }),
);
const commentArb = fc
  .oneof(fc.constantFrom("mark", " mark", ""), fc.string({ maxLength: 10 }))
  .map((text): Comment => ({ kind: "comment", text }));

const { tree } = fc.letrec<{ tree: Mapping; value: Value; seq: Value }>((tie) => ({
  tree: fc
    .array(
      fc.oneof(
        fc.tuple(keyArb, tie("value")).map(([key, value]): Entry => ({ kind: "entry", key, value })),
        commentArb,
      ),
      {
        maxLength: 5,
      },
    )
    .map((items): Mapping => ({ kind: "map", items })),
  seq: fc
    .array(fc.oneof(tie("value"), commentArb), { maxLength: 4 })
    .map((items): Value => ({ kind: "seq", items })),
  value: fc.oneof({ depthSize: "small", withCrossShrink: true }, scalarArb, tie("tree"), tie("seq")),
}));
const branchArb = tree.filter((b) => !b.items.some((i) => i.kind === "entry" && i.key === "sops"));

const ruleArb: fc.Arbitrary<SelectionRule | null> = fc.constantFrom<SelectionRule | null>(
  null,
  { kind: "unencrypted_suffix", value: "_unencrypted" },
  { kind: "encrypted_suffix", value: "_enc" },
  { kind: "unencrypted_regex", value: "^(a|data)$" },
  { kind: "encrypted_regex", value: "(?i)^DATA$" },
  { kind: "encrypted_comment_regex", value: "^ ?mark" },
  { kind: "unencrypted_comment_regex", value: "^ ?mark" },
);

function metadataFor(mac: string, rule: SelectionRule | null, macOnlyEncrypted: boolean): Metadata {
  return { keyGroups: [], lastModified: LM, mac, rule, macOnlyEncrypted, version: "3.13.2" };
}

/**
 * What sops itself cannot tell apart after a round trip: an empty comment in a list is
 * encrypted to the item `""` (the cipher's isEmpty), which decrypts as an empty string.
 */
function listEmptyCommentsAsStrings(v: Value): Value {
  if (v.kind === "scalar") return v;
  if (v.kind === "map") {
    return {
      ...v,
      items: v.items.map((i) =>
        i.kind === "entry" ? { ...i, value: listEmptyCommentsAsStrings(i.value) } : i,
      ),
    };
  }
  return {
    ...v,
    items: v.items.map((i) =>
      i.kind === "comment" ? (i.text === "" ? s("") : i) : listEmptyCommentsAsStrings(i),
    ),
  };
}

function listHasComment(v: Value): boolean {
  if (v.kind === "scalar") return false;
  if (v.kind === "map") return v.items.some((i) => i.kind === "entry" && listHasComment(i.value));
  return v.items.some((i) => i.kind === "comment" || listHasComment(i));
}

describe("encrypt -> decrypt", () => {
  test("property: any tree under any rule comes back exactly", () => {
    fc.assert(
      fc.property(
        fc.array(branchArb, { minLength: 1, maxLength: 2 }),
        ruleArb,
        fc.boolean(),
        (branches, rule, macOnly) => {
          // sops 3.13.3 fails its own MAC here (a list comment encrypted by an earlier marker
          // is a value when decrypting and resets the markers): test/envelope/sops/list-comments.test.ts.
          fc.pre(rule?.kind !== "encrypted_comment_regex" || !branches.some(listHasComment));
          const key = randomBytes(32);
          const enc = encryptBranches(branches, key, { rule, macOnlyEncrypted: macOnly, lastModified: LM });
          const out = decryptBranches(enc.branches, key, metadataFor(enc.mac, rule, macOnly));
          assert.deepEqual(out.map(listEmptyCommentsAsStrings), branches.map(listEmptyCommentsAsStrings));
        },
      ),
      { numRuns: 300 },
    );
  });

  test("a top-level sops key is ALREADY_ENCRYPTED", () => {
    const b: Branch = { kind: "map", items: [{ kind: "entry", key: "sops", value: s("x") }] };
    assert.throws(() => encryptBranches([b], randomBytes(32), { rule: null, lastModified: LM }), {
      code: "ALREADY_ENCRYPTED",
    });
  });

  test("a number where an encrypted string belongs is BAD_INPUT", () => {
    const b: Branch = {
      kind: "map",
      items: [{ kind: "entry", key: "n", value: { kind: "scalar", type: "int", value: 1n } }],
    };
    assert.throws(
      () => decryptBranches([b], randomBytes(32), metadataFor("", null, false), { ignoreMac: true }),
      {
        code: "BAD_INPUT",
        message: "Expected encrypted value as string",
      },
    );
  });

  test("an undecryptable comment is kept verbatim (pre-3.0 files) and a missing MAC is NO_MAC", () => {
    const key = randomBytes(32);
    const b: Branch = {
      kind: "map",
      items: [
        { kind: "comment", text: " plain old comment" },
        { kind: "entry", key: "k", value: s("v") },
      ],
    };
    const enc = encryptBranches([b], key, { rule: null, lastModified: LM });
    const mixed: Branch = { kind: "map", items: [b.items[0]!, enc.branches[0]!.items[1]!] };
    assert.deepEqual(decryptBranches([mixed], key, metadataFor(enc.mac, null, false)), [b]);
    assert.throws(() => decryptBranches([mixed], key, metadataFor("", null, false)), { code: "NO_MAC" });
    assert.deepEqual(decryptBranches([mixed], key, metadataFor("", null, false), { ignoreMac: true }), [b]);
  });
});

// ---- tampering ------------------------------------------------------------------------------

type Loc = number[];
/**
 * Index paths of the encrypted (non-empty) leaves of a branch. A list's encrypted comment
 * (an `ENC[…,type:comment]` item) is outside the MAC like every comment: left out here.
 */
function encryptedLeaves(v: Value | Comment, at: Loc = []): Loc[] {
  if (v.kind === "comment") return [];
  if (v.kind === "scalar")
    return v.type === "str" &&
      typeof v.value === "string" &&
      v.value.startsWith("ENC[") &&
      !v.value.endsWith(",type:comment]")
      ? [at]
      : [];
  if (v.kind === "map")
    return v.items.flatMap((i, n) => (i.kind === "entry" ? encryptedLeaves(i.value, [...at, n]) : []));
  return v.items.flatMap((i, n) => encryptedLeaves(i, [...at, n]));
}
function get(v: Value, loc: Loc): Value {
  let cur: Value = v;
  for (const n of loc) {
    const item = (cur as Mapping).items[n]!;
    cur = item.kind === "entry" ? item.value : (item as unknown as Value);
  }
  return cur;
}
/** The sops AAD of the value at `loc`: the mapping keys on the way, list positions skipped. */
function aadOf(v: Value, loc: Loc): string {
  const keys: string[] = [];
  let cur: Value = v;
  for (const n of loc) {
    const item = (cur as Mapping).items[n]!;
    if (item.kind === "entry") keys.push(item.key);
    cur = item.kind === "entry" ? item.value : (item as unknown as Value);
  }
  return keys.join(":") + ":";
}

/** Replace the value at `loc`; with `renameKey`, rename the entry holding it instead. */
function set(v: Value, loc: Loc, fn: (old: Value) => Value, renameKey = false): Value {
  if (loc.length === 0) return fn(v);
  const [n, ...rest] = loc as [number, ...number[]];
  const items = [...(v as Mapping).items] as (Entry | Value | Comment)[];
  const item = items[n]!;
  if (item.kind === "entry") {
    if (rest.length === 0 && renameKey) items[n] = { ...item, key: `${item.key}x` };
    else items[n] = { ...item, value: set(item.value, rest, fn, renameKey) };
  } else {
    items[n] = set(item as Value, rest, fn, renameKey);
  }
  return { ...v, items } as Value;
}

function flipInField(value: string, field: string, bit: number): string {
  const m = new RegExp(`${field}:([^,\\]]+)`).exec(value)!;
  const bytes = Buffer.from(m[1]!, "base64");
  bytes[bit % bytes.length]! ^= 1 << (bit % 8);
  return value.replace(m[0], `${field}:${bytes.toString("base64")}`);
}

function rejected(fn: () => unknown): void {
  assert.throws(
    fn,
    (err: unknown) =>
      err instanceof BootsealError &&
      (err.code === "MAC_MISMATCH" || err.code === "DECRYPTION_FAILED" || err.code === "BAD_INPUT"),
  );
}

describe("tampering is rejected", () => {
  const guarded = branchArb.map(
    (b): Branch => ({ ...b, items: [...b.items, { kind: "entry", key: "guard", value: s("secret") }] }),
  );
  const setup = (b: Branch) => {
    const key = randomBytes(32);
    const enc = encryptBranches([b], key, { rule: null, lastModified: LM });
    return {
      key,
      enc: enc.branches[0]!,
      md: metadataFor(enc.mac, null, false),
      leaves: encryptedLeaves(enc.branches[0]!),
    };
  };

  test("property: one changed bit in any value's data, iv or tag", () => {
    fc.assert(
      fc.property(
        guarded,
        fc.nat(),
        fc.constantFrom("data", "iv", "tag"),
        fc.nat(),
        (b, pick, field, bit) => {
          const { key, enc, md, leaves } = setup(b);
          const loc = leaves[pick % leaves.length]!;
          const bad = set(enc, loc, (old) =>
            s(flipInField(String((old as Scalar & { value: string }).value), field, bit)),
          );
          rejected(() => decryptBranches([bad as Branch], key, md));
        },
      ),
      { numRuns: 150 },
    );
  });

  test("property: one changed bit in the mac, or another lastmodified", () => {
    fc.assert(
      fc.property(
        guarded,
        fc.constantFrom("data", "iv", "tag"),
        fc.nat(),
        fc.integer({ min: 1, max: 1e6 }),
        (b, field, bit, dt) => {
          const { key, enc, md } = setup(b);
          rejected(() => decryptBranches([enc], key, { ...md, mac: flipInField(md.mac, field, bit) }));
          const later = new Date(Date.parse(LM) + dt * 1000).toISOString().replace(/\.\d+Z$/, "Z");
          rejected(() => decryptBranches([enc], key, { ...md, lastModified: later }));
        },
      ),
      { numRuns: 100 },
    );
  });

  test("property: swapping two different encrypted values", () => {
    fc.assert(
      fc.property(guarded, fc.nat(), fc.nat(), (b, i, j) => {
        const { key, enc, md, leaves } = setup(b);
        const [p, q] = [leaves[i % leaves.length]!, leaves[j % leaves.length]!];
        const [vp, vq] = [get(enc, p), get(enc, q)];
        const plain = decryptBranches([enc], key, md)[0]!;
        fc.pre(JSON.stringify(p) !== JSON.stringify(q));
        // Same path and same canonical bytes: the swap changes nothing the MAC or AAD can see
        // (only, at most, the type tag: sops does not protect it either).
        const bytesAt = (l: Loc) =>
          Buffer.from(plaintextBytes(get(plain, l) as Scalar) ?? []).toString("hex");
        fc.pre(aadOf(enc, p) !== aadOf(enc, q) || bytesAt(p) !== bytesAt(q));
        const swapped = set(
          set(enc, p, () => vq),
          q,
          () => vp,
        );
        rejected(() => decryptBranches([swapped as Branch], key, md));
      }),
      { numRuns: 150 },
    );
  });

  test("property: renaming a key above an encrypted value", () => {
    fc.assert(
      fc.property(guarded, fc.nat(), fc.nat(), (b, pick, depth) => {
        const { key, enc, md, leaves } = setup(b);
        const loc = leaves[pick % leaves.length]!;
        // Mapping entries on the way down to the leaf.
        const keyed = loc
          .map((_, n) => loc.slice(0, n + 1))
          .filter((l) => {
            const parent = get(enc, l.slice(0, -1));
            return parent.kind === "map";
          });
        const target = keyed[depth % keyed.length]!;
        const renamed = set(enc, target, (old) => old, true);
        rejected(() => decryptBranches([renamed as Branch], key, md));
      }),
      { numRuns: 150 },
    );
  });
});

// ---- whole documents through key groups --------------------------------------------------------

/** A trivial master key: AES-256-GCM under a key held by the test. */
function testKey(id: string, captured: Uint8Array[] = []): MasterKey {
  const kek = randomBytes(32);
  return {
    kind: "age",
    id,
    async wrap(secret) {
      captured.push(secret);
      const iv = randomBytes(12);
      const c = createCipheriv("aes-256-gcm", kek, iv);
      const out = Buffer.concat([iv, c.update(secret), c.final(), c.getAuthTag()]);
      return out.toString("base64");
    },
    async unwrap(enc) {
      const raw = Buffer.from(enc, "base64");
      const d = createDecipheriv("aes-256-gcm", kek, raw.subarray(0, 12));
      d.setAuthTag(raw.subarray(raw.length - 16));
      try {
        const out = new Uint8Array(Buffer.concat([d.update(raw.subarray(12, raw.length - 16)), d.final()]));
        captured.push(out);
        return out;
      } catch {
        return null;
      }
    },
    toMetadata: (enc): KeyEntry => ({
      kind: "age",
      enc,
      fields: new Map([
        ["recipient", id],
        ["enc", enc],
      ]),
    }),
  };
}

describe("encryptDocument / decryptDocument", () => {
  const doc: Branch = {
    kind: "map",
    items: [
      { kind: "comment", text: " hello" },
      { kind: "entry", key: "token", value: s("abc") },
      { kind: "entry", key: "n", value: { kind: "scalar", type: "int", value: 42n } },
    ],
  };

  test("one group: round trip through the metadata tree; data keys are zeroed", async () => {
    const seen: Uint8Array[] = [];
    const k = testKey("age1test", seen);
    const now = new Date(Date.UTC(2025, 5, 1, 12, 0, 0, 250));
    const { branches, metadata } = await encryptDocument([doc], { keyGroups: [[k]], now });
    assert.equal(metadata.version, "3.13.2");
    assert.equal(metadata.lastModified, "2025-06-01T12:00:00Z");
    assert.deepEqual(metadata.rule, { kind: "unencrypted_suffix", value: "_unencrypted" });
    assert.equal(metadata.shamirThreshold, undefined);
    const md = metadataFromTree(metadataToTree(metadata, KEY_KINDS), KEY_KINDS);
    const resolve = (e: KeyEntry) => (e.fields.get("recipient") === k.id ? k : null);
    const out = await decryptDocument(branches, md, { resolve });
    assert.deepEqual(out, [doc]);
    assert.equal(seen.length, 2);
    for (const key of seen)
      assert.ok(
        key.every((b) => b === 0),
        "data key zeroed after use",
      );
  });

  test("two groups with Shamir, tampering still caught, no key -> NO_KEY_AVAILABLE", async () => {
    const [a, b] = [testKey("age1a"), testKey("age1b")];
    const { branches, metadata } = await encryptDocument([doc], { keyGroups: [[a], [b]] });
    assert.equal(metadata.shamirThreshold, 2);
    const md = metadataFromTree(metadataToTree(metadata, KEY_KINDS), KEY_KINDS);
    const resolve = (e: KeyEntry) => [a, b].find((k) => k.id === e.fields.get("recipient")) ?? null;
    assert.deepEqual(await decryptDocument(branches, md, { resolve }), [doc]);
    const tampered = { ...md, lastModified: "2000-01-01T00:00:00Z" };
    await assert.rejects(decryptDocument(branches, tampered, { resolve }), { code: "MAC_MISMATCH" });
    await assert.rejects(decryptDocument(branches, md, { resolve: () => null }), {
      code: "NO_KEY_AVAILABLE",
    });
  });

  test("no rule given records sops's default, a single-value document none; a bad rule fails before any key is used", async () => {
    const seen: Uint8Array[] = [];
    const keyGroups = [[testKey("age1x")]];
    const DEFAULT = { kind: "unencrypted_suffix", value: "_unencrypted" };
    assert.deepEqual((await encryptDocument([doc], { keyGroups, rule: null })).metadata.rule, DEFAULT);
    assert.deepEqual((await encryptDocument([doc], { keyGroups })).metadata.rule, DEFAULT);
    // Binary input (Codec.singleValue): the rule and mac_only_encrypted are ignored, as sops does.
    const single = await encryptDocument([doc], {
      keyGroups,
      rule: { kind: "encrypted_regex", value: "^nothing$" },
      macOnlyEncrypted: true,
      singleValue: true,
    });
    assert.equal(single.metadata.rule, null);
    assert.equal(single.metadata.macOnlyEncrypted, false);
    await assert.rejects(
      encryptDocument([doc], {
        keyGroups: [[testKey("age1y", seen)]],
        rule: { kind: "encrypted_regex", value: "(" },
      }),
      { code: "BAD_INPUT" },
    );
    assert.equal(seen.length, 0);
  });
});
