import { join, resolve } from "node:path";
import { storeUrlExamples } from "../../../providers/stores/index.ts";
import {
  applyEnv,
  parseListenAddress,
  readServiceConfigFile,
  SCOPES,
  schemaDefault,
  setConfigPath,
  validateServiceConfig,
} from "../../config/service-config.ts";
import { findArtifacts } from "../../service/artifacts.ts";
import { type EmbeddedDefault, prepareEmbeddedDefault } from "../../service/embedded-default.ts";
import { checkListen, closeOnSignals, startServer } from "../../service/server.ts";
import type { Command } from "../command.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";

export function parseListen(text: string): { host: string; port: number } {
  return parseListenAddress(text, "--listen");
}

const spec = {
  name: "serve",
  summary: "run the REST service (embedded default: 127.0.0.1:7480, everything under ./data)",
  flags: [
    {
      name: "config",
      type: "string",
      env: "BOOTSEAL_CONFIG",
      value: "FILE",
      help: "the service configuration (bootseal.yaml); without one, the embedded default",
    },
    {
      name: "listen",
      type: "string",
      configEnv: "BOOTSEAL_LISTEN",
      value: "HOST:PORT",
      help: "the address to listen on",
    },
    {
      name: "data-dir",
      type: "string",
      configEnv: "BOOTSEAL_DATA_DIR",
      value: "DIR",
      help: "where the embedded default keeps its store, keys and audit log (./data)",
    },
    {
      name: "store",
      type: "string",
      configEnv: "BOOTSEAL_STORE",
      value: "URL",
      help: `the object store (${storeUrlExamples().join(", ")})`,
    },
    {
      name: "log-level",
      type: "string",
      configEnv: "BOOTSEAL_LOG_LEVEL",
      value: "LEVEL",
      help: "fatal, error, warn, info, debug, trace or silent",
    },
  ],
  notes: [
    "Settings: flags, then BOOTSEAL_* variables, then the config file (docs/configuration.md).",
    "SIGTERM or SIGINT: no new connections, requests in flight finish, held status reports are written, the audit log is closed, then exit 0 (forced 2 s after that if a client library still holds a socket).",
  ],
} as const satisfies CommandSpec;

/**
 * Where the executables for the user-data stubs are looked for, and which are there: an npm
 * install has none (the package carries no executables), and this says so at start.
 */
async function artifactsLine(dir: string): Promise<string> {
  const found = await findArtifacts(dir);
  if (found.length > 0) return `${dir} (${found.map((a) => a.file).join(", ")})`;
  return `${dir}: no executables, so no user-data stubs without fetcherArtifact (build them with \`npm run build:sea\` in a bootseal checkout and copy them here, or set artifacts.dir: docs/releases.md)`;
}

/**
 * Configuration, lowest precedence first: the embedded default (no --config), the config
 * file, BOOTSEAL_* variables, flags. The embedded default fills only what is still unset.
 */
export const serveCommand: Command = {
  spec,
  async run(args, io) {
    const { values } = parseFlags(spec, args, io.env);
    const configFile = values.config;
    const merged = () => {
      const raw = applyEnv(configFile ? readServiceConfigFile(resolve(io.cwd, configFile)) : {}, io.env);
      if (values.listen !== undefined) {
        parseListen(values.listen);
        setConfigPath(raw, ["listen"], values.listen);
      }
      if (values.store !== undefined) setConfigPath(raw, ["store"], values.store);
      if (values["data-dir"] !== undefined) setConfigPath(raw, ["dataDir"], values["data-dir"]);
      if (values["log-level"] !== undefined) setConfigPath(raw, ["logLevel"], values["log-level"]);
      return raw;
    };
    const raw = merged();

    // Nothing is created (./data, its keys) before the address is known to be bindable.
    const listen = parseListenAddress(String(raw.listen ?? schemaDefault(["listen"])), "listen");
    await checkListen(listen.host, listen.port);

    let embedded: EmbeddedDefault | undefined;
    if (!configFile) {
      const dataDir = resolve(io.cwd, typeof raw.dataDir === "string" ? raw.dataDir : "./data");
      embedded = await prepareEmbeddedDefault(dataDir);
      raw.store ??= embedded.storeUrl;
      raw.creation_rules ??= [{ age: embedded.ageRecipient }];
      raw.controllers ??= [
        { name: "embedded", tokenSha256: embedded.controllerTokenSha256, scopes: [...SCOPES] },
      ];
      const token = (raw.bootstrapToken ?? {}) as Record<string, unknown>;
      raw.bootstrapToken = {
        ...token,
        derivationKeyFile: token.derivationKeyFile ?? embedded.derivationKeyFile,
      };
      const audit = (raw.audit ?? {}) as Record<string, unknown>;
      raw.audit = { ...audit, path: audit.path ?? join(dataDir, "audit.log") };
    }
    const config = validateServiceConfig(raw, io.cwd);
    // The controller credentials reload from the same sources (SIGHUP, file changes).
    const reload = configFile
      ? { file: resolve(io.cwd, configFile), load: () => validateServiceConfig(merged(), io.cwd) }
      : undefined;
    const server = await startServer(config, reload ? { reload } : {});
    closeOnSignals(server);
    const lines = [
      `bootseal listening on ${server.url}`,
      `  store:            ${config.store}`,
      `  audit log:        ${config.audit.path === "-" ? "standard error" : config.audit.path}`,
      `  artifacts:        ${await artifactsLine(config.artifacts.dir)}`,
    ];
    if (embedded) {
      lines.push(
        `  age recipient:    ${embedded.ageRecipient}`,
        `  age identity:     ${embedded.ageKeyFile}`,
        `  controller token: ${embedded.controllerTokenFile}`,
        `  token key:        ${embedded.derivationKeyFile}`,
      );
    } else {
      lines.push(`  controllers:      ${config.controllers.map((c) => c.name).join(", ")}`);
    }
    // Standard output is the JSON log stream (access and app log): the banner is for people.
    io.stderr.write(`${lines.join("\n")}\n`);
    if (server.plaintextWarning) io.stderr.write(`WARNING: ${server.plaintextWarning}\n`);
    // Keep running until a signal closes the server.
    await new Promise<never>(() => {});
    return 0;
  },
};
