/**
 * HashiCorp Vault / OpenBao transit master keys (sops `hcvault/keysource.go`), over the HTTP
 * API with the built-in fetch.
 *
 * Wrap: POST {vault_address}/v1/{engine_path}/encrypt/{key_name} with `plaintext` = standard
 * base64 of the raw secret (the API's transport encoding); enc is Vault's `vault:vN:…` string
 * verbatim. Unwrap: …/decrypt/{key_name} with `ciphertext` = enc. Note that Vault creates a
 * missing transit key on encrypt when the token may (sops behaves the same).
 *
 * Token: `deps.vaultTransit.token`, else VAULT_TOKEN, else `~/.vault-token` (sops's order).
 * With no token at all, unwrap answers null (no credential here) and wrap refuses. With
 * VAULT_AUTH_METHOD approle, jwt or kubernetes the key logs in first instead (vault-auth.ts)
 * and no static token is read, so a stray VAULT_TOKEN is never used in its place.
 * SOPS_HC_VAULT_ALLOWLIST (`all`, `none` or comma-separated URL prefixes) is honoured as in sops.
 */
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import type { CallOptions } from "../../src/call-options.ts";
import {
  entryString,
  type KeyEntry,
  type KeyKindFormat,
  type MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError, type ErrorCode } from "../../src/errors.ts";
import { type RetryPolicy, retryCall, retryPolicy } from "../../src/retry.ts";
import { checkCreatedAt, formatCreatedAt, stringField } from "./entry-fields.ts";
import { type BaseDeps, itemText, type MasterKeyType, newEntry } from "./key-type.ts";
import { cachedVaultLogin, vaultLoginFromEnv } from "./vault-auth.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters
// (process.stdin among them), which costs every CLI run start-up time.
const processEnv = process.env;

type Env = Readonly<Record<string, string | undefined>>;

/** `vaultTransit` in ProviderDeps. */
export interface VaultTransitOptions {
  readonly token?: string;
  readonly retry?: Partial<RetryPolicy>;
}

interface VaultSettings {
  readonly address: string;
  readonly enginePath: string;
  readonly keyName: string;
}

const PREFIXED_PATH = /\/[^/]+\/v[\d]+\/[^/]+\/[^/]+\/[^/]+/;
const KEY_PATH = /\/v[\d]+\/[^/]+\/[^/]+\/[^/]+/;

export interface VaultTransitDeps extends BaseDeps {
  readonly vaultTransit?: VaultTransitOptions;
}

/** sops `hc_vault` entries (stores.go vaultkey): written in every key group, even empty. */
export const VAULT_TRANSIT_FORMAT: KeyKindFormat = {
  kind: "hc_vault",
  fields: ["created_at", "enc", "engine_path", "key_name", "vault_address"],
  omitEmpty: [],
  mapFields: [],
  alwaysInGroup: true,
  readRank: 4,
  decryptionRank: 6,
  identity: (entry) =>
    `${entryString(entry, "vault_address")}/v1/${entryString(entry, "engine_path")}/keys/${entryString(entry, "key_name")}`,
  // A transit ciphertext, as unwrap checks it.
  encSyntax: /^vault:v\d+:/,
  passphrase: { scheme: "hcvault", provider: "vault", wrapped: "text" },
};

const bad = (message: string): BootsealError => new BootsealError("BAD_INPUT", message);

/**
 * hcvault.NewMasterKeyFromURI, for flags and `.sops.yaml` alike:
 * `https://host:8200/v1/transit/keys/name` -> address `https://host:8200` (as written, like
 * Go's url.Parse), engine path `transit` (may hold `/`), key `name`. A prefix before `/v1/`
 * is refused, as sops refuses it; so are a query, a fragment and credentials (they would end
 * up in the metadata and in every log line).
 */
export function parseVaultKeyUri(uri: string): VaultSettings {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/.exec(uri);
  if (!m) throw bad("missing scheme in Vault URL (https://vault.example.com:8200/v1/transit/keys/NAME)");
  if (m[4] || m[5]) throw bad("Vault URL must not have a query or fragment");
  const authority = m[2] ?? "";
  if (authority.includes("@")) throw bad("hc_vault: credentials in the Vault URL");
  const address = `${m[1]}://${authority}`;
  try {
    new URL(address);
  } catch (cause) {
    throw new BootsealError("BAD_INPUT", "hc_vault: the Vault address is not a URL", { cause });
  }
  const path = m[3] || "/";
  if (PREFIXED_PATH.test(path)) throw bad("running Vault with a prefixed URL is not supported");
  if (!KEY_PATH.test(path)) {
    throw bad("Vault path is not like https://vault.example.com:8200/v1/transit/keys/NAME");
  }
  const dirs = path.replace(/^\/+|\/+$/g, "").split("/");
  const keyName = dirs[dirs.length - 1] ?? "";
  // Go's path.Join: drops empty elements and cleans `.`/`..`.
  const engine: string[] = [];
  for (const d of dirs.slice(1, -2)) {
    if (d === "" || d === ".") continue;
    if (d === ".." && engine.length > 0 && engine[engine.length - 1] !== "..") engine.pop();
    else engine.push(d);
  }
  return { address, enginePath: engine.join("/"), keyName };
}

/** A shorthand or `key_groups` Vault URI as an entry; "" is skipped (null), as sops does. */
function vaultEntry(uri: string): KeyEntry | null {
  if (uri === "") return null;
  const s = parseVaultKeyUri(uri);
  return newEntry("hc_vault", [
    ["vault_address", s.address],
    ["engine_path", s.enginePath],
    ["key_name", s.keyName],
  ]);
}

function vaultKeyId(s: VaultSettings): string {
  return VAULT_TRANSIT_FORMAT.identity(
    newEntry("hc_vault", [
      ["vault_address", s.address],
      ["engine_path", s.enginePath],
      ["key_name", s.keyName],
    ]),
  );
}

/** sops getAllowlist/Allows. */
function checkAllowlist(address: string, env: Env): void {
  const raw = env.SOPS_HC_VAULT_ALLOWLIST || "all";
  if (raw === "all") return;
  const withSlash = (s: string) => (s.endsWith("/") ? s : `${s}/`);
  const uris =
    raw === "none"
      ? []
      : raw.split(",").map((entry, i) => {
          const t = entry.trim();
          if (t === "") throw new BootsealError("USAGE", `SOPS_HC_VAULT_ALLOWLIST's entry ${i + 1} is empty`);
          return withSlash(t);
        });
  if (!uris.some((prefix) => withSlash(address).startsWith(prefix))) {
    throw new BootsealError(
      "KEY_ACCESS_DENIED",
      `hc_vault: SOPS_HC_VAULT_ALLOWLIST does not allow ${address}`,
    );
  }
}

async function findToken(deps: VaultTransitDeps): Promise<string | null> {
  const env = deps.env ?? processEnv;
  const given = deps.vaultTransit?.token ?? env.VAULT_TOKEN;
  if (given) return given;
  try {
    const text = await readFile(join(env.HOME || homedir(), ".vault-token"), "utf8");
    return text.trim() || null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw new BootsealError("IO_ERROR", "hc_vault: cannot read ~/.vault-token", { cause: err });
  }
}

function codeForStatus(status: number, text: string): ErrorCode {
  if (status === 401 || status === 403) return "KEY_ACCESS_DENIED";
  if (status === 404) return "KEY_NOT_FOUND";
  if (status === 429 || status === 412 || status >= 500) return "KEY_UNAVAILABLE";
  if (/encryption key not found|key not found/i.test(text)) return "KEY_NOT_FOUND";
  return "BAD_INPUT";
}

const CAUSE = {
  KEY_ACCESS_DENIED: "access denied",
  KEY_NOT_FOUND: "key or engine not found",
  KEY_UNAVAILABLE: "unavailable",
  BAD_INPUT: "refused (wrong key or damaged ciphertext)",
} as const;

function vaultKey(s: VaultSettings, deps: VaultTransitDeps): MasterKey {
  const id = vaultKeyId(s);
  const env = deps.env ?? processEnv;
  const policy = retryPolicy(deps.vaultTransit?.retry);

  /** One transit call; resolves to the `data` object of the answer. */
  async function post(
    op: "encrypt" | "decrypt",
    token: string,
    body: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<Record<string, unknown>> {
    checkAllowlist(s.address, env);
    const url = `${s.address}/v1/${[s.enginePath, op, s.keyName].filter(Boolean).join("/")}`;
    const payload = JSON.stringify(body);
    const what = `hc_vault: ${op} with ${id}`;
    return retryCall(policy, what, "KEY_UNAVAILABLE", signal, async (attemptSignal) => {
      let res: Response;
      try {
        res = await fetch(url, {
          method: "POST",
          headers: { "X-Vault-Token": token, "Content-Type": "application/json" },
          body: payload,
          signal: attemptSignal,
        });
      } catch (cause) {
        signal?.throwIfAborted();
        const why = (cause as { cause?: { code?: string } }).cause?.code ?? (cause as Error).name;
        throw new BootsealError("KEY_UNAVAILABLE", `hc_vault: ${op} with ${id}: unreachable (${why})`, {
          cause,
        });
      }
      const text = await res.text();
      if (!res.ok) {
        // Vault's `errors` name the problem (permission denied, key not found): safe to show.
        let detail = "";
        try {
          detail = ((JSON.parse(text) as { errors?: string[] }).errors ?? []).join("; ").slice(0, 200);
        } catch {}
        const code = codeForStatus(res.status, detail);
        throw new BootsealError(
          code,
          `hc_vault: ${op} with ${id}: ${CAUSE[code as keyof typeof CAUSE] ?? "refused"} (HTTP ${res.status}${detail ? `: ${detail}` : ""})`,
        );
      }
      try {
        const data = (JSON.parse(text) as { data?: Record<string, unknown> }).data;
        if (data && typeof data === "object") return data;
      } catch {}
      throw new BootsealError(
        "BAD_INPUT",
        `hc_vault: ${op} with ${id}: the transit backend answered no data`,
      );
    });
  }

  /** The static token, or a login's (cached for this deps object); null: no credential here. */
  async function tokenFor(options: CallOptions | undefined): Promise<string | null> {
    const login = vaultLoginFromEnv(env);
    if (login === null) return findToken(deps);
    // Before any credential leaves the machine: an unlisted address gets no secret id or JWT.
    checkAllowlist(s.address, env);
    return cachedVaultLogin(deps, s.address, login, policy, options);
  }

  return {
    kind: "hc_vault",
    id,

    async wrap(secret: Uint8Array, options?: CallOptions): Promise<string> {
      const token = await tokenFor(options);
      if (token === null) throw new BootsealError("KEY_ACCESS_DENIED", `hc_vault: no Vault token for ${id}`);
      const plaintext = Buffer.from(secret.buffer, secret.byteOffset, secret.byteLength).toString("base64");
      const data = await post("encrypt", token, { plaintext }, options?.signal);
      const ciphertext = data.ciphertext;
      if (typeof ciphertext !== "string" || !ciphertext.startsWith("vault:")) {
        throw new BootsealError("BAD_INPUT", `hc_vault: encrypt with ${id}: no ciphertext in the answer`);
      }
      return ciphertext;
    },

    async unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null> {
      if (!/^vault:v\d+:/.test(enc)) {
        throw new BootsealError("BAD_INPUT", `hc_vault: enc for ${id} is not a Vault transit ciphertext`);
      }
      const token = await tokenFor(options);
      if (token === null) return null;
      const data = await post("decrypt", token, { ciphertext: enc }, options?.signal);
      const plaintext = data.plaintext;
      if (
        typeof plaintext !== "string" ||
        !/^[A-Za-z0-9+/]*={0,2}$/.test(plaintext) ||
        plaintext.length % 4
      ) {
        throw new BootsealError("BAD_INPUT", `hc_vault: decrypt with ${id}: the plaintext is not base64`);
      }
      const decoded = Buffer.from(plaintext, "base64");
      const out = new Uint8Array(decoded);
      decoded.fill(0);
      if (out.length === 0)
        throw new BootsealError("BAD_INPUT", `hc_vault: decrypt with ${id}: empty plaintext`);
      return out;
    },

    toMetadata(enc: string, createdAt: Date): KeyEntry {
      return {
        kind: "hc_vault",
        enc,
        fields: new Map([
          ["vault_address", s.address],
          ["engine_path", s.enginePath],
          ["key_name", s.keyName],
          ["created_at", formatCreatedAt(createdAt)],
          ["enc", enc],
        ]),
      };
    },
  };
}

export const vaultTransitKeyType: MasterKeyType<"hc_vault", VaultTransitDeps> = {
  kind: "hc_vault",
  format: VAULT_TRANSIT_FORMAT,
  flag: {
    flag: "hc-vault-transit",
    env: "SOPS_VAULT_URIS",
    help: "comma separated list of vault's key URI (e.g. 'https://vault.example.org:8200/v1/transit/keys/dev')",
    example: "https://vault.example.org:8200/v1/transit/keys/dev",
    rank: 5,
  },
  config: { groupKey: "hc_vault", groupItem: "string", shorthandKey: "hc_vault_transit_uri" },

  entryFromText: vaultEntry,

  entriesFromConfig(item) {
    const entry = vaultEntry(itemText(item, "hc_vault"));
    return entry === null ? [] : [entry];
  },

  fromMetadata(entry: KeyEntry, deps: VaultTransitDeps): MasterKey {
    const label = "hc_vault entry";
    const address = stringField(entry.fields, "vault_address", label);
    const enginePath = stringField(entry.fields, "engine_path", label);
    const keyName = stringField(entry.fields, "key_name", label);
    if (address === "" || keyName === "") {
      throw new BootsealError("BAD_INPUT", "hc_vault entry needs vault_address and key_name");
    }
    try {
      new URL(address);
    } catch (cause) {
      throw new BootsealError("BAD_INPUT", `hc_vault entry: vault_address is not a URL: ${address}`, {
        cause,
      });
    }
    checkCreatedAt(entry.fields.get("created_at"), `hc_vault entry ${address}`);
    return vaultKey({ address, enginePath, keyName }, deps);
  },

  fromUserInput(text: string, deps: VaultTransitDeps): MasterKey[] {
    return text
      .split(",")
      .filter((part) => part !== "")
      .map((part) => vaultKey(parseVaultKeyUri(part), deps));
  },
};
