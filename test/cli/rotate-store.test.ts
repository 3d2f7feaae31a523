/**
 * `bootseal rotate --store URL`: bulk data-key rotation and master-key changes over a store
 * prefix, against the file store and SeaweedFS (S3). Documents are made with `bootseal
 * encrypt --age R1` (in-process) in the three formats the service stores (binary, json, yaml)
 * and put under configs/ns/nameN as the service puts them; rotate itself always runs as a real
 * process. The concurrent-modification case drives the rotate loop in-process through a store
 * wrapper that rewrites the object between get and put, which is deterministic.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import { openStore } from "../../providers/stores/index.ts";
import type { ObjectStore, StoredObject } from "../../providers/stores/object-store.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { keysFromFlags } from "../../src/cli/key-setup.ts";
import { main } from "../../src/cli/main.ts";
import { rotateStore } from "../../src/cli/rotate-store.ts";
import { detectFormat } from "../../src/envelope/document.ts";
import { BootsealError } from "../../src/errors.ts";
import { decryptPayload } from "../../src/fetcher/decrypt-payload.ts";
import { type AgeKey, ageKey, CLI, encrypt } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { seaweedfs } from "../helpers/s3.ts";
import { s3Bucket } from "../providers/stores/peer-buckets.ts";

type Format = "binary" | "json" | "yaml";
const FORMATS: readonly Format[] = ["binary", "json", "yaml"];

let work: string;
let r1: AgeKey;
let r2: AgeKey;
before(async () => {
  work = await mkdtemp(join(tmpdir(), "bootseal-rotate-store-"));
  r1 = await ageKey(work, "r1");
  r2 = await ageKey(work, "r2");
});
after(async () => {
  await rm(work, { recursive: true, force: true });
});

interface Backend {
  readonly name: string;
  /** A fresh, empty store location for one test: its URL, an opened store, the CLI's env. */
  location(test: string): Promise<{ url: string; store: ObjectStore; env: Record<string, string> }>;
}

const fileBackend: Backend = {
  name: "file store",
  async location(name) {
    const dir = join(work, "stores", name);
    await mkdir(dir, { recursive: true });
    const url = `file://${dir}`;
    return { url, store: openStore(url, { env: {} }), env: {} };
  },
};

let bucket: string | undefined;
const seaweedBackend: Backend = {
  name: "SeaweedFS (S3)",
  async location(name) {
    const p = seaweedfs();
    bucket ??= await s3Bucket(p);
    const url = `s3://${bucket}/${name}`;
    const env = {
      AWS_ENDPOINT_URL_S3: p.endpoint,
      AWS_ACCESS_KEY_ID: p.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: p.credentials.secretAccessKey,
      AWS_REGION: "us-east-1",
    };
    return {
      url,
      store: openStore(url, { s3: { endpoint: p.endpoint, credentials: p.credentials }, env }),
      env,
    };
  },
};

function plaintextOf(format: Format, i: number): string {
  switch (format) {
    case "binary":
      return `#cloud-config\nwrite_files:\n  - path: /etc/kubernetes/token\n    content: secret-token-${i}\n`;
    case "json":
      return `{\n\t"token": "secret-token-${i}",\n\t"port": ${6443 + i},\n\t"nested": {\n\t\t"list": [\n\t\t\t"a",\n\t\t\t"b"\n\t\t]\n\t}\n}`;
    case "yaml":
      return `token: secret-token-${i}\nport: ${6443 + i}\nnested:\n    list:\n        - a\n        - b\n`;
  }
}

/** The document of configs/ns/name<i>: `bootseal encrypt --age R1`, in the format i picks. */
async function makeDocument(i: number, recipient: string): Promise<{ bytes: Uint8Array; format: Format }> {
  const format = FORMATS[i % FORMATS.length] as Format;
  const bytes = await encrypt(plaintextOf(format, i), [
    "--age",
    recipient,
    "--input-type",
    format,
    "--output-type",
    format,
  ]);
  return { bytes, format };
}

const keyOf = (i: number) => `configs/ns/name${i}`;

/** Puts n documents as the service stores them (content type by format). */
async function seed(store: ObjectStore, n: number): Promise<Map<string, Uint8Array>> {
  const originals = new Map<string, Uint8Array>();
  const docs = await Promise.all(Array.from({ length: n }, (_, i) => makeDocument(i, r1.recipient)));
  await Promise.all(
    docs.map(async ({ bytes, format }, i) => {
      await store.put(
        keyOf(i),
        bytes,
        { ifNoneMatch: "*" },
        {
          contentType: format === "yaml" ? "application/sops+yaml" : "application/sops+json",
        },
      );
      originals.set(keyOf(i), bytes);
    }),
  );
  return originals;
}

async function snapshot(store: ObjectStore, prefix = "configs/"): Promise<Map<string, StoredObject>> {
  const out = new Map<string, StoredObject>();
  for await (const info of store.list(prefix)) {
    const obj = await store.get(info.key);
    if (obj) out.set(info.key, obj);
  }
  return out;
}

/** The plaintext the fetcher gets from a stored document with one age identity alone. */
function open(bytes: Uint8Array, key: AgeKey): Promise<Uint8Array> {
  return decryptPayload(bytes, { deps: { env: { SOPS_AGE_KEY: key.identity } }, machine: null });
}

const encValues = (bytes: Uint8Array) =>
  Buffer.from(bytes)
    .toString("utf8")
    .match(/ENC\[[^\]]+\]/g) ?? [];

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The real CLI as its own process, with nothing of this process's environment but PATH. */
function bootseal(
  args: string[],
  env: Record<string, string>,
  onLine?: (line: string, kill: () => void) => void,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: work, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let partial = "";
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
      partial += c.toString();
      const lines = partial.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) onLine?.(line, () => child.kill("SIGKILL"));
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

const lines = (stdout: string, word: string) => stdout.split("\n").filter((l) => l.startsWith(`${word} `));

function assertNoSecrets(run: Run): void {
  for (const text of [run.stdout, run.stderr]) {
    assert.ok(!text.includes("secret-token"), "no plaintext in the output");
    assert.ok(!text.includes("AGE-SECRET-KEY"), "no identity in the output");
  }
}

for (const backend of [fileBackend, seaweedBackend]) {
  describe(`rotate --store on the ${backend.name}`, () => {
    test("--add-age R2: every object opens with R2 alone and R1 alone, new data key, same plaintext", async () => {
      const { url, store, env } = await backend.location("add");
      const originals = await seed(store, 21);
      const run = await bootseal(["rotate", "--store", url, "--add-age", r2.recipient], {
        ...env,
        SOPS_AGE_KEY: r1.identity,
      });
      assert.equal(run.code, 0, run.stderr);
      assertNoSecrets(run);
      assert.equal(lines(run.stdout, "rotated").length, 21 + 1, run.stdout); // + the summary line
      assert.match(run.stdout, /^rotated 21, unchanged 0, skipped 0, failed 0$/m);
      const now = await snapshot(store);
      assert.equal(now.size, 21);
      for (const [key, old] of originals) {
        const rotated = now.get(key)?.body as Uint8Array;
        assert.equal(detectFormat(rotated), detectFormat(old), `${key} keeps its format`);
        const expected = await open(old, r1);
        assert.deepEqual(await open(rotated, r2), expected, `${key} opens with R2 alone`);
        assert.deepEqual(await open(rotated, r1), expected, `${key} opens with R1 alone`);
        const before = new Set(encValues(old));
        const afterValues = encValues(rotated);
        assert.ok(afterValues.length > 0);
        assert.ok(
          afterValues.every((v) => !before.has(v)),
          `${key}: every ENC[] value changed (new data key)`,
        );
      }
    });

    test("--rm-age R1 removes R1 (its identity then fails with 128); removing the only held key is refused", async () => {
      const { url, store, env } = await backend.location("rm");
      const originals = await seed(store, 6);
      const added = await bootseal(["rotate", "--store", url, "--add-age", r2.recipient], {
        ...env,
        SOPS_AGE_KEY: r1.identity,
      });
      assert.equal(added.code, 0, added.stderr);
      const beforeRm = await snapshot(store);

      // Holding only R1, removing R1 cannot be verified: every object fails, nothing changes.
      const refused = await bootseal(["rotate", "--store", url, "--rm-age", r1.recipient], {
        ...env,
        SOPS_AGE_KEY: r1.identity,
      });
      assert.equal(refused.code, EXIT_CODES.NO_KEY_AVAILABLE, refused.stdout);
      assert.equal(lines(refused.stdout, "failed").length, 6);
      assert.match(refused.stdout, /^failed configs\/ns\/name0: NO_KEY_AVAILABLE verification failed/m);
      assert.match(refused.stdout, /^rotated 0, unchanged 0, skipped 0, failed 6$/m);
      for (const [key, obj] of await snapshot(store)) {
        assert.deepEqual(obj.body, beforeRm.get(key)?.body, `${key} untouched`);
      }

      const removed = await bootseal(["rotate", "--store", url, "--rm-age", r1.recipient], {
        ...env,
        SOPS_AGE_KEY: r2.identity,
      });
      assert.equal(removed.code, 0, removed.stdout + removed.stderr);
      assert.match(removed.stdout, /^rotated 6, unchanged 0, skipped 0, failed 0$/m);
      const now = await snapshot(store);
      for (const [key, old] of originals) {
        const body = now.get(key)?.body as Uint8Array;
        assert.ok(!Buffer.from(body).includes(r1.recipient), `${key} no longer names R1`);
        assert.deepEqual(await open(body, r2), await open(old, r1));
        await assert.rejects(open(body, r1), (err: unknown) => {
          assert.ok(err instanceof BootsealError);
          assert.equal(err.code, "NO_KEY_AVAILABLE");
          return true;
        });
      }
      // The CLI with R1's identity alone: exit 128 on one document of each format.
      for (let i = 0; i < FORMATS.length; i++) {
        const format = FORMATS[i] as Format;
        const file = join(work, `${backend.name.split(" ")[0]}-rm-${i}.enc`);
        await writeFile(file, now.get(keyOf(i))?.body as Uint8Array);
        const denied = await bootseal(["decrypt", "--input-type", format, "--output-type", format, file], {
          SOPS_AGE_KEY: r1.identity,
        });
        assert.equal(denied.code, 128, denied.stderr);
        assert.equal(denied.stdout, "", "no plaintext");
        const opened = await bootseal(["decrypt", "--input-type", format, "--output-type", format, file], {
          SOPS_AGE_KEY: r2.identity,
        });
        assert.equal(opened.code, 0, opened.stderr);
        assert.equal(
          opened.stdout,
          Buffer.from(await open(originals.get(keyOf(i)) as Uint8Array, r1)).toString(),
        );
      }
    });

    test("--dry-run decrypts, rotates and verifies in memory but changes no byte", async () => {
      const { url, store, env } = await backend.location("dry");
      await seed(store, 9);
      const before = await snapshot(store);
      const run = await bootseal(
        ["rotate", "--store", url, "--add-age", r2.recipient, "--dry-run", "--concurrency", "3"],
        { ...env, SOPS_AGE_KEY: r1.identity },
      );
      assert.equal(run.code, 0, run.stderr);
      assertNoSecrets(run);
      const would = lines(run.stdout, "would").filter((l) => l.startsWith("would rotate configs/"));
      assert.equal(would.length, 9, run.stdout);
      assert.ok(
        would.every((l) => l.endsWith(`: new data key, add ${r2.recipient}`)),
        run.stdout,
      );
      assert.match(
        run.stdout,
        /^would rotate 9, unchanged 0, skipped 0, failed 0 \(dry run: nothing written\)$/m,
      );
      const now = await snapshot(store);
      assert.equal(now.size, before.size);
      for (const [key, obj] of before) {
        assert.equal(now.get(key)?.etag, obj.etag, `${key}: same etag`);
        assert.deepEqual(now.get(key)?.body, obj.body, `${key}: same bytes`);
      }
    });

    test("a tampered object is reported failed and left byte-identical; the others are rotated", async () => {
      const { url, store, env } = await backend.location("tampered");
      await seed(store, 12);
      const target = keyOf(4); // json
      const original = (await store.get(target)) as StoredObject;
      const text = Buffer.from(original.body).toString("utf8");
      // Swap two ENC[] values: each is still a well-formed ciphertext, but under the wrong path
      // (its AAD), so decryption fails closed.
      const [a, b] = encValues(original.body) as [string, string];
      const tampered = Buffer.from(text.replace(a, "\u0000").replace(b, a).replace("\u0000", b));
      assert.notDeepEqual(new Uint8Array(tampered), original.body);
      await store.put(target, tampered, { ifMatch: original.etag });
      const stored = (await store.get(target)) as StoredObject;

      const run = await bootseal(["rotate", "--store", url, "--add-age", r2.recipient], {
        ...env,
        SOPS_AGE_KEY: r1.identity,
      });
      assert.notEqual(run.code, 0);
      assertNoSecrets(run);
      const failed = lines(run.stdout, "failed");
      assert.equal(failed.length, 1, run.stdout);
      assert.match(
        failed[0] as string,
        /^failed configs\/ns\/name4: (DECRYPTION_FAILED|MAC_MISMATCH|BAD_INPUT) /,
      );
      const code = /^failed \S+: (\w+)/.exec(failed[0] as string)?.[1] as keyof typeof EXIT_CODES;
      assert.equal(run.code, EXIT_CODES[code], "the exit code is the failure's class");
      assert.match(run.stdout, /^rotated 11, unchanged 0, skipped 0, failed 1$/m);
      assert.match(run.stderr, /1 object\(s\) failed/);
      const after = await snapshot(store);
      assert.deepEqual(after.get(target)?.body, stored.body, "the tampered object is byte-identical");
      assert.equal(after.get(target)?.etag, stored.etag);
      for (const [key, obj] of after) {
        if (key === target) continue;
        assert.ok(Buffer.from(obj.body).includes(r2.recipient), `${key} rotated`);
        await open(obj.body, r2);
      }
    });

    test("SIGKILL in the middle of a 200-object rotation leaves every object decryptable with R1", async () => {
      const { url, store, env } = await backend.location("sigkill");
      const originals = await seed(store, 200);
      let seen = 0;
      const run = await bootseal(
        ["rotate", "--store", url, "--add-age", r2.recipient, "--concurrency", "2"],
        { ...env, SOPS_AGE_KEY: r1.identity },
        (line, kill) => {
          if (line.startsWith("rotated configs/") && ++seen === 15) kill();
        },
      );
      assert.equal(run.signal, "SIGKILL", `killed mid-way (exit ${run.code}): ${run.stdout.slice(-200)}`);
      const now = await snapshot(store);
      assert.equal(now.size, 200, "no object lost, no stray object listed");
      let rotated = 0;
      const samples: { key: string; rotated: boolean }[] = [];
      for (const [key, old] of originals) {
        const body = now.get(key)?.body as Uint8Array;
        const isNew = !Buffer.from(body).equals(Buffer.from(old));
        if (isNew) {
          rotated++;
          assert.ok(Buffer.from(body).includes(r2.recipient), `${key} is the complete new document`);
        }
        assert.deepEqual(await open(body, r1), await open(old, r1), `${key} decrypts with R1`);
        if (samples.filter((s) => s.rotated === isNew).length < 3) samples.push({ key, rotated: isNew });
      }
      assert.ok(rotated >= 15, `at least the reported objects were replaced (${rotated})`);
      assert.ok(rotated < 200, `the kill came before the end (${rotated} rotated)`);

      // Real sops opens old and new documents alike with R1's identity.
      const sops = peer("SOPS_BIN");
      for (const { key } of samples) {
        const i = Number(key.replace(/^configs\/ns\/name/, ""));
        const format = FORMATS[i % FORMATS.length] as Format;
        const file = join(work, `${backend.name.split(" ")[0]}-kill-${i}.enc`);
        await writeFile(file, now.get(key)?.body as Uint8Array);
        const out = await runSops(sops, ["decrypt", "--input-type", format, "--output-type", format, file], {
          SOPS_AGE_KEY_FILE: r1.file,
        });
        assert.equal(out.code, 0, out.stderr);
        assert.equal(out.stdout, Buffer.from(await open(originals.get(key) as Uint8Array, r1)).toString());
      }

      // Whatever the kill left behind (a file-store lock, a temporary file) does not stop a rerun.
      const rerun = await bootseal(["rotate", "--store", url, "--add-age", r2.recipient], {
        ...env,
        SOPS_AGE_KEY: r1.identity,
      });
      assert.equal(rerun.code, 0, rerun.stdout.slice(-500) + rerun.stderr);
      assert.match(rerun.stdout, /^rotated 200, unchanged 0, skipped 0, failed 0$/m);
      for (const [key, obj] of await snapshot(store)) {
        assert.deepEqual(await open(obj.body, r2), await open(originals.get(key) as Uint8Array, r1));
      }
    });

    test("an object changed between get and put is skipped and keeps the other writer's document", async () => {
      const { store } = await backend.location("race");
      await seed(store, 6);
      const target = keyOf(2);
      const theirs = (await makeDocument(99, r1.recipient)).bytes;
      const conditions: unknown[] = [];
      // The rotate loop's view of the store: reading the target also makes another writer
      // replace it, so the etag rotate holds is stale by the time it puts.
      const racing: ObjectStore = {
        url: store.url,
        head: (k, o) => store.head(k, o),
        delete: (k, c, o) => store.delete(k, c, o),
        list: (p, o) => store.list(p, o),
        async get(k, o) {
          const obj = await store.get(k, o);
          if (k === target && obj) await store.put(k, theirs, { ifMatch: obj.etag });
          return obj;
        },
        put(k, body, condition, o) {
          conditions.push(condition);
          return store.put(k, body, condition, o);
        },
      };
      const deps = { env: { SOPS_AGE_KEY: r1.identity } };
      const add = keysFromFlags({ "add-age": r2.recipient }, deps, {}, "add-");
      const report: string[] = [];
      const result = await rotateStore({
        store: racing,
        prefix: "configs/",
        changesFor: () => ({ add, remove: new Set() }),
        concurrency: 4,
        dryRun: false,
        deps,
        report: (line) => report.push(line),
      });
      assert.deepEqual(
        { rotated: result.rotated, skipped: result.skipped, failed: result.failed },
        { rotated: 5, skipped: 1, failed: 0 },
      );
      assert.ok(report.includes(`skipped ${target}: changed during rotation`), report.join("\n"));
      assert.equal(conditions.length, 6);
      assert.ok(
        conditions.every((c) => typeof c === "object" && c !== null && "ifMatch" in c),
        "every write is conditional on the etag read",
      );
      assert.deepEqual((await store.get(target))?.body, theirs, "the other writer's document stays");
      assert.deepEqual(await open(theirs, r1), await open((await store.get(target))?.body as Uint8Array, r1));
    });
  });
}

function runSops(bin: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { env: { PATH: process.env.PATH ?? "", HOME: work, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

describe("rotate: command line", () => {
  async function cli(args: string[]): Promise<{ code: number; err: string }> {
    const stderr = new PassThrough();
    let err = "";
    stderr.on("data", (c: Buffer) => {
      err += c.toString();
    });
    const code = await main(["rotate", ...args], {
      stdout: new PassThrough(),
      stderr,
      stdin: new PassThrough(),
      env: {},
      cwd: work,
    });
    return { code, err };
  }

  test("usage errors: FILE with --store, bad --concurrency, store flags without --store, file flags with it", async () => {
    const url = `file://${work}/usage`;
    for (const [args, pattern] of [
      [["--store", url, "file.yaml"], /takes no FILE/],
      [["--store", url, "--concurrency", "0"], /--concurrency/],
      [["--store", url, "--concurrency", "65"], /--concurrency/],
      [["--store", url, "--concurrency", "2.5"], /--concurrency/],
      [["--store", url, "-i"], /--in-place does not apply/],
      [["--store", url, "--ignore-mac"], /--ignore-mac does not apply/],
      [["--prefix", "configs/", "file.yaml"], /--prefix needs --store/],
      [["--dry-run", "file.yaml"], /--dry-run needs --store/],
    ] as const) {
      const r = await cli([...args]);
      assert.equal(r.code, EXIT_CODES.USAGE, `${args.join(" ")}: ${r.err}`);
      assert.match(r.err, pattern);
    }
  });

  test("an empty prefix rotates nothing and says so", async () => {
    const dir = join(work, "empty-store");
    await mkdir(dir, { recursive: true });
    const stdout = new PassThrough();
    let out = "";
    stdout.on("data", (c: Buffer) => {
      out += c.toString();
    });
    const code = await main(["rotate", "--store", `file://${dir}`, "--add-age", r2.recipient], {
      stdout,
      stderr: new PassThrough(),
      stdin: new PassThrough(),
      env: {},
      cwd: work,
    });
    assert.equal(code, 0);
    assert.equal(out, "rotated 0, unchanged 0, skipped 0, failed 0\n");
  });
});
