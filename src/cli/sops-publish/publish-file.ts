/**
 * One file of `publish` (sops's cmd/sops/subcommand/publish Run): the destination rule for
 * the path, the destination name, then S3/GCS get the encrypted file (re-encrypted for the
 * recreation rule's keys when it has any) and Vault gets the decrypted values.
 */
import { basename, extname, relative, resolve } from "node:path";
import { KEY_KINDS, type KeyKind, keyIdentity, type ProviderDeps } from "../../../providers/keys/index.ts";
import { openStore } from "../../../providers/stores/index.ts";
import { newKeyFromEntry } from "../../config/rule-keys.ts";
import {
  type DestinationRule,
  type PublishDestination,
  resolveCreationRule,
  type SopsConfig,
} from "../../config/sops-config.ts";
import { emitEncrypted, loadEncrypted } from "../../envelope/document.ts";
import type { Format } from "../../envelope/sops/codecs/codec.ts";
import { codecFor } from "../../envelope/sops/codecs/index.ts";
import { decryptDocument } from "../../envelope/sops/decrypt.ts";
import type { Branch } from "../../envelope/sops/document.ts";
import { encryptDocument } from "../../envelope/sops/encrypt.ts";
import type { KeyResolver, MasterKey } from "../../envelope/sops/master-key.ts";
import { BootsealError } from "../../errors.ts";
import type { CliIo } from "../command.ts";
import { indentFromConfig } from "../commands/encrypt.ts";
import { groupDiff } from "../commands/updatekeys.ts";
import { readInput } from "../file-io.ts";
import { emitOptions, pickFormats } from "../sops-file.ts";
import { vaultAddress, vaultSecretPath, writeVaultSecret } from "./vault-kv.ts";

export interface PublishFileOptions {
  readonly config: SopsConfig;
  readonly rule: DestinationRule;
  /** The file as the walk names it (the operand, or the operand joined with a sub-path). */
  readonly file: string;
  /** With --recursive: the operand, so the destination name is the path below it. */
  readonly root?: string;
  readonly omitExtensions: boolean;
  readonly deps: ProviderDeps;
  readonly resolve: KeyResolver;
  readonly order?: readonly KeyKind[];
  /** The recreation rule's keys, wrapped through the key services the flags name. */
  readonly through: (groups: MasterKey[][]) => MasterKey[][];
  /** Asks before the upload; false: cancelled. */
  readonly confirm: (question: string) => Promise<boolean>;
  readonly io: CliIo;
}

/** sops's Destination.Path: what the prompt shows. */
export function destinationUrl(d: PublishDestination, name: string, env: CliIo["env"]): string {
  if (d.kind === "s3") return `s3://${d.bucket}/${d.prefix}${name}`;
  if (d.kind === "gcs") return `gcs://${d.bucket}/${d.prefix}${name}`;
  return `${vaultAddress(d, env)}/v1/${vaultSecretPath(d, name)}`;
}

/** The name under the destination: the base name, or the path below the root; maybe without its extension. */
function destinationName(o: PublishFileOptions): string {
  const name = o.root === undefined ? basename(o.file) : relative(o.root, o.file);
  const ext = extname(o.file);
  return (o.omitExtensions || o.rule.omitExtensions) && ext !== "" && name.endsWith(ext)
    ? name.slice(0, -ext.length)
    : name;
}

async function decrypted(o: PublishFileOptions, format: Format, bytes: Uint8Array) {
  const doc = loadEncrypted(bytes, format, KEY_KINDS);
  const plain = await decryptDocument(doc.branches, doc.metadata, {
    resolve: o.resolve,
    ignoreMac: false,
    ...(o.order ? { order: o.order } : {}),
  });
  return { doc, plain };
}

/**
 * The bytes for S3/GCS: the file as it is, or re-encrypted under a new data key for the
 * recreation rule's keys. Like sops, only its unencrypted_suffix/encrypted_suffix carry over;
 * unlike sops, no suffix means the default `_unencrypted` (sops then encrypts every value but
 * records no rule, which its own decrypt reads as `_unencrypted`: such a file fails its MAC).
 */
async function encryptedBytes(o: PublishFileOptions, format: Format, bytes: Uint8Array): Promise<Uint8Array> {
  const rule = resolveCreationRule(o.rule.recreationRule);
  const groups = rule.keyGroups.map((g) => g.map((entry) => newKeyFromEntry(entry, o.deps)));
  if ((groups[0]?.length ?? 0) === 0) return bytes;
  const { doc, plain } = await decrypted(o, format, bytes);
  const current = doc.metadata.keyGroups.map((g) => g.map((e) => keyIdentity(e)));
  const wanted = groups.map((g) => g.map((k) => k.id));
  const diff = groupDiff(current, wanted);
  if (/^(\+\+\+|---) /m.test(diff))
    o.io.stdout.write(`The following changes will be made to the file's key groups:\n${diff}`);
  const suffix =
    rule.rule?.kind === "unencrypted_suffix" || rule.rule?.kind === "encrypted_suffix" ? rule.rule : null;
  const encrypted = await encryptDocument(plain, {
    keyGroups: o.through(groups),
    ...(rule.threshold !== null ? { threshold: rule.threshold } : {}),
    rule: suffix,
    singleValue: codecFor(format).singleValue === true,
  });
  const indent = indentFromConfig(format, {
    yaml: o.config.stores.yamlIndent,
    json: o.config.stores.jsonIndent,
    binary: o.config.stores.jsonBinaryIndent,
  });
  return emitEncrypted(format, encrypted.branches, encrypted.metadata, KEY_KINDS, emitOptions(indent));
}

/** Publishes one file; resolves false when the user declined. */
export async function publishFile(o: PublishFileOptions): Promise<boolean> {
  const destination = o.rule.destination;
  if (destination === null) throw new BootsealError("USAGE", "no destination configured for this file");
  const name = destinationName(o);
  const format = pickFormats(o.file, {}).input;
  const bytes = await readInput(o.file, o.io);
  let body: Uint8Array | undefined;
  let plain: Branch[] | undefined;
  if (destination.kind === "vault") plain = (await decrypted(o, format, bytes)).plain;
  else {
    // Refuses a file that is not a sops document before anything is sent (sops LoadEncryptedFile).
    loadEncrypted(bytes, format, KEY_KINDS);
    body = await encryptedBytes(o, format, bytes);
  }
  const path = resolve(o.io.cwd, o.file);
  if (!(await o.confirm(`uploading ${path} to ${destinationUrl(destination, name, o.io.env)} ? (y/n): `)))
    return false;
  if (destination.kind === "vault") {
    const note = await writeVaultSecret(destination, name, plain ?? [], o.io.env, (line) =>
      o.io.stderr.write(`bootseal: ${line}\n`),
    );
    if (note) o.io.stderr.write(`bootseal: ${note}\n`);
    return true;
  }
  const scheme = destination.kind === "s3" ? "s3" : "gs";
  const store = openStore(`${scheme}://${destination.bucket}`, { cwd: o.io.cwd, env: o.io.env });
  await store.put(`${destination.prefix}${name}`, body ?? bytes, { unconditional: true });
  return true;
}
