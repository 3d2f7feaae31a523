/**
 * The pre-encrypted upload path (PUT …/config with application/sops+json|yaml) stores only
 * documents that are what they claim (issue #10 M5, L4): buildApp + inject on a MemoryStore.
 * Each bad upload is a 400 BAD_INPUT that names a place, never a value, and stores nothing.
 * Valid sops-made documents (the vectors, and ones the real sops makes now) are still 201.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { peer } from "../helpers/peers.ts";
import { VECTORS_DIR } from "../helpers/vectors.ts";
import { appConfig } from "./app-config.ts";

const identity = await generateX25519Identity();
const recipient = await identityToRecipient(identity);
const PGP_FP = "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4";
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const SECRET = "db-password=hunter2";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = { authorization: `Bearer ${ADMIN}` };
const SOPS_JSON = "application/sops+json";
const SOPS_YAML = "application/sops+yaml";

const app = buildApp({
  logger: false,
  store: new MemoryStore(),
  config: appConfig({
    creationRules: parseSopsConfig(
      `creation_rules:\n  - path_regex: ^vec/\n    pgp: ${PGP_FP}\n  - path_regex: ^prod/\n    age: ${recipient}\n`,
      "t",
    ),
    controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
  }),
});
const dir = mkdtempSync(join(tmpdir(), "bootseal-upload-"));
after(async () => {
  await app.close();
  rmSync(dir, { recursive: true, force: true });
});

const url = (m: string) => `/v1/machines/${m}/config`;
const put = (m: string, payload: string | Buffer, contentType: string, query = "") =>
  app.inject({
    method: "PUT",
    url: `${url(m)}${query}`,
    headers: { ...bearer, "content-type": contentType },
    payload,
  });
const get = (m: string) => app.inject({ method: "GET", url: url(m), headers: bearer });

/** A document the service made for the rule's age key, as JSON (binary store) or by ?format. */
async function serviceDoc(m: string, payload: string, query = ""): Promise<Record<string, unknown>> {
  const p = await put(m, payload, "text/plain", query);
  assert.equal(p.statusCode, 201, p.body);
  return JSON.parse((await get(m)).body) as Record<string, unknown>;
}

const BINARY = await serviceDoc("prod/source-bin", SECRET);
const JSON_DOC = await serviceDoc("prod/source-json", '{"a":"one","b":{"c":[1,true]}}', "?format=json");
const sopsOf = (doc: Record<string, unknown>) => doc.sops as Record<string, unknown>;
const withSops = (doc: Record<string, unknown>, change: (s: Record<string, unknown>) => void) => {
  const out = structuredClone(doc);
  change(sopsOf(out));
  return out;
};
const text = (v: unknown) => JSON.stringify(v, null, "\t");

let n = 0;
async function refused(payload: string, contentType: string, message: RegExp): Promise<void> {
  const m = `prod/bad-${n++}`;
  const res = await put(m, payload, contentType);
  assert.equal(res.statusCode, 400, `${m}: ${res.body}`);
  const body = res.json() as { code: string; message: string };
  assert.equal(body.code, "BAD_INPUT");
  assert.match(body.message, message);
  for (const leak of [SECRET, "hunter2", "garbage"]) assert.ok(!res.body.includes(leak), res.body);
  assert.equal((await get(m)).statusCode, 404, `${m}: nothing stored`);
}

test("the issue's bad uploads: 400 BAD_INPUT naming the place, nothing stored", async () => {
  await refused(text({ ...BINARY, data: SECRET }), SOPS_JSON, /value at "data" must be encrypted/);
  await refused(text({ ...BINARY, data: 12 }), SOPS_JSON, /value at "data" must be encrypted/);
  await refused(
    text({
      ...withSops(BINARY, (s) => {
        delete s.unencrypted_suffix;
        s.unencrypted_regex = ".*";
      }),
      data: SECRET,
    }),
    SOPS_JSON,
    /leaves every value unencrypted/,
  );
  await refused(text({ ...JSON_DOC, extra: "plain" }), SOPS_JSON, /value at "extra" must be encrypted/);
  await refused(text(withSops(BINARY, (s) => (s.mac = "garbage"))), SOPS_JSON, /mac is not an ENC/);
  await refused(text(withSops(BINARY, (s) => (s.mac = 5))), SOPS_JSON, /mac is not a string/);
  await refused(text(withSops(BINARY, (s) => delete s.mac)), SOPS_JSON, /no MAC/);
  await refused(
    text(withSops(BINARY, (s) => ((s.age as { enc: string }[])[0]!.enc = ""))),
    SOPS_JSON,
    /age entry 1 has no enc/,
  );
  await refused(
    text(withSops(BINARY, (s) => ((s.age as { enc: string }[])[0]!.enc = "garbage"))),
    SOPS_JSON,
    /age entry 1 has an enc that is not a age ciphertext/,
  );
  await refused(
    text({ ...BINARY, data: (BINARY.data as string).replace("AES256_GCM", "garbage") }),
    SOPS_JSON,
    /value at "data" must be encrypted but is not an ENC/,
  );
  await refused(text(withSops(BINARY, (s) => (s.shamir_threshold = 99))), SOPS_JSON, /shamir_threshold/);
  await refused(text(withSops(BINARY, (s) => (s.key_groups = [[1, 2]]))), SOPS_JSON, /key_groups/);
  await refused(text(withSops(BINARY, (s) => (s.lastmodified = "yesterday"))), SOPS_JSON, /lastmodified/);
  await refused(text(withSops(BINARY, (s) => (s.version = "x"))), SOPS_JSON, /version/);
  // A second key group of foreign keys only: its share opens for nobody on the rule.
  await refused(
    text(
      withSops(BINARY, (s) => {
        const enc = (s.age as { enc: string }[])[0]!.enc;
        s.key_groups = [{ age: s.age }, { age: [{ recipient: "age1foreign", enc }] }];
        s.shamir_threshold = 1;
        delete s.age;
      }),
    ),
    SOPS_JSON,
    /key group 2 names none of the master keys/,
  );
  // Hostile sizes: a long enc that is almost base64, deep nesting. 400, never a 500.
  await refused(
    text(
      withSops(BINARY, (s) => {
        s.kms = [
          {
            arn: "arn:aws:kms:us-east-1:1:key/k",
            created_at: s.lastmodified,
            enc: `${"A".repeat(400_000)}!`,
          },
        ];
      }),
    ),
    SOPS_JSON,
    /kms entry 1 has an enc that is not a kms ciphertext/,
  );
  const deep = `{"deep": ${"[".repeat(100_000)}"x"${"]".repeat(100_000)}, ${text(BINARY).slice(1)}`;
  await refused(deep, SOPS_JSON, /./);
  // L4: a binary document with an extra key outside the MAC.
  await refused(text({ ...BINARY, x: "" }), SOPS_JSON, /cannot be decided/);
  // The same shape as plaintext JSON: refused at publish rather than unfetchable later.
  const p = await put("prod/bad-plain-json", '{"data":"s","x":""}', "text/plain", "?format=json");
  assert.equal(p.statusCode, 400, p.body);
  assert.equal(p.json().code, "BAD_INPUT");
  // YAML: plaintext values and comments.
  assert.equal((await put("prod/source-yaml", "a: one\n", "text/plain", "?format=yaml")).statusCode, 201);
  const yamlDoc = (await get("prod/source-yaml")).body;
  await refused(`b: ${SECRET}\n${yamlDoc}`, SOPS_YAML, /value at "b" must be encrypted/);
  await refused(`# ${SECRET}\n${yamlDoc}`, SOPS_YAML, /a comment at the top level must be encrypted/);
});

test("valid documents are still 201 and stored byte for byte", async () => {
  const ok = async (m: string, body: string | Buffer, contentType: string) => {
    const res = await put(m, body, contentType);
    assert.equal(res.statusCode, 201, `${m}: ${res.body}`);
    assert.equal((await get(m)).rawPayload.toString(), body.toString());
  };
  await ok("prod/ok-bin", text(BINARY), SOPS_JSON);
  await ok("prod/ok-json", text(JSON_DOC), SOPS_JSON);
  await ok("prod/ok-empty", text({ ...JSON_DOC, empty: "", none: null }), SOPS_JSON);
  // sops-made vectors for the vec/ rule's PGP key.
  for (const [f, type] of [
    ["sops-repo/json/format.enc.json", SOPS_JSON],
    ["sops-repo/json/example.json", SOPS_JSON],
    ["sops-repo/json/static_github.json", SOPS_JSON],
    ["sops-repo/binary/example.txt", SOPS_JSON],
    ["sops-repo/yaml/format.enc.yaml", SOPS_YAML],
    ["sops-repo/yaml/example.yaml", SOPS_YAML],
    ["sops-repo/yaml/comments.enc.yaml", SOPS_YAML],
  ] as const) {
    await ok(
      `vec/${f.split("/").pop()!.replaceAll(".", "-").replaceAll("_", "-")}`,
      readFileSync(`${VECTORS_DIR}/${f}`),
      type,
    );
  }
});

test("documents the real sops makes now for the rule's age key are 201", async () => {
  const sops = peer("SOPS_BIN");
  const env = { PATH: process.env.PATH ?? "", HOME: dir };
  const make = (name: string, content: string, type: string): Buffer => {
    const file = join(dir, name);
    writeFileSync(file, content);
    return execFileSync(
      sops,
      [
        "encrypt",
        "--age",
        recipient,
        "--input-type",
        type,
        "--output-type",
        type === "binary" ? "binary" : type,
        file,
      ],
      { env, stdio: ["ignore", "pipe", "pipe"] },
    );
  };
  const cases: [string, Buffer, string][] = [
    ["binary", make("p.bin", `${SECRET}\n`, "binary"), SOPS_JSON],
    [
      "json",
      make("p.json", '{"a": "x", "b_unencrypted": 1, "c": {"d": [1, 2.5, true]}, "e": ""}', "json"),
      SOPS_JSON,
    ],
    ["yaml", make("p.yaml", "# top comment\na: x\nb:\n  - 1\n  - c: true\ne: ''\n", "yaml"), SOPS_YAML],
  ];
  for (const [label, body, type] of cases) {
    const res = await put(`prod/sops-${label}`, body, type);
    assert.equal(res.statusCode, 201, `${label}: ${res.body}`);
  }
  // Shamir: two groups, threshold 2, both the rule's key.
  const cfg = join(dir, ".sops.yaml");
  writeFileSync(
    cfg,
    `creation_rules:\n  - shamir_threshold: 2\n    key_groups:\n      - age: [${recipient}]\n      - age: [${recipient}]\n`,
  );
  writeFileSync(join(dir, "s.json"), '{"k": "v"}');
  const shamir = execFileSync(sops, ["--config", cfg, "encrypt", join(dir, "s.json")], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const res = await put("prod/sops-shamir", shamir, SOPS_JSON);
  assert.equal(res.statusCode, 201, res.body);
});

test("a mutation corpus over every metadata field and the data value: never a 5xx, never a value echoed", async () => {
  const odd: unknown[] = [null, 0, -1, 2 ** 53, 1e308, "", "x", SECRET, [], {}, [[]], [{}], true, "ENC[]"];
  const fields = [
    "mac",
    "lastmodified",
    "version",
    "age",
    "key_groups",
    "shamir_threshold",
    "unencrypted_suffix",
    "encrypted_regex",
    "mac_only_encrypted",
    "pgp",
    "kms",
    "hckms",
  ];
  let i = 0;
  const seen = new Map<number, number>();
  for (const value of odd) {
    const docs = [
      { ...BINARY, data: value },
      { ...BINARY, sops: value },
      ...fields.map((f) => withSops(BINARY, (s) => (s[f] = value))),
      withSops(BINARY, (s) => ((s.age as Record<string, unknown>[])[0]!.recipient = value)),
      withSops(BINARY, (s) => ((s.age as Record<string, unknown>[])[0]!.enc = value)),
    ];
    for (const doc of docs) {
      const m = `prod/corpus-${i++}`;
      const res = await put(m, text(doc), SOPS_JSON);
      seen.set(res.statusCode, (seen.get(res.statusCode) ?? 0) + 1);
      assert.ok(res.statusCode === 201 || res.statusCode === 400, `${m}: ${res.statusCode} ${res.body}`);
      const body = res.json() as { code?: string; message?: string };
      if (res.statusCode === 400) {
        assert.equal(body.code, "BAD_INPUT", res.body);
        assert.equal(typeof body.message, "string");
        assert.equal((await get(m)).statusCode, 404);
      }
      assert.ok(!res.body.includes("hunter2"), res.body);
    }
  }
  // Plaintext data and every broken mac are always refused (empty values and containers hold
  // nothing: sops's empty file is `"data": ""`).
  for (const value of odd) {
    const data = await put(`prod/corpus-${i++}`, text({ ...BINARY, data: value }), SOPS_JSON);
    const hollow = JSON.stringify(value).replace(/[[\]{},]|""|null/g, "") === "";
    assert.equal(data.statusCode, hollow ? 201 : 400, `data ${JSON.stringify(value)}`);
    const mac = await put(`prod/corpus-${i++}`, text(withSops(BINARY, (s) => (s.mac = value))), SOPS_JSON);
    assert.equal(mac.statusCode, 400, `mac ${JSON.stringify(value)}`);
  }
  assert.ok((seen.get(400) ?? 0) > (seen.get(201) ?? 0), JSON.stringify([...seen]));
});
