/**
 * One HTTP(S) request to the bootseal service, on node:http/node:https rather than fetch so
 * a private CA (--ca-file) applies to this request only. Failures are BootsealErrors: no
 * answer -> SERVICE_UNAVAILABLE (retryable); an answer outside 2xx -> HttpStatusError with the
 * service's `{code, message}` where it sent one. Whether to retry is decided by status
 * (5xx and 429 yes, other 4xx never), not by the body's code, so `retryable` follows it.
 * Nothing here prints a header: the bearer token never reaches a message.
 */
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { BootsealError, ERROR_CODES, type ErrorCode } from "../errors.ts";
import { describeBytes, MAX_DOCUMENT_BYTES } from "../limits.ts";

export interface HttpRequest {
  readonly method: "GET" | "POST" | "PUT" | "DELETE";
  readonly url: URL;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: Uint8Array;
  readonly signal?: AbortSignal;
  /** Extra trusted CA certificates (PEM) for https. */
  readonly ca?: string | Buffer;
  /**
   * https: who the server's certificate must name, instead of the URL's host (a SPIFFE bundle
   * endpoint's X509-SVID names a SPIFFE ID); an Error refuses the connection.
   */
  readonly checkServerIdentity?: (
    host: string,
    cert: import("node:tls").PeerCertificate,
  ) => Error | undefined;
  /** The largest answer read (default MAX_DOCUMENT_BYTES); an executable is bigger than a document. */
  readonly maxBytes?: number;
}

export interface HttpResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Uint8Array;
}

/** A non-2xx answer. */
export class HttpStatusError extends BootsealError {
  readonly status: number;
  readonly retryAfterMs: number | undefined;

  constructor(code: ErrorCode, status: number, message: string, retryAfterMs?: number) {
    super(code, message);
    this.name = "HttpStatusError";
    this.status = status;
    this.retryAfterMs = retryAfterMs;
  }

  override get retryable(): boolean {
    return this.status === 429 || this.status >= 500;
  }
}

/** Retry-After as seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: number = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function codeForStatus(status: number): ErrorCode {
  if (status === 401) return "UNAUTHORIZED";
  if (status === 403) return "FORBIDDEN";
  if (status === 404) return "NOT_FOUND";
  if (status === 409 || status === 412) return "PRECONDITION_FAILED";
  if (status === 413) return "TOO_LARGE";
  if (status === 429) return "RATE_LIMITED";
  if (status >= 500) return "SERVICE_UNAVAILABLE";
  return "BAD_INPUT";
}

const PRINTABLE = /^[\x20-\x7e]*$/;

/** The error for a non-2xx answer: the service's code and sentence where it gave them. */
export function statusError(res: HttpResponse, what: string): HttpStatusError {
  let code = codeForStatus(res.status);
  let message = `HTTP ${res.status}`;
  try {
    const body = JSON.parse(new TextDecoder().decode(res.body)) as { code?: unknown; message?: unknown };
    if (typeof body.code === "string" && (ERROR_CODES as readonly string[]).includes(body.code)) {
      // A 5xx stays a 5xx whatever it calls itself: it decides the retry, the code the exit.
      code = body.code as ErrorCode;
    }
    if (typeof body.message === "string" && PRINTABLE.test(body.message)) {
      message = `HTTP ${res.status}: ${body.message.slice(0, 300)}`;
    }
  } catch {
    // not JSON (a proxy's error page): the status says enough
  }
  const retryAfter = res.headers["retry-after"];
  return new HttpStatusError(
    code,
    res.status,
    `${what}: ${message}`,
    parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter),
  );
}

function connectionError(err: unknown, what: string): BootsealError {
  const code = (err as NodeJS.ErrnoException).code;
  const name = (err as Error).name;
  const why = name === "AbortError" ? "aborted" : (code ?? (err as Error).message);
  return new BootsealError("SERVICE_UNAVAILABLE", `${what}: no answer (${why})`, { cause: err });
}

/** Sends the request and reads the whole answer (at most `maxBytes`). Never throws on a status. */
export function send(req: HttpRequest): Promise<HttpResponse> {
  const what = `${req.method} ${req.url.origin}${req.url.pathname}`;
  const isHttps = req.url.protocol === "https:";
  if (!isHttps && req.url.protocol !== "http:") {
    return Promise.reject(new BootsealError("USAGE", `${what}: only http and https URLs`));
  }
  return new Promise<HttpResponse>((resolve, reject) => {
    const headers: Record<string, string> = { ...req.headers };
    if (req.body) headers["content-length"] = String(req.body.byteLength);
    const options = {
      method: req.method,
      headers,
      signal: req.signal,
      // The private CA is for this request only (never the global agent's).
      ca: isHttps ? req.ca : undefined,
      ...(isHttps && req.checkServerIdentity ? { checkServerIdentity: req.checkServerIdentity } : {}),
    };
    const maxBytes = req.maxBytes ?? MAX_DOCUMENT_BYTES;
    const onResponse = (res: import("node:http").IncomingMessage): void => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) {
          res.destroy();
          reject(new BootsealError("TOO_LARGE", `${what}: answer larger than ${describeBytes(maxBytes)}`));
          return;
        }
        chunks.push(chunk);
      });
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: new Uint8Array(Buffer.concat(chunks)),
        }),
      );
      res.on("error", (err) => reject(connectionError(err, what)));
    };
    const r = isHttps
      ? httpsRequest(req.url, options, onResponse)
      : httpRequest(req.url, options, onResponse);
    r.on("error", (err) => reject(connectionError(err, what)));
    r.end(req.body ? Buffer.from(req.body) : undefined);
  });
}

/** send() and turn a non-2xx answer into its error. */
export async function sendOk(req: HttpRequest): Promise<HttpResponse> {
  const res = await send(req);
  if (res.status < 200 || res.status > 299) {
    throw statusError(res, `${req.method} ${req.url.origin}${req.url.pathname}`);
  }
  return res;
}
