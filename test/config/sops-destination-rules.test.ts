/** `.sops.yaml` destination_rules as sops's config.parseDestinationRuleForFile reads them. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { matchDestinationRule, parseSopsConfig } from "../../src/config/sops-config.ts";

const parse = (text: string) => parseSopsConfig(text, "/c/.sops.yaml");

test("destinations are normalised as sops's constructors do", () => {
  const config = parse(
    [
      "destination_rules:",
      "  - path_regex: s3/",
      "    s3_bucket: b",
      "    s3_prefix: p-",
      "  - path_regex: gcs/",
      "    gcs_bucket: g",
      "  - path_regex: v/",
      "    vault_path: a/b",
      "    vault_kv_version: 7",
      "  - vault_path: c/",
      "    vault_kv_mount_name: kv",
      "    vault_kv_version: 1",
      "    omit_extensions: true",
    ].join("\n"),
  );
  assert.deepEqual(
    config.destinationRules.map((r) => r.destination),
    [
      { kind: "s3", bucket: "b", prefix: "p-" },
      { kind: "gcs", bucket: "g", prefix: "" },
      { kind: "vault", address: "", path: "a/b/", mount: "secret/", kvVersion: 2 },
      { kind: "vault", address: "", path: "c/", mount: "kv/", kvVersion: 1 },
    ],
  );
  assert.deepEqual(
    config.destinationRules.map((r) => r.omitExtensions),
    [false, false, false, true],
  );
  assert.equal(config.creationRules, null, "no creation_rules: as if there were none");
});

test("the first rule whose path_regex matches the path as given wins; none is sops's error", () => {
  const config = parse(
    "destination_rules:\n  - path_regex: ^a/\n    s3_bucket: one\n  - path_regex: b\n    s3_bucket: two\n",
  );
  assert.deepEqual(matchDestinationRule(config, "a/x.yaml").destination, {
    kind: "s3",
    bucket: "one",
    prefix: "",
  });
  assert.deepEqual(matchDestinationRule(config, "/abs/b.yaml").destination, {
    kind: "s3",
    bucket: "two",
    prefix: "",
  });
  // Unanchored and on the raw path: "./a/x.yaml" does not start with "a/".
  assert.throws(
    () => matchDestinationRule(config, "./a/x.yaml"),
    (err: Error & { code?: string }) =>
      err.code === "USAGE" && err.message === "error loading config: no matching destination found in config",
  );
});

test("a rule without a destination matches (publish then refuses the file)", () => {
  const config = parse("destination_rules:\n  - path_regex: x\n");
  assert.equal(matchDestinationRule(config, "x.yaml").destination, null);
});

test("two destinations in one rule, or a bad path_regex, are refused when the file is read", () => {
  assert.throws(
    () => parse("destination_rules:\n  - s3_bucket: a\n    gcs_bucket: b\n"),
    /more than one destinations were found in a single destination rule/,
  );
  assert.throws(() => parse("destination_rules:\n  - path_regex: '('\n    s3_bucket: a\n"), /path_regex/);
  assert.throws(() => parse("destination_rules: 3\n"), /destination_rules must be a list/);
});
