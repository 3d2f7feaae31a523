/**
 * bootseal vs the real sops, same documents, same age key, in one run.
 *
 *   npm run build && BOOTSEAL_TEST_SOPS_BIN=… BOOTSEAL_TEST_AGE_KEYGEN_BIN=… npx node bench/sops-compare.ts [rounds]
 *
 * Cases: a 100-value YAML, a 10,000-value YAML with nesting and lists (also with an
 * encrypted_regex, so the Go RE2 matching is measured too), a 1 MiB binary file.
 * Each command runs as a fresh process (that is how both tools are used). One untimed warm-up
 * run per command fills the V8 compile cache and the page cache (and checks that bootseal's
 * decrypt output equals sops's, byte for byte); then several rounds, alternating which tool
 * goes first, so that machine noise hits both. Prints medians and bootseal/sops, plus two
 * reference rows: a bare `node -e 0` and `bootseal --version` (Node plus the bundle's main
 * chunk, no command loaded), the floor under every bootseal number.
 *
 * BOOTSEAL_BENCH_MAIN=path/to/main.js times another build (e.g. a checkout of an older commit).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { optionalPeer } from "../test/helpers/peers.ts";

const sops = optionalPeer("SOPS_BIN") ?? "sops";
const ageKeygen = optionalPeer("AGE_KEYGEN_BIN") ?? "age-keygen";
const bootsealMain =
  process.env.BOOTSEAL_BENCH_MAIN ?? fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));
const rounds = Number(process.argv[2] ?? 7);

function smallYaml(): string {
  const lines: string[] = [];
  for (let i = 0; i < 100; i++) lines.push(`key${i}: value-${i}-${randomBytes(6).toString("hex")}`);
  return `${lines.join("\n")}\n`;
}

/** 10,000 leaves: 100 services, each with nested settings and a list of 60 items. */
function largeYaml(): string {
  const out: string[] = [];
  for (let s = 0; s < 100; s++) {
    out.push(`service${s}:`);
    out.push(`    name: svc-${s}`);
    out.push(`    port: ${8000 + s}`);
    out.push(`    enabled: ${s % 2 === 0}`);
    out.push(`    ratio: ${s}.5`);
    out.push("    db:");
    for (let d = 0; d < 36; d++) out.push(`        field${d}: ${randomBytes(8).toString("hex")}`);
    out.push("    tokens:");
    for (let t = 0; t < 60; t++) out.push(`        - ${randomBytes(8).toString("hex")}`);
  }
  return `${out.join("\n")}\n`;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv): { ms: number; stdout: Buffer } {
  const start = process.hrtime.bigint();
  const result = spawnSync(cmd, args, {
    env,
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 256 * 1024 * 1024,
  });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${result.stderr.toString()}`);
  return { ms, stdout: result.stdout };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

function table(header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (r: string[]) =>
    r
      .map((v, i) => v.padEnd(widths[i] as number))
      .join("  ")
      .trimEnd();
  console.log(line(header));
  for (const r of rows) console.log(line(r));
}

const dir = mkdtempSync(join(tmpdir(), "bootseal-bench-"));
try {
  const keyFile = join(dir, "age.txt");
  execFileSync(ageKeygen, ["-o", keyFile], { stdio: "ignore" });
  const recipient = /public key: (age1\w+)/.exec(readFileSync(keyFile, "utf8"))?.[1] as string;
  const env = { ...process.env, SOPS_AGE_KEY_FILE: keyFile };
  const node = process.execPath;

  const large = largeYaml();
  const regex = ["--encrypted-regex", "^(field[0-9]+|name|tokens)$"];
  const cases = [
    { name: "yaml, 100 values", file: "small.yaml", content: smallYaml(), rule: [] as string[] },
    { name: "yaml, 10,000 values", file: "large.yaml", content: large, rule: [] },
    { name: "yaml, 10,000, encrypted_regex", file: "regex.yaml", content: large, rule: regex },
    { name: "binary, 1 MiB", file: "blob.bin", content: randomBytes(1024 * 1024), rule: [] },
  ];
  const rows: string[][] = [];
  const mismatches: string[] = [];
  for (const c of cases) {
    const plain = join(dir, c.file);
    writeFileSync(plain, c.content);
    const encrypted = join(dir, `enc-${c.file}`);
    writeFileSync(
      encrypted,
      execFileSync(sops, ["encrypt", ...c.rule, "--age", recipient, plain], { env, maxBuffer: 1 << 28 }),
    );
    for (const op of ["encrypt", "decrypt"] as const) {
      const target = op === "encrypt" ? plain : encrypted;
      const args = op === "encrypt" ? [op, ...c.rule, "--age", recipient, target] : [op, target];
      // Warm-up (untimed); the decrypt outputs must agree byte for byte.
      const theirs = run(sops, args, env).stdout;
      const ours = run(node, [bootsealMain, ...args], env).stdout;
      if (op === "decrypt" && !ours.equals(theirs)) mismatches.push(c.name);
      const sopsTimes: number[] = [];
      const ourTimes: number[] = [];
      for (let r = 0; r < rounds; r++) {
        const sopsRun = () => sopsTimes.push(run(sops, args, env).ms);
        const ourRun = () => ourTimes.push(run(node, [bootsealMain, ...args], env).ms);
        if (r % 2 === 0) {
          sopsRun();
          ourRun();
        } else {
          ourRun();
          sopsRun();
        }
      }
      const a = median(ourTimes);
      const b = median(sopsTimes);
      rows.push([c.name, op, a.toFixed(1), b.toFixed(1), (a / b).toFixed(2), (b / a).toFixed(2)]);
    }
  }

  // Reference: what every bootseal run pays before it does anything.
  const refs = [
    { name: "node -e 0 (bare Node start-up)", args: ["-e", "0"] },
    { name: "bootseal --version (main chunk only)", args: [bootsealMain, "--version"] },
  ];
  const refRows: string[][] = [];
  for (const ref of refs) {
    run(node, ref.args, env);
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) times.push(run(node, ref.args, env).ms);
    refRows.push([ref.name, median(times).toFixed(1)]);
  }

  console.log(
    `median of ${rounds} rounds after one warm-up, each a fresh process; node ${process.version}, ` +
      `${cpus().length} CPUs; sops: ${execFileSync(sops, ["--version"], { encoding: "utf8" }).split("\n")[0]}`,
  );
  table(["case", "op", "bootseal ms", "sops ms", "bootseal/sops", "speed-up"], rows);
  console.log("");
  table(["reference", "ms"], refRows);
  console.log(
    mismatches.length === 0
      ? "decrypt outputs identical to sops: yes"
      : `decrypt outputs DIFFER from sops: ${mismatches.join(", ")}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
