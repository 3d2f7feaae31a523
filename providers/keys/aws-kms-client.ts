/**
 * The AWS SDK side of the AWS KMS provider (aws-kms.ts): clients, STS role credentials, the
 * error classes, and the checks on KMS's answers. The kind's format, syntax and MasterKey are
 * in aws-kms.ts.
 */
import { hostname } from "node:os";
import type { KMSClient, KMSClientConfig } from "@aws-sdk/client-kms";
import { BootsealError } from "../../src/errors.ts";
import type { RetryPolicy } from "../../src/retry.ts";
import { lazyModule } from "../lazy-module.ts";
import type { BaseDeps } from "./key-type.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters
// (process.stdin among them), which costs every CLI run start-up time.
const processEnv = process.env;

/** `awsKms` in ProviderDeps. */
export interface AwsKmsOptions {
  /** KMS endpoint (an emulator); default from AWS_ENDPOINT_URL_KMS / AWS_ENDPOINT_URL. */
  readonly endpoint?: string;
  /** STS endpoint for `role`; default AWS_ENDPOINT_URL_STS / AWS_ENDPOINT_URL. */
  readonly stsEndpoint?: string;
  /** Static credentials instead of the SDK's default chain (tests, injected identities). */
  readonly credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  readonly retry?: Partial<RetryPolicy>;
  /** Connect timeout of one attempt, ms (default 2000). */
  readonly connectTimeoutMs?: number;
}

/** sops kms arnRegex: the region is the first group. */
const ARN = /^arn:aws[\w-]*:kms:(.+):[0-9]+:(key|alias)\/.+$/;
/** sops stsSessionRegex, `[^a-zA-Z0-9=,.@-_]+`: note `@-_` is a range (@ through _), kept as is. */
const STS_SESSION_DROP = /[^a-zA-Z0-9=,.@-_]+/g;
const SESSION_NAME_LIMIT = 64;

export interface KmsSettings {
  readonly arn: string;
  readonly role: string;
  readonly context: Readonly<Record<string, string>> | undefined;
  readonly profile: string;
}

export interface AwsKmsDeps extends BaseDeps {
  readonly awsKms?: AwsKmsOptions;
}

export function regionOf(arn: string): string {
  const m = ARN.exec(arn);
  if (!m) throw new BootsealError("BAD_INPUT", `kms: not a KMS key ARN: ${arn}`);
  return m[1] as string;
}

/** sops stsSessionName. */
export function stsSessionName(host: string = hostname()): string {
  return `sops@${host.replace(STS_SESSION_DROP, "")}`.slice(0, SESSION_NAME_LIMIT);
}

/** The key part of a key ARN (`key/<id>`), or null for an alias ARN. */
function keyPart(arn: string): string | null {
  const m = /:(key\/.+)$/.exec(arn);
  return m ? (m[1] as string) : null;
}

const DENIED = new Set([
  "AccessDeniedException",
  "UnrecognizedClientException",
  "InvalidSignatureException",
  "IncompleteSignature",
  "ExpiredTokenException",
  "InvalidClientTokenId",
  "MissingAuthenticationToken",
  "DisabledException",
  "KMSInvalidStateException",
  "KeyUnavailableException",
]);
const NOT_FOUND = new Set(["NotFoundException", "InvalidArnException", "InvalidKeyUsageException"]);
const TRANSIENT = new Set([
  "ThrottlingException",
  "LimitExceededException",
  "KMSInternalException",
  "DependencyTimeoutException",
  "ServiceUnavailable",
  "InternalFailure",
  "TimeoutError",
  "RequestTimeout",
]);

/** One SDK failure as a BootsealError naming the key and the cause class, never key bytes. */
export function mapKmsError(err: unknown, id: string, op: string): BootsealError {
  if (err instanceof BootsealError) return err;
  const e = err as { name?: string; code?: string; $metadata?: { httpStatusCode?: number } };
  const name = e?.name ?? "Error";
  const status = e?.$metadata?.httpStatusCode;
  const what = `kms: ${op} with ${id}`;
  if (name === "InvalidCiphertextException") {
    return new BootsealError("BAD_INPUT", `${what}: wrong encryption context or ciphertext (${name})`, {
      cause: err,
    });
  }
  if (name === "IncorrectKeyException") {
    return new BootsealError("BAD_INPUT", `${what}: the ciphertext was made by another key (${name})`, {
      cause: err,
    });
  }
  if (DENIED.has(name) || status === 403) {
    return new BootsealError("KEY_ACCESS_DENIED", `${what}: access denied (${name})`, { cause: err });
  }
  if (NOT_FOUND.has(name)) {
    return new BootsealError("KEY_NOT_FOUND", `${what}: key not found (${name})`, { cause: err });
  }
  if (name === "CredentialsProviderError") {
    return new BootsealError("KEY_ACCESS_DENIED", `${what}: no AWS credentials`, { cause: err });
  }
  // No HTTP status: the request never got an answer (refused, reset, timed out, aborted).
  if (TRANSIENT.has(name) || status === undefined || status === 429 || status >= 500) {
    const why =
      status === undefined ? `unreachable (${e?.code ?? name})` : `unavailable (${name}, HTTP ${status})`;
    return new BootsealError("KEY_UNAVAILABLE", `${what}: ${why}`, { cause: err });
  }
  return new BootsealError("BAD_INPUT", `${what}: refused (${name}, HTTP ${status})`, { cause: err });
}

type Credentials = NonNullable<KMSClientConfig["credentials"]>;

/** The SDK loads on the first KMS call, not with the registry: it is large and most runs never use it. */
export const loadKmsSdk = lazyModule(() => import("@aws-sdk/client-kms")).load;

/** AssumeRole through STS, memoised until shortly before expiry (sops createSTSConfig). */
function assumeRoleCredentials(
  role: string,
  region: string,
  profile: string,
  given: AwsKmsOptions,
  env: Readonly<Record<string, string | undefined>>,
): Credentials {
  let cached:
    | { accessKeyId: string; secretAccessKey: string; sessionToken: string; expiration?: Date }
    | undefined;
  return async () => {
    if (cached && (!cached.expiration || cached.expiration.getTime() - Date.now() > 300_000)) return cached;
    // STS ships inside the SDK (the nested client its credential providers use to assume roles);
    // loaded only when a role is configured.
    const { STSClient, AssumeRoleCommand } = await import("@aws-sdk/nested-clients/sts");
    const endpoint = given.stsEndpoint ?? env.AWS_ENDPOINT_URL_STS ?? env.AWS_ENDPOINT_URL;
    const sts = new STSClient({
      region,
      maxAttempts: 1,
      ...(endpoint ? { endpoint } : {}),
      ...(profile ? { profile } : {}),
      ...(given.credentials ? { credentials: given.credentials } : {}),
    });
    try {
      const out = await sts.send(new AssumeRoleCommand({ RoleArn: role, RoleSessionName: stsSessionName() }));
      const c = out.Credentials;
      if (!c?.AccessKeyId || !c.SecretAccessKey || !c.SessionToken)
        throw new Error("no credentials in answer");
      cached = {
        accessKeyId: c.AccessKeyId,
        secretAccessKey: c.SecretAccessKey,
        sessionToken: c.SessionToken,
        ...(c.Expiration ? { expiration: c.Expiration } : {}),
      };
      return cached;
    } catch (cause) {
      const mapped = mapKmsError(cause, role, "assume role");
      throw new BootsealError(
        mapped.code === "BAD_INPUT" ? "KEY_ACCESS_DENIED" : mapped.code,
        `kms: failed to assume role ${role}: ${mapped.message}`,
        { cause },
      );
    } finally {
      sts.destroy();
    }
  };
}

export async function newClient(s: KmsSettings, deps: AwsKmsDeps): Promise<KMSClient> {
  const { KMSClient } = await loadKmsSdk();
  const given = deps.awsKms ?? {};
  const env = deps.env ?? processEnv;
  const region = regionOf(s.arn);
  const endpoint = given.endpoint ?? env.AWS_ENDPOINT_URL_KMS ?? env.AWS_ENDPOINT_URL;
  const credentials = s.role
    ? assumeRoleCredentials(s.role, region, s.profile, given, env)
    : given.credentials;
  return new KMSClient({
    region,
    // src/retry.ts is the only retry loop, so the bound is known.
    maxAttempts: 1,
    requestHandler: { connectionTimeout: given.connectTimeoutMs ?? 2_000 },
    ...(endpoint ? { endpoint } : {}),
    ...(s.profile ? { profile: s.profile } : {}),
    ...(credentials ? { credentials } : {}),
  });
}

/** Precondition on KMS's answer (ESDK kms_keyring): the key that did the work is the one asked for. */
export function checkAnsweredKey(s: KmsSettings, answered: string | undefined, id: string): void {
  const wanted = keyPart(s.arn);
  if (wanted === null) return; // an alias ARN: KMS answers with the key it points to
  if (answered === undefined || keyPart(answered) !== wanted) {
    throw new BootsealError("BAD_INPUT", `kms: ${id}: KMS answered for another key (${answered ?? "none"})`);
  }
}

export function isNoCredentials(err: BootsealError): boolean {
  return (err.cause as { name?: string } | undefined)?.name === "CredentialsProviderError";
}
