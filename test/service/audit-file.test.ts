/**
 * The audit log file's mode (`audit.mode`, default 0600): set when it is created, and on an
 * existing file too (a log an older version created 0644 is tightened); lines are appended.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { BootsealError } from "../../src/errors.ts";
import { createAuditLogger } from "../../src/service/plugins/audit.ts";

const dir = mkdtempSync(join(tmpdir(), "bootseal-audit-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const modeOf = (path: string) => statSync(path).mode & 0o777;

async function logOnce(path: string, mode?: number): Promise<void> {
  const audit = createAuditLogger(path, mode);
  audit.logger.info({ action: "publish", outcome: "ok" });
  await audit.close();
}

test("a new audit log (and its missing directory) is created, the file 0600 whatever the umask", async () => {
  const path = join(dir, "new", "audit.log");
  const old = process.umask(0);
  try {
    await logOnce(path);
  } finally {
    process.umask(old);
  }
  assert.equal(modeOf(path), 0o600);
  assert.match(readFileSync(path, "utf8"), /"action":"publish"/);
});

test("an existing 0644 log is tightened to 0600 and appended to", async () => {
  const path = join(dir, "old.log");
  writeFileSync(path, '{"earlier":true}\n');
  chmodSync(path, 0o644);
  await logOnce(path);
  assert.equal(modeOf(path), 0o600);
  const lines = readFileSync(path, "utf8").trim().split("\n");
  assert.equal(lines.length, 2);
  assert.equal(lines[0], '{"earlier":true}');
});

test("audit.mode keeps another mode when asked (0644, the old behaviour)", async () => {
  const path = join(dir, "shipped.log");
  await logOnce(path, 0o644);
  assert.equal(modeOf(path), 0o644);
});

test("an audit log that cannot be opened is IO_ERROR naming the path", () => {
  const blocker = join(dir, "a-file");
  writeFileSync(blocker, "");
  const path = join(blocker, "audit.log");
  assert.throws(
    () => createAuditLogger(path),
    (err) => err instanceof BootsealError && err.code === "IO_ERROR" && err.message.includes(path),
  );
});
