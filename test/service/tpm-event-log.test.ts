/**
 * The measured-boot event log parser and replay (src/service/identity/tpm-event-log.ts)
 * against tpm2-tools' `tpm2_eventlog` (Debian tpm2-tools, installed with the swtpm peer), an
 * independent implementation: real logs from a GCE Shielded VM, Fedora and Arch give the same
 * events and sha256 PCR values; a log test/helpers/tcg-event-log.ts builds (the e2e in login-tpm.test.ts
 * uses it) reads the same in both; damaged logs are an EventLogError, never another exception.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { parse } from "yaml";
import { EventLogError, replayEventLog } from "../../src/service/identity/tpm-event-log.ts";
import { REPO, tempDir } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { sha256, tcgEventLog } from "../helpers/tcg-event-log.ts";

const run = promisify(execFile);
const FIXTURES = join(REPO, "test/fixtures/tpm-event-logs");
const REAL = ["event-gce-ubuntu-2104-log.bin", "event-sd-boot-fedora37.bin", "event-arch-linux.bin"];

/** tpm2_eventlog's reading: the extended events' sha256 digests and the sha256 PCR values. */
async function tpm2Eventlog(
  file: string,
): Promise<{ events: [number, string][]; pcrs: Map<number, string> }> {
  // tpm2-tools comes with the swtpm peer; in CI a missing peer is a failure, not a skip.
  peer("SWTPM_TCTI");
  const { stdout } = await run("tpm2_eventlog", [file], { maxBuffer: 64 * 1024 * 1024 });
  // failsafe: every scalar a string (the PCR values are 0x… hex, not numbers).
  const doc = parse(stdout, { schema: "failsafe" }) as {
    events: { PCRIndex: string; EventType: string; Digests?: { AlgorithmId: string; Digest: string }[] }[];
    pcrs: { sha256: Record<string, string> };
  };
  const events = doc.events
    .filter((e) => e.EventType !== "EV_NO_ACTION")
    .map((e) => {
      const d = e.Digests?.find((x) => x.AlgorithmId === "sha256");
      return [Number(e.PCRIndex), (d?.Digest ?? "").toLowerCase()] as [number, string];
    });
  const pcrs = new Map(
    Object.entries(doc.pcrs.sha256).map(([i, v]) => [
      Number(i.trim()),
      v.trim().replace(/^0x/, "").toLowerCase(),
    ]),
  );
  return { events, pcrs };
}

for (const name of REAL) {
  test(`a real log (${name}): the same events and sha256 PCR values as tpm2_eventlog`, async () => {
    const file = join(FIXTURES, name);
    const ours = replayEventLog(readFileSync(file));
    const theirs = await tpm2Eventlog(file);
    assert.deepEqual(
      ours.events.map((e) => [e.pcr, e.sha256]),
      theirs.events,
    );
    assert.deepEqual(new Map([...ours.pcrs].sort(([a], [b]) => a - b)), theirs.pcrs);
    assert.ok(ours.events.length > 20, "a whole boot");
  });
}

test("a log tcg-event-log.ts builds (PCRs 0 and 23) reads the same in tpm2_eventlog", async () => {
  const dir = await tempDir("tcg-log");
  try {
    const file = join(dir.path, "log.bin");
    const log = tcgEventLog([
      { pcr: 0, type: 0x8, digest: sha256("v1"), data: Buffer.from("v1") },
      { pcr: 23, type: 0xd, digest: sha256("grub"), data: Buffer.from("grub") },
      { pcr: 23, type: 0x4, digest: sha256(Buffer.alloc(4)), data: Buffer.alloc(4) },
    ]);
    await writeFile(file, log);
    const ours = replayEventLog(log);
    const theirs = await tpm2Eventlog(file);
    assert.deepEqual(
      ours.events.map((e) => [e.pcr, e.sha256]),
      theirs.events,
    );
    assert.deepEqual(new Map([...ours.pcrs].sort(([a], [b]) => a - b)), theirs.pcrs);
  } finally {
    await dir.remove();
  }
});

test("a StartupLocality record is not extended: it starts PCR 0 at the locality (PFP §10.4.5.3, as tpm2-tools 5.8 replays it; Debian's 5.4 extends it instead, so no cross-check)", () => {
  const log = tcgEventLog([
    { pcr: 0, type: 0x3, digest: Buffer.alloc(32), data: Buffer.from("StartupLocality\0\x03", "latin1") },
    { pcr: 0, type: 0x8, digest: sha256("v1"), data: Buffer.from("v1") },
  ]);
  const ours = replayEventLog(log);
  const start = Buffer.alloc(32);
  start[31] = 3;
  assert.equal(ours.pcrs.get(0), sha256(Buffer.concat([start, sha256("v1")])).toString("hex"));
  assert.equal(ours.events.length, 1);
});

test("an old SHA-1-only log, every truncation and random damage of a real log: EventLogError or a replay, nothing else", () => {
  assert.throws(
    () => replayEventLog(readFileSync(join(FIXTURES, "event-uefi-sha1-log.bin"))),
    (err: unknown) => err instanceof EventLogError && /Spec ID/.test(err.message),
  );
  assert.throws(() => replayEventLog(Buffer.alloc(300 * 1024)), /longer than/);
  const real = readFileSync(join(FIXTURES, "event-sd-boot-fedora37.bin"));
  const outcome = (bytes: Buffer): "ok" | "refused" => {
    try {
      replayEventLog(bytes);
      return "ok";
    } catch (err) {
      assert.ok(err instanceof EventLogError, `${(err as Error).stack}`);
      return "refused";
    }
  };
  let refused = 0;
  for (let n = 0; n < real.length; n += 7) if (outcome(real.subarray(0, n)) === "refused") refused++;
  assert.ok(refused > 0, "a cut inside a record is refused");
  for (let i = 0; i < 2000; i++) {
    const damaged = Buffer.from(real);
    for (let k = 0; k < 4; k++)
      damaged[randomBytes(4).readUInt32LE() % damaged.length] = randomBytes(1)[0] as number;
    outcome(damaged);
  }
});
