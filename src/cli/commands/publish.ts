import { parseArgs } from "node:util";
import { BootsealError } from "../../errors.ts";
import { writeFileAtomic } from "../../files/atomic-write.ts";
import { parseMachineId } from "../../machine/machine-id.ts";
import type { Command } from "../command.ts";
import { readInput } from "../file-io.ts";
import { CLIENT_OPTIONS, call, clientSettings, serviceUrl } from "../service-client.ts";

/** A SOPS document already: JSON or YAML with a top-level `sops` key holding a `mac`. */
function encryptedType(bytes: Uint8Array): string | null {
  const text = new TextDecoder().decode(bytes.subarray(0, 1 << 20));
  if (/^\s*\{/.test(text))
    return /"sops"\s*:\s*\{/.test(text) && /"mac"\s*:/.test(text) ? "application/sops+json" : null;
  return /^sops:\s*$/m.test(text) && /^\s+mac:/m.test(text) ? "application/sops+yaml" : null;
}

export const publishCommand: Command = {
  name: "publish",
  summary:
    "publish a machine's bootstrap config to the service (prints version, etag and its bootstrap token)",
  usage:
    "bootseal publish --server URL --machine NS/NAME [--token-file F] [--ca-file F] [--format yaml|json]\n" +
    "                 [--if-none-match | --if-match ETAG] [--bootstrap-token-out F] FILE\n" +
    "  FILE: the plaintext payload (encrypted by the service), or a SOPS document (sent as is)",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...CLIENT_OPTIONS,
        machine: { type: "string" },
        format: { type: "string" },
        "if-none-match": { type: "boolean" },
        "if-match": { type: "string" },
        "bootstrap-token-out": { type: "string" },
      },
    });
    if (positionals.length > 1) throw new BootsealError("USAGE", "publish takes one file");
    if (values.machine === undefined) throw new BootsealError("USAGE", "publish needs --machine NS/NAME");
    const m = parseMachineId(values.machine);
    if (values.format !== undefined && values.format !== "yaml" && values.format !== "json")
      throw new BootsealError("USAGE", "--format must be yaml or json");
    if (values["if-none-match"] && values["if-match"] !== undefined)
      throw new BootsealError("USAGE", "--if-none-match and --if-match exclude each other");
    const settings = await clientSettings(values, io.env, (l) => io.stderr.write(`bootseal publish: ${l}\n`));
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
    io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  },
};
