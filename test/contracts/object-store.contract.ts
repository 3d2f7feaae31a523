/**
 * The ObjectStore contract, run once per implementation and peer (test/providers/stores/
 * contract.test.ts). Every store must: round-trip bytes exactly with a stable etag; refuse a
 * second create-only write and a stale compare-and-swap with PRECONDITION_FAILED; let exactly
 * one of N racing writers win; list everything under a prefix, across pages (in no promised order);
 * delete idempotently; refuse malformed keys with BAD_INPUT.
 *
 * The factory is called once; give it a page size of at most 10 (StoreOptions) so the listing
 * test, which writes 25 objects, crosses pages. Each test writes under its own sub-prefix.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import type { ObjectInfo, ObjectStore } from "../../providers/stores/object-store.ts";
import type { ErrorCode } from "../../src/errors.ts";
import { BootsealError } from "../../src/errors.ts";

const RACERS = 8;
const LISTED = 25;

const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
const dec = (b: Uint8Array): string => new TextDecoder().decode(b);

function code(expected: ErrorCode): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof BootsealError, `expected a BootsealError ${expected}, got ${String(err)}`);
    assert.equal(err.code, expected, err.message);
    return true;
  };
}

async function collect(items: AsyncIterable<ObjectInfo>): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  for await (const item of items) out.push(item);
  return out;
}

function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

const BAD_KEYS = [
  "",
  "/leading",
  "trailing/",
  "a//b",
  "../escape",
  "a/../../escape",
  "a/./b",
  "..",
  "tab\there",
  "nul\u0000",
  "new\nline",
  "back\\slash",
  "a/.bootseal-lock.x",
  "x".repeat(1025),
];

export function objectStoreContract(name: string, makeStore: () => Promise<ObjectStore>): void {
  describe(`ObjectStore contract: ${name}`, () => {
    let store: ObjectStore;
    before(async () => {
      store = await makeStore();
    });

    test("put, get and head round-trip bytes, size and a stable etag", async () => {
      const body = Uint8Array.from({ length: 512 }, (_, i) => i % 256); // every byte value, twice
      const put = await store.put("roundtrip/configs/default/m-0", body, { unconditional: true });
      assert.equal(put.key, "roundtrip/configs/default/m-0");
      assert.equal(put.size, 512);
      assert.ok(put.etag.length > 0);
      assert.ok(!Number.isNaN(put.lastModified.getTime()));
      const got = await store.get("roundtrip/configs/default/m-0");
      assert.ok(got);
      assert.deepEqual(Buffer.from(got.body), Buffer.from(body));
      assert.equal(got.etag, put.etag);
      assert.equal(got.size, 512);
      const head = await store.head("roundtrip/configs/default/m-0");
      assert.ok(head);
      assert.equal(head.etag, put.etag);
      assert.equal(head.size, 512);
      assert.equal((await store.head("roundtrip/configs/default/m-0"))?.etag, put.etag);
      const other = await store.put("roundtrip/configs/default/m-0", enc("different"), {
        unconditional: true,
      });
      assert.notEqual(other.etag, put.etag, "a new content has a new etag");
    });

    test("empty bodies and non-ASCII keys round-trip", async () => {
      const empty = await store.put("roundtrip/empty", new Uint8Array(), { ifNoneMatch: "*" });
      assert.equal(empty.size, 0);
      assert.equal((await store.get("roundtrip/empty"))?.body.byteLength, 0);
      const key = "roundtrip/näme with spaces+plus=%25/ö";
      await store.put(key, enc("unicode"), { unconditional: true });
      assert.equal(dec((await store.get(key))!.body), "unicode");
      const listed = await collect(store.list("roundtrip/näme"));
      assert.deepEqual(
        listed.map((o) => o.key),
        [key],
      );
    });

    test("get and head of a missing key are null", async () => {
      assert.equal(await store.get("missing/nothing-here"), null);
      assert.equal(await store.head("missing/nothing-here"), null);
    });

    test("a second create-only write fails with PRECONDITION_FAILED", async () => {
      await store.put("create/once", enc("one"), { ifNoneMatch: "*" });
      await assert.rejects(
        store.put("create/once", enc("two"), { ifNoneMatch: "*" }),
        code("PRECONDITION_FAILED"),
      );
      assert.equal(dec((await store.get("create/once"))!.body), "one");
    });

    test("compare-and-swap succeeds with the current etag and fails with a stale one", async () => {
      const v1 = await store.put("cas/doc", enc("v1"), { ifNoneMatch: "*" });
      const v2 = await store.put("cas/doc", enc("v2"), { ifMatch: v1.etag });
      assert.notEqual(v2.etag, v1.etag);
      assert.equal((await store.head("cas/doc"))?.etag, v2.etag);
      await assert.rejects(
        store.put("cas/doc", enc("v3"), { ifMatch: v1.etag }),
        code("PRECONDITION_FAILED"),
      );
      assert.equal(dec((await store.get("cas/doc"))!.body), "v2");
      await assert.rejects(
        store.put("cas/absent", enc("x"), { ifMatch: v2.etag }),
        code("PRECONDITION_FAILED"),
      );
      assert.equal(await store.head("cas/absent"), null);
      await assert.rejects(
        store.put("cas/doc", enc("v3"), { ifMatch: '"not-an-etag"' }),
        code("PRECONDITION_FAILED"),
      );
    });

    test(`of ${RACERS} racing create-only writers exactly one wins`, async () => {
      const results = await Promise.allSettled(
        Array.from({ length: RACERS }, (_, i) =>
          store.put("race/create", enc(`racer-${i}`), { ifNoneMatch: "*" }),
        ),
      );
      const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
      assert.equal(winners.length, 1, `winners: ${winners.join(",")}`);
      for (const r of results) if (r.status === "rejected") code("PRECONDITION_FAILED")(r.reason);
      assert.equal(dec((await store.get("race/create"))!.body), `racer-${winners[0]}`);
    });

    test(`of ${RACERS} racing compare-and-swap writers from one etag exactly one wins`, async () => {
      const base = await store.put("race/cas", enc("base"), { unconditional: true });
      const results = await Promise.allSettled(
        Array.from({ length: RACERS }, (_, i) =>
          store.put("race/cas", enc(`update-${i}`), { ifMatch: base.etag }),
        ),
      );
      const winners = results.flatMap((r, i) => (r.status === "fulfilled" ? [i] : []));
      assert.equal(winners.length, 1, `winners: ${winners.join(",")}`);
      for (const r of results) if (r.status === "rejected") code("PRECONDITION_FAILED")(r.reason);
      const got = await store.get("race/cas");
      assert.equal(dec(got!.body), `update-${winners[0]}`);
      const won = results[winners[0]!];
      assert.equal(won?.status === "fulfilled" ? won.value.etag : "", got!.etag);
    });

    test(`list returns all ${LISTED} objects under a prefix, across pages`, async () => {
      const written = new Map<string, string>();
      for (let i = 0; i < LISTED; i++) {
        const key = `list/items/${String(i).padStart(3, "0")}${i % 5 === 0 ? "/nested" : ""}`;
        const info = await store.put(key, enc(`item ${i}`), { ifNoneMatch: "*" });
        written.set(key, info.etag);
      }
      await store.put("list/items-sibling", enc("sibling"), { unconditional: true });
      await store.put("list/other/x", enc("other"), { unconditional: true });
      // Order is not part of the contract: S3 and GCS list in byte order, SeaweedFS directory
      // by directory ("list/items/..." before "list/items-sibling").
      const listed = await collect(store.list("list/items/"));
      assert.deepEqual(listed.map((o) => o.key).sort(byteOrder), [...written.keys()].sort(byteOrder));
      for (const o of listed) {
        assert.equal(o.etag, written.get(o.key), `etag of ${o.key}`);
        assert.equal(o.size, enc(`item ${Number(o.key.slice(11, 14))}`).byteLength);
      }
      // A prefix that is not a whole segment.
      const partial = (await collect(store.list("list/items"))).map((o) => o.key).sort(byteOrder);
      assert.deepEqual(partial, ["list/items-sibling", ...[...written.keys()].sort(byteOrder)]);
      const sub = (await collect(store.list("list/items/00"))).map((o) => o.key).sort(byteOrder);
      assert.deepEqual(sub, [
        "list/items/000/nested",
        "list/items/001",
        "list/items/002",
        "list/items/003",
        "list/items/004",
        "list/items/005/nested",
        "list/items/006",
        "list/items/007",
        "list/items/008",
        "list/items/009",
      ]);
      assert.deepEqual(await collect(store.list("list/none/")), []);
      const all = (await collect(store.list(""))).map((o) => o.key);
      assert.ok(all.includes("list/other/x") && all.includes("create/once"));
      assert.equal(new Set(all).size, all.length, "no key listed twice");
    });

    test("delete is idempotent; a second delete returns false", async () => {
      await store.put("delete/plain", enc("x"), { unconditional: true });
      assert.equal(await store.delete("delete/plain"), true);
      assert.equal(await store.get("delete/plain"), null);
      assert.equal(await store.delete("delete/plain"), false);
      assert.equal(await store.delete("delete/never-existed"), false);
      // The key can be created again afterwards, create-only.
      await store.put("delete/plain", enc("again"), { ifNoneMatch: "*" });
      assert.equal(dec((await store.get("delete/plain"))!.body), "again");
    });

    test("a conditional delete with a stale etag fails and keeps the object", async () => {
      const v1 = await store.put("delete/cond", enc("v1"), { unconditional: true });
      const v2 = await store.put("delete/cond", enc("v2"), { ifMatch: v1.etag });
      await assert.rejects(store.delete("delete/cond", { ifMatch: v1.etag }), code("PRECONDITION_FAILED"));
      assert.equal(dec((await store.get("delete/cond"))!.body), "v2");
      assert.equal(await store.delete("delete/cond", { ifMatch: v2.etag }), true);
      assert.equal(await store.head("delete/cond"), null);
      assert.equal(await store.delete("delete/cond", { ifMatch: v2.etag }), false, "already gone");
    });

    test("malformed keys and prefixes are refused with BAD_INPUT", async () => {
      for (const key of BAD_KEYS) {
        await assert.rejects(store.get(key), code("BAD_INPUT"), `get ${JSON.stringify(key)}`);
        await assert.rejects(store.head(key), code("BAD_INPUT"), `head ${JSON.stringify(key)}`);
        await assert.rejects(
          store.put(key, enc("x"), { unconditional: true }),
          code("BAD_INPUT"),
          `put ${key}`,
        );
        await assert.rejects(store.delete(key), code("BAD_INPUT"), `delete ${JSON.stringify(key)}`);
      }
      for (const prefix of ["../", "/abs", "a//", "a/../b"]) {
        await assert.rejects(collect(store.list(prefix)), code("BAD_INPUT"), `list ${prefix}`);
      }
    });

    test("an aborted signal stops a call", async () => {
      const signal = AbortSignal.abort();
      await assert.rejects(store.get("roundtrip/empty", { signal }), { name: "AbortError" });
      await assert.rejects(store.put("abort/x", enc("x"), { unconditional: true }, { signal }), {
        name: "AbortError",
      });
      assert.equal(await store.head("abort/x"), null);
    });
  });
}
