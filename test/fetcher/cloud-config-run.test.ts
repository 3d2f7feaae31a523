/**
 * A cloud-config through the whole fetch run (in-process runFetch, file:// documents made with
 * `bootseal encrypt --age`, a status server recording the reports): bootcmd before the files,
 * runcmd after them, in order, strings through sh -c and lists exec'd with their exact argv,
 * stopping at the first failure; --exec after runcmd; unknown modules; and the sentinel
 * rules: the fetcher writes it only after a bootstrap command succeeded and only when the
 * payload does not write it itself; a failure leaves no sentinel and no marker.
 */
import assert from "node:assert/strict";
import { access, mkdir, readFile, realpath, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import { isBootsealError } from "../../src/errors.ts";
import { type FetchOptions, runFetch } from "../../src/fetcher/fetch-run.ts";
import { DEFAULT_ALLOWED_ROOTS } from "../../src/fetcher/paths.ts";
import {
  type AgeKey,
  ageKey,
  encrypt,
  machineEnv,
  type StatusServer,
  statusServer,
  tempDir,
} from "./helpers.ts";

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let status: StatusServer;
let recorder: string;
let n = 0;

const SENTINEL = "/run/cluster-api/bootstrap-success.complete";
const MARKER = "/var/lib/bootseal/bootstrap.done";

before(async () => {
  dir = await tempDir("cc-run");
  key = await ageKey(dir.path, "m1");
  status = await statusServer();
  // Records its arguments, one per line, in $LOG.
  recorder = join(dir.path, "record");
  await writeFile(recorder, '#!/bin/sh\nfor a in "$@"; do printf "arg:%s\\n" "$a" >> "$LOG"; done\n', {
    mode: 0o755,
  });
});
after(async () => {
  await status.close();
  await dir.remove();
});

interface Run {
  readonly root: string;
  readonly log: string;
  readonly stderr: () => string;
  readonly fetch: (extra?: Partial<FetchOptions>) => Promise<number>;
}

/** A root, a log file, and a fetch of TEXT (encrypted) into the root; ENV added to the machine's. */
async function setup(text: string, env: Record<string, string> = {}): Promise<Run> {
  const id = ++n;
  const root = join(dir.path, `root-${id}`);
  await mkdir(root);
  const log = join(dir.path, `log-${id}`);
  await writeFile(log, "");
  const doc = join(dir.path, `doc-${id}.json`);
  await writeFile(doc, await encrypt(text, ["--age", key.recipient, "--input-type", "binary"]));
  let err = "";
  const fetch = (extra: Partial<FetchOptions> = {}): Promise<number> => {
    const stderr = new PassThrough();
    stderr.on("data", (c: Buffer) => {
      err += c.toString();
    });
    return runFetch(
      {
        from: `file://${doc}`,
        root,
        allowedRoots: DEFAULT_ALLOWED_ROOTS,
        marker: MARKER,
        sentinel: SENTINEL,
        force: false,
        oneTime: false,
        deadlineMs: 10_000,
        attemptTimeoutMs: 5000,
        reportTimeoutMs: 5000,
        report: status.url,
        ...extra,
      },
      {
        io: {
          stdout: new PassThrough().resume(),
          stderr,
          env: machineEnv({ SOPS_AGE_KEY_FILE: key.file, LOG: log, ...env }),
        },
        labeler: null,
      },
    );
  };
  return { root, log, stderr: () => err, fetch };
}

const exists = (p: string): Promise<boolean> =>
  access(p).then(
    () => true,
    () => false,
  );

async function rejectsWith(p: Promise<unknown>, code: string): Promise<Error> {
  let caught: unknown;
  await p.catch((err: unknown) => {
    caught = err;
  });
  assert.ok(isBootsealError(caught), `a BootsealError, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  return caught;
}

test("bootcmd, write_files, runcmd in cloud-init's order; strings through sh -c, lists exec'd with their exact argv", async () => {
  const r = await setup(`#cloud-config
bootcmd:
  - test ! -e "$BOOTSEAL_ROOT/etc/app/app.conf" && echo "bootcmd before the files" >> "$LOG"
write_files:
  - path: /etc/app/app.conf
    content: hello
runcmd:
  - test -e "$BOOTSEAL_ROOT/etc/app/app.conf" && echo "runcmd 1 in $PWD" >> "$LOG"
  - [${JSON.stringify(recorder)}, "a b", "$HOME", "'q'", 5, true, 1.0, ~]
  - echo "runcmd 3" >> "$LOG"
`);
  const before = status.posts.length;
  assert.equal(await r.fetch(), 0, r.stderr());
  const real = await realpath(r.root);
  assert.deepEqual((await readFile(r.log, "utf8")).split("\n"), [
    "bootcmd before the files",
    `runcmd 1 in ${real}`,
    "arg:a b",
    "arg:$HOME",
    "arg:'q'",
    "arg:5",
    "arg:True",
    "arg:1.0",
    "arg:None",
    "runcmd 3",
    "",
  ]);
  assert.equal(await readFile(join(r.root, "etc/app/app.conf"), "utf8"), "hello");
  assert.equal(await readFile(join(r.root, SENTINEL), "utf8"), "success\n", "runcmd ran and succeeded");
  assert.ok(await exists(join(r.root, MARKER)));
  const phases = status.posts
    .slice(before)
    .map((p) => `${p.phase}${p.phase === "running" ? ` ${p.message}` : ""}`);
  assert.deepEqual(phases, [
    "fetching",
    "decrypted",
    "running bootcmd 1 of 1",
    "written",
    "running runcmd 1 of 3",
    "running runcmd 2 of 3",
    "running runcmd 3 of 3",
    "succeeded",
  ]);
  assert.ok(!r.stderr().includes("runcmd 1 in"), "the commands' text is not logged");
});

test("runcmd stops at the first failure: failed with its exit code and output, no sentinel, no marker; a rerun runs again", async () => {
  const r = await setup(`#cloud-config
write_files:
  - path: /etc/app/app.conf
    content: hello
runcmd:
  - echo one >> "$LOG"
  - 'echo "kubeadm: the join failed" >&2; exit 7'
  - echo three >> "$LOG"
`);
  const before = status.posts.length;
  const err = await rejectsWith(r.fetch(), "EXEC_FAILED");
  assert.match(err.message, /runcmd 2 of 3 exited with code 7/);
  assert.equal(await readFile(r.log, "utf8"), "one\n");
  assert.equal(await exists(join(r.root, SENTINEL)), false);
  assert.equal(await exists(join(r.root, MARKER)), false);
  const failed = status.posts.slice(before).at(-1) as Record<string, unknown>;
  assert.equal(failed.phase, "failed");
  assert.equal(failed.exitCode, 7);
  assert.match(String(failed.output), /kubeadm: the join failed/);
  await rejectsWith(r.fetch(), "EXEC_FAILED");
  assert.equal(await readFile(r.log, "utf8"), "one\none\n", "no marker: the next boot runs it again");
});

test("a list whose program does not exist fails like the shell's 127", async () => {
  const r = await setup(`#cloud-config\nruncmd:\n  - [/nonexistent/kubeadm, join]\n`);
  const err = await rejectsWith(r.fetch(), "EXEC_FAILED");
  assert.match(err.message, /runcmd 1 of 1 exited with code 127/);
  assert.equal(await exists(join(r.root, SENTINEL)), false);
});

test("the payload writes the sentinel itself (the kubeadm provider's runcmd): the fetcher does not", async () => {
  const r = await setup(`## template: jinja
#cloud-config
runcmd:
  - 'true && echo payload-wrote > "$BOOTSEAL_ROOT/run/cluster-api/bootstrap-success.complete"'
write_files:
  - path: /run/cluster-api/placeholder
    content: "This placeholder file is used to create the /run/cluster-api sub directory"
`);
  assert.equal(await r.fetch(), 0, r.stderr());
  assert.equal(await readFile(join(r.root, SENTINEL), "utf8"), "payload-wrote\n");
  assert.match(r.stderr(), /the payload writes the Cluster API sentinel itself/);
});

test("write_files naming the sentinel: written by the payload, not refused and not overwritten", async () => {
  const r = await setup(`#cloud-config
write_files:
  - path: ${SENTINEL}
    content: "from write_files\\n"
runcmd:
  - "true"
`);
  assert.equal(await r.fetch(), 0, r.stderr());
  assert.equal(await readFile(join(r.root, SENTINEL), "utf8"), "from write_files\n");
});

test("no bootstrap command (no runcmd, no --exec): succeeded with the files and the marker, no sentinel", async () => {
  const r = await setup(`#cloud-config\nwrite_files:\n  - path: /etc/app/only.conf\n    content: x\n`);
  const before = status.posts.length;
  assert.equal(await r.fetch(), 0, r.stderr());
  assert.equal(await exists(join(r.root, SENTINEL)), false);
  assert.ok(await exists(join(r.root, MARKER)));
  const done = status.posts.slice(before).at(-1) as Record<string, unknown>;
  assert.equal(done.phase, "succeeded");
  assert.match(String(done.message), /no bootstrap command, so no Cluster API sentinel/);
  const written = status.posts.slice(before).find((p) => p.phase === "written");
  assert.match(String(written?.message), /cloud-config: 1 file\(s\): \/etc\/app\/only\.conf/);
});

test("cloud-config and --exec: runcmd first, then --exec; --exec failing means no sentinel", async () => {
  const ok = await setup(`#cloud-config\nruncmd:\n  - echo runcmd >> "$LOG"\n`);
  assert.equal(await ok.fetch({ exec: 'echo exec >> "$LOG"' }), 0, ok.stderr());
  assert.equal(await readFile(ok.log, "utf8"), "runcmd\nexec\n");
  assert.equal(await readFile(join(ok.root, SENTINEL), "utf8"), "success\n");

  const bad = await setup(`#cloud-config\nruncmd:\n  - echo runcmd >> "$LOG"\n`);
  await rejectsWith(bad.fetch({ exec: "exit 3" }), "EXEC_FAILED");
  assert.equal(await readFile(bad.log, "utf8"), "runcmd\n");
  assert.equal(await exists(join(bad.root, SENTINEL)), false);
  assert.equal(await exists(join(bad.root, MARKER)), false);
});

test("a module bootseal does not apply is BAD_INPUT naming it, nothing written; --allow-unknown-modules makes it a warning", async () => {
  const text = `#cloud-config\npackages: [kubeadm]\nwrite_files:\n  - path: /etc/app/a.conf\n    content: a\nruncmd:\n  - echo ran >> "$LOG"\n`;
  const refused = await setup(text);
  const err = await rejectsWith(refused.fetch(), "BAD_INPUT");
  assert.match(err.message, /the module "packages" is not supported/);
  assert.equal(await exists(join(refused.root, "etc/app/a.conf")), false);
  assert.equal(await readFile(refused.log, "utf8"), "");

  const warned = await setup(text);
  assert.equal(await warned.fetch({ allowUnknownModules: true }), 0, warned.stderr());
  assert.match(
    warned.stderr(),
    /the module "packages" is not supported; skipped \(--allow-unknown-modules\)/,
  );
  assert.equal(await readFile(join(warned.root, "etc/app/a.conf"), "utf8"), "a");
  assert.equal(await readFile(warned.log, "utf8"), "ran\n");
});

test("bootcmd failing: EXEC_FAILED before any file is written", async () => {
  const r = await setup(
    `#cloud-config\nbootcmd:\n  - exit 4\nwrite_files:\n  - path: /etc/app/a.conf\n    content: a\n`,
  );
  const err = await rejectsWith(r.fetch(), "EXEC_FAILED");
  assert.match(err.message, /bootcmd 1 of 1 exited with code 4/);
  assert.equal(await exists(join(r.root, "etc/app")), false);
});

test("a Jinja template with variables and no cloud-init instance data under the root is refused", async () => {
  const r = await setup(
    `## template: jinja\n#cloud-config\nwrite_files:\n  - path: /etc/app/a\n    content: "{{ ds.meta_data.local_hostname }}"\n`,
  );
  const err = await rejectsWith(r.fetch(), "BAD_INPUT");
  assert.match(err.message, /Jinja.*instance-data-sensitive\.json or .*instance-data\.json under --root/);
  assert.ok(!err.message.includes("local_hostname"), "no payload text in the message");
  assert.equal(await exists(join(r.root, "etc/app")), false);
});

test("a Jinja template is rendered from the root's instance data before the modules run", async () => {
  const r = await setup(
    `## template: jinja\n#cloud-config\nwrite_files:\n  - path: /etc/app/a\n    content: "{{ ds.meta_data.local_hostname }} {{v1.instance_id}}"\nruncmd:\n  - [${recorder}, "{{ v1.local_hostname }}", "{{ nowhere }}"]\n`,
  );
  await mkdir(join(r.root, "run/cloud-init"), { recursive: true });
  await writeFile(
    join(r.root, "run/cloud-init/instance-data-sensitive.json"),
    JSON.stringify({
      ds: { meta_data: { "local-hostname": "ip-10-0-0-7.ec2.internal" } },
      v1: { "instance-id": "i-0abc", local_hostname: "ip-10-0-0-7" },
    }),
  );
  assert.equal(await r.fetch(), 0, r.stderr());
  assert.equal(await readFile(join(r.root, "etc/app/a"), "utf8"), "ip-10-0-0-7.ec2.internal i-0abc");
  assert.equal(await readFile(r.log, "utf8"), "arg:ip-10-0-0-7\narg:CI_MISSING_JINJA_VAR/nowhere\n");
  assert.match(r.stderr(), /Jinja variables not in the instance data.*: nowhere/);
});

/** A directory holding a stand-in `cloud-init` (a test double) that records what it is handed. */
async function fakeCloudInit(exitCode: number): Promise<Record<string, string>> {
  const bin = join(dir.path, `fake-cloud-init-${exitCode}`);
  await mkdir(bin, { recursive: true });
  await writeFile(
    join(bin, "cloud-init"),
    `#!/bin/sh
printf 'cloud-init %s\\n' "$*" >> "$LOG"
eval "file=\\\${$#}"
cat "$file" >> "$LOG"
for f in etc/app/now etc/app/later; do [ -e "$BOOTSEAL_ROOT/$f" ] && echo "exists $f" >> "$LOG"; done
exit ${exitCode}
`,
    { mode: 0o755 },
  );
  return { PATH: `${bin}:${process.env.PATH}` };
}

const DISKS = `#cloud-config
bootcmd:
  - echo bootcmd >> "$LOG"
write_files:
  - {path: /etc/app/later, content: later, defer: true}
  - {path: /etc/app/now, content: now}
disk_setup:
  /dev/sdb: {table_type: gpt, layout: [[50, 83], 50], overwrite: false}
fs_setup:
  - {label: etcd_disk, filesystem: ext4, device: /dev/sdb, partition: 1}
mounts:
  - [LABEL=etcd_disk, /var/lib/etcddisk]
runcmd:
  - echo runcmd >> "$LOG"
`;

test("disk_setup and mounts go to the machine's cloud-init (a stand-in double) after write_files, before deferred files and runcmd", async () => {
  const r = await setup(DISKS, await fakeCloudInit(0));
  assert.equal(await r.fetch(), 0, r.stderr());
  const raw = await readFile(r.log, "utf8");
  const file = /(\/\S*\/bootseal-cloud-init-[^/]+\/cloud-config\.yaml)/.exec(raw)?.[1];
  assert.ok(file, raw);
  assert.equal(await exists(file), false, "the handed file is removed after the runs");
  const log = raw.replaceAll(file, "FILE");
  const handed =
    'disk_setup: {"/dev/sdb": {"table_type": "gpt", "layout": [[50, 83], 50], "overwrite": false}}\n' +
    'fs_setup: [{"label": "etcd_disk", "filesystem": "ext4", "device": "/dev/sdb", "partition": 1}]\n' +
    'mounts: [["LABEL=etcd_disk", "/var/lib/etcddisk"]]\n';
  assert.equal(
    log,
    "bootcmd\n" +
      `cloud-init single --name disk_setup --frequency always --file FILE\n${handed}exists etc/app/now\n` +
      `cloud-init single --name mounts --frequency always --file FILE\n${handed}exists etc/app/now\n` +
      "runcmd\n",
  );
  assert.equal(await readFile(join(r.root, "etc/app/later"), "utf8"), "later");
});

test("cloud-init failing on disk_setup: EXEC_FAILED, no deferred file, no runcmd, no marker", async () => {
  const r = await setup(DISKS, await fakeCloudInit(1));
  const err = await rejectsWith(r.fetch(), "EXEC_FAILED");
  assert.match(err.message, /disk_setup 1 of 1 exited with code 1/);
  assert.equal(await exists(join(r.root, "etc/app/later")), false);
  assert.doesNotMatch(await readFile(r.log, "utf8"), /runcmd|--name mounts/);
  assert.equal(await exists(join(r.root, MARKER)), false);
});
