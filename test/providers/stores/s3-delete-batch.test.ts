/**
 * The S3 store's grouped conditional deletes (providers/stores/s3-delete-batch.ts) with a
 * DOUBLE of the two calls (the real server's answers are in s3.test.ts against SeaweedFS and
 * moto): what goes alone, what goes together, and what each caller is told.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import {
  type ConditionalDelete,
  DeleteBatcher,
  deleteObjectsErrors,
  deleteObjectsRequest,
} from "../../../providers/stores/s3-delete-batch.ts";
import { BootsealError } from "../../../src/errors.ts";

/** A DOUBLE of the store's calls: records each, answers from `refuse` (key -> S3 error code). */
function doubleCalls(refuse: Record<string, string> = {}, failMany = false) {
  const calls: string[] = [];
  const waiting: (() => void)[] = [];
  const gate = () => new Promise<void>((resolve) => waiting.push(resolve));
  return {
    calls,
    /** Lets the oldest call still waiting answer. */
    releaseNext: () => waiting.shift()?.(),
    one: async (e: ConditionalDelete) => {
      calls.push(`one ${e.key}`);
      await gate();
      if (refuse[e.key] === "PreconditionFailed") throw new BootsealError("PRECONDITION_FAILED", "changed");
      return refuse[e.key] !== "NoSuchKey";
    },
    many: async (entries: readonly ConditionalDelete[]) => {
      calls.push(`many ${entries.map((e) => e.key).join(",")}`);
      await gate();
      if (failMany) throw new BootsealError("STORE_UNAVAILABLE", "down");
      return new Map(entries.filter((e) => refuse[e.key]).map((e) => [e.key, refuse[e.key] as string]));
    },
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A delete that goes alone (nothing else waits), `keys` queued behind it; the first answered. */
async function firstThenRound(calls: { releaseNext(): void }, batcher: DeleteBatcher, keys: string[]) {
  const first = batcher.delete({ key: "first", etag: '"1"' });
  const round = keys.map((key) => batcher.delete({ key, etag: '"1"' }));
  await tick();
  calls.releaseNext(); // the first, alone
  await tick();
  return { first, round };
}

test("DOUBLE calls: the first goes alone, those that arrive meanwhile go together (at most maxKeys, a key once per round)", async () => {
  const calls = doubleCalls();
  const batcher = new DeleteBatcher(calls, 3);
  const answers = ["a", "b", "c", "b", "d", "e"].map((key) => batcher.delete({ key, etag: '"1"' }));
  await tick();
  assert.deepEqual(calls.calls, ["one a"]);
  calls.releaseNext();
  await tick();
  assert.deepEqual(calls.calls, ["one a", "many b,c,d"], "the second b waits for the next round");
  calls.releaseNext();
  await tick();
  assert.deepEqual(calls.calls, ["one a", "many b,c,d", "many b,e"]);
  calls.releaseNext();
  assert.deepEqual(await Promise.all(answers), [true, true, true, true, true, true]);
});

test("DOUBLE calls: NoSuchKey in a batch is false; any other refusal is tried alone, whose answer the caller gets", async () => {
  const calls = doubleCalls({ gone: "NoSuchKey", stale: "PreconditionFailed" });
  const batcher = new DeleteBatcher(calls);
  const { first, round: rest } = await firstThenRound(calls, batcher, ["gone", "stale", "ok"]);
  calls.releaseNext(); // the batch
  await tick();
  assert.deepEqual(calls.calls, ["one first", "many gone,stale,ok", "one stale"]);
  calls.releaseNext(); // stale, alone again
  assert.equal(await first, true);
  const [gone, stale, ok] = await Promise.allSettled(rest);
  assert.deepEqual(gone, { status: "fulfilled", value: false });
  assert.ok(stale?.status === "rejected" && (stale.reason as BootsealError).code === "PRECONDITION_FAILED");
  assert.deepEqual(ok, { status: "fulfilled", value: true });
});

test("DOUBLE calls: an answer naming a key the batch did not send: every delete of the round is made alone", async () => {
  const calls = doubleCalls();
  const many = calls.many;
  const batcher = new DeleteBatcher({
    one: calls.one,
    many: async (entries) => {
      await many(entries);
      return new Map([["a%20b", "PreconditionFailed"]]); // "a b" spelled another way
    },
  });
  const { first, round } = await firstThenRound(calls, batcher, ["a b", "c"]);
  calls.releaseNext(); // the batch
  await tick();
  assert.deepEqual(calls.calls, ["one first", "many a b,c", "one a b", "one c"]);
  calls.releaseNext();
  await tick();
  calls.releaseNext();
  assert.equal(await first, true);
  assert.deepEqual(await Promise.all(round), [true, true]);
});

test("DOUBLE calls: a failed DeleteObjects fails every delete of its round, and the queue goes on", async () => {
  const calls = doubleCalls({}, true);
  const batcher = new DeleteBatcher(calls);
  const { first, round } = await firstThenRound(calls, batcher, ["a", "b"]);
  calls.releaseNext(); // the batch
  assert.equal(await first, true);
  for (const r of await Promise.allSettled(round)) {
    assert.ok(r.status === "rejected" && (r.reason as BootsealError).code === "STORE_UNAVAILABLE");
  }
  const later = batcher.delete({ key: "later", etag: '"1"' });
  await tick();
  calls.releaseNext();
  assert.equal(await later, true);
});

test("DeleteObjects: the body escapes keys and ETags, carries its MD5, and the answer's escaped keys come back", () => {
  const { body, contentMd5 } = deleteObjectsRequest([{ key: `p/a&b<c>'"`, etag: '"e1"' }]);
  const text = Buffer.from(body).toString("utf8");
  assert.match(text, /<Quiet>true<\/Quiet>/);
  assert.match(text, /<Key>p\/a&amp;b&lt;c&gt;&apos;&quot;<\/Key><ETag>&quot;e1&quot;<\/ETag>/);
  assert.equal(contentMd5, createHash("md5").update(body).digest("base64"));
  const answer = `<?xml version="1.0" encoding="UTF-8"?><DeleteResult><Error><Key>p/a&amp;b&lt;c&#62;&#x27;"</Key><Code>PreconditionFailed</Code><Message>m</Message></Error><Error><Key>z</Key><Code>NoSuchKey</Code></Error></DeleteResult>`;
  assert.deepEqual(
    [...deleteObjectsErrors(answer)],
    [
      [`p/a&b<c>'"`, "PreconditionFailed"],
      ["z", "NoSuchKey"],
    ],
  );
  assert.deepEqual([...deleteObjectsErrors("<DeleteResult></DeleteResult>")], []);
});
