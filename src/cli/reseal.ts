/**
 * Changing an existing document's values under its SAME data key, as sops's edit, set and
 * unset do (common.DecryptTree, then common.EncryptTree with the data key it returned): every
 * value gets a fresh IV, `lastmodified` and the MAC are new, the key groups are untouched, so no
 * key service is called to write. (rotate is the command that makes a new data key.)
 */
import { KEY_KINDS, type KeyKind, type ProviderDeps, resolverFor } from "../../providers/keys/index.ts";
import { emitEncrypted, loadEncrypted } from "../envelope/document.ts";
import type { EmitOptions, Format } from "../envelope/sops/codecs/codec.ts";
import { decryptBranches } from "../envelope/sops/decrypt.ts";
import type { Branch, Mapping } from "../envelope/sops/document.ts";
import { encryptBranches } from "../envelope/sops/encrypt.ts";
import { unwrapDataKey } from "../envelope/sops/key-groups.ts";
import type { KeyResolver } from "../envelope/sops/master-key.ts";
import { formatLastModified, type Metadata } from "../envelope/sops/metadata.ts";
import { BootsealError } from "../errors.ts";
import { replaceFile } from "../files/atomic-write.ts";
import type { CliIo } from "./command.ts";
import { readInput } from "./file-io.ts";
import { keyResolver } from "./key-setup.ts";
import { parseDecryptionOrder, pickFormats, providerDeps } from "./sops-file.ts";
import { verbose } from "./verbose.ts";

export interface OpenedDocument {
  readonly plain: Branch[];
  readonly metadata: Metadata;
  /** Zero it when done (closeDocument). */
  readonly dataKey: Uint8Array;
}

export interface OpenOptions {
  readonly deps: ProviderDeps;
  /** How master keys are found (default: the registry's, through no key service). */
  readonly resolve?: KeyResolver;
  readonly order?: readonly KeyKind[];
  readonly ignoreMac?: boolean;
}

/** Parse, unwrap the data key, decrypt and check the MAC (unless ignoreMac). */
export async function openDocument(
  bytes: Uint8Array,
  format: Format,
  options: OpenOptions,
): Promise<OpenedDocument> {
  const doc = loadEncrypted(bytes, format, KEY_KINDS);
  const resolve = options.resolve ?? resolverFor(options.deps);
  const dataKey = await unwrapDataKey(doc.metadata.keyGroups, resolve, {
    threshold: doc.metadata.shamirThreshold,
    order: options.order,
  });
  try {
    const plain = decryptBranches(doc.branches, dataKey, doc.metadata, {
      ignoreMac: options.ignoreMac === true,
    });
    return { plain, metadata: doc.metadata, dataKey };
  } catch (err) {
    dataKey.fill(0);
    throw err;
  }
}

export function closeDocument(doc: { readonly dataKey: Uint8Array }): void {
  doc.dataKey.fill(0);
}

/** Encrypt `plain` with the data key under `metadata`'s rule and write it as `format`. */
export function reseal(
  plain: readonly Branch[],
  metadata: Metadata,
  dataKey: Uint8Array,
  format: Format,
  emit: EmitOptions = {},
  now: Date = new Date(),
): Uint8Array {
  const lastModified = formatLastModified(now);
  const encrypted = encryptBranches(plain, dataKey, {
    rule: metadata.rule,
    macOnlyEncrypted: metadata.macOnlyEncrypted,
    lastModified,
  });
  return emitEncrypted(
    format,
    encrypted.branches,
    { ...metadata, lastModified, mac: encrypted.mac },
    KEY_KINDS,
    emit,
  );
}

export interface OpenFlags extends Record<string, unknown> {
  readonly "input-type"?: string;
  readonly "output-type"?: string;
  readonly "decryption-order"?: string;
  readonly "ignore-mac"?: boolean;
}

/**
 * set and unset: open FILE, apply `change` to its first document (as sops does), write the
 * file back in place unless nothing changed and `skipUnchanged` (--idempotent).
 */
export async function changeFirstDocument(
  file: string,
  flags: OpenFlags,
  io: CliIo,
  change: (branch: Mapping) => { branch: Mapping; changed: boolean },
  skipUnchanged: boolean,
): Promise<void> {
  const formats = pickFormats(file, flags);
  const deps = providerDeps(io.env);
  const doc = await openDocument(await readInput(file, io), formats.input, {
    deps,
    resolve: keyResolver(flags, deps),
    order: parseDecryptionOrder(flags["decryption-order"]),
    ignoreMac: flags["ignore-mac"] === true,
  });
  verbose(io, "Data key recovered successfully");
  try {
    const [first, ...rest] = doc.plain;
    if (first === undefined) throw new BootsealError("BAD_INPUT", "the document has no content");
    const { branch, changed } = change(first);
    if (!changed && skipUnchanged) {
      verbose(io, "File not written due to no change");
      return;
    }
    await replaceFile(file, reseal([branch, ...rest], doc.metadata, doc.dataKey, formats.output));
    verbose(io, "File written successfully");
  } finally {
    closeDocument(doc);
  }
}
