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
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { yamlCodec } from "../../../../src/envelope/sops/codecs/yaml.ts";
import { peer } from "../../../helpers/peers.ts";
import { VECTORS_URL } from "../../../helpers/vectors.ts";

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
