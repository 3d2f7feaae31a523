import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { generateHybridIdentity, identityToRecipient } from "age-encryption";
import { parse } from "yaml";
import { ageKeyType, loadAgeIdentities, splitCommand, userConfigDir } from "../../../providers/keys/age.ts";
import type { ProviderDeps } from "../../../providers/keys/index.ts";
import { keysFromUserInput, resolverFor } from "../../../providers/keys/index.ts";
import { unwrapDataKey } from "../../../src/envelope/sops/key-groups.ts";
import type { KeyEntry } from "../../../src/envelope/sops/master-key.ts";
import { BootsealError, NoKeyAvailableError } from "../../../src/errors.ts";
import { peer } from "../../helpers/peers.ts";
import { VECTORS_DIR as VECTORS } from "../../helpers/vectors.ts";

const MOCK_IDENTITY = join(VECTORS, "keys/age-sops-mock-identity.agekey");
const MOCK_RECIPIENT = "age1lzd99uklcjnc0e7d860axevet2cz99ce9pq6tzuzd05l5nr28ams36nvun";
const FLUX_IDENTITY = join(VECTORS, "keys/age-fluxcd-test.agekey");
const FLUX_RECIPIENT = "age1l44xcng8dqj32nlv6d930qvvrny05hglzcv9qpc7kxjc6902ma4qufys29";

const dir = mkdtempSync(join(tmpdir(), "bootseal-age-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function key(recipient: string, deps: ProviderDeps) {
  const [k] = ageKeyType.fromUserInput(recipient, deps);
  assert.ok(k);
  return k;
}

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

/** The real age CLI makes an X25519 identity for us. */
function newIdentity(name: string): { file: string; recipient: string } {
  const file = join(dir, name);
  execFileSync(peer("AGE_KEYGEN_BIN"), ["-o", file], { stdio: "ignore" });
  return { file, recipient: execFileSync(peer("AGE_KEYGEN_BIN"), ["-y", file], { encoding: "utf8" }).trim() };
}

describe("age vectors", () => {
  test("sops's age-layer vector decrypts with the mock identity", async () => {
    const enc = readFileSync(join(VECTORS, "age-layer/sops-mock-encrypted-key.age"), "utf8");
    const expected = readFileSync(join(VECTORS, "age-layer/sops-mock-encrypted-key.plaintext"));
    const out = await key(MOCK_RECIPIENT, { env: { SOPS_AGE_KEY_FILE: MOCK_IDENTITY } }).unwrap(enc);
    assert.deepEqual(out, Uint8Array.from(expected));
  });

  test("the fluxcd document's data key unwraps through the registry resolver", async () => {
    const doc = parse(readFileSync(join(VECTORS, "fluxcd-age/age.yaml"), "utf8")) as {
      sops: { age: { recipient: string; enc: string }[] };
    };
    const expected = JSON.parse(
      readFileSync(join(VECTORS, "expected/fluxcd-age.yaml.expected.json"), "utf8"),
    ) as {
      data_key_hex: string;
    };
    const entries: KeyEntry[] = doc.sops.age.map((e) => ({
      kind: "age",
      enc: e.enc,
      fields: new Map(Object.entries(e)),
    }));
    assert.equal(entries[0]?.fields.get("recipient"), FLUX_RECIPIENT);
    const dataKey = await unwrapDataKey(
      [entries],
      resolverFor({ env: { SOPS_AGE_KEY_FILE: FLUX_IDENTITY } }),
    );
    assert.equal(Buffer.from(dataKey).toString("hex"), expected.data_key_hex);
    // The wrong identity: the document cannot be opened, and the error names the recipient.
    await assert.rejects(
      unwrapDataKey([entries], resolverFor({ env: { SOPS_AGE_KEY_FILE: MOCK_IDENTITY } })),
      (e: unknown) => e instanceof NoKeyAvailableError && e.failures[0]?.keyId === FLUX_RECIPIENT,
    );
  });
});

describe("age CLI interop", () => {
  test("our wrap decrypts with `age -d -i`, in sops's armour", async () => {
    const id = newIdentity("cli1.txt");
    const secret = randomBytes(33);
    const enc = await key(id.recipient, {}).wrap(secret);
    assert.match(enc, /^-----BEGIN AGE ENCRYPTED FILE-----\n([A-Za-z0-9+/=]{64}\n)*[A-Za-z0-9+/=]{1,64}\n/);
    assert.ok(enc.endsWith("\n-----END AGE ENCRYPTED FILE-----\n"));
    const out = execFileSync(peer("AGE_BIN"), ["-d", "-i", id.file], { input: enc });
    assert.deepEqual(out, secret);
  });

  test("`age -a -r` output unwraps with our key", async () => {
    const id = newIdentity("cli2.txt");
    const secret = randomBytes(32);
    const enc = execFileSync(peer("AGE_BIN"), ["-a", "-r", id.recipient], {
      input: secret,
      encoding: "utf8",
    });
    const out = await key(id.recipient, { env: { SOPS_AGE_KEY_FILE: id.file } }).unwrap(enc);
    assert.deepEqual(out, Uint8Array.from(secret));
  });
});

describe("identity sources", () => {
  const a = newIdentity("src-a.txt");
  const b = newIdentity("src-b.txt");
  const secretOf = (file: string) =>
    readFileSync(file, "utf8")
      .split("\n")
      .find((l) => l.startsWith("AGE-SECRET-KEY-1")) as string;

  test("SOPS_AGE_KEY: comments, blank lines, several identities on one line", async () => {
    const env = { SOPS_AGE_KEY: `# a comment\n\n${secretOf(a.file)}   ${secretOf(b.file)}\r\n` };
    const { identities, errors } = await loadAgeIdentities(env);
    assert.deepEqual(identities, [secretOf(a.file), secretOf(b.file)]);
    assert.deepEqual(errors, []);
    const enc = await key(b.recipient, {}).wrap(randomBytes(32));
    assert.equal((await key(b.recipient, { env }).unwrap(enc))?.length, 32);
  });

  test("SOPS_AGE_KEY_CMD runs without a shell and gets SOPS_AGE_RECIPIENT", async () => {
    const script = join(dir, "key cmd.sh");
    writeFileSync(script, `#!/bin/sh\n[ "$SOPS_AGE_RECIPIENT" = "${a.recipient}" ] && cat "$1"\n`, {
      mode: 0o700,
    });
    const env = { SOPS_AGE_KEY_CMD: `'${script}' ${a.file}` };
    const enc = await key(a.recipient, {}).wrap(randomBytes(32));
    assert.equal((await key(a.recipient, { env }).unwrap(enc))?.length, 32);
    // The command sees another recipient, exits 1: a failing source is an IO_ERROR.
    const encB = await key(b.recipient, {}).wrap(randomBytes(32));
    await assert.rejects(key(b.recipient, { env }).unwrap(encB), code("IO_ERROR"));
    assert.deepEqual(splitCommand(`a 'b c' "d \\"e\\"" f\\ g`), ["a", "b c", 'd "e"', "f g"]);
  });

  test("default file: $XDG_CONFIG_HOME/sops/age/keys.txt, else $HOME/.config/…", async () => {
    const xdg = join(dir, "xdg");
    mkdirSync(join(xdg, "sops", "age"), { recursive: true });
    writeFileSync(join(xdg, "sops", "age", "keys.txt"), readFileSync(a.file));
    const home = join(dir, "home");
    mkdirSync(join(home, ".config", "sops", "age"), { recursive: true });
    writeFileSync(join(home, ".config", "sops", "age", "keys.txt"), readFileSync(b.file));
    assert.deepEqual((await loadAgeIdentities({ XDG_CONFIG_HOME: xdg, HOME: home })).identities, [
      secretOf(a.file),
    ]);
    assert.deepEqual((await loadAgeIdentities({ HOME: home })).identities, [secretOf(b.file)]);
    assert.equal(userConfigDir({ HOME: "/h" }, "linux"), "/h/.config");
    assert.equal(userConfigDir({ HOME: "/h" }, "darwin"), "/h/Library/Application Support");
    assert.equal(userConfigDir({ HOME: "/h", XDG_CONFIG_HOME: "/x" }, "darwin"), "/x");
    assert.equal(userConfigDir({ AppData: "C:\\A" }, "win32"), "C:\\A");
    assert.equal(userConfigDir({}, "linux"), null);
  });

  test("all sources together, in sops's order", async () => {
    const env = {
      SOPS_AGE_KEY: secretOf(a.file),
      SOPS_AGE_KEY_FILE: b.file,
      SOPS_AGE_KEY_CMD: `cat ${MOCK_IDENTITY}`,
      HOME: join(dir, "nowhere"),
    };
    const { identities } = await loadAgeIdentities(env, "age1whatever");
    assert.equal(identities.length, 3);
    assert.deepEqual(identities.slice(0, 2), [secretOf(a.file), secretOf(b.file)]);
  });
});

describe("failures", () => {
  const id = newIdentity("fail.txt");
  const other = newIdentity("other.txt");

  test("wrong identity -> null; no identity anywhere -> null", async () => {
    const enc = await key(id.recipient, {}).wrap(randomBytes(32));
    assert.equal(await key(id.recipient, { env: { SOPS_AGE_KEY_FILE: other.file } }).unwrap(enc), null);
    assert.equal(await key(id.recipient, { env: {} }).unwrap(enc), null);
  });

  test("unusable sources and no match: the error names the source, not the key", async () => {
    const enc = await key(id.recipient, {}).wrap(randomBytes(32));
    const missing = join(dir, "missing.txt");
    await assert.rejects(
      key(id.recipient, { env: { SOPS_AGE_KEY_FILE: missing } }).unwrap(enc),
      code("IO_ERROR"),
    );
    const bad = "AGE-SECRET-KEY-1NOTAKEY";
    await assert.rejects(key(id.recipient, { env: { SOPS_AGE_KEY: bad } }).unwrap(enc), (e: unknown) => {
      assert.ok(e instanceof BootsealError && e.code === "BAD_INPUT");
      assert.match(e.message, /SOPS_AGE_KEY: invalid identity on line 1/);
      assert.doesNotMatch(e.message, /NOTAKEY/);
      return true;
    });
  });

  test("garbage or tampered enc -> BAD_INPUT", async () => {
    const k = key(id.recipient, { env: { SOPS_AGE_KEY_FILE: id.file } });
    await assert.rejects(k.unwrap("not an armour"), code("BAD_INPUT"));
    const enc = await k.wrap(randomBytes(32));
    const lines = enc.split("\n");
    const last = lines.length - 3; // the last base64 line holds the payload
    const line = lines[last] as string;
    lines[last] = (line[0] === "A" ? "B" : "A") + line.slice(1);
    await assert.rejects(k.unwrap(lines.join("\n")), code("BAD_INPUT"));
  });

  test("recipients: plugin encodings checked, junk and truncated SSH keys BAD_INPUT, spaces trimmed", () => {
    assert.throws(
      () => ageKeyType.fromUserInput("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA", {}),
      code("BAD_INPUT"),
    );
    // A plugin recipient's Bech32 checksum is checked; a valid one is accepted (./age-plugin.test.ts).
    assert.throws(() => ageKeyType.fromUserInput("age1yubikey1qwerty", {}), code("BAD_INPUT"));
    assert.equal(ageKeyType.fromUserInput("age1batchpass1s48w5f", {})[0]?.id, "age1batchpass1s48w5f");
    assert.throws(() => ageKeyType.fromUserInput("age1notbech32", {}), code("BAD_INPUT"));
    assert.throws(() => ageKeyType.fromUserInput("hello", {}), code("BAD_INPUT"));
    const keys = ageKeyType.fromUserInput(` ${id.recipient} ,${other.recipient},`, {});
    assert.deepEqual(
      keys.map((k) => k.id),
      [id.recipient, other.recipient],
    );
    const entry = keys[0]?.toMetadata("ENC", new Date());
    assert.deepEqual(
      [...(entry?.fields ?? [])],
      [
        ["recipient", id.recipient],
        ["enc", "ENC"],
      ],
    );
    assert.throws(
      () => ageKeyType.fromMetadata({ kind: "age", enc: "x", fields: new Map() }, {}),
      code("BAD_INPUT"),
    );
  });

  test("hybrid post-quantum recipients round trip", async () => {
    const identity = await generateHybridIdentity();
    const recipient = await identityToRecipient(identity);
    assert.ok(recipient.startsWith("age1pq1"));
    const secret = randomBytes(33);
    const enc = await key(recipient, {}).wrap(secret);
    assert.deepEqual(
      await key(recipient, { env: { SOPS_AGE_KEY: identity } }).unwrap(enc),
      Uint8Array.from(secret),
    );
  });

  test("registry: malformed input is refused when configured, and age input resolves", () => {
    assert.throws(() => keysFromUserInput("kms", "arn:aws:kms:x", {}), code("BAD_INPUT"));
    assert.throws(() => resolverFor({})({ kind: "kms", enc: "x", fields: new Map() }), code("BAD_INPUT"));
    assert.equal(keysFromUserInput("age", id.recipient)[0]?.id, id.recipient);
  });
});
