/**
 * The output cap: no codec writes a document larger than MAX_DOCUMENT_BYTES, the size every
 * reader of one accepts (the fetcher's download, the CLI's input, rotate's objects). A tree
 * can outgrow its input when it is written: encryption turns each short value into ~90 bytes
 * of `ENC[…]`, and YAML aliases were expanded when it was read. Text is counted while it is
 * built, so an oversized document stops with TOO_LARGE long before it could exhaust memory or
 * V8's string limit, and every codec checks the final bytes (outputBytes, checkOutputSize).
 */
import { BootsealError } from "../../../errors.ts";
import { describeBytes, MAX_DOCUMENT_BYTES } from "../../../limits.ts";
import type { Format } from "./codec.ts";

export function tooLarge(format: Format): BootsealError {
  return new BootsealError(
    "TOO_LARGE",
    `${format}: the output document would be larger than ${describeBytes(MAX_DOCUMENT_BYTES)}`,
  );
}

/**
 * Throws TOO_LARGE when `length` (bytes, or UTF-16 units of text: never more than its UTF-8
 * bytes, so a text over the cap in units is over it in bytes too) exceeds the cap.
 */
export function checkOutputSize(format: Format, length: number): void {
  if (length > MAX_DOCUMENT_BYTES) throw tooLarge(format);
}

/** Output text collected in parts, refused as soon as it outgrows the cap. */
export class CappedText {
  private readonly parts: string[] = [];
  private units = 0;
  private readonly format: Format;

  constructor(format: Format) {
    this.format = format;
  }

  push(...texts: string[]): void {
    for (const text of texts) {
      this.units += text.length;
      this.parts.push(text);
    }
    checkOutputSize(this.format, this.units);
  }

  join(): string {
    return this.parts.join("");
  }
}

const encoder = new TextEncoder();

/** The UTF-8 bytes of a finished output text, within the cap. */
export function outputBytes(format: Format, text: string): Uint8Array {
  checkOutputSize(format, text.length);
  const bytes = encoder.encode(text);
  checkOutputSize(format, bytes.byteLength);
  return bytes;
}
