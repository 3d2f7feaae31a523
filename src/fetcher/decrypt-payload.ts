/**
 * The downloaded document to its payload bytes, with the machine's own keys: the same
 * loadEncrypted + decryptDocument + resolverFor as `bootseal decrypt` (the MAC is verified
 * inside decryptDocument, so nothing leaves here unless it verified).
 *
 * Which SOPS store format: JSON when the document starts with `{` (a `binary` document when
 * its only value is `data`, as sops writes binary files), YAML otherwise; --input-type
 * overrides. The payload of a binary document is its bytes; of a YAML or JSON document, the
 * plaintext document in the same format. An EncryptedConfig (the `envelope` format) is
 * decrypted with the machine id bound as additional data where the document was bound to
 * one.
 *
 * Machine binding: when the machine id is known (from the service URL, the store key or
 * --machine), a document whose AWS KMS entry carries another machine's
 * `bootseal-machine` encryption context is refused before any key service is called. AWS
 * enforces the same through the machine's IAM policy; checking it here fails closed where
 * the policy is looser than it should be (and on emulators, which enforce no policy).
 */

import type { KeyKind, ProviderDeps } from "../../providers/keys/index.ts";
import { KEY_KINDS, keysFromUserInput, resolverFor } from "../../providers/keys/index.ts";
import { loadEncrypted } from "../cli/sops-file.ts";
import { decryptConfig } from "../envelope/encrypted-config/encrypted-config.ts";
import { FORMATS, type Format } from "../envelope/sops/codecs/codec.ts";
import { codecFor } from "../envelope/sops/codecs/index.ts";
import { decryptDocument } from "../envelope/sops/decrypt.ts";
import type { Metadata } from "../envelope/sops/metadata.ts";
import { BootsealError, isBootsealError } from "../errors.ts";

export const MACHINE_CONTEXT_KEY = "bootseal-machine";

export interface DecryptPayloadOptions {
  readonly deps: ProviderDeps;
  /** "ns/name" when known. */
  readonly machine: string | null;
  readonly inputType?: Format;
  readonly order?: readonly KeyKind[];
  readonly contentType?: string;
  /** The format the service named (x-bootseal-format); used when it is a known one. */
  readonly formatHint?: string;
  readonly signal?: AbortSignal;
}

function firstByte(bytes: Uint8Array): string {
  for (const b of bytes) {
    if (b !== 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d && b !== 0xef && b !== 0xbb && b !== 0xbf) {
      return String.fromCharCode(b);
    }
  }
  return "";
}

function isEncryptedConfig(bytes: Uint8Array): boolean {
  const head = new TextDecoder().decode(bytes.subarray(0, 4096));
  return /^\s*\{/.test(head) && /"kind"\s*:\s*"EncryptedConfig"/.test(head);
}

/** The document's format, as described above. */
export function detectFormat(bytes: Uint8Array, contentType?: string): Format {
  const json = firstByte(bytes) === "{" || /\+json\b/.test(contentType ?? "");
  if (!json) return "yaml";
  const { branches } = codecFor("json").parseEncrypted(bytes);
  const [branch] = branches;
  const onlyData =
    branches.length === 1 &&
    branch?.items.length === 1 &&
    branch.items[0]?.kind === "entry" &&
    branch.items[0].key === "data";
  return onlyData ? "binary" : "json";
}

/** Refuses a document whose KMS context binds it to another machine. */
export function checkMachineBinding(metadata: Metadata, machine: string | null): void {
  if (machine === null) return;
  for (const group of metadata.keyGroups) {
    for (const entry of group) {
      if (entry.kind !== "kms") continue;
      const context = entry.fields.get("context");
      if (typeof context !== "object" || context === null) continue;
      const bound = (context as Readonly<Record<string, string>>)[MACHINE_CONTEXT_KEY];
      if (bound !== undefined && bound !== machine) {
        throw new BootsealError(
          "FORBIDDEN",
          `the document is bound to machine ${JSON.stringify(bound)} (KMS encryption context), this is ${machine}`,
        );
      }
    }
  }
}

async function decryptEnvelope(bytes: Uint8Array, options: DecryptPayloadOptions): Promise<Uint8Array> {
  const resolve = (kind: string, keyId: string) => {
    try {
      return keysFromUserInput(kind, keyId, options.deps)[0] ?? null;
    } catch {
      return null;
    }
  };
  const signal = options.signal ? { signal: options.signal } : {};
  if (options.machine !== null) {
    try {
      return await decryptConfig(bytes, { kinds: KEY_KINDS, resolve, machineId: options.machine, ...signal });
    } catch (err) {
      // An unbound document fails the bound check; one bound to another machine fails both.
      if (!isBootsealError(err) || err.code !== "MAC_MISMATCH") throw err;
    }
  }
  return await decryptConfig(bytes, { kinds: KEY_KINDS, resolve, ...signal });
}

export async function decryptPayload(bytes: Uint8Array, options: DecryptPayloadOptions): Promise<Uint8Array> {
  if (options.inputType === undefined && isEncryptedConfig(bytes)) return decryptEnvelope(bytes, options);
  const hint = options.formatHint;
  const format =
    options.inputType ??
    (hint !== undefined && (FORMATS as readonly string[]).includes(hint) ? (hint as Format) : undefined) ??
    detectFormat(bytes, options.contentType);
  const doc = loadEncrypted(bytes, format);
  checkMachineBinding(doc.metadata, options.machine);
  const branches = await decryptDocument(doc.branches, doc.metadata, {
    resolve: resolverFor(options.deps),
    ...(options.order ? { order: options.order } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return doc.codec.emitPlain(branches, {});
}
