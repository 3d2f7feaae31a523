/**
 * The service's HTTP edge (docs/api.md, "Limits and headers"): everything that happens to a
 * connection before a route sees it, and the headers every answer carries.
 *
 * - Timeouts: the request head must arrive within `limits.headersTimeout`, the whole request
 *   (head and body) within `limits.requestTimeout`, and an idle keep-alive connection is closed
 *   after `limits.idleTimeout`. A client that is too slow gets 408 `{code, message}` and the
 *   connection is closed.
 * - Connection caps: at most `limits.maxConnections` open connections, and at most
 *   `limits.maxConnectionsPerAddress` from one peer address (the balancers named in `trustProxy`
 *   are exempt; `trustProxy: true` turns the per-address cap off). A connection over a cap is
 *   answered 503 (plaintext; over TLS closed without an answer) and closed at once, so it
 *   holds no descriptor for long.
 * - Error shape: malformed HTTP that Node's parser refuses (request line, header syntax,
 *   unknown method, oversized head, bad Content-Length), an unmet `Expect`, HTTP/1.1 without
 *   `Host`, Fastify's framework errors (bad URL) and duplicated singleton headers such as
 *   `Authorization` and the asterisk request target (`GET * HTTP/1.1`) all get `{code, message}`;
 *   messages never echo the input.
 * - Headers: `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`,
 *   `Content-Security-Policy: default-src 'none'`, HSTS when serving TLS, and
 *   `Cache-Control: no-store` on every `/v1/` answer. A route that serves a browser page (the
 *   fleet page, /docs) names its own policy with `config: pageRouteConfig()` (or
 *   `config: { csp: ... }`): same-origin only, never 'unsafe-inline'; every other answer,
 *   404s included, keeps `default-src 'none'`.
 * - TLS: 1.2 at least; TLS 1.2 only with forward-secret AEAD suites (ECDHE).
 */
import { type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from "node:http";
import { BlockList, isIPv4, isIPv6, type Socket } from "node:net";
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from "fastify";
import type { ServiceConfig } from "../../config/service-config.ts";
import { routeConfigOf } from "../request-state.ts";
import { type ErrorBody, errorReply } from "./error-handler.ts";

export type EdgeLimits = Pick<
  ServiceConfig["limits"],
  "headersTimeoutMs" | "requestTimeoutMs" | "idleTimeoutMs" | "maxConnections" | "maxConnectionsPerAddress"
>;

/**
 * TLS 1.2 suites with forward secrecy and authenticated encryption only; TLS 1.3's own suites
 * (all forward-secret) stay as Node sets them.
 */
export const TLS12_CIPHERS = [
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
  "ECDHE-ECDSA-CHACHA20-POLY1305",
  "ECDHE-RSA-CHACHA20-POLY1305",
].join(":");

export const TLS_OPTIONS = {
  minVersion: "TLSv1.2",
  ciphers: TLS12_CIPHERS,
  honorCipherOrder: true,
} as const;

/**
 * TLS server options: the suites above, and a handshake that must finish within the head's
 * deadline (Node's default is 120 s, and the HTTP deadlines only start after the handshake).
 */
export function tlsServerOptions(limits: EdgeLimits) {
  return { ...TLS_OPTIONS, handshakeTimeout: limits.headersTimeoutMs };
}

export const CSP = "default-src 'none'; frame-ancestors 'none'";

/**
 * The policy of the service's own browser pages: scripts, styles, images and fetches from
 * this origin only (images also as data: URLs), nothing inline, no framing, forms post back
 * here only.
 */
export const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

declare module "fastify" {
  interface FastifyContextConfig {
    /** This route's Content-Security-Policy instead of CSP (pageRouteConfig). */
    csp?: string;
  }
}

/**
 * The route config of a browser page or its assets: `app.get(path, { config: pageRouteConfig() }, …)`.
 * `csp` defaults to PAGE_CSP; a page that needs more (never anything external) passes its own.
 */
export function pageRouteConfig(csp: string = PAGE_CSP): { csp: string } {
  return { csp };
}

/**
 * The CSP of Swagger UI's pages under /docs. @fastify/swagger-ui registers those routes itself,
 * so routes/docs.ts sets this through the plugin's `staticCSP` (over the default CSP) rather than
 * pageRouteConfig: its scripts, styles and the document
 * from this origin, images also inline (`data:`), nothing external, no inline script. The one
 * hash is the `<style>` of the small logo inside swagger-ui-bundle.js 5.x
 * (`.logo_small_svg__cls-2{fill:#fff}...`); the headless-browser test fails on any violation.
 */
export const DOCS_CSP =
  "default-src 'none'; script-src 'self'; " +
  "style-src 'self' 'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='; img-src 'self' data:; " +
  "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** The headers of every answer; `/v1/` answers are also never cached. */
function setSecurityHeaders(res: ServerResponse, url: string | undefined, tls: boolean, csp = CSP): void {
  res.setHeader("x-content-type-options", "nosniff");
  res.setHeader("referrer-policy", "no-referrer");
  res.setHeader("content-security-policy", csp);
  if (tls) res.setHeader("strict-transport-security", HSTS);
  if (url?.startsWith("/v1/")) res.setHeader("cache-control", "no-store");
}

/** Strict-Transport-Security when the service speaks TLS: one year. */
export const HSTS = "max-age=31536000";

/**
 * How often Node looks for requests over their deadlines: a quarter of the shorter timeout,
 * between 250 ms and 5 s, so a slow client is cut within 1.25 × its timeout.
 */
export function checkingInterval(limits: EdgeLimits): number {
  const shorter = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  return Math.min(5000, Math.max(250, Math.floor(shorter / 4)));
}

/** node:http(s) server options for the timeouts (merged into `https` or passed as `http`). */
export function serverTimeouts(limits: EdgeLimits) {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.idleTimeoutMs,
    connectionsCheckingInterval: checkingInterval(limits),
    // A missing Host is refused by our hook, with a {code, message} body (Node's has none).
    requireHostHeader: false,
  };
}

function rawAnswer(status: number, body: ErrorBody): string {
  const json = JSON.stringify(body);
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\n` +
    "Content-Type: application/json\r\n" +
    `Content-Length: ${Buffer.byteLength(json)}\r\n` +
    "X-Content-Type-Options: nosniff\r\n" +
    "Referrer-Policy: no-referrer\r\n" +
    `Content-Security-Policy: ${CSP}\r\n` +
    "Cache-Control: no-store\r\n" +
    "Connection: close\r\n\r\n" +
    json
  );
}

/** How long a refused client has to read its short answer before the socket is destroyed. */
const LINGER_MS = 2000;

/** Writes a last answer and closes; a client that does not read it is cut off after LINGER_MS. */
function endWithAnswer(socket: Socket, answer: string): void {
  socket.end(answer);
  socket.destroySoon();
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/** What a socket-level failure is answered with; never the parser's text, which may quote input. */
export function clientErrorAnswer(code: string | undefined): { status: number; body: ErrorBody } {
  switch (code) {
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return {
        status: 408,
        body: { code: "REQUEST_TIMEOUT", message: "the request took too long to arrive" },
      };
    case "HPE_HEADER_OVERFLOW":
      return { status: 431, body: { code: "TOO_LARGE", message: "the request head is too large" } };
    case "HPE_INVALID_METHOD":
      return { status: 400, body: { code: "BAD_INPUT", message: "unknown HTTP method" } };
    case "HPE_INVALID_CONTENT_LENGTH":
    case "HPE_UNEXPECTED_CONTENT_LENGTH":
      return { status: 400, body: { code: "BAD_INPUT", message: "malformed Content-Length" } };
    case "HPE_INVALID_TRANSFER_ENCODING":
    case "HPE_INVALID_CHUNK_SIZE":
      return { status: 400, body: { code: "BAD_INPUT", message: "malformed transfer encoding" } };
    default:
      return { status: 400, body: { code: "BAD_INPUT", message: "malformed HTTP request" } };
  }
}

/** Fastify's clientErrorHandler: Node's parser or a timeout gave up on this connection. */
function onClientError(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  // Only the HTTP parser and the request deadlines have an answer; anything else (a TLS
  // handshake that failed or timed out, a socket error) has no HTTP to answer on.
  if (!err.code?.startsWith("HPE_") && err.code !== "ERR_HTTP_REQUEST_TIMEOUT") {
    this.log.debug({ code: err.code }, "connection error");
    socket.destroy();
    return;
  }
  const { status, body } = clientErrorAnswer(err.code);
  this.log.debug({ code: body.code, status }, "client error");
  // A response already under way cannot get a second head: just close.
  const pending = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
  if (socket.writable && !pending?.headersSent) {
    endWithAnswer(socket, rawAnswer(status, body));
  } else {
    socket.destroy();
  }
}

/** Fastify's frameworkErrors: a malformed URL (bad percent-encoding), an over-long parameter. */
function onFrameworkError(
  tls: boolean,
  error: { code?: string },
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  // No onRequest hook runs on this path: the headers are set here.
  setSecurityHeaders(reply.raw, request.raw.url, tls);
  if (error.code === "FST_ERR_MAX_PARAM_LENGTH") {
    void errorReply(reply, 414, { code: "TOO_LARGE", message: "a path segment is too long" });
    return;
  }
  void errorReply(reply, 400, { code: "BAD_INPUT", message: "malformed URL" });
}

/** The Fastify constructor options of the edge (timeouts, error handlers). */
export function edgeFastifyOptions(
  limits: EdgeLimits,
  options: { readonly tls: boolean },
): Partial<FastifyServerOptions> {
  return {
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.idleTimeoutMs,
    clientErrorHandler: onClientError as unknown as FastifyServerOptions["clientErrorHandler"],
    frameworkErrors: onFrameworkError.bind(
      null,
      options.tls,
    ) as unknown as FastifyServerOptions["frameworkErrors"],
  };
}

/**
 * Headers whose duplicates Node's parser would silently drop (it keeps the first): two
 * `Authorization` headers may be read differently by a proxy and by us, so both are refused.
 */
const SINGLETON_HEADERS = new Set(["authorization", "proxy-authorization", "host", "content-type"]);

function duplicateSingleton(raw: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    if (!SINGLETON_HEADERS.has(name)) continue;
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return undefined;
}

const CANONICAL: Readonly<Record<string, string>> = {
  authorization: "Authorization",
  "proxy-authorization": "Proxy-Authorization",
  host: "Host",
  "content-type": "Content-Type",
};

/** Security headers and request-shape checks, on every answer including 404s and errors. */
export function httpEdgePlugin(app: FastifyInstance, options: { readonly tls: boolean }): void {
  app.addHook("onRequest", async (request, reply) => {
    // Set on the raw response, so hijacked answers (the event stream) carry them too.
    setSecurityHeaders(reply.raw, request.url, options.tls, routeConfigOf(request).csp);

    const dup = duplicateSingleton(request.raw.rawHeaders);
    if (dup !== undefined) {
      return errorReply(reply, 400, {
        code: "BAD_INPUT",
        message: `more than one ${CANONICAL[dup] ?? dup} header`,
      });
    }
    const raw: IncomingMessage = request.raw;
    // `*` is only meaningful for OPTIONS, which no route serves; the router would take it for `/`.
    if (raw.url === "*") {
      return errorReply(reply, 400, { code: "BAD_INPUT", message: "the request target * is not supported" });
    }
    if (raw.httpVersionMajor === 1 && raw.httpVersionMinor >= 1 && !raw.headers.host) {
      return errorReply(reply, 400, { code: "BAD_INPUT", message: "HTTP/1.1 requests need a Host header" });
    }
    return undefined;
  });
}

/** Peer addresses the per-address cap does not count: the load balancers of `trustProxy`. */
function exemptAddresses(trustProxy: boolean | readonly string[]): BlockList | "all" | undefined {
  if (trustProxy === true) return "all";
  if (trustProxy === false || trustProxy.length === 0) return undefined;
  const list = new BlockList();
  for (const entry of trustProxy) {
    const [address, bits] = entry.split("/") as [string, string | undefined];
    const type = isIPv6(address) ? "ipv6" : "ipv4";
    if (!isIPv4(address) && !isIPv6(address)) continue;
    try {
      if (bits === undefined) list.addAddress(address, type);
      else list.addSubnet(address, Number(bits), type);
    } catch {
      // A prefix out of range (`/99`) exempts nothing: the address stays counted.
    }
  }
  return list;
}

/** `::ffff:1.2.3.4` is 1.2.3.4: one peer, one count. */
function peerAddress(socket: Socket): string {
  const address = socket.remoteAddress ?? "";
  return address.startsWith("::ffff:") && isIPv4(address.slice(7)) ? address.slice(7) : address;
}

const OVER_CAP = rawAnswer(503, {
  code: "SERVICE_UNAVAILABLE",
  message: "too many open connections; try again later",
});

/**
 * Counts open connections, in total and per peer address, and closes those over a cap on
 * arrival. `tls`: the socket is raw TCP under TLS, so it is closed without an answer.
 */
export function guardConnections(
  server: Server,
  limits: EdgeLimits,
  options: { readonly tls: boolean; readonly trustProxy: boolean | readonly string[] },
): { open(): number } {
  const exempt = exemptAddresses(options.trustProxy);
  const perAddress = new Map<string, number>();
  let total = 0;
  const refuse = (socket: Socket) => {
    if (options.tls) {
      socket.destroy();
      return;
    }
    endWithAnswer(socket, OVER_CAP);
  };
  server.on("connection", (socket: Socket) => {
    const address = peerAddress(socket);
    const counted =
      limits.maxConnectionsPerAddress > 0 &&
      exempt !== "all" &&
      !exempt?.check(address, isIPv6(address) ? "ipv6" : "ipv4");
    const mine = counted ? (perAddress.get(address) ?? 0) : 0;
    if (
      (limits.maxConnections > 0 && total >= limits.maxConnections) ||
      (counted && mine >= limits.maxConnectionsPerAddress)
    ) {
      refuse(socket);
      return;
    }
    total += 1;
    if (counted) perAddress.set(address, mine + 1);
    socket.once("close", () => {
      total -= 1;
      if (!counted) return;
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left <= 0) perAddress.delete(address);
      else perAddress.set(address, left);
    });
  });
  // CONNECT never reaches a route: Node hands the socket over, and with no listener it is
  // destroyed without an answer. Answer it like every other unsupported request.
  server.on("connect", (_req: IncomingMessage, socket: Socket) => {
    endWithAnswer(
      socket,
      rawAnswer(400, { code: "BAD_INPUT", message: "the CONNECT method is not supported" }),
    );
  });
  // Expect values other than 100-continue: 417 with a body (Node's own has none).
  server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => {
    const body = JSON.stringify({ code: "BAD_INPUT", message: "unsupported Expect header" });
    setSecurityHeaders(res, undefined, options.tls);
    res.writeHead(417, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "cache-control": "no-store",
      connection: "close",
    });
    res.end(body);
  });
  return { open: () => total };
}
