/**
 * The file store's sweep (issue #10 L6): temporary files and locks left by crashed writers are
 * removed (old ones by age, fresh ones only when their writer is provably dead), and nothing
 * else is touched; then real writer processes are SIGKILLed mid-write and a sweep leaves no
 * temporary file and every object whole.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import fc from "fast-check";
import { FileStore } from "../../../providers/stores/file.ts";
import { lockPathOf } from "../../../providers/stores/file-lock.ts";
import { TEMP_NAME, TEMP_PREFIX } from "../../../providers/stores/file-sweep.ts";
import { validateServiceConfig } from "../../../src/config/service-config.ts";
import { tempSuffix } from "../../../src/files/atomic-write.ts";
import { startServer } from "../../../src/service/server.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const HOST_TAG = createHash("sha256").update(hostname()).digest("hex").slice(0, 8);
const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "store-sweep-"));
  dirs.push(dir);
  return dir;
}

async function allFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

async function old(path: string, body = "x"): Promise<void> {
  await writeFile(path, body);
  const then = new Date(Date.now() - 60 * 60_000);
  await utimes(path, then, then);
}

/** The pid of a process that has exited (so no process runs under it, barring reuse). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  assert.ok(child.pid);
  return child.pid;
}

test("sweep: old and dead-writer temp files and dead locks go; objects, fresh files and others' files stay", async () => {
  const dir = await tempDir();
  const store = new FileStore(dir);
  await store.put("a/b/obj", enc("object"), { unconditional: true });
  await store.put("top", enc("top"), { unconditional: true });
  const d = join(dir, "a", "b");
  const dead = await deadPid();
  // Removed: old (any name of ours), and fresh ones whose writer on this host is gone.
  await old(join(d, ".bootseal-tmp.0123456789ab")); // an older version's name
  await old(join(dir, `.bootseal-tmp.ffffffff.1.0123456789ab`)); // another host, old
  await writeFile(join(d, `.bootseal-tmp.${HOST_TAG}.${dead}.aaaaaaaaaaaa`), "x"); // dead writer
  await writeFile(lockPathOf(dir, "a/b/gone"), JSON.stringify({ pid: dead, host: hostname(), token: "t" }));
  await old(`${lockPathOf(dir, "a/b/gone")}.break`); // its crashed breaker's leftover
  // Kept: fresh temp files of a live writer or of another host, a fresh live lock, others' files.
  const keep = [
    `a/b/.bootseal-tmp.${HOST_TAG}.${process.pid}.bbbbbbbbbbbb`,
    "a/b/.bootseal-tmp.ffffffff.1.cccccccccccc",
    "a/b/.bootseal-tmp.dddddddddddd",
    lockPathOf(dir, "a/b/live").slice(dir.length + 1),
  ];
  for (const k of keep.slice(0, 3)) await writeFile(join(dir, k), "x");
  await writeFile(join(dir, keep[3]!), JSON.stringify({ pid: process.pid, host: hostname(), token: "t" }));
  await old(join(d, ".obj.bootseal-keep-0123.tmp")); // the fetcher's rollback link: not ours
  await old(join(d, "plain-file"));
  await mkdir(join(dir, "empty"));

  const result = await store.sweepStale();
  assert.deepEqual(result, { tempFiles: 3, locks: 2 });
  assert.deepEqual(
    await allFiles(dir),
    [...keep, "a/b/.obj.bootseal-keep-0123.tmp", "a/b/obj", "a/b/plain-file", "top"].sort(),
  );
  assert.equal(new TextDecoder().decode((await store.get("a/b/obj"))!.body), "object");

  // A bound of 0 takes every temporary file (the age rule alone); live locks still stay.
  assert.deepEqual(await store.sweepStale({ olderThanMs: 0 }), { tempFiles: 3, locks: 0 });
  assert.ok((await allFiles(dir)).includes(keep[3]!));
  // And an aborted sweep stops with the abort.
  await assert.rejects(store.sweepStale({ signal: AbortSignal.abort() }), { name: "AbortError" });
});

test("sweep: a bound of 0 takes a temporary file made this very millisecond (its mtime's fraction past Date.now())", async () => {
  const dir = await tempDir();
  const store = new FileStore(dir);
  const path = join(dir, `.bootseal-tmp.${HOST_TAG}.${process.pid}.eeeeeeeeeeee`);
  await writeFile(path, "x");
  // The kernel stamps sub-millisecond times; Date.now() is whole milliseconds, so a file made in
  // the current millisecond can look up to 1 ms "in the future". Stamp that case outright.
  const ahead = (Date.now() + 0.9) / 1000;
  await utimes(path, ahead, ahead);
  assert.deepEqual(await store.sweepStale({ olderThanMs: 0 }), { tempFiles: 1, locks: 0 });
  assert.deepEqual(await readdir(dir), []);
});

const WRITER = `
import { FileStore } from ${JSON.stringify(new URL("../../../providers/stores/file.ts", import.meta.url).href)};
const store = new FileStore(process.argv[1]);
for (let i = 0; ; i++) {
  const body = new Uint8Array(256 * 1024).fill(i % 251);
  await store.put("obj/k-" + (i % 4), body, { unconditional: true });
  if (i === 0) process.stdout.write("ready\\n");
}
`;

function startWriter(dir: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--input-type=module", "-e", WRITER, dir], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`writer exited early (${code})`)));
    child.stdout!.once("data", () => resolve(child));
  });
}

test("kill -9 of writers mid-write: a sweep afterwards leaves no temp file and every object whole", {
  timeout: 120_000,
}, async () => {
  const dir = await tempDir();
  const KILLS = 10;
  for (let k = 0; k < KILLS; k++) {
    const child = await startWriter(dir);
    child.removeAllListeners("exit");
    const exited = new Promise((resolve) => child.once("exit", resolve));
    // A few writes in: kill it wherever it is (often between its temp file and the rename).
    await new Promise((resolve) => setTimeout(resolve, 5 + ((k * 7) % 25)));
    child.kill("SIGKILL");
    await exited;
  }
  // Every writer is dead now: bounds of 0 may take every temporary file and every lock (one
  // killed between creating its lock and writing its owner into it is provably dead by age only).
  const store = new FileStore(dir, { staleLockMs: 0 });
  await store.sweepStale({ olderThanMs: 0 });
  const files = await allFiles(dir);
  assert.deepEqual(
    files.filter((f) => f.split("/").pop()!.startsWith(".bootseal-tmp.")),
    [],
    "no temporary file left",
  );
  assert.equal(files.filter((f) => f.includes(".bootseal-lock.")).length, 0, "no dead writer's lock left");
  const keys: string[] = [];
  for await (const info of store.list("obj/")) keys.push(info.key);
  assert.ok(keys.length >= 1);
  for (const key of keys) {
    const obj = await store.get(key);
    assert.ok(obj);
    assert.equal(obj.size, 256 * 1024);
    assert.ok(
      obj.body.every((b) => b === obj.body[0]),
      `${key} is one whole write`,
    );
  }
});

test("bootseal serve sweeps its file store at start (and stops the timer on close)", {
  timeout: 60_000,
}, async () => {
  const dir = await tempDir();
  const store = join(dir, "store");
  await mkdir(join(store, "configs"), { recursive: true });
  await old(join(store, "configs", ".bootseal-tmp.0123456789ab"));
  const fresh = join(store, "configs", ".bootseal-tmp.ffffffff.1.0123456789ab");
  await writeFile(fresh, "x");
  const server = await startServer(
    validateServiceConfig({
      store: `file://${store}`,
      creation_rules: [{ age: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p" }],
      controllers: [{ name: "unused", tokenSha256: "0".repeat(64), scopes: ["admin"] }],
      listen: "127.0.0.1:0",
      logLevel: "silent",
      audit: { path: "-" },
    }),
  );
  try {
    // The first sweep runs in the background from the start: wait for its effect (bounded).
    for (let i = 0; i < 400 && (await allFiles(store)).length > 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.deepEqual(await allFiles(store), ["configs/.bootseal-tmp.ffffffff.1.0123456789ab"]);
  } finally {
    await server.close();
  }
});

test("the sweep recognises every temporary file name the writer makes (any counter, letters g-z included)", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
      fc.integer({ min: 1, max: 4_194_304 }),
      (counter, pid) => {
        const name = `${TEMP_PREFIX}${HOST_TAG}.${pid}.${tempSuffix(counter)}`;
        const m = TEMP_NAME.exec(name);
        return m !== null && m[1] === HOST_TAG && Number(m[2]) === pid;
      },
    ),
    { numRuns: 2000 },
  );
  // The names that were left behind for 15 minutes: a counter whose base-36 form has a letter past f.
  assert.match(`${TEMP_PREFIX}${HOST_TAG}.42.${tempSuffix(16)}`, TEMP_NAME);
  assert.match(tempSuffix(16), /g$/);
});
