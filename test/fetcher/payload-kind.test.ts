/**
 * Which applier a payload goes to: detection (`--payload auto`), the forced kinds and the
 * flag rules of `bootseal fetch`, and the Ignition dispatch (the placeholder applier refuses
 * with UNSUPPORTED until Package B's lands; the detection is real).
 */
import assert from "node:assert/strict";
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { isBootsealError } from "../../src/errors.ts";
import { runFetch } from "../../src/fetcher/fetch-run.ts";
import { DEFAULT_ALLOWED_ROOTS } from "../../src/fetcher/paths.ts";
import { isIgnitionConfig } from "../../src/fetcher/payloads/ignition.ts";
import { isCloudConfig, payloadKind } from "../../src/fetcher/payloads/kind.ts";
import { type AgeKey, ageKey, encrypt, machineEnv, run, tempDir } from "./helpers.ts";

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);

test("detection: cloud-config (as cloud-init tells it), Ignition 3.x, otherwise the manifest", () => {
  for (const text of [
    "#cloud-config\n",
    "#Cloud-Config\nwrite_files: []\n",
    "  \n#cloud-config\n",
    "## template: jinja\n#cloud-config\nruncmd: []\n",
  ]) {
    assert.equal(payloadKind("auto", bytes(text)), "cloud-config", JSON.stringify(text));
  }
  // Every Ignition version is the Ignition kind (2.3.0: the kubeadm provider for Flatcar); the
  // applier translates 2.x and names the versions it refuses.
  for (const version of ["3.0.0", "3.4.0", "3.5.0-experimental", "2.3.0"]) {
    const text = JSON.stringify({ ignition: { version }, storage: {} });
    assert.equal(payloadKind("auto", bytes(text)), "ignition", version);
  }
  for (const text of ["path: /etc/a\ncontent: x\n", "#cloud-configuration-is-not-a-header\n"]) {
    assert.equal(
      payloadKind("auto", bytes(text)),
      text.startsWith("#cloud-config") ? "cloud-config" : "manifest",
    );
  }
  assert.equal(isIgnitionConfig(bytes('{"ignition":{"version":3}}')), false, "a number is no version");
  assert.equal(isIgnitionConfig(bytes("[1]")), false);
  assert.equal(isCloudConfig(new Uint8Array([0xff, 0xfe, 0x23])), false, "not UTF-8");
});

test("cloud-init's other user-data types are refused by name, not parsed as a manifest", () => {
  for (const [text, what] of [
    ["#!/bin/sh\necho hi\n", /a shell script/],
    ["#include\nhttps://example.com/x\n", /an #include list/],
    ["#cloud-config-archive\n- type: x\n", /a cloud-config archive/],
    ["#cloud-boothook\n", /a cloud boothook/],
    ['Content-Type: multipart/mixed; boundary="x"\n', /a MIME multipart message/],
  ] as const) {
    assert.throws(
      () => payloadKind("auto", bytes(text)),
      (err: unknown) => isBootsealError(err) && err.code === "BAD_INPUT" && what.test(err.message),
    );
  }
});

test("a forced kind is taken as it is", () => {
  assert.equal(payloadKind("manifest", bytes("#cloud-config\n")), "manifest");
  assert.equal(payloadKind("cloud-config", bytes("path: /etc/a\n")), "cloud-config");
});

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
before(async () => {
  dir = await tempDir("payload-kind");
  key = await ageKey(dir.path, "m1");
});
after(async () => {
  await dir.remove();
});

async function doc(text: string, name: string): Promise<string> {
  const file = join(dir.path, name);
  await writeFile(file, await encrypt(text, ["--age", key.recipient, "--input-type", "binary"]));
  return file;
}

test("an Ignition config goes to the Ignition applier (passwd users: UNSUPPORTED), nothing written", async () => {
  const file = await doc(
    JSON.stringify({
      ignition: { version: "3.0.0" },
      storage: { files: [{ path: "/etc/x", contents: { source: "data:,x" } }] },
      passwd: { users: [{ name: "core" }] },
    }),
    "ign.json",
  );
  const root = join(dir.path, "root-ign");
  await mkdir(root);
  await assert.rejects(
    runFetch(
      {
        from: `file://${file}`,
        root,
        allowedRoots: DEFAULT_ALLOWED_ROOTS,
        marker: "/var/lib/bootseal/bootstrap.done",
        sentinel: null,
        force: false,
        oneTime: false,
        deadlineMs: 10_000,
        attemptTimeoutMs: 5000,
        reportTimeoutMs: 1000,
      },
      {
        io: {
          stdout: new PassThrough().resume(),
          stderr: new PassThrough().resume(),
          env: machineEnv({ SOPS_AGE_KEY_FILE: key.file }),
        },
        labeler: null,
        // A fake systemd: a refused config never gets as far as units.
        systemd: { run: async () => {} },
      },
    ),
    (err: unknown) => isBootsealError(err) && err.code === "UNSUPPORTED",
  );
  assert.deepEqual(await readdir(root), [], "nothing written");
});

test("fetch flags: --payload values, --out only with raw or auto, raw only with --out, --out with --apply (exit 1)", async () => {
  const file = await doc("#cloud-config\n", "cc.json");
  const root = join(dir.path, "root-flags");
  await mkdir(root);
  const env = machineEnv({ SOPS_AGE_KEY_FILE: key.file });
  const cases: [string[], RegExp][] = [
    [["--payload", "yaml"], /--payload must be one of cloud-config, ignition, manifest, raw, auto/],
    [["--payload", "cloud-config", "--out", "/etc/x"], /--out FILE writes the raw payload/],
    [["--payload", "raw"], /--payload raw needs --out FILE/],
    [["--apply", "--out", "/etc/x"], /one of --out FILE and --apply/],
  ];
  for (const [args, message] of cases) {
    const r = await run(["fetch", "--from", `file://${file}`, "--root", root, ...args], env);
    assert.equal(r.code, EXIT_CODES.USAGE, r.stderr);
    assert.match(r.stderr, message);
  }
  const viaEnv = await run(["fetch", "--from", `file://${file}`, "--root", root], {
    ...env,
    BOOTSEAL_PAYLOAD: "bogus",
  });
  assert.equal(viaEnv.code, EXIT_CODES.USAGE);
  assert.match(viaEnv.stderr, /--payload must be one of/);
});
