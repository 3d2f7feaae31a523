/**
 * End to end through the bundle (dist/cli/main.js, built by scripts/bundle.ts when missing):
 * a cloud-config in the kubeadm provider's shape, encrypted with `bootseal encrypt --age`,
 * fetched with `bootseal fetch --from file://… --payload auto --root TMP`. Its runcmd calls a
 * stand-in `kubeadm` that records its arguments and then succeeds or fails. Checked: the
 * files equal what cloud-init 22.4.2's own write_files writes from the same config, kubeadm
 * ran with the right arguments after the files were in place, the sentinel (written by the
 * payload's own `&& echo success > …`) exists only on success, and the status history ends
 * in `succeeded`, or `failed` with kubeadm's exit code (exit 60, no marker, so a rerun runs).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { access, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { cloudInitPython, type Outcome, runOracle, seedRoot, snapshot } from "./cloud-init-oracle.ts";
import {
  type AgeKey,
  ageKey,
  encrypt,
  machineEnv,
  REPO,
  run,
  type StatusServer,
  statusServer,
  tempDir,
} from "./helpers.ts";

const DIST = join(REPO, "dist/cli/main.js");
const SENTINEL = "run/cluster-api/bootstrap-success.complete";
const MARKER = "var/lib/bootseal/bootstrap.done";

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let status: StatusServer;
let config: string;
let doc: string;
let bin: string;

before(async () => {
  // The bundle itself (dist/cli/main.js is only the Node-version entry that loads it).
  const built = await access(join(REPO, "dist/cli/bootseal.js")).then(
    () => true,
    () => false,
  );
  if (!built) {
    const r = spawnSync(process.execPath, ["scripts/bundle.ts"], {
      cwd: REPO,
      encoding: "utf8",
      timeout: 300_000,
    });
    assert.equal(r.status, 0, `scripts/bundle.ts: ${r.stderr}`);
  }
  dir = await tempDir("cc-e2e");
  key = await ageKey(dir.path, "m1");
  status = await statusServer();
  // The provider's runcmd, with the sentinel under --root (on a machine BOOTSEAL_ROOT is /).
  const fixture = await readFile(join(REPO, "test/fixtures/cloud-config/kubeadm-join.yaml"), "utf8");
  config = fixture.replace("> /run/cluster-api/", "> $BOOTSEAL_ROOT/run/cluster-api/");
  assert.notEqual(config, fixture);
  doc = join(dir.path, "doc.json");
  await writeFile(doc, await encrypt(config, ["--age", key.recipient, "--input-type", "binary"]));
  bin = join(dir.path, "bin");
  await mkdir(bin);
  await writeFile(
    join(bin, "kubeadm"),
    [
      "#!/bin/sh",
      "# stand-in: records its arguments; needs the join configuration written first",
      'printf "%s\\n" "$@" > "$KUBEADM_ARGS"',
      'test -r "$BOOTSEAL_ROOT/run/kubeadm/kubeadm-join-config.yaml" || exit 9',
      'echo "kubeadm stand-in exiting $KUBEADM_EXIT"',
      'exit "$KUBEADM_EXIT"',
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
});
after(async () => {
  await status.close();
  await dir.remove();
});

async function fetchInto(name: string, exit: number) {
  const root = join(dir.path, name);
  await seedRoot(root);
  const args = join(dir.path, `${name}.args`);
  const before = status.posts.length;
  const r = await run(
    [DIST, "fetch", "--from", `file://${doc}`, "--payload", "auto", "--root", root, "--report", status.url],
    machineEnv({
      SOPS_AGE_KEY_FILE: key.file,
      PATH: `${bin}:${process.env.PATH}`,
      KUBEADM_ARGS: args,
      KUBEADM_EXIT: String(exit),
    }),
    process.execPath,
    120_000,
  );
  return { r, root, args, posts: status.posts.slice(before) };
}

/** The files the payload wrote (marker, sentinel and the seeded files aside). */
async function payloadFiles(root: string): Promise<Outcome> {
  const all = await snapshot(root);
  return { ok: true, files: all.filter((e) => !e.path.startsWith("var") && e.path !== SENTINEL) };
}

test("kubeadm join succeeds: cloud-init's files, kubeadm's arguments, the payload's sentinel, succeeded", {
  timeout: 180_000,
}, async () => {
  const { r, root, args, posts } = await fetchInto("ok", 0);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /kubeadm stand-in exiting 0/);
  assert.deepEqual((await readFile(args, "utf8")).split("\n"), [
    "join",
    "--config",
    "/run/kubeadm/kubeadm-join-config.yaml",
    "",
  ]);
  assert.equal(await readFile(join(root, SENTINEL), "utf8"), "success\n");
  assert.match(r.stderr, /the payload writes the Cluster API sentinel itself/);
  const marker = JSON.parse(await readFile(join(root, MARKER), "utf8"));
  assert.equal(marker.kind, "cloud-config");
  assert.deepEqual(
    posts.map((p) => p.phase),
    ["fetching", "decrypted", "written", "running", "succeeded"],
  );
  assert.equal(posts.at(-1)?.exitCode, 0);

  const oracleDir = join(dir.path, "oracle");
  await mkdir(oracleDir);
  const [want] = await runOracle(await cloudInitPython(), [config], oracleDir);
  assert.ok(want?.ok, "cloud-init wrote the config");
  // cloud-init's runcmd would have written the sentinel too; the oracle runs write_files only.
  assert.deepEqual(await payloadFiles(root), {
    ok: true,
    files: want.files.filter((e) => !e.path.startsWith("var")),
  });
  assert.ok(!r.stderr.includes("abcdef.0123456789abcdef"), "the join token is not logged");
});

test("kubeadm join fails: failed with its exit code and output, exit 60, no sentinel, no marker; the rerun runs kubeadm again", {
  timeout: 180_000,
}, async () => {
  const { r, root, args, posts } = await fetchInto("fail", 3);
  assert.equal(r.code, EXIT_CODES.EXEC_FAILED, r.stderr);
  assert.match(r.stderr, /EXEC_FAILED|runcmd 1 of 1 exited with code 3/);
  await assert.rejects(access(join(root, SENTINEL)));
  await assert.rejects(access(join(root, MARKER)));
  const failed = posts.at(-1) as Record<string, unknown>;
  assert.equal(failed.phase, "failed");
  assert.equal(failed.exitCode, 3);
  assert.match(String(failed.output), /kubeadm stand-in exiting 3/);
  await rm(args);
  const again = await run(
    [DIST, "fetch", "--from", `file://${doc}`, "--root", root],
    machineEnv({
      SOPS_AGE_KEY_FILE: key.file,
      PATH: `${bin}:${process.env.PATH}`,
      KUBEADM_ARGS: args,
      KUBEADM_EXIT: "0",
    }),
    process.execPath,
    120_000,
  );
  assert.equal(again.code, 0, again.stderr);
  assert.match(await readFile(args, "utf8"), /^join\n/);
  assert.equal(await readFile(join(root, SENTINEL), "utf8"), "success\n");
});
