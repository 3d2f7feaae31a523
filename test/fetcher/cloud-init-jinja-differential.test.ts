/**
 * Differential test of the `## template: jinja` renderer against cloud-init 22.4.2 itself:
 * the same user-data and instance data go through cloud-init's own `devel render`
 * (test/fixtures/cloud-config/jinja_render_oracle.py) and through bootseal's renderer (the
 * instance data under a temporary root's /run/cloud-init). Where cloud-init renders, bootseal
 * renders the same text or refuses one of the constructs it documents as refused (a mapping,
 * list or bytes rendered as Python's repr, a Python attribute); where cloud-init fails, bootseal
 * refuses. No expected text is written down here.
 *
 * The corpus: Cluster API's shapes (the kubeadm provider's join config with the infrastructure
 * providers' `{{ ds.meta_data.local_hostname }}`, `{{ v1.instance_id }}` …, over an instance
 * data shaped as cloud-init writes it) and generated instance data (keys with `-`, `.` and other
 * Jinja operators, `v<N>` maps, nested maps, big integers, floats, booleans, null, lists) with
 * generated templates (names from the keys and their `_` aliases, missing names, lookups into
 * missing ones, white space inside `{{ }}`, CRLF line ends).
 */
import assert from "node:assert/strict";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { isBootsealError } from "../../src/errors.ts";
import { renderJinjaUserData } from "../../src/fetcher/payloads/cloud-init-jinja.ts";
import { cloudInitPython, type Rendered, renderOracle } from "./cloud-init-oracle.ts";
import { REPO, tempDir } from "./helpers.ts";

interface Case {
  readonly userData: string;
  readonly instanceData: string;
}

/** What bootseal may refuse although cloud-init renders it (docs/fetcher.md). */
const DOCUMENTED_REFUSALS = /is a (dict|list|bytes): Python's repr|is a Python attribute of/;

async function renderBootseal(c: Case, root: string): Promise<Rendered> {
  await mkdir(join(root, "run/cloud-init"), { recursive: true });
  await writeFile(join(root, "run/cloud-init/instance-data-sensitive.json"), c.instanceData);
  try {
    const out = await renderJinjaUserData(new TextEncoder().encode(c.userData), root, () => {});
    return { ok: true, text: new TextDecoder().decode(out) };
  } catch (err) {
    if (isBootsealError(err)) return { ok: false, error: err.message };
    throw err;
  }
}

/** Compares every case; returns how many rendered equal, were refused as documented, failed on both. */
async function differential(
  cases: readonly Case[],
): Promise<{ same: number; refused: number; failed: number }> {
  const dir = await tempDir("jinja-diff");
  try {
    const want = await renderOracle(await cloudInitPython(), cases, dir.path);
    const counts = { same: 0, refused: 0, failed: 0 };
    for (const [i, c] of cases.entries()) {
      const got = await renderBootseal(c, join(dir.path, `root-${i}`));
      const expected = want[i] as Rendered;
      const where = `case ${i}\n${c.userData}\n${c.instanceData}`;
      if (!expected.ok) {
        assert.equal(got.ok, false, `cloud-init failed (${expected.error}); bootseal must refuse: ${where}`);
        counts.failed++;
      } else if (!got.ok) {
        assert.match(got.error, DOCUMENTED_REFUSALS, `cloud-init rendered it; bootseal refused: ${where}`);
        counts.refused++;
      } else {
        assert.equal(got.text, expected.text, where);
        counts.same++;
      }
    }
    return counts;
  } finally {
    await dir.remove();
  }
}

/** An instance-data.json as cloud-init 22.4 writes it on EC2 (abridged, values made up). */
const EC2_INSTANCE_DATA = JSON.stringify({
  _beta_keys: ["subplatform"],
  availability_zone: "us-east-1a",
  base64_encoded_keys: [],
  ds: {
    _doc: "EXPERIMENTAL: The structure and format of content scoped under the 'ds' key may change.",
    dynamic: { "instance-identity": { document: { accountId: "123456789012", region: "us-east-1" } } },
    meta_data: {
      "ami-id": "ami-0abc",
      hostname: "ip-10-0-1-23.ec2.internal",
      "instance-id": "i-0123456789abcdef0",
      "instance-type": "m5.large",
      "local-hostname": "ip-10-0-1-23.ec2.internal",
      "local-ipv4": "10.0.1.23",
      placement: { "availability-zone": "us-east-1a", region: "us-east-1" },
    },
  },
  instance_id: "i-0123456789abcdef0",
  local_hostname: "ip-10-0-1-23",
  merged_cfg: "redacted for non-root user",
  sensitive_keys: ["merged_cfg"],
  v1: {
    _beta_keys: ["subplatform"],
    availability_zone: "us-east-1a",
    "availability-zone": "us-east-1a",
    cloud_name: "aws",
    "cloud-name": "aws",
    distro: "debian",
    instance_id: "i-0123456789abcdef0",
    "instance-id": "i-0123456789abcdef0",
    local_hostname: "ip-10-0-1-23",
    "local-hostname": "ip-10-0-1-23",
    platform: "ec2",
    public_ssh_keys: [],
    region: "us-east-1",
    subplatform: "metadata (http://169.254.169.254)",
  },
});

test("Cluster API's shapes: node names and provider ids rendered as cloud-init 22.4.2 renders them", {
  timeout: 120_000,
}, async () => {
  const join_ = await readFile(join(REPO, "test/fixtures/cloud-config/kubeadm-join.yaml"), "utf8");
  const names = [
    "'{{ ds.meta_data.local_hostname }}'",
    "'{{ v1.local_hostname }}'",
    "{{ ds.meta_data.hostname }}",
    "'{{ local_hostname }}'",
    '"{{ds.meta_data.local_hostname}}.cluster.local"',
  ];
  const withName = (name: string): string =>
    join_.replace(/( *)(discovery:)/, `$1nodeRegistration:\n$1  name: ${name}\n$1$2`);
  const cases = names.map((n) => ({ userData: withName(n), instanceData: EC2_INSTANCE_DATA }));
  assert.ok(
    cases.every((c) => c.userData.includes("nodeRegistration")),
    "the fixture has a join configuration",
  );
  cases.push({
    userData:
      "## template: jinja\n#cloud-config\nruncmd:\n  - echo provider-id=aws:///{{ v1.availability_zone }}/{{ v1.instance_id }}\n" +
      "  - echo {{ ds.meta_data.local_ipv4 }} {{ ds.meta_data.placement.availability_zone }} {{ v1.cloud_name }}\n" +
      "  - echo {{ ds.dynamic.instance_identity.document.region }} {{ ds.meta_data.no_such_key }}\n",
    instanceData: EC2_INSTANCE_DATA,
  });
  assert.deepEqual(await differential(cases), { same: names.length + 1, refused: 0, failed: 0 });
});

test("base64-encoded-keys decoded as cloud-init's converter does (including its `-` spelling rule)", {
  timeout: 60_000,
}, async () => {
  const b64 = (s: string | Buffer): string => Buffer.from(s).toString("base64");
  const instanceData = JSON.stringify({
    "base64-encoded-keys": ["ds/user_data", "ds/b-c", "top", "raw"],
    ds: { user_data: b64("héllo wörld"), "b-c": b64("not decoded") },
    top: b64("top level"),
    raw: b64(Buffer.from([0xff, 0xfe])),
  });
  const plain =
    "## template: jinja\n#cloud-config\na: {{ ds.user_data }} {{ ds.b_c }} {{ top }} {{ base64_encoded_keys }}\n";
  const counts = await differential([
    { userData: plain.replace(" {{ base64_encoded_keys }}", ""), instanceData },
    { userData: "## template: jinja\n#cloud-config\na: {{ raw }}\n", instanceData },
    { userData: plain, instanceData },
  ]);
  assert.deepEqual(counts, { same: 1, refused: 2, failed: 0 });
});

const KEY_CHARS = [..."abv12_-./:+[]= "];
const key = fc.oneof(
  fc.constantFrom(
    "v1",
    "v2",
    "v10",
    "ds",
    "meta_data",
    "local-hostname",
    "local_hostname",
    "a-b",
    "a_b",
    "a.b",
  ),
  fc.string({ unit: fc.constantFrom(...KEY_CHARS), minLength: 1, maxLength: 5 }),
);

/** A JSON text with Python's number types: `1.0` a float, integers beyond 2^53 exact. */
type Json =
  | string
  | boolean
  | null
  | { int: bigint }
  | { float: number }
  | Json[]
  | { map: [string, Json][] };

const leaf: fc.Arbitrary<Json> = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom("ip-10-0-0-1.ec2.internal", "i-0abc", "CI_MISSING_JINJA_VAR/x", "{{ not rendered }}"),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map((int) => ({ int })),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((float) => ({ float })),
  fc.constantFrom(1.0, 0.1, 1e16, 1e-5, 123456789.0).map((float) => ({ float })),
  fc.boolean(),
  fc.constant(null),
);

const tree = fc.letrec<{ value: Json; map: Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    leaf,
    tie("map"),
    fc.array(leaf, { maxLength: 2 }),
  ),
  map: fc.array(fc.tuple(key, tie("value")), { maxLength: 5 }).map((map) => ({ map })),
}));

function toJson(v: Json): string {
  if (v === null || typeof v === "string" || typeof v === "boolean") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(toJson).join(", ")}]`;
  if ("int" in v) return v.int.toString();
  if ("float" in v) {
    const text = Object.is(v.float, -0) ? "-0.0" : String(v.float);
    return /[.e]/.test(text) ? text : `${text}.0`;
  }
  return `{${v.map.map(([k, x]) => `${JSON.stringify(k)}: ${toJson(x)}`).join(", ")}}`;
}

/** A key's spellings a template may use: as it is, and with operators (each, or each run) as `_`. */
function spellings(k: string): string[] {
  const all = [k, k.replace(/[-./:+[\]=]/g, "_"), k.replace(/[-./:+[\]=]+/g, "_")];
  return [...new Set(all)].filter(
    (n) =>
      /^[A-Za-z_][A-Za-z0-9_]*$/.test(n) && !["true", "false", "none", "in", "is", "if", "or"].includes(n),
  );
}

function isMap(v: Json): v is { map: [string, Json][] } {
  return v !== null && typeof v === "object" && !Array.isArray(v) && "map" in v;
}

/** Every lookup path through the data's maps to a scalar, in every spelling of its keys. */
function pathsOf(v: Json, prefix: string[], into: string[][]): string[][] {
  if (isMap(v)) {
    for (const [k, x] of v.map) {
      for (const n of spellings(k)) {
        if (isMap(x)) pathsOf(x, [...prefix, n], into);
        else if (!Array.isArray(x)) into.push([...prefix, n]);
      }
    }
  }
  return into;
}

const BLANK = fc.constantFrom("", " ", "  ", "\t", "\n ");

const generated = tree.map.chain((data) => {
  const paths = pathsOf(data, [], []);
  const nested = paths.filter((p) => p.length > 1).map((p) => p.slice(1));
  const names = [...new Set(["missing", "v1", "ds", "local_hostname", ...paths.flat()])];
  const path = fc.oneof(
    { arbitrary: paths.length > 0 ? fc.constantFrom(...paths) : fc.constant(["missing"]), weight: 5 },
    // a nested path without its first name: found at the top only through a `v<N>` parent
    { arbitrary: nested.length > 0 ? fc.constantFrom(...nested) : fc.constant(["v1"]), weight: 2 },
    // present or missing names, and lookups into missing ones (cloud-init fails on those)
    { arbitrary: fc.array(fc.constantFrom(...names), { minLength: 1, maxLength: 3 }), weight: 1 },
  );
  const variable = fc
    .tuple(BLANK, path, fc.array(BLANK, { minLength: 4, maxLength: 4 }), BLANK)
    .map(
      ([before, p, gaps, after]) =>
        `{{${before}${p.map((n, i) => n + (gaps[i] as string)).join(".")}${after}}}`,
    );
  const line = fc
    .tuple(
      fc.constantFrom("k: ", "- ", "x: '", ""),
      fc.array(fc.oneof(variable, fc.constantFrom("a", " ", "-", "}")), { maxLength: 3 }),
    )
    .map(([lead, parts]) => lead + parts.join(""));
  return fc
    .tuple(fc.array(line, { minLength: 1, maxLength: 3 }), fc.constantFrom("\n", "\r\n"), fc.boolean())
    .map(([lines, eol, trailing]) => ({
      userData: `## template: jinja${eol}#cloud-config${eol}${lines.join(eol)}${trailing ? eol : ""}`,
      instanceData: toJson(data),
    }));
});

test("generated instance data and templates render as cloud-init 22.4.2 renders them", {
  timeout: 180_000,
}, async () => {
  const cases = fc.sample(generated, { numRuns: 400, seed: 29 });
  const counts = await differential(cases);
  assert.equal(counts.same + counts.refused + counts.failed, cases.length);
  assert.ok(counts.same >= 250, `most cases compared text for text: ${JSON.stringify(counts)}`);
  assert.ok(
    counts.failed >= 10,
    `some lookups into undefined variables (cloud-init fails): ${JSON.stringify(counts)}`,
  );
});
