/**
 * The trust bundles of the `spiffe` login method: one per configured trust domain, from its
 * SPIFFE bundle endpoint (SPIFFE Federation spec: profile `https_web`, a Web PKI certificate;
 * profile `https_spiffe`, an X509-SVID checked against the trust domain's own X.509
 * authorities, from the bootstrap bundle at first and then from the last bundle fetched) or
 * from a file. A bundle is a JWKS (SPIFFE Trust Domain and Bundle spec §4): its `jwt-svid`
 * keys verify JWT-SVIDs, its `x509-svid` keys authenticate the next `https_spiffe` fetch.
 *
 * Refresh: after the bundle's `spiffe_refresh_hint` (else `cacheMaxAge`), and on a `kid` the
 * bundle lacks once `cooldown` has passed since the last fetch (bounds what an attacker can
 * make us fetch). A failed refresh keeps the last bundle (as the spec asks) and is tried again
 * after the cooldown; with no bundle yet, logins are KEY_UNAVAILABLE. A key removed from the
 * bundle stops verifying at the first refresh that no longer lists it.
 */
import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { PeerCertificate } from "node:tls";
import { createLocalJWKSet, errors, type JWK, type JWTVerifyGetKey } from "jose";
import type { JwksTimings } from "../../config/machine-auth-jwt.ts";
import type { SpiffeTrustDomain } from "../../config/machine-auth-spiffe.ts";
import { BootsealError } from "../../errors.ts";
import { send } from "../../http/client.ts";

/** A bundle is a few keys; anything far larger is refused. */
const MAX_BUNDLE_BYTES = 1024 * 1024;

export interface ParsedBundle {
  /** The `jwt-svid` keys (their `use` dropped: jose takes only `sig` or none). */
  readonly jwtKeys: readonly JWK[];
  /** The `x509-svid` authorities, PEM. */
  readonly x509Authorities: readonly string[];
  readonly refreshHintMs: number | undefined;
}

function bad(where: string, problem: string): BootsealError {
  return new BootsealError("KEY_UNAVAILABLE", `${where}: not a SPIFFE bundle (${problem})`);
}

/** A SPIFFE bundle document; KEY_UNAVAILABLE naming the problem when it is not one. */
export function parseSpiffeBundle(text: string, where: string): ParsedBundle {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw bad(where, "not JSON");
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (typeof doc !== "object" || doc === null || !Array.isArray(keys)) throw bad(where, "no keys");
  const jwtKeys: JWK[] = [];
  const x509Authorities: string[] = [];
  for (const key of keys as unknown[]) {
    if (typeof key !== "object" || key === null) throw bad(where, "a key is not an object");
    const { use, ...jwk } = key as JWK & { use?: unknown };
    if (use === "jwt-svid") {
      if (typeof jwk.kid !== "string" || jwk.kid === "") throw bad(where, "a jwt-svid key has no kid");
      jwtKeys.push(jwk);
    } else if (use === "x509-svid") {
      const x5c = jwk.x5c;
      if (!Array.isArray(x5c) || x5c.length !== 1 || typeof x5c[0] !== "string") {
        throw bad(where, "an x509-svid key needs exactly one certificate");
      }
      try {
        x509Authorities.push(new X509Certificate(Buffer.from(x5c[0], "base64")).toString());
      } catch {
        throw bad(where, "an x509-svid certificate does not parse");
      }
    }
    // Other uses (wit-svid, future ones) are not ours: ignored, as the spec asks.
  }
  const hint = (doc as { spiffe_refresh_hint?: unknown }).spiffe_refresh_hint;
  const refreshHintMs =
    typeof hint === "number" && Number.isFinite(hint) && hint > 0 ? Math.ceil(hint) * 1000 : undefined;
  return { jwtKeys, x509Authorities, refreshHintMs };
}

interface Held {
  readonly bundle: ParsedBundle;
  readonly lookup: JWTVerifyGetKey;
  /** When it was fetched, or when a failed refresh last kept it (Date.now()). */
  readonly at: number;
  readonly refreshMs: number;
}

/** The SPIFFE ID an X509-SVID names: its only URI SAN. */
function uriSans(cert: PeerCertificate): string[] {
  return (cert.subjectaltname ?? "")
    .split(", ")
    .filter((s) => s.startsWith("URI:"))
    .map((s) => s.slice(4));
}

/** The signing keys of one trust domain, for jose; refreshed as the header says. */
export function trustBundleKeys(
  domain: SpiffeTrustDomain,
  timings: JwksTimings,
  what: string,
): JWTVerifyGetKey {
  const where = `${what}: the trust bundle of ${domain.name}`;
  let held: Held | undefined;
  let inflight: Promise<Held> | undefined;

  const unavailable = (why: string, cause?: unknown) =>
    new BootsealError("KEY_UNAVAILABLE", `${where}: ${why}`, cause === undefined ? {} : { cause });

  const readText = async (path: string): Promise<string> => {
    try {
      return await readFile(path, "utf8");
    } catch (err) {
      throw unavailable(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`, err);
    }
  };

  async function fetchBundle(): Promise<string> {
    const source = domain.source;
    if (source.kind === "file") return readText(source.path);
    let ca: string | undefined;
    let checkServerIdentity: ((host: string, cert: PeerCertificate) => Error | undefined) | undefined;
    if (source.kind === "https_web") {
      ca = source.caFile === undefined ? undefined : await readText(source.caFile);
    } else {
      const anchors =
        held?.bundle.x509Authorities ??
        parseSpiffeBundle(await readText(source.bootstrapBundleFile), `${where} (bootstrap)`).x509Authorities;
      if (anchors.length === 0)
        throw unavailable("no X.509 authority to authenticate the bundle endpoint with");
      ca = anchors.join("\n");
      // https_spiffe: the endpoint proves a SPIFFE ID, not a host name.
      checkServerIdentity = (_host, cert) => {
        const uris = uriSans(cert);
        return uris.length === 1 && uris[0] === source.endpointId
          ? undefined
          : new Error(`the endpoint's X509-SVID is not ${source.endpointId}`);
      };
    }
    const url = source.url;
    let status: number;
    let body: Uint8Array;
    try {
      ({ status, body } = await send({
        method: "GET",
        url,
        headers: { accept: "application/json" },
        signal: AbortSignal.timeout(timings.timeoutMs),
        maxBytes: MAX_BUNDLE_BYTES,
        ...(ca === undefined ? {} : { ca }),
        ...(checkServerIdentity ? { checkServerIdentity } : {}),
      }));
    } catch (err) {
      const message = err instanceof Error ? err.message.slice(0, 200) : "no answer";
      throw unavailable(`cannot get it from ${url.origin}${url.pathname} (${message})`, err);
    }
    if (status !== 200) throw unavailable(`${url.origin}${url.pathname} answered HTTP ${status}`);
    return new TextDecoder().decode(body);
  }

  async function load(): Promise<Held> {
    try {
      const bundle = parseSpiffeBundle(await fetchBundle(), where);
      return {
        bundle,
        lookup: createLocalJWKSet({ keys: [...bundle.jwtKeys] }),
        at: Date.now(),
        refreshMs: bundle.refreshHintMs ?? timings.cacheMaxAgeMs,
      };
    } catch (err) {
      // The last good bundle stays in use; the next try waits for the cooldown.
      if (held === undefined) throw err;
      return { ...held, at: Date.now() - held.refreshMs + timings.cooldownMs };
    }
  }

  function refresh(): Promise<Held> {
    inflight ??= load().then(
      (h) => {
        held = h;
        inflight = undefined;
        return h;
      },
      (err: unknown) => {
        inflight = undefined;
        throw err;
      },
    );
    return inflight;
  }

  const current = (): Promise<Held> =>
    held !== undefined && Date.now() - held.at < held.refreshMs ? Promise.resolve(held) : refresh();

  return async (header, token) => {
    let h = await current();
    try {
      return await h.lookup(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey) || Date.now() - h.at < timings.cooldownMs) throw err;
      // A kid not in the bundle: perhaps a key published since the last fetch.
      h = await refresh();
      return h.lookup(header, token);
    }
  };
}
