/**
 * The flag handling every sops-style command shares: pick the formats, the emit options, the
 * decryption order. Loading and emitting documents is src/envelope/document.ts.
 */

import type { KeyKind, ProviderDeps } from "../../providers/keys/index.ts";
import { isKeyKind } from "../../providers/keys/index.ts";
import { isFormat } from "../envelope/document.ts";
import type { EmitOptions, Format } from "../envelope/sops/codecs/codec.ts";
import { FORMATS } from "../envelope/sops/codecs/codec.ts";
import { formatFromPath } from "../envelope/sops/codecs/index.ts";
import { BootsealError } from "../errors.ts";

function parseFormat(text: string, flag: string): Format {
  if (isFormat(text)) return text;
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

export function providerDeps(env: Readonly<Record<string, string | undefined>>): ProviderDeps {
  return { env };
}

/**
 * `--decryption-order age,pgp` / SOPS_DECRYPTION_ORDER, as sops reads it: a kind named twice
 * is refused (DUPLICATE_KEY_KIND, exit 112); a name that is no key kind is never tried.
 */
export function parseDecryptionOrder(text: string | undefined): KeyKind[] | undefined {
  if (text === undefined || text === "") return undefined;
  const names = text.split(",");
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name))
      throw new BootsealError("DUPLICATE_KEY_KIND", `Duplicate decryption key type: ${name}`);
    seen.add(name);
  }
  return names.map((k) => k.trim()).filter(isKeyKind);
}
