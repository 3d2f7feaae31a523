/**
 * Nothing left half-written (issue #10 L1, L2, L3, modes): a refused manifest leaves the root
 * exactly as it was (a recursive listing with types, modes and bytes compared before and
 * after), a write failing midway is rolled back, messages and status reports carry no
 * manifest content, file:// sources are capped while read, unsafe modes need a flag.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  chmod,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  symlink,
  truncate,
  writeFile,
} from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import { FileStore } from "../../providers/stores/file.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { main } from "../../src/cli/main.ts";
import { MAX_MANIFEST_FILES, parseManifest } from "../../src/fetcher/apply-manifest.ts";
import { runFetch } from "../../src/fetcher/fetch-run.ts";
import { DEFAULT_ALLOWED_ROOTS, MAX_PATH_BYTES, MAX_PATH_DEPTH } from "../../src/fetcher/paths.ts";
import { applyPlan, atomicWriter, type FileWriter, planFiles } from "../../src/fetcher/write-plan.ts";
import { MAX_DOCUMENT_BYTES } from "../../src/limits.ts";
import {
  type AgeKey,
  ageKey,
  encrypt,
  machineEnv,
  REPO,
  type StatusServer,
  statusServer,
  tempDir,
} from "./helpers.ts";

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let status: StatusServer;
let docs = 0;

before(async () => {
  dir = await tempDir("manifest-plan");
  key = await ageKey(dir.path, "m1");
  status = await statusServer();
});
after(async () => {
  await status.close();
  await dir.remove();
});

async function newRoot(): Promise<string> {
  const root = join(dir.path, `root-${Math.random().toString(36).slice(2)}`);
  await mkdir(root);
  // What a machine already has: a secret to keep, a directory, a link.
  await mkdir(join(root, "etc/real"), { recursive: true });
  await mkdir(join(root, "var/lib"), { recursive: true });
  await writeFile(join(root, "etc/keep"), "OLD secret\n", { mode: 0o640 });
  await chmod(join(root, "etc/keep"), 0o640);
  await symlink("/etc/real", join(root, "etc/link"));
  return root;
}

/** Every entry under root: path, type, mode, and the bytes' hash or the link's target. */
async function snapshot(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, rel: string): Promise<void> => {
    for (const name of (await readdir(d)).sort()) {
      const p = join(d, name);
      const info = await lstat(p);
      const mode = (info.mode & 0o7777).toString(8);
      if (info.isDirectory()) {
        out.push(`${rel}/${name}/ d ${mode}`);
        await walk(p, `${rel}/${name}`);
      } else if (info.isSymbolicLink()) {
        out.push(`${rel}/${name} l -> ${await readlink(p)}`);
      } else {
        const hash = createHash("sha256")
          .update(await readFile(p))
          .digest("hex");
        out.push(`${rel}/${name} f ${mode} ${hash}`);
      }
    }
  };
  await walk(root, "");
  return out;
}

async function manifestDoc(text: string): Promise<string> {
  const file = join(dir.path, `doc-${++docs}.sops.json`);
  await writeFile(file, await encrypt(text, ["--age", key.recipient, "--input-type", "binary"]));
  return file;
}

interface Outcome {
  readonly code: number;
  readonly stderr: string;
  readonly reports: string;
}

/** `bootseal fetch --apply` in-process, statuses to the recording server. */
async function fetch(root: string, from: string, ...extra: string[]): Promise<Outcome> {
  const stderr = new PassThrough();
  const stdout = new PassThrough();
  let err = "";
  stderr.on("data", (c: Buffer) => {
    err += c.toString();
  });
  stdout.resume();
  const seen = status.posts.length;
  const args = ["fetch", "--from", `file://${from}`, "--apply", "--root", root, "--report", status.url];
  const code = await main([...args, "--report-timeout", "5s", ...extra], {
    stdin: new PassThrough(),
    stdout,
    stderr,
    env: machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
    cwd: REPO,
  });
  return { code, stderr: err, reports: JSON.stringify(status.posts.slice(seen)) };
}

const entry = (path: string, content: string, mode?: string): string =>
  [`path: ${path}`, `content: ${JSON.stringify(content)}`, ...(mode ? [`mode: "${mode}"`] : []), ""].join(
    "\n",
  );
const manifest = (...entries: string[]): string => entries.join("---\n");

test("L1: a manifest refused in the plan writes nothing, not even its earlier files", async () => {
  const long = `/etc/${Array.from({ length: 1400 }, (_, i) => `d${i % 10}`).join("/")}/f`; // > 4096 bytes
  const deep = `/etc/${Array.from({ length: MAX_PATH_DEPTH }, () => "d").join("/")}/f`;
  const wide = `/etc/${"n".repeat(256)}/f`;
  assert.ok(Buffer.byteLength(long) > MAX_PATH_BYTES);
  const cases: Array<[string, string, number]> = [
    [
      "a file, then a file under it",
      manifest(entry("/etc/pa", "s3cr3t_one"), entry("/etc/pa/x", "s3cr3t_two")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "a file under a later file",
      manifest(entry("/etc/pa/x", "s3cr3t_one"), entry("/etc/pa", "s3cr3t_two")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "deeper: a file two levels up",
      manifest(entry("/etc/pb/q/r/x", "s3cr3t_one"), entry("/etc/pb/q", "s3cr3t_two")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "the same file spelt twice",
      manifest(entry("/etc/dup", "s3cr3t_one"), entry("/etc//dup/", "s3cr3t_two")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "the same file through a link",
      manifest(entry("/etc/real/f", "s3cr3t_one"), entry("/etc/link/f", "s3cr3t_two")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "a replaced file, then an error",
      manifest(entry("/etc/keep", "s3cr3t_new"), entry("/etc/keep/x", "s3cr3t_two")),
      EXIT_CODES.PATH_NOT_ALLOWED,
    ],
    [
      "a path over 4096 bytes",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry(long, "s3cr3t_two")),
      EXIT_CODES.PATH_NOT_ALLOWED,
    ],
    [
      "a path over 64 components",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry(deep, "s3cr3t_two")),
      EXIT_CODES.PATH_NOT_ALLOWED,
    ],
    [
      "a component over 255 bytes",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry(wide, "s3cr3t_two")),
      EXIT_CODES.PATH_NOT_ALLOWED,
    ],
    [
      "a setuid mode",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry("/etc/suid", "s3cr3t_two", "4777")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "a world-writable mode",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry("/etc/ww", "s3cr3t_two", "0666")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "a sticky mode",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry("/etc/st", "s3cr3t_two", "1644")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "a setgid mode",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry("/etc/sg", "s3cr3t_two", "2750")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "an unknown owner",
      manifest(entry("/etc/ok", "s3cr3t_one"), `${entry("/etc/o", "s3cr3t_two")}owner: nobody-here\n`),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "outside the roots",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry("/usr/bin/x", "s3cr3t_two")),
      EXIT_CODES.PATH_NOT_ALLOWED,
    ],
    // the marker and the sentinel are written after --exec: nothing may stand in their way
    [
      "a file where the marker's directory goes",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry("/var/lib/bootseal", "s3cr3t_two")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "the marker itself",
      manifest(entry("/etc/ok", "s3cr3t_one"), entry("/var/lib/bootseal/bootstrap.done", "s3cr3t_two")),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "a directory where the sentinel goes",
      manifest(
        entry("/etc/ok", "s3cr3t_one"),
        entry("/run/cluster-api/bootstrap-success.complete/x", "s3cr3t_two"),
      ),
      EXIT_CODES.BAD_INPUT,
    ],
    [
      "more than 4096 new directories",
      manifest(
        ...Array.from({ length: 70 }, (_, i) =>
          entry(`/etc/t${i}/${Array(60).fill("d").join("/")}/f`, "s3cr3t_one"),
        ),
      ),
      EXIT_CODES.BAD_INPUT,
    ],
  ];
  for (const [what, text, exit] of cases) {
    const root = await newRoot();
    const before = await snapshot(root);
    const r = await fetch(root, await manifestDoc(text));
    assert.equal(r.code, exit, `${what}: ${r.stderr}`);
    assert.deepEqual(await snapshot(root), before, what);
    // "_" keeps the marker out of any mkdtemp name (their suffixes are alphanumeric)
    assert.ok(!/s3cr3t_/.test(r.stderr + r.reports), `${what}: no content in ${r.stderr}`);
    assert.ok(r.stderr.length < 1000, `${what}: a short message`);
  }
});

test("modes: --allow-unsafe-modes lets the operator write a setuid or world-writable file", async () => {
  const root = await newRoot();
  const doc = await manifestDoc(manifest(entry("/etc/suid", "x", "4755"), entry("/etc/ww", "y", "0666")));
  const r = await fetch(root, doc, "--allow-unsafe-modes", "--sentinel", "");
  assert.equal(r.code, 0, r.stderr);
  assert.equal((await lstat(join(root, "etc/suid"))).mode & 0o7777, 0o4755);
  assert.equal((await lstat(join(root, "etc/ww"))).mode & 0o7777, 0o666);
});

/** Fails the nth write: before anything is written, or after the file is in place. */
function failingWriter(n: number, afterWrite: boolean): FileWriter {
  let calls = 0;
  return async (target, data, options) => {
    if (++calls === n) {
      if (afterWrite) await atomicWriter(target, data, options);
      throw Object.assign(new Error("injected"), { code: "EIO" });
    }
    await atomicWriter(target, data, options);
  };
}

test("L1: a write failing midway rolls back: replaced files restored, new files and directories removed", async () => {
  const text = manifest(
    entry("/etc/keep", "NEW secret", "0600"),
    entry("/etc/new/deep/a", "A"),
    entry("/var/lib/app/b", "B"),
    entry("/etc/real/c", "C"),
  );
  const payloadDoc = await manifestDoc(text);
  for (const n of [1, 2, 3, 4]) {
    for (const afterWrite of [false, true]) {
      const root = await newRoot();
      const before = await snapshot(root);
      const stderr = new PassThrough().resume();
      await assert.rejects(
        runFetch(
          {
            from: `file://${payloadDoc}`,
            apply: true,
            root,
            allowedRoots: DEFAULT_ALLOWED_ROOTS,
            marker: "/var/lib/bootseal/bootstrap.done",
            sentinel: null,
            force: false,
            oneTime: false,
            deadlineMs: 10_000,
            attemptTimeoutMs: 5000,
            reportTimeoutMs: 1000,
          },
          {
            io: {
              stdout: new PassThrough().resume(),
              stderr,
              env: machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
            },
            labeler: null,
            write: failingWriter(n, afterWrite),
          },
        ),
        /injected/,
      );
      assert.deepEqual(await snapshot(root), before, `write ${n} failing (after writing: ${afterWrite})`);
      assert.equal(await readFile(join(root, "etc/keep"), "utf8"), "OLD secret\n");
    }
  }
});

test("L1: without hard links (EPERM), a replaced file is kept as a copy and restored with its bytes and mode", async () => {
  const root = await newRoot();
  const before = await snapshot(root);
  const policy = { root, allowedRoots: DEFAULT_ALLOWED_ROOTS };
  const specs = parseManifest(
    new TextEncoder().encode(
      manifest(entry("/etc/keep", "NEW", "0600"), entry("/etc/n/b", "B"), entry("/etc/c", "C")),
    ),
  );
  const planned = await planFiles(specs, policy, { users: new Map(), groups: new Map() });
  const noLinks = async () => {
    throw Object.assign(new Error("link"), { code: "EPERM" });
  };
  await assert.rejects(
    applyPlan(planned, { labeler: null, link: noLinks, write: failingWriter(3, true) }),
    /injected/,
  );
  assert.deepEqual(await snapshot(root), before);
  // and on success, nothing is left beside the files
  const again = await planFiles(specs, policy, { users: new Map(), groups: new Map() });
  await applyPlan(again, { labeler: null, link: noLinks });
  assert.equal(await readFile(join(root, "etc/keep"), "utf8"), "NEW");
  assert.deepEqual((await readdir(join(root, "etc"))).sort(), ["c", "keep", "link", "n", "real"]);
});

test("L2: no manifest content in a message or a status report, whatever is malformed", async () => {
  const CANARY = "CANARY-7f3a9e";
  const cases: Array<[string, RegExp]> = [
    // a content line that lost its indentation becomes a key
    [`path: /etc/a\ncontent: |\n  line one\n${CANARY}: value\n`, /key 3 of 3 is an unknown key/],
    [`path: /etc/a\ncontent: |\n  line one\n${CANARY}\n`, /YAML error|unknown key/],
    [`path: /etc/a\ncontent: x\nmode: |\n  ${CANARY}\n`, /mode is not an octal mode/],
    [`path: /etc/a\ncontent: x\nmode: ${CANARY}\n`, /mode is not an octal mode/],
    [`path: /etc/a\ncontent: x\n? [${CANARY}]\n: 1\n`, /unknown key/],
    [`path: /etc/a\ncontent: x\n${CANARY}: {a: 1}\n`, /unknown key/],
    [`path: /etc/a\ncontent: ${CANARY}!\nencoding: base64\n`, /not valid base64/],
    [`path: /etc/a\ncontent: [${CANARY}]\n`, /content must be a scalar/],
  ];
  for (const [text, re] of cases) {
    assert.throws(
      () => parseManifest(new TextEncoder().encode(text)),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, "BAD_INPUT", text);
        assert.match(err.message, re);
        assert.ok(!err.message.includes(CANARY), err.message);
        return true;
      },
    );
  }
  // end to end: stderr and the status history the service would keep
  const root = await newRoot();
  const r = await fetch(root, await manifestDoc(cases[0]![0]));
  assert.equal(r.code, EXIT_CODES.BAD_INPUT, r.stderr);
  assert.match(r.stderr, /unknown key/);
  assert.match(r.reports, /"phase":"failed"/);
  assert.ok(!r.stderr.includes(CANARY) && !r.reports.includes(CANARY), r.stderr + r.reports);
});

test("manifest size: at most MAX_MANIFEST_FILES files, and no flood of empty documents", () => {
  const one = (i: number) => `path: /etc/f${i}\ncontent: x\n`;
  const max = Array.from({ length: MAX_MANIFEST_FILES }, (_, i) => one(i)).join("---\n");
  assert.equal(parseManifest(new TextEncoder().encode(max)).length, MAX_MANIFEST_FILES);
  for (const text of [`${max}---\n${one(-1)}`, `${one(0)}${"---\n".repeat(3 * MAX_MANIFEST_FILES)}`]) {
    assert.throws(() => parseManifest(new TextEncoder().encode(text)), {
      code: "BAD_INPUT",
      message: new RegExp(`more than ${MAX_MANIFEST_FILES} (files|documents)`),
    });
  }
});

test("L3: a file:// source over the cap is TOO_LARGE (decrypt's exit code), checked before it is read", async () => {
  const big = join(dir.path, "big.sops.json");
  await writeFile(big, "");
  await truncate(big, MAX_DOCUMENT_BYTES + 1); // sparse: no disk, and nothing worth reading
  const root = await newRoot();
  const before = await snapshot(root);
  const r = await fetch(root, big);
  assert.equal(r.code, EXIT_CODES.TOO_LARGE, r.stderr);
  assert.match(r.stderr, /larger than 64 MiB/);
  assert.deepEqual(await snapshot(root), before);
  const stderr = new PassThrough().resume();
  const decrypt = await main(["decrypt", big], {
    stdin: new PassThrough(),
    stdout: new PassThrough().resume(),
    stderr,
    env: machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
    cwd: REPO,
  });
  assert.equal(r.code, decrypt);
});

test("L3: the file store's get stops at maxBytes: at the cap it reads, one byte over it refuses", async () => {
  const storeDir = join(dir.path, "store");
  await mkdir(storeDir);
  await writeFile(join(storeDir, "at"), Buffer.alloc(1000, 1));
  await writeFile(join(storeDir, "over"), Buffer.alloc(1001, 1));
  const store = new FileStore(storeDir);
  assert.equal((await store.get("at", { maxBytes: 1000 }))?.body.byteLength, 1000);
  await assert.rejects(store.get("over", { maxBytes: 1000 }), { code: "TOO_LARGE" });
  assert.equal((await store.get("over"))?.body.byteLength, 1001);
  assert.equal(await store.get("missing", { maxBytes: 1000 }), null);
});

test("a manifest nested deeper than the YAML codec allows is refused before the full parse", () => {
  for (const text of [`path: /etc/a\ncontent: x\nx: ${"[".repeat(200_000)}\n`, `${"- ".repeat(2_000)}x\n`]) {
    assert.throws(
      () => parseManifest(new TextEncoder().encode(text)),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, "BAD_INPUT");
        assert.match(err.message, /nesting deeper than \d+ levels/);
        return true;
      },
    );
  }
  // at the limit's safe side a manifest still parses
  assert.equal(parseManifest(new TextEncoder().encode("path: /etc/a\ncontent: x\nmode: '0600'\n")).length, 1);
});
