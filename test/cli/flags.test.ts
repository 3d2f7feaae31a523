/** The flag tables: parsing with env fallbacks and defaults, generated help, summaries, docs/cli.md. */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import type { Command } from "../../src/cli/command.ts";
import { COMMANDS } from "../../src/cli/command-registry.ts";
import { cliDocSections, replaceGenerated } from "../../src/cli/docs.ts";
import { type CommandSpec, helpText, parseFlags, parseOptions, usageLines } from "../../src/cli/flags.ts";
import { KEY_FLAGS } from "../../src/cli/key-flags.ts";
import { help, main } from "../../src/cli/main.ts";
import { isBootsealError } from "../../src/errors.ts";
import { type AgeKey, ageKey, encrypt, REPO, tempDir } from "../fetcher/helpers.ts";

const SPEC = {
  name: "demo",
  summary: "a demo command",
  operands: "[FILE]",
  flags: [
    { name: "server", type: "string", env: "DEMO_SERVER", value: "URL", required: true, help: "where" },
    { name: "mode", short: "m", type: "string", default: "fast", value: "M", help: "how" },
    { name: "verbose", short: "v", type: "boolean", env: "DEMO_VERBOSE", help: "say more" },
    { name: "tag", type: "string", multiple: true, env: "DEMO_TAG", value: "T", help: "a tag" },
  ],
  notes: ["FILE: anything"],
} as const satisfies CommandSpec;

let commands: Command[];
let dir: { path: string; remove: () => Promise<void> };
let r1: AgeKey;
let r2: AgeKey;

before(async () => {
  commands = await Promise.all(COMMANDS.map((c) => c.load()));
  dir = await tempDir("flags");
  r1 = await ageKey(dir.path, "r1");
  r2 = await ageKey(dir.path, "r2");
});
after(async () => {
  await dir.remove();
});

function usageError(re: RegExp) {
  return (err: unknown) => isBootsealError(err) && err.code === "USAGE" && re.test(err.message);
}

test("the flag wins over its environment variable, which wins over the default", () => {
  const fromFlag = parseFlags(SPEC, ["--server", "a", "-m", "slow", "x"], { DEMO_SERVER: "b" });
  assert.equal(fromFlag.values.server, "a");
  assert.equal(fromFlag.values.mode, "slow");
  assert.deepEqual(fromFlag.positionals, ["x"]);
  const fromEnv = parseFlags(SPEC, [], { DEMO_SERVER: "b", DEMO_VERBOSE: "true", DEMO_TAG: "t1" });
  assert.equal(fromEnv.values.server, "b");
  assert.equal(fromEnv.values.verbose, true);
  assert.deepEqual(fromEnv.values.tag, ["t1"]);
  assert.equal(fromEnv.values.mode, "fast", "the default fills what neither gives");
  assert.deepEqual([...fromEnv.given].sort(), ["server", "tag", "verbose"], "a default is not 'given'");
  assert.deepEqual(parseFlags(SPEC, ["--server", "a", "--tag", "1", "--tag", "2"], {}).values.tag, [
    "1",
    "2",
  ]);
});

test("a missing required flag, a bad boolean variable and an unknown flag are usage errors", () => {
  assert.throws(() => parseFlags(SPEC, [], {}), usageError(/^demo needs --server URL \(or DEMO_SERVER\)$/));
  assert.throws(() => parseFlags(SPEC, ["--server", ""], {}), usageError(/needs --server/));
  assert.throws(
    () => parseFlags(SPEC, ["--server", "a"], { DEMO_VERBOSE: "yes" }),
    usageError(/DEMO_VERBOSE wants true or false/),
  );
  assert.throws(
    () => parseFlags(SPEC, ["--server", "a", "--nope"], {}),
    (err: unknown) => (err as { code?: string }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION",
  );
  assert.throws(() => parseOptions([...SPEC.flags, SPEC.flags[0]]), /--server is declared twice/);
});

test("usage and help are generated from the table, in sops's style", () => {
  assert.deepEqual(usageLines(SPEC), ["bootseal demo --server URL [flags] [FILE]"]);
  const text = helpText(SPEC);
  assert.match(text, /^usage: bootseal demo --server URL \[flags\] \[FILE\]\n\na demo command\n\nflags:\n/);
  assert.match(text, /--server URL {4,}where \[\$DEMO_SERVER\]\n/);
  assert.match(text, /--mode M, -m M {3,}how \(default: fast\)\n/);
  assert.match(text, /--verbose, -v {3,}say more \[\$DEMO_VERBOSE\]\n/);
  assert.match(text, /--tag T {3,}a tag \(may be repeated\) \[\$DEMO_TAG\]\n/);
  assert.match(text, /\n\nFILE: anything\n$/);
});

test("every command's --help is its table's help, naming each flag and environment variable", async () => {
  for (const c of commands) {
    const out = new PassThrough();
    let text = "";
    out.on("data", (b: Buffer) => {
      text += b.toString();
    });
    const io = { stdout: out, stderr: new PassThrough(), stdin: new PassThrough(), env: {}, cwd: REPO };
    assert.equal(await main([c.spec.name, "--help"], io), 0);
    assert.equal(text, helpText(c.spec), c.spec.name);
    for (const f of c.spec.flags) {
      assert.ok(text.includes(`--${f.name}`), `${c.spec.name} --${f.name}`);
      if (f.env) assert.ok(text.includes(`[$${f.env}]`), `${c.spec.name} ${f.env}`);
      assert.ok(f.help.trim() !== "", `${c.spec.name} --${f.name} has help`);
    }
    const shorts = c.spec.flags.flatMap((f) => ("short" in f && f.short ? [f.short] : []));
    assert.equal(new Set(shorts).size, shorts.length, `${c.spec.name}: short aliases are unique`);
  }
});

test("bootseal --help shows each command's own summary (one source)", async () => {
  const text = await help();
  assert.deepEqual(
    commands.map((c) => c.spec.name),
    COMMANDS.map((c) => c.name),
  );
  const lines = text.split("\n");
  for (const c of commands) {
    const line = lines.find((l) => l.startsWith(`  ${c.spec.name} `));
    assert.equal(line?.slice(2).replace(/^\S+ +/, ""), c.spec.summary, c.spec.name);
  }
});

test("the flags keep sops's names, aliases and variables", () => {
  const byName = (name: string) => commands.find((c) => c.spec.name === name)?.spec.flags ?? [];
  const encryptFlags = byName("encrypt");
  for (const k of KEY_FLAGS) {
    const f = encryptFlags.find((x) => x.name === k.flag);
    assert.equal(f?.env, k.env, k.flag);
    assert.equal(f && "short" in f ? f.short : undefined, k.short, k.flag);
    const rotate = byName("rotate");
    assert.ok(rotate.some((x) => x.name === `add-${k.flag}` && !x.env));
    assert.ok(rotate.some((x) => x.name === `rm-${k.flag}` && !x.env));
  }
  const decrypt = commands.find((c) => c.spec.name === "decrypt")?.spec as CommandSpec;
  const order = parseFlags(decrypt, [], { SOPS_DECRYPTION_ORDER: "age,pgp" });
  assert.equal((order.values as Record<string, unknown>)["decryption-order"], "age,pgp");
  const rotateSpec = commands.find((c) => c.spec.name === "rotate")?.spec as CommandSpec;
  const rotate = parseFlags(rotateSpec, ["f.yaml"], {});
  assert.equal((rotate.values as Record<string, unknown>).prefix, "configs/");
  assert.ok(!rotate.given.has("prefix"), "so `rotate FILE` does not take the default for a --store flag");
});

test("a boolean flag takes =true and =false, as sops's flags do", () => {
  const decrypt = commands.find((c) => c.spec.name === "decrypt")?.spec as CommandSpec;
  const local = (args: string[], env = {}) =>
    (parseFlags(decrypt, [...args, "f.yaml"], env).values as Record<string, unknown>)[
      "enable-local-keyservice"
    ];
  assert.equal(local([]), true);
  assert.equal(local(["--enable-local-keyservice=false"]), false);
  assert.equal(local(["--enable-local-keyservice=true"], { SOPS_ENABLE_LOCAL_KEYSERVICE: "false" }), true);
  assert.equal(local([], { SOPS_ENABLE_LOCAL_KEYSERVICE: "false" }), false);
  const after = parseFlags(decrypt, ["--", "--ignore-mac=false"], {});
  assert.deepEqual(after.positionals, ["--ignore-mac=false"], "after -- it is an operand");
});

/** Every flag as it was before the tables (name/-alias:type=default): scripts rely on them. */
const EXPECTED_FLAGS: Record<string, string> = {
  serve: "config:s data-dir:s listen:s log-level:s store:s",
  controller:
    "ca-file:s concurrency:s=4 health-listen:s=0.0.0.0:8081 kubeconfig:s leader-elect:b leader-election-namespace:s namespace:s resync:s=10m server:s token-file:s",
  encrypt:
    "age/-a:s aws-profile:s azure-kv:s config:s enable-local-keyservice:b=true encrypted-comment-regex:s encrypted-regex:s encrypted-suffix:s encryption-context:s filename-override:s format:s=sops gcp-kms:s hc-vault-transit:s hckms:s in-place/-i:b indent:s input-type:s keyservice:s kms/-k:s mac-only-encrypted:b machine:s output-type:s output:s pgp/-p:s shamir-secret-sharing-threshold:s tpm-ek:s unencrypted-comment-regex:s unencrypted-regex:s unencrypted-suffix:s",
  decrypt:
    "decryption-order:s enable-local-keyservice:b=true extract:s filename-override:s ignore-mac:b in-place/-i:b indent:s input-type:s keyservice:s machine:s output-type:s output:s",
  rotate:
    "add-age:s add-azure-kv:s add-gcp-kms:s add-hc-vault-transit:s add-hckms:s add-kms:s add-pgp:s add-tpm-ek:s aws-profile:s concurrency:s=4 decryption-order:s dry-run:b enable-local-keyservice:b=true encryption-context:s filename-override:s ignore-mac:b in-place/-i:b indent:s input-type:s json:b keyservice:s output-type:s output:s prefix:s=configs/ recursive:b rm-age:s rm-azure-kv:s rm-gcp-kms:s rm-hc-vault-transit:s rm-hckms:s rm-kms:s rm-pgp:s rm-tpm-ek:s store:s",
  updatekeys:
    "config:s decryption-order:s enable-local-keyservice:b=true input-type:s keyservice:s recursive:b shamir-secret-sharing-threshold:s yes/-y:b",
  keyservice: "addr:s address:s=127.0.0.1:5000 net:s network:s=tcp prompt:b verbose:b",
  "exec-env": "background:b decryption-order:s pristine:b same-process:b user:s",
  "exec-file": "background:b decryption-order:s filename:s input-type:s no-fifo:b output-type:s user:s",
  edit: "age/-a:s aws-profile:s azure-kv:s config:s decryption-order:s enable-local-keyservice:b=true encrypted-comment-regex:s encrypted-regex:s encrypted-suffix:s encryption-context:s gcp-kms:s hc-vault-transit:s hckms:s ignore-mac:b input-type:s keyservice:s kms/-k:s mac-only-encrypted:b output-type:s pgp/-p:s shamir-secret-sharing-threshold:s show-master-keys/-s:b tpm-ek:s unencrypted-comment-regex:s unencrypted-regex:s unencrypted-suffix:s",
  set: "decryption-order:s enable-local-keyservice:b=true idempotent:b ignore-mac:b input-type:s keyservice:s output-type:s shamir-secret-sharing-threshold:s value-file:b value-stdin:b",
  unset:
    "decryption-order:s enable-local-keyservice:b=true idempotent:b ignore-mac:b input-type:s keyservice:s output-type:s shamir-secret-sharing-threshold:s",
  filestatus: "input-type:s",
  groups:
    "age:s aws-profile:s azure-kv:s enable-local-keyservice:b=true encryption-context:s file/-f:s gcp-kms:s hc-vault-transit:s hckms:s in-place/-i:b keyservice:s kms:s pgp:s shamir-secret-sharing-threshold:s tpm-ek:s",
  completion: "",
  fetch:
    "allow-unknown-modules:b allow-unsafe-modes:b allowed-roots:s=/etc,/var/lib,/run,/opt apply:b attempt-timeout:s=30s auth:s=token aws-sts-endpoint:s aws-sts-region:s azure-resource:s ca-file:s deadline:s=10m decryption-order:s exec-timeout:s exec:s force:b from:s input-type:s json:b machine:s marker:s=/var/lib/bootseal/bootstrap.done one-time:b out:s payload:s=auto report-timeout:s=15s report:s root:s=/ sentinel:s=/run/cluster-api/bootstrap-success.complete server-id:s skip-module:s spiffe-jwt-file:s systemctl:s=systemctl token-file:s",
  "sign-artifact": "generate-key:s key:s public-out:s sha256-out:s signature-out:s",
  "verify-artifact": "public-key:s sha256:s signature:s",
  publish:
    "bootstrap-token-out:s ca-file:s config:s deadline:s=30s decryption-order:s enable-local-keyservice:b=true format:s if-match:s if-none-match:b json:b keyservice:s machine:s omit-extensions:b recursive:b server:s token-file:s yes/-y:b",
  status: "ca-file:s deadline:s=30s json:b namespace:s phase:s server:s token-file:s",
  check: "artifact-public-key:s ca-file:s config:s deadline:s=10s json:b machine-url:s server:s token-file:s",
  userdata: "ca-file:s deadline:s=30s format:s=cloud-init machine:s output:s server:s token-file:s",
};

test("every command keeps its flag names, aliases, types and defaults", () => {
  const actual = Object.fromEntries(
    commands.map((c) => [
      c.spec.name,
      c.spec.flags
        .map((f) => {
          const short = "short" in f && f.short ? `/-${f.short}` : "";
          const def = "default" in f && f.default !== undefined ? `=${f.default}` : "";
          return `${f.name}${short}:${f.type[0]}${def}`;
        })
        .sort()
        .join(" "),
    ]),
  );
  assert.deepEqual(actual, EXPECTED_FLAGS);
});

test("encrypt reads SOPS_AGE_RECIPIENTS when --age is absent, and --age wins over it", async () => {
  const viaEnv = new TextDecoder().decode(
    await encrypt("a: 1\n", ["--input-type", "yaml"], { SOPS_AGE_RECIPIENTS: r1.recipient }),
  );
  assert.ok(viaEnv.includes(r1.recipient));
  const viaFlag = new TextDecoder().decode(
    await encrypt("a: 1\n", ["--input-type", "yaml", "--age", r2.recipient], {
      SOPS_AGE_RECIPIENTS: r1.recipient,
    }),
  );
  assert.ok(viaFlag.includes(r2.recipient) && !viaFlag.includes(r1.recipient));
});

test("docs/cli.md's synopsis and flag tables equal the tables (node scripts/cli-docs.ts)", async () => {
  const doc = await readFile(join(REPO, "docs/cli.md"), "utf8");
  const sections = cliDocSections(commands);
  assert.equal(sections.size, commands.length + 3);
  assert.equal(replaceGenerated(doc, sections), doc, "docs/cli.md is stale: run node scripts/cli-docs.ts");
  assert.throws(() => replaceGenerated("no markers", sections), /no generated section "usage"/);
});
