/**
 * age master keys (sops `age/keysource.go`), on the `age-encryption` package (typage).
 *
 * Supported recipients: X25519 `age1…`, hybrid post-quantum `age1pq1…` (sops 3.12+), and SSH
 * `ssh-ed25519`/`ssh-rsa` keys (./age-ssh.ts, since typage has no SSH support), with SSH
 * identities from sops's SSH sources, and plugins (./age-plugin.ts): recipients `age1name1…`
 * and identities `AGE-PLUGIN-NAME-1…`, run through the `age-plugin-name` binary on PATH.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { armor, Decrypter, Encrypter, type Identity } from "age-encryption";
import type { CallOptions } from "../../src/call-options.ts";
import {
  entryString,
  type KeyEntry,
  type KeyKindFormat,
  type MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError, type ErrorCode } from "../../src/errors.ts";
import { pluginIdentity, pluginIdentityName, pluginRecipient, pluginRecipientName } from "./age-plugin.ts";
import { loadSshIdentities, sshRecipient } from "./age-ssh.ts";
import { isX25519Recipient, x25519Recipient } from "./age-x25519.ts";
import { type BaseDeps, itemText, type MasterKeyType, newEntry } from "./key-type.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters
// (process.stdin among them), which costs every CLI run start-up time.
const processEnv = process.env;

type Env = Readonly<Record<string, string | undefined>>;

/** What the identity sources gave: secret identity strings, plus safe notes on what failed. */
export interface AgeIdentities {
  readonly identities: string[];
  /** SSH identities (SOPS_AGE_SSH_PRIVATE_KEY_FILE/_CMD, ~/.ssh/id_ed25519, ~/.ssh/id_rsa), tried first as sops does. */
  readonly ssh: Identity[];
  /** One per source that failed (location and reason; never key material). */
  readonly errors: { readonly code: ErrorCode; readonly message: string }[];
}

/** sops `age` entries (stores.go ageKey): no created_at; written in every key group. */
export const AGE_FORMAT: KeyKindFormat = {
  kind: "age",
  fields: ["enc", "recipient"],
  omitEmpty: [],
  mapFields: [],
  alwaysInGroup: true,
  readRank: 6,
  decryptionRank: 0,
  identity: (entry) => entryString(entry, "recipient"),
  encSyntax:
    /^\s*-----BEGIN AGE ENCRYPTED FILE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END AGE ENCRYPTED FILE-----\s*$/,
  passphrase: { scheme: "age", provider: "age", wrapped: "text" },
};

/** age.MasterKeyFromRecipient: trimmed; the recipient's encoding is checked by fromMetadata. */
function ageEntry(text: string): KeyEntry {
  const recipient = text.trim();
  if (!recipient.startsWith("age1") && !recipient.startsWith("ssh-")) {
    throw new BootsealError("BAD_INPUT", "unknown age recipient type");
  }
  return newEntry("age", [["recipient", recipient]]);
}

/** SOPS_AGE_KEY_CMD may hang; sops waits forever, a bootstrap agent should not. */
const KEY_CMD_TIMEOUT_MS = 60_000;

/**
 * The Bech32 data alphabet has no '1', so a second '1' means `age1<plugin>1…`; sops checks
 * age1pq1 (built in since 3.12) before its plugin test, and so do we.
 */
function isPluginRecipient(recipient: string): boolean {
  return recipient.startsWith("age1") && !recipient.startsWith("age1pq1") && recipient.split("1").length > 2;
}

/** Classifies a recipient the way sops `parseRecipient` does; throws for what we cannot use. */
function checkRecipient(recipient: string): void {
  if (recipient.startsWith("ssh-")) {
    try {
      sshRecipient(recipient);
      return;
    } catch (cause) {
      const code = cause instanceof BootsealError ? cause.code : "BAD_INPUT";
      const why = cause instanceof Error ? cause.message : "invalid";
      throw new BootsealError(code, `age: invalid SSH recipient (${why}): ${recipient}`, { cause });
    }
  }
  if (!recipient.startsWith("age1")) {
    throw new BootsealError("BAD_INPUT", `age: unknown recipient type: ${recipient}`);
  }
  if (isPluginRecipient(recipient)) {
    pluginRecipientName(recipient);
    return;
  }
  try {
    new Encrypter().addRecipient(recipient);
  } catch (cause) {
    throw new BootsealError("BAD_INPUT", `age: invalid recipient: ${recipient}`, { cause });
  }
}

/** Go's os.UserConfigDir, with sops's XDG_CONFIG_HOME override on macOS. */
export function userConfigDir(env: Env, platform: NodeJS.Platform = process.platform): string | null {
  const xdg = env.XDG_CONFIG_HOME;
  if (platform === "win32") return env.AppData || null;
  if (platform === "darwin") {
    if (xdg) return xdg;
    return env.HOME ? join(env.HOME, "Library", "Application Support") : null;
  }
  if (xdg) return xdg;
  return env.HOME ? join(env.HOME, ".config") : null;
}

/**
 * Identities from one source. Like sops `parseIdentities`: empty lines and `#` lines are
 * skipped; SOPS_AGE_KEY may hold several identities per line. One bad identity makes sops
 * drop the whole source, and so do we. Returns the reason instead of throwing.
 */
function parseIdentities(text: string, location: string, wordsPerLine: boolean): string[] | string {
  const out: string[] = [];
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const line = (lines[n] ?? "").replace(/\r$/, "");
    if (line === "" || line.startsWith("#")) continue;
    for (const word of wordsPerLine ? line.split(/\s+/).filter(Boolean) : [line]) {
      if (word.startsWith("AGE-PLUGIN-")) {
        if (pluginIdentityName(word) === null) return `${location}: invalid identity on line ${n + 1}`;
        out.push(word);
        continue;
      }
      try {
        new Decrypter().addIdentity(word);
      } catch {
        return `${location}: invalid identity on line ${n + 1}`;
      }
      out.push(word);
    }
  }
  return out;
}

/** A minimal shlex split for SOPS_AGE_KEY_CMD (sops runs it without a shell). */
export function splitCommand(command: string): string[] {
  const args: string[] = [];
  let current = "";
  let inWord = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < command.length; i++) {
    const c = command[i] as string;
    if (quote === "'") {
      if (c === "'") quote = null;
      else current += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === "\\" && i + 1 < command.length && '"\\$`'.includes(command[i + 1] as string))
        current += command[++i];
      else current += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\" && i + 1 < command.length) {
      current += command[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) args.push(current);
      current = "";
      inWord = false;
    } else {
      current += c;
      inWord = true;
    }
  }
  if (quote !== null) throw new BootsealError("USAGE", "SOPS_AGE_KEY_CMD: unterminated quote");
  if (inWord) args.push(current);
  return args;
}

async function runKeyCommand(
  command: string,
  env: Env,
  recipient: string,
  signal?: AbortSignal,
): Promise<string> {
  const [file, ...args] = splitCommand(command);
  if (file === undefined) throw new Error("empty command");
  const childEnv = { ...processEnv, ...env, SOPS_AGE_RECIPIENT: recipient };
  // Loaded here: most runs never start a key command, and the module costs start-up time.
  const { execFile } = await import("node:child_process");
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { env: childEnv, timeout: KEY_CMD_TIMEOUT_MS, maxBuffer: 1 << 20, ...(signal ? { signal } : {}) },
      (err, stdout) => (err ? reject(err) : resolve(stdout)),
    );
  });
}

/**
 * Loads age identities the way sops does, from, in order: SOPS_AGE_KEY, SOPS_AGE_KEY_FILE,
 * SOPS_AGE_KEY_CMD (run with SOPS_AGE_RECIPIENT = `recipient`; skipped when no recipient is
 * given), and `<user config dir>/sops/age/keys.txt` when it exists. A failing source is
 * noted and the others still count.
 */
export async function loadAgeIdentities(
  env: Env = processEnv,
  recipient?: string,
  signal?: AbortSignal,
): Promise<AgeIdentities> {
  const identities: string[] = [];
  const runCommand = (command: string) => runKeyCommand(command, env, recipient ?? "", signal);
  const { identities: ssh, errors } = await loadSshIdentities(env, recipient, runCommand);
  const add = (text: string, location: string, words: boolean) => {
    const parsed = parseIdentities(text, location, words);
    if (typeof parsed === "string") errors.push({ code: "BAD_INPUT", message: parsed });
    else identities.push(...parsed);
  };

  if (env.SOPS_AGE_KEY !== undefined) add(env.SOPS_AGE_KEY, "SOPS_AGE_KEY", true);
  if (env.SOPS_AGE_KEY_FILE !== undefined) {
    try {
      add(await readFile(env.SOPS_AGE_KEY_FILE, "utf8"), "SOPS_AGE_KEY_FILE", false);
    } catch {
      errors.push({ code: "IO_ERROR", message: `SOPS_AGE_KEY_FILE: cannot read ${env.SOPS_AGE_KEY_FILE}` });
    }
  }
  if (env.SOPS_AGE_KEY_CMD !== undefined && recipient !== undefined) {
    try {
      add(await runKeyCommand(env.SOPS_AGE_KEY_CMD, env, recipient, signal), "SOPS_AGE_KEY_CMD", false);
    } catch (err) {
      signal?.throwIfAborted();
      const why = err instanceof BootsealError ? err.message : "command failed";
      errors.push({ code: "IO_ERROR", message: `SOPS_AGE_KEY_CMD: ${why}` });
    }
  }
  const configDir = userConfigDir(env);
  if (configDir !== null) {
    const path = join(configDir, "sops", "age", "keys.txt");
    try {
      add(await readFile(path, "utf8"), path, false);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        errors.push({ code: "IO_ERROR", message: `cannot read ${path}` });
      }
    }
  }
  return { identities, ssh, errors };
}

/** One ReadableStream holding `bytes`: typage then hands back a stream, not a whole buffer. */
function streamOf(bytes: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
}

/**
 * All of a stream's bytes in a fresh Uint8Array. typage's own reader goes through `Response`,
 * whose first use loads Node's fetch implementation (undici), a visible part of a CLI run; this does not.
 * `wipe`: zero the intermediate chunks (a decrypted data key).
 */
async function readAllBytes(stream: ReadableStream<Uint8Array>, wipe: boolean): Promise<Uint8Array> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    length += value.length;
  }
  const out = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
    if (wipe) chunk.fill(0);
  }
  return out;
}

/** Registered last: if typage reaches it, no identity matched any stanza (not corruption). */
function noMatchSentinel(): { identity: Identity; reached: () => boolean } {
  let reached = false;
  return {
    identity: {
      unwrapFileKey: () => {
        reached = true;
        return null;
      },
    },
    reached: () => reached,
  };
}

function ageKey(recipient: string, deps: BaseDeps): MasterKey {
  const env = deps.env ?? processEnv;
  let loaded: Promise<AgeIdentities> | undefined;
  return {
    kind: "age",
    id: AGE_FORMAT.identity(newEntry("age", [["recipient", recipient]])),

    async wrap(secret: Uint8Array): Promise<string> {
      const encrypter = new Encrypter();
      encrypter.addRecipient(
        recipient.startsWith("ssh-")
          ? sshRecipient(recipient)
          : isPluginRecipient(recipient)
            ? pluginRecipient(recipient, env)
            : isX25519Recipient(recipient)
              ? x25519Recipient(recipient)
              : recipient,
      );
      // Same armour as Go's age/armor: 64-column base64 and a final newline.
      return armor.encode(await readAllBytes(await encrypter.encrypt(streamOf(secret)), false));
    },

    async unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null> {
      let file: Uint8Array;
      try {
        file = armor.decode(enc);
      } catch (cause) {
        throw new BootsealError("BAD_INPUT", `age: enc for ${recipient} is not an age armour`, { cause });
      }
      // Loaded at most once per key, like sops's parsedIdentities.
      if (loaded === undefined) {
        loaded = loadAgeIdentities(env, recipient, options?.signal);
        // An aborted load must not stick to the key.
        loaded.catch(() => {
          loaded = undefined;
        });
      }
      const { identities, ssh, errors } = await loaded;
      const sentinel = noMatchSentinel();
      if (identities.length + ssh.length > 0) {
        const decrypter = new Decrypter();
        for (const identity of [...ssh, ...identities]) {
          decrypter.addIdentity(
            typeof identity === "string" && identity.startsWith("AGE-PLUGIN-")
              ? pluginIdentity(identity, env)
              : identity,
          );
        }
        decrypter.addIdentity(sentinel.identity);
        try {
          return await readAllBytes(await decrypter.decrypt(streamOf(file)), true);
        } catch (cause) {
          // An identity's own verdict (a passphrase-protected SSH key matched) stands.
          if (cause instanceof BootsealError) throw cause;
          if (!sentinel.reached()) {
            throw new BootsealError("BAD_INPUT", `age: could not decrypt enc for ${recipient}`, { cause });
          }
        }
      }
      const first = errors[0];
      if (first === undefined) return null;
      // No match, and some source was unusable: say why instead of a bare "no key".
      const detail = errors.map((e) => e.message).join("; ");
      throw new BootsealError(first.code, `age: no identity for ${recipient} (${detail})`);
    },

    toMetadata(enc: string): KeyEntry {
      return {
        kind: "age",
        enc,
        fields: new Map([
          ["recipient", recipient],
          ["enc", enc],
        ]),
      };
    },
  };
}

export const ageKeyType: MasterKeyType<"age"> = {
  kind: "age",
  format: AGE_FORMAT,
  flag: {
    flag: "age",
    short: "a",
    env: "SOPS_AGE_RECIPIENTS",
    help: "comma separated list of age recipients",
    example: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p",
    rank: 6,
  },
  config: { groupKey: "age", groupItem: "string", shorthandKey: "age" },

  entryFromText: ageEntry,

  entriesFromConfig(item) {
    return itemText(item, "age").split(",").map(ageEntry);
  },

  fromMetadata(entry: KeyEntry, deps: BaseDeps): MasterKey {
    const recipient = entry.fields.get("recipient");
    if (typeof recipient !== "string" || recipient.trim() === "") {
      throw new BootsealError("BAD_INPUT", "age entry without a recipient");
    }
    const trimmed = recipient.trim();
    checkRecipient(trimmed);
    return ageKey(trimmed, deps);
  },

  fromUserInput(text: string, deps: BaseDeps): MasterKey[] {
    const keys: MasterKey[] = [];
    for (const part of text.split(",")) {
      const recipient = part.trim();
      if (recipient === "") continue;
      checkRecipient(recipient);
      keys.push(ageKey(recipient, deps));
    }
    return keys;
  },
};
