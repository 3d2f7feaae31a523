/**
 * The S3 store's calls on one object (GET, HEAD, PUT, DELETE; and the bucket's POST ?delete for a
 * batch of deletes), made with the SDK's own parts
 * but not through `S3Client.send`: the bucket's endpoint from the SDK's endpoint rules
 * (resolved once: for a bucket name it does not depend on the key), the client's credential
 * provider, the SDK's SigV4 signer (@smithy/signature-v4) and the client's HTTP handler
 * (@smithy/node-http-handler: its keep-alive agent, timeouts and abort signal). What is left
 * out is the per-call middleware stack and schema serde: through `send` a put cost 0.83 ms
 * and a get 0.72 ms of CPU against SeaweedFS, this way 0.28 and 0.22 ms (bench/providers.ts,
 * docs/benchmarks.md "Session 11"); a boot storm makes four such calls per machine. Listing (an XML page per thousand keys) stays with
 * `S3Client`.
 *
 * An answer that is not 2xx becomes an S3ResponseError named by the `<Code>` of S3's XML
 * error body (NoSuchKey, PreconditionFailed, ...), read from at most ERROR_BODY_BYTES, or by
 * the status when there is no body (HEAD). Not done here, unlike `send`: the clock-skew
 * correction (a request signed by a clock more than 15 minutes off is refused as
 * RequestTimeTooSkewed, STORE_FORBIDDEN) and the SDK's retries (openStore's retry wrapper
 * retries, as for every store).
 */
import type { S3Client } from "@aws-sdk/client-s3";
import type { HttpRequest } from "@smithy/types";
import { BootsealError } from "../../src/errors.ts";
import { NodeSha256 } from "../aws-sha256.ts";
import { lazyModule } from "../lazy-module.ts";

/** POST: the bucket's DeleteObjects (`POST /?delete`, key ""; s3-delete-batch.ts). */
export type ObjectMethod = "GET" | "HEAD" | "PUT" | "DELETE" | "POST";

/** The operation name the SDK puts in the query of these calls (`?x-id=GetObject`); S3 ignores it. */
const X_ID: Readonly<Record<ObjectMethod, string | undefined>> = {
  GET: "GetObject",
  HEAD: undefined,
  PUT: "PutObject",
  DELETE: "DeleteObject",
  POST: "DeleteObjects",
};

export interface ObjectCallOptions {
  readonly body?: Uint8Array;
  /** Request headers (lower case): conditions, content type. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly signal?: AbortSignal | undefined;
  /** Query parameters besides `x-id` (`delete: ""` for DeleteObjects). */
  readonly query?: Readonly<Record<string, string>>;
  /** A 2xx body larger than this is TOO_LARGE (and its download stopped). */
  readonly maxBytes?: number | undefined;
}

export interface ObjectAnswer {
  readonly status: number;
  /** Response headers, lower case. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  readonly body: Uint8Array;
}

/** S3 said no: `name` is its error code (`NoSuchKey`), or the status's name without a body. */
export class S3ResponseError extends Error {
  readonly status: number;

  constructor(status: number, code: string | undefined) {
    super(`S3 answered ${status}${code ? ` ${code}` : ""}`);
    this.name = code ?? STATUS_NAMES[status] ?? `Http${status}`;
    this.status = status;
  }
}

/** What the SDK names a bodiless answer (a HEAD's 404 is NotFound). */
const STATUS_NAMES: Readonly<Record<number, string>> = {
  304: "NotModified",
  400: "BadRequest",
  403: "Forbidden",
  404: "NotFound",
  409: "Conflict",
  412: "PreconditionFailed",
  500: "InternalError",
  503: "ServiceUnavailable",
};

/** S3 error bodies are a few hundred bytes; more is read no further. */
const ERROR_BODY_BYTES = 64 * 1024;
const ERROR_CODE = /<Code>([A-Za-z0-9.]{1,128})<\/Code>/;

/** The signer and the endpoint rules load with the store's first call, as the SDK does. */
const parts = lazyModule(async () => {
  const [{ SignatureV4 }, { getEndpointFromInstructions }, { GetObjectCommand }] = await Promise.all([
    import("@smithy/signature-v4"),
    import("@smithy/core/endpoints"),
    import("@aws-sdk/client-s3"),
  ]);
  return { SignatureV4, getEndpointFromInstructions, GetObjectCommand };
});

interface Target {
  readonly url: URL;
  /**
   * What the key's path is appended to, as the SDK joins them: "" for "/" (virtual-hosted on
   * AWS), else the endpoint's path ("/bucket" path-style). An endpoint path ending in "/" so
   * gives "//", as through `send`: objects written by either are found by the other.
   */
  readonly basePath: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly signer: { sign(request: HttpRequest): Promise<HttpRequest> };
}

/** A key as S3's REST path has it: each segment percent-encoded (RFC 3986), `/` kept. */
export function keyPath(key: string): string {
  return key
    .split("/")
    .map((segment) =>
      encodeURIComponent(segment).replace(
        /[!'()*]/g,
        (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
      ),
    )
    .join("/");
}

export class S3ObjectCalls {
  readonly #client: S3Client;
  readonly #bucket: string;
  #target: Promise<Target> | undefined;

  constructor(client: S3Client, bucket: string) {
    this.#client = client;
    this.#bucket = bucket;
  }

  /** The bucket's endpoint and signer, as `send` would resolve them for any key of it. */
  #resolve(): Promise<Target> {
    this.#target ??= (async () => {
      const { SignatureV4, getEndpointFromInstructions, GetObjectCommand } = await parts.load();
      const config = this.#client.config;
      const endpoint = await getEndpointFromInstructions(
        { Bucket: this.#bucket, Key: "k" },
        GetObjectCommand as unknown as Parameters<typeof getEndpointFromInstructions>[1],
        config as unknown as Parameters<typeof getEndpointFromInstructions>[2],
      );
      const scheme = (
        endpoint.properties?.authSchemes as { signingName?: string; signingRegion?: string }[]
      )?.[0];
      const headers: Record<string, string> = {};
      for (const [name, values] of Object.entries(endpoint.headers ?? {}))
        headers[name.toLowerCase()] = values.join(",");
      return {
        url: endpoint.url,
        basePath: endpoint.url.pathname === "/" ? "" : endpoint.url.pathname,
        headers,
        signer: new SignatureV4({
          credentials: config.credentials,
          region: scheme?.signingRegion ?? (await config.region()),
          service: scheme?.signingName ?? "s3",
          sha256: NodeSha256,
          uriEscapePath: false,
          applyChecksum: true,
        }),
      };
    })().catch((err: unknown) => {
      this.#target = undefined;
      throw err;
    });
    return this.#target;
  }

  /** One signed call; a non-2xx answer throws S3ResponseError. */
  async send(method: ObjectMethod, key: string, options: ObjectCallOptions = {}): Promise<ObjectAnswer> {
    const target = await this.#resolve();
    const { url } = target;
    const body = options.body;
    const request: HttpRequest = {
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: `${target.basePath}/${keyPath(key)}`,
      query: { ...options.query, ...(X_ID[method] ? { "x-id": X_ID[method] } : {}) },
      headers: {
        ...target.headers,
        host: url.host,
        ...options.headers,
        ...(body ? { "content-length": String(body.byteLength) } : {}),
      },
      ...(body ? { body } : {}),
    };
    const signed = await target.signer.sign(request);
    const { response } = await this.#client.config.requestHandler.handle(signed, {
      ...(options.signal ? { abortSignal: options.signal } : {}),
    });
    const stream = response.body as CappedBody | undefined;
    const ok = response.statusCode >= 200 && response.statusCode < 300;
    const headers = response.headers as Record<string, string | undefined>;
    if (!ok) {
      const text = stream
        ? Buffer.from(await readCapped(stream, undefined, ERROR_BODY_BYTES, true)).toString("utf8")
        : "";
      throw new S3ResponseError(response.statusCode, ERROR_CODE.exec(text)?.[1]);
    }
    const length = headers["content-length"] === undefined ? undefined : Number(headers["content-length"]);
    return {
      status: response.statusCode,
      headers,
      // A HEAD's body is empty; reading it still hands the socket back to the agent.
      body: stream ? await readCapped(stream, length, options.maxBytes) : new Uint8Array(),
    };
  }
}

/** The Node stream under a response body: iterable, and destroyable to stop the download. */
interface CappedBody extends AsyncIterable<Uint8Array> {
  destroy?(): void;
}

/**
 * The body, at most maxBytes: the announced length first, then the stream stops at the cap.
 * `truncate`: keep the first maxBytes instead of refusing (an error body is only looked into).
 */
async function readCapped(
  body: CappedBody,
  length: number | undefined,
  maxBytes: number | undefined,
  truncate = false,
): Promise<Uint8Array> {
  const tooLarge = () => {
    body.destroy?.();
    return new BootsealError("TOO_LARGE", `s3: the object is larger than ${maxBytes} bytes`);
  };
  if (maxBytes !== undefined && length !== undefined && length > maxBytes && !truncate) throw tooLarge();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of body) {
    if (maxBytes !== undefined && total + chunk.byteLength > maxBytes) {
      if (!truncate) throw tooLarge();
      chunks.push(chunk.subarray(0, maxBytes - total));
      total = maxBytes;
      body.destroy?.();
      break;
    }
    total += chunk.byteLength;
    chunks.push(chunk);
  }
  // One copy (the chunks are views of the socket's reads), handed out as a plain Uint8Array
  // over the same memory, not copied a second time: a boot storm reads a 16 KiB config per fetch.
  const joined = Buffer.concat(chunks, total);
  return new Uint8Array(joined.buffer, joined.byteOffset, joined.byteLength);
}
