/**
 * Logging in to Vault / OpenBao before a transit call, for machines that hold no static token:
 * AppRole (`role_id` + `secret_id`, the secret id from a file, optionally response-wrapped) or
 * JWT / Kubernetes auth (a JWT from a file and a role). Configured by environment variables
 * only, named after Vault Agent's auto-auth settings:
 *
 *   VAULT_AUTH_METHOD   token (default: VAULT_TOKEN / ~/.vault-token) | approle | jwt | kubernetes
 *   VAULT_AUTH_MOUNT    the auth mount (`approle` or `auth/approle`; default: the method's name)
 *   VAULT_ROLE_ID, VAULT_ROLE_ID_FILE        approle: role_id, or role_id_file_path
 *   VAULT_SECRET_ID_FILE                     approle: secret_id_file_path
 *   VAULT_SECRET_ID_RESPONSE_WRAPPING_PATH   approle: the file holds a wrapping token created at
 *                                            this path (secret_id_response_wrapping_path)
 *   VAULT_AUTH_ROLE     jwt / kubernetes: role
 *   VAULT_JWT_FILE      jwt: path; kubernetes: token_path (default: the pod's service account token)
 *
 * The client token lives in memory for the run (one login per Vault address and settings, per
 * deps object), is never written, and is not revoked: the key interface has no end of run, and
 * the batch tokens such roles should issue cannot be revoked anyway; the role's `token_ttl`
 * bounds it (docs/providers.md). It is not renewed: one boot is short, and a process that
 * outlives the token (the service) logs in again at 80% of its TTL.
 */
import type { CallOptions } from "../../src/call-options.ts";
import { BootsealError } from "../../src/errors.ts";
import { readFileBounded } from "../../src/files/read-bounded.ts";
import { type RetryPolicy, retryCall } from "../../src/retry.ts";

type Env = Readonly<Record<string, string | undefined>>;

export const VAULT_AUTH_METHODS = ["token", "approle", "jwt", "kubernetes"] as const;
export type VaultAuthMethod = (typeof VAULT_AUTH_METHODS)[number];

/** Where a Kubernetes pod's service account token is mounted (Vault Agent's default token_path). */
export const KUBERNETES_TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/** A login method other than a static token, as the environment configures it. */
export type VaultLogin =
  | {
      readonly method: "approle";
      readonly mount: string;
      readonly roleId: { readonly value: string } | { readonly file: string };
      readonly secretIdFile: string | null;
      /** The secret id file holds a wrapping token whose creation path must be this. */
      readonly wrappingPath: string | null;
    }
  | {
      readonly method: "jwt" | "kubernetes";
      readonly mount: string;
      readonly role: string;
      readonly jwtFile: string;
    };

// Secret ids, role ids, wrapping tokens and JWTs are all far below this.
const MAX_CREDENTIAL_BYTES = 64 * 1024;

const usage = (message: string): BootsealError => new BootsealError("USAGE", `hc_vault: ${message}`);

const trimSlashes = (s: string): string => s.replace(/^\/+|\/+$/g, "");

/** `approle`, `/auth/approle/`, `auth/approle` -> `approle` (Vault Agent's mount_path has `auth/`). */
function mountOf(raw: string | undefined, method: VaultAuthMethod): string {
  const mount = trimSlashes(raw || method).replace(/^auth\//, "");
  if (mount === "" || /(^|\/)\.\.?(\/|$)|[?#\s]/.test(mount)) {
    throw usage(`VAULT_AUTH_MOUNT ${JSON.stringify(raw)} is not an auth mount path`);
  }
  return mount;
}

/** The login the environment asks for; null for the static token (VAULT_AUTH_METHOD unset or `token`). */
export function vaultLoginFromEnv(env: Env): VaultLogin | null {
  const raw = env.VAULT_AUTH_METHOD?.trim().toLowerCase() || "token";
  if (!(VAULT_AUTH_METHODS as readonly string[]).includes(raw)) {
    throw usage(`VAULT_AUTH_METHOD must be one of ${VAULT_AUTH_METHODS.join(", ")}`);
  }
  const method = raw as VaultAuthMethod;
  if (method === "token") return null;
  const mount = mountOf(env.VAULT_AUTH_MOUNT, method);
  if (method === "approle") {
    if (env.VAULT_ROLE_ID && env.VAULT_ROLE_ID_FILE) {
      throw usage("set VAULT_ROLE_ID or VAULT_ROLE_ID_FILE, not both");
    }
    const roleId = env.VAULT_ROLE_ID
      ? { value: env.VAULT_ROLE_ID }
      : env.VAULT_ROLE_ID_FILE
        ? { file: env.VAULT_ROLE_ID_FILE }
        : null;
    if (roleId === null) throw usage("VAULT_AUTH_METHOD=approle needs VAULT_ROLE_ID or VAULT_ROLE_ID_FILE");
    const wrapping = env.VAULT_SECRET_ID_RESPONSE_WRAPPING_PATH;
    if (wrapping && !env.VAULT_SECRET_ID_FILE) {
      throw usage("VAULT_SECRET_ID_RESPONSE_WRAPPING_PATH needs VAULT_SECRET_ID_FILE");
    }
    return {
      method,
      mount,
      roleId,
      secretIdFile: env.VAULT_SECRET_ID_FILE || null,
      wrappingPath: wrapping ? trimSlashes(wrapping) : null,
    };
  }
  const role = env.VAULT_AUTH_ROLE;
  if (!role) throw usage(`VAULT_AUTH_METHOD=${method} needs VAULT_AUTH_ROLE`);
  const jwtFile = env.VAULT_JWT_FILE || (method === "kubernetes" ? KUBERNETES_TOKEN_PATH : "");
  if (jwtFile === "") throw usage("VAULT_AUTH_METHOD=jwt needs VAULT_JWT_FILE");
  return { method, mount, role, jwtFile };
}

/** One line of a credential file; its content never appears in a message. */
async function readCredential(path: string, what: string): Promise<string> {
  let bytes: Uint8Array;
  try {
    bytes = await readFileBounded(path, { maxBytes: MAX_CREDENTIAL_BYTES });
  } catch (cause) {
    const why = cause instanceof BootsealError ? cause.message : "cannot be read";
    throw new BootsealError("KEY_ACCESS_DENIED", `hc_vault: the ${what} file: ${why}`, { cause });
  }
  const text = new TextDecoder().decode(bytes).trim();
  bytes.fill(0);
  if (text === "" || /\s/.test(text)) {
    throw new BootsealError(
      "KEY_ACCESS_DENIED",
      `hc_vault: the ${what} file ${path} must hold one value on one line`,
    );
  }
  return text;
}

interface Call {
  readonly address: string;
  readonly policy: RetryPolicy;
  readonly signal: AbortSignal | undefined;
}

/**
 * One unauthenticated-or-token POST to Vault, with retries on KEY_UNAVAILABLE; resolves to the
 * parsed answer. A refusal (4xx) is KEY_ACCESS_DENIED: the login's credential is the problem.
 */
async function vaultPost(
  call: Call,
  path: string,
  body: Record<string, string>,
  what: string,
  token?: string,
): Promise<Record<string, unknown>> {
  const url = `${call.address}/v1/${path}`;
  const payload = JSON.stringify(body);
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (token !== undefined) headers["X-Vault-Token"] = token;
  return retryCall(call.policy, what, "KEY_UNAVAILABLE", call.signal, async (attemptSignal) => {
    let res: Response;
    try {
      res = await fetch(url, { method: "POST", headers, body: payload, signal: attemptSignal });
    } catch (cause) {
      call.signal?.throwIfAborted();
      const why = (cause as { cause?: { code?: string } }).cause?.code ?? (cause as Error).name;
      throw new BootsealError("KEY_UNAVAILABLE", `${what}: unreachable (${why})`, { cause });
    }
    const text = await res.text();
    let parsed: Record<string, unknown> = {};
    try {
      const value: unknown = JSON.parse(text);
      if (typeof value === "object" && value !== null) parsed = value as Record<string, unknown>;
    } catch {}
    if (!res.ok) {
      // Vault's `errors` name the problem (invalid role or secret ID, permission denied), not the credential.
      const errors = Array.isArray(parsed.errors) ? parsed.errors.map(String) : [];
      const detail = errors.join("; ").slice(0, 200);
      const unavailable = res.status === 429 || res.status === 412 || res.status >= 500;
      throw new BootsealError(
        unavailable ? "KEY_UNAVAILABLE" : "KEY_ACCESS_DENIED",
        `${what}: ${unavailable ? "unavailable" : "refused"} (HTTP ${res.status}${detail ? `: ${detail}` : ""})`,
      );
    }
    return parsed;
  });
}

/** Vault Agent's check: a wrapping token from someone else (another creation path) is refused, never unwrapped. */
async function unwrapSecretId(call: Call, wrappingToken: string, expectedPath: string): Promise<string> {
  const what = `hc_vault: unwrapping the AppRole secret id at ${call.address}`;
  const lookup = await vaultPost(call, "sys/wrapping/lookup", { token: wrappingToken }, what);
  const creationPath = (lookup.data as { creation_path?: unknown } | null)?.creation_path;
  if (typeof creationPath !== "string" || trimSlashes(creationPath) !== expectedPath) {
    throw new BootsealError(
      "KEY_ACCESS_DENIED",
      `${what}: the wrapping token was created at ${JSON.stringify(creationPath)}, not ${expectedPath}`,
    );
  }
  // No retry here would help: a wrapping token is spent by its first unwrap.
  const answer = await vaultPost(
    { ...call, policy: { ...call.policy, attempts: 1 } },
    "sys/wrapping/unwrap",
    {},
    what,
    wrappingToken,
  );
  const secretId = (answer.data as { secret_id?: unknown } | null)?.secret_id;
  if (typeof secretId !== "string" || secretId === "") {
    throw new BootsealError("KEY_ACCESS_DENIED", `${what}: the wrapped answer holds no secret_id`);
  }
  return secretId;
}

async function loginBody(call: Call, login: VaultLogin): Promise<Record<string, string>> {
  if (login.method !== "approle") {
    return { role: login.role, jwt: await readCredential(login.jwtFile, `${login.method} JWT`) };
  }
  const roleId =
    "value" in login.roleId ? login.roleId.value : await readCredential(login.roleId.file, "AppRole role id");
  const body: Record<string, string> = { role_id: roleId };
  if (login.secretIdFile !== null) {
    const fromFile = await readCredential(login.secretIdFile, "AppRole secret id");
    body.secret_id =
      login.wrappingPath === null ? fromFile : await unwrapSecretId(call, fromFile, login.wrappingPath);
  }
  return body;
}

/** A client token and how long Vault says it lives (0: no expiry). */
export interface VaultLoginToken {
  readonly token: string;
  readonly ttlSeconds: number;
}

/** Logs in and returns the client token. KEY_ACCESS_DENIED when refused, KEY_UNAVAILABLE when Vault is down. */
export async function vaultLogin(
  address: string,
  login: VaultLogin,
  policy: RetryPolicy,
  options?: CallOptions,
): Promise<VaultLoginToken> {
  const call: Call = { address, policy, signal: options?.signal };
  const body = await loginBody(call, login);
  const what = `hc_vault: ${login.method} login at ${address}/v1/auth/${login.mount}`;
  const answer = await vaultPost(call, `auth/${login.mount}/login`, body, what);
  const auth = answer.auth as { client_token?: unknown; lease_duration?: unknown } | null;
  const token = auth?.client_token;
  if (typeof token !== "string" || token === "") {
    throw new BootsealError("KEY_ACCESS_DENIED", `${what}: the answer holds no client token`);
  }
  const ttl = auth?.lease_duration;
  return { token, ttlSeconds: typeof ttl === "number" && ttl > 0 ? ttl : 0 };
}

interface Cached {
  readonly pending: Promise<VaultLoginToken>;
  /** Epoch ms after which a new login is made (Infinity: never). */
  staleAt: number;
}

// One login per deps object (one run, one document): a second key on the same Vault reuses it,
// which matters for single-use secret ids and wrapping tokens.
const cache = new WeakMap<object, Map<string, Cached>>();

// A long-lived deps object (`bootseal serve`'s) logs in again before the token runs out.
const RENEW_AT_FRACTION = 0.8;

/**
 * The client token for `address`, logging in once per deps object and settings, and again
 * once 80% of the token's TTL has passed (for processes that outlive one boot).
 */
export async function cachedVaultLogin(
  owner: object,
  address: string,
  login: VaultLogin,
  policy: RetryPolicy,
  options?: CallOptions,
  now: () => number = Date.now,
): Promise<string> {
  let tokens = cache.get(owner);
  if (tokens === undefined) {
    tokens = new Map();
    cache.set(owner, tokens);
  }
  const key = JSON.stringify([address, login]);
  const known = tokens.get(key);
  if (known !== undefined && now() < known.staleAt) return (await known.pending).token;
  const started = now();
  const entry: Cached = { pending: vaultLogin(address, login, policy, options), staleAt: Infinity };
  tokens.set(key, entry);
  try {
    const got = await entry.pending;
    if (got.ttlSeconds > 0) entry.staleAt = started + got.ttlSeconds * 1000 * RENEW_AT_FRACTION;
    return got.token;
  } catch (err) {
    // A failed login is not kept: the next key (or the caller's retry) may try again.
    if (tokens.get(key) === entry) tokens.delete(key);
    throw err;
  }
}
