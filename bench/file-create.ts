/**
 * What a new file costs on this machine's file system, slice by slice: the part of a file
 * store's publish that is the kernel's (docs/benchmarks.md, "Session 18"). It creates files
 * as the store's atomic write does (a temporary file in the object's directory, written,
 * fsynced, renamed), spread over three directories as the store's layout spreads a publish
 * (configs/, status/, tokens/), --in-flight at a time through libuv's thread pool, and
 * prints each slice's rate and this process's CPU per file (nearly all of it the pool's
 * system time). The directory is removed at the end.
 *
 *   node_modules/.bin/node bench/file-create.ts [--files 9000] [--slice 1500] [--in-flight 64] [--dir DIR]
 */
import { mkdir, mkdtemp, open, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuUsage } from "node:process";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    files: { type: "string", default: "9000" },
    slice: { type: "string", default: "1500" },
    "in-flight": { type: "string", default: "64" },
    dir: { type: "string", default: tmpdir() },
  },
});
const files = Number(opts.files);
const slice = Number(opts.slice);
const inFlight = Number(opts["in-flight"]);

const root = await mkdtemp(join(opts.dir, "bench-file-create-"));
const dirs = ["configs/ns", "status/ns", "tokens/ns"].map((d) => join(root, d));
for (const d of dirs) await mkdir(d, { recursive: true });
const body = Buffer.alloc(900, 97); // about a status record

async function create(i: number): Promise<void> {
  const dir = dirs[i % dirs.length] as string;
  const temporary = join(dir, `.tmp.${i}`);
  const file = await open(temporary, "wx", 0o600);
  try {
    await file.write(body);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temporary, join(dir, `m${i}.json`));
}

console.log(`bench/file-create: ${files} files in ${root}, ${inFlight} in flight`);
let next = 0;
try {
  for (let start = 0; start < files; start += slice) {
    const end = Math.min(files, start + slice);
    const t0 = performance.now();
    const cpu0 = cpuUsage();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < end) await create(next++);
      }),
    );
    const cpu = cpuUsage(cpu0);
    const n = end - start;
    const rate = Math.round((n / (performance.now() - t0)) * 1000);
    const cpuMs = ((cpu.user + cpu.system) / 1000 / n).toFixed(2);
    console.log(`  files ${start}–${end}: ${rate}/s, ${cpuMs} ms CPU per file`);
  }
} finally {
  await rm(root, { recursive: true, force: true });
}
