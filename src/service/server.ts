/**
 * Turns a validated ServiceConfig into a listening server: opens the store, builds the app,
 * binds it, and closes it gracefully: on SIGINT/SIGTERM Fastify stops accepting connections,
 * the event streams are ended, and in-flight requests finish before the process exits. SIGHUP
 * and changes of the config file reload the controller credentials (controllers/reload.ts).
 *
 * Nothing is created before the address is known to be bindable (checkListen): a busy port
 * fails with LISTEN_FAILED and its reason before the store, the audit log or (serve.ts) the
 * embedded default's keys exist.
 */
import { readFile } from "node:fs/promises";
import { createServer, isIPv4 } from "node:net";
import type { FastifyInstance } from "fastify";
import { FileStore } from "../../providers/stores/file.ts";
import { openStore, storeSettingsOf } from "../../providers/stores/index.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import type { ServiceConfig } from "../config/service-config.ts";
import { BootsealError } from "../errors.ts";
import { exitWhenIdle } from "../exit-when-idle.ts";
import { buildApp } from "./app.ts";
import { ControllerCredentials } from "./controllers/credentials.ts";
import { watchControllerConfig } from "./controllers/reload.ts";
import { createAuditLogger } from "./plugins/audit.ts";

export interface RunningServer {
  readonly app: FastifyInstance;
  readonly url: string;
  /** Set when the listener is reachable beyond this host in plaintext (also logged once). */
  readonly plaintextWarning?: string;
  close(): Promise<void>;
}

/** `127.0.0.0/8`, `::1` (bracketed or not), `localhost`: reachable from this host only. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (h === "localhost" || h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
  const v4 = h.startsWith("::ffff:") ? h.slice(7) : h;
  return isIPv4(v4) && v4.startsWith("127.");
}

export const PLAINTEXT_WARNING =
  "listening without TLS on a non-loopback address: tokens and secrets cross the network in the clear (set tls.cert and tls.key, or put a TLS proxy in front)";

async function readTls(config: ServiceConfig) {
  if (!config.tls) return undefined;
  const read = async (path: string, what: string) => {
    try {
      return await readFile(path);
    } catch (cause) {
      throw new BootsealError("USAGE", `tls.${what}: cannot read ${path}`, { cause });
    }
  };
  return {
    cert: await read(config.tls.cert, "cert"),
    key: await read(config.tls.key, "key"),
    ...(config.tls.clientCa ? { ca: await read(config.tls.clientCa, "clientCa") } : {}),
  };
}

/** How to read the configuration again for a live reload of the controller credentials. */
const LISTEN_REASONS: Readonly<Record<string, string>> = {
  EADDRINUSE: "address already in use",
  EACCES: "permission denied",
  EADDRNOTAVAIL: "address not available on this host",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
};

/** `cannot listen on 127.0.0.1:7480: address already in use (EADDRINUSE)`. */
export function listenError(host: string, port: number, cause: unknown): BootsealError {
  const code = (cause as NodeJS.ErrnoException | null)?.code;
  const reason = code
    ? `${LISTEN_REASONS[code] ?? "failed"} (${code})`
    : ((cause as Error | null)?.message ?? String(cause));
  const shown = host.includes(":") ? `[${host}]` : host;
  return new BootsealError("LISTEN_FAILED", `cannot listen on ${shown}:${port}: ${reason}`, { cause });
}

/**
 * Binds host:port for real and lets go at once: the check `serve` makes before it creates
 * anything. (The listener itself binds a moment later; the address may in principle be taken
 * in between, which startServer then reports the same way.)
 */
export async function checkListen(host: string, port: number): Promise<void> {
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once("error", (err) => reject(listenError(host, port, err)));
    probe.listen({ host, port, exclusive: true }, () => resolve());
  });
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

export interface ReloadSource {
  /** Watched for changes; undefined: SIGHUP only. */
  readonly file: string | undefined;
  readonly load: () => ServiceConfig;
}

/** The configured store, with its scheme's settings section (StoreSettings) from the configuration. */
export function openServiceStore(config: ServiceConfig): ObjectStore {
  return openStore(config.store, storeSettingsOf(config));
}

export async function startServer(
  config: ServiceConfig,
  options: { readonly reload?: ReloadSource } = {},
): Promise<RunningServer> {
  await checkListen(config.listen.host, config.listen.port);
  const store = openServiceStore(config);
  const audit = createAuditLogger(config.audit.path, config.audit.mode);
  const https = await readTls(config);
  const controllers = new ControllerCredentials(config);
  const app = buildApp({
    config,
    store,
    keyDeps: { env: process.env },
    audit: audit.logger,
    https,
    controllers,
  });
  app.addHook("onClose", async () => audit.close());
  if (options.reload) {
    const reloader = watchControllerConfig({ ...options.reload, running: config, controllers, log: app.log });
    app.addHook("onClose", async () => reloader.close());
  }
  if (store instanceof FileStore) {
    sweepFileStore(app, store);
    store.keepSpares();
    app.addHook("onClose", async () => store.dropSpares());
  }
  const { host, port } = config.listen;
  try {
    await app.listen({ host, port });
  } catch (cause) {
    await app.close();
    throw listenError(host, port, cause);
  }
  // Report the bound port, not the requested one: --listen 127.0.0.1:0 picks a free port.
  const bound = app.server.address();
  if (bound === null || typeof bound === "string")
    throw new BootsealError("IO_ERROR", "the server is not bound to a TCP port");
  const address = bound.address;
  const scheme = https ? "https" : "http";
  const url = `${scheme}://${address.includes(":") ? `[${address}]` : address}:${bound.port}`;
  if (https || isLoopbackHost(host)) return { app, url, close: () => app.close() };
  app.log.warn({ listen: url }, PLAINTEXT_WARNING);
  return { app, url, plaintextWarning: PLAINTEXT_WARNING, close: () => app.close() };
}

/** How often `bootseal serve` sweeps a file store for what crashed writers left (also at start). */
export const STORE_SWEEP_INTERVAL_MS = 5 * 60_000;

/** Sweeps now and every STORE_SWEEP_INTERVAL_MS (timer unref'd, stopped on close); failures are logged. */
function sweepFileStore(app: FastifyInstance, store: FileStore): void {
  const stop = new AbortController();
  let running: Promise<void> | undefined;
  const sweep = () => {
    if (running) return; // a huge store: never two walks at once
    running = store
      .sweepStale({ signal: stop.signal })
      .then(
        (r) => {
          if (r.tempFiles + r.locks > 0) app.log.info(r, "file store: removed files left by crashed writers");
        },
        (err: unknown) => {
          if (!stop.signal.aborted)
            app.log.warn({ code: (err as { code?: unknown }).code }, "file store sweep failed");
        },
      )
      .finally(() => {
        running = undefined;
      });
  };
  sweep();
  const timer = setInterval(sweep, STORE_SWEEP_INTERVAL_MS);
  timer.unref();
  app.addHook("onClose", async () => {
    clearInterval(timer);
    stop.abort();
    await running;
  });
}

export function closeOnSignals(server: RunningServer): void {
  let closing = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    server.app.log.info({ signal }, "shutting down: draining in-flight requests");
    server.close().then(
      () => exitWhenIdle(0),
      () => exitWhenIdle(1),
    );
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
}
