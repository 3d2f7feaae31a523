/**
 * bootseal vs the real sops, same documents, same age key, in one run (issue 31's goals).
 *
 *   npm run build && . .peers/env && node_modules/.bin/node bench/sops-compare.ts \
 *       [--rounds 7] [--sea sea/bootseal-linux-x64] [--only small,large,binary]
 *
 * Cases (./lib/sops-documents.ts, generated afresh each run): 100 values in YAML, JSON and
 * dotenv; 10,000 values in YAML (plain, with comments and blank lines, and with an
 * encrypted_regex, so Go's RE2 matching is measured too) and in JSON; a 1 MiB binary file.
 * Each command runs as a fresh process (that is how both tools are used). One untimed warm-up
 * run per command and tool fills the V8 compile cache and the page cache, measures its peak RSS
 * (/usr/bin/time's maximum resident set size) and checks that bootseal's decrypt output equals
 * sops's, byte for byte; then several rounds, alternating which tool goes first, so that machine
 * noise hits both. Prints medians, bootseal/sops, the RSS of both and whether each goal holds:
 * ≤ 1.5× sops on small documents, ≤ 0.7× on large ones, peak RSS ≤ 1.5× sops's on large ones.
 * `--sea` adds the single executable (npm run build:sea) as a second bootseal column.
 * Reference rows give the floor: bare `node -e 0`, `bootseal --version` (Node plus the bundle's
 * main chunk), `bootseal decrypt --help` (decrypt's modules loaded, nothing done).
 *
 * BOOTSEAL_BENCH_MAIN=path/to/main.js times another build (e.g. a checkout of an older commit).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { optionalPeer } from "../test/helpers/peers.ts";
import * as docs from "./lib/sops-documents.ts";

const { values: opts, positionals } = parseArgs({
  options: { rounds: { type: "string" }, sea: { type: "string" }, only: { type: "string" } },
  allowPositionals: true,
});
const rounds = Number(opts.rounds ?? positionals[0] ?? 7);
const only = opts.only?.split(",");
const sops = optionalPeer("SOPS_BIN") ?? "sops";
const ageKeygen = optionalPeer("AGE_KEYGEN_BIN") ?? "age-keygen";
const bootsealMain =
  process.env.BOOTSEAL_BENCH_MAIN ?? fileURLToPath(new URL("../dist/cli/main.js", import.meta.url));
/** GNU time measures a child's peak RSS (getrusage ru_maxrss) without touching its output. */
const GNU_TIME = "/usr/bin/time";

interface Tool {
  readonly name: string;
  readonly argv: (args: readonly string[]) => [string, string[]];
}
const tools: Tool[] = [
  { name: "sops", argv: (a) => [sops, [...a]] },
  { name: "bootseal", argv: (a) => [process.execPath, [bootsealMain, ...a]] },
];
if (opts.sea) {
  const exe = opts.sea;
  tools.push({ name: "bootseal sea", argv: (a) => [exe, [...a]] });
}

type Size = "small" | "large";
interface Case {
  readonly name: string;
  readonly size: Size;
  readonly file: string;
  readonly content: string | Buffer;
  readonly rule?: readonly string[];
}

interface Run {
  ms: number;
  stdout: Buffer;
}

function run(tool: Tool, args: readonly string[], env: NodeJS.ProcessEnv, rssFile?: string): Run {
  const [cmd, argv] = tool.argv(args);
  const [file, fileArgs] = rssFile ? [GNU_TIME, ["-f", "%M", "-o", rssFile, cmd, ...argv]] : [cmd, argv];
  const start = process.hrtime.bigint();
  const result = spawnSync(file, fileArgs, { env, stdio: ["ignore", "pipe", "pipe"], maxBuffer: 1 << 28 });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0)
    throw new Error(`${tool.name} ${args.join(" ")} failed: ${result.stderr.toString()}`);
  return { ms, stdout: result.stdout };
}

/** Peak RSS in MiB of one run (the warm-up), or NaN without GNU time. */
function warmUp(
  tool: Tool,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  dir: string,
): Run & { mib: number } {
  if (!existsSync(GNU_TIME)) return { ...run(tool, args, env), mib: Number.NaN };
  const rssFile = join(dir, "rss.txt");
  const r = run(tool, args, env, rssFile);
  return { ...r, mib: Number(readFileSync(rssFile, "utf8").trim().split("\n").at(-1)) / 1024 };
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

/** The goals: time ratio ≤ 1.5 (small) / ≤ 0.7 (large); peak RSS ≤ 1.5× (large). */
function verdict(size: Size, ratio: number, rssRatio: number): string {
  const time = size === "small" ? ratio <= 1.5 : ratio <= 0.7;
  const rss = size === "small" || Number.isNaN(rssRatio) || rssRatio <= 1.5;
  return time && rss
    ? "met"
    : `NOT met (${[time ? "" : "time", rss ? "" : "rss"].filter(Boolean).join(", ")})`;
}

const regex = ["--encrypted-regex", "^(field[0-9]+|name|tokens)$"];
const large = docs.largeYaml();
const allCases: (Case & { group: string })[] = [
  { group: "small", name: "yaml, 100 values", size: "small", file: "small.yaml", content: docs.smallYaml() },
  { group: "small", name: "json, 100 values", size: "small", file: "small.json", content: docs.smallJson() },
  {
    group: "small",
    name: "dotenv, 100 values",
    size: "small",
    file: "small.env",
    content: docs.smallDotenv(),
  },
  { group: "large", name: "yaml, 10,000 values", size: "large", file: "large.yaml", content: large },
  {
    group: "large",
    name: "yaml, 10,000, comments",
    size: "large",
    file: "comments.yaml",
    content: docs.largeYamlWithComments(),
  },
  {
    group: "large",
    name: "yaml, 10,000, encrypted_regex",
    size: "large",
    file: "regex.yaml",
    content: large,
    rule: regex,
  },
  {
    group: "large",
    name: "json, 10,000 values",
    size: "large",
    file: "large.json",
    content: docs.largeJson(),
  },
  {
    group: "binary",
    name: "binary, 1 MiB",
    size: "large",
    file: "blob.bin",
    content: docs.binary(1024 * 1024),
  },
];
const cases = allCases.filter((c) => only === undefined || only.includes(c.group));

const dir = mkdtempSync(join(tmpdir(), "bootseal-bench-"));
try {
  const keyFile = join(dir, "age.txt");
  execFileSync(ageKeygen, ["-o", keyFile], { stdio: "ignore" });
  const recipient = /public key: (age1\w+)/.exec(readFileSync(keyFile, "utf8"))?.[1] as string;
  const env = { ...process.env, SOPS_AGE_KEY_FILE: keyFile };
  const ours = tools.filter((t) => t.name !== "sops");
  const theirs = tools[0] as Tool;

  const rows: string[][] = [];
  const mismatches: string[] = [];
  for (const c of cases) {
    const plain = join(dir, c.file);
    writeFileSync(plain, c.content);
    const encrypted = join(dir, `enc-${c.file}`);
    const rule = c.rule ?? [];
    writeFileSync(encrypted, run(theirs, ["encrypt", ...rule, "--age", recipient, plain], env).stdout);
    for (const op of ["encrypt", "decrypt"] as const) {
      const args = op === "encrypt" ? [op, ...rule, "--age", recipient, plain] : [op, encrypted];
      const warm = tools.map((t) => warmUp(t, args, env, dir));
      if (op === "decrypt")
        for (const [i, t] of tools.entries())
          if (!warm[i]?.stdout.equals(warm[0]?.stdout as Buffer)) mismatches.push(`${c.name} (${t.name})`);
      const times = tools.map((): number[] => []);
      for (let r = 0; r < rounds; r++) {
        // Alternate the order so that machine noise hits every tool alike.
        const order = r % 2 === 0 ? tools.map((_, i) => i) : tools.map((_, i) => tools.length - 1 - i);
        for (const i of order) times[i]?.push(run(tools[i] as Tool, args, env).ms);
      }
      const sopsMs = median(times[0] as number[]);
      const sopsMib = warm[0]?.mib as number;
      for (const [k, t] of ours.entries()) {
        const ms = median(times[k + 1] as number[]);
        const mib = warm[k + 1]?.mib as number;
        rows.push([
          c.name,
          op,
          t.name,
          ms.toFixed(1),
          sopsMs.toFixed(1),
          (ms / sopsMs).toFixed(2),
          mib.toFixed(0),
          sopsMib.toFixed(0),
          (mib / sopsMib).toFixed(2),
          verdict(c.size, ms / sopsMs, mib / sopsMib),
        ]);
      }
    }
  }

  // Reference: what every bootseal run pays before it does anything.
  const node = {
    name: "node",
    argv: (a: readonly string[]): [string, string[]] => [process.execPath, [...a]],
  };
  const refs: { name: string; tool: Tool; args: string[] }[] = [
    { name: "sops --version", tool: theirs, args: ["--version"] },
    { name: "node -e 0 (bare Node start-up)", tool: node, args: ["-e", "0"] },
    ...ours.flatMap((t) => [
      { name: `${t.name} --version`, tool: t, args: ["--version"] },
      { name: `${t.name} decrypt --help (decrypt loaded)`, tool: t, args: ["decrypt", "--help"] },
    ]),
  ];
  const refRows: string[][] = [];
  for (const ref of refs) {
    run(ref.tool, ref.args, env);
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) times.push(run(ref.tool, ref.args, env).ms);
    refRows.push([ref.name, median(times).toFixed(1)]);
  }

  console.log(
    `median of ${rounds} rounds after one warm-up, each a fresh process; node ${process.version}, ` +
      `${cpus().length} CPUs; sops: ${run(theirs, ["--version"], env).stdout.toString().split("\n")[0]}`,
  );
  table(["case", "op", "tool", "ms", "sops ms", "ratio", "RSS MiB", "sops RSS", "RSS ratio", "goal"], rows);
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
