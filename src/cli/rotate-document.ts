/**
 * The core of `rotate`, shared by the file mode (`rotate FILE`) and the store mode
 * (`rotate --store URL`, rotate-store.ts): decrypt (MAC checked), add keys to the first group,
 * drop every key whose identity is in `remove`, then a NEW data key re-encrypts every value
 * and the MAC. Keys that stay keep their created_at; `version` is unchanged.
 *
 * With `verify`, the new bytes are parsed back and decrypted with the same identities (the
 * resolver over `deps`, the same decryption order) and their plaintext output compared byte
 * for byte with the old document's; any difference or failure throws and nothing is returned.
 * A consequence worth knowing: a rotation that removes every key the caller holds an identity
 * for cannot be verified, so it fails (NO_KEY_AVAILABLE) instead of writing a document nobody
 * here has proven to open.
 */
import { createHash } from "node:crypto";
import type { KeyKind, ProviderDeps } from "../../providers/keys/index.ts";
import { KEY_KINDS, resolverFor } from "../../providers/keys/index.ts";
import {
  type KeyServices,
  LOCAL_ONLY,
  resolverThrough,
  throughKeyServices,
} from "../../providers/keys/keyservice-client.ts";
import { emitEncrypted, loadEncrypted } from "../envelope/document.ts";
import type { EmitOptions, Format } from "../envelope/sops/codecs/codec.ts";
import { codecFor } from "../envelope/sops/codecs/index.ts";
import { decryptDocument } from "../envelope/sops/decrypt.ts";
import { encryptDocument } from "../envelope/sops/encrypt.ts";
import type { KeyEntry, MasterKey } from "../envelope/sops/master-key.ts";
import type { Metadata } from "../envelope/sops/metadata.ts";
import { BootsealError, isBootsealError } from "../errors.ts";
import { masterKeyFromEntry } from "./key-setup.ts";

export interface KeyChanges {
  /** Added to the first key group unless a key with the same identity is already there. */
  readonly add: readonly MasterKey[];
  /** Identities (MasterKey.id) to drop from every group. */
  readonly remove: ReadonlySet<string>;
}

export interface RotateDocumentOptions {
  readonly deps: ProviderDeps;
  readonly order?: readonly KeyKind[];
  readonly ignoreMac?: boolean;
  /** Decrypt the result again and compare plaintexts (store mode always does). */
  readonly verify?: boolean;
  readonly emit?: EmitOptions;
  readonly signal?: AbortSignal;
  /** --keyservice / --enable-local-keyservice; default: the local providers only. */
  readonly keyServices?: KeyServices;
}

export interface RotatedDocument {
  readonly bytes: Uint8Array;
  /** SHA-256 (hex) of the plaintext output, the same before and after. */
  readonly plaintextDigest: string;
  /** Identities added to / removed from this document (what actually changed). */
  readonly added: readonly string[];
  readonly removed: readonly string[];
}

export type Formats = Format | { readonly input: Format; readonly output: Format };

/** Entries of the new metadata get back the created_at of the key they replace. */
export function keepCreatedAt(
  metadata: Metadata,
  groups: readonly (readonly MasterKey[])[],
  old: Map<string, KeyEntry>,
): Metadata {
  const keyGroups = metadata.keyGroups.map((group, g) =>
    group.map((entry, i) => {
      const previous = old.get(groups[g]?.[i]?.id ?? "");
      const createdAt = previous?.fields.get("created_at");
      if (createdAt === undefined || !entry.fields.has("created_at")) return entry;
      const fields = new Map(entry.fields);
      fields.set("created_at", createdAt);
      return { ...entry, fields };
    }),
  );
  return { ...metadata, keyGroups };
}

function digest(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}

export async function rotateDocument(
  bytes: Uint8Array,
  formats: Formats,
  changes: KeyChanges,
  options: RotateDocumentOptions,
): Promise<RotatedDocument> {
  const { input, output } = typeof formats === "string" ? { input: formats, output: formats } : formats;
  const services = options.keyServices ?? LOCAL_ONLY;
  const resolve = resolverThrough(resolverFor(options.deps), services);
  const common = {
    resolve,
    ...(options.order ? { order: options.order } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  };
  const doc = loadEncrypted(bytes, input, KEY_KINDS);
  const plain = await decryptDocument(doc.branches, doc.metadata, {
    ...common,
    ignoreMac: options.ignoreMac === true,
  });

  const old = new Map<string, KeyEntry>();
  const groups = doc.metadata.keyGroups.map((group) =>
    group.map((entry) => {
      const key = masterKeyFromEntry(entry, options.deps);
      old.set(key.id, entry);
      return key;
    }),
  );
  const added: string[] = [];
  for (const key of changes.add) {
    if (!groups.some((g) => g.some((k) => k.id === key.id))) {
      groups[0]?.push(key);
      added.push(key.id);
    }
  }
  const removed = [...old.keys()].filter((id) => changes.remove.has(id));
  const remaining = groups.map((g) => g.filter((k) => !changes.remove.has(k.id)));
  if (remaining.some((g) => g.length === 0)) {
    throw new BootsealError("USAGE", "rotate would leave a key group empty");
  }

  const encrypted = await encryptDocument(plain, {
    keyGroups: remaining.map((g) => g.map((k) => throughKeyServices(k, services))),
    threshold: doc.metadata.shamirThreshold,
    rule: doc.metadata.rule,
    macOnlyEncrypted: doc.metadata.macOnlyEncrypted,
    version: doc.metadata.version,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const metadata = keepCreatedAt(encrypted.metadata, remaining, old);
  const out = emitEncrypted(output, encrypted.branches, metadata, KEY_KINDS, options.emit);
  const outCodec = codecFor(output);
  const before = outCodec.emitPlain(plain, {});

  if (options.verify === true) {
    let after: Uint8Array;
    try {
      const back = loadEncrypted(out, output, KEY_KINDS);
      after = outCodec.emitPlain(await decryptDocument(back.branches, back.metadata, common), {});
    } catch (err) {
      const code = isBootsealError(err) ? err.code : "INTERNAL";
      const why = err instanceof Error ? err.message : String(err);
      throw new BootsealError(
        code,
        `verification failed, the rotated document does not decrypt with the identities available here: ${why}`,
        { cause: err },
      );
    }
    if (!sameBytes(before, after)) {
      throw new BootsealError(
        "INTERNAL",
        "verification failed: the rotated document decrypts to other plaintext",
      );
    }
  }
  return { bytes: out, plaintextDigest: digest(before), added, removed };
}
