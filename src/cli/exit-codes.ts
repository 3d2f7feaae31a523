/**
 * The one table of exit codes: error code -> exit status and what it means. A failure sops
 * 3.13 also has exits with sops's number for the same situation (cmd/sops/codes/codes.go and
 * where cmd/sops uses each code); a failure only bootseal has gets a number sops does not
 * use. docs/cli.md's table is generated from here (./docs.ts); the Record type makes a new
 * ErrorCode fail to compile until it has a row.
 */
import type { ErrorCode } from "../errors.ts";

export const EXIT_OK = 0;

/** sops 3.13's exit statuses (cmd/sops/codes/codes.go), number -> name. */
export const SOPS_EXIT_CODES: Readonly<Record<number, string>> = {
  1: "ErrorGeneric",
  2: "CouldNotReadInputFile",
  3: "CouldNotWriteOutputFile",
  4: "ErrorDumpingTree",
  5: "ErrorReadingConfig",
  6: "ErrorInvalidKMSEncryptionContextFormat",
  7: "ErrorInvalidSetFormat",
  8: "ErrorConflictingParameters",
  21: "ErrorEncryptingMac",
  23: "ErrorEncryptingTree",
  24: "ErrorDecryptingMac",
  25: "ErrorDecryptingTree",
  49: "CannotChangeKeysFromNonExistentFile",
  51: "MacMismatch",
  52: "MacNotFound",
  61: "ConfigFileNotFound",
  85: "KeyboardInterrupt",
  91: "InvalidTreePathFormat",
  92: "NeedAtLeastOneDocument",
  100: "NoFileSpecified",
  111: "NoEncryptionKeyFound",
  112: "DuplicateDecryptionKeyType",
  128: "CouldNotRetrieveKey",
  200: "FileHasNotBeenModified",
  201: "NoEditorFound",
  202: "FailedToCompareVersions",
  203: "FileAlreadyEncrypted",
};

export interface ExitClass {
  readonly exit: number;
  readonly meaning: string;
}

/** In exit-code order, so docs/cli.md reads top to bottom. */
export const EXIT_CLASSES: Readonly<Record<ErrorCode, ExitClass>> = {
  USAGE: {
    exit: 1,
    meaning: "wrong flags or arguments, no keys to encrypt with, an unusable or non-matching .sops.yaml",
  },
  BAD_INPUT: {
    exit: 1,
    meaning:
      "a malformed encrypted document or key (also: nested deeper than 256 levels, excessive YAML aliasing; docs/sops-format.md 7.1)",
  },
  NOT_ENCRYPTED: { exit: 1, meaning: "decrypt/rotate/updatekeys on a file with no sops metadata" },
  UNSUPPORTED: {
    exit: 1,
    meaning: "valid input this build does not handle (a passphrase-protected SSH age key, ...)",
  },
  READ_FAILED: {
    exit: 2,
    meaning: "the input file could not be read, or encrypt could not parse its plaintext",
  },
  WRITE_FAILED: { exit: 3, meaning: "the output file (`--output`, `-i`) could not be written" },
  UNREPRESENTABLE: {
    exit: 4,
    meaning:
      "the document cannot be written in the output format: `.inf`/`.nan` to JSON, nested values to dotenv or INI, a tree without `data` to binary",
  },
  BAD_ENCRYPTION_CONTEXT: { exit: 6, meaning: "`--encryption-context` is not `key:value` pairs" },
  BAD_SET_VALUE: { exit: 7, meaning: "a malformed value to set" },
  CONFLICTING_FLAGS: {
    exit: 8,
    meaning:
      "flags that cannot go together: `-i` with `--output` or with standard input, two selection flags, standard input to encrypt without `--filename-override` or `--input-type`",
  },
  DECRYPTION_FAILED: {
    exit: 25,
    meaning: "a value or comment did not decrypt: its GCM tag failed (altered, or another data key)",
  },
  MAC_MISMATCH: {
    exit: 51,
    meaning: "the MAC did not decrypt or did not match; nothing was output",
  },
  NO_MAC: { exit: 51, meaning: "the document has no MAC (use `--ignore-mac` only to recover)" },
  KEYS_ON_MISSING_FILE: {
    exit: 49,
    meaning: "`rotate --add-*`/`--rm-*` on a file that does not exist",
  },
  BAD_TREE_PATH: { exit: 91, meaning: "a malformed document path (`--extract '[\"a\"][0]'`)" },
  EMPTY_DOCUMENT: { exit: 92, meaning: "encrypt on an empty file (no document in it)" },
  NO_FILE: {
    exit: 100,
    meaning: "no file given where one is needed, or the named file does not exist",
  },
  DUPLICATE_KEY_KIND: { exit: 112, meaning: "`--decryption-order` names a key type twice" },
  NO_KEY_AVAILABLE: { exit: 128, meaning: "no master key could open the data key" },
  NOT_MODIFIED: { exit: 200, meaning: "edit: the file was not changed" },
  NO_EDITOR: { exit: 201, meaning: "edit: no editor could be run" },
  ALREADY_ENCRYPTED: { exit: 203, meaning: "encrypt on a file that already has sops metadata" },
  // bootseal's own failures: numbers sops 3.13 does not use.
  NOT_FOUND: { exit: 20, meaning: "object or machine not found" },
  STORE_FORBIDDEN: { exit: 22, meaning: "the object store refused the credentials" },
  PRECONDITION_FAILED: {
    exit: 26,
    meaning: "a conditional write lost a race (`rotate --store`: objects skipped, none failed)",
  },
  STORE_UNAVAILABLE: { exit: 27, meaning: "the object store is unreachable (retry)" },
  SERVICE_UNAVAILABLE: {
    exit: 28,
    meaning: "the bootseal service is unreachable or answered 5xx (retry)",
  },
  UNAUTHORIZED: { exit: 30, meaning: "no or wrong credential for the service" },
  FORBIDDEN: { exit: 31, meaning: "credential valid but not for this machine or scope" },
  TOO_LARGE: {
    exit: 32,
    meaning:
      "input above the size limit (64 MiB), or a document that would be written larger than that (encryption's growth, YAML aliases expanding past it)",
  },
  RATE_LIMITED: { exit: 33, meaning: "the service asked us to slow down" },
  TOKEN_EXPIRED: {
    exit: 34,
    meaning: "the bootstrap token is past its TTL (ask the controller for a new one)",
  },
  TOKEN_EXHAUSTED: { exit: 35, meaning: "the bootstrap token has no fetches left" },
  ALREADY_FETCHED: {
    exit: 36,
    meaning: "a one-time config was already fetched with this token (`oneTimeFetch: after-first-fetch`)",
  },
  MINT_REQUIRED: {
    exit: 38,
    meaning:
      "`userdata`: the stub cannot be rendered again (no derivation key, or the token was minted by POST): mint one with `POST …/userdata`",
  },
  REQUEST_TIMEOUT: {
    exit: 37,
    meaning: "the service closed the connection: the request arrived too slowly",
  },
  IO_ERROR: { exit: 40, meaning: "a local file of `fetch`, `serve` or a store could not be read or written" },
  LISTEN_FAILED: {
    exit: 42,
    meaning:
      "`serve`: the listen address cannot be bound (already in use, not this host's, no permission); nothing was created",
  },
  PATH_NOT_ALLOWED: {
    exit: 41,
    meaning:
      "`fetch`: a file path lies outside the allowed roots or a symlink leads out; nothing was written",
  },
  EXEC_FAILED: {
    exit: 60,
    meaning: "`fetch`: a bootstrap command (bootcmd, runcmd, `--exec`) exited non-zero or was killed",
  },
  CHECK_FAILED: {
    exit: 50,
    meaning: "`check`: at least one check of the deployment failed (its line starts with `✗` or `FAIL`)",
  },
  INTERNAL: { exit: 70, meaning: "a bug: please report it" },
  KEY_ACCESS_DENIED: {
    exit: 129,
    meaning: "the key service refused the credential (sops exits 1 when encrypting, 128 when decrypting)",
  },
  KEY_NOT_FOUND: { exit: 130, meaning: "the key service does not know the key (likewise)" },
  KEY_UNAVAILABLE: { exit: 131, meaning: "the key service is unreachable (retry; likewise)" },
};

export const EXIT_CODES: Readonly<Record<ErrorCode, number>> = Object.fromEntries(
  Object.entries(EXIT_CLASSES).map(([code, c]) => [code, c.exit]),
) as Record<ErrorCode, number>;

/** docs/cli.md's exit-code table: one row per number, the classes that exit with it. */
export function exitCodesMarkdown(): string {
  const byExit = new Map<number, [string, ExitClass][]>();
  for (const [code, c] of Object.entries(EXIT_CLASSES))
    byExit.set(c.exit, [...(byExit.get(c.exit) ?? []), [code, c]]);
  const rows = [...byExit.keys()]
    .sort((a, b) => a - b)
    .flatMap((exit) =>
      (byExit.get(exit) ?? []).map(([code, c]) => {
        const sops = SOPS_EXIT_CODES[exit];
        return `| ${exit} | \`${code}\` | ${c.meaning.replaceAll("|", "\\|")} | ${sops ? `\`${sops}\`` : "bootseal only"} |`;
      }),
    );
  return [
    "| code | class | meaning | sops 3.13 |",
    "| --- | --- | --- | --- |",
    "| 0 | | success | success |",
    ...rows,
  ].join("\n");
}
