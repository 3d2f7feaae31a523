/**
 * bench/fetcher: wall time from process start to files written, for a 64 KiB config
 * (a --apply manifest of 8 files, 8 KiB each, published as a SOPS binary document to an age
 * key, read from file://), run by
 *   - the Node entry:        node src/cli/main.ts fetch … (Node 24 type stripping)
 *   - the bundle:            node dist/cli/main.js fetch … (what `npx bootseal` runs; npm run build)
 *   - the single executable: sea/bootseal-linux-x64 fetch … (built first when missing)
 *   - sops decrypt of the same document, for scale (decrypt only: sops writes no files)
 * Each process starts cold; RUNS runs each (default 15), interleaved, after one warm-up.
 *
 *   . .peers/env && npx node bench/fetcher.ts [RUNS]
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { argv, env, execPath } from "node:process";
import { fileURLToPath } from "node:url";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { optionalPeer } from "../test/helpers/peers.ts";

const REPO = fileURLToPath(new URL("../", import.meta.url));
const CLI = join(REPO, "src/cli/main.ts");
/** What `npx bootseal` runs: the esbuild bundle (npm run build). */
const BUNDLE = join(REPO, "dist/cli/main.js");
const RUNS = Number(argv[2] ?? 15);

const dir = await mkdtemp(join(tmpdir(), "bootseal-bench-fetcher-"));
try {
  const identity = await generateX25519Identity();
  const recipient = await identityToRecipient(identity);
  const keyFile = join(dir, "key.txt");
  await writeFile(keyFile, `${identity}\n`, { mode: 0o600 });

  // 8 files of 8 KiB of base64 text: a 64 KiB config.
  const docs: string[] = [];
  for (let i = 0; i < 8; i++) {
    const content = randomBytes(6 * 1024).toString("base64");
    docs.push(`path: /etc/bench/file-${i}.pem\ncontent: ${content}\nmode: 0600\n`);
  }
  const manifest = docs.join("---\n");
  const plain = join(dir, "manifest.yaml");
  const doc = join(dir, "config.sops.json");
  await writeFile(plain, manifest);
  const enc = spawnSync(
    execPath,
    [CLI, "encrypt", "--age", recipient, "--input-type", "binary", "--output", doc, plain],
    { encoding: "utf8" },
  );
  if (enc.status !== 0) throw new Error(`encrypt failed: ${enc.stderr}`);

  let sea = join(REPO, "sea/bootseal-linux-x64");
  if (!existsSync(sea)) {
    const out = join(dir, "sea");
    const b = spawnSync(
      execPath,
      [join(REPO, "scripts/build-sea.ts"), "--out", out, "--platform", "linux-x64"],
      { encoding: "utf8" },
    );
    if (b.status !== 0) throw new Error(`build:sea failed: ${b.stderr}`);
    sea = join(out, "bootseal-linux-x64");
  }
  const sops = optionalPeer("SOPS_BIN");
  const machineEnv = { PATH: env.PATH, HOME: dir, SOPS_AGE_KEY_FILE: keyFile };

  let n = 0;
  const fetchArgs = (): string[] => {
    const root = join(dir, `root-${n++}`);
    return [
      "fetch",
      "--from",
      `file://${doc}`,
      "--apply",
      "--root",
      root,
      "--allowed-roots",
      "/etc",
      "--sentinel",
      "",
    ];
  };
  type Variant = { name: string; cmd: () => { file: string; args: string[]; root?: string } };
  const variants: Variant[] = [
    {
      name: "bootseal fetch (node src/cli/main.ts)",
      cmd: () => ({ file: execPath, args: [CLI, ...fetchArgs()] }),
    },
    {
      name: "bootseal fetch (node dist/cli/main.js, bundled)",
      cmd: () => ({ file: execPath, args: [BUNDLE, ...fetchArgs()] }),
    },
    { name: "bootseal fetch (single executable)", cmd: () => ({ file: sea, args: fetchArgs() }) },
  ];
  if (sops) {
    variants.push({
      name: "sops decrypt (same document, to a file)",
      cmd: () => ({
        file: sops,
        args: [
          "--disable-version-check",
          "decrypt",
          "--input-type",
          "binary",
          "--output-type",
          "binary",
          "--output",
          join(dir, `sops-out-${n++}`),
          doc,
        ],
      }),
    });
  }

  const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
  const once = async (v: Variant): Promise<number> => {
    const { file, args } = v.cmd();
    // Roots must exist before the clock starts (--root is an existing directory).
    const rootIdx = args.indexOf("--root");
    if (rootIdx >= 0) await mkdir(args[rootIdx + 1] as string);
    const t0 = performance.now();
    const r = spawnSync(file, args, { env: machineEnv, encoding: "utf8" });
    const ms = performance.now() - t0;
    if (r.status !== 0) throw new Error(`${v.name} failed (${r.status}): ${r.stderr}`);
    return ms;
  };
  for (const v of variants) await once(v); // warm-up (page cache)
  for (let i = 0; i < RUNS; i++) {
    for (const v of variants) times.get(v.name)!.push(await once(v));
  }
  // Sanity: the last fetch wrote the same bytes the manifest holds.
  const written = await readFile(join(dir, `root-${n - 2}`, "etc/bench/file-0.pem"), "utf8").catch(
    () => null,
  );
  if (written !== null && !manifest.includes(written)) throw new Error("the bench wrote other bytes");

  const q = (xs: number[], p: number) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))] as number;
  };
  const docSize = (await readFile(doc)).length;
  console.log(
    `bench/fetcher: ${Buffer.byteLength(manifest)} B manifest (8 files) in a ${docSize} B SOPS document, age key, file:// source; ${RUNS} cold runs each, ms from spawn to exit`,
  );
  console.log(`${"".padEnd(48)} ${"min".padStart(7)} ${"median".padStart(7)} ${"p90".padStart(7)}`);
  for (const v of variants) {
    const xs = times.get(v.name)!;
    console.log(
      `${v.name.padEnd(48)} ${q(xs, 0).toFixed(0).padStart(7)} ${q(xs, 0.5).toFixed(0).padStart(7)} ${q(xs, 0.9).toFixed(0).padStart(7)}`,
    );
  }
  if (!sops) console.log("(sops not measured: source .peers/env for BOOTSEAL_TEST_SOPS_BIN)");
} finally {
  await rm(dir, { recursive: true, force: true });
}
