import { parseArgs } from "node:util";
import { BootsealError } from "../../errors.ts";
import { closeOnSignals, startServer } from "../../service/server.ts";
import type { Command } from "../command.ts";

const DEFAULT_LISTEN = "127.0.0.1:7480";

export function parseListen(text: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[3]) : Number.NaN;
  if (!match || port < 0 || port > 65535) {
    throw new BootsealError("USAGE", `--listen wants HOST:PORT, got "${text}"`);
  }
  return { host: (match[1] ?? match[2]) as string, port };
}

export const serveCommand: Command = {
  name: "serve",
  summary: "run the REST service (embedded default: 127.0.0.1:7480, everything under ./data)",
  usage: "bootseal serve [--config bootseal.yaml] [--listen HOST:PORT] [--data-dir DIR] [--store URL]",
  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: {
        listen: { type: "string" },
        "data-dir": { type: "string" },
        config: { type: "string" },
        store: { type: "string" },
        "log-level": { type: "string" },
      },
      strict: true,
    });
    const configFile = values.config ?? io.env.BOOTSEAL_CONFIG;
    if (configFile) {
      throw new BootsealError("UNSUPPORTED", "config files are not supported yet; run the embedded default");
    }
    const store = values.store ?? io.env.BOOTSEAL_STORE;
    if (store && !store.startsWith("file://")) {
      throw new BootsealError(
        "UNSUPPORTED",
        `only file:// stores are supported yet, got ${store.split("://")[0]}://`,
      );
    }
    const { host, port } = parseListen(values.listen ?? io.env.BOOTSEAL_LISTEN ?? DEFAULT_LISTEN);
    const dataDir = values["data-dir"] ?? io.env.BOOTSEAL_DATA_DIR ?? "./data";
    const server = await startServer({
      host,
      port,
      dataDir,
      logLevel: values["log-level"] ?? io.env.BOOTSEAL_LOG_LEVEL ?? "info",
    });
    closeOnSignals(server);
    const e = server.embedded;
    io.stdout.write(
      `bootseal listening on ${server.url}\n` +
        `  store:            ${e.storeUrl}\n` +
        `  age recipient:    ${e.ageRecipient}\n` +
        `  age identity:     ${e.ageKeyFile}\n` +
        `  controller token: ${e.controllerTokenFile}\n`,
    );
    // Keep running until a signal closes the server.
    await new Promise<never>(() => {});
    return 0;
  },
};
