/**
 * Differential test of the cloud-config applier against cloud-init 22.4.2 itself: the same
 * config goes through cloud-init's own write_files and write_files_deferred modules
 * (test/fixtures/cloud-config/write_files_oracle.py, paths moved under a temporary root) and
 * through bootseal's applier into another root; bytes, modes and owners of everything in the
 * two roots must agree, and a config cloud-init's module fails on must be refused by bootseal.
 * Cloud-init's output is the oracle: no expected bytes are written down here.
 *
 * The corpus: the kubeadm provider's shapes (test/fixtures/cloud-config/) and generated
 * configs (fast-check, a bounded count) over encodings, permissions in every spelling YAML 1.1
 * and Python accept, owners (root, a user of the root's own etc/passwd, user alone, group
 * alone), append onto existing files, defer, two entries for one path, odd path spellings.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFile, realpath } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { gzipSync } from "node:zlib";
import fc from "fast-check";
import { isBootsealError } from "../../src/errors.ts";
import { resolveTarget } from "../../src/fetcher/paths.ts";
import { applyCloudConfig } from "../../src/fetcher/payloads/cloud-config.ts";
import { parseCloudConfig } from "../../src/fetcher/payloads/cloud-config-parse.ts";
import {
  decodePerms,
  pyB64decode,
  pyFloat,
  translateBool,
} from "../../src/fetcher/payloads/cloud-init-values.ts";
import {
  cloudInitPython,
  GROUP,
  type Outcome,
  runOracle,
  seedRoot,
  snapshot,
  USER,
} from "./cloud-init-oracle.ts";
import { REPO, tempDir } from "./helpers.ts";

const FIXTURES = join(REPO, "test/fixtures/cloud-config");

async function runBootseal(text: string, root: string): Promise<Outcome> {
  await seedRoot(root);
  const real = await realpath(root);
  const policy = { root: real, allowedRoots: ["/"] };
  // The fetcher runs under its unit's UMask=0077; the oracle under cloud-init's 022
  // (runOracle): new directories and unchmodded files must still come out as cloud-init's.
  const umask = process.umask(0o077);
  try {
    await applyCloudConfig(new TextEncoder().encode(text), {
      policy,
      marker: { what: "the marker", target: await resolveTarget("/var/lib/bootseal/bootstrap.done", policy) },
      sentinel: null,
      // cloud-init writes any mode; bootseal's default refusal of set-id modes is not compared here.
      allowUnsafeModes: true,
      allowUnknownModules: false,
      labeler: null,
      log: () => {},
      run: async () => [],
    });
  } catch (err) {
    if (isBootsealError(err)) return { ok: false, error: err.code };
    throw err;
  } finally {
    process.umask(umask);
  }
  return { ok: true, files: await snapshot(root) };
}

/** Compares every config; returns how many cloud-init wrote and how many it failed on. */
async function differential(configs: readonly string[]): Promise<{ written: number; failed: number }> {
  const dir = await tempDir("cc-diff");
  try {
    const expected = await runOracle(await cloudInitPython(), configs, dir.path);
    const counts = { written: 0, failed: 0 };
    for (const [i, text] of configs.entries()) {
      const got = await runBootseal(text, join(dir.path, `bs-${i}`));
      const want = expected[i] as Outcome;
      if (!want.ok) {
        assert.equal(
          got.ok,
          false,
          `case ${i}: cloud-init's module failed (${want.error}); bootseal must refuse\n${text}`,
        );
        counts.failed++;
        continue;
      }
      assert.ok(
        got.ok,
        `case ${i}: cloud-init wrote it; bootseal refused (${got.ok ? "" : got.error})\n${text}`,
      );
      assert.deepEqual(got.files, want.files, `case ${i}\n${text}`);
      counts.written++;
    }
    return counts;
  } finally {
    await dir.remove();
  }
}

test("the kubeadm provider's shapes: files, modes and owners as cloud-init 22.4.2 writes them", {
  timeout: 120_000,
}, async () => {
  const configs = await Promise.all(
    ["kubeadm-join.yaml", "kubeadm-control-plane.yaml"].map((f) => readFile(join(FIXTURES, f), "utf8")),
  );
  assert.deepEqual(await differential(configs), { written: 2, failed: 0 });
});

/** A YAML double-quoted scalar: every character PyYAML would not accept raw is escaped. */
function quote(text: string): string {
  let out = '"';
  for (const ch of text) {
    const cp = ch.codePointAt(0) as number;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (cp >= 0x20 && cp <= 0x7e) out += ch;
    else if (cp >= 0xa0 && cp <= 0xd7ff) out += ch;
    else if (cp >= 0x10000) out += ch;
    else
      out +=
        cp <= 0xffff ? `\\u${cp.toString(16).padStart(4, "0")}` : `\\U${cp.toString(16).padStart(8, "0")}`;
  }
  return `${out}"`;
}

const PATHS = [
  "/etc/kubernetes/pki/ca.crt",
  "/etc/environment",
  "/etc/existing.conf",
  "/run/kubeadm/kubeadm-join-config.yaml",
  "/opt/a/b/c.txt",
  "etc/relative.conf",
  "//etc//doubled//slashes.conf/",
  "/etc/kubernetes/../dotdot.conf",
];

const content = fc.oneof(
  fc.string({ unit: "binary", maxLength: 80 }).map((s) => ({ text: s })),
  fc.uint8Array({ maxLength: 120 }).map((b) => ({ bytes: b })),
);

const arbEntry = fc.record({
  path: fc.constantFrom(...PATHS),
  content,
  encoding: fc.constantFrom(
    "none",
    "b64",
    "base64",
    " B64 ",
    "gz+b64",
    "gzip+base64",
    "gz+base64",
    "gzip",
    "gz",
    "text/plain",
    "x-unknown",
  ),
  binaryTag: fc.boolean(),
  permissions: fc.constantFrom(
    "",
    "'0640'",
    "'0600'",
    "0640",
    "0755",
    "644",
    "420",
    "'644'",
    "'0o600'",
    "' 0644 '",
    "'6_4_4'",
    "'bogus'",
    "0",
    "'0'",
    "416.9",
    "true",
    "0x1a4",
    "~",
  ),
  owner: fc.constantFrom(
    "",
    "root:root",
    `${USER.name}`,
    `${USER.name}:${GROUP.name}`,
    `:${GROUP.name}`,
    "root",
    `none:${GROUP.name}`,
    "~",
    "'-1:-1'",
  ),
  append: fc.constantFrom("", "true", "yes", "'on'", "1", "false", "no", "'nope'"),
  defer: fc.constantFrom("", "true", "'true'", "false"),
  // Mostly well formed; sometimes what cloud-init's module fails on.
  broken: fc.constantFrom(
    ...Array<string>(12).fill(""),
    "bad-b64",
    "bad-gzip",
    "unknown-user",
    "int-content",
    "no-path",
  ),
});

/** One write_files entry as YAML; the content encoded as the entry's encoding says. */
type GenEntry = typeof arbEntry extends fc.Arbitrary<infer T> ? T : never;

function entryYaml(e: GenEntry): string {
  const raw = "text" in e.content ? Buffer.from(e.content.text) : Buffer.from(e.content.bytes);
  const enc = e.encoding.trim().toLowerCase();
  let body: string;
  if (enc === "b64" || enc === "base64") body = quote(raw.toString("base64"));
  else if (enc.startsWith("gz") && enc.includes("+")) body = quote(gzipSync(raw).toString("base64"));
  else if (enc === "gzip" || enc === "gz") body = `!!binary ${quote(gzipSync(raw).toString("base64"))}`;
  else if ("bytes" in e.content || e.binaryTag) body = `!!binary ${quote(raw.toString("base64"))}`;
  else body = quote(e.content.text);
  if (e.broken === "bad-b64") return `- path: ${quote(e.path)}\n  encoding: b64\n  content: "YWJj="`;
  if (e.broken === "bad-gzip") return `- path: ${quote(e.path)}\n  encoding: gz+b64\n  content: "aGVsbG8="`;
  if (e.broken === "unknown-user") return `- path: ${quote(e.path)}\n  owner: nobody-here:root\n  content: x`;
  if (e.broken === "int-content") return `- path: ${quote(e.path)}\n  content: 42`;
  if (e.broken === "no-path") return `- content: ${body}`;
  const lines = [`- path: ${quote(e.path)}`, `  content: ${body}`];
  if (e.encoding !== "none") lines.push(`  encoding: ${quote(e.encoding)}`);
  if (e.permissions !== "") lines.push(`  permissions: ${e.permissions}`);
  if (e.owner !== "")
    lines.push(`  owner: ${e.owner.startsWith("'") || e.owner === "~" ? e.owner : quote(e.owner)}`);
  if (e.append !== "") lines.push(`  append: ${e.append}`);
  if (e.defer !== "") lines.push(`  defer: ${e.defer}`);
  return lines.join("\n");
}

test("generated cloud-configs: bootseal writes what cloud-init writes, and refuses what it fails on", {
  timeout: 300_000,
}, async () => {
  const configs = fc.sample(
    fc
      .array(arbEntry, { minLength: 1, maxLength: 5 })
      .map((entries) => `#cloud-config\nwrite_files:\n${entries.map(entryYaml).join("\n")}\n`),
    { numRuns: 60, seed: 20261202 },
  );
  const counts = await differential(configs);
  // The corpus reaches both sides: configs cloud-init writes, and configs its module fails on.
  assert.ok(counts.written >= 20 && counts.failed >= 3, JSON.stringify(counts));
});

/** Python's own answers for a list of probes (cloud-init's helpers, Python's base64 and repr). */
function python(py: string, script: string, probes: unknown[]): unknown[] {
  const r = spawnSync(py, ["-c", script], {
    input: JSON.stringify(probes),
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as unknown[];
}

test("value rules against Python: base64's lenient decoder, decode_perms, translate_bool, float repr", {
  timeout: 120_000,
}, async () => {
  const py = await cloudInitPython();
  const b64 = fc.sample(fc.string({ unit: fc.constantFrom(..."AQgw+/=!\n a"), maxLength: 14 }), {
    numRuns: 300,
    seed: 7,
  });
  const pyB64 = python(
    py,
    "import sys,json,base64\nout=[]\nfor s in json.load(sys.stdin):\n  try: out.append(base64.b64decode(s).hex())\n  except Exception: out.append(None)\nprint(json.dumps(out))",
    b64,
  );
  b64.forEach((s, i) => {
    let got: string | null;
    try {
      got = Buffer.from(pyB64decode(new TextEncoder().encode(s))).toString("hex");
    } catch {
      got = null;
    }
    assert.equal(got, pyB64[i], JSON.stringify(s));
  });

  const perms = [
    "0640",
    "640",
    "0o640",
    "0O7",
    " 0644 ",
    "6_4_4",
    "0o_7",
    "_7",
    "7_",
    "+0644",
    "-1",
    "0x1a4",
    "",
    "bogus",
    "08",
    "7777",
    "17777",
  ];
  const pyPerms = python(
    py,
    "import sys,json\nfrom cloudinit.config.cc_write_files import decode_perms\nprint(json.dumps([decode_perms(p, 0o644) & 0o7777 for p in json.load(sys.stdin)]))",
    perms,
  );
  for (const [i, p] of perms.entries()) {
    assert.equal(
      decodePerms(p, 0o644, () => {}),
      pyPerms[i],
      JSON.stringify(p),
    );
  }

  const bools = ["true", "True", " yes ", "on", "1", "0", "no", "off", "y", "", "TRUE", "nope"];
  const pyBools = python(
    py,
    "import sys,json\nfrom cloudinit.util import translate_bool\nprint(json.dumps([translate_bool(b) for b in json.load(sys.stdin)]))",
    bools,
  );
  for (const [i, b] of bools.entries()) assert.equal(translateBool(b), pyBools[i], JSON.stringify(b));

  const floats = [
    // -0 is left out: JSON carries it to Python as 0.
    ...fc
      .sample(fc.double({ noNaN: true, noDefaultInfinity: true }), { numRuns: 200, seed: 11 })
      .filter((f) => !Object.is(f, -0)),
    0.1,
    1,
    1.5,
    1e16,
    1e15,
    123456789012345680000,
    1e-4,
    1e-5,
    0.0001234,
    -2.5,
    5e-324,
  ];
  const pyFloats = python(
    py,
    "import sys,json\nprint(json.dumps([repr(float(f)) for f in json.load(sys.stdin)]))",
    floats,
  );
  for (const [i, f] of floats.entries()) assert.equal(pyFloat(f), pyFloats[i], String(f));
});

test("YAML 1.1 as PyYAML reads it: plain scalars as runcmd arguments equal Python's str() of cloud-init's load", {
  timeout: 120_000,
}, async () => {
  const py = await cloudInitPython();
  const fixed = [
    "y",
    "N",
    "yes",
    "Off",
    "~",
    "NULL",
    "0b101",
    "0o17",
    "017",
    "09",
    "0x1F",
    "1_000",
    "1:30",
    "-1:30",
    "1.5",
    ".5",
    "1.",
    "1e3",
    "1.0e3",
    "1.0e+3",
    ".inf",
    "-.Inf",
    ".NaN",
    "+12",
    "_1",
    "0x_1F",
    "190:20:30.15",
    "685.230_15e+03",
  ];
  // A lone `-` would be a nested list, not a scalar.
  const generated = fc
    .sample(fc.string({ unit: fc.constantFrom(..."0123456789_.eE+-xobyYnN"), minLength: 1, maxLength: 7 }), {
      numRuns: 300,
      seed: 5,
    })
    .filter((v) => v !== "-");
  const probes = [...fixed, ...generated].map((v) => `runcmd:\n  - - x\n    - ${v}\n`);
  const want = python(
    py,
    "import sys,json\nfrom cloudinit import util\nout=[]\nfor t in json.load(sys.stdin):\n  try: out.append(str(util.load_yaml(t)['runcmd'][0][1]))\n  except Exception: out.append(None)\nprint(json.dumps(out))",
    probes,
  );
  for (const [i, text] of probes.entries()) {
    let got: string | null;
    try {
      const command = parseCloudConfig(new TextEncoder().encode(text), {
        allowUnknownModules: false,
        warn: () => {},
      }).runcmd[0];
      got = command && "argv" in command ? (command.argv[1] ?? null) : null;
    } catch {
      got = null;
    }
    assert.equal(got, want[i], JSON.stringify(text));
  }
});
