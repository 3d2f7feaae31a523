/**
 * The sops KeyService served over gRPC (`bootseal keyservice`): Encrypt and Decrypt for
 * every kind in the key registry, the request's `Key` turned into a metadata entry by the
 * one map in ./keyservice-wire.ts and into a MasterKey by the caller's `keyFor`. Answers
 * as sops's keyservice/server.go does: NOT_FOUND without a key or for a key type this
 * build lacks, PERMISSION_DENIED when the operator refuses (--prompt), UNKNOWN with the
 * key's error otherwise.
 */
import type * as Grpc from "@grpc/grpc-js";
import type { KeyEntry, MasterKey } from "../../src/envelope/sops/master-key.ts";
import { BootsealError, hasCode, isBootsealError } from "../../src/errors.ts";
import { loadGrpc } from "./keyservice-client.ts";
import { decodeRequest, encodeResponse, entryOf } from "./keyservice-wire.ts";

export type KeyServiceOperation = "encrypt" | "decrypt";

export interface KeyServiceServerOptions {
  /** The MasterKey of a request's entry (no created_at: the caller supplies what the kind needs). */
  keyFor(entry: KeyEntry): MasterKey;
  /** --prompt: resolves to true to answer the request. */
  confirm?(operation: KeyServiceOperation, key: MasterKey): Promise<boolean>;
  /** --verbose: one line per request (key identities and outcomes, never key material). */
  log?(line: string): void;
}

export interface RunningKeyService {
  /** Where it listens, `tcp://127.0.0.1:5000` or `unix:///path` (the port that was bound). */
  readonly url: string;
  /** Stops accepting, lets calls in flight finish (a few seconds at most), then closes. */
  close(): Promise<void>;
}

const NETWORKS = ["tcp", "tcp4", "tcp6", "unix"] as const;
const SHUTDOWN_GRACE_MS = 5000;

/** grpc-js's bind target for sops's --network and --address. */
function bindTarget(network: string, address: string): string {
  if (!(NETWORKS as readonly string[]).includes(network)) {
    throw new BootsealError("USAGE", `--network must be one of ${NETWORKS.join(", ")}, got "${network}"`);
  }
  if (address === "") throw new BootsealError("USAGE", "--address is empty");
  if (network === "unix") return `unix:${address}`;
  // Go's ":5000" listens on every interface.
  if (address.startsWith(":")) return `${network === "tcp4" ? "0.0.0.0" : "[::]"}${address}`;
  return address;
}

class Refusal extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

async function answer(
  grpc: typeof Grpc,
  operation: KeyServiceOperation,
  body: Buffer,
  options: KeyServiceServerOptions,
  seen: { key?: string },
): Promise<Uint8Array> {
  const request = decodeRequest(body);
  if (request.key === null) throw new Refusal(grpc.status.NOT_FOUND, "Must provide a key");
  let enc = "";
  if (operation === "decrypt") {
    try {
      enc = new TextDecoder("utf-8", { fatal: true }).decode(request.data);
    } catch {
      throw new BootsealError("BAD_INPUT", "the ciphertext is not text");
    }
  }
  const entry = entryOf(request.key, enc);
  if (entry === null) throw new Refusal(grpc.status.NOT_FOUND, "Unknown key type");
  const key = options.keyFor(entry);
  seen.key = key.id;
  if (options.confirm && !(await options.confirm(operation, key))) {
    throw new Refusal(grpc.status.PERMISSION_DENIED, "Request rejected by user");
  }
  if (operation === "encrypt") return encodeResponse(new TextEncoder().encode(await key.wrap(request.data)));
  const secret = await key.unwrap(enc);
  if (secret === null) throw new BootsealError("NO_KEY_AVAILABLE", `${key.id}: no matching credential here`);
  try {
    return encodeResponse(secret);
  } finally {
    secret.fill(0);
  }
}

function statusOf(grpc: typeof Grpc, err: unknown): { code: number; details: string } {
  if (err instanceof Refusal) return { code: err.status, details: err.message };
  if (hasCode(err, "BAD_INPUT") && err.message.startsWith("malformed key service")) {
    return { code: grpc.status.INVALID_ARGUMENT, details: err.message };
  }
  // A BootsealError's message is safe to show; anything else stays in our own log only.
  return { code: grpc.status.UNKNOWN, details: isBootsealError(err) ? err.message : "internal error" };
}

export async function startKeyService(
  network: string,
  address: string,
  options: KeyServiceServerOptions,
): Promise<RunningKeyService> {
  const target = bindTarget(network, address);
  const grpc = await loadGrpc();
  const server = new grpc.Server();
  const method = (operation: KeyServiceOperation) => ({
    path: `/KeyService/${operation === "encrypt" ? "Encrypt" : "Decrypt"}`,
    requestStream: false,
    responseStream: false,
    requestSerialize: (value: Buffer) => value,
    requestDeserialize: (bytes: Buffer) => bytes,
    responseSerialize: (value: Uint8Array) => Buffer.from(value),
    responseDeserialize: (bytes: Buffer) => bytes,
  });
  const handler =
    (operation: KeyServiceOperation): Grpc.handleUnaryCall<Buffer, Uint8Array> =>
    (call, callback) => {
      const seen: { key?: string } = {};
      const what = () => `${operation} request${seen.key ? ` for ${seen.key}` : ""}`;
      answer(grpc, operation, call.request, options, seen).then(
        (response) => {
          options.log?.(`${what()}: answered`);
          callback(null, Buffer.from(response));
        },
        (err: unknown) => {
          const { code, details } = statusOf(grpc, err);
          options.log?.(`${what()}: ${grpc.status[code]}: ${details}`);
          callback({ code, details });
        },
      );
    };
  server.addService(
    { Encrypt: method("encrypt"), Decrypt: method("decrypt") },
    { Encrypt: handler("encrypt"), Decrypt: handler("decrypt") },
  );
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(target, grpc.ServerCredentials.createInsecure(), (err, bound) => {
      if (err) {
        const detail = err.message.replace(/\s+/g, " ");
        reject(
          new BootsealError("IO_ERROR", `cannot listen on ${network} ${address}: ${detail}`, { cause: err }),
        );
      } else resolve(bound);
    });
  });
  const url =
    network === "unix" ? `unix://${address}` : `${network}://${address.replace(/:\d+$|:$/, `:${port}`)}`;
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        const force = setTimeout(() => server.forceShutdown(), SHUTDOWN_GRACE_MS);
        force.unref();
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
