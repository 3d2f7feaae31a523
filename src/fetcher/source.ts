/**
 * Where `bootseal fetch --from` downloads the encrypted document:
 *
 * - the service: `http(s)://HOST[/PREFIX]/v1/machines/<ns>/<name>/config`, with the bootstrap
 *   token as a bearer token; the machine id comes from the path;
 * - an object store: `s3://BUCKET/KEY`, `gs://BUCKET/KEY` (the machine's own cloud
 *   credentials, through the SDKs' default chains; endpoints from the usual variables), or
 *   `file:///DIR/FILE`. The machine id comes from a key ending in `configs/<ns>/<name>`
 *   (the store layout) or from --machine.
 *
 * Every download is retried (src/retry.ts): connection failures, 5xx and 429 (Retry-After
 * honoured) and unavailable stores; never another 4xx, a missing object or a refused
 * credential. The token never appears in a URL, a log line or an error.
 */
import { readFile, stat } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { openStore, parseStoreUrl } from "../../providers/stores/index.ts";
import { BootsealError } from "../errors.ts";
import { type RetryOptions, withRetry } from "../retry.ts";
import { sendOk } from "./http-client.ts";

export interface MachineId {
  readonly namespace: string;
  readonly name: string;
}

export type Source =
  | { readonly kind: "service"; readonly url: URL; readonly machine: MachineId }
  | {
      readonly kind: "store";
      readonly storeUrl: string;
      readonly key: string;
      readonly display: string;
      readonly machine: MachineId | null;
    };

/** Kubernetes DNS-1123 label. */
const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export function machineIdString(m: MachineId): string {
  return `${m.namespace}/${m.name}`;
}

export function parseMachineId(text: string, where = "--machine"): MachineId {
  const parts = text.split("/");
  const [namespace, name] = parts;
  if (parts.length !== 2 || !namespace || !name || !LABEL.test(namespace) || !LABEL.test(name)) {
    throw new BootsealError("USAGE", `${where} wants NAMESPACE/NAME (DNS-1123 labels), got "${text}"`);
  }
  return { namespace, name };
}

const SERVICE_PATH = /\/v1\/machines\/([^/]+)\/([^/]+)\/config$/;
const STORE_LAYOUT = /(?:^|\/)configs\/([^/]+)\/([^/]+)$/;

export function parseSource(from: string, machineFlag?: string): Source {
  const flagMachine = machineFlag !== undefined ? parseMachineId(machineFlag) : null;
  if (/^https?:\/\//i.test(from)) {
    let url: URL;
    try {
      url = new URL(from);
    } catch {
      throw new BootsealError("USAGE", "--from is not a valid URL");
    }
    if (url.username || url.password) {
      throw new BootsealError("USAGE", "--from must not carry credentials: use --token-file");
    }
    if (url.search || url.hash) throw new BootsealError("USAGE", "--from takes no query string or fragment");
    const m = SERVICE_PATH.exec(url.pathname);
    if (!m) {
      throw new BootsealError(
        "USAGE",
        "--from: a service URL ends in /v1/machines/<namespace>/<name>/config",
      );
    }
    const machine = parseMachineId(`${decodeURIComponent(m[1]!)}/${decodeURIComponent(m[2]!)}`, "--from");
    if (flagMachine && machineIdString(flagMachine) !== machineIdString(machine)) {
      throw new BootsealError("USAGE", "--machine names another machine than --from");
    }
    return { kind: "service", url, machine };
  }
  const scheme = /^([a-z0-9]+):\/\//i.exec(from)?.[1]?.toLowerCase();
  if (scheme === "file") {
    const path = from.slice("file://".length);
    if (!path.startsWith("/")) throw new BootsealError("USAGE", "--from file:// wants an absolute path");
    const layout = STORE_LAYOUT.exec(path);
    return {
      kind: "store",
      storeUrl: `file://${dirname(path)}`,
      key: basename(path),
      display: from,
      machine:
        flagMachine ?? (layout ? parseMachineId(`${layout[1]}/${layout[2]}`, "the configs/ path") : null),
    };
  }
  if (scheme === "s3" || scheme === "gs") {
    const loc = parseStoreUrl(from);
    if (loc.scheme === "file" || loc.prefix === "") {
      throw new BootsealError("USAGE", `--from ${scheme}:// wants a bucket and an object key`);
    }
    const key = loc.prefix.slice(0, -1);
    const layout = STORE_LAYOUT.exec(key);
    return {
      kind: "store",
      storeUrl: `${scheme}://${loc.bucket}`,
      key,
      display: `${scheme}://${loc.bucket}/${key}`,
      machine:
        flagMachine ?? (layout ? parseMachineId(`${layout[1]}/${layout[2]}`, "the configs/ key") : null),
    };
  }
  throw new BootsealError(
    "USAGE",
    "--from wants https://…/v1/machines/<ns>/<name>/config, s3://BUCKET/KEY, gs://BUCKET/KEY or file:///PATH",
  );
}

/** The status route next to a service config URL. */
export function statusUrlFor(source: Source): URL | null {
  if (source.kind !== "service") return null;
  const url = new URL(source.url.href);
  url.pathname = url.pathname.replace(/\/config$/, "/status");
  return url;
}

export interface Downloaded {
  readonly bytes: Uint8Array;
  readonly etag?: string;
  readonly contentType?: string;
  /** The SOPS store format the service named (x-bootseal-format). */
  readonly format?: string;
  readonly attempts: number;
}

export interface DownloadOptions {
  readonly token?: string;
  readonly ca?: string | Buffer;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly retry: Omit<RetryOptions, "what">;
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

export async function download(source: Source, options: DownloadOptions): Promise<Downloaded> {
  if (source.kind === "service") {
    const headers: Record<string, string> = { accept: "application/sops+json, application/sops+yaml, */*" };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    const { value, attempts } = await withRetry(
      ({ signal }) =>
        sendOk({
          method: "GET",
          url: source.url,
          headers,
          signal,
          ...(options.ca ? { ca: options.ca } : {}),
        }),
      { ...options.retry, what: `GET ${source.url.origin}${source.url.pathname}` },
    );
    const etag = header(value.headers.etag);
    const contentType = header(value.headers["content-type"]);
    const format = header(value.headers["x-bootseal-format"]);
    return {
      bytes: value.body,
      attempts,
      ...(format ? { format } : {}),
      ...(etag ? { etag } : {}),
      ...(contentType ? { contentType } : {}),
    };
  }
  // One attempt per store call: the loop here is the fetcher's only retry layer.
  const store = openStore(source.storeUrl, {
    env: options.env,
    s3: { maxAttempts: 1 },
    gcs: { maxRetries: 0 },
  });
  const { value, attempts } = await withRetry(
    async ({ signal }) => {
      const object = await store.get(source.key, { signal });
      if (object === null) throw new BootsealError("NOT_FOUND", `${source.display}: no such object`);
      return object;
    },
    { ...options.retry, what: `get ${source.display}` },
  );
  return { bytes: value.body, etag: value.etag, attempts };
}

/**
 * Reads the bootstrap token. The file must be a regular file that neither group nor others
 * can read (like an SSH private key): a token another local user could read is a token
 * anyone on the machine can use to fetch the config first.
 */
export async function readTokenFile(path: string): Promise<string> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch (err) {
    throw new BootsealError("USAGE", `--token-file ${path} cannot be read`, { cause: err });
  }
  if (!info.isFile()) throw new BootsealError("USAGE", `--token-file ${path} is not a regular file`);
  if ((info.mode & 0o077) !== 0) {
    throw new BootsealError(
      "USAGE",
      `--token-file ${path} is readable by group or others (mode ${(info.mode & 0o777).toString(8).padStart(4, "0")}): chmod 600 it`,
    );
  }
  const token = (await readFile(path, "utf8")).trim();
  if (token === "" || /\s/.test(token)) {
    throw new BootsealError("USAGE", `--token-file ${path} must hold one token on one line`);
  }
  return token;
}
