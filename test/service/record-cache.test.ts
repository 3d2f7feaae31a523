/** The replica's last-seen record cache (src/service/record-cache.ts): bounds and contention. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { RecordCache } from "../../src/service/record-cache.ts";

/** A record's JSON text of `size` characters, named by its first one. */
const v = (name: string, size: number, etag = `"${name}"`) => ({ value: name.padEnd(size, "."), etag });
const nameOf = (cache: RecordCache, key: string) => cache.get(key)?.value.replace(/\.+$/, "");

test("bounded by the size of the JSON text held: the least recently used go first, and a use refreshes an entry", () => {
  const cache = new RecordCache({ maxBytes: 300 });
  cache.set("a", v("a", 100));
  cache.set("b", v("b", 100));
  cache.set("c", v("c", 100));
  assert.equal(nameOf(cache, "a"), "a"); // a is now the most recent
  cache.set("d", v("d", 100)); // over the bound: b (least recent) goes
  assert.equal(cache.get("b"), undefined);
  assert.deepEqual(
    ["a", "c", "d"].map((k) => nameOf(cache, k)),
    ["a", "c", "d"],
  );
  assert.deepEqual(cache.size, { entries: 3, bytes: 300 });
  cache.set("huge", v("huge", 301)); // larger than the whole cache: not kept, nothing evicted
  assert.equal(cache.get("huge"), undefined);
  assert.equal(cache.size.entries, 3);
});

test("replacing an entry replaces its size; an entry without an etag is not kept", () => {
  const cache = new RecordCache({ maxBytes: 1000 });
  cache.set("a", v("a", 400));
  cache.set("a", v("a2", 100));
  assert.deepEqual(cache.size, { entries: 1, bytes: 100 });
  assert.equal(nameOf(cache, "a"), "a2");
  cache.set("b", v("b", 10, ""));
  assert.equal(cache.get("b"), undefined);
});

test("a key that lost a race is not cached again until its contention window passes", () => {
  let now = 0;
  const cache = new RecordCache({ contendedMs: 1000, now: () => now });
  cache.set("a", v("a", 10));
  cache.lostRace("a");
  assert.equal(cache.get("a"), undefined);
  cache.set("a", v("a", 10));
  assert.equal(cache.get("a"), undefined, "still contended");
  now = 1001;
  cache.set("a", v("a", 10));
  assert.equal(nameOf(cache, "a"), "a", "cached again after the window");
});

test("the contended set is bounded too", () => {
  const cache = new RecordCache({ maxContended: 2, now: () => 0 });
  for (const k of ["a", "b", "c"]) cache.lostRace(k);
  cache.set("a", v("a", 1)); // a was pushed out of the contended set: cached again
  cache.set("c", v("c", 1)); // c is still contended
  assert.equal(nameOf(cache, "a"), "a");
  assert.equal(cache.get("c"), undefined);
});

test("checking a contended key does not keep it longer: the first marked go first", () => {
  const cache = new RecordCache({ maxContended: 2, now: () => 0 });
  cache.lostRace("a");
  cache.lostRace("b");
  cache.set("a", v("a", 1)); // a checked (still contended), not refreshed
  cache.lostRace("c"); // a, marked first, goes
  cache.set("a", v("a", 1));
  cache.set("b", v("b", 1));
  assert.equal(nameOf(cache, "a"), "a");
  assert.equal(cache.get("b"), undefined);
});
