/**
 * The downloaded document to its payload bytes, with the machine's own keys: the same
 * loadEncrypted + decryptDocument + resolverFor as `bootseal decrypt` (the MAC is verified
 * inside decryptDocument, so nothing leaves here unless it verified).
 *
 * Which SOPS store format: --input-type, else src/envelope/document.ts's detectFormat (the
 * service's x-bootseal-format, the content type, then the bytes). The payload of a binary
 * document is its bytes; of a YAML or JSON document, the plaintext document in the same
 * format. JSON and binary are told apart by what the MAC covers (document.ts loadJsonOrBinary):
 * a binary document with extra top-level keys outside the MAC is refused, never written as a
 * JSON wrapper. A plaintext comment where the document's rule encrypts is refused too (comments
 * are outside the MAC). An EncryptedConfig (the `envelope` format) is decrypted with the machine id bound
 * as additional data where the document was bound to one.
 *
 * Machine binding: when the machine id is known (from the service URL, the store key or
 * --machine), a document whose AWS KMS entry carries another machine's
 * `bootseal-machine` encryption context is refused before any key service is called. AWS
 * enforces the same through the machine's IAM policy; checking it here fails closed where
 * the policy is looser than it should be (and on emulators, which enforce no policy).
 */
import type { KeyKind, ProviderDeps } from "../../providers/keys/index.ts";
import { KEY_KINDS, keysFromUserInput, resolverFor } from "../../providers/keys/index.ts";
import {
  checkEncryptedComments,
  detectFormat,
  isEncryptedConfig,
  loadEncrypted,
  loadJsonOrBinary,
} from "../envelope/document.ts";
import { decryptConfig } from "../envelope/encrypted-config/encrypted-config.ts";
import type { Format } from "../envelope/sops/codecs/codec.ts";
import { decryptDocument } from "../envelope/sops/decrypt.ts";
import { hasCode } from "../errors.ts";
import { checkMachineBinding } from "../machine/kms-binding.ts";

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

async function decryptEnvelope(bytes: Uint8Array, options: DecryptPayloadOptions): Promise<Uint8Array> {
  const resolve = (kind: string, keyId: string) => {
    try {
      return keysFromUserInput(kind, keyId, options.deps)[0] ?? null;
    } catch {
      return null;
    }
  };
  if (options.machine !== null) {
    try {
      return await decryptConfig(bytes, {
        kinds: KEY_KINDS,
        resolve,
        machineId: options.machine,
        signal: options.signal,
      });
    } catch (err) {
      // An unbound document fails the bound check; one bound to another machine fails both.
      if (!hasCode(err, "MAC_MISMATCH")) throw err;
    }
  }
  return await decryptConfig(bytes, { kinds: KEY_KINDS, resolve, signal: options.signal });
}

export async function decryptPayload(bytes: Uint8Array, options: DecryptPayloadOptions): Promise<Uint8Array> {
  if (options.inputType === undefined && isEncryptedConfig(bytes)) return decryptEnvelope(bytes, options);
  const format =
    options.inputType ??
    detectFormat(bytes, { format: options.formatHint, contentType: options.contentType });
  // JSON and binary look alike: unless the operator named the format, what the MAC covers
  // decides (a service's x-bootseal-format is itself sniffed from the stored bytes).
  const doc =
    options.inputType === undefined && (format === "json" || format === "binary")
      ? loadJsonOrBinary(bytes, KEY_KINDS)
      : loadEncrypted(bytes, format, KEY_KINDS);
  // Comments are outside the MAC: a plaintext one where the rule encrypts was added by
  // whoever could write the stored bytes (sops would print it; a machine must not).
  checkEncryptedComments(doc.branches, doc.metadata);
  checkMachineBinding(doc.metadata, options.machine);
  const branches = await decryptDocument(doc.branches, doc.metadata, {
    resolve: resolverFor(options.deps),
    order: options.order,
    signal: options.signal,
  });
  return doc.codec.emitPlain(branches, {});
}
