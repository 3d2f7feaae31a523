/**
 * Where the shared sops vectors are: `../shared/sops-vectors` beside the checkout (as laid
 * out for development and CI), or BOOTSEAL_SHARED_DIR. Missing vectors fail loudly.
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const sharedDir = process.env.BOOTSEAL_SHARED_DIR ?? resolve(import.meta.dirname, "../../../shared");

/** Absolute path of shared/sops-vectors, without a trailing slash. */
export const VECTORS_DIR = resolve(sharedDir, "sops-vectors");
if (!existsSync(VECTORS_DIR)) {
  throw new Error(
    `the sops vectors are not at ${VECTORS_DIR}: put shared/ beside the checkout or set BOOTSEAL_SHARED_DIR`,
  );
}

/** The same directory as a file: URL with a trailing slash, a base for `new URL(relative, VECTORS_URL)`. */
export const VECTORS_URL = pathToFileURL(`${VECTORS_DIR}/`);
