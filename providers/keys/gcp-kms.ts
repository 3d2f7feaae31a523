/**
 * GCP Cloud KMS master keys (sops `gcpkms/keysource.go`), on @google-cloud/kms over gRPC.
 *
 * Wrap is Encrypt on the CryptoKey `resource_id` with the raw secret and no AAD; enc is the
 * standard base64 of the ciphertext. Unwrap is Decrypt on the same resource.
 *
 * Configuration, first match wins:
 * - endpoint: `deps.gcpKms.endpoint` (`host:port`), else BOOTSEAL_GCP_KMS_ENDPOINT, else
 *   SOPS_GCP_KMS_ENDPOINT (sops's variable); default the public service.
 * - plaintext gRPC without credentials, for emulators only: `deps.gcpKms.insecure` or
 *   BOOTSEAL_GCP_KMS_INSECURE=1. Never used unless asked for.
 * - credentials: GOOGLE_CREDENTIALS (a file path or the JSON itself, as sops reads it), else
 *   GOOGLE_OAUTH_ACCESS_TOKEN (a bearer token, as sops), else Application Default Credentials.
 * A client is made per operation and closed after it, as sops does, so no channel outlives it.
 */
import type { KeyManagementServiceClient, protos } from "@google-cloud/kms";
import type { CallOptions } from "../../src/call-options.ts";
import {
  entryString,
  type KeyEntry,
  type KeyKindFormat,
  type MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";
import { type RetryPolicy, retryCall, retryPolicy } from "../../src/retry.ts";
import { lazyModule } from "../lazy-module.ts";
import { checkCreatedAt, decodeStdBase64, entryWithCreatedAt, stringField } from "./entry-fields.ts";
import { type BaseDeps, itemString, type MasterKeyType, newEntry } from "./key-type.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters
// (process.stdin among them), which costs every CLI run start-up time.
const processEnv = process.env;

/** `gcpKms` in ProviderDeps. */
export interface GcpKmsOptions {
  /** `host:port` of the KMS gRPC endpoint. */
  readonly endpoint?: string;
  /** Plaintext gRPC, no credentials: emulators only. */
  readonly insecure?: boolean;
  readonly retry?: Partial<RetryPolicy>;
}

const RESOURCE_ID = /^projects\/[^/]+\/locations\/[^/]+\/keyRings\/[^/]+\/cryptoKeys\/[^/]+$/;

/** gRPC status codes (google.rpc.Code) we tell apart. */
const GRPC = {
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;
const TRANSIENT: ReadonlySet<number> = new Set([
  GRPC.DEADLINE_EXCEEDED,
  GRPC.RESOURCE_EXHAUSTED,
  GRPC.ABORTED,
  GRPC.INTERNAL,
  GRPC.UNAVAILABLE,
]);

export interface GcpKmsDeps extends BaseDeps {
  readonly gcpKms?: GcpKmsOptions;
}

/** sops `gcp_kms` entries (stores.go gcpkmskey). */
export const GCP_KMS_FORMAT: KeyKindFormat = {
  kind: "gcp_kms",
  fields: ["created_at", "enc", "resource_id"],
  omitEmpty: [],
  mapFields: [],
  alwaysInGroup: false,
  readRank: 1,
  decryptionRank: 3,
  identity: (entry) => entryString(entry, "resource_id"),
  // The ciphertext in standard base64 (unwrap checks the length: decodeStdBase64).
  encSyntax: /^[A-Za-z0-9+/]+={0,2}$/,
  passphrase: { scheme: "gcpkms", provider: "gcp", wrapped: "base64" },
};

/** gcpkms.NewMasterKeyFromResourceID removes spaces; the shape is checked by fromMetadata. */
function gcpEntry(text: string): KeyEntry {
  const id = text.replaceAll(" ", "");
  if (id === "") throw new BootsealError("BAD_INPUT", "empty gcp_kms resource_id");
  return newEntry("gcp_kms", [["resource_id", id]]);
}

/** "No Application Default Credentials here": google-auth-library's message for it. */
function isNoCredential(err: unknown): boolean {
  return /Could not load the default credentials/i.test((err as Error)?.message ?? "");
}

export function mapGcpError(err: unknown, id: string, op: string): BootsealError {
  if (err instanceof BootsealError) return err;
  const e = err as { code?: number | string; name?: string };
  const what = `gcp_kms: ${op} with ${id}`;
  if (isNoCredential(err)) {
    return new BootsealError("KEY_ACCESS_DENIED", `${what}: no Google credentials`, { cause: err });
  }
  const code = typeof e?.code === "number" ? e.code : undefined;
  if (code === GRPC.PERMISSION_DENIED || code === GRPC.UNAUTHENTICATED || code === GRPC.FAILED_PRECONDITION) {
    return new BootsealError(
      "KEY_ACCESS_DENIED",
      `${what}: access denied or key not enabled (gRPC ${code})`,
      {
        cause: err,
      },
    );
  }
  if (code === GRPC.NOT_FOUND)
    return new BootsealError("KEY_NOT_FOUND", `${what}: key not found`, { cause: err });
  if (code === GRPC.INVALID_ARGUMENT) {
    return new BootsealError(
      "BAD_INPUT",
      `${what}: refused, wrong key or damaged ciphertext (gRPC ${code})`,
      {
        cause: err,
      },
    );
  }
  if (code === undefined || TRANSIENT.has(code)) {
    const why =
      code === undefined ? `unreachable (${String(e?.code ?? e?.name)})` : `unavailable (gRPC ${code})`;
    return new BootsealError("KEY_UNAVAILABLE", `${what}: ${why}`, { cause: err });
  }
  return new BootsealError("BAD_INPUT", `${what}: refused (gRPC ${code})`, { cause: err });
}

/** sops getGoogleCredentials: GOOGLE_CREDENTIALS is a path when such a file exists, else JSON. */
type ClientOptions = NonNullable<ConstructorParameters<typeof KeyManagementServiceClient>[0]>;

function credentialOptions(env: Readonly<Record<string, string | undefined>>, sdk: GcpSdk): ClientOptions {
  const given = env.GOOGLE_CREDENTIALS;
  if (given) {
    let text = given;
    if (sdk.fs.existsSync(given)) text = sdk.fs.readFileSync(given, "utf8");
    try {
      return { credentials: JSON.parse(text) as ClientOptions["credentials"] };
    } catch (cause) {
      throw new BootsealError("BAD_INPUT", "gcp_kms: GOOGLE_CREDENTIALS is neither a file nor JSON", {
        cause,
      });
    }
  }
  const token = env.GOOGLE_OAUTH_ACCESS_TOKEN;
  if (token) {
    // A static bearer token, as sops's oauth2.StaticTokenSource.
    const authClient = {
      getRequestHeaders: async () => new Headers({ Authorization: `Bearer ${token}` }),
      getClient: async () => authClient,
    };
    return { authClient } as unknown as ClientOptions;
  }
  return {};
}

interface GcpSdk {
  readonly KeyManagementServiceClient: typeof KeyManagementServiceClient;
  readonly grpcCredentials: typeof import("@grpc/grpc-js").credentials;
  /** node:fs, for GOOGLE_CREDENTIALS files (an ESM import of it costs every CLI run start-up time). */
  readonly fs: typeof import("node:fs");
}
/** @google-cloud/kms and gRPC load on the first call (hundreds of ms), not with the registry. */
const loadGcpSdk = lazyModule<GcpSdk>(async () => {
  const [kms, grpc, fs] = await Promise.all([
    import("@google-cloud/kms"),
    import("@grpc/grpc-js"),
    import("node:fs"),
  ]);
  return {
    KeyManagementServiceClient: kms.KeyManagementServiceClient,
    grpcCredentials: grpc.credentials,
    fs,
  };
}).load;

function insecureFor(deps: GcpKmsDeps): boolean {
  return deps.gcpKms?.insecure ?? (deps.env ?? processEnv).BOOTSEAL_GCP_KMS_INSECURE === "1";
}

function newClient(deps: GcpKmsDeps, sdk: GcpSdk): KeyManagementServiceClient {
  const env = deps.env ?? processEnv;
  const endpoint = deps.gcpKms?.endpoint ?? env.BOOTSEAL_GCP_KMS_ENDPOINT ?? env.SOPS_GCP_KMS_ENDPOINT;
  const insecure = insecureFor(deps);
  const options: ClientOptions = { fallback: false };
  if (endpoint) {
    const at = endpoint.lastIndexOf(":");
    const port = at > 0 ? Number(endpoint.slice(at + 1)) : Number.NaN;
    if (Number.isInteger(port)) Object.assign(options, { apiEndpoint: endpoint.slice(0, at), port });
    else options.apiEndpoint = endpoint;
  }
  if (insecure) options.sslCreds = sdk.grpcCredentials.createInsecure();
  else Object.assign(options, credentialOptions(env, sdk));
  return new sdk.KeyManagementServiceClient(options);
}

function gcpKey(resourceId: string, deps: GcpKmsDeps): MasterKey {
  const id = GCP_KMS_FORMAT.identity(newEntry("gcp_kms", [["resource_id", resourceId]]));
  const policy = retryPolicy(deps.gcpKms?.retry);

  async function call<T>(
    op: string,
    signal: AbortSignal | undefined,
    run: (c: KeyManagementServiceClient) => Promise<T>,
  ) {
    const sdk = await loadGcpSdk();
    const what = `gcp_kms: ${op} with ${id}`;
    return retryCall(policy, what, "KEY_UNAVAILABLE", signal, async (attemptSignal) => {
      const client = newClient(deps, sdk);
      // gax takes no AbortSignal: cancel the call (aborted or timed out) by closing the client.
      const onAbort = () => void client.close().catch(() => {});
      attemptSignal.addEventListener("abort", onAbort, { once: true });
      try {
        // Resolve credentials first, in our own try: left to gax, a machine without any
        // Google credentials gets an unhandled rejection from its eager background stubs.
        if (!insecureFor(deps)) await client.auth.getClient();
        return await run(client);
      } catch (err) {
        signal?.throwIfAborted();
        throw mapGcpError(err, id, op);
      } finally {
        attemptSignal.removeEventListener("abort", onAbort);
        await client.close().catch(() => {});
      }
    });
  }
  // gax's own retry loop is off (maxRetries 0): src/retry.ts is the only one.
  const gaxOptions = { timeout: policy.timeoutMs, maxRetries: 0 };

  return {
    kind: "gcp_kms",
    id,

    async wrap(secret: Uint8Array, options?: CallOptions): Promise<string> {
      const [out] = await call("encrypt", options?.signal, (c) =>
        c.encrypt({ name: resourceId, plaintext: secret }, gaxOptions),
      );
      const ciphertext = out.ciphertext;
      if (!ciphertext || ciphertext.length === 0) {
        throw new BootsealError("BAD_INPUT", `gcp_kms: encrypt with ${id}: empty ciphertext`);
      }
      return Buffer.from(ciphertext as Uint8Array).toString("base64");
    },

    async unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null> {
      const ciphertext = decodeStdBase64(enc, `gcp_kms: ${id}`);
      let out: protos.google.cloud.kms.v1.IDecryptResponse;
      try {
        [out] = await call("decrypt", options?.signal, (c) =>
          c.decrypt({ name: resourceId, ciphertext }, gaxOptions),
        );
      } catch (err) {
        // No Google identity on this machine at all: try the next key.
        if (err instanceof BootsealError && isNoCredential(err.cause)) return null;
        throw err;
      }
      const plaintext = out.plaintext;
      if (!plaintext || plaintext.length === 0) {
        throw new BootsealError("BAD_INPUT", `gcp_kms: decrypt with ${id}: empty plaintext`);
      }
      // The client hands back a Buffer (or base64 text); callers get a plain Uint8Array copy.
      if (typeof plaintext === "string") return new Uint8Array(Buffer.from(plaintext, "base64"));
      return new Uint8Array(plaintext);
    },

    toMetadata(enc: string, createdAt: Date): KeyEntry {
      return entryWithCreatedAt("gcp_kms", [["resource_id", resourceId]], enc, createdAt);
    },
  };
}

function checkResourceId(text: string): string {
  // gcpkms.NewMasterKeyFromResourceID removes spaces; newKMSClient checks the shape.
  const id = text.replaceAll(" ", "");
  if (!RESOURCE_ID.test(id)) {
    throw new BootsealError(
      "BAD_INPUT",
      `gcp_kms: not a CryptoKey resource id (projects/P/locations/L/keyRings/R/cryptoKeys/K): ${id}`,
    );
  }
  return id;
}

export const gcpKmsKeyType: MasterKeyType<"gcp_kms", GcpKmsDeps> = {
  kind: "gcp_kms",
  format: GCP_KMS_FORMAT,
  flag: {
    flag: "gcp-kms",
    env: "SOPS_GCP_KMS_IDS",
    help: "comma separated list of GCP KMS resource IDs",
    example: "projects/p/locations/global/keyRings/r/cryptoKeys/k",
    rank: 1,
  },
  config: { groupKey: "gcp_kms", groupItem: "mapping", shorthandKey: "gcp_kms" },

  entryFromText: gcpEntry,

  entriesFromConfig(item) {
    return [gcpEntry(itemString(item, "resource_id", "gcp_kms key"))];
  },

  fromMetadata(entry: KeyEntry, deps: GcpKmsDeps): MasterKey {
    const id = checkResourceId(stringField(entry.fields, "resource_id", "gcp_kms entry"));
    checkCreatedAt(entry.fields.get("created_at"), `gcp_kms entry ${id}`);
    return gcpKey(id, deps);
  },

  fromUserInput(text: string, deps: GcpKmsDeps): MasterKey[] {
    return text
      .split(",")
      .filter((part) => part.trim() !== "")
      .map((part) => gcpKey(checkResourceId(part), deps));
  },
};
