/**
 * End to end with real processes, as Cluster API would drive it: `bootseal publish` a
 * kubeadm-provider-shaped payload to the service as `npm start` starts it (test/e2e/service.ts),
 * GET the machine's user-data stub, do on a temporary root what cloud-init or Ignition and
 * systemd would do with it, and run the fetch command line the stub's unit carries with the
 * real single executable: the linux-x64 one `npm start` builds into the package's sea/
 * (test/helpers/built-sea.ts) and the service serves from there, signed with its own key.
 *
 * cloud-init machine: the stub's own install script (ExecStartPre) downloads the executable,
 * checks the pinned SHA-256 and the Ed25519 signature, installs it; the unit's ExecStart line
 * runs it. The files equal what cloud-init 22.4.2's own write_files writes from the same
 * config (the oracle of cloud-config-differential.test.ts), the stand-in kubeadm ran with the
 * provider's arguments after the files were in place, the sentinel exists only on success, and
 * the status history ends `succeeded`, or `failed` with the exit code (then no sentinel, no
 * marker). An executable altered on the way (or its pin with it) is refused by the install
 * script: nothing is installed, nothing runs. Ignition machine: Ignition v2.27.0's own
 * ignition-apply writes the stub (the executable downloaded from the service and checked
 * against the SHA-512 of the config, the unit, its drop-ins, the preset), the verify drop-in
 * (ExecStartPre) checks the signature with OpenSSL, the unit's ExecStart runs the executable:
 * the payload's files and unit equal what ignition-apply writes from the payload, the
 * recording systemctl called, the bootstrap command (a service rule) run, and the same ends.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { access, mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { parse } from "yaml";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { cloudInitPython, type Entry, runOracle, seedRoot, snapshot } from "../fetcher/cloud-init-oracle.ts";
import { type AgeKey, ageKey, REPO, type RunResult, run, tempDir } from "../fetcher/helpers.ts";
import { builtSea } from "../helpers/built-sea.ts";
import { peer } from "../helpers/peers.ts";
import { until } from "../helpers/until.ts";
import { effective, envFileValues, systemdArgv, underRoot, writeUnder } from "./machine.ts";
import { DIST, type E2EService, ensureBundle, startE2EService } from "./service.ts";

const SENTINEL = "run/cluster-api/bootstrap-success.complete";
const MARKER = "var/lib/bootseal/bootstrap.done";
const PRESET = "etc/systemd/system-preset/20-ignition.preset";
const IGN_COMMAND = "kubeadm join --config /etc/kubeadm/join.yaml";

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let service: E2EService;
/** The single executable as built (sea/bootseal-linux-x64): what every machine must install and run. */
let executable: Buffer;
let cloudConfig: string;

before(async () => {
  await ensureBundle();
  executable = await readFile((await builtSea()).linuxX64);
  dir = await tempDir("e2e-userdata");
  key = await ageKey(dir.path, "machine");
  service = await startE2EService({
    dir: dir.path,
    ageRecipient: key.recipient,
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

/**
 * cloud-init's part (write_files) and the unit's ExecStartPre, the install script, with the
 * settings of fetch.env (`tamper` changes them as an attacker on the way would).
 */
async function cloudInitInstall(machine: string, tamper: Record<string, string> = {}) {
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
    ...tamper,
    PATH: process.env.PATH,
    BOOTSEAL_BIN: bin,
    BOOTSEAL_ARTIFACT_PUBKEY: join(root, "etc/bootseal/artifact.pub"),
  });
  return { root, unit, env, bin, install };
}

async function cloudInitMachine(machine: string, exit: number) {
  const { root, unit, env, bin, install } = await cloudInitInstall(machine);
  assert.equal(install.code, 0, install.stderr);
  assert.match(install.stderr, /SHA-256 and signature verified/);
  assert.ok((await readFile(bin)).equals(executable), "the installed executable is the built one");
  assert.equal((await stat(bin)).mode & 0o777, 0o755);
  // ExecStart: the fetch command line, paths under the root: the installed executable.
  const [line] = effective("ExecStart", unit, []);
  const argv = underRoot(systemdArgv(line as string, env), root);
  assert.equal(argv[0], bin);
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

test("cloud-init machine, the executable altered on the way: the install script refuses it (SHA-256; with the pin altered too, the signature), nothing installed, nothing runs", {
  timeout: 300_000,
}, async () => {
  // An attacker between the machine and the service (a test double of one): the built
  // executable with one bit flipped, served in place of the service's.
  const tampered = Buffer.from(executable);
  tampered[tampered.length >> 1] = (tampered[tampered.length >> 1] as number) ^ 1;
  const attacker = createServer((_req, res) => {
    res.writeHead(200, { "content-length": tampered.length });
    res.end(tampered);
  });
  await new Promise<void>((r) => attacker.listen(0, "127.0.0.1", r));
  try {
    const url = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}/v1/artifacts/bootseal-linux-x64`;
    const cases = [
      ["default/ubuntu-2", { BOOTSEAL_ARTIFACT_URL: url }, /SHA-256 mismatch/],
      [
        "default/ubuntu-3",
        {
          BOOTSEAL_ARTIFACT_URL: url,
          BOOTSEAL_ARTIFACT_SHA256: createHash("sha256").update(tampered).digest("hex"),
        },
        /Ed25519 signature check failed/,
      ],
    ] as const;
    for (const [machine, tamper, refusal] of cases) {
      const { root, bin, install } = await cloudInitInstall(machine, tamper);
      assert.equal(install.code, 1, install.stderr);
      assert.match(install.stderr, refusal);
      assert.deepEqual(await readdir(dirname(bin)), [], `${machine}: nothing installed, no download left`);
      // systemd starts no ExecStart after a failed ExecStartPre, and there is nothing to start.
      assert.equal(await exists(join(root, "kubeadm.args")), false);
      const res = await service.get(`/v1/machines/${machine}/status`);
      const { history } = (await res.json()) as { history: { phase: string }[] };
      assert.deepEqual(
        history.map((h) => h.phase),
        ["published"],
        `${machine}: nothing fetched`,
      );
    }
  } finally {
    attacker.closeAllConnections();
    await new Promise((r) => attacker.close(r));
  }
});

async function ignitionMachine(machine: string, exit: number) {
  const payload = await readFile(join(REPO, "test/fixtures/e2e/ignition-join.json"), "utf8");
  await publish(machine, payload);
  const stubText = await stub(machine, "ignition");
  const config = JSON.parse(stubText) as {
    ignition: { version: string };
    storage: {
      files: { path: string; mode: number; contents: { source: string; verification?: { hash: string } } }[];
    };
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
  // Ignition itself (v2.27.0, ignition-apply) writes the stub onto the machine: the
  // executable downloaded from the service and checked against the config's SHA-512.
  await ignitionApply(root, stubText, false);
  const bin = config.storage.files.find((f) => f.path === "/usr/local/bin/bootseal");
  assert.equal(
    bin?.contents.verification?.hash,
    `sha512-${createHash("sha512").update(executable).digest("hex")}`,
  );
  assert.ok(
    (await readFile(join(root, bin.path))).equals(executable),
    "the installed executable is the built one",
  );
  for (const f of config.storage.files) {
    assert.equal((await stat(join(root, f.path))).mode & 0o7777, f.mode, `${f.path} mode`);
  }
  const [unit] = config.systemd.units;
  assert.ok(unit?.enabled);
  assert.match(await readFile(join(root, PRESET), "utf8"), /^enable bootseal-fetch\.service$/m);
  // The unit and its drop-ins as Ignition wrote them, read as systemd does (drop-ins in name order).
  const unitDir = join(root, "etc/systemd/system");
  const unitText = await readFile(join(unitDir, unit.name), "utf8");
  assert.equal(unitText, unit.contents);
  const dropinNames = (await readdir(join(unitDir, `${unit.name}.d`))).sort();
  assert.deepEqual(dropinNames, unit.dropins.map((d) => d.name).sort());
  const dropins = await Promise.all(
    dropinNames.map((n) => readFile(join(unitDir, `${unit.name}.d`, n), "utf8")),
  );
  const env = envFileValues(await readFile(join(root, "etc/bootseal/fetch.env"), "utf8"));
  // ExecStartPre (the verify drop-in): OpenSSL checks the Ed25519 signature first.
  const pre = effective("ExecStartPre", unitText, dropins);
  assert.equal(pre.length, 1);
  const verify = await exec(underRoot(systemdArgv(pre[0] as string, env), root), { PATH: process.env.PATH });
  assert.equal(verify.code, 0, verify.stderr);
  const start = effective("ExecStart", unitText, dropins);
  assert.equal(start.length, 1, "the machine drop-in replaces the unit's ExecStart");
  const argv = underRoot(systemdArgv(start[0] as string, env), root);
  assert.equal(argv[0], join(root, bin.path));
  assert.equal(argv.at(-2), "--exec");
  assert.equal(argv.at(-1), IGN_COMMAND);
  const r = await exec(
    [...argv, "--systemctl", join(root, "usr/local/sbin/systemctl")],
    unitEnv(root, env, exit),
  );
  return { r, root, posts: await history(machine) };
}

/** Ignition v2.27.0's own files stage (ignition-apply, the peer) on a config, into a seeded root. */
async function ignitionApply(root: string, config: string, offline: boolean): Promise<void> {
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
  await seedRoot(oracle);
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
