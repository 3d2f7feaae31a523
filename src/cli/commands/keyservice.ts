/**
 * keyservice (sops keyservice): serve sops's gRPC KeyService with the keys this process
 * holds (its environment: SOPS_AGE_KEY_FILE, the GnuPG home, cloud credentials), so that
 * `sops --keyservice` and `bootseal --keyservice` elsewhere can wrap and unwrap data keys
 * with them. Runs until SIGTERM or SIGINT, then finishes the calls in flight.
 */
import { createInterface } from "node:readline";
import { startKeyService } from "../../../providers/keys/keyservice-server.ts";
import { newKeyFromEntry } from "../../config/rule-keys.ts";
import type { MasterKey } from "../../envelope/sops/master-key.ts";
import type { CliIo, Command } from "../command.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { providerDeps } from "../sops-file.ts";

const spec = {
  name: "keyservice",
  summary: "serve the sops key service (gRPC) with the keys this process holds",
  flags: [
    {
      name: "network",
      type: "string",
      value: "NET",
      default: "tcp",
      help: "network to listen on, e.g. 'tcp' or 'unix' (--net is the same)",
    },
    { name: "net", type: "string", value: "NET", help: "the same as --network" },
    {
      name: "address",
      type: "string",
      value: "ADDR",
      default: "127.0.0.1:5000",
      help: "address to listen on, e.g. '127.0.0.1:5000' or '/tmp/sops.sock' (--addr is the same)",
    },
    { name: "addr", type: "string", value: "ADDR", help: "the same as --address" },
    { name: "prompt", type: "boolean", help: "Prompt user to confirm every incoming request" },
    { name: "verbose", type: "boolean", help: "Enable verbose logging output" },
  ],
  notes: [
    "Port 0 picks a free port; the address listened on is printed to standard error. No TLS and",
    "no authentication, as in sops: listen on a loopback address or a Unix socket only.",
  ],
} as const satisfies CommandSpec;

/** --prompt: one question at a time on the terminal, as sops asks (y/n). */
function prompter(io: CliIo): {
  ask(operation: string, key: MasterKey): Promise<boolean>;
  close(): void;
} {
  const lines = createInterface({ input: io.stdin, terminal: false });
  // Answers typed (or piped) before the question are kept for it.
  const buffered: string[] = [];
  const waiting: ((line: string | null) => void)[] = [];
  let closed = false;
  lines.on("line", (line) => {
    const waiter = waiting.shift();
    if (waiter) waiter(line);
    else buffered.push(line);
  });
  lines.on("close", () => {
    closed = true;
    for (const w of waiting.splice(0)) w(null);
  });
  const nextLine = (): Promise<string | null> => {
    const line = buffered.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (closed) return Promise.resolve(null);
    return new Promise((resolve) => waiting.push(resolve));
  };
  let queue: Promise<unknown> = Promise.resolve();
  const ask = (operation: string, key: MasterKey) => {
    const asked = queue.then(async () => {
      for (;;) {
        io.stdout.write(
          `\nReceived ${operation} request using ${key.kind} key ${key.id}. Respond to request? (y/n): `,
        );
        const line = await nextLine();
        if (line === null) return false;
        const reply = line.trim();
        if (reply === "y" || reply === "n") return reply === "y";
      }
    });
    queue = asked;
    return asked;
  };
  // Closed at shutdown: an open reader of standard input would keep the process alive.
  return { ask, close: () => lines.close() };
}

export const keyserviceCommand: Command = {
  spec,
  async run(args, io) {
    const { values, given } = parseFlags(spec, args, io.env);
    const deps = providerDeps(io.env);
    const log = values.verbose
      ? (line: string) => io.stderr.write(`bootseal keyservice: ${line}\n`)
      : undefined;
    const prompt = values.prompt ? prompter(io) : undefined;
    const service = await startKeyService(
      // The aliases count only when the long name was not given.
      given.has("network") ? values.network : (values.net ?? values.network),
      given.has("address") ? values.address : (values.addr ?? values.address),
      {
        // A request's key has no created_at; kinds that keep one get the time of the call.
        keyFor: (entry) => newKeyFromEntry(entry, deps),
        confirm: prompt?.ask,
        log,
      },
    );
    io.stderr.write(`bootseal keyservice: listening on ${service.url}\n`);
    const signal = await new Promise<string>((resolve) => {
      const stop = (name: string) => {
        process.off("SIGTERM", stop);
        process.off("SIGINT", stop);
        resolve(name);
      };
      process.on("SIGTERM", stop);
      process.on("SIGINT", stop);
    });
    io.stderr.write(`bootseal keyservice: caught ${signal}, shutting down\n`);
    prompt?.close();
    await service.close();
    return 0;
  },
};
