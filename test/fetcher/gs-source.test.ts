/**
 * `bootseal fetch --from gs://…` end to end against the real fake-gcs-server peer: a unique
 * bucket, documents made with `bootseal encrypt --age` at `configs/default/m1`, each fetch its
 * own process with the environment a machine would have (the emulator through
 * STORAGE_EMULATOR_HOST, its age key, nothing from the test runner). A binary payload to
 * --out, a manifest to --apply, a missing object, a tampered object, and an endpoint nobody
 * listens on past a short --deadline.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Bucket, Storage } from "@google-cloud/storage";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { peer, uniqueName } from "../helpers/peers.ts";
import { freePort } from "../helpers/ports.ts";
import {
  type AgeKey,
  ageKey,
  assertManifestWritten,
  encrypt,
  MANIFEST,
  machineEnv,
  run,
  tempDir,
} from "./helpers.ts";

const KEY = "configs/default/m1";

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let endpoint: string;
let bucket: Bucket;
/** Random bytes, every byte value included: the payload must come back byte for byte. */
const PAYLOAD = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(4096)]);
let payloadDoc: Uint8Array;
let manifestDoc: Uint8Array;

before(async () => {
  endpoint = peer("GCS_ENDPOINT");
  dir = await tempDir("gs-source");
  key = await ageKey(dir.path, "m1");
  payloadDoc = await encrypt(PAYLOAD, ["--age", key.recipient, "--input-type", "binary"]);
  manifestDoc = await encrypt(MANIFEST, ["--age", key.recipient, "--input-type", "binary"]);
  // The bucket is made with the raw client, not the code under test.
  const storage = new Storage({ apiEndpoint: endpoint, projectId: "test" });
  [bucket] = await storage.createBucket(uniqueName("fetch-gs"));
});

after(async () => {
  if (bucket) {
    await bucket.deleteFiles({ force: true });
    await bucket.delete();
  }
  await dir?.remove();
});

async function put(name: string, body: Uint8Array): Promise<string> {
  const file = bucket.file(name);
  await file.save(Buffer.from(body), { resumable: false });
  return String(file.metadata.generation);
}

/** The machine's environment: its age key and the emulator, nothing from the test runner. */
function gsEnv(emulator = endpoint): Record<string, string | undefined> {
  return machineEnv({ SOPS_AGE_KEY_FILE: key.file, STORAGE_EMULATOR_HOST: emulator });
}

async function newRoot(): Promise<string> {
  const root = join(dir.path, `root-${randomBytes(6).toString("hex")}`);
  await mkdir(root);
  return root;
}

async function listAll(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, rel: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) await walk(join(d, e.name), r);
      else out.push(r);
    }
  };
  await walk(root, "");
  return out.sort();
}

const mode = async (root: string, p: string) => (await stat(join(root, p))).mode & 0o777;

async function marker(root: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(join(root, "var/lib/bootseal/bootstrap.done"), "utf8"));
}

async function sentinel(root: string): Promise<void> {
  assert.equal(await readFile(join(root, "run/cluster-api/bootstrap-success.complete"), "utf8"), "success\n");
  assert.equal(await mode(root, "run/cluster-api/bootstrap-success.complete"), 0o644);
}

test("gs:// --out: the binary payload byte for byte (0600), marker with source, machine, sha256, generation; sentinel", async () => {
  const generation = await put(KEY, payloadDoc);
  const root = await newRoot();
  const from = `gs://${bucket.name}/${KEY}`;
  const r = await run(
    ["fetch", "--from", from, "--out", "/etc/bootstrap/user-data", "--root", root, "--exec", "true"],
    gsEnv(),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await listAll(root), [
    "/etc/bootstrap/user-data",
    "/run/cluster-api/bootstrap-success.complete",
    "/var/lib/bootseal/bootstrap.done",
  ]);
  assert.ok(PAYLOAD.equals(await readFile(join(root, "etc/bootstrap/user-data"))), "the payload bytes");
  assert.equal(await mode(root, "etc/bootstrap/user-data"), 0o600);
  assert.equal(await mode(root, "var/lib/bootseal/bootstrap.done"), 0o600);
  const m = await marker(root);
  assert.equal(m.source, from);
  assert.equal(m.machine, "default/m1", "the machine id comes from the configs/NS/NAME key");
  assert.equal(m.sha256, createHash("sha256").update(payloadDoc).digest("hex"));
  assert.equal(m.etag, `"${generation}"`, "the etag is the object's generation");
  assert.deepEqual(m.files, ["/etc/bootstrap/user-data"]);
  await sentinel(root);
  assert.match(r.stderr, new RegExp(`attempt 1 get gs://${bucket.name}/${KEY}: ok`));
});

test("gs:// --apply (STORAGE_EMULATOR_HOST as host:port): the manifest's files and modes, marker, sentinel; the next run is a no-op", async () => {
  await put(KEY, manifestDoc);
  const root = await newRoot();
  const args = ["fetch", "--from", `gs://${bucket.name}/${KEY}`, "--apply", "--root", root, "--exec", "true"];
  // the form the Google tools document: host:port, no scheme
  const hostPort = new URL(endpoint).host;
  const r = await run(args, gsEnv(hostPort));
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await listAll(root), [
    "/etc/kubernetes/bootstrap-kubelet.conf",
    "/etc/kubernetes/pki/ca.crt",
    "/run/cluster-api/bootstrap-success.complete",
    "/var/lib/bootseal/bootstrap.done",
    "/var/lib/kubelet/token",
  ]);
  await assertManifestWritten(root);
  const m = await marker(root);
  assert.equal(m.machine, "default/m1");
  assert.equal(m.sha256, createHash("sha256").update(manifestDoc).digest("hex"));
  assert.equal((m.files as unknown[]).length, 3);
  await sentinel(root);
  assert.ok(!r.stderr.includes("s3cr3t"), "no plaintext in the log");

  const again = await run(args, gsEnv(hostPort));
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /already bootstrapped/);
});

test("gs:// a missing object: NOT_FOUND (exit 20) at once, not retried, nothing written", async () => {
  const root = await newRoot();
  const from = `gs://${bucket.name}/configs/default/absent`;
  const r = await run(["fetch", "--from", from, "--apply", "--root", root, "--deadline", "30s"], gsEnv());
  assert.equal(r.code, EXIT_CODES.NOT_FOUND, r.stderr);
  assert.match(r.stderr, /no such object/);
  assert.doesNotMatch(r.stderr, /retrying/, "a missing object is never retried");
  assert.deepEqual(await listAll(root), [], "nothing written");
});

test("gs:// a tampered object: DECRYPTION_FAILED (exit 25, as sops), nothing written", async () => {
  const doc = JSON.parse(Buffer.from(manifestDoc).toString("utf8"));
  // flip one base64 character of the encrypted payload
  doc.data = doc.data.replace(
    /data:([A-Za-z0-9+/])/,
    (_m: string, c: string) => `data:${c === "A" ? "B" : "A"}`,
  );
  await put("tampered/configs/default/m1", Buffer.from(JSON.stringify(doc)));
  const root = await newRoot();
  const r = await run(
    ["fetch", "--from", `gs://${bucket.name}/tampered/configs/default/m1`, "--apply", "--root", root],
    gsEnv(),
  );
  assert.equal(r.code, EXIT_CODES.DECRYPTION_FAILED, r.stderr);
  assert.match(r.stderr, /DECRYPTION_FAILED/);
  assert.deepEqual(await listAll(root), [], "nothing written");
  assert.ok(!r.stderr.includes("s3cr3t"));
});

test("gs:// endpoint nobody listens on, past a short --deadline: STORE_UNAVAILABLE with a clear message", async () => {
  const port = await freePort();
  const root = await newRoot();
  const from = `gs://${bucket.name}/${KEY}`;
  const t0 = Date.now();
  const r = await run(
    ["fetch", "--from", from, "--apply", "--root", root, "--deadline", "3s"],
    gsEnv(`http://127.0.0.1:${port}`),
  );
  assert.equal(r.code, EXIT_CODES.STORE_UNAVAILABLE, r.stderr);
  assert.ok(Date.now() - t0 < 20_000, `took ${Date.now() - t0} ms`);
  assert.match(
    r.stderr,
    /attempt 1 get gs:\/\/\S+: STORE_UNAVAILABLE: GCS endpoint unreachable \(ECONNREFUSED\); retrying in/,
  );
  assert.match(
    r.stderr,
    new RegExp(
      `bootseal: get gs://${bucket.name}/${KEY}: gave up after \\d+ attempts? in [\\d.]+s \\(the deadline reached\\); last error: `,
    ),
  );
  assert.match(r.stderr, /phase failed STORE_UNAVAILABLE/);
  assert.deepEqual(await listAll(root), [], "nothing written");
});
