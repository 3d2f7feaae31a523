/**
 * What the JWT verifiers (GCP, Azure, SPIFFE) share: the issuer's signing keys (a remote JWKS
 * through jose, with a timeout, a cache and a cooldown that bounds refetches on an unknown
 * `kid`; SPIFFE brings its own, spiffe-bundles.ts), one verification with a small clock skew
 * (RS256 unless the method says otherwise), the error mapping (a token that does not
 * verify is UNAUTHORIZED, keys that cannot be had are KEY_UNAVAILABLE). Their configuration
 * fields live in src/config/machine-auth-jwt.ts. No JWT or signature code of ours: jose does
 * all of it.
 */
import { createRemoteJWKSet, errors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from "jose";
import { JWKS_DEFAULTS } from "../../config/machine-auth-jwt.ts";
import { BootsealError } from "../../errors.ts";

/** A cloud identity token is 1-3 KiB; anything far larger is refused before parsing. */
export const MAX_CREDENTIAL_CHARS = 16 * 1024;

/** Both clouds sign their tokens with RS256 only; nothing else is accepted (no `none`, no HS*). */
const CLOUD_ALGORITHMS = ["RS256"] as const;

export interface JwksSettings {
  readonly jwksUrl: string;
  /** One JWKS request's time limit. */
  readonly timeoutMs: number;
  /** After a fetch, an unknown `kid` refetches only once this has passed (bounds the refetches). */
  readonly cooldownMs: number;
  /** Keys older than this are refetched before use. */
  readonly cacheMaxAgeMs: number;
}

/** A key lookup for jose: the remote set, with its failures sorted into token ones and issuer ones. */
export type KeyLookup = JWTVerifyGetKey;

/** The JWKS URL, and any timing not given taken from JWKS_DEFAULTS. */
export type JwksOptions = Pick<JwksSettings, "jwksUrl"> & Partial<Omit<JwksSettings, "jwksUrl">>;

export function remoteKeys(options: JwksOptions, what: string): KeyLookup {
  const settings: JwksSettings = {
    jwksUrl: options.jwksUrl,
    timeoutMs: options.timeoutMs ?? JWKS_DEFAULTS.timeoutMs,
    cooldownMs: options.cooldownMs ?? JWKS_DEFAULTS.cooldownMs,
    cacheMaxAgeMs: options.cacheMaxAgeMs ?? JWKS_DEFAULTS.cacheMaxAgeMs,
  };
  let url: URL;
  try {
    url = new URL(settings.jwksUrl);
  } catch {
    throw new BootsealError("USAGE", `${what}: jwksUrl is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new BootsealError("USAGE", `${what}: jwksUrl must be an http(s) URL`);
  }
  const set = createRemoteJWKSet(url, {
    timeoutDuration: settings.timeoutMs,
    cooldownDuration: settings.cooldownMs,
    cacheMaxAge: settings.cacheMaxAgeMs,
  });
  return async (header, token) => {
    try {
      return await set(header, token);
    } catch (err) {
      // A kid the issuer does not publish is the token's fault; the rest is the issuer's.
      if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys)
        throw err;
      const why =
        err instanceof errors.JWKSTimeout ? `no answer within ${settings.timeoutMs} ms` : reason(err);
      throw new BootsealError(
        "KEY_UNAVAILABLE",
        `${what}: cannot get the signing keys from ${url.origin}${url.pathname} (${why})`,
        {
          cause: err,
        },
      );
    }
  };
}

function reason(err: unknown): string {
  // fetch's own message is only "fetch failed"; its cause says why (ECONNREFUSED, bad port).
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (cause && typeof cause.code === "string") return cause.code;
  if (cause && typeof cause.message === "string") return cause.message.slice(0, 120);
  return err instanceof Error ? err.message.slice(0, 120) : "unknown error";
}

export interface JwtCheck {
  readonly keys: KeyLookup;
  /** Accepted `iss` values (exact strings); undefined: `iss` is not checked (JWT-SVIDs need none). */
  readonly issuers: readonly string[] | undefined;
  /** Accepted `alg` values (asymmetric only); default RS256. */
  readonly algorithms?: readonly string[];
  readonly audience: string;
  readonly now: Date;
  readonly clockSkewMs: number;
  /**
   * The longest a token may live after its `iat` (the issuer's own lifetime); undefined: `iat`
   * is not required (the caller bounds the lifetime otherwise).
   */
  readonly maxTokenAgeSeconds: number | undefined;
  /** Names the method in messages: "gcp identity token". */
  readonly what: string;
}

/**
 * Verifies signature, algorithm, `iss`, `aud` (exactly this one audience), `exp`, `nbf` and
 * `iat` (required) against `now` with the skew. Returns the payload; messages never hold
 * the token or its claims' values.
 */
export async function verifyJwt(
  credential: string,
  check: JwtCheck,
  signal?: AbortSignal,
): Promise<JWTPayload> {
  signal?.throwIfAborted();
  const { what } = check;
  if (typeof credential !== "string" || credential.length === 0) {
    throw new BootsealError("UNAUTHORIZED", `${what}: no token`);
  }
  if (credential.length > MAX_CREDENTIAL_CHARS) {
    throw new BootsealError("UNAUTHORIZED", `${what}: longer than ${MAX_CREDENTIAL_CHARS} characters`);
  }
  const algorithms = check.algorithms ?? CLOUD_ALGORITHMS;
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(credential, check.keys, {
      algorithms: [...algorithms],
      ...(check.issuers === undefined ? {} : { issuer: [...check.issuers] }),
      audience: check.audience,
      currentDate: check.now,
      clockTolerance: Math.round(check.clockSkewMs / 1000),
      requiredClaims: check.maxTokenAgeSeconds === undefined ? ["exp"] : ["iat", "exp"],
      // Also makes jose refuse an `iat` in the future (beyond the skew).
      ...(check.maxTokenAgeSeconds === undefined ? {} : { maxTokenAge: check.maxTokenAgeSeconds }),
    }));
  } catch (err) {
    throw mapJoseError(err, what, algorithms);
  }
  // jose accepts an `aud` array that contains the audience; these issuers send one string.
  const aud = payload.aud;
  if (Array.isArray(aud) && aud.length !== 1) {
    throw new BootsealError("UNAUTHORIZED", `${what}: carries more than one audience`);
  }
  return payload;
}

function mapJoseError(err: unknown, what: string, algorithms: readonly string[]): BootsealError {
  if (err instanceof BootsealError) return err;
  if (err instanceof errors.JWTExpired) {
    const problem = err.claim === "iat" ? "older than the issuer's token lifetime" : "expired";
    return new BootsealError("UNAUTHORIZED", `${what}: ${problem}`, { cause: err });
  }
  if (err instanceof errors.JWTClaimValidationFailed) {
    // jose names the claim (`iss`, `aud`, `nbf`, `iat`), never its value.
    const problem = err.reason === "missing" ? "is missing" : "does not verify";
    return new BootsealError("UNAUTHORIZED", `${what}: claim "${err.claim}" ${problem}`, { cause: err });
  }
  if (err instanceof errors.JOSEAlgNotAllowed) {
    const accepted = algorithms.length === 1 ? `${algorithms[0]} only` : `one of ${algorithms.join(", ")}`;
    return new BootsealError("UNAUTHORIZED", `${what}: signing algorithm not accepted (${accepted})`, {
      cause: err,
    });
  }
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) {
    return new BootsealError("UNAUTHORIZED", `${what}: signed with a key the issuer does not publish`, {
      cause: err,
    });
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) {
    return new BootsealError("UNAUTHORIZED", `${what}: signature does not verify`, { cause: err });
  }
  if (err instanceof errors.JOSEError) {
    return new BootsealError("UNAUTHORIZED", `${what}: not a valid signed JWT (${err.code})`, { cause: err });
  }
  if (err instanceof Error && err.name === "AbortError") {
    return new BootsealError("KEY_UNAVAILABLE", `${what}: aborted`, { cause: err });
  }
  return new BootsealError("UNAUTHORIZED", `${what}: not a valid signed JWT`, { cause: err });
}

/** A claim that must be a non-empty string; UNAUTHORIZED naming the claim (never its value) otherwise. */
export function stringClaim(source: Readonly<Record<string, unknown>>, name: string, what: string): string {
  const value = source[name];
  if (typeof value === "string" && value.length > 0) return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return String(value);
  throw new BootsealError("UNAUTHORIZED", `${what}: no "${name}" claim`);
}
