/**
 * A machine's status record stays bounded (issue #10: 100 entries of 20 KiB made a 2 MiB
 * record, rewritten on every post, and pushed `published` out of the history): at most
 * HISTORY_LIMIT entries and HISTORY_MAX_BYTES of history, each entry at most
 * HISTORY_ENTRY_MAX_BYTES, and the latest `published` entry always kept.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { statusKey } from "../../src/machine/store-layout.ts";
import { buildApp } from "../../src/service/app.ts";
import { auditLoggerTo } from "../../src/service/plugins/audit.ts";
import {
  appendHistory,
  HISTORY_ENTRY_MAX_BYTES,
  HISTORY_LIMIT,
  HISTORY_MAX_BYTES,
} from "../../src/service/status-history.ts";
import type { StatusEntry } from "../../src/service/status-record.ts";
import { appConfig } from "./app-config.ts";

const recipient = await identityToRecipient(await generateX25519Identity());
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
const M = { namespace: "prod", name: "worker-0" };

interface Record {
  phase: string;
  version: number;
  history: { phase: string; version: number; output?: string; message?: string; truncated?: boolean }[];
}

function app() {
  const store = new MemoryStore();
  const a = buildApp({
    logger: false,
    store,
    config: appConfig({
      // Written through: the cap of the stored record is what these tests look at.
      statusReports: { coalesceMs: 0, maxHeldMachines: 1 },
      creationRules: parseSopsConfig(`creation_rules:\n  - path_regex: ^prod/\n    age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
    }),
    audit: auditLoggerTo(new PassThrough().resume()),
  });
  return { a, store };
}

async function publish(a: ReturnType<typeof app>["a"]): Promise<string> {
  const put = await a.inject({
    method: "PUT",
    url: "/v1/machines/prod/worker-0/config",
    headers: { ...bearer(ADMIN), "content-type": "text/plain" },
    payload: "#cloud-config\n",
  });
  assert.ok(put.statusCode === 201 || put.statusCode === 200, put.body);
  return (put.json() as { bootstrapToken: string }).bootstrapToken;
}

async function storedBytes(store: MemoryStore): Promise<{ record: number; history: number }> {
  const obj = await store.get(statusKey(M));
  assert.ok(obj);
  const rec = JSON.parse(Buffer.from(obj.body).toString("utf8")) as Record;
  return { record: obj.size, history: Buffer.byteLength(JSON.stringify(rec.history)) };
}

test("200 posts of 20 KiB: the record stays under the cap and keeps the latest publish", {
  timeout: 120_000,
}, async () => {
  const { a, store } = app();
  await publish(a);
  const token = await publish(a); // version 2: the one that must stay
  for (let i = 0; i < 200; i++) {
    const post = await a.inject({
      method: "POST",
      url: "/v1/machines/prod/worker-0/status",
      headers: bearer(token),
      payload: {
        phase: i % 2 ? "failed" : "running",
        attempt: i,
        message: `m${i}`.padEnd(4096, "m"),
        output: `${"o".repeat(16_384 - String(i).length)}${i}`,
      },
    });
    assert.equal(post.statusCode, 200, post.body);
    const size = await storedBytes(store);
    assert.ok(size.history <= HISTORY_MAX_BYTES, `history ${size.history} bytes after post ${i}`);
    assert.ok(size.record <= HISTORY_MAX_BYTES + 1024, `record ${size.record} bytes after post ${i}`);
  }
  const res = await a.inject({
    method: "GET",
    url: "/v1/machines/prod/worker-0/status",
    headers: bearer(ADMIN),
  });
  assert.equal(res.statusCode, 200, res.body);
  const rec = res.json() as Record;
  assert.equal(rec.phase, "failed");
  const published = rec.history.filter((h) => h.phase === "published");
  // Publishes are dropped last: both are still there, the machine's oldest reports went.
  assert.deepEqual(
    published.map((h) => h.version),
    [1, 2],
  );
  const last = rec.history.at(-1)!;
  assert.ok(last.output?.endsWith("199"), "the newest report is whole");
  assert.equal(last.truncated, undefined);
  assert.ok(rec.history.length >= 3);
  await a.close();
});

test("an entry whose encoding is oversized keeps the end of its output and says it was cut", async () => {
  const { a, store } = app();
  const token = await publish(a);
  // Within the route's limits (UTF-8 bytes, and the 64 KiB body) but 58 KiB once stored:
  // a control character is one byte, and six JSON-encoded.
  const output = `${"\u0001".repeat(9000)}€END`;
  const post = await a.inject({
    method: "POST",
    url: "/v1/machines/prod/worker-0/status",
    headers: bearer(token),
    payload: { phase: "failed", message: "é".repeat(2000), output },
  });
  assert.equal(post.statusCode, 200, post.body);
  const rec = (
    await a.inject({ method: "GET", url: "/v1/machines/prod/worker-0/status", headers: bearer(ADMIN) })
  ).json() as Record;
  const last = rec.history.at(-1)!;
  assert.equal(last.truncated, true);
  assert.ok(last.output!.endsWith("€END"));
  assert.ok(last.output!.length < output.length);
  assert.equal(last.message, "é".repeat(2000), "the message survives when cutting the output suffices");
  assert.ok(Buffer.byteLength(JSON.stringify(last)) <= HISTORY_ENTRY_MAX_BYTES);
  assert.ok((await storedBytes(store)).history <= HISTORY_MAX_BYTES);
  await a.close();
});

test("appendHistory: the count cap keeps the latest publish; lone surrogates and controls are cut whole", () => {
  const entry = (i: number, phase: StatusEntry["phase"] = "fetching"): StatusEntry => ({
    phase,
    at: new Date(i * 1000).toISOString(),
    by: phase === "published" ? "ci" : "machine",
    version: 1,
    attempt: i,
  });
  let history: StatusEntry[] = [];
  history = appendHistory(history, entry(0, "published"));
  for (let i = 1; i <= 3 * HISTORY_LIMIT; i++) history = appendHistory(history, entry(i));
  assert.equal(history.length, HISTORY_LIMIT);
  assert.equal(history[0]!.phase, "published");
  assert.equal(history.at(-1)!.attempt, 3 * HISTORY_LIMIT);

  const big: StatusEntry = {
    ...entry(1),
    output: `${"\u0001\ud800".repeat(5000)}😀tail`,
    message: "\u0002".repeat(4096),
  };
  const cut = appendHistory([], big)[0]!;
  assert.equal(cut.truncated, true);
  assert.ok(Buffer.byteLength(JSON.stringify(cut)) <= HISTORY_ENTRY_MAX_BYTES);
  assert.ok(cut.output!.endsWith("😀tail"));
  // No half of a surrogate pair at either cut.
  assert.ok(!/^[\udc00-\udfff]/.test(cut.output!));
  assert.ok(!/[\ud800-\udbff]$/.test(cut.message ?? ""));
});
