/**
 * Where `bootseal fetch --from` downloads the encrypted document:
 *
 * - the service: `http(s)://HOST[/PREFIX]/v1/machines/<ns>/<name>/config`, with the bootstrap
 *   token as a bearer token; the machine id comes from the path;
 * - an object in a store of any registered scheme (providers/stores: `s3://BUCKET/KEY`,
 *   `gs://BUCKET/KEY` with the machine's own cloud credentials through the SDKs' default
 *   chains and endpoints from the usual variables, `file:///DIR/FILE`). The machine id comes
 *   from a key ending in `configs/<ns>/<name>` (the store layout) or from --machine.
 *
 * Every download is retried (src/retry.ts): connection failures, 5xx and 429 (Retry-After
 * honoured) and unavailable stores; never another 4xx, a missing object or a refused
 * credential. The token never appears in a URL, a log line or an error. Every source is held
 * to MAX_DOCUMENT_BYTES while it is read (stat or metadata first, then a read that stops at
 * the cap): a larger document fails with TOO_LARGE, never retried.
 */
import { objectUrlExamples, oneOf, openStore, parseObjectUrl } from "../../providers/stores/index.ts";
import { BootsealError, hasCode } from "../errors.ts";
import { sendOk } from "../http/client.ts";
import { describeBytes, MAX_DOCUMENT_BYTES } from "../limits.ts";
import { formatMachineId, type MachineId, parseMachineId } from "../machine/machine-id.ts";
import { configKeyMachineText } from "../machine/store-layout.ts";
import { type RetryOptions, withRetry } from "../retry.ts";

export type Source =
  | { readonly kind: "service"; readonly url: URL; readonly machine: MachineId }
  | {
      readonly kind: "store";
      readonly storeUrl: string;
      readonly key: string;
      readonly display: string;
      readonly machine: MachineId | null;
    };

const SERVICE_PATH = /\/v1\/machines\/([^/]+)\/([^/]+)\/config$/;

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
    if (flagMachine && formatMachineId(flagMachine) !== formatMachineId(machine)) {
      throw new BootsealError("USAGE", "--machine names another machine than --from");
    }
    return { kind: "service", url, machine };
  }
  const object = parseObjectUrl(from, "--from");
  if (object === undefined) {
    throw new BootsealError(
      "USAGE",
      `--from wants ${oneOf(["https://…/v1/machines/<ns>/<name>/config", ...objectUrlExamples()])}`,
    );
  }
  const layout = configKeyMachineText(object.path, true);
  return {
    kind: "store",
    storeUrl: object.storeUrl,
    key: object.key,
    display: object.display,
    machine: flagMachine ?? (layout ? parseMachineId(layout, `the configs/ ${object.pathName}`) : null),
  };
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

function isTooLarge(err: unknown): boolean {
  return hasCode(err, "TOO_LARGE");
}

function tooLarge(display: string): BootsealError {
  return new BootsealError("TOO_LARGE", `${display} is larger than ${describeBytes(MAX_DOCUMENT_BYTES)}`);
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
  const store = openStore(source.storeUrl, { env: options.env, oneAttempt: true });
  const { value, attempts } = await withRetry(
    async ({ signal }) => {
      const object = await store.get(source.key, { signal, maxBytes: MAX_DOCUMENT_BYTES }).catch((err) => {
        throw isTooLarge(err) ? tooLarge(source.display) : err;
      });
      if (object === null) throw new BootsealError("NOT_FOUND", `${source.display}: no such object`);
      // Every store honours maxBytes; this holds one that does not (the memory store) to it too.
      if (object.body.byteLength > MAX_DOCUMENT_BYTES) throw tooLarge(source.display);
      return object;
    },
    { ...options.retry, what: `get ${source.display}` },
  );
  return { bytes: value.body, etag: value.etag, attempts };
}
