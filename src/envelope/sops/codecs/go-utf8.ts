/**
 * UTF-8 decoding the way Go's `unicode/utf8.DecodeRune` does it, because sops reads and
 * writes JSON strings with Go: every byte that does not start a valid, shortest-form,
 * non-surrogate sequence becomes one U+FFFD and decoding resumes at the next byte.
 * WHATWG's TextDecoder instead replaces a whole "maximal subpart" (`E2 82` is one U+FFFD
 * there, two in Go), so it cannot be used where the number of replacements is visible.
 */

const fatalDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Length of the valid multi-byte UTF-8 sequence starting at `i` (2 to 4), or 0 when the byte at `i`
 * is invalid there (Go's `RuneError, 1`). `bytes[i]` must be >= 0x80.
 */
export function utf8SequenceLength(bytes: Uint8Array, i: number, end: number): number {
  const b0 = bytes[i]!;
  let need: number;
  let lo = 0x80;
  let hi = 0xbf;
  if (b0 >= 0xc2 && b0 <= 0xdf) need = 1;
  else if (b0 >= 0xe0 && b0 <= 0xef) {
    need = 2;
    if (b0 === 0xe0) lo = 0xa0; // overlong
    if (b0 === 0xed) hi = 0x9f; // UTF-16 surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    need = 3;
    if (b0 === 0xf0) lo = 0x90; // overlong
    if (b0 === 0xf4) hi = 0x8f; // beyond U+10FFFF
  } else return 0;
  if (i + need >= end) return 0;
  const b1 = bytes[i + 1]!;
  if (b1 < lo || b1 > hi) return 0;
  for (let k = 2; k <= need; k++) {
    const b = bytes[i + k]!;
    if (b < 0x80 || b > 0xbf) return 0;
  }
  return need + 1;
}

/**
 * Split `bytes[start, end)` the way Go walks it: runs of valid UTF-8 as strings, and `null`
 * for each byte Go would turn into one U+FFFD. The JSON emitter needs the distinction
 * because Go writes an invalid byte as the escape `\ufffd` but a valid U+FFFD raw.
 */
export function decodeUtf8GoRuns(bytes: Uint8Array, start = 0, end = bytes.length): (string | null)[] {
  const runs: (string | null)[] = [];
  let runStart = start;
  let i = start;
  while (i < end) {
    if (bytes[i]! < 0x80) {
      i++;
      continue;
    }
    const len = utf8SequenceLength(bytes, i, end);
    if (len > 0) {
      i += len;
      continue;
    }
    if (i > runStart) runs.push(fatalDecoder.decode(bytes.subarray(runStart, i)));
    runs.push(null);
    i++;
    runStart = i;
  }
  if (end > runStart) runs.push(fatalDecoder.decode(bytes.subarray(runStart, end)));
  return runs;
}

/** Decode `bytes[start, end)` as Go does: each invalid byte becomes one U+FFFD. */
export function decodeUtf8Go(bytes: Uint8Array, start = 0, end = bytes.length): string {
  try {
    return fatalDecoder.decode(bytes.subarray(start, end));
  } catch {
    // Invalid somewhere: only then pay for the byte-by-byte walk.
  }
  return decodeUtf8GoRuns(bytes, start, end)
    .map((run) => run ?? "\ufffd")
    .join("");
}
