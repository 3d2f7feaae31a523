import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { parse as parseYaml } from "yaml";
import {
  findSopsConfig,
  keyIdentity,
  loadSopsConfig,
  matchCreationRule,
  parseSopsConfig,
  type SopsConfig,
} from "../../src/config/sops-config.ts";
import type { KeyEntry } from "../../src/envelope/sops/master-key.ts";
import { compileRegex } from "../../src/envelope/sops/walk.ts";
import { isBootsealError } from "../../src/errors.ts";
import { peer } from "../helpers/peers.ts";

const AGE1 = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p";
const AGE2 = "age1c3djxw8e3tkdl3kezx839xx9569tulw2mpjuhx7dk2e6k6t5dg7qa60avk";
const FP = "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4";
const ARN = "arn:aws:kms:us-east-1:111122223333:key/abcd";
const ROLE = "arn:aws:iam::111122223333:role/sops";

const CONFIG_DIR = "/srv/repo";
const cfg = (text: string): SopsConfig => parseSopsConfig(text, `${CONFIG_DIR}/.sops.yaml`);
const match = (text: string, file: string, ctx?: Record<string, string>) =>
  matchCreationRule(cfg(text), CONFIG_DIR, file, ctx ? { kmsEncryptionContext: ctx } : {});

/** An entry as plain data: kind plus its fields in order. */
const plain = (e: KeyEntry): unknown[] => [e.kind, e.enc, ...e.fields.entries()];
const groupsOf = (text: string, file = `${CONFIG_DIR}/a.yaml`): unknown[][][] =>
  (match(text, file)?.keyGroups ?? []).map((g) => g.map(plain));

function throwsCode(fn: () => unknown, code: string, message?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isBootsealError(err), String(err));
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return true;
  });
}

describe("creation rule selection", () => {
  const rules = `
creation_rules:
  - path_regex: ^prod/
    age: ${AGE1}
  - path_regex: \\.env$
    pgp: ${FP}
  - age: ${AGE2}
  - age: ${AGE1}
`;
  it("takes the first matching rule, in order; a rule without path_regex matches anything", () => {
    assert.equal(match(rules, `${CONFIG_DIR}/prod/a.env`)?.pathRegex, "^prod/");
    assert.equal(match(rules, `${CONFIG_DIR}/dev/a.env`)?.pathRegex, "\\.env$");
    const fallback = match(rules, `${CONFIG_DIR}/dev/a.yaml`);
    assert.equal(fallback?.pathRegex, null);
    assert.equal(fallback?.keyGroups[0]?.[0]?.fields.get("recipient"), AGE2);
  });

  it("matches the path relative to the config directory, or the absolute path outside it", () => {
    assert.equal(match(rules, `${CONFIG_DIR}/prod/x`)?.pathRegex, "^prod/");
    // Outside the config directory the absolute path is used, so ^prod/ does not match.
    assert.equal(match(rules, "/prod/x")?.pathRegex, null);
    // A sibling directory sharing the prefix is not "under" it.
    assert.equal(match(rules, `${CONFIG_DIR}-other/prod/x`)?.pathRegex, null);
    // Relative paths are made absolute first (against the process cwd).
    const c = cfg("creation_rules:\n  - path_regex: ^/\n    age: " + AGE1);
    assert.equal(matchCreationRule(c, "/nonexistent-dir", "rel/file")?.pathRegex, "^/");
  });

  it("path_regex is an unanchored Go RE2 search with inline flags", () => {
    const text = `creation_rules:\n  - path_regex: (?i)secret\n    age: ${AGE1}\n  - path_regex: x{\n    age: ${AGE2}\n`;
    assert.equal(match(text, `${CONFIG_DIR}/dir/My-SECRET.yaml`)?.pathRegex, "(?i)secret");
    assert.equal(match(text, `${CONFIG_DIR}/x{y`)?.pathRegex, "x{");
    throwsCode(() => match(text, `${CONFIG_DIR}/other`), "USAGE", /no matching creation rules found/);
  });

  it("no creation_rules means no config; an empty list matches nothing", () => {
    assert.equal(match("stores:\n  yaml:\n    indent: 2\n", "/x"), null);
    assert.equal(match("", "/x"), null);
    assert.equal(match("creation_rules:\n", "/x"), null);
    throwsCode(() => match("creation_rules: []\n", "/x"), "USAGE");
  });

  it("reads the selection rule, threshold, mac_only_encrypted and stores", () => {
    const c = cfg(`
stores:
  yaml: {indent: 2}
  json: {indent: 4}
creation_rules:
  - encrypted_regex: ^(data|stringData)$
    mac_only_encrypted: true
    shamir_threshold: 2
    key_groups:
      - age: [${AGE1}]
      - age: [${AGE2}]
`);
    assert.deepEqual(c.stores, { yamlIndent: 2, jsonIndent: 4 });
    const r = matchCreationRule(c, CONFIG_DIR, "/x");
    assert.deepEqual(r?.rule, { kind: "encrypted_regex", value: "^(data|stringData)$" });
    assert.equal(r?.macOnlyEncrypted, true);
    assert.equal(r?.threshold, 2);
    assert.equal(r?.keyGroups.length, 2);
    const none = match(`creation_rules:\n  - age: ${AGE1}\n`, "/x");
    assert.deepEqual([none?.rule, none?.macOnlyEncrypted, none?.threshold], [null, false, null]);
  });
});

describe("key fields", () => {
  it("shorthand: comma strings and lists, sops's kind order, duplicates kept (as sops does)", () => {
    const text = `
creation_rules:
  - hc_vault_transit_uri: https://vault:8200/v1/transit/keys/k
    azure_keyvault: https://v.vault.azure.net/keys/name/ver1, https://v.vault.azure.net/keys/n2
    gcp_kms: projects/p/locations/l/keyRings/r/cryptoKeys/ c
    kms: "${ARN}+${ROLE}, ${ARN}"
    aws_profile: dev
    pgp: ["${FP}"]
    age: "${AGE1} ,${AGE2},,${AGE1}"
`;
    assert.deepEqual(groupsOf(text), [
      [
        ["age", "", ["recipient", AGE1]],
        ["age", "", ["recipient", AGE2]],
        ["age", "", ["recipient", AGE1]],
        ["pgp", "", ["fp", FP]],
        ["kms", "", ["arn", ARN], ["role", ROLE], ["aws_profile", "dev"]],
        ["kms", "", ["arn", ARN], ["aws_profile", "dev"]],
        ["gcp_kms", "", ["resource_id", "projects/p/locations/l/keyRings/r/cryptoKeys/c"]],
        ["azure_kv", "", ["vault_url", "https://v.vault.azure.net"], ["name", "name"], ["version", "ver1"]],
        ["azure_kv", "", ["vault_url", "https://v.vault.azure.net"], ["name", "n2"], ["version", ""]],
        [
          "hc_vault",
          "",
          ["vault_address", "https://vault:8200"],
          ["engine_path", "transit"],
          ["key_name", "k"],
        ],
      ],
    ]);
  });

  it("shorthand kms takes the --encryption-context; key_groups kms carry their own", () => {
    const ctx = { "bootseal-machine": "ns/m" };
    const r = match(`creation_rules:\n  - kms: ${ARN}\n`, "/x", ctx);
    assert.deepEqual(r?.keyGroups[0]?.map(plain), [
      ["kms", "", ["arn", ARN], ["context", ctx], ["aws_profile", ""]],
    ]);
  });

  it("key_groups: every form, merge first, de-duplicated per group", () => {
    const text = `
creation_rules:
  - shamir_threshold: 1
    key_groups:
      - age: ["${AGE2},${AGE1}", "${AGE2}"]
        pgp: [${FP}]
        kms:
          - arn: ${ARN}
            role: ${ROLE}
            context: {b: "2", a: 1}
            aws_profile: prod
          - {arn: "${ARN}"}
        merge:
          - age: [${AGE1}]
            hc_vault: [https://vault.example.com:8200/v1/team/transit/keys/main]
        gcp_kms: [{resource_id: projects/p/locations/l/keyRings/r/cryptoKeys/k}]
        azure_keyvault: [{vaultUrl: "https://v.vault.azure.net", key: name, version: abc}]
        hc_vault: [https://vault.example.com:8200/v1/team/transit/keys/main]
      - age: [${AGE1}, ${AGE1}]
`;
    assert.deepEqual(groupsOf(text), [
      [
        ["age", "", ["recipient", AGE1]],
        [
          "hc_vault",
          "",
          ["vault_address", "https://vault.example.com:8200"],
          ["engine_path", "team/transit"],
          ["key_name", "main"],
        ],
        ["age", "", ["recipient", AGE2]],
        ["pgp", "", ["fp", FP]],
        ["kms", "", ["arn", ARN], ["role", ROLE], ["context", { b: "2", a: "1" }], ["aws_profile", "prod"]],
        ["kms", "", ["arn", ARN], ["aws_profile", ""]],
        ["gcp_kms", "", ["resource_id", "projects/p/locations/l/keyRings/r/cryptoKeys/k"]],
        ["azure_kv", "", ["vault_url", "https://v.vault.azure.net"], ["name", "name"], ["version", "abc"]],
      ],
      [["age", "", ["recipient", AGE1]]],
    ]);
  });

  it("YAML aliases and go-yaml's YAML 1.1 booleans are read as sops reads them", () => {
    const r = match(`keys: &k ${AGE1}\ncreation_rules:\n  - age: *k\n    mac_only_encrypted: yes\n`, "/x");
    assert.equal(r?.keyGroups[0]?.[0]?.fields.get("recipient"), AGE1);
    assert.equal(r?.macOnlyEncrypted, true);
  });

  it("keyIdentity gives sops's identity strings", () => {
    const ids = (text: string) => (match(text, "/x")?.keyGroups[0] ?? []).map(keyIdentity);
    assert.deepEqual(
      ids(`
creation_rules:
  - key_groups:
      - kms:
          - {arn: "${ARN}"}
          - {arn: "${ARN}", role: "${ROLE}"}
          - {arn: "${ARN}", aws_profile: p}
          - {arn: "${ARN}", context: {z: "1", a: "2"}}
          - {arn: "${ARN}", role: r, context: {k: v}, aws_profile: p}
        age: [${AGE1}]
        pgp: [${FP}]
        gcp_kms: [{resource_id: projects/p/locations/l/keyRings/r/cryptoKeys/k}]
        azure_keyvault: [{vaultUrl: "https://v.vault.azure.net", key: n, version: "1"}]
        hc_vault: ["https://h:8200/v1/a/b/keys/k"]
`),
      [
        AGE1,
        FP,
        ARN,
        `${ARN}+${ROLE}`,
        `${ARN}||p`,
        `${ARN}|a:2,z:1`,
        `${ARN}+r|k:v|p`,
        "projects/p/locations/l/keyRings/r/cryptoKeys/k",
        "https://v.vault.azure.net/keys/n/1",
        "https://h:8200/v1/a/b/keys/k",
      ],
    );
  });
});

describe("config errors", () => {
  const cases: [string, string, string, RegExp?][] = [
    [
      "two selection fields",
      `creation_rules:\n  - encrypted_regex: a\n    unencrypted_suffix: _u\n    age: ${AGE1}\n`,
      "BAD_INPUT",
      /Cannot use more than one of/,
    ],
    ["invalid regex", "creation_rules:\n  - path_regex: '(a'\n", "BAD_INPUT", /path_regex/],
    ["look-ahead (Go refuses it)", "creation_rules:\n  - path_regex: 'a(?=b)'\n", "BAD_INPUT"],
    ["back-reference", "creation_rules:\n  - path_regex: '(a)\\1'\n", "BAD_INPUT"],
    ["\\C (Go refuses it)", "creation_rules:\n  - path_regex: 'a\\C'\n", "BAD_INPUT"],
    ["bad YAML", "creation_rules: [\n", "BAD_INPUT"],
    ["duplicate key", "creation_rules: []\ncreation_rules: []\n", "BAD_INPUT"],
    ["creation_rules not a list", "creation_rules: {a: 1}\n", "BAD_INPUT"],
    ["unknown age recipient", "creation_rules:\n  - age: nope\n", "BAD_INPUT"],
    ["bad azure URL", "creation_rules:\n  - azure_keyvault: http://v/keys/n\n", "BAD_INPUT"],
    [
      "prefixed Vault URL",
      "creation_rules:\n  - hc_vault_transit_uri: https://h/proxy/v1/transit/keys/k\n",
      "BAD_INPUT",
      /prefixed/,
    ],
    [
      "Vault URL without scheme",
      "creation_rules:\n  - hc_vault_transit_uri: h/v1/transit/keys/k\n",
      "BAD_INPUT",
    ],
    [
      "Vault URL with credentials (the flag parser's rule: one parser per kind)",
      "creation_rules:\n  - key_groups:\n    - hc_vault: ['https://u:p@h/v1/transit/keys/k']\n",
      "BAD_INPUT",
      /credentials/,
    ],
    [
      "kms context not a mapping",
      "creation_rules:\n  - key_groups:\n    - kms: [{arn: a, context: x}]\n",
      "BAD_INPUT",
      /kms context must be a mapping/,
    ],
    ["non-string in key list", "creation_rules:\n  - age: [1]\n", "BAD_INPUT"],
    [
      "kms context null",
      `creation_rules:\n  - key_groups:\n    - kms: [{arn: a, context: {k: null}}]\n`,
      "BAD_INPUT",
    ],
    ["bad bool", "creation_rules:\n  - mac_only_encrypted: maybe\n", "BAD_INPUT"],
    [
      "hckms id without a key uuid",
      "creation_rules:\n  - hckms: [tr-west-1]\n",
      "BAD_INPUT",
      /invalid key ID format: expected 'region:key-uuid'/,
    ],
  ];
  for (const [label, text, code, message] of cases) {
    it(`${label} -> ${code}`, () => throwsCode(() => cfg(text), code, message));
  }

  it("loadSopsConfig reports a missing file as IO_ERROR", () => {
    throwsCode(() => loadSopsConfig("/nonexistent/.sops.yaml"), "IO_ERROR");
  });
});

describe("Go RE2 semantics of path_regex", () => {
  const t = (pattern: string, input: string): boolean => compileRegex(pattern).test(input);
  it("keeps Go semantics where JS differs", () => {
    assert.equal(t("a$", "a\n"), false, "$ is end of text without (?m)");
    assert.equal(t("(?m)a$", "a\nb"), true);
    assert.equal(t("a.b", "a\rb"), true, ". matches \\r in Go");
    assert.equal(t("a.b", "a\nb"), false);
    assert.equal(t("(?s)a.b", "a\nb"), true);
    assert.equal(t("a(?i)b|c", "C"), true, "the flag lasts across |");
    assert.equal(t("a(?i)b|c", "AB"), false, "but not before it");
    assert.equal(t("(?i:x)y", "XY"), false);
    assert.equal(t("(?P<env>prod|dev)/", "dev/x"), true);
    assert.equal(t("\\Qa.b\\E", "axb"), false);
    assert.equal(t("[[:digit:]]{2}\\.yaml", "v12.yaml"), true);
    assert.equal(t("\\s", "\u00a0"), false, "\\s is ASCII in Go");
    assert.equal(t("\\pL+\\.", "é."), true);
    assert.equal(t("a]}", "a]}"), true);
    assert.equal(t("\\x{41}\\101", "AA"), true);
  });
});

describe("findSopsConfig", () => {
  const root = mkdtempSync(join(tmpdir(), "bootseal-sops-config-"));
  after(() => rmSync(root, { recursive: true, force: true }));

  it("searches the cwd and its parents; ignores .sops.yml with a warning", () => {
    const deep = join(root, "a", "b", "c");
    mkdirSync(deep, { recursive: true });
    writeFileSync(join(root, "a", ".sops.yaml"), "creation_rules: []\n");
    writeFileSync(join(root, "a", "b", ".sops.yml"), "creation_rules: []\n");
    const found = findSopsConfig(deep, undefined, {});
    assert.equal(found?.path, join(root, "a", ".sops.yaml"));
    assert.match(found?.warning ?? "", /\.sops\.yml/);
    assert.deepEqual(findSopsConfig(join(root, "a"), undefined, {}), { path: join(root, "a", ".sops.yaml") });
  });

  it("--config wins over SOPS_CONFIG, which wins over the search (no search, no existence check)", () => {
    const env = { SOPS_CONFIG: "env.yaml" };
    assert.equal(findSopsConfig(root, "flag.yaml", env)?.path, join(root, "flag.yaml"));
    assert.equal(findSopsConfig(root, undefined, env)?.path, join(root, "env.yaml"));
  });

  it("stops after 100 levels, and returns null when nothing is found", (t) => {
    if (existsSync(join(tmpdir(), ".sops.yaml")) || existsSync("/.sops.yaml")) {
      t.skip("a .sops.yaml above the temp directory");
      return;
    }
    const base = join(root, "deep");
    let dir = base;
    for (let i = 0; i < 100; i++) dir = join(dir, "d");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(base, ".sops.yaml"), "creation_rules: []\n");
    // base is 100 levels above dir: beyond sops's reach. One level deeper in base/d is within it.
    assert.equal(findSopsConfig(dir, undefined, {}), null);
    writeFileSync(join(base, "d", ".sops.yaml"), "creation_rules: []\n");
    assert.equal(findSopsConfig(dir, undefined, {})?.path, join(base, "d", ".sops.yaml"));
    assert.equal(findSopsConfig(join(root, "nothing-here-" + "x").replace(/x$/, ""), undefined, {}), null);
  });
});

describe("cross-check with the real sops", () => {
  const sops = peer("SOPS_BIN");
  const keygen = peer("AGE_KEYGEN_BIN");
  const root = mkdtempSync(join(tmpdir(), "bootseal-sops-xcheck-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const recipients = [1, 2, 3].map((i) => {
    const file = join(root, `key${i}.txt`);
    execFileSync(keygen, ["-o", file], { stdio: "ignore" });
    return execFileSync(keygen, ["-y", file]).toString().trim();
  });
  const [R1, R2, R3] = recipients as [string, string, string];

  /** Encrypt `file` with sops in `dir` and read back the recipients per group and the threshold. */
  function sopsGroups(
    dir: string,
    file: string,
  ): { groups: string[][]; threshold: unknown; meta: Record<string, unknown> } {
    const path = join(dir, file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, "secret: value\n");
    const env = { PATH: process.env.PATH ?? "", HOME: root };
    const out = execFileSync(sops, ["encrypt", file], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
    const meta = (parseYaml(out.toString()) as { sops: Record<string, unknown> }).sops;
    const ages = (g: Record<string, unknown>): string[] =>
      ((g.age as { recipient: string }[] | undefined) ?? []).map((a) => a.recipient);
    const groups = meta.key_groups ? (meta.key_groups as Record<string, unknown>[]).map(ages) : [ages(meta)];
    return { groups, threshold: meta.shamir_threshold, meta };
  }

  const configs: [string, string, string][] = [
    ["shorthand with duplicates", `creation_rules:\n  - age: "${R1}, ${R2},${R1}"\n`, "x.yaml"],
    [
      "rule order and relative paths",
      `creation_rules:\n  - path_regex: ^other/\n    age: ${R3}\n  - path_regex: sub/.*\\.yaml$\n    age: [${R1}, ${R2}]\n  - age: ${R3}\n`,
      "sub/x.yaml",
    ],
    [
      "inline flag",
      `creation_rules:\n  - path_regex: (?i)^SECRETS/\n    age: ${R2}\n  - age: ${R3}\n`,
      "secrets/a.yaml",
    ],
    [
      "key groups, merge, de-dup, threshold",
      `creation_rules:\n  - shamir_threshold: 2\n    key_groups:\n      - age: ["${R1},${R2}", ${R1}]\n        merge:\n          - age: [${R3}]\n      - age: [${R2}, ${R2}]\n      - age: [${R3}]\n`,
      "a/b.yaml",
    ],
    [
      "selection rule and mac_only_encrypted",
      `creation_rules:\n  - encrypted_regex: ^secret$\n    mac_only_encrypted: true\n    age: ${R1}\n`,
      "c.yaml",
    ],
  ];
  configs.forEach(([label, text, file], i) => {
    it(label, () => {
      const dir = join(root, `case${i}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, ".sops.yaml"), text);
      const expected = sopsGroups(dir, file);
      const location = findSopsConfig(join(dir, dirname(file)), undefined, {});
      assert.equal(location?.path, join(dir, ".sops.yaml"));
      const rule = matchCreationRule(loadSopsConfig(location?.path ?? ""), dir, join(dir, file));
      assert.deepEqual(
        rule?.keyGroups.map((g) => g.map((e) => e.fields.get("recipient"))),
        expected.groups,
      );
      assert.equal(rule?.threshold ?? undefined, expected.threshold);
      if (rule?.rule) assert.equal(expected.meta[rule.rule.kind], rule.rule.value);
      assert.equal(rule?.macOnlyEncrypted ?? false, expected.meta.mac_only_encrypted === true);
    });
  });
});
