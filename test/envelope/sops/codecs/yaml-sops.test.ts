/**
 * Cross-check with the real sops 3.13.2: for every plaintext YAML (shared vectors and the
 * fixtures under test/fixtures/yaml), sops encrypts it (age key) and decrypts it again;
 * - what sops decrypt prints must equal emitPlain(parsePlain(input)): the emitter and the
 *   parser (typing, comment placement) agree with go-yaml. This pass runs with
 *   `unencrypted_comment_regex: '.*'` because sops 3.13.2 itself mangles encrypted comments
 *   (a decrypted comment loses its inline place, and an encrypted comment inside a list is
 *   written as a list item, which then fails sops' own MAC check);
 * - the file a default `sops encrypt` wrote must survive emitEncrypted(parseEncrypted(x))
 *   byte for byte.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { yamlCodec } from "../../../../src/envelope/sops/codecs/yaml.ts";
import { BootsealError } from "../../../../src/errors.ts";
import { runBootsealInProcess } from "../../../helpers/cli-in-process.ts";
import { peer } from "../../../helpers/peers.ts";
import { VECTORS_URL } from "../../../helpers/vectors.ts";
import { blockSeqBomb, flowSeqBomb, mapBomb, mergeBomb } from "../../../hostile/hostile-yaml.ts";

const FIXTURES = fileURLToPath(new URL("../../../fixtures/yaml/", import.meta.url));
const PLAINTEXT = fileURLToPath(new URL("sops-repo/plaintext/", VECTORS_URL));
const inputs = [
  ...readdirSync(PLAINTEXT).map((f) => join(PLAINTEXT, f)),
  ...readdirSync(FIXTURES).map((f) => join(FIXTURES, f)),
].filter((f) => f.endsWith(".yaml"));

let dir = "";
let env: NodeJS.ProcessEnv = {};
let recipient = "";
let config = "";

function sops(...args: string[]): Buffer {
  return execFileSync(peer("SOPS_BIN"), args, { env, stdio: ["ignore", "pipe", "pipe"] });
}

before(() => {
  dir = mkdtempSync(join(tmpdir(), "bootseal-yaml-"));
  const keyFile = join(dir, "key.txt");
  execFileSync(peer("AGE_KEYGEN_BIN"), ["-o", keyFile], { stdio: "ignore" });
  recipient = /public key: (age1\S+)/.exec(readFileSync(keyFile, "utf8"))?.[1] ?? "";
  assert.ok(recipient, "age-keygen gave no recipient");
  env = { ...process.env, SOPS_AGE_KEY_FILE: keyFile };
  config = join(dir, "sops-config.yaml");
  writeFileSync(config, `creation_rules:\n  - age: ${recipient}\n    unencrypted_comment_regex: '.*'\n`);
});

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

for (const input of inputs) {
  test(`sops agrees on ${input.split("/").slice(-2).join("/")}`, () => {
    const plain = readFileSync(input);
    const encFile = join(dir, "enc.yaml");
    const withPlainComments = sops(
      "--config",
      config,
      "encrypt",
      "--input-type",
      "yaml",
      "--output-type",
      "yaml",
      "--filename-override",
      "x.yaml",
      input,
    );
    writeFileSync(encFile, withPlainComments);
    const decrypted = sops("decrypt", "--input-type", "yaml", "--output-type", "yaml", encFile);

    const ours = yamlCodec.emitPlain(yamlCodec.parsePlain(plain));
    assert.equal(
      Buffer.from(ours).toString(),
      decrypted.toString(),
      "emitPlain(parsePlain(x)) != sops decrypt",
    );

    const encrypted = sops(
      "encrypt",
      "--age",
      recipient,
      "--input-type",
      "yaml",
      "--output-type",
      "yaml",
      input,
    );
    const { branches, metadata } = yamlCodec.parseEncrypted(encrypted);
    const again = yamlCodec.emitEncrypted(branches, metadata);
    assert.equal(Buffer.from(again).toString(), encrypted.toString(), "encrypted file does not round-trip");
  });
}

test("a file we emit is accepted by sops, and our re-emitted encrypted file decrypts", () => {
  const plain = readFileSync(join(FIXTURES, "k8s.yaml"));
  const file = join(dir, "ours.yaml");
  writeFileSync(file, yamlCodec.emitPlain(yamlCodec.parsePlain(plain)));
  const encrypted = sops(
    "--config",
    config,
    "encrypt",
    "--input-type",
    "yaml",
    "--output-type",
    "yaml",
    "--filename-override",
    "x.yaml",
    file,
  );
  const { branches, metadata } = yamlCodec.parseEncrypted(encrypted);
  const reEmitted = join(dir, "reemitted.yaml");
  writeFileSync(reEmitted, yamlCodec.emitEncrypted(branches, metadata));
  const decrypted = sops("decrypt", "--input-type", "yaml", "--output-type", "yaml", reEmitted);
  assert.equal(
    decrypted.toString(),
    Buffer.from(yamlCodec.emitPlain(yamlCodec.parsePlain(plain))).toString(),
  );
});

test("aliases: sops and bootseal refuse the same bombs, and agree on what they accept", () => {
  const specs = [
    [3, 9],
    [4, 5],
    [4, 9],
    [6, 3],
    [7, 3],
    [9, 2],
    [10, 2],
    [2, 98],
    [2, 200],
    [3, 11],
    [3, 20],
  ] as const;
  const shapes = { flowSeqBomb, blockSeqBomb, mapBomb, mergeBomb };
  let accepted = 0;
  for (const [shape, make] of Object.entries(shapes)) {
    for (const [levels, width] of specs) {
      const label = `${shape}(${levels}, ${width})`;
      const file = join(dir, "aliases.yaml");
      writeFileSync(file, make(levels, width));
      const encrypted = spawnSync(peer("SOPS_BIN"), ["--config", config, "encrypt", file], {
        env,
        maxBuffer: 64 * 1024 * 1024,
      });
      let ours: Uint8Array | undefined;
      try {
        ours = yamlCodec.emitPlain(yamlCodec.parsePlain(readFileSync(file)));
      } catch (err) {
        assert.ok(err instanceof BootsealError && err.code === "BAD_INPUT", `${label}: ${err}`);
        assert.match(err.message, /excessive aliasing/, label);
      }
      if (encrypted.status !== 0) {
        assert.match(encrypted.stderr.toString(), /excessive aliasing/, label);
        assert.equal(ours, undefined, `${label}: sops refuses it, bootseal accepted it`);
        continue;
      }
      assert.ok(ours, `${label}: sops accepts it, bootseal refused it`);
      accepted++;
      const encFile = join(dir, "aliases.enc.yaml");
      writeFileSync(encFile, encrypted.stdout);
      const decrypted = sops("decrypt", "--input-type", "yaml", "--output-type", "yaml", encFile);
      assert.equal(Buffer.from(ours).toString(), decrypted.toString(), label);
    }
  }
  assert.ok(accepted > 0 && accepted < 4 * specs.length, "the specs straddle the limit");
});

/** `bootseal ARGS` in-process with the test's age key; its stdout. */
async function bootseal(args: string[]): Promise<string> {
  const r = await runBootsealInProcess(args, { env: { SOPS_AGE_KEY_FILE: env.SOPS_AGE_KEY_FILE }, cwd: dir });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.toString();
}

test("a small aliased file: sops' encryption decrypts with bootseal as with sops, and the reverse", async () => {
  const plain = [
    "base: &base",
    "  image: nginx",
    "  port: 80",
    "web:",
    "  <<: *base",
    "  name: web",
    "list: [*base, *base]",
    "",
  ].join("\n");
  const file = join(dir, "small-aliases.yaml");
  writeFileSync(file, plain);
  const bySops = join(dir, "small-aliases.sops.yaml");
  writeFileSync(bySops, sops("encrypt", "--age", recipient, file));
  const expected = sops("decrypt", bySops).toString();
  assert.match(expected, /!!merge <<:\n {8}image: nginx/);
  assert.equal(await bootseal(["decrypt", bySops]), expected);
  const byUs = join(dir, "small-aliases.ours.yaml");
  writeFileSync(byUs, await bootseal(["encrypt", "--age", recipient, file]));
  assert.equal(sops("decrypt", byUs).toString(), expected);
});
