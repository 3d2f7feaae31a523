/**
 * End to end with real processes, as Cluster API would drive it: `bootseal publish` a
 * kubeadm-provider-shaped payload to a real `bootseal serve` (the bundle), GET the machine's
 * user-data stub, do on a temporary root what cloud-init or Ignition and systemd would do
 * with it, and run the fetch command line the stub's unit carries.
 *
 * The fetcher executable served from /v1/artifacts is a small shell wrapper that runs
 * `node dist/cli/main.js "$@"`, not the single executable: building that takes minutes on a
 * loaded 2-core machine, and test/service/artifacts-sea.test.ts already downloads, verifies
 * and runs the real one. The wrapper still goes through the whole chain: the service hashes
 * and signs it, the stub pins its SHA-256 (cloud-init) or SHA-512 (Ignition), and the stub's
 * own install script or verify step checks it with sha256sum and OpenSSL before it runs.
 *
 * cloud-init machine: the files equal what cloud-init 22.4.2's own write_files writes from
 * the same config (the oracle of cloud-config-differential.test.ts), the stand-in kubeadm ran
 * with the provider's arguments after the files were in place, the sentinel exists only on
 * success, and the status history ends `succeeded`, or `failed` with the exit code (then no
 * sentinel, no marker). Ignition machine: the stub's storage.files applied as Ignition does
 * (source downloaded, verification.hash checked; Ignition v2.27.0's own ignition-apply on the
 * same stub gives the same files), the payload's files and unit equal what ignition-apply
 * writes from the payload, the recording systemctl called, the bootstrap command (a service
 * rule) run, and the same ends.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { access, mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { parse } from "yaml";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { cloudInitPython, type Entry, runOracle, seedRoot, snapshot } from "../fetcher/cloud-init-oracle.ts";
import { type AgeKey, ageKey, REPO, type RunResult, run, tempDir } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { until } from "../helpers/until.ts";
import {
  applyIgnitionFile,
  effective,
  envFileValues,
  type IgnitionFile,
  systemdArgv,
  underRoot,
  writeUnder,
} from "./machine.ts";
import { DIST, type E2EService, ensureBundle, startE2EService } from "./service.ts";

const SENTINEL = "run/cluster-api/bootstrap-success.complete";
const MARKER = "var/lib/bootseal/bootstrap.done";
const PRESET = "etc/systemd/system-preset/20-ignition.preset";
const IGN_COMMAND = "kubeadm join --config /etc/kubeadm/join.yaml";

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let service: E2EService;
let wrapper: string;
let cloudConfig: string;

before(async () => {
  await ensureBundle();
  dir = await tempDir("e2e-userdata");
  key = await ageKey(dir.path, "machine");
  const artifacts = join(dir.path, "artifacts");
  await mkdir(artifacts);
  wrapper = `#!/bin/sh\n# stand-in for the single executable (see the test's header)\nexec '${process.execPath}' '${DIST}' "$@"\n`;
  await writeFile(join(artifacts, "bootseal-linux-x64"), wrapper, { mode: 0o755 });
  service = await startE2EService({
    dir: dir.path,
    ageRecipient: key.recipient,
    artifactsDir: artifacts,
    bootstrapCommands: [{ match: "^default/flatcar-", command: IGN_COMMAND }],
  });
  // The provider's runcmd, with the sentinel under --root (on a machine BOOTSEAL_ROOT is /).
  const fixture = await readFile(join(REPO, "test/fixtures/e2e/kubeadm-join.yaml"), "utf8");
  cloudConfig = fixture.replace("> /run/cluster-api/", "> $BOOTSEAL_ROOT/run/cluster-api/");
  assert.notEqual(cloudConfig, fixture);
});
after(async () => {
  await service?.stop();
  await dir?.remove();
});

async function publish(machine: string, payload: string): Promise<void> {
  const file = join(dir.path, `${machine.replace("/", "-")}.payload`);
  await writeFile(file, payload);
  const r = await run(
    [
      DIST,
      "publish",
      "--server",
      service.url,
      "--machine",
      machine,
      "--token-file",
      service.controllerTokenFile,
      "--bootstrap-token-out",
      `${file}.token`,
      file,
    ],
    { PATH: process.env.PATH, HOME: "/nonexistent" },
    process.execPath,
  );
  assert.equal(r.code, 0, r.stderr);
}

async function stub(machine: string, format: string): Promise<string> {
  const res = await service.get(`/v1/machines/${machine}/userdata?format=${format}`);
  const body = await res.text();
  assert.equal(res.status, 200, body);
  const again = await service.get(`/v1/machines/${machine}/userdata?format=${format}`);
  assert.equal(await again.text(), body, "GET is stable");
  return body;
}

/** A root with users, and the stand-in kubeadm and systemctl (they record their arguments). */
async function machineRoot(name: string): Promise<string> {
  const root = join(dir.path, name);
  await seedRoot(root);
  await writeUnder(
    root,
    "usr/local/sbin/kubeadm",
    [
      "#!/bin/sh",
      "# stand-in kubeadm: records its arguments; needs its --config written first",
      'printf "%s\\n" "$@" > "$KUBEADM_ARGS"',
      'test -r "$BOOTSEAL_ROOT$3" || { echo "no $3"; exit 9; }',
      'echo "kubeadm stand-in exiting $KUBEADM_EXIT"',
      'exit "$KUBEADM_EXIT"',
      "",
    ].join("\n"),
    0o755,
  );
  await writeUnder(
    root,
    "usr/local/sbin/systemctl",
    '#!/bin/sh\nprintf "%s\\n" "$*" >> "$SYSTEMCTL_CALLS"\n',
    0o755,
  );
  return root;
}

/** The environment systemd gives the unit: fetch.env, plus the machine's own identity. */
function unitEnv(
  root: string,
  env: Record<string, string>,
  exit: number,
): Record<string, string | undefined> {
  return {
    ...env,
    PATH: `${join(root, "usr/local/sbin")}:${process.env.PATH}`,
    HOME: "/nonexistent",
    SOPS_AGE_KEY_FILE: key.file,
    KUBEADM_ARGS: join(root, "kubeadm.args"),
    KUBEADM_EXIT: String(exit),
    SYSTEMCTL_CALLS: join(root, "systemctl.calls"),
  };
}

function exec(argv: readonly string[], env: Record<string, string | undefined>): Promise<RunResult> {
  return run(argv.slice(1), env, argv[0], 180_000);
}

/** The status history from the service, once it ends in a terminal phase (bounded wait). */
async function history(machine: string): Promise<Array<Record<string, unknown>>> {
  let entries: Array<Record<string, unknown>> = [];
  await until(
    `a terminal phase for ${machine}`,
    async () => {
      const res = await service.get(`/v1/machines/${machine}/status`);
      assert.equal(res.status, 200);
      entries = ((await res.json()) as { history: Array<Record<string, unknown>> }).history;
      return ["succeeded", "failed"].includes(String(entries.at(-1)?.phase));
    },
    { tries: 600 },
  );
  return entries;
}

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

/** The payload's files (not the stub's, the stand-ins' or the marker/sentinel), for the oracle. */
const payloadPath = (p: string) =>
  /^(etc\/kubernetes|etc\/default|run)\//.test(`${p}/`) && p !== SENTINEL && p !== "run";
const payloadEntries = async (root: string): Promise<Entry[]> =>
  (await snapshot(root)).filter((e) => payloadPath(e.path));

async function cloudInitMachine(machine: string, exit: number) {
  await publish(machine, cloudConfig);
  const text = await stub(machine, "cloud-init");
  assert.ok(text.startsWith("#cloud-config\n"));
  const doc = parse(text, { version: "1.1" }) as {
    write_files: { path: string; permissions: string; owner: string; content: string }[];
    runcmd: string[][];
  };
  // What cloud-init does with the stub: write_files, then runcmd starts the unit.
  assert.deepEqual(doc.runcmd, [
    ["systemctl", "daemon-reload"],
    ["systemctl", "enable", "--now", "bootseal-fetch.service"],
  ]);
  const root = await machineRoot(machine.replace("/", "-"));
  for (const f of doc.write_files) {
    assert.equal(f.owner, "root:root");
    await writeUnder(root, f.path, f.content, Number.parseInt(f.permissions, 8));
  }
  const unit = await readFile(join(root, "etc/systemd/system/bootseal-fetch.service"), "utf8");
  const env = envFileValues(await readFile(join(root, "etc/bootseal/fetch.env"), "utf8"));
  // ExecStartPre: the install script downloads, checks the SHA-256 and the signature, installs.
  const pre = effective("ExecStartPre", unit, []);
  assert.deepEqual(pre, ["/usr/local/libexec/bootseal-install"]);
  const bin = join(root, "usr/local/bin/bootseal");
  const install = await exec(underRoot(systemdArgv(pre[0] as string, env), root), {
    ...env,
    PATH: process.env.PATH,
    BOOTSEAL_BIN: bin,
    BOOTSEAL_ARTIFACT_PUBKEY: join(root, "etc/bootseal/artifact.pub"),
  });
  assert.equal(install.code, 0, install.stderr);
  assert.match(install.stderr, /SHA-256 and signature verified/);
  assert.equal(await readFile(bin, "utf8"), wrapper);
  assert.equal((await stat(bin)).mode & 0o777, 0o755);
  // ExecStart: the fetch command line, paths under the root.
  const [line] = effective("ExecStart", unit, []);
  const argv = underRoot(systemdArgv(line as string, env), root);
  assert.deepEqual(argv.slice(1, 3), ["fetch", "--from"]);
  const r = await exec(argv, unitEnv(root, env, exit));
  return { r, root, posts: await history(machine) };
}

test("cloud-init machine: stub → install script → fetch; cloud-init's files, kubeadm's arguments, the sentinel, succeeded", {
  timeout: 300_000,
}, async () => {
  const { r, root, posts } = await cloudInitMachine("default/ubuntu-0", 0);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual((await readFile(join(root, "kubeadm.args"), "utf8")).split("\n"), [
    "join",
    "--config",
    "/run/kubeadm/kubeadm-join-config.yaml",
    "",
  ]);
  assert.equal(await readFile(join(root, SENTINEL), "utf8"), "success\n");
  assert.equal(JSON.parse(await readFile(join(root, MARKER), "utf8")).kind, "cloud-config");
  const phases = posts.map((p) => p.phase);
  assert.equal(phases[0], "published");
  assert.deepEqual(phases.slice(-3), ["written", "running", "succeeded"]);
  assert.equal(posts.at(-1)?.exitCode, 0);

  const oracleDir = join(dir.path, "oracle");
  await mkdir(oracleDir);
  const [want] = await runOracle(await cloudInitPython(), [cloudConfig], oracleDir);
  assert.ok(want?.ok, "cloud-init wrote the config");
  const expected = want.files.filter((e) => payloadPath(e.path));
  assert.equal(expected.filter((e) => e.bytes !== undefined).length, 5, "the oracle wrote the five files");
  assert.deepEqual(await payloadEntries(root), expected);
  assert.ok(!r.stderr.includes("abcdef.0123456789abcdef"), "the join token is not logged");
});

test("cloud-init machine, kubeadm fails: failed with exit code 1, fetch exit 60, no sentinel, no marker", {
  timeout: 300_000,
}, async () => {
  const { r, root, posts } = await cloudInitMachine("default/ubuntu-1", 1);
  assert.equal(r.code, EXIT_CODES.EXEC_FAILED, r.stderr);
  assert.match(await readFile(join(root, "kubeadm.args"), "utf8"), /^join\n--config\n/);
  assert.equal(await exists(join(root, SENTINEL)), false);
  assert.equal(await exists(join(root, MARKER)), false);
  const last = posts.at(-1) as Record<string, unknown>;
  assert.equal(last.phase, "failed");
  assert.equal(last.exitCode, 1);
  assert.match(String(last.output), /kubeadm stand-in exiting 1/);
});

async function ignitionMachine(machine: string, exit: number) {
  const payload = await readFile(join(REPO, "test/fixtures/e2e/ignition-join.json"), "utf8");
  await publish(machine, payload);
  const stubText = await stub(machine, "ignition");
  const config = JSON.parse(stubText) as {
    ignition: { version: string };
    storage: { files: IgnitionFile[] };
    systemd: {
      units: {
        name: string;
        enabled: boolean;
        contents: string;
        dropins: { name: string; contents: string }[];
      }[];
    };
  };
  assert.equal(config.ignition.version, "3.0.0");
  const root = await machineRoot(machine.replace("/", "-"));
  // Ignition's files stage: every storage.files entry, the executable through its SHA-512.
  const written = new Map<string, Buffer>();
  for (const f of config.storage.files) written.set(f.path, await applyIgnitionFile(root, f));
  assert.equal(written.get("/usr/local/bin/bootseal")?.toString(), wrapper);
  const [unit] = config.systemd.units;
  assert.ok(unit?.enabled);
  const unitDir = "etc/systemd/system";
  await writeUnder(root, `${unitDir}/${unit.name}`, unit.contents, 0o644);
  for (const d of unit.dropins)
    await writeUnder(root, `${unitDir}/${unit.name}.d/${d.name}`, d.contents, 0o644);
  const dropins = [...unit.dropins].sort((a, b) => a.name.localeCompare(b.name)).map((d) => d.contents);
  // Ignition itself (v2.27.0, ignition-apply) on the same stub, sources fetched: the same files.
  const real = join(dir.path, `${machine.replace("/", "-")}-ignition-apply`);
  await ignitionApply(real, stubText, false);
  for (const f of config.storage.files) {
    assert.deepEqual(await readFile(join(real, f.path)), written.get(f.path), f.path);
    assert.equal((await stat(join(real, f.path))).mode & 0o7777, f.mode, `${f.path} mode`);
  }
  for (const d of unit.dropins) {
    assert.equal(await readFile(join(real, unitDir, `${unit.name}.d`, d.name), "utf8"), d.contents);
  }
  assert.match(await readFile(join(real, PRESET), "utf8"), /^enable bootseal-fetch\.service$/m);
  const env = envFileValues(written.get("/etc/bootseal/fetch.env")?.toString() ?? "");
  // ExecStartPre (the verify drop-in): OpenSSL checks the Ed25519 signature first.
  const pre = effective("ExecStartPre", unit.contents, dropins);
  assert.equal(pre.length, 1);
  const verify = await exec(underRoot(systemdArgv(pre[0] as string, env), root), { PATH: process.env.PATH });
  assert.equal(verify.code, 0, verify.stderr);
  const start = effective("ExecStart", unit.contents, dropins);
  assert.equal(start.length, 1, "the machine drop-in replaces the unit's ExecStart");
  const argv = underRoot(systemdArgv(start[0] as string, env), root);
  assert.equal(argv.at(-2), "--exec");
  assert.equal(argv.at(-1), IGN_COMMAND);
  const r = await exec(
    [...argv, "--systemctl", join(root, "usr/local/sbin/systemctl")],
    unitEnv(root, env, exit),
  );
  return { r, root, posts: await history(machine) };
}

/** Ignition v2.27.0's own files stage (ignition-apply, the peer) on a config, into a root. */
async function ignitionApply(root: string, config: string, offline: boolean): Promise<void> {
  await seedRoot(root);
  const file = `${root}.ign`;
  await writeFile(file, config);
  const args = ["--root", root, ...(offline ? ["--offline"] : []), file];
  // ignition-apply refuses to run "on a host system" unless `container` is set (docs/fetcher.md).
  const r = await run(
    args,
    { PATH: process.env.PATH, container: "bootseal-test" },
    peer("IGNITION_APPLY_BIN"),
  );
  assert.equal(r.code, 0, `ignition-apply: ${r.stdout}${r.stderr}`);
}

/** The payload's files and unit (not the stub's, the stand-ins', the marker or the sentinel). */
const ignitionPayloadPath = (p: string) =>
  /^(etc\/kubernetes|etc\/kubeadm|run\/cluster-api|etc\/systemd\/system\/kubeadm\.service)(\/|$|\.d)/.test(
    p,
  ) && p !== SENTINEL;

/** The fetcher's result equals what Ignition itself writes from the same payload (bytes, modes, owners). */
async function assertIgnitionFiles(root: string): Promise<void> {
  const oracle = join(dir.path, `oracle-${randomBytes(4).toString("hex")}`);
  await ignitionApply(
    oracle,
    await readFile(join(REPO, "test/fixtures/e2e/ignition-join.json"), "utf8"),
    true,
  );
  const want = (await snapshot(oracle)).filter((e) => ignitionPayloadPath(e.path));
  assert.equal(
    want.filter((e) => e.bytes !== undefined).length,
    5,
    "Ignition wrote 3 files, the unit and its drop-in",
  );
  assert.deepEqual(
    (await snapshot(root)).filter((e) => ignitionPayloadPath(e.path)),
    want,
  );
  assert.equal((await stat(join(root, "etc/kubeadm"))).mode & 0o7777, 0o750);
}

test("Ignition machine: stub's storage.files → verify → fetch; files, unit, systemctl, bootstrap command, sentinel, succeeded", {
  timeout: 300_000,
}, async () => {
  const { r, root, posts } = await ignitionMachine("default/flatcar-0", 0);
  assert.equal(r.code, 0, r.stderr);
  await assertIgnitionFiles(root);
  assert.equal(
    await readFile(join(root, "systemctl.calls"), "utf8"),
    `--root ${root} enable kubeadm.service\n`,
  );
  assert.deepEqual((await readFile(join(root, "kubeadm.args"), "utf8")).split("\n"), [
    "join",
    "--config",
    "/etc/kubeadm/join.yaml",
    "",
  ]);
  assert.equal(
    await readFile(join(root, SENTINEL), "utf8"),
    "success\n",
    "the fetcher's sentinel, after the command",
  );
  assert.equal(JSON.parse(await readFile(join(root, MARKER), "utf8")).kind, "ignition");
  assert.deepEqual(posts.map((p) => p.phase).slice(-3), ["written", "running", "succeeded"]);
  assert.equal(posts.at(-1)?.exitCode, 0);
});

test("Ignition machine, kubeadm fails: failed with exit code 1, exit 60, no sentinel, no marker", {
  timeout: 300_000,
}, async () => {
  const { r, root, posts } = await ignitionMachine("default/flatcar-1", 1);
  assert.equal(r.code, EXIT_CODES.EXEC_FAILED, r.stderr);
  await assertIgnitionFiles(root);
  assert.equal(await exists(join(root, SENTINEL)), false);
  assert.equal(await exists(join(root, MARKER)), false);
  const last = posts.at(-1) as Record<string, unknown>;
  assert.equal(last.phase, "failed");
  assert.equal(last.exitCode, 1);
  assert.match(String(last.output), /kubeadm stand-in exiting 1/);
});
