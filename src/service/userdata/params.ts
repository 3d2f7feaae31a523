/**
 * The inputs of a user-data stub, checked once at the edge. Every value that reaches a stub
 * has passed these checks: URLs are http(s) with a conservative character set (no quote,
 * backslash, space or control character), machine names are DNS-1123 labels, the hash is
 * 64 hex digits, the token is [A-Za-z0-9._-], the public key is an Ed25519 SPKI PEM. The
 * stubs still escape every value for their own language; these checks are the second wall.
 * Messages never echo the token.
 */
import { createPublicKey } from "node:crypto";
import { checkBootstrapCommand } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import { type CloudAuthMethod, isCloudAuthMethod } from "../../machine/identity-login.ts";
import { formatMachineId, isDnsLabel } from "../../machine/machine-id.ts";

export type UserdataFormat = "cloud-init" | "ignition" | "powershell";

export const USERDATA_FORMATS: readonly UserdataFormat[] = ["cloud-init", "ignition", "powershell"];

/**
 * How the machine authenticates: its bootstrap token (written 0600 by the stub), or its cloud
 * identity (`bootseal fetch --auth METHOD`), in which case the stub carries no secret at all.
 */
export type StubAuth =
  | { readonly method: "token"; readonly token: string }
  /** `args`: the login flags after `--auth METHOD` (identity/index.ts loginFlags), no secret. */
  | { readonly method: CloudAuthMethod; readonly args?: readonly string[] };

/** A login flag or value a stub may carry unquoted in every stub language. */
const LOGIN_ARG = /^[A-Za-z0-9._:/@=+,-]{1,512}$/;

/** `--auth METHOD` and its login flags, as one command-line fragment. */
export function authArgs(auth: Exclude<StubAuth, { method: "token" }>): string {
  return ["--auth", auth.method, ...(auth.args ?? [])].join(" ");
}

export type UserdataParams = {
  serviceUrl: string;
  machine: { namespace: string; name: string };
  auth: StubAuth;
  /** The bootstrap command `bootseal fetch --exec` runs after the files; none: no --exec. */
  command?: string | undefined;
  /** cloud-config modules the fetcher skips (`--skip-module`): the BootsealConfig's `skipModules`. */
  skipModules?: readonly string[] | undefined;
  artifact: {
    url: string;
    sha256: string;
    /** Hex; Ignition's verification.hash (the Ignition stub needs it). */
    sha512?: string | undefined;
    signatureUrl: string;
    publicKeyPem: string;
  };
};

/** Params after validation and normalisation (lower-case hash, canonical PEM, no trailing slash). */
export type CheckedParams = {
  readonly serviceUrl: string;
  readonly namespace: string;
  readonly name: string;
  /** `<namespace>/<name>` */
  readonly machine: string;
  /** `<serviceUrl>/v1/machines/<namespace>/<name>/config` */
  readonly configUrl: string;
  readonly auth: StubAuth;
  readonly command: string | undefined;
  /** Checked names (SKIP_MODULE_NAME), without repeats, in the given order. */
  readonly skipModules: readonly string[];
  readonly artifactUrl: string;
  readonly artifactSha256: string;
  /** Lower-case hex, or undefined when the artifact has none. */
  readonly artifactSha512: string | undefined;
  readonly signatureUrl: string;
  /** SPKI PEM with LF line ends and a final newline. */
  readonly publicKeyPem: string;
};

const MAX_URL = 2048;
// RFC 3986 unreserved + reserved + '%', less the single quote: every value can then be put
// between single quotes in a systemd environment file, and nothing in it needs a shell.
const URL_CHARS = /^[A-Za-z0-9\-._~:/?[\]@!$&()*+,;=%]+$/;
const SHA256_HEX = /^[0-9a-fA-F]{64}$/;
const SHA512_HEX = /^[0-9a-fA-F]{128}$/;
const TOKEN = /^[A-Za-z0-9._-]{16,1024}$/;
const PEM = /^-----BEGIN PUBLIC KEY-----\n(?:[A-Za-z0-9+/=]{1,76}\n){1,20}-----END PUBLIC KEY-----\n?$/;

function bad(message: string): never {
  throw new BootsealError("BAD_INPUT", message);
}

function checkUrl(what: string, value: unknown, allowQuery: boolean): string {
  if (typeof value !== "string" || value.length === 0) bad(`${what}: expected a URL`);
  if (value.length > MAX_URL) bad(`${what}: longer than ${MAX_URL} characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    bad(`${what}: not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") bad(`${what}: only http and https URLs`);
  if (url.username !== "" || url.password !== "") bad(`${what}: credentials in the URL are not allowed`);
  if (url.hostname === "") bad(`${what}: no host`);
  if (url.hash !== "" || value.includes("#")) bad(`${what}: a fragment is not allowed`);
  if (!allowQuery && url.search !== "") bad(`${what}: a query is not allowed`);
  // The serialised form, so that what the stub carries is what a client would send.
  let out = url.href;
  if (!allowQuery) out = out.replace(/\/+$/, "");
  if (out.length > MAX_URL) bad(`${what}: longer than ${MAX_URL} characters`);
  if (!URL_CHARS.test(out)) bad(`${what}: contains a character outside the allowed URL set`);
  return out;
}

function checkLabel(what: string, value: unknown): string {
  if (typeof value !== "string" || !isDnsLabel(value)) {
    bad(`${what}: expected a DNS-1123 label (lower-case letters, digits and '-', at most 63)`);
  }
  return value;
}

function checkPublicKey(value: unknown): string {
  if (typeof value !== "string") bad("artifact.publicKeyPem: expected a PEM string");
  const pem = value.replace(/\r\n/g, "\n").trim() + "\n";
  if (!PEM.test(pem)) bad("artifact.publicKeyPem: expected one 'PUBLIC KEY' PEM block");
  let type: string | undefined;
  let canonical: string;
  try {
    const key = createPublicKey({ key: pem, format: "pem" });
    type = key.asymmetricKeyType;
    canonical = String(key.export({ type: "spki", format: "pem" }));
  } catch {
    bad("artifact.publicKeyPem: not a parsable public key");
  }
  if (type !== "ed25519") bad("artifact.publicKeyPem: expected an Ed25519 key");
  return canonical.endsWith("\n") ? canonical : canonical + "\n";
}

function checkAuth(value: unknown): StubAuth {
  if (typeof value !== "object" || value === null) bad("auth: expected {method, token} or {method}");
  const a = value as Record<string, unknown>;
  if (a.method === "token") {
    const token = a.token;
    if (typeof token !== "string" || !TOKEN.test(token)) {
      bad("auth.token: expected 16 to 1024 characters of [A-Za-z0-9._-]");
    }
    return { method: "token", token };
  }
  if (!isCloudAuthMethod(a.method)) bad("auth.method: expected token, aws-iam, gcp, azure or tpm");
  // A cloud method carries no secret: a token beside it would be one.
  if (a.token !== undefined) bad("auth.token: only with method token");
  const args: unknown = a.args ?? [];
  if (!Array.isArray(args) || args.some((x) => typeof x !== "string" || !LOGIN_ARG.test(x))) {
    bad("auth.args: expected login flags of [A-Za-z0-9._:/@=+,-]");
  }
  return { method: a.method, args: args as string[] };
}

/** A cloud-config module name as `bootseal fetch --skip-module` takes it (one shell and systemd word). */
export const SKIP_MODULE_NAME = /^[a-z][a-z_]{0,31}$/;
export const MAX_SKIP_MODULES = 16;

function checkSkipModules(value: unknown): readonly string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > MAX_SKIP_MODULES)
    bad(`skipModules: expected at most ${MAX_SKIP_MODULES} module names`);
  for (const name of value as unknown[]) {
    if (typeof name !== "string" || !SKIP_MODULE_NAME.test(name))
      bad("skipModules: a module name is lower-case letters and '_' (e.g. ntp, users_groups)");
  }
  return [...new Set(value as string[])];
}

/** Checks and normalises the params; throws BootsealError("BAD_INPUT") on the first fault. */
export function checkParams(params: UserdataParams): CheckedParams {
  if (typeof params !== "object" || params === null) bad("userdata params: expected an object");
  const machine: unknown = params.machine;
  const artifact: unknown = params.artifact;
  if (typeof machine !== "object" || machine === null) bad("machine: expected {namespace, name}");
  if (typeof artifact !== "object" || artifact === null) bad("artifact: expected an object");
  const m = machine as Record<string, unknown>;
  const a = artifact as Record<string, unknown>;

  const serviceUrl = checkUrl("serviceUrl", params.serviceUrl, false);
  // Windows Task Scheduler expands %NAME% in a task's arguments, which carry this URL.
  if (serviceUrl.includes("%")) bad("serviceUrl: percent-encoded characters are not supported");
  const namespace = checkLabel("machine.namespace", m.namespace);
  const name = checkLabel("machine.name", m.name);
  const auth = checkAuth(params.auth);
  const command = params.command === undefined ? undefined : checkBootstrapCommand(params.command, "command");
  const skipModules = checkSkipModules(params.skipModules);
  const artifactUrl = checkUrl("artifact.url", a.url, true);
  const signatureUrl = checkUrl("artifact.signatureUrl", a.signatureUrl, true);
  const sha: unknown = a.sha256;
  if (typeof sha !== "string" || !SHA256_HEX.test(sha)) bad("artifact.sha256: expected 64 hex digits");
  const publicKeyPem = checkPublicKey(a.publicKeyPem);
  const sha512: unknown = a.sha512;
  if (sha512 !== undefined && (typeof sha512 !== "string" || !SHA512_HEX.test(sha512))) {
    bad("artifact.sha512: expected 128 hex digits");
  }

  return {
    serviceUrl,
    namespace,
    name,
    machine: formatMachineId({ namespace, name }),
    configUrl: `${serviceUrl}/v1/machines/${namespace}/${name}/config`,
    auth,
    command,
    skipModules,
    artifactUrl,
    artifactSha256: sha.toLowerCase(),
    artifactSha512: sha512 === undefined ? undefined : (sha512 as string).toLowerCase(),
    signatureUrl,
    publicKeyPem,
  };
}
