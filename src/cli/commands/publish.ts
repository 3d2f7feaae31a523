/**
 * publish: two programs share the name. sops's `publish FILE` (../sops-publish/) unless a
 * flag of bootseal's service client is given: that client (`publish --server URL --machine
 * NS/NAME FILE`) always needs --machine, and none of its flags is a sops publish flag, so
 * every existing call keeps its meaning (docs/cli.md "publish", docs/compatibility.md).
 */
import { BootsealError } from "../../errors.ts";
import { writeFileAtomic } from "../../files/atomic-write.ts";
import { parseMachineId } from "../../machine/machine-id.ts";
import type { Command } from "../command.ts";
import { readInput } from "../file-io.ts";
import { CLIENT_FLAGS, JSON_FLAG } from "../flag-groups.ts";
import { type CommandSpec, type Flag, parseFlags } from "../flags.ts";
import { call, clientSettings, serviceUrl } from "../service-client.ts";
import { runSopsPublish, SOPS_PUBLISH_FLAGS } from "../sops-publish/command.ts";

/** A SOPS document already: JSON or YAML with a top-level `sops` key holding a `mac`. */
function encryptedType(bytes: Uint8Array): string | null {
  const text = new TextDecoder().decode(bytes.subarray(0, 1 << 20));
  if (/^\s*\{/.test(text))
    return /"sops"\s*:\s*\{/.test(text) && /"mac"\s*:/.test(text) ? "application/sops+json" : null;
  return /^sops:\s*$/m.test(text) && /^\s+mac:/m.test(text) ? "application/sops+yaml" : null;
}

/** The human answer: what was stored, the token (or where it went) and its expiry. */
function summary(
  m: { namespace: string; name: string },
  answer: Record<string, unknown>,
  out?: string,
): string {
  const lines = [`published ${m.namespace}/${m.name}: version ${answer.version}, etag ${answer.etag}`];
  const expiry = typeof answer.tokenExpiresAt === "string" ? ` (expires ${answer.tokenExpiresAt})` : "";
  if (out !== undefined && typeof answer.bootstrapToken === "string")
    lines.push(`bootstrap token written to ${out}${expiry}`);
  else if (typeof answer.bootstrapToken === "string")
    lines.push(`bootstrap token: ${answer.bootstrapToken}${expiry}`);
  return `${lines.join("\n")}\n`;
}

const serviceSpec = {
  name: "publish",
  summary: "publish a machine's config to the service; prints its version, etag and bootstrap token",
  operands: "FILE",
  flags: [
    ...CLIENT_FLAGS,
    {
      name: "machine",
      type: "string",
      value: "NS/NAME",
      required: true,
      help: "the machine the config is for",
    },
    {
      name: "format",
      type: "string",
      value: "yaml|json",
      help: "parse the plaintext payload as YAML or JSON so its keys stay visible (default: binary)",
    },
    {
      name: "if-none-match",
      type: "boolean",
      help: "publish only if the machine has no config yet",
    },
    {
      name: "if-match",
      type: "string",
      value: "ETAG",
      help: "publish only if the current config has this etag",
    },
    {
      name: "bootstrap-token-out",
      type: "string",
      value: "FILE",
      help: "write the bootstrap token to this file (0600) instead of printing it",
    },
    { ...JSON_FLAG, help: "print the service's JSON answer (the token as with the summary)" },
  ],
} as const satisfies CommandSpec;

/** The service client's flags: any of them on the command line selects the service form. */
const SERVICE_FLAG_NAMES = new Set<string>(serviceSpec.flags.map((f) => f.name));

function isServiceForm(args: readonly string[]): boolean {
  const end = args.indexOf("--");
  return (end === -1 ? args : args.slice(0, end)).some(
    (a) => a.startsWith("--") && SERVICE_FLAG_NAMES.has(a.slice(2).split("=")[0] as string),
  );
}

/** What `--help` and docs/cli.md show: both forms, every flag (none required in the other form). */
const spec: CommandSpec = {
  name: "publish",
  summary:
    "publish a SOPS document to its .sops.yaml destination_rules (sops publish), or with --server/--machine a machine's config to the service",
  operands: "FILE",
  forms: ["--server URL --machine NS/NAME [flags] FILE"],
  flags: [...SOPS_PUBLISH_FLAGS, ...serviceSpec.flags.map((f: Flag) => ({ ...f, required: false }))],
  notes: [
    "Without a service flag (--server, --machine, --format, …) this is sops's publish: FILE (or, with --recursive, every file under it) is sent to the S3, GCS or Vault/OpenBao KV destination of its .sops.yaml destination rule.",
    "With one, this is the service client: FILE is the plaintext payload (encrypted by the service), or a SOPS document (sent as is); --server and --machine are required.",
  ],
};

export const publishCommand: Command = {
  spec,
  async run(args, io) {
    if (!isServiceForm(args)) return runSopsPublish(args, io);
    const { values, positionals } = parseFlags(serviceSpec, args, io.env);
    if (positionals.length > 1) throw new BootsealError("USAGE", "publish takes one file");
    const m = parseMachineId(values.machine as string);
    if (values.format !== undefined && values.format !== "yaml" && values.format !== "json")
      throw new BootsealError("USAGE", "--format must be yaml or json");
    if (values["if-none-match"] && values["if-match"] !== undefined)
      throw new BootsealError("USAGE", "--if-none-match and --if-match exclude each other");
    const settings = await clientSettings(values, io, "publish");
    const body = await readInput(positionals[0], io);
    const headers: Record<string, string> = {
      "content-type": encryptedType(body) ?? "application/octet-stream",
    };
    if (values["if-none-match"]) headers["if-none-match"] = "*";
    if (values["if-match"] !== undefined) headers["if-match"] = values["if-match"];
    const url = serviceUrl(
      settings,
      `/v1/machines/${m.namespace}/${m.name}/config`,
      values.format ? { format: values.format } : undefined,
    );
    const res = await call(settings, "PUT", url, { body, headers });
    const answer = JSON.parse(new TextDecoder().decode(res.body)) as Record<string, unknown>;
    const out = values["bootstrap-token-out"];
    if (out !== undefined && typeof answer.bootstrapToken === "string") {
      await writeFileAtomic(out, new TextEncoder().encode(`${answer.bootstrapToken}\n`), { mode: 0o600 });
      answer.bootstrapToken = `(written to ${out})`;
    }
    io.stdout.write(values.json ? `${JSON.stringify(answer, null, 2)}\n` : summary(m, answer, out));
    return 0;
  },
};
