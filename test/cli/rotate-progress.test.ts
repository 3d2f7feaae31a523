/**
 * `rotate --store`'s progress: the bar (driven by an injected clock: no waiting), its
 * throttling, and `--json`'s lines against a file store (a real `bootseal rotate` process).
 * The rotation itself is tested in rotate-store.test.ts.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import { openStore } from "../../providers/stores/index.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { Progress, progressLine } from "../../src/cli/progress.ts";
import { type AgeKey, ageKey, encrypt, run } from "../fetcher/helpers.ts";

let work: string;
let r1: AgeKey;
let r2: AgeKey;
before(async () => {
  work = await mkdtemp(join(tmpdir(), "bootseal-rotate-progress-"));
  r1 = await ageKey(work, "r1");
  r2 = await ageKey(work, "r2");
});
after(async () => {
  await rm(work, { recursive: true, force: true });
});

test("progressLine: count, percent, rate and ETA", () => {
  assert.equal(progressLine(0, 10, 0, 10), "[..........]   0/10  0%  0.0/s  ETA ?");
  assert.equal(progressLine(5, 10, 2000, 10), "[#####.....]   5/10  50%  2.5/s  ETA 0:02");
  assert.equal(progressLine(100, 4000, 10_000, 10), "[..........]   100/4000  2%  10.0/s  ETA 6:30");
  assert.equal(progressLine(10, 10, 4000, 10), "[##########]  10/10  100%  2.5/s  done");
  assert.equal(progressLine(0, 0, 0, 4), "[####]  0/0  100%  0.0/s  done");
});

test("Progress: redrawn at most every 250 ms and for the last item; notes go above the bar", () => {
  const stream = new PassThrough();
  let text = "";
  stream.on("data", (c: Buffer) => {
    text += c.toString();
  });
  let t = 0;
  const p = new Progress({ total: 5, stream, now: () => t, width: 5 });
  const draws = () => text.split("\r\x1b[K").filter((s) => s.startsWith("[")).length;
  assert.equal(draws(), 1, "drawn at the start");
  t = 100;
  p.tick();
  t = 200;
  p.tick();
  assert.equal(draws(), 1, "not within 250 ms");
  t = 300;
  p.tick();
  assert.equal(draws(), 2);
  p.note("failed configs/ns/x: MAC_MISMATCH ...");
  assert.match(text, /\r\x1b\[Kfailed configs\/ns\/x: MAC_MISMATCH \.\.\.\n/);
  t = 310;
  p.tick();
  p.tick();
  p.finish();
  assert.ok(text.endsWith("[#####]  5/5  100%  16.1/s  done\n"), JSON.stringify(text.slice(-60)));
});

test("rotate --store --json: a start line with the count, one line per object, a summary; exit code kept", async () => {
  const dir = join(work, "store");
  await mkdir(dir, { recursive: true });
  const url = `file://${dir}`;
  const store = openStore(url, { env: {} });
  for (let i = 0; i < 3; i++) {
    const bytes = await encrypt(`token-${i}\n`, ["--age", r1.recipient, "--input-type", "binary"]);
    await store.put(
      `configs/ns/m${i}`,
      bytes,
      { ifNoneMatch: "*" },
      { contentType: "application/sops+json" },
    );
  }
  // One object no key opens: it fails, the others rotate.
  const foreign = await encrypt("other\n", ["--age", r2.recipient, "--input-type", "binary"]);
  await store.put("configs/ns/m3", foreign, { ifNoneMatch: "*" }, { contentType: "application/sops+json" });
  const r = await run(["rotate", "--store", url, "--json"], {
    PATH: process.env.PATH,
    HOME: work,
    SOPS_AGE_KEY: r1.identity,
  });
  assert.equal(r.code, EXIT_CODES.NO_KEY_AVAILABLE, r.stderr);
  const lines = r.stdout
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(lines[0], { type: "start", total: 4, dryRun: false });
  const objects = lines.slice(1, -1).sort((a, b) => String(a.key).localeCompare(String(b.key)));
  assert.deepEqual(objects, [
    { type: "object", key: "configs/ns/m0", outcome: "rotated" },
    { type: "object", key: "configs/ns/m1", outcome: "rotated" },
    { type: "object", key: "configs/ns/m2", outcome: "rotated" },
    { type: "object", key: "configs/ns/m3", outcome: "failed", code: "NO_KEY_AVAILABLE" },
  ]);
  assert.deepEqual(lines.at(-1), {
    type: "summary",
    rotated: 3,
    unchanged: 0,
    skipped: 0,
    failed: 1,
    dryRun: false,
    firstFailure: "NO_KEY_AVAILABLE",
    exit: EXIT_CODES.NO_KEY_AVAILABLE,
  });
  assert.ok(!r.stdout.includes("token-"), "no plaintext");

  // Not a terminal and no --json: the per-object lines as before.
  const dry = await run(["rotate", "--store", url, "--dry-run", "--prefix", "configs/ns/m0"], {
    PATH: process.env.PATH,
    HOME: work,
    SOPS_AGE_KEY: r1.identity,
  });
  assert.equal(dry.code, 0, dry.stderr);
  assert.match(
    dry.stdout,
    /^would rotate configs\/ns\/m0: new data key\nwould rotate 1, unchanged 0, skipped 0, failed 0 \(dry run: nothing written\)\n$/,
  );
  assert.ok(!dry.stderr.includes("["), "no bar off a terminal");
});
