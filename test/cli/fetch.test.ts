/**
 * `bootseal fetch` end to end without the service: file:// sources, documents made with
 * `bootseal encrypt --age`, each fetch its own process with a temporary --root, statuses to a
 * recording server (--report).
 */
import assert from "node:assert/strict";
import { chmod, mkdir, readdir, readFile, stat, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import {
  type AgeKey,
  ageKey,
  assertManifestWritten,
  encrypt,
  MANIFEST,
  machineEnv,
  run,
  type StatusServer,
  statusServer,
  tempDir,
} from "../fetcher/helpers.ts";

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let other: AgeKey;
let status: StatusServer;
let manifestDoc: string;

before(async () => {
  dir = await tempDir("fetch-cli");
  key = await ageKey(dir.path, "m1");
  other = await ageKey(dir.path, "m2");
  status = await statusServer();
  manifestDoc = join(dir.path, "manifest.sops.json");
  await writeFile(manifestDoc, await encrypt(MANIFEST, ["--age", key.recipient, "--input-type", "binary"]));
});
after(async () => {
  await status.close();
  await dir.remove();
});

async function newRoot(): Promise<string> {
  const root = join(dir.path, `root-${Math.random().toString(36).slice(2)}`);
  await mkdir(root);
  return root;
}

function fetchArgs(root: string, from: string, ...extra: string[]): string[] {
  return ["fetch", "--from", `file://${from}`, "--apply", "--root", root, "--report", status.url, ...extra];
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

function phases(from: number): string[] {
  return status.posts.slice(from).map((p) => String(p.phase));
}

test("apply: files, modes, owners, marker, no sentinel without a bootstrap command, phases; a second run is a no-op; --force reruns", async () => {
  const root = await newRoot();
  const before = status.posts.length;
  const r = await run(fetchArgs(root, manifestDoc), machineEnv({ SOPS_AGE_KEY_FILE: key.file }));
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(await listAll(root), [
    "/etc/kubernetes/bootstrap-kubelet.conf",
    "/etc/kubernetes/pki/ca.crt",
    "/var/lib/bootseal/bootstrap.done",
    "/var/lib/kubelet/token",
  ]);
  await assertManifestWritten(root);
  const mode = async (p: string) => (await stat(join(root, p))).mode & 0o777;
  assert.equal(await mode("var/lib/bootseal/bootstrap.done"), 0o600);
  assert.match(r.stderr, /no bootstrap command, so no Cluster API sentinel/);
  const marker = JSON.parse(await readFile(join(root, "var/lib/bootseal/bootstrap.done"), "utf8"));
  assert.equal(marker.files.length, 3);
  assert.match(marker.sha256, /^[0-9a-f]{64}$/);
  assert.deepEqual(phases(before), ["fetching", "decrypted", "written", "succeeded"]);
  assert.ok(!r.stderr.includes("s3cr3t"), "no plaintext in the log");

  const again = status.posts.length;
  const second = await run(fetchArgs(root, manifestDoc), machineEnv({ SOPS_AGE_KEY_FILE: key.file }));
  assert.equal(second.code, 0);
  assert.match(second.stderr, /already bootstrapped/);
  assert.equal(status.posts.length, again, "a no-op reports nothing");

  await writeFile(join(root, "var/lib/kubelet/token"), "changed");
  const forced = await run(
    fetchArgs(root, manifestDoc, "--force"),
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
  );
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal(await readFile(join(root, "var/lib/kubelet/token"), "utf8"), "s3cr3t-join-token");
});

test("--out: the payload bytes, 0600; --exec runs after writing and its exit code is reported", async () => {
  const root = await newRoot();
  const payload = "#cloud-config\nwrite_files: []\n";
  const doc = join(dir.path, "payload.json");
  await writeFile(doc, await encrypt(payload, ["--age", key.recipient, "--input-type", "binary"]));
  const before = status.posts.length;
  const r = await run(
    [
      "fetch",
      "--from",
      `file://${doc}`,
      "--out",
      "/etc/bootstrap/user-data",
      "--root",
      root,
      "--report",
      status.url,
      "--exec",
      'echo "joined with $(wc -c < "$BOOTSEAL_ROOT/etc/bootstrap/user-data") bytes"',
    ],
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(await readFile(join(root, "etc/bootstrap/user-data"), "utf8"), payload);
  assert.equal((await stat(join(root, "etc/bootstrap/user-data"))).mode & 0o777, 0o600);
  assert.match(r.stdout, /joined with 30 bytes/);
  assert.deepEqual(phases(before), ["fetching", "decrypted", "written", "running", "succeeded"]);
  const last = status.posts.at(-1)!;
  assert.equal(last.exitCode, 0);
  assert.match(String(last.output), /joined with 30 bytes/);
});

test("--exec exiting 1: status failed with the exit code and the output tail, no marker, no sentinel", async () => {
  const root = await newRoot();
  const before = status.posts.length;
  const r = await run(
    fetchArgs(root, manifestDoc, "--exec", "echo preflight check failed >&2; exit 1"),
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
  );
  assert.equal(r.code, EXIT_CODES.EXEC_FAILED, r.stderr);
  assert.match(r.stderr, /bootstrap command exited with code 1/);
  assert.deepEqual(phases(before), ["fetching", "decrypted", "written", "running", "failed"]);
  const failed = status.posts.at(-1)!;
  assert.equal(failed.exitCode, 1);
  assert.equal(failed.output, "preflight check failed\n");
  assert.match(String(failed.message), /^EXEC_FAILED: /);
  const files = await listAll(root);
  assert.ok(!files.includes("/var/lib/bootseal/bootstrap.done"));
  assert.ok(!files.includes("/run/cluster-api/bootstrap-success.complete"));
});

test("--json: one result object on stdout, the command's output on stderr; a failure as a JSON error line", async () => {
  const root = await newRoot();
  const r = await run(
    fetchArgs(root, manifestDoc, "--json", "--exec", "echo from-the-command"),
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
  );
  assert.equal(r.code, 0, r.stderr);
  const result = JSON.parse(r.stdout) as Record<string, unknown>;
  assert.equal(result.outcome, "succeeded");
  assert.equal(result.kind, "manifest");
  assert.deepEqual(result.files, [
    "/etc/kubernetes/bootstrap-kubelet.conf",
    "/etc/kubernetes/pki/ca.crt",
    "/var/lib/kubelet/token",
  ]);
  assert.match(String(result.sha256), /^[0-9a-f]{64}$/);
  assert.equal(result.exitCode, 0);
  assert.match(r.stderr, /from-the-command/);
  const again = await run(
    fetchArgs(root, manifestDoc, "--json"),
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
  );
  assert.equal(again.code, 0, again.stderr);
  assert.equal((JSON.parse(again.stdout) as { outcome: string }).outcome, "already-bootstrapped");
  const wrong = await run(
    fetchArgs(await newRoot(), manifestDoc, "--json"),
    machineEnv({ SOPS_AGE_KEY_FILE: other.file }),
  );
  assert.equal(wrong.code, EXIT_CODES.NO_KEY_AVAILABLE);
  assert.equal(wrong.stdout, "");
  const last = wrong.stderr.trimEnd().split("\n").at(-1) ?? "";
  assert.equal((JSON.parse(last) as { error: { code: string } }).error.code, "NO_KEY_AVAILABLE");
});

async function expectFailure(
  docPath: string,
  env: Record<string, string | undefined>,
  exitCode: number,
  reason: string,
  extra: string[] = [],
): Promise<void> {
  const root = await newRoot();
  const before = status.posts.length;
  const r = await run(fetchArgs(root, docPath, ...extra), machineEnv(env));
  assert.equal(r.code, exitCode, r.stderr);
  const ph = phases(before);
  assert.equal(ph.at(-1), "failed", ph.join(","));
  assert.match(String(status.posts.at(-1)!.message), new RegExp(`^${reason}: `));
  assert.deepEqual(await listAll(root), [], "nothing written");
  assert.ok(!r.stderr.includes("s3cr3t"));
}

test("wrong key: NO_KEY_AVAILABLE, nothing written", async () => {
  await expectFailure(
    manifestDoc,
    { SOPS_AGE_KEY_FILE: other.file },
    EXIT_CODES.NO_KEY_AVAILABLE,
    "NO_KEY_AVAILABLE",
  );
});

test("tampered document: DECRYPTION_FAILED (a value) or MAC_MISMATCH (the MAC), nothing written", async () => {
  const doc = JSON.parse(await readFile(manifestDoc, "utf8"));
  // flip one base64 character of the encrypted payload
  doc.data = doc.data.replace(
    /data:([A-Za-z0-9+/])/,
    (_m: string, c: string) => `data:${c === "A" ? "B" : "A"}`,
  );
  const tampered = join(dir.path, "tampered.json");
  await writeFile(tampered, JSON.stringify(doc));
  await expectFailure(
    tampered,
    { SOPS_AGE_KEY_FILE: key.file },
    EXIT_CODES.DECRYPTION_FAILED,
    "DECRYPTION_FAILED",
  );

  const mac = JSON.parse(await readFile(manifestDoc, "utf8"));
  mac.sops.lastmodified = "2001-01-01T00:00:00Z";
  const macTampered = join(dir.path, "tampered-mac.json");
  await writeFile(macTampered, JSON.stringify(mac));
  await expectFailure(macTampered, { SOPS_AGE_KEY_FILE: key.file }, EXIT_CODES.MAC_MISMATCH, "MAC_MISMATCH");
});

test("a manifest path outside the allowed roots: PATH_NOT_ALLOWED and nothing written (not even the good files)", async () => {
  const evil = `${MANIFEST}---\npath: /usr/local/bin/kubelet\ncontent: x\n`;
  const doc = join(dir.path, "evil.json");
  await writeFile(doc, await encrypt(evil, ["--age", key.recipient, "--input-type", "binary"]));
  await expectFailure(doc, { SOPS_AGE_KEY_FILE: key.file }, EXIT_CODES.PATH_NOT_ALLOWED, "PATH_NOT_ALLOWED");
  // allowed when the operator says so
  const root = await newRoot();
  const ok = await run(
    fetchArgs(root, doc, "--allowed-roots", "/etc,/var/lib,/run,/usr/local"),
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
  );
  assert.equal(ok.code, 0, ok.stderr);
});

test("a symlink in the root leading out of the allowed roots: refused, nothing written", async () => {
  const root = await newRoot();
  await mkdir(join(root, "usr/bin"), { recursive: true });
  await mkdir(join(root, "var/lib"), { recursive: true });
  await symlink("/usr/bin", join(root, "var/lib/kubelet"));
  const before = status.posts.length;
  const r = await run(fetchArgs(root, manifestDoc), machineEnv({ SOPS_AGE_KEY_FILE: key.file }));
  assert.equal(r.code, EXIT_CODES.PATH_NOT_ALLOWED, r.stderr);
  assert.equal(phases(before).at(-1), "failed");
  assert.deepEqual(await readdir(join(root, "usr/bin")), []);
  assert.ok(!(await listAll(root)).some((f) => f.startsWith("/etc")), "not even the allowed files");
});

test("token file readable by others is refused before anything happens", async () => {
  const root = await newRoot();
  const token = join(dir.path, "token");
  await writeFile(token, "abc\n");
  await chmod(token, 0o644);
  const r = await run(
    [...fetchArgs(root, manifestDoc), "--token-file", token],
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
  );
  assert.equal(r.code, EXIT_CODES.USAGE);
  assert.match(r.stderr, /readable by group or others \(mode 0644\)/);
  assert.deepEqual(await listAll(root), []);
});

test("usage errors", async () => {
  const root = await newRoot();
  const r1 = await run(
    ["fetch", "--from", `file://${manifestDoc}`, "--apply", "--out", "/etc/x", "--root", root],
    machineEnv(),
  );
  assert.equal(r1.code, EXIT_CODES.USAGE);
  assert.match(r1.stderr, /one of --out FILE and --apply/);
  const r2 = await run(
    ["fetch", "--from", "https://h/v1/machines/x", "--apply", "--root", root],
    machineEnv(),
  );
  assert.equal(r2.code, EXIT_CODES.USAGE);
  assert.match(r2.stderr, /ends in \/v1\/machines\/<namespace>\/<name>\/config/);
  const r3 = await run(
    ["fetch", "--from", "https://user:pw@h/v1/machines/a/b/config", "--apply"],
    machineEnv(),
  );
  assert.equal(r3.code, EXIT_CODES.USAGE);
  assert.ok(!r3.stderr.includes("pw"));
});
