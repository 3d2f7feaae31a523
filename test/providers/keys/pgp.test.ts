import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { after, describe, test } from "node:test";
import * as openpgp from "openpgp";
import { parse } from "yaml";
import type { ProviderDeps } from "../../../providers/keys/index.ts";
import { resolverFor } from "../../../providers/keys/index.ts";
import { loadPgpKeyMaterial, pgpKeyType } from "../../../providers/keys/pgp.ts";
import { unwrapDataKey } from "../../../src/envelope/sops/key-groups.ts";
import type { KeyEntry } from "../../../src/envelope/sops/master-key.ts";
import { BootsealError, NoKeyAvailableError } from "../../../src/errors.ts";
import { peer } from "../../helpers/peers.ts";
import { VECTORS_DIR as VECTORS } from "../../helpers/vectors.ts";

const ALL_KEYS = join(VECTORS, "keys/sops_functional_tests_key.asc");
const KEY1 = "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4";
const KEY2 = "D7229043384BCC60326C6FB9D8720D957C3D3074";
const KEY1_FILE = join(VECTORS, `keys/pgp-${KEY1}.private.asc`);
const KEY2_FILE = join(VECTORS, `keys/pgp-${KEY2}.private.asc`);

const gpgBin = peer("GPG_BIN");
const homes: string[] = [];
after(() => {
  for (const home of homes) {
    // Stop the agent gpg started for this home, then remove it.
    try {
      execFileSync("gpgconf", ["--homedir", home, "--kill", "all"], { stdio: "ignore" });
    } catch {}
    rmSync(home, { recursive: true, force: true });
  }
});

/** A fresh GNUPGHOME (absolute, 0700), optionally with keys imported. */
function gnupgHome(importFile?: string): string {
  const home = mkdtempSync(join(tmpdir(), "bootseal-gpg-"));
  homes.push(home);
  if (importFile)
    execFileSync(gpgBin, ["--homedir", home, "--batch", "--import", importFile], { stdio: "ignore" });
  return home;
}

function gpgEnv(home: string): ProviderDeps {
  return { env: { GNUPGHOME: home, SOPS_GPG_EXEC: gpgBin } };
}

const fileOnly = (file: string): ProviderDeps => ({
  env: { BOOTSEAL_PGP_KEY_FILE: file },
  pgp: { gpg: false },
});

function key(fp: string, deps: ProviderDeps) {
  const [k] = pgpKeyType.fromUserInput(fp, deps);
  assert.ok(k);
  return k;
}

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

/** The PGP entries of a vector document, from whichever store wrote it. */
function pgpEntries(path: string): KeyEntry[] {
  const text = readFileSync(path, "utf8");
  let list: Record<string, string>[];
  if (path.endsWith(".yaml")) list = (parse(text) as { sops: { pgp: Record<string, string>[] } }).sops.pgp;
  else if (path.endsWith(".json") || path.endsWith(".txt")) list = JSON.parse(text).sops.pgp;
  else {
    // dotenv / INI: flattened `[sops_]pgp__list_N__map_field`, `\n` escaped.
    const found: Record<string, string>[] = [];
    for (const m of text.matchAll(/^(?:sops_)?pgp__list_(\d+)__map_(\w+)\s*=\s*(.*)$/gm)) {
      const i = Number(m[1]);
      found[i] ??= {};
      (found[i] as Record<string, string>)[m[2] as string] = (m[3] as string).replaceAll("\\n", "\n");
    }
    list = found;
  }
  return list.map((e) => ({ kind: "pgp", enc: e.enc as string, fields: new Map(Object.entries(e)) }));
}

/** Every PGP vector document with its expected data key. */
const pgpVectors = readdirSync(join(VECTORS, "expected"))
  .filter((f) => f.endsWith(".expected.json") && !f.startsWith("fluxcd"))
  .map((f) => {
    const name = f.replace(/\.expected\.json$/, "");
    const dirs = ["yaml", "json", "ini", "dotenv", "binary"].map((d) => join(VECTORS, "sops-repo", d));
    const doc = dirs.flatMap((d) => readdirSync(d).map((n) => join(d, n))).find((p) => basename(p) === name);
    assert.ok(doc, `document for ${f}`);
    const expected = JSON.parse(readFileSync(join(VECTORS, "expected", f), "utf8")) as {
      data_key_hex: string;
    };
    return { name, doc, dataKeyHex: expected.data_key_hex };
  });

describe("PGP vectors", () => {
  test("there are PGP vectors in every store", () => {
    assert.ok(pgpVectors.length >= 12);
  });

  const keyring = gnupgHome(ALL_KEYS);
  for (const v of pgpVectors) {
    test(`${v.name}: Key 1's enc unwraps via the key file and via a gpg keyring`, async () => {
      const entry = pgpEntries(v.doc).find((e) => e.fields.get("fp") === KEY1);
      assert.ok(entry);
      const viaFile = await pgpKeyType.fromMetadata(entry, fileOnly(ALL_KEYS)).unwrap(entry.enc);
      assert.equal(Buffer.from(viaFile ?? []).toString("hex"), v.dataKeyHex);
      const viaGpg = await pgpKeyType.fromMetadata(entry, gpgEnv(keyring)).unwrap(entry.enc);
      assert.equal(Buffer.from(viaGpg ?? []).toString("hex"), v.dataKeyHex);
    });
  }

  test("Key 2 (RSA-1024) entries unwrap with OpenPGP.js from its own file", async () => {
    const entries = pgpEntries(join(VECTORS, "sops-repo/json/example.json"));
    const entry = entries.find((e) => e.fields.get("fp") === KEY2);
    assert.ok(entry);
    const out = await pgpKeyType.fromMetadata(entry, fileOnly(KEY2_FILE)).unwrap(entry.enc);
    const expected = pgpVectors.find((v) => v.name === "example.json")?.dataKeyHex;
    assert.equal(Buffer.from(out ?? []).toString("hex"), expected);
  });

  test("a whole document through unwrapDataKey; with no key, every fingerprint is listed", async () => {
    const entries = pgpEntries(join(VECTORS, "sops-repo/yaml/example.yaml"));
    const dataKey = await unwrapDataKey([entries], resolverFor(fileOnly(KEY2_FILE)));
    assert.equal(
      Buffer.from(dataKey).toString("hex"),
      pgpVectors.find((v) => v.name === "example.yaml")?.dataKeyHex,
    );
    const none = resolverFor({ env: { GNUPGHOME: gnupgHome(), SOPS_GPG_EXEC: gpgBin } });
    await assert.rejects(unwrapDataKey([entries], none), (e: unknown) => {
      assert.ok(e instanceof NoKeyAvailableError);
      assert.deepEqual(e.failures.map((f) => f.keyId).sort(), [KEY1, KEY2].sort());
      return true;
    });
  });
});

describe("PGP wrap", () => {
  test("OpenPGP.js wrap (key from a file) decrypts with gpg --decrypt", async () => {
    const secret = randomBytes(33);
    const enc = await key(KEY1, fileOnly(ALL_KEYS)).wrap(secret);
    assert.match(enc, /^-----BEGIN PGP MESSAGE-----\n[\s\S]*\n-----END PGP MESSAGE-----$/);
    const home = gnupgHome(ALL_KEYS);
    const out = execFileSync(gpgBin, ["--homedir", home, "--batch", "--decrypt"], {
      input: enc,
      stdio: "pipe",
    });
    assert.deepEqual(out, secret);
  });

  test("public keys from deps.pgp; private keys from deps.pgp unwrap", async () => {
    const priv = await openpgp.readPrivateKey({ armoredKey: readFileSync(KEY1_FILE, "utf8") });
    const pub = priv.toPublic().armor();
    const secret = randomBytes(32);
    const enc = await key(KEY1, { pgp: { publicKeys: [pub], gpg: false } }).wrap(secret);
    const out = await key(KEY1, { pgp: { privateKeys: [priv.armor()], gpg: false } }).unwrap(enc);
    assert.deepEqual(out, Uint8Array.from(secret));
  });

  test("gpg fallback: no key file, the key is in GNUPGHOME; also for RSA-1024", async () => {
    const home = gnupgHome(ALL_KEYS);
    for (const fp of [KEY1, KEY2]) {
      const secret = randomBytes(32);
      const enc = await key(fp, gpgEnv(home)).wrap(secret);
      assert.ok(!enc.endsWith("\n"), "trimmed like sops");
      assert.deepEqual(await key(fp, fileOnly(ALL_KEYS)).unwrap(enc), Uint8Array.from(secret));
    }
    // Key 2 from a key file: OpenPGP.js refuses RSA-1024, so gpg is used.
    const enc = await key(KEY2, { env: { BOOTSEAL_PGP_KEY_FILE: KEY2_FILE, ...gpgEnv(home).env } }).wrap(
      randomBytes(32),
    );
    assert.equal((await key(KEY2, fileOnly(KEY2_FILE)).unwrap(enc))?.length, 32);
  });

  test("FP! selects that exact subkey, in OpenPGP.js and in gpg", async () => {
    const priv = await openpgp.readPrivateKey({ armoredKey: readFileSync(KEY1_FILE, "utf8") });
    const sub = priv.getSubkeys()[0];
    assert.ok(sub);
    const subFp = `${sub.getFingerprint().toUpperCase()}!`;
    const home = gnupgHome(ALL_KEYS);
    for (const deps of [fileOnly(KEY1_FILE), gpgEnv(home)]) {
      const enc = await key(subFp, deps).wrap(randomBytes(32));
      const message = await openpgp.readMessage({ armoredMessage: enc });
      assert.deepEqual(
        message.getEncryptionKeyIDs().map((id) => id.toHex()),
        [sub.getKeyID().toHex()],
      );
    }
  });

  test("no public key anywhere: KEY_NOT_FOUND", async () => {
    await assert.rejects(key(KEY1, { pgp: { gpg: false } }).wrap(randomBytes(32)), code("KEY_NOT_FOUND"));
    await assert.rejects(key(KEY1, gpgEnv(gnupgHome())).wrap(randomBytes(32)), code("KEY_NOT_FOUND"));
  });
});

describe("PGP failures and input", () => {
  test("a key we do not hold -> null (key file only, and empty gpg keyring)", async () => {
    const enc = await key(KEY1, fileOnly(ALL_KEYS)).wrap(randomBytes(32));
    assert.equal(await key(KEY1, fileOnly(KEY2_FILE)).unwrap(enc), null);
    assert.equal(await key(KEY1, gpgEnv(gnupgHome())).unwrap(enc), null);
    // No gpg binary at all is "no credential here" too.
    assert.equal(await key(KEY1, { env: { SOPS_GPG_EXEC: "/nonexistent/gpg" } }).unwrap(enc), null);
  });

  test("garbage or tampered enc -> BAD_INPUT", async () => {
    const k = key(KEY1, fileOnly(ALL_KEYS));
    await assert.rejects(k.unwrap("garbage"), code("BAD_INPUT"));
    const enc = await k.wrap(randomBytes(32));
    // Flip one base64 character near the end of the encrypted packet (the MDC covers it)
    // and drop the CRC-24 line, which would otherwise catch the change first.
    const lines = enc.split("\n").filter((l) => !/^=[A-Za-z0-9+/]{4}$/.test(l));
    const last = lines.length - 2;
    const line = lines[last] as string;
    const i = Math.floor(line.length / 2);
    lines[last] = line.slice(0, i) + (line[i] === "A" ? "B" : "A") + line.slice(i + 1);
    const tampered = lines.join("\n");
    await assert.rejects(k.unwrap(tampered), code("BAD_INPUT"));
    await assert.rejects(key(KEY1, gpgEnv(gnupgHome(ALL_KEYS))).unwrap(tampered), code("BAD_INPUT"));
  });

  test("fingerprints: spaces removed, case and ! kept; junk refused; metadata fields", () => {
    const keys = pgpKeyType.fromUserInput(
      `FBC7 B9E2 A4F9 289A C0C1  D484 3D16 CEE4 A273 81B4, ${KEY2.toLowerCase()}!`,
      {},
    );
    assert.deepEqual(
      keys.map((k) => k.id),
      [KEY1, `${KEY2.toLowerCase()}!`],
    );
    assert.throws(() => pgpKeyType.fromUserInput("not-a-fingerprint", {}), code("BAD_INPUT"));
    const entry = keys[0]?.toMetadata("ENC", new Date("2024-01-02T03:04:05.678Z"));
    assert.deepEqual(
      [...(entry?.fields ?? [])],
      [
        ["created_at", "2024-01-02T03:04:05Z"],
        ["enc", "ENC"],
        ["fp", KEY1],
      ],
    );
    const bad = { kind: "pgp" as const, enc: "x", fields: new Map([["fp", KEY1]]) };
    assert.throws(() => pgpKeyType.fromMetadata(bad, {}), code("BAD_INPUT"));
  });

  test("key files: every block of a multi-block file is read; unreadable files are noted", async () => {
    const m = await loadPgpKeyMaterial({ env: { BOOTSEAL_PGP_KEY_FILE: `${ALL_KEYS}:/nonexistent.asc` } });
    const fps = m.privateKeys.map((k) => k.getFingerprint().toUpperCase());
    assert.deepEqual(fps.sort(), [KEY1, KEY2].sort());
    assert.ok(
      m.publicKeys.some(
        (k) => k.getFingerprint().toUpperCase() === "B611A2F9F11D0FF82568805119F9B5DAEA91FF86",
      ),
    );
    assert.deepEqual(m.notes, ["BOOTSEAL_PGP_KEY_FILE: cannot read /nonexistent.asc"]);
  });
});
