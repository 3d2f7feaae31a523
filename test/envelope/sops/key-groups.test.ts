import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import fc from "fast-check";
import { DEFAULT_DECRYPTION_ORDER, type KeyKind } from "../../../providers/keys/index.ts";
import { unwrapDataKey, wrapDataKey } from "../../../src/envelope/sops/key-groups.ts";
import type { KeyEntry, KeyResolver, MasterKey } from "../../../src/envelope/sops/master-key.ts";
import { BootsealError, NoKeyAvailableError } from "../../../src/errors.ts";

/**
 * An in-memory master key: enc is a made-up token, the secret is kept in `vault`.
 * `behaviour` decides what unwrap does; `seen` records wrap inputs (the caller's buffers)
 * and `returned` the buffers unwrap handed out, so tests can check they were zeroed.
 */
interface FakeKey extends MasterKey {
  behaviour: "ok" | "null" | "throw" | "short";
  readonly seen: Uint8Array[];
  readonly copies: Uint8Array[];
  readonly returned: Uint8Array[];
}

const vault = new Map<string, Uint8Array>();
let counter = 0;
const calls: string[] = [];

function fakeKey(kind: KeyKind, id: string, behaviour: FakeKey["behaviour"] = "ok"): FakeKey {
  const key: FakeKey = {
    kind,
    id,
    behaviour,
    seen: [],
    copies: [],
    returned: [],
    async wrap(secret) {
      key.seen.push(secret);
      key.copies.push(Uint8Array.from(secret));
      const enc = `fake:${id}:${counter++}`;
      vault.set(enc, Uint8Array.from(secret));
      return enc;
    },
    async unwrap(enc) {
      calls.push(id);
      if (key.behaviour === "null") return null;
      if (key.behaviour === "throw") throw new BootsealError("KEY_ACCESS_DENIED", `denied for ${id}`);
      const stored = vault.get(enc);
      if (stored === undefined) throw new BootsealError("BAD_INPUT", "unknown enc");
      const out = key.behaviour === "short" ? stored.slice(0, 16) : Uint8Array.from(stored);
      key.returned.push(out);
      return out;
    },
    toMetadata(enc, createdAt) {
      return {
        kind,
        enc,
        fields: new Map([
          ["id", id],
          ["created_at", createdAt.toISOString()],
          ["enc", enc],
        ]),
      };
    },
  };
  return key;
}

/** Carries the registry's default order, as resolverFor's resolvers do. */
function resolverOf(keys: readonly FakeKey[]): KeyResolver {
  const resolve = (entry: KeyEntry) => keys.find((k) => k.id === entry.fields.get("id")) ?? null;
  return Object.assign(resolve, { order: DEFAULT_DECRYPTION_ORDER });
}

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

describe("wrapDataKey", () => {
  test("one group: every key wraps the whole data key; entries carry the given time", async () => {
    const dataKey = randomBytes(32);
    const keys = [fakeKey("age", "a"), fakeKey("pgp", "p")];
    const now = new Date("2024-05-06T07:08:09Z");
    const entries = await wrapDataKey(dataKey, [keys], { now, threshold: 7 });
    assert.equal(entries.length, 1);
    assert.deepEqual(
      entries[0]?.map((e) => e.fields.get("id")),
      ["a", "p"],
    );
    for (const k of keys) assert.deepEqual(k.copies[0], Uint8Array.from(dataKey));
    assert.equal(entries[0]?.[0]?.fields.get("created_at"), now.toISOString());
    // The caller's data key is the caller's: not zeroed by wrapping.
    assert.ok(dataKey.some((b) => b !== 0));
  });

  test("several groups: each key of group i wraps share i (x = i + 1); shares zeroed after", async () => {
    const groups = [
      [fakeKey("age", "g0a"), fakeKey("pgp", "g0p")],
      [fakeKey("age", "g1")],
      [fakeKey("kms", "g2")],
    ];
    await wrapDataKey(randomBytes(32), groups, { threshold: 2 });
    groups.forEach((group, i) => {
      for (const key of group) {
        assert.equal(key.copies[0]?.length, 33);
        assert.equal(key.copies[0]?.[32], i + 1);
        assert.ok(
          key.seen[0]?.every((b) => b === 0),
          "share buffer zeroed",
        );
      }
      assert.deepEqual(group[0]?.copies[0], group.at(-1)?.copies[0]);
    });
  });

  test("configuration errors", async () => {
    const k = () => [fakeKey("age", "x")];
    await assert.rejects(wrapDataKey(randomBytes(32), []), code("USAGE"));
    await assert.rejects(wrapDataKey(randomBytes(32), [k(), []]), code("USAGE"));
    await assert.rejects(wrapDataKey(randomBytes(32), [k(), k()], { threshold: 1 }), code("USAGE"));
    await assert.rejects(wrapDataKey(randomBytes(32), [k(), k()], { threshold: 3 }), code("USAGE"));
    await assert.rejects(wrapDataKey(randomBytes(31), [k()]), code("BAD_INPUT"));
  });

  test("a failing wrap fails the whole operation", async () => {
    const bad = fakeKey("age", "bad");
    bad.wrap = async () => {
      throw new BootsealError("KEY_UNAVAILABLE", "down");
    };
    await assert.rejects(
      wrapDataKey(randomBytes(32), [[fakeKey("age", "ok"), bad]]),
      code("KEY_UNAVAILABLE"),
    );
  });
});

describe("unwrapDataKey", () => {
  test("tries keys in decryption order (age, pgp, others), first success wins", async () => {
    const dataKey = randomBytes(32);
    const keys = [fakeKey("kms", "k"), fakeKey("pgp", "p"), fakeKey("age", "a", "null")];
    const entries = await wrapDataKey(dataKey, [keys]);
    calls.length = 0;
    assert.deepEqual(await unwrapDataKey(entries, resolverOf(keys)), Uint8Array.from(dataKey));
    assert.deepEqual(calls, ["a", "p"]);
    calls.length = 0;
    await unwrapDataKey(entries, resolverOf(keys), { order: ["kms", "age"] });
    assert.deepEqual(calls, ["k"]);
    // A resolver without an order: the group's keys in document order.
    calls.length = 0;
    const plain = (entry: KeyEntry) => keys.find((k) => k.id === entry.fields.get("id")) ?? null;
    await unwrapDataKey(entries, plain);
    assert.deepEqual(calls, ["k"]);
  });

  test("collects every key's failure: resolver null, unwrap null, unwrap throwing", async () => {
    const keys = [fakeKey("age", "a", "null"), fakeKey("pgp", "p", "throw"), fakeKey("kms", "unresolved")];
    const entries = await wrapDataKey(randomBytes(32), [keys]);
    const resolve = resolverOf(keys.slice(0, 2));
    const err = await unwrapDataKey(entries, resolve).then(
      () => assert.fail("expected a failure"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof NoKeyAvailableError);
    assert.deepEqual(
      err.failures.map((f) => f.keyId),
      ["a", "p", "unresolved"],
    );
    assert.match(err.failures[1]?.reason ?? "", /denied for p/);
    assert.match(err.failures[2]?.reason ?? "", /kms keys are not available/);
  });

  test("a resolver that throws (malformed entry) counts as that key's failure", async () => {
    const good = fakeKey("pgp", "good");
    const entries = await wrapDataKey(randomBytes(32), [[fakeKey("age", "broken"), good]]);
    const resolve: KeyResolver = (entry) => {
      if (entry.fields.get("id") === "broken")
        throw new BootsealError("BAD_INPUT", "age entry without a recipient");
      return good;
    };
    assert.equal((await unwrapDataKey(entries, resolve)).length, 32);
  });

  test("threshold semantics: 2 of 3 groups suffice, 1 does not", async () => {
    const dataKey = randomBytes(32);
    const keys = [fakeKey("age", "g0"), fakeKey("age", "g1"), fakeKey("age", "g2")];
    const entries = await wrapDataKey(
      dataKey,
      keys.map((k) => [k]),
      { threshold: 2 },
    );
    (keys[1] as FakeKey).behaviour = "null";
    assert.deepEqual(
      await unwrapDataKey(entries, resolverOf(keys), { threshold: 2 }),
      Uint8Array.from(dataKey),
    );
    // Recovered shares are zeroed once combined.
    for (const k of keys) for (const r of k.returned) assert.ok(r.every((b) => b === 0));
    (keys[2] as FakeKey).behaviour = "throw";
    await assert.rejects(unwrapDataKey(entries, resolverOf(keys), { threshold: 2 }), (e: unknown) => {
      assert.ok(e instanceof NoKeyAvailableError);
      assert.match(e.message, /1 of 2 required key groups/);
      assert.deepEqual(
        e.failures.map((f) => f.keyId),
        ["g1", "g2"],
      );
      return true;
    });
    // Without a threshold, every group is needed.
    (keys[2] as FakeKey).behaviour = "ok";
    await assert.rejects(unwrapDataKey(entries, resolverOf(keys)), NoKeyAvailableError);
  });

  test("a single group ignores the threshold field", async () => {
    const dataKey = randomBytes(32);
    const keys = [fakeKey("age", "solo")];
    const entries = await wrapDataKey(dataKey, [keys]);
    assert.deepEqual(
      await unwrapDataKey(entries, resolverOf(keys), { threshold: 5 }),
      Uint8Array.from(dataKey),
    );
  });

  test("a data key of the wrong length is BAD_INPUT, not a key", async () => {
    const keys = [fakeKey("age", "short", "short")];
    const entries = await wrapDataKey(randomBytes(32), [keys]);
    await assert.rejects(unwrapDataKey(entries, resolverOf(keys)), code("BAD_INPUT"));
    assert.ok(keys[0]?.returned[0]?.every((b) => b === 0));
  });

  test("no groups is BAD_INPUT; an aborted signal stops at once", async () => {
    await assert.rejects(
      unwrapDataKey([], () => null),
      code("BAD_INPUT"),
    );
    const keys = [fakeKey("age", "x")];
    const entries = await wrapDataKey(randomBytes(32), [keys]);
    await assert.rejects(unwrapDataKey(entries, resolverOf(keys), { signal: AbortSignal.abort() }), {
      name: "AbortError",
    });
  });

  test("property: wrap then unwrap through any threshold-sized set of groups", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 0, max: 100 }),
        async (groupCount, t, pick) => {
          const dataKey = randomBytes(32);
          const keys = Array.from({ length: groupCount }, (_, i) => [fakeKey("age", `p${counter}-${i}`)]);
          const threshold = groupCount === 1 ? 0 : 2 + (t % (groupCount - 1));
          const entries: KeyEntry[][] = await wrapDataKey(dataKey, keys, { threshold });
          const needed = Math.max(threshold, 1);
          // Close every group outside a rotated window of `needed` groups.
          keys.forEach((g, i) => {
            const inWindow = (i - pick + groupCount * 10) % groupCount < needed;
            (g[0] as FakeKey).behaviour = inWindow ? "ok" : "null";
          });
          const out = await unwrapDataKey(entries, resolverOf(keys.flat()), { threshold });
          assert.deepEqual(out, Uint8Array.from(dataKey));
        },
      ),
      { numRuns: 60 },
    );
  });
});
