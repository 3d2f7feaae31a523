/**
 * The file store's spare inodes (providers/stores/file-spares.ts): a replaced version's inode
 * becomes the next write's file in that directory, every object still reads back its own
 * bytes, spares never show as objects, a swept spare costs nothing but a new file, deletes
 * drop them, and the sweep removes those of dead writers and old ones.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { FileStore } from "../../../providers/stores/file.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const HOST_TAG = createHash("sha256").update(hostname()).digest("hex").slice(0, 8);
const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "store-spares-"));
  dirs.push(dir);
  return dir;
}

async function names(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

const spares = (list: string[]) => list.filter((n) => n.startsWith(".bootseal-spare."));

/** A file store keeping spares, as `bootseal serve` opens it. */
function spareKeeping(root: string): FileStore {
  const store = new FileStore(root);
  store.keepSpares();
  return store;
}

async function ino(path: string): Promise<number> {
  return (await stat(path)).ino;
}

test("a replaced version's inode is the next write's file in its directory; each object reads back its own bytes", async () => {
  const root = await tempDir();
  const store = spareKeeping(root);
  const d = join(root, "tokens", "ns");
  await store.put("tokens/ns/a", enc("a v1, the longest version of all"), { ifNoneMatch: "*" });
  const first = await ino(join(d, "a"));
  const v2 = await store.put("tokens/ns/a", enc("a v2"), { unconditional: true });
  assert.notEqual(await ino(join(d, "a")), first, "a new version is a new file (the atomic replace)");
  assert.equal(spares(await names(d)).length, 1, "the replaced version is kept as a spare");
  const [spare] = spares(await names(d));
  assert.equal(await ino(join(d, spare as string)), first, "…under the spare's name");

  await store.put("tokens/ns/b", enc("b"), { ifNoneMatch: "*" });
  assert.equal(await ino(join(d, "b")), first, "the next write in the directory reused that inode");
  assert.deepEqual(spares(await names(d)), [], "and the spare's name went with the rename");
  assert.equal((await stat(join(d, "b"))).mode & 0o777, 0o600);

  const a = await store.get("tokens/ns/a");
  assert.equal(dec(a?.body as Uint8Array), "a v2");
  assert.equal(a?.etag, v2.etag);
  assert.equal(
    dec((await store.get("tokens/ns/b"))?.body as Uint8Array),
    "b",
    "no byte of the longer version it replaced",
  );
  const keys: string[] = [];
  for await (const o of store.list("tokens/")) keys.push(o.key);
  assert.deepEqual(keys, ["tokens/ns/a", "tokens/ns/b"]);
});

test("a spare swept from under the pool: the next write makes a new file, nothing is left over", async () => {
  const root = await tempDir();
  const store = spareKeeping(root);
  const d = join(root, "status", "ns");
  await store.put("status/ns/a", enc("1"), { unconditional: true });
  await store.put("status/ns/a", enc("2"), { unconditional: true });
  assert.equal(spares(await names(d)).length, 1);
  // A bound of 0: every spare goes, this process's own included (another replica's sweep may).
  assert.equal((await store.sweepStale({ spareOlderThanMs: 0 })).tempFiles, 1);
  await store.put("status/ns/b", enc("3"), { ifNoneMatch: "*" });
  assert.deepEqual(await names(d), ["a", "b"]);
  assert.equal(dec((await store.get("status/ns/b"))?.body as Uint8Array), "3");
});

test("deleting the last object of a directory drops its spares and prunes it", async () => {
  const root = await tempDir();
  const store = spareKeeping(root);
  await store.put("configs/ns/a", enc("1"), { unconditional: true });
  await store.put("configs/ns/a", enc("2"), { unconditional: true });
  assert.equal(spares(await names(join(root, "configs", "ns"))).length, 1);
  assert.equal(await store.delete("configs/ns/a"), true);
  assert.deepEqual(await readdir(root), []);
});

test("sweep: a dead writer's spares go, a live writer's recent ones and another host's stay", async () => {
  const root = await tempDir();
  const store = spareKeeping(root);
  await store.put("k", enc("object"), { unconditional: true });
  const dead = await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    child.once("exit", () => resolve(child.pid as number));
  });
  await writeFile(join(root, `.bootseal-spare.${HOST_TAG}.${dead}.aaaaaaaaaaaa`), "old version");
  const kept = [
    `.bootseal-spare.${HOST_TAG}.${process.pid}.bbbbbbbbbbbb`,
    ".bootseal-spare.ffffffff.1.cccccccccccc",
  ];
  for (const k of kept) await writeFile(join(root, k), "old version");
  assert.deepEqual(await store.sweepStale(), { tempFiles: 1, locks: 0 });
  assert.deepEqual(await names(root), [...kept, "k"].sort());
  assert.deepEqual(await store.sweepStale({ spareOlderThanMs: 0 }), { tempFiles: 2, locks: 0 });
  assert.deepEqual(await names(root), ["k"]);
});

test("a one-shot writer (no keepSpares, as `rotate`) keeps no old version; dropSpares removes a pool", async () => {
  const root = await tempDir();
  const oneShot = new FileStore(root);
  await oneShot.put("configs/ns/a", enc("old"), { unconditional: true });
  await oneShot.put("configs/ns/a", enc("new"), { unconditional: true });
  assert.deepEqual(await names(join(root, "configs", "ns")), ["a"]);

  const serving = spareKeeping(root);
  await serving.put("configs/ns/a", enc("newer"), { unconditional: true });
  await serving.put("configs/ns/b", enc("b"), { unconditional: true });
  await serving.put("configs/ns/b", enc("b2"), { unconditional: true });
  assert.equal(spares(await names(join(root, "configs", "ns"))).length, 1);
  await serving.dropSpares();
  assert.deepEqual(await names(join(root, "configs", "ns")), ["a", "b"]);
  await serving.put("configs/ns/b", enc("b3"), { unconditional: true });
  assert.deepEqual(await names(join(root, "configs", "ns")), ["a", "b"], "none kept after the drop");
});
