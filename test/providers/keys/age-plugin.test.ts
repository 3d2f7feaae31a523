/**
 * The age plugin client (providers/keys/age-plugin.ts) on its own: Bech32 names against
 * encodings made by filippo.io/age/plugin v1.3.1, and both state machines against the TEST
 * DOUBLE plugin test/fakes/age-plugin-double.ts (messages, refused prompts, unknown stanzas,
 * a missing binary). The real plugin and the real sops: test/interop/sops-age-plugin.test.ts.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Decrypter, Encrypter } from "age-encryption";
import { ageKeyType } from "../../../providers/keys/age.ts";
import {
  bech32Decode,
  pluginIdentity,
  pluginIdentityName,
  pluginRecipient,
  pluginRecipientName,
} from "../../../providers/keys/age-plugin.ts";
import { BootsealError } from "../../../src/errors.ts";

const DOUBLE = fileURLToPath(new URL("../../fakes/age-plugin-double.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "bootseal-age-plugin-unit-"));
after(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, "age-plugin-double"), `#!/bin/sh\nexec '${process.execPath}' '${DOUBLE}' "$@"\n`);
chmodSync(join(dir, "age-plugin-double"), 0o755);
const env = { PATH: `${dir}:${process.env.PATH}` };
const [recipient, identity] = execFileSync(process.execPath, [DOUBLE, "--keygen"], { encoding: "utf8" })
  .trim()
  .split(" ") as [string, string];

function code(c: string, message?: RegExp) {
  return (err: unknown) =>
    err instanceof BootsealError && err.code === c && (message === undefined || message.test(err.message));
}

describe("plugin names (Bech32, as filippo.io/age/plugin encodes them)", () => {
  test("encodings made by plugin.EncodeIdentity / EncodeRecipient of age v1.3.1", () => {
    assert.deepEqual(bech32Decode("age1double1qypqxm5rdva"), {
      hrp: "age1double",
      data: Uint8Array.of(1, 2, 3),
    });
    assert.equal(pluginRecipientName("age1double1qypqxm5rdva"), "double");
    assert.equal(pluginRecipientName("age1batchpass1s48w5f"), "batchpass");
    assert.equal(pluginIdentityName("AGE-PLUGIN-BATCHPASS-1JCS0Q9"), "batchpass");
  });

  test("a bad checksum, mixed case or a non-plugin identity is refused", () => {
    assert.equal(bech32Decode("age1double1qypqxm5rdvb"), null);
    assert.equal(bech32Decode("Age1double1qypqxm5rdva"), null);
    assert.throws(
      () => pluginRecipientName("age1double1qypqxm5rdvb"),
      code("BAD_INPUT", /invalid recipient encoding/),
    );
    assert.equal(pluginIdentityName("AGE-SECRET-KEY-1JCS0Q9"), null);
    assert.equal(pluginIdentityName("AGE-PLUGIN-BATCHPASS-1JCS0Q8"), null);
  });
});

describe("the plugin protocol (test double plugin: test/fakes/age-plugin-double.ts)", () => {
  test("recipient-v1 wraps, identity-v1 unwraps, through typage", async () => {
    const e = new Encrypter();
    e.addRecipient(pluginRecipient(recipient, env));
    const file = await e.encrypt(Uint8Array.of(7, 8, 9));
    const d = new Decrypter();
    d.addIdentity(pluginIdentity(identity, env));
    assert.deepEqual(await d.decrypt(file), Uint8Array.of(7, 8, 9));
  });

  test("a message is shown, a secret prompt gets fail, an unknown stanza unsupported (the double checks)", async () => {
    const chatty = { ...env, AGE_PLUGIN_DOUBLE_CHATTY: "1" };
    const e = new Encrypter();
    e.addRecipient(pluginRecipient(recipient, chatty));
    const file = await e.encrypt(Uint8Array.of(1));
    const d = new Decrypter();
    d.addIdentity(pluginIdentity(identity, chatty));
    assert.deepEqual(await d.decrypt(file), Uint8Array.of(1));
  });

  test("another identity of the same plugin: no file key, so the key answers null", async () => {
    const [, otherIdentity] = execFileSync(process.execPath, [DOUBLE, "--keygen"], { encoding: "utf8" })
      .trim()
      .split(" ") as [string, string];
    const [key] = ageKeyType.fromUserInput(recipient, { env });
    const enc = await key!.wrap(new Uint8Array(32).fill(3));
    const [withOther] = ageKeyType.fromUserInput(recipient, {
      env: { ...env, SOPS_AGE_KEY: otherIdentity, HOME: dir },
    });
    assert.equal(await withOther!.unwrap(enc), null);
    const [withRight] = ageKeyType.fromUserInput(recipient, {
      env: { ...env, SOPS_AGE_KEY: identity, HOME: dir },
    });
    assert.deepEqual(await withRight!.unwrap(enc), new Uint8Array(32).fill(3));
  });

  test("no age-plugin-NAME on PATH: a one-line UNSUPPORTED naming the binary", async () => {
    const e = new Encrypter();
    e.addRecipient(pluginRecipient(recipient, { PATH: "/nonexistent" }));
    await assert.rejects(
      e.encrypt(Uint8Array.of(1)),
      code("UNSUPPORTED", /age-plugin-double is not on PATH/),
    );
  });
});
