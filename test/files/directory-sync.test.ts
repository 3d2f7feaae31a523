import assert from "node:assert/strict";
import fs, { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, describe, test } from "node:test";
import { syncDirectory } from "../../src/files/atomic-write.ts";

const dir = mkdtempSync(join(tmpdir(), "bootseal-dirsync-"));
after(() => rmSync(dir, { recursive: true, force: true }));

type Done = (err: NodeJS.ErrnoException | null) => void;
const realFsync = fs.fsync;
afterEach(() => {
  fs.fsync = realFsync;
});

/** A double of fsync(2) that holds each call until the test lets it finish. */
function heldFsync() {
  const calls: { done: Done; fd: number }[] = [];
  fs.fsync = ((fd: number, done: Done) => {
    calls.push({ fd, done });
  }) as typeof fs.fsync;
  const waitFor = async (n: number) => {
    for (let i = 0; i < 200 && calls.length < n; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(calls.length, n);
  };
  const finish = (i: number, err: NodeJS.ErrnoException | null = null) => {
    const call = calls[i];
    assert.ok(call);
    call.done(err);
  };
  return { calls, waitFor, finish };
}

const settled = (p: Promise<unknown>) => {
  let state = "pending";
  p.then(
    () => {
      state = "resolved";
    },
    () => {
      state = "rejected";
    },
  );
  return () => state;
};

describe("syncDirectory: a group commit per directory", () => {
  test("the real fsync: 100 concurrent callers on one directory all resolve", async () => {
    await Promise.all(Array.from({ length: 100 }, () => syncDirectory(dir)));
  });

  test("(fsync double) callers during a running fsync share ONE next fsync, begun after them", async () => {
    const f = heldFsync();
    const first = settled(syncDirectory(dir));
    await f.waitFor(1);
    // Arrived while the first fsync runs: their changes may be after it began.
    const late = Array.from({ length: 50 }, () => syncDirectory(dir));
    const lateState = settled(Promise.all(late));
    f.finish(0);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(first(), "resolved");
    assert.equal(lateState(), "pending", "not answered by the fsync that began before them");
    await f.waitFor(2); // one more fsync for all 50
    f.finish(1);
    await Promise.all(late);
    assert.equal(f.calls.length, 2);
  });

  test("(fsync double) an fsync error reaches the callers that shared it; the next caller tries again", async () => {
    const f = heldFsync();
    const a = syncDirectory(dir);
    await f.waitFor(1);
    f.finish(0, Object.assign(new Error("EIO"), { code: "EIO" }));
    await assert.rejects(a, /EIO/);
    const b = syncDirectory(dir);
    await f.waitFor(2);
    f.finish(1);
    await b;
  });

  test("(fsync double) different directories do not wait for each other", async () => {
    const other = mkdtempSync(join(dir, "other-"));
    const f = heldFsync();
    const a = settled(syncDirectory(dir));
    const b = syncDirectory(other);
    await f.waitFor(2);
    f.finish(1);
    await b;
    assert.equal(a(), "pending");
    f.finish(0);
  });
});
