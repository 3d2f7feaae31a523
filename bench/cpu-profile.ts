/**
 * bench/cpu-profile: where a `--cpu-prof` profile's time went, per phase. Reads the
 * .cpuprofile files of a directory (bench/boot-storm.ts --cpu-prof DIR writes DIR/<target>/,
 * with phases.json: the publish's and the storm's start and end on the profiles' clock) and
 * prints, for the publish, the storm and the whole run: busy time, the top functions by self
 * time, self time by source file or package, and the top functions by inclusive time.
 *
 *   node_modules/.bin/node bench/cpu-profile.ts DIR/<target> [--top 25] [--phase publish|storm|all]
 *
 * Bundled code (dist/cli/chunks/*.js) is mapped back to its source file through the
 * `// src/...` comments esbuild writes before each module.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { argv } from "node:process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const { values: opts, positionals } = parseArgs({
  args: argv.slice(2),
  options: {
    top: { type: "string", default: "25" },
    phase: { type: "string", default: "publish,storm,all" },
  },
  allowPositionals: true,
});
const dir = positionals[0];
if (dir === undefined)
  throw new Error("usage: bench/cpu-profile.ts DIR [--top N] [--phase publish,storm,all]");
const TOP = Number(opts.top);

/** `npm:<package>` for a path inside node_modules. */
function packageOf(path: string): string | undefined {
  const nm = path.lastIndexOf("node_modules/");
  if (nm < 0) return undefined;
  const [scope, name] = path.slice(nm + "node_modules/".length).split("/");
  return `npm:${scope?.startsWith("@") ? `${scope}/${name}` : scope}`;
}

/** Per bundled file: the source module each line belongs to (esbuild's `// path` headers). */
const moduleOfLine = new Map<string, string[]>();
function sourceOf(url: string, line: number): string {
  if (url === "") return "(native or V8)";
  if (url.startsWith("node:")) return url;
  const path = url.startsWith("file://") ? fileURLToPath(url) : url;
  const pkg = packageOf(path);
  if (pkg !== undefined) return pkg;
  if (!path.includes("/dist/")) return path;
  let lines = moduleOfLine.get(path);
  if (lines === undefined) {
    lines = [];
    let current = path.slice(path.indexOf("/dist/") + 1);
    try {
      for (const text of readFileSync(path, "utf8").split("\n")) {
        const m = /^\/\/ (\S+\.[cm]?[jt]s)$/.exec(text);
        if (m?.[1]) current = packageOf(m[1]) ?? m[1];
        lines.push(current);
      }
    } catch {
      // The build is gone: keep the chunk's name.
    }
    moduleOfLine.set(path, lines);
  }
  return lines[line] ?? path;
}

interface Tally {
  busyUs: number;
  idleUs: number;
  readonly self: Map<string, number>;
  readonly bySource: Map<string, number>;
  readonly inclusive: Map<string, number>;
}
const newTally = (): Tally => ({
  busyUs: 0,
  idleUs: 0,
  self: new Map(),
  bySource: new Map(),
  inclusive: new Map(),
});
const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);

function tallyProfile(p: Profile, windows: Record<string, [number, number]>, tallies: Map<string, Tally>) {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const keyOf = new Map<number, string>();
  const srcOf = new Map<number, string>();
  for (const n of p.nodes) {
    const f = n.callFrame;
    const src = sourceOf(f.url, f.lineNumber);
    srcOf.set(n.id, f.url === "" ? f.functionName || "(anonymous)" : src);
    keyOf.set(
      n.id,
      `${f.functionName || "(anonymous)"} ${f.url === "" ? "" : `${src}:${f.lineNumber + 1}`}`.trim(),
    );
  }
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i + 1] ?? 0;
    t += p.timeDeltas[i] ?? 0;
    const id = p.samples[i] as number;
    const name = byId.get(id)?.callFrame.functionName ?? "";
    for (const [phase, [from, to]] of Object.entries(windows)) {
      if (t < from || t >= to) continue;
      const tally = tallies.get(phase) ?? newTally();
      tallies.set(phase, tally);
      if (name === "(idle)") {
        tally.idleUs += dt;
        continue;
      }
      tally.busyUs += dt;
      add(tally.self, keyOf.get(id) ?? "?", dt);
      add(tally.bySource, srcOf.get(id) ?? "?", dt);
      const seen = new Set<string>();
      for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
        const k = keyOf.get(n) ?? "?";
        if (!seen.has(k)) {
          seen.add(k);
          add(tally.inclusive, k, dt);
        }
      }
    }
  }
}

const files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"));
if (files.length === 0) throw new Error(`${dir}: no .cpuprofile files`);
let marks: Record<string, number> = {};
try {
  marks = JSON.parse(readFileSync(join(dir, "phases.json"), "utf8")) as Record<string, number>;
} catch {
  // No phase marks: the whole run only.
}
const windows: Record<string, [number, number]> = { all: [0, Number.POSITIVE_INFINITY] };
if (marks.publishStart !== undefined && marks.publishEnd !== undefined)
  windows.publish = [marks.publishStart, marks.publishEnd];
if (marks.stormStart !== undefined && marks.stormEnd !== undefined)
  windows.storm = [marks.stormStart, marks.stormEnd];
const tallies = new Map<string, Tally>();
for (const f of files)
  tallyProfile(JSON.parse(readFileSync(join(dir, f), "utf8")) as Profile, windows, tallies);

const pct = (us: number, of: number) => `${((100 * us) / of).toFixed(1).padStart(5)} %`;
function print(title: string, m: Map<string, number>, busy: number) {
  console.log(`  ${title}:`);
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    console.log(`    ${pct(us, busy)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`);
}
for (const phase of opts.phase.split(",")) {
  const tally = tallies.get(phase);
  if (tally === undefined) continue;
  console.log(
    `== ${phase}: busy ${(tally.busyUs / 1000).toFixed(0)} ms, idle ${(tally.idleUs / 1000).toFixed(0)} ms (${files.length} profile${files.length === 1 ? "" : "s"})`,
  );
  print("self time by function", tally.self, tally.busyUs);
  print("self time by source file or package", tally.bySource, tally.busyUs);
  print("inclusive time by function", tally.inclusive, tally.busyUs);
}
