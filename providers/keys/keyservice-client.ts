/**
 * `--keyservice URI` and `--enable-local-keyservice`: data keys are wrapped and unwrapped
 * through a list of key services, as sops does (cmd/sops/main.go keyservices, sops.go
 * UpdateMasterKeysWithKeyServices and decryptKey). The local providers come first when
 * enabled, then each URI in the order given; for every master key the first service that
 * succeeds wins. A remote service is sops's gRPC KeyService (./keyservice-wire.ts).
 */
import type * as Grpc from "@grpc/grpc-js";
import type { CallOptions } from "../../src/call-options.ts";
import type { KeyResolver, MasterKey } from "../../src/envelope/sops/master-key.ts";
import { BootsealError, type ErrorCode, isBootsealError } from "../../src/errors.ts";
import { decodeResponse, encodeRequest, type WireKey, wireKeyOf } from "./keyservice-wire.ts";

/** One remote key service: the URI as given (for messages) and grpc-js's target. */
export interface KeyServiceEndpoint {
  readonly uri: string;
  readonly target: string;
}

export interface KeyServices {
  /** The providers of this process, tried first (sops's local key service). */
  readonly local: boolean;
  readonly remotes: readonly KeyServiceEndpoint[];
}

/** What sops does without either flag: the local providers only. */
export const LOCAL_ONLY: KeyServices = { local: true, remotes: [] };

/**
 * sops's URI rules: `tcp://host:port` (host:port is dialled; tcp4/tcp6 too) or
 * `unix:///path/to/socket`. sops skips a URI it cannot parse with a warning and fails every
 * call on an unknown network; bootseal refuses both at once (USAGE).
 */
export function parseKeyServiceUri(uri: string): KeyServiceEndpoint {
  const bad = (why: string) =>
    new BootsealError(
      "USAGE",
      `--keyservice ${JSON.stringify(uri)}: ${why} (tcp://host:port or unix:///path)`,
    );
  const match = /^([a-z][a-z0-9+.-]*):\/\/(.*)$/i.exec(uri);
  if (!match) throw bad("not a protocol://address URI");
  const scheme = (match[1] as string).toLowerCase();
  const rest = match[2] as string;
  if (scheme === "unix") {
    if (!rest.startsWith("/") || rest.length < 2) throw bad("a unix socket needs an absolute path");
    return { uri, target: `unix://${rest}` };
  }
  if (scheme !== "tcp" && scheme !== "tcp4" && scheme !== "tcp6") throw bad(`unknown protocol ${scheme}`);
  let url: URL;
  try {
    url = new URL(`tcp://${rest}`);
  } catch {
    throw bad("not a host:port address");
  }
  if (url.port === "" || url.hostname === "") throw bad("the address needs a host and a port");
  return { uri, target: url.host };
}

export function keyServicesFrom(uris: readonly string[], local: boolean): KeyServices {
  return { local, remotes: uris.map(parseKeyServiceUri) };
}

let grpcModule: Promise<typeof Grpc> | undefined;
/** Loaded on first use: only commands that reach a key service pay for grpc-js. */
export function loadGrpc(): Promise<typeof Grpc> {
  grpcModule ??= import("@grpc/grpc-js").then((grpc) => {
    // grpc-js prints its own errors on stderr; ours are one line each, from the call's status.
    grpc.setLogVerbosity(grpc.logVerbosity.NONE);
    return grpc;
  });
  return grpcModule;
}

/** grpc status -> our error code, the way the key providers classify their services' answers. */
function codeOf(grpc: typeof Grpc, status: number): ErrorCode {
  const s = grpc.status;
  if (status === s.UNAVAILABLE || status === s.DEADLINE_EXCEEDED) return "KEY_UNAVAILABLE";
  if (status === s.PERMISSION_DENIED || status === s.UNAUTHENTICATED) return "KEY_ACCESS_DENIED";
  if (status === s.NOT_FOUND) return "KEY_NOT_FOUND";
  if (status === s.INVALID_ARGUMENT) return "BAD_INPUT";
  if (status === s.UNIMPLEMENTED) return "UNSUPPORTED";
  return "NO_KEY_AVAILABLE";
}

/** One call on a fresh channel, closed afterwards: a CLI run makes a few calls and must not linger. */
async function call(
  endpoint: KeyServiceEndpoint,
  method: "Encrypt" | "Decrypt",
  key: WireKey,
  data: Uint8Array,
  options: CallOptions | undefined,
): Promise<Uint8Array> {
  const grpc = await loadGrpc();
  options?.signal?.throwIfAborted();
  const client = new grpc.Client(endpoint.target, grpc.credentials.createInsecure());
  try {
    return await new Promise<Uint8Array>((resolve, reject) => {
      const pending = client.makeUnaryRequest(
        `/KeyService/${method}`,
        (request: Uint8Array) => Buffer.from(request),
        (response: Buffer) => decodeResponse(response),
        encodeRequest({ key, data }),
        (err, response) => {
          options?.signal?.removeEventListener("abort", abort);
          if (err) {
            // grpc-js appends resolver notes and nested error names: keep the cause only.
            const detail = (err.details || err.message)
              .replace(/\s*Resolution note:.*$/s, "")
              .replace(/Last error: (Error: )?/, "")
              .replace(/\s+/g, " ")
              .slice(0, 300);
            const what = `key service ${endpoint.uri}: ${grpc.status[err.code] ?? err.code}: ${detail}`;
            reject(new BootsealError(codeOf(grpc, err.code), what, { cause: err }));
          } else resolve(response ?? new Uint8Array(0));
        },
      );
      const abort = () => pending.cancel();
      options?.signal?.addEventListener("abort", abort, { once: true });
    });
  } finally {
    client.close();
  }
}

function reason(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The error of a key no service could use: the last service's code, every service's reason. */
function allFailed(key: MasterKey, failures: readonly { code: ErrorCode; text: string }[]): BootsealError {
  const code = failures.at(-1)?.code ?? "NO_KEY_AVAILABLE";
  const text = failures.map((f) => f.text).join("; ");
  if (failures.length > 0) return new BootsealError(code, text);
  return new BootsealError(
    "USAGE",
    `no key service for ${key.id}: the local one is disabled and no --keyservice given`,
  );
}

function failureOf(err: unknown, where: string): { code: ErrorCode; text: string } {
  const code = isBootsealError(err) ? err.code : "NO_KEY_AVAILABLE";
  const text = reason(err);
  return { code, text: text.startsWith("key service ") ? text : `${where}: ${text}` };
}

/**
 * `key` with its wrap and unwrap going through `services` in order; its identity and
 * metadata stay the local provider's. The local key itself when nothing else is configured.
 */
export function throughKeyServices(key: MasterKey, services: KeyServices): MasterKey {
  if (services.remotes.length === 0 && services.local) return key;
  let wire: WireKey | undefined;
  // Built on first use: a kind without a key service message fails only if a remote is needed.
  const wireKey = () => {
    wire ??= wireKeyOf(key.toMetadata("", new Date(0)));
    return wire;
  };
  const utf8 = new TextEncoder();
  return {
    kind: key.kind,
    id: key.id,
    toMetadata: (enc, createdAt) => key.toMetadata(enc, createdAt),
    async wrap(secret, options) {
      const failures: { code: ErrorCode; text: string }[] = [];
      if (services.local) {
        try {
          return await key.wrap(secret, options);
        } catch (err) {
          options?.signal?.throwIfAborted();
          failures.push(failureOf(err, "local key service"));
        }
      }
      for (const remote of services.remotes) {
        try {
          return new TextDecoder().decode(await call(remote, "Encrypt", wireKey(), secret, options));
        } catch (err) {
          options?.signal?.throwIfAborted();
          failures.push(failureOf(err, `key service ${remote.uri}`));
        }
      }
      throw allFailed(key, failures);
    },
    async unwrap(enc, options) {
      const failures: { code: ErrorCode; text: string }[] = [];
      if (services.local) {
        try {
          const secret = await key.unwrap(enc, options);
          if (secret !== null) return secret;
          failures.push({ code: "NO_KEY_AVAILABLE", text: "local key service: no matching credential" });
        } catch (err) {
          options?.signal?.throwIfAborted();
          failures.push(failureOf(err, "local key service"));
        }
      }
      for (const remote of services.remotes) {
        try {
          return await call(remote, "Decrypt", wireKey(), utf8.encode(enc), options);
        } catch (err) {
          options?.signal?.throwIfAborted();
          failures.push(failureOf(err, `key service ${remote.uri}`));
        }
      }
      throw allFailed(key, failures);
    },
  };
}

/** A resolver whose keys go through `services` (decrypt, rotate, updatekeys). */
export function resolverThrough(base: KeyResolver, services: KeyServices): KeyResolver {
  if (services.remotes.length === 0 && services.local) return base;
  const resolve = (entry: Parameters<KeyResolver>[0]): MasterKey | null => {
    const key = base(entry);
    return key === null ? null : throughKeyServices(key, services);
  };
  return base.order ? Object.assign(resolve, { order: base.order }) : resolve;
}
