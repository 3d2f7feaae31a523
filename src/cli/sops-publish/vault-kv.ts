/**
 * Writing a decrypted document to a Vault/OpenBao KV engine, as sops's VaultDestination does
 * with the Vault API client: the address from the rule, else VAULT_ADDR, else
 * https://127.0.0.1:8200; the token from VAULT_TOKEN (the API client reads no ~/.vault-token);
 * VAULT_NAMESPACE and VAULT_CACERT as the client reads them. The current secret is read
 * first and an equal one is left alone; a failed read only warns.
 */
import { readFileSync } from "node:fs";
import type { PublishDestination } from "../../config/sops-config.ts";
import type { Branch } from "../../envelope/sops/document.ts";
import { BootsealError } from "../../errors.ts";
import { send, statusError } from "../../http/client.ts";
import { comparableWithStored, vaultDataJson } from "./vault-data.ts";

type VaultDestination = Extract<PublishDestination, { kind: "vault" }>;
type Env = Readonly<Record<string, string | undefined>>;

const DEFAULT_ADDRESS = "https://127.0.0.1:8200";

export function vaultAddress(d: VaultDestination, env: Env): string {
  return d.address || env.VAULT_ADDR || DEFAULT_ADDRESS;
}

/** The API path of the secret: `<mount><path><name>`, with `data/` after the mount on KV v2. */
export function vaultSecretPath(d: VaultDestination, name: string): string {
  return d.kvVersion === 1 ? `${d.mount}${d.path}${name}` : `${d.mount}data/${d.path}${name}`;
}

function headers(env: Env): Record<string, string> {
  return {
    "content-type": "application/json",
    ...(env.VAULT_TOKEN ? { "x-vault-token": env.VAULT_TOKEN } : {}),
    ...(env.VAULT_NAMESPACE ? { "x-vault-namespace": env.VAULT_NAMESPACE } : {}),
  };
}

function caOf(env: Env): string | undefined {
  if (!env.VAULT_CACERT) return undefined;
  try {
    return readFileSync(env.VAULT_CACERT, "utf8");
  } catch (cause) {
    throw new BootsealError("IO_ERROR", `cannot read VAULT_CACERT ${env.VAULT_CACERT}`, { cause });
  }
}

function sameData(stored: unknown, wanted: unknown): boolean {
  return JSON.stringify(sortKeys(stored)) === JSON.stringify(sortKeys(wanted));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v === null || typeof v !== "object") return v;
  const o = v as Record<string, unknown>;
  return Object.fromEntries(
    Object.keys(o)
      .sort()
      .map((k) => [k, sortKeys(o[k])]),
  );
}

/** Resolves to the line sops logs when nothing was written, else undefined. */
export async function writeVaultSecret(
  d: VaultDestination,
  name: string,
  branches: readonly Branch[],
  env: Env,
  warn: (line: string) => void,
): Promise<string | undefined> {
  const secretPath = vaultSecretPath(d, name);
  const url = new URL(`${vaultAddress(d, env).replace(/\/+$/, "")}/v1/${secretPath}`);
  const data = vaultDataJson(branches);
  const ca = caOf(env);
  const common = { url, headers: headers(env), ...(ca === undefined ? {} : { ca }) };
  try {
    const res = await send({ method: "GET", ...common });
    if (res.status === 200 && comparableWithStored(branches)) {
      const stored = (JSON.parse(new TextDecoder().decode(res.body)) as { data?: { data?: unknown } }).data
        ?.data;
      if (stored !== undefined && sameData(stored, JSON.parse(data)))
        return `Secret in ${secretPath} is already up-to-date.`;
    } else if (res.status !== 200 && res.status !== 404) throw statusError(res, `GET ${url.href}`);
  } catch {
    warn(
      `Cannot check if destination secret already exists in ${secretPath}. New version will be created even if the data has not been changed.`,
    );
  }
  const body = new TextEncoder().encode(d.kvVersion === 1 ? data : `{"data":${data}}`);
  const res = await send({ method: "PUT", body, ...common });
  if (res.status < 200 || res.status > 299) throw statusError(res, `vault: PUT ${url.href}`);
  return undefined;
}
