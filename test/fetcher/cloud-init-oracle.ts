/**
 * cloud-init 22.4.2's own write_files modules as an oracle (test/fixtures/cloud-config/
 * write_files_oracle.py, run by cloud-init's interpreter), the roots both sides write into
 * (their own users and a few files to append to), and a snapshot of a root to compare.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chown, lstat, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { peer } from "../helpers/peers.ts";
import { REPO } from "./helpers.ts";

const ORACLE = join(REPO, "test/fixtures/cloud-config/write_files_oracle.py");

/** cloud-init's own interpreter: the one its executable names. */
export async function cloudInitPython(): Promise<string> {
  const first = (await readFile(peer("CLOUD_INIT_BIN"), "utf8")).split("\n")[0] as string;
  const m = /^#!\s*(\S+)/.exec(first);
  assert.ok(m, "cloud-init's executable starts with a #! line");
  return m[1] as string;
}

export const USER = { name: "kubeadm-user", uid: 1234, gid: 2345 };
export const GROUP = { name: "kubegrp", gid: 3456 };

/** A root with its own users and the files some cases append to or replace. */
export async function seedRoot(root: string): Promise<void> {
  await mkdir(join(root, "etc"), { recursive: true });
  await writeFile(
    join(root, "etc/passwd"),
    `root:x:0:0:root:/root:/bin/sh\n${USER.name}:x:${USER.uid}:${USER.gid}::/home/u:/bin/sh\n`,
  );
  await writeFile(join(root, "etc/group"), `root:x:0:\n${GROUP.name}:x:${GROUP.gid}:\nugrp:x:${USER.gid}:\n`);
  for (const [path, mode] of [
    ["etc/environment", 0o600],
    ["etc/existing.conf", 0o640],
  ] as const) {
    await writeFile(join(root, path), `old ${path}\n`, { mode });
    await chown(join(root, path), USER.uid, USER.gid);
  }
}

export interface Entry {
  readonly path: string;
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly bytes?: string;
}

/** Everything under the root (files: bytes in hex), sorted. */
export async function snapshot(root: string): Promise<Entry[]> {
  const out: Entry[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const name of (await readdir(join(root, dir))).sort()) {
      const rel = dir === "" ? name : `${dir}/${name}`;
      const info = await lstat(join(root, rel));
      const entry = { path: rel, mode: info.mode, uid: info.uid, gid: info.gid };
      if (info.isDirectory()) {
        out.push(entry);
        await walk(rel);
      } else {
        out.push({ ...entry, bytes: (await readFile(join(root, rel))).toString("hex") });
      }
    }
  };
  await walk("");
  return out;
}

export type Outcome = { ok: true; files: Entry[] } | { ok: false; error: string };

/**
 * Runs a Python oracle script (test/fixtures/cloud-config/) on CASES (written to
 * DIR/cases.json) under cloud-init's umask 022 (systemd's default for its units), and returns
 * its answer for each case: one JSON line per case.
 */
export async function oracleAnswers(
  python: string,
  script: string,
  cases: readonly unknown[],
  dir: string,
): Promise<unknown[]> {
  await writeFile(join(dir, "cases.json"), JSON.stringify(cases));
  const umask = process.umask(0o022);
  const child = spawn(python, [script, join(dir, "cases.json")], { stdio: ["ignore", "pipe", "pipe"] });
  process.umask(umask);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on("data", (c: Buffer) => out.push(c));
  child.stderr.on("data", (c: Buffer) => err.push(c));
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  assert.equal(code, 0, `the oracle ${script} ran: ${Buffer.concat(err).toString().slice(-2000)}`);
  const lines = Buffer.concat(out).toString().trim().split("\n");
  assert.equal(lines.length, cases.length);
  return lines.map((l) => JSON.parse(l) as unknown);
}

export async function runOracle(python: string, configs: readonly string[], dir: string): Promise<Outcome[]> {
  const cases = [];
  for (const [i, text] of configs.entries()) {
    const root = join(dir, `ci-${i}`);
    await seedRoot(root);
    await writeFile(join(dir, `case-${i}.yaml`), text);
    cases.push({ root, config: join(dir, `case-${i}.yaml`) });
  }
  const lines = (await oracleAnswers(python, ORACLE, cases, dir)) as { ok: boolean; error?: string }[];
  const out: Outcome[] = [];
  for (const [i, line] of lines.entries()) {
    out.push(
      line.ok
        ? { ok: true, files: await snapshot(join(dir, `ci-${i}`)) }
        : { ok: false, error: String(line.error) },
    );
  }
  return out;
}

const RENDER_ORACLE = join(REPO, "test/fixtures/cloud-config/jinja_render_oracle.py");

export type Rendered = { ok: true; text: string } | { ok: false; error: string };

/**
 * cloud-init 22.4.2's `devel render` (test/fixtures/cloud-config/jinja_render_oracle.py) on
 * each user-data with its instance data (JSON text), in one process.
 */
export async function renderOracle(
  python: string,
  cases: readonly { readonly userData: string; readonly instanceData: string }[],
  dir: string,
): Promise<Rendered[]> {
  const files = [];
  for (const [i, c] of cases.entries()) {
    const userData = join(dir, `user-data-${i}`);
    const instanceData = join(dir, `instance-data-${i}.json`);
    await writeFile(userData, c.userData);
    await writeFile(instanceData, c.instanceData);
    files.push({ user_data: userData, instance_data: instanceData });
  }
  return (await oracleAnswers(python, RENDER_ORACLE, files, dir)) as Rendered[];
}
