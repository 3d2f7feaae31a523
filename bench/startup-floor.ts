/**
 * How fast can a Node process decrypt a small sops document at best? The floor under issue
 * 31's small-document goal (≤ 1.5× sops), measured beside the real sops in one run:
 *
 *   npm run build && . .peers/env && node_modules/.bin/node bench/startup-floor.ts [--rounds 21]
 *
 * Rows, each a fresh process decrypting the same 100-value YAML document (age key):
 * - `sops decrypt`;
 * - `node -e 0` and `node --snapshot-blob EMPTY` (a V8 start-up snapshot with nothing in it):
 *   Node's own start and exit, before any of our code;
 * - a decrypt-only snapshot: `decrypt` and `encrypt` with the local key kinds bundled alone
 *   (the cloud SDKs, typage, OpenPGP, Fastify and every other command left out), evaluated
 *   and snapshotted with `node --build-snapshot`, then run from the blob: the most a start-up
 *   snapshot can save, since nothing is loaded or compiled at run time but the work itself;
 * - the same bundle as one CommonJS file under the compile cache;
 * - `bootseal decrypt` from the npm bin (dist/cli/main.js).
 * The snapshot's own clock splits its run: deserialised (main starts), work done ('exit').
 * The blob is built twice to show whether it is reproducible (the single executables are).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { Plugin } from "esbuild";
import { bundle } from "../scripts/sea/bundle.ts";
import { optionalPeer } from "../test/helpers/peers.ts";
import { smallYaml } from "./lib/sops-documents.ts";

const { values: opts } = parseArgs({ options: { rounds: { type: "string" } } });
const rounds = Number(opts.rounds ?? 21);
const repo = fileURLToPath(new URL("..", import.meta.url));
const sops = optionalPeer("SOPS_BIN") ?? "sops";
const ageKeygen = optionalPeer("AGE_KEYGEN_BIN") ?? "age-keygen";
const node = process.execPath;

/** The snapshot's entry: decrypt and encrypt evaluated at build time, main() at run time. */
const ENTRY = `
import { main } from "./src/cli/main.ts";
import "./src/cli/commands/decrypt.ts";
import "./src/cli/commands/encrypt.ts";
const v8 = require("node:v8");
function run(args) {
  const started = performance.now();
  if (process.env.FLOOR_TIMING) process.on("exit", () => process.stderr.write(JSON.stringify({ started, done: performance.now() }) + "\\n"));
  const io = { stdout: process.stdout, stderr: process.stderr, get stdin() { return process.stdin; }, env: process.env, cwd: process.cwd() };
  main(args, io).then((code) => { process.exitCode = code; });
}
if (v8.startupSnapshot.isBuildingSnapshot()) v8.startupSnapshot.setDeserializeMainFunction(() => run(process.argv.slice(1)));
else run(process.argv.slice(2));
`;

/** Everything a local-key decrypt never runs stays out of the bundle (and so of the heap). */
const HEAVY =
  /^(@aws-sdk|@smithy|@google-cloud|google-auth-library|google-gax|@azure|openpgp|fastify|@fastify|@kubernetes|prom-client|age-encryption|pino|@grpc|protobufjs)/;
const leaveOut: Plugin = {
  name: "decrypt-only",
  setup(b) {
    b.onResolve({ filter: /.*/ }, (a) => {
      const otherCommand =
        a.kind === "dynamic-import" &&
        /commands\/[a-z-]+\.ts$/.test(a.path) &&
        !/\/(de|en)crypt\.ts$/.test(a.path);
      return HEAVY.test(a.path) || otherCommand ? { path: a.path, external: true } : undefined;
    });
  },
};

const dir = mkdtempSync(join(tmpdir(), "bootseal-floor-"));
try {
  const { code } = await bundle(repo, "0.0.0", { entry: ENTRY, plugins: [leaveOut] });
  const mini = join(dir, "decrypt-only.cjs");
  writeFileSync(mini, code);
  writeFileSync(
    join(dir, "cached.cjs"),
    `require("node:module").enableCompileCache(${JSON.stringify(join(dir, "cc"))});\nrequire(${JSON.stringify(mini)});\n`,
  );
  writeFileSync(
    join(dir, "empty.cjs"),
    `require("node:v8").startupSnapshot.setDeserializeMainFunction(() => {});\n`,
  );
  const snapshot = (script: string, blob: string) =>
    execFileSync(node, ["--snapshot-blob", join(dir, blob), "--build-snapshot", join(dir, script)], {
      stdio: "ignore",
    });
  snapshot("empty.cjs", "empty.blob");
  snapshot("decrypt-only.cjs", "decrypt-only.blob");
  snapshot("decrypt-only.cjs", "again.blob");
  const [a, b] = [readFileSync(join(dir, "decrypt-only.blob")), readFileSync(join(dir, "again.blob"))];
  let differing = Math.abs(a.length - b.length);
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) differing++;

  const keyFile = join(dir, "age.txt");
  execFileSync(ageKeygen, ["-o", keyFile], { stdio: "ignore" });
  const recipient = /public key: (age1\w+)/.exec(readFileSync(keyFile, "utf8"))?.[1] as string;
  const env = { ...process.env, SOPS_AGE_KEY_FILE: keyFile };
  writeFileSync(join(dir, "small.yaml"), smallYaml());
  const doc = join(dir, "enc.yaml");
  writeFileSync(doc, execFileSync(sops, ["encrypt", "--age", recipient, join(dir, "small.yaml")], { env }));

  const rows: [string, string, string[]][] = [
    ["sops decrypt", sops, ["decrypt", doc]],
    ["node -e 0", node, ["-e", "0"]],
    ["node, empty snapshot", node, ["--snapshot-blob", join(dir, "empty.blob")]],
    ["decrypt-only snapshot", node, ["--snapshot-blob", join(dir, "decrypt-only.blob"), "decrypt", doc]],
    ["decrypt-only bundle, compile cache", node, [join(dir, "cached.cjs"), "decrypt", doc]],
    ["bootseal decrypt (npm bin)", node, [join(repo, "dist/cli/main.js"), "decrypt", doc]],
  ];
  const runOnce = (file: string, args: string[], extra: NodeJS.ProcessEnv = {}) => {
    const start = process.hrtime.bigint();
    const r = spawnSync(file, args, { env: { ...env, ...extra }, stdio: ["ignore", "pipe", "pipe"] });
    if (r.status !== 0) throw new Error(`${file} ${args.join(" ")}: ${r.stderr}`);
    return { ms: Number(process.hrtime.bigint() - start) / 1e6, out: r.stdout, err: r.stderr.toString() };
  };
  const expected = runOnce(sops, ["decrypt", doc]).out;
  for (const [name, file, args] of rows.slice(3))
    if (!runOnce(file, args).out.equals(expected)) throw new Error(`${name}: output differs from sops's`);
  const times = rows.map((): number[] => []);
  for (let r = 0; r < rounds; r++) {
    const order = rows.map((_, i) => (r % 2 === 0 ? i : rows.length - 1 - i));
    for (const i of order) times[i]?.push(runOnce(rows[i]?.[1] as string, rows[i]?.[2] as string[]).ms);
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1] as number;
  const sopsMs = median(times[0] as number[]);
  console.log(`median of ${rounds} rounds, node ${process.version}, 100-value YAML, age key`);
  for (const [i, [name]] of rows.entries()) {
    const ms = median(times[i] as number[]);
    console.log(`${name.padEnd(38)} ${ms.toFixed(1).padStart(7)} ms  ${(ms / sopsMs).toFixed(2)}× sops`);
  }
  const splits = Array.from(
    { length: rounds },
    () =>
      JSON.parse(runOnce(node, rows[3]?.[2] as string[], { FLOOR_TIMING: "1" }).err) as {
        started: number;
        done: number;
      },
  );
  const started = median(splits.map((s) => s.started));
  const work = median(splits.map((s) => s.done - s.started));
  console.log(
    `decrypt-only snapshot, its own clock: main starts at ${started.toFixed(1)} ms, the decrypt takes ${work.toFixed(1)} ms`,
  );
  console.log(
    `decrypt-only bundle ${code.length >> 10} KiB, blob ${a.length >> 20} MiB; built twice: ${differing === 0 ? "identical" : `${differing} bytes differ`}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
