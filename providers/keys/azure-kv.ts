/**
 * Azure Key Vault master keys (sops `azkv/keysource.go`), on @azure/keyvault-keys.
 *
 * Wrap is the key's **encrypt** operation with RSA-OAEP-256 (not wrapKey: sops needs the
 * encrypt/decrypt permissions, and so do we, so entries stay interchangeable); enc is the
 * result as base64url without padding. Unwrap is decrypt with the same algorithm on
 * `name` at `version`. When no version is configured (a `.sops.yaml` key or a URL without
 * one), the current version is looked up before the first wrap and recorded, as sops 3.11+
 * does; until then `id` ends in `/` (sops's ToString with an empty version).
 *
 * Credential: `deps.azureKv.credential`, else @azure/identity's DefaultAzureCredential
 * (as sops). TLS is always verified; a private CA comes in through NODE_EXTRA_CA_CERTS.
 * `deps.azureKv.disableChallengeResourceVerification` is for emulators whose host is not
 * a vault domain (lowkey-vault).
 */
import type { TokenCredential } from "@azure/identity";
import type { CryptographyClient } from "@azure/keyvault-keys";
import type { CallOptions } from "../../src/call-options.ts";
import {
  entryString,
  type KeyEntry,
  type KeyKindFormat,
  type MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";
import { type RetryPolicy, retryCall, retryPolicy } from "../../src/retry.ts";
import { lazyModule } from "../lazy-module.ts";
import { checkCreatedAt, formatCreatedAt, stringField } from "./entry-fields.ts";
import { type BaseDeps, itemString, type MasterKeyType, newEntry } from "./key-type.ts";

/** `azureKv` in ProviderDeps. */
export interface AzureKvOptions {
  readonly credential?: TokenCredential;
  readonly disableChallengeResourceVerification?: boolean;
  readonly retry?: Partial<RetryPolicy>;
}

interface AzureSettings {
  readonly vaultUrl: string;
  readonly name: string;
  readonly version: string;
}

const ALGORITHM = "RSA-OAEP-256";
/** azkv.NewMasterKeyFromURL. */
const KEY_URL = /^(https:\/\/[^/]+)\/keys\/([^/]+)(\/[^/]*)?$/;

/** @azure/keyvault-keys loads on the first call, not with the registry. */
const loadKeyVaultSdk = lazyModule(() => import("@azure/keyvault-keys")).load;

export interface AzureKvDeps extends BaseDeps {
  readonly azureKv?: AzureKvOptions;
}

/** sops `azure_kv` entries (stores.go azkvkey). */
export const AZURE_KV_FORMAT: KeyKindFormat = {
  kind: "azure_kv",
  fields: ["created_at", "enc", "name", "vault_url", "version"],
  omitEmpty: [],
  mapFields: [],
  alwaysInGroup: false,
  readRank: 3,
  decryptionRank: 5,
  // azkv ToString: `%s/keys/%s/%s` whether or not there is a version.
  identity: (entry) =>
    `${entryString(entry, "vault_url")}/keys/${entryString(entry, "name")}/${entryString(entry, "version")}`,
  // Unpadded base64url, as unwrap reads it.
  encSyntax: /^[A-Za-z0-9_-]+$/,
  passphrase: { scheme: "azkv", provider: "azure", wrapped: "base64url" },
};

/**
 * `version` may be empty (sops 3.11+): sops then asks the vault for the current version at
 * encryption time, and so does this provider.
 */
function azureEntry(vaultUrl: string, name: string, version: string): KeyEntry {
  if (vaultUrl === "" || name === "")
    throw new BootsealError("BAD_INPUT", "azure_keyvault needs vaultUrl and key");
  return newEntry("azure_kv", [
    ["vault_url", vaultUrl],
    ["name", name],
    ["version", version],
  ]);
}

/** azkv.NewMasterKeyFromURL, for flags and `.sops.yaml` alike. */
function azureEntryFromUrl(url: string): KeyEntry {
  const s = parseAzureKeyUrl(url);
  return azureEntry(s.vaultUrl, s.name, s.version);
}

/** `https://VAULT/keys/NAME[/VERSION]`. */
export function parseAzureKeyUrl(url: string): AzureSettings {
  const m = KEY_URL.exec(url.trim());
  if (!m)
    throw new BootsealError(
      "BAD_INPUT",
      `azure_kv: not a key URL (https://VAULT/keys/NAME[/VERSION]): ${url}`,
    );
  return { vaultUrl: m[1] as string, name: m[2] as string, version: (m[3] ?? "").slice(1) };
}

/** Credential failures that mean "nothing configured here" rather than "refused". */
function isNoCredential(err: unknown): boolean {
  const e = err as { name?: string; errors?: unknown[] } | undefined;
  if (e?.name === "CredentialUnavailableError") return true;
  // DefaultAzureCredential: every source in the chain said "not configured here".
  return e?.name === "AggregateAuthenticationError" && (e.errors ?? []).every(isNoCredential);
}

export function mapAzureError(err: unknown, id: string, op: string): BootsealError {
  if (err instanceof BootsealError) return err;
  const e = err as { name?: string; code?: string; statusCode?: number };
  const name = e?.name ?? "Error";
  const what = `azure_kv: ${op} with ${id}`;
  if (isNoCredential(err) || name === "AuthenticationError" || name === "AggregateAuthenticationError") {
    return new BootsealError("KEY_ACCESS_DENIED", `${what}: no usable Azure credential (${name})`, {
      cause: err,
    });
  }
  const status = e?.statusCode;
  if (status === 401 || status === 403) {
    return new BootsealError("KEY_ACCESS_DENIED", `${what}: access denied (HTTP ${status})`, { cause: err });
  }
  if (status === 404) return new BootsealError("KEY_NOT_FOUND", `${what}: key not found`, { cause: err });
  if (status === undefined || status === 408 || status === 429 || status >= 500) {
    const why = status === undefined ? `unreachable (${e?.code ?? name})` : `unavailable (HTTP ${status})`;
    return new BootsealError("KEY_UNAVAILABLE", `${what}: ${why}`, { cause: err });
  }
  return new BootsealError(
    "BAD_INPUT",
    `${what}: refused, wrong key or damaged ciphertext (HTTP ${status})`,
    {
      cause: err,
    },
  );
}

function azureKey(s: AzureSettings, deps: AzureKvDeps): MasterKey {
  const given = deps.azureKv ?? {};
  const policy = retryPolicy(given.retry);
  let version = s.version;
  let credential: Promise<TokenCredential> | undefined;
  const currentId = () =>
    AZURE_KV_FORMAT.identity(
      newEntry("azure_kv", [
        ["vault_url", s.vaultUrl],
        ["name", s.name],
        ["version", version],
      ]),
    );
  const clientOptions = {
    // src/retry.ts is the only retry loop.
    retryOptions: { maxRetries: 0 },
    ...(given.disableChallengeResourceVerification ? { disableChallengeResourceVerification: true } : {}),
  };

  function getCredential(): Promise<TokenCredential> {
    // @azure/identity is loaded only when no credential is injected: it is large.
    credential ??= given.credential
      ? Promise.resolve(given.credential)
      : import("@azure/identity").then((m) => new m.DefaultAzureCredential());
    return credential;
  }

  async function call<T>(
    op: string,
    signal: AbortSignal | undefined,
    run: (o: object) => Promise<T>,
  ): Promise<T> {
    const what = `azure_kv: ${op} with ${currentId()}`;
    return retryCall(policy, what, "KEY_UNAVAILABLE", signal, async (abortSignal) => {
      try {
        return await run({ abortSignal, requestOptions: { timeout: policy.timeoutMs } });
      } catch (err) {
        throw mapAzureError(err, currentId(), op);
      }
    });
  }

  /** sops ensureKeyHasVersion: the key's current version, looked up once. */
  async function resolveVersion(signal: AbortSignal | undefined): Promise<string> {
    if (version) return version;
    const cred = await getCredential();
    const { KeyClient } = await loadKeyVaultSdk();
    const key = await call("look up the version of", signal, (o) =>
      new KeyClient(s.vaultUrl, cred, clientOptions).getKey(s.name, o),
    );
    const found = key.properties.version;
    if (!found) throw new BootsealError("KEY_NOT_FOUND", `azure_kv: ${currentId()} has no current version`);
    version = found;
    return found;
  }

  async function crypto(signal: AbortSignal | undefined): Promise<CryptographyClient> {
    const v = await resolveVersion(signal);
    const { CryptographyClient } = await loadKeyVaultSdk();
    return new CryptographyClient(`${s.vaultUrl}/keys/${s.name}/${v}`, await getCredential(), clientOptions);
  }

  return {
    kind: "azure_kv",
    get id() {
      return currentId();
    },

    async wrap(secret: Uint8Array, options?: CallOptions): Promise<string> {
      const client = await crypto(options?.signal);
      const out = await call("encrypt", options?.signal, (o) =>
        client.encrypt({ algorithm: ALGORITHM, plaintext: secret }, o),
      );
      return Buffer.from(out.result).toString("base64url");
    },

    async unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null> {
      // Go's RawURLEncoding: URL alphabet, no padding.
      if (enc === "" || !/^[A-Za-z0-9_-]+$/.test(enc) || enc.length % 4 === 1) {
        throw new BootsealError("BAD_INPUT", `azure_kv: enc for ${currentId()} is not unpadded base64url`);
      }
      if (!version) throw new BootsealError("BAD_INPUT", `azure_kv: entry ${currentId()} has no version`);
      const ciphertext = new Uint8Array(Buffer.from(enc, "base64url"));
      try {
        const client = await crypto(options?.signal);
        const out = await call("decrypt", options?.signal, (o) =>
          client.decrypt({ algorithm: ALGORITHM, ciphertext }, o),
        );
        if (out.result.length === 0)
          throw new BootsealError("BAD_INPUT", `azure_kv: ${currentId()}: empty plaintext`);
        // The SDK returns a Buffer; callers get a plain Uint8Array copy.
        return new Uint8Array(out.result);
      } catch (err) {
        // No Azure identity on this machine at all: try the next key.
        if (isNoCredential((err as { cause?: unknown }).cause)) return null;
        throw err;
      }
    },

    toMetadata(enc: string, createdAt: Date): KeyEntry {
      return {
        kind: "azure_kv",
        enc,
        fields: new Map([
          ["vault_url", s.vaultUrl],
          ["name", s.name],
          ["version", version],
          ["created_at", formatCreatedAt(createdAt)],
          ["enc", enc],
        ]),
      };
    },
  };
}

export const azureKvKeyType: MasterKeyType<"azure_kv", AzureKvDeps> = {
  kind: "azure_kv",
  format: AZURE_KV_FORMAT,
  flag: {
    flag: "azure-kv",
    env: "SOPS_AZURE_KEYVAULT_URLS",
    help: "comma separated list of Azure Key Vault URLs",
    example: "https://v.vault.azure.net/keys/k/0123456789abcdef0123456789abcdef",
    rank: 3,
  },
  config: { groupKey: "azure_keyvault", groupItem: "mapping", shorthandKey: "azure_keyvault" },

  entryFromText: azureEntryFromUrl,

  entriesFromConfig(item) {
    const what = "azure_keyvault key";
    return [
      azureEntry(
        itemString(item, "vaultUrl", what),
        itemString(item, "key", what),
        itemString(item, "version", what),
      ),
    ];
  },

  fromMetadata(entry: KeyEntry, deps: AzureKvDeps): MasterKey {
    const label = "azure_kv entry";
    const vaultUrl = stringField(entry.fields, "vault_url", label);
    const name = stringField(entry.fields, "name", label);
    if (!/^https:\/\/[^/]+$/.test(vaultUrl) || name === "" || name.includes("/")) {
      throw new BootsealError(
        "BAD_INPUT",
        `azure_kv entry needs an https vault_url and a key name (${vaultUrl})`,
      );
    }
    checkCreatedAt(entry.fields.get("created_at"), `azure_kv entry ${vaultUrl}/keys/${name}`);
    return azureKey({ vaultUrl, name, version: stringField(entry.fields, "version", label) }, deps);
  },

  fromUserInput(text: string, deps: AzureKvDeps): MasterKey[] {
    return text
      .split(",")
      .filter((part) => part.trim() !== "")
      .map((part) => azureKey(parseAzureKeyUrl(part), deps));
  },
};
