/**
 * FAKE Cloud KMS (google.cloud.kms.v1.KeyManagementService over gRPC), hand-written because
 * no real emulator can be installed here: fake-cloud-kms is refused by the Go module proxy
 * (docs/development.md, "Fakes"). It speaks the real wire protocol, from the .proto files that
 * ship with @google-cloud/kms, so the real client talks to it unchanged (insecure channel).
 *
 * Implemented: CreateKeyRing, GetKeyRing, CreateCryptoKey (ENCRYPT_DECRYPT only; version 1
 * unless skip_initial_version_creation), GetCryptoKey, CreateCryptoKeyVersion,
 * GetCryptoKeyVersion, UpdateCryptoKeyPrimaryVersion, Encrypt, Decrypt, with the crc32c
 * integrity fields. Every other RPC answers UNIMPLEMENTED (grpc-js's default handler).
 *
 * Each CryptoKeyVersion holds a random 32-byte AES-256-GCM key, in memory only. A ciphertext
 * is opaque to clients: version number (4 bytes, big endian) || IV (12) || AES-GCM body ||
 * tag (16); the additional authenticated data is the request's AAD. As the real service:
 * a wrong AAD or another key's ciphertext is INVALID_ARGUMENT "Decryption failed: verify that
 * 'name' refers to the correct CryptoKey."; a name that does not exist is NOT_FOUND.
 * Omitted: IAM and authentication (any or no credentials), key states other than ENABLED,
 * destruction, rotation schedules, labels, lists, asymmetric/MAC/raw/HSM/EKM operations.
 *
 *   node test/fakes/gcp-kms-fake.ts [--listen 127.0.0.1:9010]
 *
 * BOOTSEAL_FAKE_GCP_KMS_SEED=FILE (optional): a JSON file
 * `{"keys": [{"name": "projects/P/locations/L/keyRings/R/cryptoKeys/K", "key": "<base64 of 32 bytes>"}]}`;
 * each key is created at start with that material as version 1 (key rings as needed).
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { argv, env, exit } from "node:process";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { crc32c } from "./crc32c.ts";

const PROJECT_LOCATION = /^projects\/[^/]+\/locations\/[^/]+$/;
const KEY_RING = /^projects\/[^/]+\/locations\/[^/]+\/keyRings\/[^/]+$/;
const CRYPTO_KEY = /^(projects\/[^/]+\/locations\/[^/]+\/keyRings\/[^/]+\/cryptoKeys\/[^/]+)$/;
const CRYPTO_KEY_VERSION =
  /^(projects\/[^/]+\/locations\/[^/]+\/keyRings\/[^/]+\/cryptoKeys\/[^/]+)\/cryptoKeyVersions\/([1-9][0-9]*)$/;
const ID = /^[a-zA-Z0-9_-]{1,63}$/;
const MAX_DATA = 64 * 1024;
const IV_LEN = 12;
const TAG_LEN = 16;
const HEADER_LEN = 4;
const DECRYPTION_FAILED = "Decryption failed: verify that 'name' refers to the correct CryptoKey.";

interface Timestamp {
  seconds: string;
  nanos: number;
}
interface Int64Value {
  value?: string | number;
}
interface KeyVersion {
  readonly number: number;
  readonly key: Buffer;
  readonly createTime: Timestamp;
}
interface CryptoKeyState {
  readonly name: string;
  readonly createTime: Timestamp;
  primary: number | undefined;
  readonly versions: Map<number, KeyVersion>;
}

/** A gRPC error the handlers throw; `unary` turns it into the call's status. */
class RpcError extends Error {
  readonly code: grpc.status;
  constructor(code: grpc.status, details: string) {
    super(details);
    this.code = code;
  }
}

const invalid = (details: string) => new RpcError(grpc.status.INVALID_ARGUMENT, details);
const notFound = (details: string) => new RpcError(grpc.status.NOT_FOUND, details);

function now(): Timestamp {
  const ms = Date.now();
  return { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

function bytes(value: Buffer | Uint8Array | undefined): Buffer {
  return value ? Buffer.from(value) : Buffer.alloc(0);
}

/** Checks an optional `*_crc32c` request field against its data; true when one was given. */
function checkCrc(field: string, dataField: string, given: Int64Value | null | undefined, data: Buffer) {
  if (given === undefined || given === null) return false;
  if (Number(given.value ?? 0) !== crc32c(data)) {
    throw invalid(`The checksum in field ${field} did not match the data in field ${dataField}.`);
  }
  return true;
}

export interface GcpKmsFake {
  readonly port: number;
  close(): Promise<void>;
}

function loadService(): grpc.ServiceDefinition {
  const require = createRequire(import.meta.url);
  const kmsProtos = join(dirname(require.resolve("@google-cloud/kms")), "..", "protos");
  const gaxProtos = join(dirname(require.resolve("google-gax")), "..", "protos");
  const definition = protoLoader.loadSync("google/cloud/kms/v1/service.proto", {
    includeDirs: [kmsProtos, gaxProtos],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: false,
    oneofs: true,
  });
  // A service entry of a package definition is a map: method name -> method definition.
  const service = definition["google.cloud.kms.v1.KeyManagementService"];
  if (!service) throw new Error("google.cloud.kms.v1.KeyManagementService is not in the .proto files");
  return service as grpc.ServiceDefinition;
}

export class GcpKmsStore {
  readonly keyRings = new Map<string, Timestamp>();
  readonly cryptoKeys = new Map<string, CryptoKeyState>();

  createKeyRing(parent: string, id: string) {
    if (!PROJECT_LOCATION.test(parent)) throw invalid(`Invalid parent: ${parent}`);
    if (!ID.test(id)) throw invalid(`Invalid key_ring_id: ${id}`);
    const name = `${parent}/keyRings/${id}`;
    if (this.keyRings.has(name))
      throw new RpcError(grpc.status.ALREADY_EXISTS, `KeyRing ${name} already exists.`);
    this.keyRings.set(name, now());
    return this.keyRing(name);
  }

  keyRing(name: string) {
    const createTime = this.keyRings.get(name);
    if (!createTime) {
      if (!KEY_RING.test(name)) throw invalid(`Invalid resource name: ${name}`);
      throw notFound(`KeyRing ${name} not found.`);
    }
    return { name, createTime };
  }

  createCryptoKey(parent: string, id: string, purpose: string | undefined, skipVersion: boolean) {
    this.keyRing(parent);
    if (!ID.test(id)) throw invalid(`Invalid crypto_key_id: ${id}`);
    if (purpose !== "ENCRYPT_DECRYPT") {
      throw invalid(`The fake supports purpose ENCRYPT_DECRYPT only, got ${purpose ?? "none"}.`);
    }
    const name = `${parent}/cryptoKeys/${id}`;
    if (this.cryptoKeys.has(name)) {
      throw new RpcError(grpc.status.ALREADY_EXISTS, `CryptoKey ${name} already exists.`);
    }
    const state: CryptoKeyState = { name, createTime: now(), primary: undefined, versions: new Map() };
    this.cryptoKeys.set(name, state);
    if (!skipVersion) this.addVersion(state, randomBytes(32), true);
    return this.cryptoKeyMessage(state);
  }

  addVersion(state: CryptoKeyState, key: Buffer, makePrimary: boolean): KeyVersion {
    const number = state.versions.size + 1;
    const version = { number, key, createTime: now() };
    state.versions.set(number, version);
    if (makePrimary) state.primary = number;
    return version;
  }

  /** The key of a CryptoKey name (not a version name). */
  cryptoKey(name: string): CryptoKeyState {
    const state = this.cryptoKeys.get(name);
    if (state) return state;
    if (!CRYPTO_KEY.test(name)) throw invalid(`Invalid resource name: ${name}`);
    throw notFound(`CryptoKey ${name} not found.`);
  }

  /** A CryptoKeyVersion name: its key and version. */
  version(name: string): { state: CryptoKeyState; version: KeyVersion } {
    const m = CRYPTO_KEY_VERSION.exec(name);
    if (!m) throw invalid(`Invalid resource name: ${name}`);
    const state = this.cryptoKey(m[1] as string);
    const version = state.versions.get(Number(m[2]));
    if (!version) throw notFound(`CryptoKeyVersion ${name} not found.`);
    return { state, version };
  }

  versionMessage(state: CryptoKeyState, v: KeyVersion) {
    return {
      name: `${state.name}/cryptoKeyVersions/${v.number}`,
      state: "ENABLED",
      protectionLevel: "SOFTWARE",
      algorithm: "GOOGLE_SYMMETRIC_ENCRYPTION",
      createTime: v.createTime,
      generateTime: v.createTime,
    };
  }

  cryptoKeyMessage(state: CryptoKeyState) {
    const primary = state.primary === undefined ? undefined : state.versions.get(state.primary);
    return {
      name: state.name,
      ...(primary ? { primary: this.versionMessage(state, primary) } : {}),
      purpose: "ENCRYPT_DECRYPT",
      createTime: state.createTime,
      versionTemplate: { protectionLevel: "SOFTWARE", algorithm: "GOOGLE_SYMMETRIC_ENCRYPTION" },
      destroyScheduledDuration: { seconds: String(30 * 24 * 3600), nanos: 0 },
    };
  }

  encrypt(name: string, plaintext: Buffer, aad: Buffer) {
    let state: CryptoKeyState;
    let version: KeyVersion | undefined;
    if (CRYPTO_KEY_VERSION.test(name)) ({ state, version } = this.version(name));
    else {
      state = this.cryptoKey(name);
      version = state.primary === undefined ? undefined : state.versions.get(state.primary);
      if (!version) {
        throw new RpcError(grpc.status.FAILED_PRECONDITION, `CryptoKey ${name} has no primary version.`);
      }
    }
    if (plaintext.length === 0) throw invalid("Plaintext is empty.");
    if (plaintext.length > MAX_DATA) throw invalid("Plaintext is larger than 64 KiB.");
    if (aad.length > MAX_DATA) throw invalid("Additional authenticated data is larger than 64 KiB.");
    const iv = randomBytes(IV_LEN);
    const cipher = createCipheriv("aes-256-gcm", version.key, iv, { authTagLength: TAG_LEN });
    cipher.setAAD(aad);
    const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    const header = Buffer.alloc(HEADER_LEN);
    header.writeUInt32BE(version.number);
    const ciphertext = Buffer.concat([header, iv, body, cipher.getAuthTag()]);
    return { versionName: `${state.name}/cryptoKeyVersions/${version.number}`, ciphertext };
  }

  decrypt(name: string, ciphertext: Buffer, aad: Buffer) {
    if (CRYPTO_KEY_VERSION.test(name)) {
      throw invalid(`Decrypt takes a CryptoKey name, not a CryptoKeyVersion: ${name}`);
    }
    const state = this.cryptoKey(name);
    if (ciphertext.length < HEADER_LEN + IV_LEN + TAG_LEN) throw invalid(DECRYPTION_FAILED);
    const version = state.versions.get(ciphertext.readUInt32BE(0));
    if (!version) throw invalid(DECRYPTION_FAILED);
    const iv = ciphertext.subarray(HEADER_LEN, HEADER_LEN + IV_LEN);
    const body = ciphertext.subarray(HEADER_LEN + IV_LEN, ciphertext.length - TAG_LEN);
    const decipher = createDecipheriv("aes-256-gcm", version.key, iv, { authTagLength: TAG_LEN });
    decipher.setAAD(aad);
    decipher.setAuthTag(ciphertext.subarray(ciphertext.length - TAG_LEN));
    try {
      const plaintext = Buffer.concat([decipher.update(body), decipher.final()]);
      return { plaintext, usedPrimary: version.number === state.primary };
    } catch {
      throw invalid(DECRYPTION_FAILED);
    }
  }

  /** Creates `name` (a CryptoKey) with `key` as version 1, and its key ring when missing. */
  seed(name: string, key: Buffer) {
    const m = /^(.*)\/cryptoKeys\/([^/]+)$/.exec(name);
    if (!m || !CRYPTO_KEY.test(name)) throw new Error(`seed: not a CryptoKey name: ${name}`);
    if (key.length !== 32) throw new Error(`seed: ${name}: the key must be 32 bytes`);
    const ring = m[1] as string;
    if (!this.keyRings.has(ring)) {
      const r = /^(.*)\/keyRings\/([^/]+)$/.exec(ring);
      this.createKeyRing(r?.[1] ?? "", r?.[2] ?? "");
    }
    this.createCryptoKey(ring, m[2] as string, "ENCRYPT_DECRYPT", true);
    this.addVersion(this.cryptoKey(name), key, true);
  }
}

interface Named {
  name?: string;
}
interface CreateKeyRingRequest {
  parent?: string;
  keyRingId?: string;
}
interface CreateCryptoKeyRequest {
  parent?: string;
  cryptoKeyId?: string;
  cryptoKey?: { purpose?: string };
  skipInitialVersionCreation?: boolean;
}
interface CreateCryptoKeyVersionRequest {
  parent?: string;
}
interface UpdatePrimaryRequest {
  name?: string;
  cryptoKeyVersionId?: string;
}
interface EncryptRequest {
  name?: string;
  plaintext?: Buffer;
  additionalAuthenticatedData?: Buffer;
  plaintextCrc32c?: Int64Value | null;
  additionalAuthenticatedDataCrc32c?: Int64Value | null;
}
interface DecryptRequest {
  name?: string;
  ciphertext?: Buffer;
  additionalAuthenticatedData?: Buffer;
  ciphertextCrc32c?: Int64Value | null;
  additionalAuthenticatedDataCrc32c?: Int64Value | null;
}

/** A unary handler: the result of `fn`, or the status of the RpcError it throws. */
function unary<Req>(method: string, fn: (req: Req) => object): grpc.handleUnaryCall<Req, object> {
  return (call, callback) => {
    try {
      const res = fn(call.request);
      console.log(`${method} OK`);
      callback(null, res);
    } catch (err) {
      if (err instanceof RpcError) {
        console.log(`${method} ${grpc.status[err.code]}: ${err.message}`);
        callback({ code: err.code, details: err.message });
      } else {
        console.error(`${method} INTERNAL`, err);
        callback({ code: grpc.status.INTERNAL, details: String(err) });
      }
    }
  };
}

export function handlers(store: GcpKmsStore): grpc.UntypedServiceImplementation {
  return {
    CreateKeyRing: unary<CreateKeyRingRequest>("CreateKeyRing", (r) =>
      store.createKeyRing(r.parent ?? "", r.keyRingId ?? ""),
    ),
    GetKeyRing: unary<Named>("GetKeyRing", (r) => store.keyRing(r.name ?? "")),
    CreateCryptoKey: unary<CreateCryptoKeyRequest>("CreateCryptoKey", (r) =>
      store.createCryptoKey(
        r.parent ?? "",
        r.cryptoKeyId ?? "",
        r.cryptoKey?.purpose,
        r.skipInitialVersionCreation === true,
      ),
    ),
    GetCryptoKey: unary<Named>("GetCryptoKey", (r) => store.cryptoKeyMessage(store.cryptoKey(r.name ?? ""))),
    CreateCryptoKeyVersion: unary<CreateCryptoKeyVersionRequest>("CreateCryptoKeyVersion", (r) => {
      const state = store.cryptoKey(r.parent ?? "");
      // As the real service, a new version of a symmetric key does not become primary.
      return store.versionMessage(state, store.addVersion(state, randomBytes(32), false));
    }),
    GetCryptoKeyVersion: unary<Named>("GetCryptoKeyVersion", (r) => {
      const { state, version } = store.version(r.name ?? "");
      return store.versionMessage(state, version);
    }),
    UpdateCryptoKeyPrimaryVersion: unary<UpdatePrimaryRequest>("UpdateCryptoKeyPrimaryVersion", (r) => {
      const state = store.cryptoKey(r.name ?? "");
      const { version } = store.version(`${state.name}/cryptoKeyVersions/${r.cryptoKeyVersionId ?? ""}`);
      state.primary = version.number;
      return store.cryptoKeyMessage(state);
    }),
    Encrypt: unary<EncryptRequest>("Encrypt", (r) => {
      const plaintext = bytes(r.plaintext);
      const aad = bytes(r.additionalAuthenticatedData);
      const verifiedPlaintext = checkCrc("plaintext_crc32c", "plaintext", r.plaintextCrc32c, plaintext);
      const verifiedAad = checkCrc(
        "additional_authenticated_data_crc32c",
        "additional_authenticated_data",
        r.additionalAuthenticatedDataCrc32c,
        aad,
      );
      const { versionName, ciphertext } = store.encrypt(r.name ?? "", plaintext, aad);
      return {
        name: versionName,
        ciphertext,
        ciphertextCrc32c: { value: String(crc32c(ciphertext)) },
        verifiedPlaintextCrc32c: verifiedPlaintext,
        verifiedAdditionalAuthenticatedDataCrc32c: verifiedAad,
        protectionLevel: "SOFTWARE",
      };
    }),
    Decrypt: unary<DecryptRequest>("Decrypt", (r) => {
      const ciphertext = bytes(r.ciphertext);
      const aad = bytes(r.additionalAuthenticatedData);
      checkCrc("ciphertext_crc32c", "ciphertext", r.ciphertextCrc32c, ciphertext);
      checkCrc(
        "additional_authenticated_data_crc32c",
        "additional_authenticated_data",
        r.additionalAuthenticatedDataCrc32c,
        aad,
      );
      const { plaintext, usedPrimary } = store.decrypt(r.name ?? "", ciphertext, aad);
      return {
        plaintext,
        plaintextCrc32c: { value: String(crc32c(plaintext)) },
        usedPrimary,
        protectionLevel: "SOFTWARE",
      };
    }),
  };
}

/** Starts the fake on host:port (port 0: any free port), insecure. */
export async function startGcpKmsFake(
  host: string,
  port: number,
  store = new GcpKmsStore(),
): Promise<GcpKmsFake> {
  const server = new grpc.Server();
  server.addService(loadService(), handlers(store));
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    );
  });
  return {
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        // Graceful first; calls still open after 2 s are cut.
        const timer = setTimeout(() => server.forceShutdown(), 2000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}

function seedFrom(file: string, store: GcpKmsStore) {
  const parsed = JSON.parse(readFileSync(file, "utf8")) as { keys?: { name?: string; key?: string }[] };
  for (const k of parsed.keys ?? []) store.seed(k.name ?? "", Buffer.from(k.key ?? "", "base64"));
  return parsed.keys?.length ?? 0;
}

async function main() {
  const at = argv.indexOf("--listen");
  const listen = at >= 0 ? (argv[at + 1] ?? "") : "127.0.0.1:9010";
  const colon = listen.lastIndexOf(":");
  const host = listen.slice(0, colon);
  const port = Number(listen.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(port)) {
    console.error(`usage: gcp-kms-fake.ts [--listen HOST:PORT]; got ${listen}`);
    exit(2);
  }
  const store = new GcpKmsStore();
  const seedFile = env.BOOTSEAL_FAKE_GCP_KMS_SEED;
  if (seedFile) console.log(`seeded ${seedFrom(seedFile, store)} keys from ${seedFile}`);
  const fake = await startGcpKmsFake(host, port, store);
  console.log(`FAKE GCP KMS (wire-protocol gRPC, insecure) listening on ${host}:${fake.port}`);
  const stop = () => void fake.close().then(() => exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

if (import.meta.main) await main();
