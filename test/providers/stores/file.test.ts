/**
 * File-store quirks: two processes racing on one directory (create-only and a compare-and-swap
 * counter), stale-lock recovery, lock timeouts, modes, no leftovers, key/directory collisions.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdir, readdir, readFile, stat, utimes, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { FileStore } from "../../../providers/stores/file.ts";
import { KeyLocks, lockPathOf } from "../../../providers/stores/file-lock.ts";
import { openStore } from "../../../providers/stores/index.ts";
import { BootsealError } from "../../../src/errors.ts";
import { tempDir } from "./peer-buckets.ts";

const WORKER = fileURLToPath(new URL("./file-race-worker.ts", import.meta.url));
const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

function code(expected: string): (err: unknown) => boolean {
  return (err) => err instanceof BootsealError && err.code === expected;
}

/** Runs a worker process (the same pinned Node 24 that runs this test) and parses its answer. */
function runWorker(job: object): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WORKER, JSON.stringify(job)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.on("error", reject);
    child.on("close", (status) => {
      if (status !== 0) reject(new Error(`worker exited ${status}: ${err.slice(-2000)}`));
      else resolve(JSON.parse(out.trim()) as Record<string, unknown>);
    });
  });
}

async function allFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

const PROCESSES = 4;

test("create-only across processes: every key has exactly one winner", async () => {
  const dir = await tempDir();
  const rounds = 30;
  const startAt = Date.now() + 1500; // all workers are loaded by then
  const results = await Promise.all(
    Array.from({ length: PROCESSES }, (_, id) => runWorker({ dir, id, startAt, mode: "create", rounds })),
  );
  const wins = results.flatMap((r, id) => (r.won as number[]).map((round) => ({ round, id })));
  assert.deepEqual(
    wins.map((w) => w.round).sort((a, b) => a - b),
    Array.from({ length: rounds }, (_, i) => i),
    "each key won exactly once",
  );
  const store = new FileStore(dir);
  for (const { round, id } of wins)
    assert.equal(dec((await store.get(`race/key-${round}`))!.body), `worker-${id}`);
  assert.ok(
    new Set(wins.map((w) => w.id)).size > 1,
    "the workers really raced (more than one won something)",
  );
  assert.deepEqual(
    (await allFiles(dir)).filter((f) => f.includes(".bootseal-")),
    [],
    "no lock or temporary files are left",
  );
});

test("compare-and-swap across processes: a shared counter loses no update", async () => {
  const dir = await tempDir();
  const store = new FileStore(dir);
  await store.put("counter", enc("0"), { ifNoneMatch: "*" });
  const rounds = 25;
  const startAt = Date.now() + 1500;
  const results = await Promise.all(
    Array.from({ length: PROCESSES }, (_, id) => runWorker({ dir, id, startAt, mode: "counter", rounds })),
  );
  assert.equal(dec((await store.get("counter"))!.body), String(PROCESSES * rounds));
  const conflicts = results.reduce((n, r) => n + (r.conflicts as number), 0);
  assert.ok(conflicts > 0, "the workers really contended (some compare-and-swaps lost)");
});

async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((r) => child.on("exit", r));
  return child.pid!;
}

async function plantLock(dir: string, key: string, owner: object, ageMs = 0): Promise<string> {
  const path = lockPathOf(dir, key);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, JSON.stringify({ token: "planted", ...owner }));
  if (ageMs) {
    const then = new Date(Date.now() - ageMs);
    await utimes(path, then, then);
  }
  return path;
}

test("a lock left by a dead process on this host is broken at once", async () => {
  const dir = await tempDir();
  const lock = await plantLock(dir, "configs/ns/a", { pid: await deadPid(), host: hostname() });
  const store = new FileStore(dir, { lockTimeoutMs: 5000 });
  const started = Date.now();
  await store.put("configs/ns/a", enc("x"), { ifNoneMatch: "*" });
  assert.ok(Date.now() - started < 2000, "no waiting for the stale age");
  await assert.rejects(stat(lock), { code: "ENOENT" });
});

test("a live lock makes a writer wait, then fail with STORE_UNAVAILABLE", async () => {
  const dir = await tempDir();
  const lock = await plantLock(dir, "k", { pid: process.pid, host: hostname() });
  const store = new FileStore(dir, { lockTimeoutMs: 300 });
  const started = Date.now();
  await assert.rejects(store.put("k", enc("x"), { unconditional: true }), code("STORE_UNAVAILABLE"));
  assert.ok(Date.now() - started >= 300);
  assert.ok((await stat(lock)).isFile(), "a live lock is left alone");
  assert.equal(await store.get("k"), null);
});

test("a lock from another host is broken only once older than staleLockMs", async () => {
  const dir = await tempDir();
  const store = new FileStore(dir, { lockTimeoutMs: 300, staleLockMs: 10_000 });
  await plantLock(dir, "k", { pid: 1, host: "elsewhere.example" });
  await assert.rejects(store.put("k", enc("x"), { unconditional: true }), code("STORE_UNAVAILABLE"));
  await plantLock(dir, "k", { pid: 1, host: "elsewhere.example" }, 60_000);
  await store.put("k", enc("x"), { unconditional: true });
  assert.equal(dec((await store.get("k"))!.body), "x");
});

test("an empty (half-written) lock counts as stale by age only", async () => {
  const dir = await tempDir();
  const store = new FileStore(dir, { lockTimeoutMs: 200, staleLockMs: 5_000 });
  const path = lockPathOf(dir, "k");
  await writeFile(path, "");
  assert.equal(await store.delete("k"), false);
  await assert.rejects(store.put("k", enc("x"), { unconditional: true }), code("STORE_UNAVAILABLE"));
  const then = new Date(Date.now() - 60_000);
  await utimes(path, then, then);
  await store.put("k", enc("x"), { unconditional: true });
});

test("objects are 0600 in 0700 directories; temp and lock files never show in listings", async () => {
  const dir = await tempDir();
  const store = openStore(`file://${dir}/store`);
  await store.put("configs/ns/name", enc("secret"), { ifNoneMatch: "*" });
  assert.equal((await stat(join(dir, "store/configs/ns/name"))).mode & 0o777, 0o600);
  for (const d of ["store", "store/configs", "store/configs/ns"]) {
    assert.equal((await stat(join(dir, d))).mode & 0o777, 0o700, d);
  }
  await writeFile(join(dir, "store/configs/ns/.bootseal-tmp.deadbeef"), "partial");
  await writeFile(join(dir, "store/configs/ns/by-hand"), "copied in by an operator");
  const keys = [];
  for await (const o of store.list("configs/")) keys.push(o.key);
  assert.deepEqual(keys, ["configs/ns/by-hand", "configs/ns/name"]);
});

test("deleting the last object prunes empty directories but keeps the store root", async () => {
  const dir = await tempDir();
  const store = new FileStore(join(dir, "root"));
  await store.put("tokens/ns/a.json", enc("{}"), { unconditional: true });
  await store.put("tokens/other/b.json", enc("{}"), { unconditional: true });
  assert.equal(await store.delete("tokens/ns/a.json"), true);
  assert.deepEqual(await readdir(join(dir, "root/tokens")), ["other"]);
  assert.equal(await store.delete("tokens/other/b.json"), true);
  assert.deepEqual(await readdir(join(dir, "root")), []);
  await store.put("tokens/ns/a.json", enc("{}"), { ifNoneMatch: "*" }); // and it comes back
});

test("a key that is also a directory on disk is refused with BAD_INPUT, not corrupted", async () => {
  const dir = await tempDir();
  const store = new FileStore(dir);
  await store.put("a", enc("file"), { unconditional: true });
  await assert.rejects(store.put("a/b", enc("x"), { unconditional: true }), code("BAD_INPUT"));
  assert.equal(await store.get("a/b"), null);
  await store.put("d/e", enc("x"), { unconditional: true });
  await assert.rejects(store.put("d", enc("x"), { unconditional: true }), code("BAD_INPUT"));
  assert.equal(await store.get("d"), null);
  assert.equal(dec((await store.get("a"))!.body), "file");
});

test("relative file:// URLs resolve against the working directory", async () => {
  const dir = await tempDir();
  const store = openStore("file://./data/store", { cwd: dir });
  assert.equal(store.url, `file://${dir}/data/store`);
  await store.put("x", enc("1"), { unconditional: true });
  assert.ok((await stat(join(dir, "data/store/x"))).isFile());
});

test("list walks the directory in UTF-8 byte order of whole keys", async () => {
  const store = new FileStore(await tempDir());
  for (const key of ["items/b", "items-sibling", "items/a/deep", "itemz", "item"]) {
    await store.put(key, enc(key), { unconditional: true });
  }
  const keys = [];
  for await (const o of store.list("item")) keys.push(o.key);
  // '-' (0x2d) sorts before '/' (0x2f): "items-sibling" comes before everything in "items/".
  assert.deepEqual(keys, ["item", "items-sibling", "items/a/deep", "items/b", "itemz"]);
});

test("a held lock is a hard link to this process's owner file (what any version's lock reader reads), gone after", async () => {
  const dir = await tempDir();
  const locks = new KeyLocks(dir, 5000, 30_000);
  const path = lockPathOf(dir, "configs/ns/a");
  let order = "";
  await Promise.all([
    locks.run("configs/ns/a", undefined, async () => {
      const st = await stat(path);
      assert.equal(st.nlink, 2, "the lock and the owner file: one inode, no new file per lock");
      const owner = JSON.parse(await readFile(path, "utf8")) as { pid: number; host: string };
      assert.equal(owner.pid, process.pid);
      assert.equal(owner.host, hostname());
      assert.ok(Date.now() - st.mtimeMs < 5000, "its age is the lock's, not the process's");
      const root = (await readdir(dir)).filter((n) => n.startsWith(".bootseal-lock.owner."));
      assert.equal(root.length, 1);
      await new Promise((r) => setTimeout(r, 20));
      order += "a";
    }),
    // The same key from this process again: waits for the first (never a second link).
    locks.run("configs/ns/a", undefined, async () => {
      order += "b";
    }),
  ]);
  assert.equal(order, "ab");
  await assert.rejects(stat(path), { code: "ENOENT" });
  assert.deepEqual(
    (await readdir(dir)).filter((n) => n.startsWith(".bootseal-")),
    [],
    "no lock and no owner file once nothing is held",
  );
});
