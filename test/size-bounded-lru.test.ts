/** The size-bounded LRU map (src/size-bounded-lru.ts): its bound, its order and its bookkeeping. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { SizeBoundedLru } from "../src/size-bounded-lru.ts";

test("SizeBoundedLru: the least recently used go first, an oversize entry is not kept, sizes add up", () => {
  const lru = new SizeBoundedLru<string, string>(10, (v) => v.length);
  lru.set("a", "aaaa");
  lru.set("b", "bbbb");
  assert.equal(lru.get("a"), "aaaa", "a is now the most recently used");
  lru.set("c", "cccc"); // 12 > 10: b goes, not a
  assert.equal(lru.get("b"), undefined);
  assert.deepEqual(lru.size, { entries: 2, total: 8 });
  lru.set("a", "a"); // replaced: its old size is given back
  assert.deepEqual(lru.size, { entries: 2, total: 5 });
  lru.set("big", "x".repeat(11));
  assert.equal(lru.get("big"), undefined, "larger than the whole bound");
  assert.deepEqual(lru.size, { entries: 2, total: 5 }, "and nothing else went for it");
  lru.set("a", "y".repeat(11));
  assert.equal(lru.get("a"), undefined, "an oversize replacement drops the old value too");
  lru.delete("c");
  lru.delete("missing");
  assert.deepEqual(lru.size, { entries: 0, total: 0 });
});

test("SizeBoundedLru: peek reads without making the entry the most recently used", () => {
  const lru = new SizeBoundedLru<string, number>(2, () => 1);
  lru.set("a", 1);
  lru.set("b", 2);
  assert.equal(lru.peek("a"), 1);
  lru.set("c", 3); // a is still the least recently used: it goes
  assert.equal(lru.peek("a"), undefined);
  assert.equal(lru.peek("b"), 2);
  assert.equal(lru.peek("c"), 3);
});
