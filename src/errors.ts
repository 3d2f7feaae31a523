/**
 * The one place error codes are born. Every failure the user can act on is a
 * BootsealError with a code from this union; the HTTP status map
 * (src/service) and the CLI exit-code table (src/cli/exit-codes.ts) are both typed
 * Record<ErrorCode, …>, so adding a code does not compile until both know it. Where sops
 * numbers two situations differently, they get two codes here (MAC_MISMATCH for the MAC,
 * DECRYPTION_FAILED for a value), so the CLI can exit as sops does.
 *
 * Messages are safe to show: key ids may appear, key bytes, tokens and plaintext never.
 * The underlying error goes in `cause` (logged, never returned to a client).
 */
export type ErrorCode =
  | "USAGE" // wrong command line or configuration
  | "BAD_INPUT" // malformed document, file or request
  | "UNSUPPORTED" // a valid input this build does not handle
  | "MAC_MISMATCH" // MAC or GCM tag did not verify: never any plaintext
  | "NO_MAC" // the document carries no MAC
  | "NO_KEY_AVAILABLE" // no master key could unwrap the data key
  | "KEY_ACCESS_DENIED" // the key service refused the credential
  | "KEY_NOT_FOUND" // the key service does not know the key
  | "KEY_UNAVAILABLE" // the key service is unreachable (retryable)
  | "ALREADY_ENCRYPTED" // encrypt on a document that already has sops metadata
  | "NOT_ENCRYPTED" // decrypt on a document without sops metadata
  | "NOT_FOUND"
  | "PRECONDITION_FAILED"
  | "STORE_FORBIDDEN"
  | "STORE_UNAVAILABLE" // retryable
  | "UNAUTHORIZED"
  | "FORBIDDEN"
  | "TOKEN_EXPIRED" // a bootstrap token past its TTL
  | "TOKEN_EXHAUSTED" // a bootstrap token with no fetches left
  | "ALREADY_FETCHED" // a one-time config was already fetched with this token (a second fetch)
  | "MINT_REQUIRED" // GET …/userdata cannot re-derive the current token: mint one with POST
  | "TOO_LARGE"
  | "REQUEST_TIMEOUT" // the client sent its request too slowly (the service closed the connection)
  | "RATE_LIMITED"
  | "IO_ERROR"
  | "LISTEN_FAILED" // serve: the listen address cannot be bound (in use, not ours, no permission)
  | "SERVICE_UNAVAILABLE" // the bootseal service is unreachable or answered 5xx (retryable)
  | "PATH_NOT_ALLOWED" // a file to write lies outside the allowed roots, or a symlink leads out
  | "EXEC_FAILED" // the bootstrap command (fetch --exec) exited non-zero or was killed
  | "CONFLICTING_FLAGS" // flags that cannot go together (-i with --output or standard input, ...)
  | "NO_FILE" // no file operand where one is needed, or the named file does not exist
  | "KEYS_ON_MISSING_FILE" // rotate --add-*/--rm-* on a file that does not exist
  | "READ_FAILED" // the input file could not be read, or encrypt could not parse its plaintext
  | "WRITE_FAILED" // the output file could not be written
  | "UNREPRESENTABLE" // the document cannot be written in the output format (.inf/.nan to JSON, nesting to dotenv/INI)
  | "EMPTY_DOCUMENT" // encrypt on an input with no document in it
  | "DECRYPTION_FAILED" // a value or comment did not decrypt (its GCM tag failed); the MAC is MAC_MISMATCH
  | "BAD_ENCRYPTION_CONTEXT" // --encryption-context is not key:value pairs
  | "BAD_TREE_PATH" // a malformed document path (--extract, set, unset)
  | "BAD_SET_VALUE" // a malformed value to set (set, --set)
  | "DUPLICATE_KEY_KIND" // a key kind named twice in --decryption-order
  | "NOT_MODIFIED" // edit: the file was not changed
  | "NO_EDITOR" // edit: no editor could be run
  | "CHECK_FAILED" // bootseal check: at least one check of the deployment failed
  | "INTERNAL";

export const ERROR_CODES: readonly ErrorCode[] = [
  "USAGE",
  "BAD_INPUT",
  "UNSUPPORTED",
  "MAC_MISMATCH",
  "NO_MAC",
  "NO_KEY_AVAILABLE",
  "KEY_ACCESS_DENIED",
  "KEY_NOT_FOUND",
  "KEY_UNAVAILABLE",
  "ALREADY_ENCRYPTED",
  "NOT_ENCRYPTED",
  "NOT_FOUND",
  "PRECONDITION_FAILED",
  "STORE_FORBIDDEN",
  "STORE_UNAVAILABLE",
  "UNAUTHORIZED",
  "FORBIDDEN",
  "TOKEN_EXPIRED",
  "TOKEN_EXHAUSTED",
  "ALREADY_FETCHED",
  "MINT_REQUIRED",
  "TOO_LARGE",
  "REQUEST_TIMEOUT",
  "RATE_LIMITED",
  "IO_ERROR",
  "LISTEN_FAILED",
  "SERVICE_UNAVAILABLE",
  "PATH_NOT_ALLOWED",
  "EXEC_FAILED",
  "CONFLICTING_FLAGS",
  "NO_FILE",
  "KEYS_ON_MISSING_FILE",
  "READ_FAILED",
  "WRITE_FAILED",
  "UNREPRESENTABLE",
  "EMPTY_DOCUMENT",
  "DECRYPTION_FAILED",
  "BAD_ENCRYPTION_CONTEXT",
  "BAD_TREE_PATH",
  "BAD_SET_VALUE",
  "DUPLICATE_KEY_KIND",
  "NOT_MODIFIED",
  "NO_EDITOR",
  "CHECK_FAILED",
  "INTERNAL",
];

const RETRYABLE: ReadonlySet<ErrorCode> = new Set([
  "KEY_UNAVAILABLE",
  "STORE_UNAVAILABLE",
  "RATE_LIMITED",
  "SERVICE_UNAVAILABLE",
]);

export class BootsealError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "BootsealError";
    this.code = code;
  }

  get retryable(): boolean {
    return RETRYABLE.has(this.code);
  }
}

/** One failure per master key tried, kept so the user sees why each key failed (sops usererrors.go). */
export interface KeyFailure {
  readonly keyId: string;
  readonly reason: string;
}

export class NoKeyAvailableError extends BootsealError {
  readonly failures: readonly KeyFailure[];

  constructor(message: string, failures: readonly KeyFailure[]) {
    const detail = failures.map((f) => `${f.keyId}: ${f.reason}`).join("; ");
    super("NO_KEY_AVAILABLE", detail ? `${message} (${detail})` : message);
    this.name = "NoKeyAvailableError";
    this.failures = failures;
  }
}

export function isBootsealError(err: unknown): err is BootsealError {
  return err instanceof BootsealError;
}

/** Precondition helper in the manner of the AWS Encryption SDK's `needs`. */
export function needs(condition: unknown, code: ErrorCode, message: string): asserts condition {
  if (!condition) throw new BootsealError(code, message);
}

/** A BootsealError with one of `codes` (a failure a caller handles by its code). */
export function hasCode(err: unknown, ...codes: readonly ErrorCode[]): err is BootsealError {
  return err instanceof BootsealError && codes.includes(err.code);
}

/**
 * Any thrown value as a code and a message: a BootsealError's own, anything else INTERNAL
 * with its message after `internalPrefix` (the CLI's "internal error: ").
 */
export function describeError(err: unknown, internalPrefix = ""): { code: ErrorCode; message: string } {
  if (err instanceof BootsealError) return { code: err.code, message: err.message };
  return { code: "INTERNAL", message: `${internalPrefix}${(err as Error | null)?.message ?? String(err)}` };
}
