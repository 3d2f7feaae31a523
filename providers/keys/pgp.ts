/**
 * PGP master keys (sops `pgp/keysource.go`): OpenPGP.js for keys we are given, the `gpg`
 * binary as the fallback, as sops falls back from its Go library to `gpg`.
 *
 * Keys we are given: armoured (or binary) keys in the files listed in BOOTSEAL_PGP_KEY_FILE
 * (`:`-separated; private keys also serve as public keys) and in `deps.pgp`. Files often
 * hold several armoured blocks in a row and OpenPGP.js reads only the first block of a
 * string, so blocks are split here. Passphrase-protected private keys are skipped (gpg and
 * its agent can still use them).
 *
 * gpg: the binary is SOPS_GPG_EXEC or `gpg`, with `--homedir $GNUPGHOME` when the
 * environment names one. Wrap runs sops's own `gpg --encrypt` command line rather than
 * exporting the key, so gpg applies its usual key selection (a fingerprint ending in `!`
 * picks that subkey), trust and expiry rules.
 */
import { readFile } from "node:fs/promises";
import type * as openpgp from "openpgp";
import type { CallOptions } from "../../src/call-options.ts";
import {
  entryString,
  type KeyEntry,
  type KeyKindFormat,
  type MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";
import { lazyModule } from "../lazy-module.ts";
import { type BaseDeps, itemText, type MasterKeyType, newEntry } from "./key-type.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters
// (process.stdin among them), which costs every CLI run start-up time.
const processEnv = process.env;

type Env = Readonly<Record<string, string | undefined>>;

/** `pgp` in ProviderDeps. */
export interface PgpOptions {
  /** Armoured public keys (one or more blocks per string). */
  readonly publicKeys?: readonly string[];
  /** Armoured unencrypted private keys. */
  readonly privateKeys?: readonly string[];
  /** false: never run the gpg binary (default true, as sops). */
  readonly gpg?: boolean;
}

export interface PgpKeyMaterial {
  readonly publicKeys: openpgp.Key[];
  readonly privateKeys: openpgp.PrivateKey[];
  /** Safe notes on what could not be used. */
  readonly notes: string[];
}

const FINGERPRINT = /^(?:[0-9A-Fa-f]{16}|[0-9A-Fa-f]{40}|[0-9A-Fa-f]{64})!?$/;
/** Anonymous recipient (gpg --throw-keyids): any of our keys may be the one. */
const WILDCARD_KEY_ID = "0000000000000000";
const ARMOURED_KEY_BLOCK =
  /-----BEGIN PGP (PUBLIC|PRIVATE) KEY BLOCK-----[\s\S]*?-----END PGP \1 KEY BLOCK-----/g;

/** OpenPGP.js loads when a key or message is read, not with the registry: it is large. */
const openpgpModule = lazyModule(() => import("openpgp"));
const loadOpenpgp = openpgpModule.load;

export interface PgpDeps extends BaseDeps {
  readonly pgp?: PgpOptions;
}

/** sops `pgp` entries (stores.go pgpkey). */
export const PGP_FORMAT: KeyKindFormat = {
  kind: "pgp",
  fields: ["created_at", "enc", "fp"],
  omitEmpty: [],
  mapFields: [],
  alwaysInGroup: false,
  readRank: 5,
  decryptionRank: 1,
  identity: (entry) => entryString(entry, "fp"),
  encSyntax: /^\s*-----BEGIN PGP MESSAGE-----\r?\n[\s\S]*?-----END PGP MESSAGE-----\s*$/,
  passphrase: { scheme: "pgp", provider: "pgp", wrapped: "text" },
};

/** pgp.NewMasterKeyFromFingerprint removes spaces; the shape is checked by fromMetadata. */
function pgpEntry(text: string): KeyEntry {
  const fp = text.replaceAll(" ", "");
  if (fp === "") throw new BootsealError("BAD_INPUT", "empty pgp fingerprint");
  return newEntry("pgp", [["fp", fp]]);
}

/** Every key in `text`: each armoured block read on its own; binary if there is no armour. */
async function readKeyText(text: Uint8Array, source: string, out: PgpKeyMaterial): Promise<void> {
  const asString = new TextDecoder().decode(text);
  const blocks = asString.match(ARMOURED_KEY_BLOCK);
  const pgp = await loadOpenpgp();
  try {
    if (blocks === null) {
      if (asString.includes("-----BEGIN PGP")) throw new Error("no key block");
      addKeys(await pgp.readKeys({ binaryKeys: text }), source, out);
      return;
    }
    for (const block of blocks) addKeys(await pgp.readKeys({ armoredKeys: block }), source, out);
  } catch {
    out.notes.push(`${source}: not a readable OpenPGP key`);
  }
}

function addKeys(keys: openpgp.Key[], source: string, out: PgpKeyMaterial): void {
  for (const key of keys) {
    if (key.isPrivate()) {
      if (key.isDecrypted()) out.privateKeys.push(key);
      else
        out.notes.push(
          `${source}: private key ${key.getFingerprint().toUpperCase()} has a passphrase, skipped`,
        );
      out.publicKeys.push(key.toPublic());
    } else {
      out.publicKeys.push(key);
    }
  }
}

/** Keys from BOOTSEAL_PGP_KEY_FILE and deps.pgp; a failing source is noted, not fatal. */
export async function loadPgpKeyMaterial(deps: PgpDeps): Promise<PgpKeyMaterial> {
  const env = deps.env ?? processEnv;
  const out: PgpKeyMaterial = { publicKeys: [], privateKeys: [], notes: [] };
  const encoder = new TextEncoder();
  const given = deps.pgp ?? {};
  for (const text of [...(given.privateKeys ?? []), ...(given.publicKeys ?? [])]) {
    await readKeyText(encoder.encode(text), "deps.pgp", out);
  }
  for (const path of (env.BOOTSEAL_PGP_KEY_FILE ?? "").split(":").filter(Boolean)) {
    let bytes: Uint8Array;
    try {
      bytes = await readFile(path);
    } catch {
      out.notes.push(`BOOTSEAL_PGP_KEY_FILE: cannot read ${path}`);
      continue;
    }
    await readKeyText(bytes, path, out);
  }
  return out;
}

// One load per deps object: the resolver builds a key per entry, all sharing deps.
const materialCache = new WeakMap<PgpDeps, Promise<PgpKeyMaterial>>();

function materialFor(deps: PgpDeps): Promise<PgpKeyMaterial> {
  let material = materialCache.get(deps);
  if (material === undefined) {
    material = loadPgpKeyMaterial(deps);
    materialCache.set(deps, material);
  }
  return material;
}

/** The key (and, for `FP!`, the exact subkey id) a fingerprint or long key id names. */
function findKey(
  keys: readonly openpgp.Key[],
  fp: string,
): { key: openpgp.Key; keyID?: openpgp.KeyID } | null {
  const exact = fp.endsWith("!");
  const wanted = (exact ? fp.slice(0, -1) : fp).toUpperCase();
  for (const key of keys) {
    for (const part of key.getKeys()) {
      const matches =
        part.getFingerprint().toUpperCase() === wanted || part.getKeyID().toHex().toUpperCase() === wanted;
      if (matches) return exact ? { key, keyID: part.getKeyID() } : { key };
    }
  }
  return null;
}

interface GpgResult {
  readonly ok: boolean;
  readonly stdout: Buffer;
  /** Last non-empty stderr line, trimmed and capped: gpg names keys there, never secrets. */
  readonly reason: string;
  readonly missing: boolean;
}

async function runGpg(
  env: Env,
  args: string[],
  input: Uint8Array | string,
  signal?: AbortSignal,
): Promise<GpgResult> {
  // Loaded here: only documents with pgp entries ever run gpg.
  const { spawn } = await import("node:child_process");
  const bin = env.SOPS_GPG_EXEC || "gpg";
  const home = env.GNUPGHOME;
  const fullArgs = home ? ["--homedir", home, ...args] : args;
  // The child sees the caller's environment (GNUPGHOME, GPG_AGENT_INFO, …) plus our PATH.
  const childEnv = { PATH: processEnv.PATH, ...env };
  return new Promise((resolve, reject) => {
    const child = spawn(bin, fullArgs, {
      env: childEnv,
      stdio: ["pipe", "pipe", "pipe"],
      ...(signal ? { signal } : {}),
    });
    const out: Buffer[] = [];
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString("utf8");
    });
    child.stdin.on("error", () => {}); // gpg may exit before reading everything
    child.on("error", (e: NodeJS.ErrnoException) => {
      if (signal?.aborted) reject(e);
      else
        resolve({
          ok: false,
          stdout: Buffer.alloc(0),
          reason: `cannot run ${bin}`,
          missing: e.code === "ENOENT",
        });
    });
    child.on("close", (code) => {
      const stdout = Buffer.concat(out);
      for (const chunk of out) chunk.fill(0);
      const lines = err.split("\n").map((l) => l.trim());
      const reason = (lines.filter(Boolean).pop() ?? `exit ${code}`).slice(0, 200);
      resolve({ ok: code === 0, stdout, reason, missing: false });
    });
    child.stdin.end(input);
  });
}

/** Short id for --trusted-key, keeping a trailing `!` (sops shortenFingerprint, issue 1365). */
function shortFingerprint(fp: string): string {
  const length = fp.endsWith("!") ? 17 : 16;
  return fp.length > length ? fp.slice(-length) : fp;
}

function pgpKey(fp: string, deps: PgpDeps): MasterKey {
  const env = deps.env ?? processEnv;
  const useGpg = deps.pgp?.gpg !== false;

  async function wrapWithGpg(secret: Uint8Array, signal?: AbortSignal): Promise<string> {
    const args = ["--batch", "--no-default-recipient", "--yes", "--encrypt", "-a", "-r", fp];
    args.push("--trusted-key", shortFingerprint(fp), "--no-encrypt-to");
    const result = await runGpg(env, args, secret, signal);
    if (!result.ok || result.stdout.length === 0) {
      throw new BootsealError("KEY_NOT_FOUND", `pgp: cannot encrypt to ${fp} with gpg: ${result.reason}`);
    }
    return result.stdout.toString("utf8").trim();
  }

  return {
    kind: "pgp",
    id: PGP_FORMAT.identity(newEntry("pgp", [["fp", fp]])),

    async wrap(secret: Uint8Array, options?: CallOptions): Promise<string> {
      const found = findKey((await materialFor(deps)).publicKeys, fp);
      if (found !== null) {
        try {
          const pgp = await loadOpenpgp();
          const message = await pgp.createMessage({ binary: secret, format: "binary" });
          const armoured = await pgp.encrypt({
            message,
            encryptionKeys: found.key,
            ...(found.keyID ? { encryptionKeyIDs: found.keyID } : {}),
          });
          // gpg's output reaches sops trimmed, so sops documents carry no final newline.
          return armoured.trim();
        } catch (cause) {
          // e.g. an RSA-1024 key, which OpenPGP.js refuses to encrypt to: gpg may accept it.
          if (!useGpg) throw new BootsealError("UNSUPPORTED", `pgp: cannot encrypt to ${fp}`, { cause });
        }
      }
      if (!useGpg) throw new BootsealError("KEY_NOT_FOUND", `pgp: no public key for ${fp}`);
      return wrapWithGpg(secret, options?.signal);
    },

    async unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null> {
      const pgp = await loadOpenpgp();
      let message: openpgp.Message<string>;
      try {
        message = await pgp.readMessage({ armoredMessage: enc });
      } catch (cause) {
        throw new BootsealError("BAD_INPUT", `pgp: enc for ${fp} is not an OpenPGP message`, { cause });
      }
      const ids = message.getEncryptionKeyIDs();
      const candidates = (await materialFor(deps)).privateKeys.filter((key) =>
        ids.some((id) => key.getKeys(id).length > 0 || id.toHex() === WILDCARD_KEY_ID),
      );
      let libraryError: unknown;
      if (candidates.length > 0) {
        try {
          const { data } = await pgp.decrypt({ message, decryptionKeys: candidates, format: "binary" });
          if (data.length > 0) return data;
          libraryError = new Error("empty plaintext");
        } catch (cause) {
          libraryError = cause;
        }
      }
      if (!useGpg) {
        if (libraryError === undefined) return null;
        throw new BootsealError("BAD_INPUT", `pgp: could not decrypt enc for ${fp}`, { cause: libraryError });
      }
      const result = await runGpg(env, ["--batch", "-d"], enc, options?.signal);
      if (result.ok && result.stdout.length > 0) {
        const data = new Uint8Array(result.stdout);
        result.stdout.fill(0);
        return data;
      }
      // No gpg, or gpg has no secret key for it: no credential here, unless our own key
      // matched and still failed (a damaged enc).
      if (libraryError === undefined && (result.missing || /no secret key/i.test(result.reason))) return null;
      throw new BootsealError("BAD_INPUT", `pgp: could not decrypt enc for ${fp}: ${result.reason}`, {
        cause: libraryError,
      });
    },

    toMetadata(enc: string, createdAt: Date): KeyEntry {
      return {
        kind: "pgp",
        enc,
        fields: new Map([
          ["created_at", createdAt.toISOString().replace(/\.\d{3}Z$/, "Z")],
          ["enc", enc],
          ["fp", fp],
        ]),
      };
    },
  };
}

function checkFingerprint(fp: string): string {
  // sops removes spaces (NewMasterKeyFromFingerprint); the rest is kept as given.
  const cleaned = fp.replace(/ /g, "");
  if (!FINGERPRINT.test(cleaned)) throw new BootsealError("BAD_INPUT", `pgp: not a fingerprint: ${cleaned}`);
  return cleaned;
}

export const pgpKeyType: MasterKeyType<"pgp", PgpDeps> = {
  kind: "pgp",
  format: PGP_FORMAT,
  flag: {
    flag: "pgp",
    short: "p",
    env: "SOPS_PGP_FP",
    help: "comma separated list of PGP fingerprints",
    example: "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4",
    rank: 4,
  },
  config: { groupKey: "pgp", groupItem: "string", shorthandKey: "pgp" },

  entryFromText: pgpEntry,

  entriesFromConfig(item) {
    return [pgpEntry(itemText(item, "pgp"))];
  },

  fromMetadata(entry: KeyEntry, deps: PgpDeps): MasterKey {
    const fp = entry.fields.get("fp");
    if (typeof fp !== "string" || fp === "") throw new BootsealError("BAD_INPUT", "pgp entry without fp");
    const created = entry.fields.get("created_at");
    // sops refuses a file whose created_at does not parse.
    if (typeof created !== "string" || Number.isNaN(Date.parse(created))) {
      throw new BootsealError("BAD_INPUT", `pgp entry ${fp}: created_at is missing or not a time`);
    }
    return pgpKey(checkFingerprint(fp), deps);
  },

  fromUserInput(text: string, deps: PgpDeps): MasterKey[] {
    return text
      .split(",")
      .filter((part) => part.trim() !== "")
      .map((part) => pgpKey(checkFingerprint(part.trim()), deps));
  },
};
