/**
 * bootseal vs the real sops, same documents, same age key, in one run.
 *
 *   npm run build && BOOTSEAL_TEST_SOPS_BIN=… BOOTSEAL_TEST_AGE_KEYGEN_BIN=… npx node bench/sops-compare.ts [rounds]
 *
 * Cases: a 100-value YAML, a 10,000-value YAML with nesting and lists, a 1 MiB binary file.
 * Each command runs as a fresh process (that is how both tools are used), several rounds,
 * alternating tools so that machine noise hits both; prints medians and bootseal/sops.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const sops = process.env.BOOTSEAL_TEST_SOPS_BIN ?? "sops";
const ageKeygen = process.env.BOOTSEAL_TEST_AGE_KEYGEN_BIN ?? "age-keygen";
const bootsealMain = fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));
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

function time(cmd: string, args: string[], env: NodeJS.ProcessEnv): number {
  const start = process.hrtime.bigint();
  const result = spawnSync(cmd, args, {
    env,
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 256 * 1024 * 1024,
  });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed: ${result.stderr.toString()}`);
  return ms;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

const dir = mkdtempSync(join(tmpdir(), "bootseal-bench-"));
try {
  const keyFile = join(dir, "age.txt");
  execFileSync(ageKeygen, ["-o", keyFile], { stdio: "ignore" });
  const recipient = /public key: (age1\w+)/.exec(readFileSync(keyFile, "utf8"))?.[1] as string;
  const env = { ...process.env, SOPS_AGE_KEY_FILE: keyFile };

  const cases = [
    { name: "yaml, 100 values", file: "small.yaml", content: smallYaml() },
    { name: "yaml, 10,000 values", file: "large.yaml", content: largeYaml() },
    { name: "binary, 1 MiB", file: "blob.bin", content: randomBytes(1024 * 1024) },
  ];
  const rows: string[][] = [];
  for (const c of cases) {
    const plain = join(dir, c.file);
    writeFileSync(plain, c.content);
    const encrypted = join(dir, `enc-${c.file}`);
    writeFileSync(
      encrypted,
      execFileSync(sops, ["encrypt", "--age", recipient, plain], { env, maxBuffer: 1 << 28 }),
    );
    for (const op of ["encrypt", "decrypt"] as const) {
      const target = op === "encrypt" ? plain : encrypted;
      const args = op === "encrypt" ? [op, "--age", recipient, target] : [op, target];
      const sopsTimes: number[] = [];
      const ourTimes: number[] = [];
      for (let r = 0; r < rounds; r++) {
        sopsTimes.push(time(sops, args, env));
        ourTimes.push(time(process.execPath, [bootsealMain, ...args], env));
      }
      const a = median(ourTimes);
      const b = median(sopsTimes);
      rows.push([c.name, op, a.toFixed(1), b.toFixed(1), (a / b).toFixed(2), (b / a).toFixed(2)]);
    }
  }
  const header = ["case", "op", "bootseal ms", "sops ms", "bootseal/sops", "speed-up"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)));
  const line = (r: string[]) => r.map((v, i) => v.padEnd(widths[i] as number)).join("  ");
  console.log(`median of ${rounds} rounds, each a fresh process; node ${process.version}`);
  console.log(line(header));
  for (const r of rows) console.log(line(r));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
