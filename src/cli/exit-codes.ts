/**
 * One exit code per failure class. Where sops has the same meaning we reuse its number
 * (cmd/sops/codes/codes.go): 51 MAC mismatch, 128 no key could open the data key.
 * docs/cli.md lists them; the Record type makes a new ErrorCode fail to compile until
 * it has a number here.
 */
import type { ErrorCode } from "../errors.ts";

export const EXIT_OK = 0;

export const EXIT_CODES: Record<ErrorCode, number> = {
  USAGE: 2,
  BAD_INPUT: 3,
  UNSUPPORTED: 4,
  MAC_MISMATCH: 51,
  NO_MAC: 52,
  NO_KEY_AVAILABLE: 128,
  KEY_ACCESS_DENIED: 129,
  KEY_NOT_FOUND: 130,
  KEY_UNAVAILABLE: 131,
  ALREADY_ENCRYPTED: 203,
  NOT_ENCRYPTED: 202,
  NOT_FOUND: 20,
  PRECONDITION_FAILED: 21,
  STORE_FORBIDDEN: 22,
  STORE_UNAVAILABLE: 23,
  UNAUTHORIZED: 30,
  FORBIDDEN: 31,
  TOO_LARGE: 32,
  RATE_LIMITED: 33,
  TOKEN_EXPIRED: 34,
  TOKEN_EXHAUSTED: 35,
  ALREADY_FETCHED: 36,
  REQUEST_TIMEOUT: 37,
  IO_ERROR: 40,
  PATH_NOT_ALLOWED: 41,
  SERVICE_UNAVAILABLE: 24,
  EXEC_FAILED: 60,
  INTERNAL: 70,
};
