/**
 * The steps every sops-style command shares: pick the formats, load an encrypted document
 * into branches + typed metadata, emit one, and build master keys from flags or entries.
 */

import type { KeyKind, ProviderDeps } from "../../providers/keys/index.ts";
import { isKeyKind, KEY_KIND_NAMES, KEY_KINDS } from "../../providers/keys/index.ts";
import type { Codec, EmitOptions, Format } from "../envelope/sops/codecs/codec.ts";
import { FORMATS } from "../envelope/sops/codecs/codec.ts";
import { codecFor, formatFromPath } from "../envelope/sops/codecs/index.ts";
import type { Branch } from "../envelope/sops/document.ts";
import { type Metadata, metadataFromTree, metadataToTree } from "../envelope/sops/metadata.ts";
import { BootsealError } from "../errors.ts";

export const FORMAT_OPTIONS = {
  "input-type": { type: "string" },
  "output-type": { type: "string" },
  "filename-override": { type: "string" },
  indent: { type: "string" },
} as const;

function parseFormat(text: string, flag: string): Format {
  if ((FORMATS as readonly string[]).includes(text)) return text as Format;
  throw new BootsealError("USAGE", `--${flag} must be one of ${FORMATS.join(", ")}, got "${text}"`);
}

/** Input and output formats the way sops picks them: flags, else the file name. */
export function pickFormats(
  file: string | undefined,
  values: { "input-type"?: string; "output-type"?: string; "filename-override"?: string },
): { input: Format; output: Format } {
  const name = values["filename-override"] ?? (file === "-" ? undefined : file);
  let input: Format;
  if (values["input-type"]) input = parseFormat(values["input-type"], "input-type");
  else if (name) input = formatFromPath(name);
  else throw new BootsealError("USAGE", "reading standard input needs --input-type or --filename-override");
  const output = values["output-type"]
    ? parseFormat(values["output-type"], "output-type")
    : name && !values["input-type"]
      ? formatFromPath(name)
      : input;
  return { input, output };
}

export function emitOptions(indent: string | undefined): EmitOptions {
  if (indent === undefined) return {};
  const n = Number(indent);
  if (!Number.isInteger(n) || n < 0 || n > 16)
    throw new BootsealError("USAGE", "--indent wants a number from 0 to 16");
  return { indent: n };
}

export interface LoadedDocument {
  readonly codec: Codec;
  readonly branches: Branch[];
  readonly metadata: Metadata;
}

export function loadEncrypted(bytes: Uint8Array, format: Format): LoadedDocument {
  const codec = codecFor(format);
  const { branches, metadata } = codec.parseEncrypted(bytes);
  return { codec, branches, metadata: metadataFromTree(metadata, KEY_KINDS) };
}

export function emitEncrypted(
  format: Format,
  branches: readonly Branch[],
  metadata: Metadata,
  options: EmitOptions = {},
): Uint8Array {
  return codecFor(format).emitEncrypted(branches, metadataToTree(metadata, KEY_KINDS), options);
}

export function providerDeps(env: Readonly<Record<string, string | undefined>>): ProviderDeps {
  return { env };
}

/** `--decryption-order age,pgp` / SOPS_DECRYPTION_ORDER. */
export function parseDecryptionOrder(text: string | undefined): KeyKind[] | undefined {
  if (text === undefined || text.trim() === "") return undefined;
  const kinds = text.split(",").map((k) => k.trim());
  for (const k of kinds) {
    if (!isKeyKind(k)) {
      throw new BootsealError(
        "USAGE",
        `--decryption-order: unknown key type "${k}" (${KEY_KIND_NAMES.join(", ")})`,
      );
    }
  }
  return kinds as KeyKind[];
}
