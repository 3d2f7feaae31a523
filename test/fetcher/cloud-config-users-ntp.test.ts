/**
 * Differential test of bootseal's users_groups and ntp modules against cloud-init 22.4.2's own
 * handlers (test/fixtures/cloud-config/users_ntp_oracle.py: cc_users_groups and cc_ntp with
 * the real ubuntu/debian distro classes, chrooted into a temporary root, commands recorded).
 * Both sides start from the same seeded root; the shadow tools (useradd, groupadd, usermod,
 * passwd) run for real on it with `--root`, other commands are only recorded; the recorded
 * commands and every file in the two roots (bytes, modes, owners) must agree, and what
 * cloud-init's module fails on bootseal must refuse.
 *
 * The corpus: the kubeadm provider's shapes (its `users` and `ntp` templates: a user with
 * `sudo: ALL=(ALL) NOPASSWD:ALL`, keys, lock_passwd true/false, groups, gecos, shell,
 * primary_group, a hashed passwd; ntp enabled with servers, or with none) and generated
 * configs (fast-check, bounded). authorized_keys lines are compared as sets: cloud-init
 * takes the keys as a Python set, whose order is arbitrary.
 */
import assert from "node:assert/strict";
import { copyFile, mkdir, readdir, realpath, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import fc from "fast-check";
import { BootsealError, isBootsealError } from "../../src/errors.ts";
import { runArgv } from "../../src/fetcher/exec.ts";
import { resolveTarget } from "../../src/fetcher/paths.ts";
import { applyCloudConfig } from "../../src/fetcher/payloads/cloud-config.ts";
import { cloudInitPython, type Entry, oracleAnswers, snapshot } from "./cloud-init-oracle.ts";
import { REPO, tempDir } from "./helpers.ts";

const FIXTURES = join(REPO, "test/fixtures/cloud-config");
const ORACLE = join(FIXTURES, "users_ntp_oracle.py");
/** The shadow tools both sides run for real on the root (`--root DIR`); other commands are only recorded. */
const SHADOW_TOOLS = new Set(["useradd", "groupadd", "usermod", "passwd"]);
const sink = new PassThrough().resume();
const EPOCH = 1764670272; // Tue, 02 Dec 2025 10:11:12 +0000

interface Machine {
  readonly distro: "ubuntu" | "debian";
  /** Programs present (besides passwd): chronyd, ntpd, … */
  readonly programs: readonly string[];
  readonly systemd: boolean;
  readonly sudoers: "none" | "with-include" | "without-include";
  readonly sshdConfig: string | null;
}

async function seed(root: string, m: Machine): Promise<void> {
  for (const d of ["etc/cloud/templates", "home", "usr/sbin", "usr/bin"]) {
    await mkdir(join(root, d), { recursive: true, mode: 0o755 });
  }
  await writeFile(
    join(root, "etc/passwd"),
    "root:x:0:0:root:/root:/bin/sh\nold:x:1000:1000::/home/old:/bin/sh\n",
  );
  await writeFile(join(root, "etc/group"), "root:x:0:\nold:x:1000:\nsudo:x:27:\n");
  await writeFile(join(root, "etc/shadow"), "root:*:19000:0:99999:7:::\nold:*:19000:0:99999:7:::\n", {
    mode: 0o640,
  });
  await writeFile(join(root, "etc/gshadow"), "root:*::\nold:!::\nsudo:*::\n", { mode: 0o640 });
  await mkdir(join(root, "home/old"), { mode: 0o755 });
  await writeFile(join(root, "etc/os-release"), `NAME=x\nID=${m.distro}\n`);
  for (const f of await readdir("/etc/cloud/templates")) {
    if (/^(chrony|ntp|timesyncd)/.test(f))
      await copyFile(join("/etc/cloud/templates", f), join(root, "etc/cloud/templates", f));
  }
  for (const p of [
    "usr/bin/passwd",
    ...m.programs.map((p) => (p.startsWith("/") ? p.slice(1) : `usr/sbin/${p}`)),
  ]) {
    await mkdir(join(root, p, ".."), { recursive: true });
    await writeFile(join(root, p), "#!/bin/sh\n", { mode: 0o755 });
  }
  if (m.systemd) await mkdir(join(root, "run/systemd/system"), { recursive: true });
  if (m.sudoers !== "none") {
    const text =
      m.sudoers === "with-include"
        ? "Defaults env_reset\n@includedir /etc/sudoers.d\n"
        : "Defaults env_reset\n";
    await writeFile(join(root, "etc/sudoers"), text, { mode: 0o440 });
  }
  if (m.sshdConfig !== null) {
    await mkdir(join(root, "etc/ssh"), { recursive: true });
    await writeFile(join(root, "etc/ssh/sshd_config"), m.sshdConfig);
  }
  await writeFile(join(root, "etc/chrony.conf.keep"), "");
}

type Outcome = { ok: true; commands: string[][]; files: Entry[] } | { ok: false; error: string };

/**
 * authorized_keys files (the default name, and the generated sshd_config's
 * `AuthorizedKeysFile /etc/ssh/keys/%u`): lines as a set (cloud-init's key order is a Python set's).
 */
const isAuthorizedKeys = (path: string): boolean =>
  path.endsWith("authorized_keys") || path.startsWith("etc/ssh/keys/");

function normalized(files: Entry[]): Entry[] {
  return files.map((f) =>
    isAuthorizedKeys(f.path) && f.bytes !== undefined
      ? {
          ...f,
          bytes: Buffer.from(Buffer.from(f.bytes, "hex").toString().split("\n").sort().join("\n")).toString(
            "hex",
          ),
        }
      : f,
  );
}

async function oracle(cases: { text: string; machine: Machine }[], dir: string): Promise<Outcome[]> {
  const list = [];
  for (const [i, c] of cases.entries()) {
    const root = join(dir, `ci-${i}`);
    await seed(root, c.machine);
    await writeFile(join(dir, `case-${i}.yaml`), c.text);
    list.push({ root, config: join(dir, `case-${i}.yaml`), distro: c.machine.distro, epoch: EPOCH });
  }
  const lines = (await oracleAnswers(await cloudInitPython(), ORACLE, list, dir)) as {
    ok: boolean;
    error?: string;
    commands: string[][];
  }[];
  const out: Outcome[] = [];
  for (const [i, line] of lines.entries()) {
    out.push(
      line.ok
        ? { ok: true, commands: line.commands, files: normalized(await snapshot(join(dir, `ci-${i}`))) }
        : { ok: false, error: String(line.error) },
    );
  }
  return out;
}

async function bootseal(text: string, machine: Machine, root: string): Promise<Outcome> {
  await seed(root, machine);
  const real = await realpath(root);
  const policy = { root: real, allowedRoots: ["/"] };
  const commands: string[][] = [];
  const umask = process.umask(0o077);
  try {
    await applyCloudConfig(new TextEncoder().encode(text), {
      policy,
      marker: { what: "the marker", target: await resolveTarget("/var/lib/bootseal/bootstrap.done", policy) },
      sentinel: null,
      allowUnsafeModes: true,
      allowUnknownModules: false,
      labeler: null,
      log: () => {},
      now: () => new Date(EPOCH * 1000),
      // The command runner, recorded (the --root pair left out); the shadow tools run for real
      // on the root, as the fetcher runs them (runArgv: cloud-init's umask).
      run: async (_module, list) => {
        for (const c of list) {
          assert.ok("argv" in c);
          const argv = [...c.argv];
          if (argv[1] === "--root") {
            assert.equal(argv[2], real);
            argv.splice(1, 2);
          }
          commands.push(argv);
          if (!SHADOW_TOOLS.has(argv[0] as string)) continue;
          const done = await runArgv(c.argv, { env: { PATH: process.env.PATH }, stdout: sink, stderr: sink });
          if (done.exitCode !== 0)
            throw new BootsealError("EXEC_FAILED", `${argv[0]} exited with code ${done.exitCode}`);
        }
        return [];
      },
    });
  } catch (err) {
    if (isBootsealError(err)) return { ok: false, error: `${err.code}: ${err.message}` };
    throw err;
  } finally {
    process.umask(umask);
  }
  return { ok: true, commands, files: normalized(await snapshot(root)) };
}

async function differential(
  cases: { text: string; machine: Machine }[],
): Promise<{ applied: number; failed: number }> {
  const dir = await tempDir("cc-users-ntp");
  try {
    const expected = await oracle(cases, dir.path);
    const counts = { applied: 0, failed: 0 };
    for (const [i, c] of cases.entries()) {
      const got = await bootseal(c.text, c.machine, join(dir.path, `bs-${i}`));
      const want = expected[i] as Outcome;
      const where = `case ${i} ${JSON.stringify(c.machine)}\n${c.text}`;
      if (!want.ok) {
        assert.ok(
          !/^(ImportError|ModuleNotFoundError|NameError)/.test(want.error),
          `the oracle broke: ${want.error}`,
        );
        assert.equal(got.ok, false, `cloud-init failed (${want.error}); bootseal must refuse\n${where}`);
        counts.failed++;
        continue;
      }
      if (want.commands.some((argv) => argv.includes("apt-get"))) {
        // cloud-init installs the missing NTP client; bootseal installs no packages and says so.
        assert.ok(
          !got.ok && got.error.includes("installs no packages"),
          `bootseal must refuse the install\n${where}`,
        );
        counts.failed++;
        continue;
      }
      assert.ok(got.ok, `cloud-init applied it; bootseal refused (${got.ok ? "" : got.error})\n${where}`);
      assert.deepEqual(got.commands, want.commands, where);
      assert.deepEqual(got.files, want.files, where);
      counts.applied++;
    }
    return counts;
  } finally {
    await dir.remove();
  }
}

const UBUNTU: Machine = {
  distro: "ubuntu",
  programs: ["chronyd"],
  systemd: true,
  sudoers: "with-include",
  sshdConfig: null,
};
const DEBIAN: Machine = {
  ...UBUNTU,
  distro: "debian",
  programs: ["/lib/systemd/systemd-timesyncd"],
  sudoers: "none",
};

/** What the kubeadm provider's templates emit for KubeadmConfig users and ntp (its Go template's output shape). */
const CABPK = [
  `## template: jinja
#cloud-config

write_files:
-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      kind: JoinConfiguration
runcmd:
  - 'kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'
ntp:
  enabled: true
  servers:
    - 0.pool.ntp.org
    - time.example.com
users:
  - name: capi
    gecos: Cluster API admin
    groups: users, sudo
    lock_passwd: false
    shell: /bin/bash
    sudo: ALL=(ALL) NOPASSWD:ALL
    ssh_authorized_keys:
      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBbo capi@example
      - ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 other
  - name: ops
    passwd: $6$rounds=4096$salt$hashedvalue
    groups: ops
    primary_group: ops
    lock_passwd: true
    homedir: /home/ops-home
    inactive: true
`,
  `#cloud-config
ntp:
  enabled: true
  servers:
users:
  - name: old
    sudo: ALL=(ALL) NOPASSWD:ALL
    ssh_authorized_keys:
      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBbo capi@example
`,
];

test("the kubeadm provider's users and ntp: commands and files as cloud-init 22.4.2 applies them (ubuntu, debian)", {
  timeout: 180_000,
}, async () => {
  const cases = [UBUNTU, DEBIAN].flatMap((machine) => CABPK.map((text) => ({ text, machine })));
  assert.deepEqual(await differential(cases), { applied: 4, failed: 0 });
});

const arbUser = fc.record({
  name: fc.constantFrom("alice", "bob", "old", "ca-pi"),
  groups: fc.constantFrom(null, "users", "users, sudo", "[sudo, newgrp]", "''"),
  primary: fc.constantFrom(null, "alice", "sudo"),
  lock: fc.constantFrom(null, "true", "false", "'no'"),
  sudo: fc.constantFrom(
    null,
    "ALL=(ALL) NOPASSWD:ALL",
    "['ALL=(ALL) ALL', 'ALL=(root) /bin/ls']",
    "false",
    "true",
  ),
  keys: fc.constantFrom(
    null,
    "[]",
    "['ssh-ed25519 AAAAkey1 a@b']",
    "['ssh-rsa AAAAkey2', 'no-pty ssh-ed25519 AAAAkey3 c', 'not a key']",
    "'ssh-ed25519 AAAAkey1 single'",
  ),
  shell: fc.constantFrom(null, "/bin/bash"),
  gecos: fc.constantFrom(null, "A Person"),
  system: fc.constantFrom(null, "true"),
});

type GenUser = typeof arbUser extends fc.Arbitrary<infer T> ? T : never;

function userYaml(u: GenUser): string {
  const lines = [`  - name: ${u.name}`];
  const add = (k: string, v: string | null): void => {
    if (v !== null) lines.push(`    ${k}: ${v}`);
  };
  add("groups", u.groups);
  add("primary_group", u.primary);
  add("lock_passwd", u.lock);
  add("sudo", u.sudo);
  add("ssh_authorized_keys", u.keys);
  add("shell", u.shell);
  add("gecos", u.gecos);
  add("system", u.system);
  return lines.join("\n");
}

const arbCase = fc.record({
  users: fc.uniqueArray(arbUser, { maxLength: 3, selector: (u) => u.name }),
  groups: fc.constantFrom(null, "[admins]", "[{admins: [old]}, staff]", "'a,b'"),
  ntp: fc.constantFrom(
    null,
    "{enabled: true, servers: [ntp1.example, 10.0.0.1]}",
    "{enabled: true, pools: [pool.example]}",
    "{servers: [a], pools: [b, c]}",
    "{enabled: false}",
    "{}",
    "{ntp_client: ntp}",
    "{ntp_client: systemd-timesyncd}",
  ),
  machine: fc.record({
    distro: fc.constantFrom("ubuntu" as const, "debian" as const),
    programs: fc.constantFrom(
      [],
      ["chronyd"],
      ["ntpd"],
      ["/lib/systemd/systemd-timesyncd"],
      ["ntpd", "chronyd"],
    ),
    systemd: fc.boolean(),
    sudoers: fc.constantFrom("none" as const, "with-include" as const, "without-include" as const),
    sshdConfig: fc.constantFrom(
      null,
      "StrictModes no\n",
      "AuthorizedKeysFile .ssh/authorized_keys .ssh/authorized_keys2\n",
      "AuthorizedKeysFile /etc/ssh/keys/%u\n",
    ),
  }),
});

test("generated users, groups and ntp: bootseal does what cloud-init does, and refuses what it fails on", {
  timeout: 300_000,
}, async () => {
  const samples = fc.sample(arbCase, { numRuns: 40, seed: 20261203 });
  const cases = samples
    .filter((s) => s.users.length > 0 || s.groups !== null || s.ntp !== null)
    .map((s) => {
      const parts = ["#cloud-config"];
      if (s.users.length > 0) parts.push(`users:\n${s.users.map(userYaml).join("\n")}`);
      if (s.groups !== null) parts.push(`groups: ${s.groups}`);
      if (s.ntp !== null) parts.push(`ntp: ${s.ntp}`);
      return { text: `${parts.join("\n")}\n`, machine: s.machine };
    });
  const counts = await differential(cases);
  assert.ok(counts.applied >= 10, JSON.stringify(counts));
});
