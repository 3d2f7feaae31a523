/**
 * Binds the app to a socket and closes it gracefully: on SIGINT/SIGTERM Fastify stops
 * accepting connections and waits for in-flight requests before the process exits.
 */
import { constants } from "node:fs";
import { access } from "node:fs/promises";
import type { FastifyInstance } from "fastify";
import { BootsealError } from "../errors.ts";
import { buildApp } from "./app.ts";
import { type EmbeddedDefault, prepareEmbeddedDefault } from "./embedded-default.ts";

export interface ServeOptions {
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  readonly logLevel?: string;
}

export interface RunningServer {
  readonly app: FastifyInstance;
  readonly url: string;
  readonly embedded: EmbeddedDefault;
  close(): Promise<void>;
}

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const embedded = await prepareEmbeddedDefault(options.dataDir);
  const app = buildApp({
    logger: { level: options.logLevel ?? "info" },
    probes: [
      {
        name: "store",
        // The embedded store is a directory: ready when it is there and writable.
        check: () => access(embedded.storeDir, constants.W_OK | constants.X_OK),
      },
    ],
  });
  try {
    await app.listen({ host: options.host, port: options.port });
  } catch (cause) {
    await app.close();
    throw new BootsealError("IO_ERROR", `cannot listen on ${options.host}:${options.port}`, { cause });
  }
  // Report the bound port, not the requested one: --listen 127.0.0.1:0 picks a free port.
  const bound = app.server.address();
  if (bound === null || typeof bound === "string")
    throw new BootsealError("IO_ERROR", "the server is not bound to a TCP port");
  const host = bound.address;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${bound.port}`;
  return { app, url, embedded, close: () => app.close() };
}

export function closeOnSignals(server: RunningServer): void {
  let closing = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    server.app.log.info({ signal }, "shutting down: draining in-flight requests");
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
}
