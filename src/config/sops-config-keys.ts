/**
 * Master keys named in `.sops.yaml`, turned into metadata entries (`enc: ""`) the way sops's
 * config loader builds its keys (config/config.go and each keysource's constructor), and
 * the sops key identity strings (docs/sops-format.md section 8). Pure: no file system.
 */
import type { KeyEntry, KeyFieldValue, KeyKind } from "../../providers/keys/master-key.ts";
import { BootsealError } from "../errors.ts";

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", message);
}

function entry(kind: KeyKind, fields: [string, KeyFieldValue][]): KeyEntry {
  return { kind, enc: "", fields: new Map(fields) };
}

function field(e: KeyEntry, name: string): string {
  const value = e.fields.get(name);
  return typeof value === "string" ? value : "";
}

/**
 * The identity sops compares keys by (`MasterKey.ToString()`): de-duplication, rotate
 * `--rm-*`, updatekeys diffs.
 */
export function keyIdentity(e: KeyEntry): string {
  switch (e.kind) {
    case "age":
      return field(e, "recipient");
    case "pgp":
      return field(e, "fp");
    case "gcp_kms":
      return field(e, "resource_id");
    case "azure_kv":
      return `${field(e, "vault_url")}/keys/${field(e, "name")}/${field(e, "version")}`;
    case "hc_vault":
      return `${field(e, "vault_address")}/v1/${field(e, "engine_path")}/keys/${field(e, "key_name")}`;
    case "kms": {
      const role = field(e, "role");
      const arnRole = role ? `${field(e, "arn")}+${role}` : field(e, "arn");
      const ctx = e.fields.get("context");
      const context =
        typeof ctx === "object"
          ? Object.keys(ctx)
              .sort()
              .map((k) => `${k}:${ctx[k]}`)
              .join(",")
          : "";
      const profile = field(e, "aws_profile");
      if (profile) return `${arnRole}|${context}|${profile}`;
      return context ? `${arnRole}|${context}` : arnRole;
    }
  }
}

/** sops keeps the first of two keys of the same kind with the same identity (deduplicateKeygroup). */
export function dedupGroup(group: readonly KeyEntry[]): KeyEntry[] {
  const seen = new Set<string>();
  return group.filter((e) => {
    const id = `${e.kind}/${keyIdentity(e)}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/** age.MasterKeyFromRecipient: trimmed; the recipient's encoding is checked by the age provider. */
export function ageKey(recipient: string): KeyEntry {
  const r = recipient.trim();
  if (!r.startsWith("age1") && !r.startsWith("ssh-")) throw bad("unknown age recipient type");
  return entry("age", [["recipient", r]]);
}

/** pgp.NewMasterKeyFromFingerprint removes spaces. */
export function pgpKey(fingerprint: string): KeyEntry {
  const fp = fingerprint.replaceAll(" ", "");
  if (fp === "") throw bad("empty pgp fingerprint");
  return entry("pgp", [["fp", fp]]);
}

/** gcpkms.NewMasterKeyFromResourceID removes spaces. */
export function gcpKmsKey(resourceId: string): KeyEntry {
  const id = resourceId.replaceAll(" ", "");
  if (id === "") throw bad("empty gcp_kms resource_id");
  return entry("gcp_kms", [["resource_id", id]]);
}

export function kmsKey(
  arn: string,
  role: string,
  context: Readonly<Record<string, string>> | null,
  awsProfile: string,
): KeyEntry {
  if (arn === "") throw bad("empty kms arn");
  const fields: [string, KeyFieldValue][] = [["arn", arn]];
  if (role) fields.push(["role", role]);
  if (context && Object.keys(context).length > 0) fields.push(["context", { ...context }]);
  fields.push(["aws_profile", awsProfile]);
  return entry("kms", fields);
}

/**
 * kms.NewMasterKeyFromArn (the shorthand `kms:` list and `--kms`): spaces removed, and
 * `ARN+ROLE_ARN` split at `+arn:` (a role ARN always starts `arn:`; an ARN path may hold `+`).
 */
export function kmsKeyFromArn(
  text: string,
  context: Readonly<Record<string, string>> | null,
  awsProfile: string,
): KeyEntry {
  const arn = text.replaceAll(" ", "");
  const at = arn.indexOf("+arn:");
  return at > 0
    ? kmsKey(arn.slice(0, at), arn.slice(at + 1), context, awsProfile)
    : kmsKey(arn, "", context, awsProfile);
}

/**
 * `version` may be empty (sops 3.11+): sops then asks the vault for the current version at
 * encryption time; here that is left to the Azure provider, which must fill it in.
 */
export function azureKey(vaultUrl: string, name: string, version: string): KeyEntry {
  if (vaultUrl === "" || name === "") throw bad("azure_keyvault needs vaultUrl and key");
  return entry("azure_kv", [
    ["vault_url", vaultUrl],
    ["name", name],
    ["version", version],
  ]);
}

/** azkv.NewMasterKeyFromURL: `https://vault/keys/name[/version]`. */
export function azureKeyFromUrl(url: string): KeyEntry {
  const m = /^(https:\/\/[^/]+)\/keys\/([^/]+)(\/[^/]*)?$/.exec(url.trim());
  if (!m) throw bad("cannot parse azure_keyvault URL (https://VAULT/keys/NAME/VERSION)");
  return azureKey(m[1] ?? "", m[2] ?? "", (m[3] ?? "").slice(1));
}

/**
 * hcvault.NewMasterKeyFromURI: `https://host:8200/v1/transit/keys/name` -> address
 * `https://host:8200`, engine path `transit` (may hold `/`), key `name`; a path with a
 * prefix before `/v1/` is refused, as sops refuses it.
 */
export function vaultKeyFromUri(uri: string): KeyEntry {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/.exec(uri);
  if (!m) throw bad("missing scheme in Vault URL (https://vault.example.com:8200/v1/transit/keys/NAME)");
  if (m[4] || m[5]) throw bad("Vault URL must not have a query or fragment");
  const path = m[3] || "/";
  if (/\/[^/]+\/v\d+\/[^/]+\/[^/]+\/[^/]+/.test(path))
    throw bad("running Vault with a prefixed URL is not supported");
  if (!/\/v\d+\/[^/]+\/[^/]+\/[^/]+/.test(path)) {
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
  return entry("hc_vault", [
    ["vault_address", `${m[1]}://${m[2]}`],
    ["engine_path", engine.join("/")],
    ["key_name", keyName],
  ]);
}
