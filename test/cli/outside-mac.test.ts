/**
 * What the MAC does not cover must not change what a machine gets.
 *
 * Issue #10 L4 end to end: a binary document that gains a top-level key outside the MAC
 * (`"x": ""`, null, {}) still verifies. Where the format is decided from the content (`bootseal
 * fetch` from a file:// source) it is refused, never written as the `{"data":…,"x":…}` JSON
 * wrapper; where the operator names it (`bootseal decrypt FILE`, sops's file-name rule) the
 * output is what the real sops 3.13.2 prints for the same file: the raw bytes for a binary name.
 *
 * Comments are outside the MAC too: `bootseal fetch` refuses a plaintext comment where the
 * document's rule encrypts (a `#!` line put in front of a YAML payload).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { isBootsealError } from "../../src/errors.ts";
import { decryptPayload } from "../../src/fetcher/decrypt-payload.ts";
import { type AgeKey, ageKey, encrypt, machineEnv, run, tempDir } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";

const PAYLOAD = "#cloud-config\nruncmd: [echo joined]\n";
let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let genuine: Record<string, unknown>;

before(async () => {
  dir = await tempDir("l4");
  key = await ageKey(dir.path, "m");
  const doc = await encrypt(PAYLOAD, ["--age", key.recipient, "--input-type", "binary"]);
  genuine = JSON.parse(Buffer.from(doc).toString()) as Record<string, unknown>;
});
after(async () => {
  await dir.remove();
});

const EXTRAS: [string, unknown][] = [
  ["empty", ""],
  ["null", null],
  ["object", {}],
  ["nested", { y: [null, ""] }],
];

async function tampered(name: string, extra: unknown): Promise<string> {
  const file = join(dir.path, name);
  await writeFile(file, JSON.stringify({ ...genuine, x: extra }, null, "\t"));
  return file;
}

test("fetch --out from file://: the genuine document gives the raw bytes", async () => {
  const root = join(dir.path, "root-genuine");
  await mkdir(root);
  const file = join(dir.path, "genuine");
  await writeFile(file, JSON.stringify(genuine, null, "\t"));
  const r = await run(
    ["fetch", "--from", `file://${file}`, "--out", "/etc/user-data", "--root", root],
    machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(await readFile(join(root, "etc/user-data"), "utf8"), PAYLOAD);
});

test("fetch --out from file://: an extra key outside the MAC is refused, nothing written", async () => {
  for (const [label, extra] of EXTRAS) {
    const root = join(dir.path, `root-${label}`);
    await mkdir(root);
    const file = await tampered(`doc-${label}`, extra);
    const r = await run(
      ["fetch", "--from", `file://${file}`, "--out", "/etc/user-data", "--root", root],
      machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
    );
    assert.equal(r.code, EXIT_CODES.BAD_INPUT, `${label}: ${r.stderr}`);
    assert.match(r.stderr, /binary or JSON cannot be decided/);
    assert.ok(!r.stderr.includes("joined"), r.stderr);
    assert.ok(!existsSync(join(root, "etc/user-data")), `${label}: nothing written`);
  }
});

test("decrypt: a binary file name or --input-type binary gives the raw bytes, as the real sops does", async () => {
  const sops = peer("SOPS_BIN");
  const env = machineEnv({ SOPS_AGE_KEY_FILE: key.file });
  for (const [label, extra] of EXTRAS) {
    const file = await tampered(`t-${label}.bin`, extra);
    const mine = await run(["decrypt", file], env);
    assert.equal(mine.code, 0, mine.stderr);
    assert.equal(mine.stdout, PAYLOAD, `${label}: raw bytes, never the JSON wrapper`);
    const theirs = execFileSync(sops, ["decrypt", file], { env: env as NodeJS.ProcessEnv }).toString();
    assert.equal(mine.stdout, theirs, `${label}: the same as sops`);
    const typed = await run(["decrypt", "--input-type", "binary", file], env);
    assert.equal(typed.stdout, PAYLOAD);
  }
});

test("fetch --out from file://: a plaintext comment added to a YAML document is refused", async () => {
  const doc = Buffer.from(
    await encrypt("# cloud settings\na: one\n", ["--age", key.recipient, "--input-type", "yaml"]),
  ).toString();
  const env = machineEnv({ SOPS_AGE_KEY_FILE: key.file });
  const fetchOut = async (label: string, body: string) => {
    const root = join(dir.path, `root-comment-${label}`);
    await mkdir(root);
    const file = join(dir.path, `comment-${label}.yaml`);
    await writeFile(file, body);
    const r = await run(
      ["fetch", "--from", `file://${file}`, "--out", "/etc/user-data", "--root", root],
      env,
    );
    return { r, out: join(root, "etc/user-data") };
  };
  const genuineRun = await fetchOut("genuine", doc);
  assert.equal(genuineRun.r.code, 0, genuineRun.r.stderr);
  assert.equal(await readFile(genuineRun.out, "utf8"), "# cloud settings\na: one\n");
  const injected = await fetchOut("injected", `#!/usr/bin/env -S sh -c 'echo pwned'\n${doc}`);
  assert.equal(injected.r.code, EXIT_CODES.BAD_INPUT, injected.r.stderr);
  assert.match(injected.r.stderr, /a comment at the top level must be encrypted/);
  assert.ok(!injected.r.stderr.includes("pwned"), injected.r.stderr);
  assert.ok(!existsSync(injected.out), "nothing written");
});

test("the service's hints do not decide it either: x-bootseal-format json or binary, +json content type", async () => {
  const deps = { env: { SOPS_AGE_KEY_FILE: key.file } };
  const bytes = new TextEncoder().encode(JSON.stringify({ ...genuine, x: "" }));
  for (const hint of [
    { formatHint: "json" },
    { formatHint: "binary" },
    { contentType: "application/sops+json" },
  ]) {
    await assert.rejects(
      decryptPayload(bytes, { deps, machine: null, ...hint }),
      (err: unknown) =>
        isBootsealError(err) && err.code === "BAD_INPUT" && /cannot be decided/.test(err.message),
    );
  }
  const clean = new TextEncoder().encode(JSON.stringify(genuine));
  const out = await decryptPayload(clean, { deps, machine: null, formatHint: "json" });
  assert.equal(Buffer.from(out).toString(), PAYLOAD, "a genuine binary document is binary whatever the hint");
  // The operator's --input-type json is sops's rule: the JSON document, as `sops decrypt --input-type json t.json`.
  const typed = await decryptPayload(bytes, { deps, machine: null, inputType: "json" });
  assert.deepEqual(JSON.parse(Buffer.from(typed).toString()), { data: PAYLOAD, x: "" });
});
