/**
 * bench/phase-count: what a count of machines per phase (src/service/phase-counts.ts,
 * `bootseal_machines`) costs at fleet size, on the file store in a temporary directory (or on
 * any store URL given): the first count after a start, a count with nothing changed, and a
 * count after --changed records changed, each with its store calls and time.
 *
 *   node_modules/.bin/node bench/phase-count.ts [--machines 10000] [--changed 100] [--store URL]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { openStore } from "../providers/stores/index.ts";
import { PHASES } from "../src/machine/status-protocol.ts";
import { statusKey } from "../src/machine/store-layout.ts";
import { machineStore } from "../src/service/machine-store.ts";
import { PhaseCounter } from "../src/service/phase-counts.ts";
import { counting } from "../test/service/counting-store.ts";

const { values } = parseArgs({
  options: {
    machines: { type: "string", default: "10000" },
    changed: { type: "string", default: "100" },
    store: { type: "string" },
  },
});
const machines = Number(values.machines);
const changed = Number(values.changed);
const dir = values.store ? undefined : mkdtempSync(join(tmpdir(), "bootseal-phase-count-"));
const inner = openStore(values.store ?? `file://${dir}`, {});
// A status record as a boot leaves it: six history entries.
const history = ["published", "fetching", "decrypted", "written", "running", "succeeded"].map((phase) => ({
  phase,
  at: "2026-12-02T00:00:00.000Z",
  by: "machine",
  version: 1,
  message: "x".repeat(200),
}));
const write = (i: number, phase: string) =>
  inner.put(
    statusKey({ namespace: "bench", name: `m${i}` }),
    Buffer.from(
      JSON.stringify({
        namespace: "bench",
        name: `m${i}`,
        phase,
        version: 1,
        updatedAt: "",
        config: null,
        history,
      }),
    ),
    { unconditional: true },
  );
for (let i = 0; i < machines; i += 50) {
  await Promise.all(
    Array.from({ length: Math.min(50, machines - i) }, (_, j) =>
      write(i + j, PHASES[(i + j) % PHASES.length]!),
    ),
  );
}
const { store, calls } = counting(inner);
let clock = 0;
const counter = new PhaseCounter({
  source: machineStore(store),
  refreshMs: 0,
  waitMs: 3_600_000,
  deadlineMs: 3_600_000,
  now: () => clock++,
});
async function measure(label: string): Promise<void> {
  calls.length = 0;
  const started = process.hrtime.bigint();
  const count = await counter.current();
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const of = (op: string) => calls.filter((c) => c.startsWith(`${op} `)).length;
  const total = Object.values(count?.counts ?? {}).reduce((a, b) => a + b, 0);
  console.log(
    `${label}: ${ms.toFixed(0)} ms, ${of("list")} list, ${of("get")} get, ${total} machines counted`,
  );
}
await measure("first count (after a start)");
await measure("nothing changed");
for (let i = 0; i < changed; i++) await write(i, "failed");
await measure(`${changed} changed`);
console.log(`rss ${(process.memoryUsage().rss / 1e6).toFixed(0)} MB`);
if (dir) rmSync(dir, { recursive: true, force: true });
