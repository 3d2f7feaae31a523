/**
 * AWS IAM machine login, the pattern of Vault's `aws` auth method, `iam` type: the machine
 * signs an `sts:GetCallerIdentity` request with its own credentials and sends the signed
 * request (not the credentials) as its credential; the service checks what it can itself,
 * replays the request to STS (aws-sts.ts), and STS's answer names the caller. The service
 * needs no AWS credentials and the machine's role no permission (GetCallerIdentity is always
 * allowed).
 *
 * Checked here before STS is asked, each a 401:
 * - the body is exactly `Action=GetCallerIdentity&Version=2011-06-15`, the method POST, and
 *   the URL the configured endpoint: the request is only ever sent there, never to a URL the
 *   credential names, and nothing else can be made of someone's signature;
 * - SERVER_ID_HEADER carries this service's audience AND is one of the SignedHeaders, so a
 *   request signed for another bootseal (or a Vault) cannot be replayed here;
 * - the signature's scope is STS in the configured region, and X-Amz-Date is within 15
 *   minutes of now (STS's own window) and agrees with the scope's date.
 * STS then checks the signature over all of it: a header or body changed after signing fails
 * there (403 -> 401).
 */
import { BootsealError } from "../../errors.ts";
import { AWS_GET_CALLER_IDENTITY_BODY, SERVER_ID_HEADER } from "../../machine/identity-login.ts";
import { getCallerIdentity, type StsCall } from "./aws-sts.ts";
import type { IdentityVerifier, ProvenIdentity, VerifyContext } from "./verifier.ts";

/** How far X-Amz-Date may be from the service's clock (STS allows the same). */
export const AWS_DATE_SKEW_MS = 15 * 60_000;
/** Most headers a credential may carry (a signed STS request has about eight). */
const MAX_HEADERS = 32;
/** Headers that describe the connection, not the request: never taken from a credential. */
const HOP_HEADERS = new Set(["connection", "transfer-encoding", "keep-alive", "upgrade", "expect", "te"]);

export interface AwsIamOptions {
  /** The STS endpoint (machineAuth.aws.stsEndpoint). */
  readonly stsEndpoint: string;
  /** The region requests must be signed for (machineAuth.aws.region). */
  readonly region: string;
  /** For tests: the STS call's attempt settings. */
  readonly sts?: Pick<StsCall, "attemptTimeoutMs" | "maxAttempts" | "backoff">;
}

/** The credential's JSON (base64): the signed request as the machine would have sent it. */
export interface SignedStsRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

function refuse(why: string): BootsealError {
  return new BootsealError("UNAUTHORIZED", `aws-iam login refused: ${why}`);
}

/** Decodes the credential; anything but the expected shape is refused (never echoed). */
export function decodeSignedRequest(credential: string): SignedStsRequest {
  let parsed: unknown;
  try {
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(credential)) throw new Error("not base64");
    parsed = JSON.parse(Buffer.from(credential, "base64").toString("utf8"));
  } catch {
    throw refuse("the credential is not a base64 JSON signed request");
  }
  const r = parsed as Partial<Record<keyof SignedStsRequest, unknown>>;
  if (
    typeof r !== "object" ||
    r === null ||
    typeof r.method !== "string" ||
    typeof r.url !== "string" ||
    typeof r.body !== "string" ||
    typeof r.headers !== "object" ||
    r.headers === null ||
    Array.isArray(r.headers)
  ) {
    throw refuse("the credential is not a signed request {method, url, headers, body}");
  }
  const headers: Record<string, string> = {};
  const entries = Object.entries(r.headers as Record<string, unknown>);
  if (entries.length > MAX_HEADERS) throw refuse("too many headers");
  for (const [name, value] of entries) {
    const key = name.toLowerCase();
    if (typeof value !== "string" || key in headers || !/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(key)) {
      throw refuse("malformed headers");
    }
    // Header values travel to STS as they are: no line breaks can be smuggled in.
    if (/[\r\n\0]/.test(value)) throw refuse("malformed headers");
    headers[key] = value;
  }
  return { method: r.method, url: r.url, headers, body: r.body };
}

interface Authorization {
  readonly scopeDate: string;
  readonly region: string;
  readonly service: string;
  readonly signedHeaders: readonly string[];
}

function parseAuthorization(value: string | undefined): Authorization {
  const m =
    value === undefined
      ? null
      : /^AWS4-HMAC-SHA256 Credential=[^/\s,]+\/(\d{8})\/([a-z0-9-]+)\/([a-z0-9-]+)\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=[0-9a-f]{64}$/.exec(
          value,
        );
  if (!m) throw refuse("no AWS SigV4 Authorization header");
  return {
    scopeDate: m[1] as string,
    region: m[2] as string,
    service: m[3] as string,
    signedHeaders: (m[4] as string).split(";"),
  };
}

/** `20260102T030405Z` -> epoch ms; NaN when malformed. */
function amzDate(text: string | undefined): number {
  const m = text === undefined ? null : /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(text);
  if (!m) return Number.NaN;
  return Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!);
}

function sameUrl(a: string, endpoint: URL): boolean {
  try {
    const u = new URL(a);
    return (
      u.origin === endpoint.origin && u.pathname === endpoint.pathname && u.search === "" && u.hash === ""
    );
  } catch {
    return false;
  }
}

/**
 * The checks the service makes itself (module comment), and the headers to replay: exactly
 * the signed ones plus Authorization and a session token (content-length is recomputed).
 */
export function checkSignedRequest(
  req: SignedStsRequest,
  options: { endpoint: URL; region: string; audience: string; now: Date },
): Record<string, string> {
  if (req.method !== "POST") throw refuse("the signed request is not a POST");
  if (!sameUrl(req.url, options.endpoint)) throw refuse("the request was signed for another STS endpoint");
  if (req.body !== AWS_GET_CALLER_IDENTITY_BODY)
    throw refuse("the body is not exactly a GetCallerIdentity call");
  const h = req.headers;
  const auth = parseAuthorization(h.authorization);
  if (auth.service !== "sts" || auth.region !== options.region) {
    throw refuse(`the signature is not for STS in ${options.region}`);
  }
  const signed = new Set(auth.signedHeaders);
  for (const name of ["host", "x-amz-date", SERVER_ID_HEADER]) {
    if (!signed.has(name)) throw refuse(`${name} is not among the signed headers`);
    if (h[name] === undefined) throw refuse(`the signed header ${name} is missing`);
  }
  if (h[SERVER_ID_HEADER] !== options.audience) throw refuse("the request was signed for another server id");
  if (h.host !== options.endpoint.host) throw refuse("the request was signed for another STS host");
  const date = amzDate(h["x-amz-date"]);
  if (Number.isNaN(date) || (h["x-amz-date"] as string).slice(0, 8) !== auth.scopeDate) {
    throw refuse("X-Amz-Date is malformed or disagrees with the signature's scope");
  }
  if (Math.abs(date - options.now.getTime()) > AWS_DATE_SKEW_MS) {
    throw refuse("the signature is older (or newer) than 15 minutes");
  }
  const out: Record<string, string> = { authorization: h.authorization as string };
  for (const name of signed) {
    if (HOP_HEADERS.has(name)) throw refuse(`${name} cannot be a signed header`);
    const value = h[name];
    if (value === undefined) throw refuse(`the signed header ${name} is missing`);
    if (name === "content-length") {
      if (value !== String(Buffer.byteLength(req.body)))
        throw refuse("content-length disagrees with the body");
      continue;
    }
    out[name] = value;
  }
  // Temporary credentials' session token: some signers leave it out of SignedHeaders, and STS
  // needs it either way (a changed one fails STS's check).
  const sessionToken = h["x-amz-security-token"];
  if (sessionToken !== undefined) out["x-amz-security-token"] = sessionToken;
  return out;
}

/**
 * The attributes bindings match on: arn, account, userId, and for an assumed role its role
 * name and session name (`arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`).
 */
export function awsAttributes(identity: {
  arn: string;
  account: string;
  userId: string;
}): Record<string, string> {
  const attributes: Record<string, string> = {
    arn: identity.arn,
    account: identity.account,
    userId: identity.userId,
  };
  const assumed = /^arn:[^:]+:sts::\d{12}:assumed-role\/([^/]+)\/(.+)$/.exec(identity.arn);
  if (assumed) {
    attributes.role = assumed[1] as string;
    attributes.session = assumed[2] as string;
  }
  return attributes;
}

export function awsIamVerifier(options: AwsIamOptions): IdentityVerifier {
  const endpoint = new URL(options.stsEndpoint);
  return {
    method: "aws-iam",
    async verify(credential: string, ctx: VerifyContext): Promise<ProvenIdentity> {
      const req = decodeSignedRequest(credential);
      const headers = checkSignedRequest(req, {
        endpoint,
        region: options.region,
        audience: ctx.audience,
        now: ctx.now,
      });
      const identity = await getCallerIdentity({
        endpoint,
        headers,
        body: req.body,
        ...options.sts,
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      });
      return { method: "aws-iam", principal: identity.arn, attributes: awsAttributes(identity) };
    },
  };
}
