/**
 * bench/tamper-fuzz: the tamper fuzz of test/hostile/tamper-fuzz.test.ts at scale, with the same
 * engine (test/hostile/tamper-engine.ts): N seeded mutations (default 1,000,000) of the sops
 * vectors and of documents made for every format and for EncryptedConfig, decrypted the way a
 * machine does; every --payload-every'th (default 1,000) also through the fetcher's
 * decryptPayload. Prints mutations/s, the outcomes by error code, per operator, and every
 * violation (seed and index, enough to reproduce it alone); exits 1 on a violation.
 *
 *   node_modules/.bin/node bench/tamper-fuzz.ts [--mutations N] [--seed S] [--start I] [--payload-every K]
 *
 * Reproduce one mutation: --seed S --start I --mutations 1. The documents made here get fresh
 * keys and IVs each run, so their ciphertext bytes differ run to run (positions and operators
 * do not); the vectors are the same bytes every time.
 */
import { cpus, loadavg } from "node:os";
import { argv, exit, version as nodeVersion } from "node:process";
import { parseArgs } from "node:util";
import { buildSubjects, emptyReport, runFuzz } from "../test/hostile/tamper-engine.ts";

const { values } = parseArgs({
  args: argv.slice(2),
  options: {
    mutations: { type: "string", default: "1000000" },
    seed: { type: "string", default: String(0x5eed10) },
    start: { type: "string", default: "0" },
    "payload-every": { type: "string", default: "1000" },
  },
});
const mutations = Number(values.mutations);
const seed = Number(values.seed);
const start = Number(values.start);
const payloadEvery = Number(values["payload-every"]);
if (![mutations, seed, start, payloadEvery].every((n) => Number.isSafeInteger(n) && n >= 0)) {
  console.error("--mutations, --seed, --start and --payload-every are non-negative integers");
  exit(2);
}

console.log(
  `tamper-fuzz: ${mutations} mutations, seed ${seed}, start ${start}, decryptPayload every ${payloadEvery}; node ${nodeVersion}, ${cpus().length} cpus, load ${loadavg()[0]?.toFixed(2)}`,
);
const subjects = await buildSubjects();
console.log(`${subjects.length} documents: ${subjects.map((s) => s.name).join(", ")}`);
const report = emptyReport();
const t0 = performance.now();
let last = t0;
await runFuzz(
  {
    subjects,
    mutations,
    seed,
    start,
    payloadEvery,
    onProgress(done) {
      const now = performance.now();
      if (done % 100_000 === 0 || now - last > 30_000) {
        last = now;
        const rate = Math.round(done / ((now - t0) / 1000));
        console.log(`  ${done} done, ${rate}/s, ${report.violations.length} violations`);
      }
    },
  },
  report,
);
const seconds = (performance.now() - t0) / 1000;
console.log(
  `\n${report.mutations} mutations in ${seconds.toFixed(1)} s: ${Math.round(report.mutations / seconds)} mutations/s`,
);
console.log(`unchanged by the operator (skipped): ${report.unchanged}`);
console.log("\noutcomes:");
for (const [k, n] of Object.entries(report.outcomes).sort((a, b) => b[1] - a[1])) {
  console.log(`  ${k.padEnd(34)} ${String(n).padStart(9)}`);
}
console.log("\nper operator:");
for (const [op, per] of Object.entries(report.byOperator).sort()) {
  const parts = Object.entries(per)
    .filter(([k]) => !k.startsWith("payload "))
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k.replace("refused:", "")} ${n}`);
  console.log(`  ${op.padEnd(16)} ${parts.join(", ")}`);
}
console.log(`\nviolations: ${report.violations.length}`);
for (const v of report.violations.slice(0, 50)) console.log(`  ${JSON.stringify(v)}`);
exit(report.violations.length === 0 ? 0 : 1);
