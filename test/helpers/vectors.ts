/**
 * Where the sops vectors are: test/fixtures/sops-vectors in this checkout (copied from the
 * sops and Flux repositories; sources and licences in its README.md). Nothing outside the
 * checkout is read.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

/** Absolute path of test/fixtures/sops-vectors, without a trailing slash. */
export const VECTORS_DIR = resolve(import.meta.dirname, "../fixtures/sops-vectors");
if (!existsSync(VECTORS_DIR)) {
  // Only a partial checkout gets here; say so rather than failing on the first missing file.
  throw new Error(`the sops vectors are not at ${VECTORS_DIR}: the checkout is incomplete`);
}

/** The same directory as a file: URL with a trailing slash, a base for `new URL(relative, VECTORS_URL)`. */
export const VECTORS_URL = pathToFileURL(`${VECTORS_DIR}/`);
