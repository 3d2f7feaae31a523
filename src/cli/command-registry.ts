/**
 * The command table: every subcommand's name and a lazy loader of its file in ./commands
 * (one file each), so `bootseal decrypt` never loads Fastify or the cloud SDKs. main.ts
 * dispatches through it; `--help`, `completion` and docs/cli.md (scripts/cli-docs.ts) list it.
 */
import { BootsealError } from "../errors.ts";
import type { Command, CommandEntry } from "./command.ts";

export const COMMANDS: readonly CommandEntry[] = [
  {
    name: "serve",
    load: async () => (await import("./commands/serve.ts")).serveCommand,
  },
  {
    name: "controller",
    load: async () => (await import("./commands/controller.ts")).controllerCommand,
  },
  {
    name: "encrypt",
    load: async () => (await import("./commands/encrypt.ts")).encryptCommand,
  },
  {
    name: "decrypt",
    load: async () => (await import("./commands/decrypt.ts")).decryptCommand,
  },
  {
    name: "rotate",
    load: async () => (await import("./commands/rotate.ts")).rotateCommand,
  },
  {
    name: "updatekeys",
    load: async () => (await import("./commands/updatekeys.ts")).updatekeysCommand,
  },
  {
    name: "keyservice",
    load: async () => (await import("./commands/keyservice.ts")).keyserviceCommand,
  },
  {
    name: "exec-env",
    load: async () => (await import("./commands/exec-env.ts")).execEnvCommand,
  },
  {
    name: "exec-file",
    load: async () => (await import("./commands/exec-file.ts")).execFileCommand,
  },
  {
    name: "edit",
    load: async () => (await import("./commands/edit.ts")).editCommand,
  },
  {
    name: "set",
    load: async () => (await import("./commands/set.ts")).setCommand,
  },
  {
    name: "unset",
    load: async () => (await import("./commands/unset.ts")).unsetCommand,
  },
  {
    name: "filestatus",
    load: async () => (await import("./commands/filestatus.ts")).filestatusCommand,
  },
  {
    name: "groups",
    load: async () => (await import("./commands/groups.ts")).groupsCommand,
  },
  {
    name: "completion",
    load: async () => (await import("./commands/completion.ts")).completionCommand(loadAllCommands),
  },
  {
    name: "fetch",
    load: async () => (await import("./commands/fetch.ts")).fetchCommand,
  },
  {
    name: "sign-artifact",
    load: async () => (await import("./commands/sign-artifact.ts")).signArtifactCommand,
  },
  {
    name: "verify-artifact",
    load: async () => (await import("./commands/verify-artifact.ts")).verifyArtifactCommand,
  },
  {
    name: "publish",
    load: async () => (await import("./commands/publish.ts")).publishCommand,
  },
  {
    name: "status",
    load: async () => (await import("./commands/status.ts")).statusCommand,
  },
  {
    name: "check",
    load: async () => (await import("./commands/check.ts")).checkCommand,
  },
  {
    name: "userdata",
    load: async () => (await import("./commands/userdata.ts")).userdataCommand,
  },
];

export const COMMAND_NAMES: readonly string[] = COMMANDS.map((c) => c.name);

/** Every command, in table order: loads them all (only `--help`, `completion` and the docs need that). */
export async function loadAllCommands(): Promise<Command[]> {
  return Promise.all(COMMANDS.map((c) => c.load()));
}

/** The command named `name` (the legacy forms dispatch through it). */
export async function loadCommand(name: string): Promise<Command> {
  const entry = COMMANDS.find((c) => c.name === name);
  if (!entry) throw new BootsealError("INTERNAL", `no command ${name}`);
  return entry.load();
}
