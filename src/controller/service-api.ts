/**
 * The controller's client of the bootseal service (docs/api.md): publish, the stable user-data
 * stub, status, delete and the event stream, over src/http/client.ts (node:http(s), the
 * private CA per request). The token is read again for every request (--token-file: a
 * projected ServiceAccount token rotates), and goes in the Authorization header only. One
 * request per call: the work queue does the retrying, so a reconcile never sleeps. A status
 * read sends the ETag of the last answer it got for the machine (If-None-Match): a 304 is
 * answered from that body, kept here up to STATUS_CACHE_BYTES in all.
 */
import { readFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { BootsealError, hasCode, isBootsealError } from "../errors.ts";
import { readTokenFile } from "../files/token-file.ts";
import { type HttpResponse, HttpStatusError, send, sendOk, statusError } from "../http/client.ts";
import type { MachineId } from "../machine/machine-id.ts";
import { SizeBoundedLru } from "../size-bounded-lru.ts";
import type { MachineStatus } from "./phase-conditions.ts";
import type { UserDataFormat } from "./spec.ts";
import type { TpmSeal } from "./tpm-ek.ts";

export interface ServiceSettings {
  readonly server: URL;
  /** Re-read per request; else `token`. */
  readonly tokenFile?: string;
  readonly token?: string;
  readonly caFile?: string;
  /** One request's deadline. */
  readonly timeoutMs?: number;
  /** Status answers kept for If-None-Match, bytes in all (default STATUS_CACHE_BYTES). */
  readonly statusCacheBytes?: number;
}

export interface Published {
  readonly version: number;
  readonly sha256: string;
}

/** The Cluster API objects a publish is for: the service keeps them with the config. */
export interface CapiObjects {
  readonly cluster?: string | undefined;
  readonly machine?: string | undefined;
  readonly bootsealConfig?: string | undefined;
}

export interface StatusAnswer extends MachineStatus {
  readonly published: boolean;
  readonly config: { readonly sha256: string } | null;
}

export interface ServiceEvent {
  readonly namespace: string;
  readonly name: string;
  readonly phase?: string;
}

/** Status bodies kept for If-None-Match, in all (least recently used go first). */
export const STATUS_CACHE_BYTES = 16 * 1024 * 1024;

const path = (m: MachineId, tail: string) =>
  `/v1/machines/${encodeURIComponent(m.namespace)}/${encodeURIComponent(m.name)}/${tail}`;

export class ServiceApi {
  readonly #s: ServiceSettings;
  #ca: Buffer | undefined;
  /** The last status answer per machine ("ns/name") and its ETag. */
  readonly #statusSeen: SizeBoundedLru<string, { readonly etag: string; readonly body: Uint8Array }>;

  constructor(settings: ServiceSettings) {
    this.#s = settings;
    this.#statusSeen = new SizeBoundedLru(
      settings.statusCacheBytes ?? STATUS_CACHE_BYTES,
      (seen) => seen.body.byteLength,
    );
  }

  async #headers(extra: Record<string, string> = {}): Promise<Record<string, string>> {
    const token = this.#s.tokenFile !== undefined ? await readTokenFile(this.#s.tokenFile) : this.#s.token;
    if (!token) throw new BootsealError("USAGE", "no controller token (--token-file or BOOTSEAL_TOKEN)");
    return { authorization: `Bearer ${token}`, ...extra };
  }

  async #caPem(): Promise<Buffer | undefined> {
    if (this.#s.caFile === undefined) return undefined;
    this.#ca ??= await readFile(this.#s.caFile);
    return this.#ca;
  }

  async #send(
    method: "GET" | "POST" | "PUT" | "DELETE",
    pathname: string,
    opts: { body?: Uint8Array; headers?: Record<string, string>; ok?: boolean } = {},
  ): Promise<HttpResponse> {
    const url = new URL(pathname, this.#s.server);
    const req = {
      method,
      url,
      headers: await this.#headers(opts.headers),
      signal: AbortSignal.timeout(this.#s.timeoutMs ?? 30_000),
      ...(opts.body ? { body: opts.body } : {}),
      ca: await this.#caPem(),
    };
    return opts.ok === false ? send(req) : sendOk(req);
  }

  /**
   * PUT …/config with the plaintext bytes (the service encrypts them for the machine), naming
   * the Cluster API objects it is for (the fleet page shows them) and the machine's TPM to seal
   * to, if any.
   */
  async publish(
    m: MachineId,
    data: Uint8Array,
    bootstrapCommand?: string,
    capi?: CapiObjects,
    tpm?: TpmSeal,
  ): Promise<Published> {
    const headers: Record<string, string> = { "content-type": "application/octet-stream" };
    if (bootstrapCommand !== undefined) headers["x-bootseal-bootstrap-command"] = bootstrapCommand;
    if (tpm) {
      headers["x-bootseal-tpm-ek"] = tpm.ekPublic;
      if (tpm.pcrs !== undefined) headers["x-bootseal-tpm-pcrs"] = tpm.pcrs;
    }
    const query = new URLSearchParams();
    if (capi?.cluster) query.set("capiCluster", capi.cluster);
    if (capi?.machine) query.set("capiMachine", capi.machine);
    if (capi?.bootsealConfig) query.set("capiBootsealConfig", capi.bootsealConfig);
    const tail = query.size > 0 ? `config?${query}` : "config";
    const res = await this.#send("PUT", path(m, tail), { body: data, headers });
    const body = JSON.parse(new TextDecoder().decode(res.body)) as { version: number; sha256: string };
    return { version: body.version, sha256: body.sha256 };
  }

  /**
   * The stub: GET (the same bytes for the same publish), or POST when the service cannot render
   * it again (409 MINT_REQUIRED: no derivation key, or expired).
   */
  async userdata(
    m: MachineId,
    format: UserDataFormat,
    skipModules: readonly string[] = [],
  ): Promise<Uint8Array> {
    const skip = skipModules.map((name) => `&skipModule=${encodeURIComponent(name)}`).join("");
    const tail = `userdata?format=${encodeURIComponent(format)}${skip}`;
    try {
      return (await this.#send("GET", path(m, tail))).body;
    } catch (err) {
      if (!(err instanceof HttpStatusError) || err.status !== 409) throw err;
      return (await this.#send("POST", path(m, tail))).body;
    }
  }

  /** The machine's status record; null when the service has none. */
  async status(m: MachineId): Promise<StatusAnswer | null> {
    const key = `${m.namespace}/${m.name}`;
    const seen = this.#statusSeen.get(key);
    const res = await this.#send("GET", path(m, "status"), {
      ok: false,
      ...(seen ? { headers: { "if-none-match": seen.etag } } : {}),
    });
    this.#statusSeen.delete(key);
    let body = res.body;
    if (res.status === 304 && seen) body = seen.body;
    else if (res.status === 404) return null;
    else if (res.status < 200 || res.status > 299)
      throw statusError(res, `GET ${this.#s.server.origin}${path(m, "status")}`);
    const etag = res.headers.etag;
    if (typeof etag === "string") this.#statusSeen.set(key, { etag, body });
    return JSON.parse(new TextDecoder().decode(body)) as StatusAnswer;
  }

  /** DELETE …/config; true when it was there, false on 404. */
  async deleteConfig(m: MachineId): Promise<boolean> {
    try {
      await this.#send("DELETE", path(m, "config"));
      return true;
    } catch (err) {
      if (err instanceof HttpStatusError && err.status === 404) return false;
      throw err;
    }
  }

  /**
   * GET /v1/events until `signal` aborts, calling `onEvent` for each status event; reconnects
   * (with `Last-Event-ID`) after `retryMs`. Only a wake-up: correctness never depends on it.
   */
  async events(
    namespace: string | undefined,
    onEvent: (e: ServiceEvent) => void,
    signal: AbortSignal,
    onError: (err: unknown) => void,
    retryMs = 2000,
  ): Promise<void> {
    let lastId: string | undefined;
    while (!signal.aborted) {
      try {
        await this.#stream(namespace, lastId, signal, (id, e) => {
          if (id) lastId = id;
          onEvent(e);
        });
      } catch (err) {
        if (!signal.aborted) onError(err);
      }
      if (signal.aborted) break;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, retryMs);
        t.unref();
        signal.addEventListener("abort", () => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async #stream(
    namespace: string | undefined,
    lastId: string | undefined,
    signal: AbortSignal,
    onEvent: (id: string | undefined, e: ServiceEvent) => void,
  ): Promise<void> {
    const url = new URL(
      `/v1/events${namespace ? `?namespace=${encodeURIComponent(namespace)}` : ""}`,
      this.#s.server,
    );
    const headers = await this.#headers(
      lastId ? { "last-event-id": lastId, accept: "text/event-stream" } : {},
    );
    const ca = await this.#caPem();
    const isHttps = url.protocol === "https:";
    await new Promise<void>((resolve, reject) => {
      const options = { method: "GET", headers, signal, ca: isHttps ? ca : undefined };
      const onResponse = (res: import("node:http").IncomingMessage): void => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new BootsealError("SERVICE_UNAVAILABLE", `GET /v1/events: HTTP ${res.statusCode}`));
          return;
        }
        res.setEncoding("utf8");
        let buf = "";
        res.on("data", (chunk: string) => {
          buf += chunk;
          if (buf.length > 1_048_576) {
            res.destroy();
            return;
          }
          let i = buf.indexOf("\n\n");
          while (i !== -1) {
            const frame = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let id: string | undefined;
            let data = "";
            for (const line of frame.split("\n")) {
              if (line.startsWith("id: ")) id = line.slice(4);
              else if (line.startsWith("data: ")) data += line.slice(6);
            }
            if (data !== "") {
              try {
                const e = JSON.parse(data) as ServiceEvent;
                if (typeof e.namespace === "string" && typeof e.name === "string") onEvent(id, e);
              } catch {
                // not an event we know
              }
            }
            i = buf.indexOf("\n\n");
          }
        });
        res.on("end", () => resolve());
        res.on("error", reject);
        res.on("close", () => resolve());
      };
      const r = isHttps ? httpsRequest(url, options, onResponse) : httpRequest(url, options, onResponse);
      r.on("error", reject);
      r.end();
    });
  }
}

/** What a failed service call means for the conditions and the retry. */
export interface ServiceFailure {
  readonly reason: "ServiceUnavailable" | "Forbidden" | "Unauthorized" | "Refused";
  readonly message: string;
  readonly retryAfterMs?: number;
}

export function serviceFailure(err: unknown): ServiceFailure {
  const message = isBootsealError(err) ? err.message : "the bootseal service could not be reached";
  if (err instanceof HttpStatusError) {
    if (err.status === 403) return { reason: "Forbidden", message };
    if (err.status === 401) return { reason: "Unauthorized", message };
    if (err.retryable)
      return {
        reason: "ServiceUnavailable",
        message,
        ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
      };
    return { reason: "Refused", message };
  }
  if (hasCode(err, "SERVICE_UNAVAILABLE")) return { reason: "ServiceUnavailable", message };
  return { reason: "ServiceUnavailable", message };
}
