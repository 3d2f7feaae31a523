/**
 * FAKE Azure Key Vault (keys REST API over HTTPS), hand-written because no real emulator can
 * be installed here: lowkey-vault's app jar is not on Maven Central (docs/development.md,
 * "Fakes"). It speaks the real wire protocol, so @azure/keyvault-keys (KeyClient,
 * CryptographyClient) talks to it unchanged, over verified TLS.
 *
 * Authentication is Key Vault's challenge: a request without `Authorization: Bearer …` gets
 * 401 with `WWW-Authenticate: Bearer authorization="https://login.microsoftonline.com/<tenant>",
 * resource="https://vault.azure.net"` (what the SDK's keyVaultAuthenticationPolicy parses; the
 * host is not a *.vault.azure.net name, so clients set `disableChallengeResourceVerification`).
 * Then any bearer token is accepted, or only BOOTSEAL_FAKE_AZURE_KV_TOKEN when that is set.
 *
 * Implemented (any `api-version`, which is required, as by the service):
 *   POST /keys/{name}/create              kty RSA | RSA-HSM, key_size 2048 | 3072 | 4096,
 *                                          public_exponent, key_ops, attributes.enabled, tags:
 *                                          a new version (32 hex digits) that becomes current
 *   GET  /keys/{name}[/{version}]          the key bundle: public JWK (kid, kty, key_ops, n, e)
 *   POST /keys/{name}/{version}/encrypt | decrypt | wrapkey | unwrapkey
 *                                          {alg: RSA-OAEP-256 | RSA-OAEP | RSA1_5, value} ->
 *                                          {kid, value} (base64url), node:crypto RSA
 * The kid is `https://<Host header>/keys/{name}/{version}`. Errors have the service's shape
 * `{error: {code, message}}`: unknown key or version 404 KeyNotFound, a ciphertext that does
 * not decrypt (another key, tampered, garbage) or a bad parameter 400 BadParameter, an
 * operation not in key_ops or a disabled key 403 Forbidden, anything else 501 NotImplemented.
 * Omitted: EC and oct keys, import, delete/recover/purge, list, versions, update, rotate,
 * backup/restore, sign/verify, release, nbf/exp enforcement, RBAC, managed HSM. Keys live in
 * memory only.
 *
 *   node test/fakes/azure-kv-fake.ts --cert CERT.pem --key KEY.pem [--listen 127.0.0.1:8443]
 */
import {
  constants,
  generateKeyPairSync,
  type KeyObject,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
  randomUUID,
} from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import { argv, env, exit } from "node:process";

export const FAKE_TENANT = "00000000-0000-0000-0000-00000000fa4e";
const CHALLENGE = `Bearer authorization="https://login.microsoftonline.com/${FAKE_TENANT}", resource="https://vault.azure.net"`;
const DEFAULT_OPS = ["encrypt", "decrypt", "sign", "verify", "wrapKey", "unwrapKey"];
const KEY_NAME = /^[0-9a-zA-Z-]{1,127}$/;
const MAX_BODY = 1024 * 1024;

interface KeyVersion {
  readonly version: string;
  readonly kty: string;
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  readonly n: string;
  readonly e: string;
  readonly ops: readonly string[];
  readonly enabled: boolean;
  readonly tags: Record<string, string> | undefined;
  readonly created: number;
}
interface StoredKey {
  readonly name: string;
  readonly versions: Map<string, KeyVersion>;
  current: string;
}

class HttpError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const badParameter = (message: string) => new HttpError(400, "BadParameter", message);

export class AzureKvStore {
  /** By lower-case name: Key Vault names are case-insensitive. */
  readonly keys = new Map<string, StoredKey>();

  create(name: string, body: Record<string, unknown>): { key: StoredKey; v: KeyVersion } {
    if (!KEY_NAME.test(name)) badName(name);
    const kty = body.kty;
    if (kty !== "RSA" && kty !== "RSA-HSM") {
      throw badParameter(`The fake supports kty RSA and RSA-HSM only, got ${String(kty)}.`);
    }
    const size = body.key_size ?? 2048;
    if (size !== 2048 && size !== 3072 && size !== 4096) {
      throw badParameter(`Invalid key_size ${String(size)}: 2048, 3072 or 4096.`);
    }
    const exponent = body.public_exponent ?? 65537;
    if (typeof exponent !== "number" || !Number.isInteger(exponent) || exponent < 3 || exponent % 2 === 0) {
      throw badParameter(`Invalid public_exponent ${String(exponent)}.`);
    }
    const ops = body.key_ops ?? DEFAULT_OPS;
    if (!Array.isArray(ops) || !ops.every((o) => typeof o === "string")) {
      throw badParameter("key_ops must be a list of operations.");
    }
    const attributes = (body.attributes ?? {}) as { enabled?: unknown };
    const { privateKey, publicKey } = generateKeyPairSync("rsa", {
      modulusLength: size,
      publicExponent: exponent,
    });
    const jwk = publicKey.export({ format: "jwk" });
    const v: KeyVersion = {
      version: randomBytes(16).toString("hex"),
      kty,
      privateKey,
      publicKey,
      n: jwk.n as string,
      e: jwk.e as string,
      ops: ops as string[],
      enabled: attributes.enabled !== false,
      tags: (body.tags ?? undefined) as Record<string, string> | undefined,
      created: Math.floor(Date.now() / 1000),
    };
    let key = this.keys.get(name.toLowerCase());
    if (!key) {
      key = { name, versions: new Map(), current: v.version };
      this.keys.set(name.toLowerCase(), key);
    }
    key.versions.set(v.version, v);
    key.current = v.version;
    return { key, v };
  }

  /** A version of a key; "" is the current one. */
  get(name: string, version: string): { key: StoredKey; v: KeyVersion } {
    const key = this.keys.get(name.toLowerCase());
    const v = key?.versions.get(version === "" ? key.current : version.toLowerCase());
    if (!key || !v) {
      throw new HttpError(
        404,
        "KeyNotFound",
        `A key with (name/id) ${name}${version ? `/${version}` : ""} was not found in this key vault.`,
      );
    }
    return { key, v };
  }
}

function badName(name: string): never {
  throw badParameter(`The key name '${name}' is invalid: 1-127 characters 0-9, a-z, A-Z and '-'.`);
}

function bundle(base: string, key: StoredKey, v: KeyVersion) {
  return {
    key: { kid: `${base}/keys/${key.name}/${v.version}`, kty: v.kty, key_ops: v.ops, n: v.n, e: v.e },
    attributes: {
      enabled: v.enabled,
      created: v.created,
      updated: v.created,
      recoveryLevel: "Recoverable+Purgeable",
      recoverableDays: 90,
    },
    ...(v.tags ? { tags: v.tags } : {}),
  };
}

const OAEP = constants.RSA_PKCS1_OAEP_PADDING;

function rsaParams(alg: unknown): { padding: number; oaepHash?: string } {
  if (alg === "RSA-OAEP-256") return { padding: OAEP, oaepHash: "sha256" };
  if (alg === "RSA-OAEP") return { padding: OAEP, oaepHash: "sha1" };
  if (alg === "RSA1_5") return { padding: constants.RSA_PKCS1_PADDING };
  throw badParameter(`Invalid algorithm ${String(alg)} for an RSA key: RSA-OAEP-256, RSA-OAEP or RSA1_5.`);
}

/**
 * PKCS #1 v1.5 decryption with an explicit padding check. OpenSSL 3.2+ answers a bad RSA1_5
 * ciphertext with random bytes (implicit rejection); the service refuses it, so the fake
 * unpads a raw RSA result itself.
 */
function pkcs1v15Decrypt(key: KeyObject, ciphertext: Buffer): Buffer {
  const em = privateDecrypt({ key, padding: constants.RSA_NO_PADDING }, ciphertext);
  const sep = em.indexOf(0, 2);
  if (em[0] !== 0 || em[1] !== 2 || sep < 10) throw new Error("bad PKCS #1 v1.5 padding");
  return em.subarray(sep + 1);
}

function decode(value: unknown): Buffer {
  if (typeof value !== "string" || !/^[A-Za-z0-9_-]*={0,2}$/.test(value)) {
    throw badParameter("value must be base64url.");
  }
  return Buffer.from(value, "base64url");
}

function keyOperation(v: KeyVersion, op: string, body: Record<string, unknown>): Buffer {
  const permitted = { encrypt: "encrypt", decrypt: "decrypt", wrapkey: "wrapKey", unwrapkey: "unwrapKey" }[
    op
  ];
  if (!permitted) throw new HttpError(501, "NotImplemented", `The fake does not implement /${op}.`);
  if (!v.enabled)
    throw new HttpError(403, "Forbidden", `Operation ${permitted} is not allowed on a disabled key.`);
  if (!v.ops.includes(permitted)) {
    throw new HttpError(403, "Forbidden", `Operation ${permitted} is not permitted on this key.`);
  }
  const params = rsaParams(body.alg);
  const input = decode(body.value);
  if (op === "encrypt" || op === "wrapkey") {
    try {
      return publicEncrypt({ key: v.publicKey, ...params }, input);
    } catch {
      throw badParameter("The value is too long for this key and algorithm.");
    }
  }
  try {
    if (params.padding === constants.RSA_PKCS1_PADDING) return pkcs1v15Decrypt(v.privateKey, input);
    return privateDecrypt({ key: v.privateKey, ...params }, input);
  } catch {
    throw badParameter("Decryption failed: the ciphertext was not made with this key and algorithm.");
  }
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw badParameter("The request body is too large.");
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new Error("not an object");
    return parsed as Record<string, unknown>;
  } catch {
    throw badParameter("The request body is not a JSON object.");
  }
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": String(Buffer.byteLength(text)),
    "x-ms-request-id": randomUUID(),
    "x-ms-keyvault-service-version": "fake",
    ...headers,
  });
  res.end(text);
}

/** The request's answer: [status, body]. */
async function route(
  store: AzureKvStore,
  base: string,
  method: string,
  segments: string[],
  req: IncomingMessage,
): Promise<[number, unknown]> {
  const [root, name = "", third, fourth, ...rest] = segments;
  if (root === "keys" && name !== "" && rest.length === 0) {
    if (method === "POST" && third === "create" && fourth === undefined) {
      const { key, v } = store.create(name, await readJson(req));
      return [200, bundle(base, key, v)];
    }
    if (method === "GET" && fourth === undefined) {
      const { key, v } = store.get(name, third ?? "");
      return [200, bundle(base, key, v)];
    }
    if (method === "POST" && third !== undefined && fourth !== undefined) {
      const body = await readJson(req);
      const { key, v } = store.get(name, third);
      const value = keyOperation(v, fourth.toLowerCase(), body);
      return [200, { kid: `${base}/keys/${key.name}/${v.version}`, value: value.toString("base64url") }];
    }
  }
  throw new HttpError(
    501,
    "NotImplemented",
    `The fake Key Vault does not implement ${method} /${segments.join("/")}.`,
  );
}

export function handler(store: AzureKvStore, fallbackHost: string, token: string | undefined) {
  return async (req: IncomingMessage, res: ServerResponse) => {
    const method = req.method ?? "GET";
    const url = new URL(req.url ?? "/", "https://fake.invalid");
    const log = (status: number, extra = "") => console.log(`${method} ${url.pathname} ${status}${extra}`);
    const auth = /^Bearer (.+)$/i.exec(req.headers.authorization ?? "");
    if (!auth || (token !== undefined && auth[1] !== token)) {
      req.resume();
      log(401, auth ? " (wrong token)" : " (challenge)");
      const message = auth
        ? "AKV10032: Invalid token."
        : "AKV10000: Request is missing a Bearer or PoP token.";
      send(res, 401, { error: { code: "Unauthorized", message } }, { "www-authenticate": CHALLENGE });
      return;
    }
    try {
      if (!url.searchParams.get("api-version")) {
        throw badParameter("The 'api-version' query parameter is missing.");
      }
      const segments = url.pathname.split("/").slice(1).map(decodeURIComponent);
      const base = `https://${req.headers.host ?? fallbackHost}`;
      const [status, body] = await route(store, base, method, segments, req);
      log(status);
      send(res, status, body);
    } catch (err) {
      req.resume();
      const e = err instanceof HttpError ? err : new HttpError(500, "InternalServerError", String(err));
      log(e.status, ` ${e.code}: ${e.message}`);
      send(res, e.status, { error: { code: e.code, message: e.message } });
    }
  };
}

export interface AzureKvFake {
  readonly port: number;
  readonly server: Server;
  close(): Promise<void>;
}

/** Starts the fake on host:port (port 0: any free port) with a PEM certificate and key. */
export async function startAzureKvFake(
  host: string,
  port: number,
  tls: { cert: string | Buffer; key: string | Buffer },
  options: { token?: string; store?: AzureKvStore } = {},
): Promise<AzureKvFake> {
  const store = options.store ?? new AzureKvStore();
  const server = createServer({ cert: tls.cert, key: tls.key });
  server.on("request", handler(store, `${host}:${port}`, options.token));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const bound = typeof address === "object" && address ? address.port : port;
  return {
    port: bound,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function arg(name: string): string | undefined {
  const at = argv.indexOf(name);
  return at >= 0 ? argv[at + 1] : undefined;
}

async function main() {
  const listen = arg("--listen") ?? "127.0.0.1:8443";
  const certFile = arg("--cert");
  const keyFile = arg("--key");
  const colon = listen.lastIndexOf(":");
  const host = listen.slice(0, colon);
  const port = Number(listen.slice(colon + 1));
  if (!certFile || !keyFile || colon <= 0 || !Number.isInteger(port)) {
    console.error("usage: azure-kv-fake.ts --cert CERT.pem --key KEY.pem [--listen HOST:PORT]");
    exit(2);
  }
  const token = env.BOOTSEAL_FAKE_AZURE_KV_TOKEN || undefined;
  const fake = await startAzureKvFake(
    host,
    port,
    { cert: readFileSync(certFile), key: readFileSync(keyFile) },
    token === undefined ? {} : { token },
  );
  console.log(
    `FAKE Azure Key Vault (wire-protocol HTTPS) listening on https://${host}:${fake.port}; ` +
      (token === undefined ? "any bearer token" : "bearer token from BOOTSEAL_FAKE_AZURE_KV_TOKEN"),
  );
  const stop = () => void fake.close().then(() => exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

if (import.meta.main) await main();
