import { BootsealError } from "../../errors.ts";
import { writeFileAtomic } from "../../files/atomic-write.ts";
import { parseMachineId } from "../../machine/machine-id.ts";
import type { Command } from "../command.ts";
import { CLIENT_FLAGS } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { call, clientSettings, serviceUrl } from "../service-client.ts";

const FORMATS = ["cloud-init", "ignition", "powershell"] as const;

const spec = {
  name: "userdata",
  summary:
    "get a machine's user-data stub (cloud-init, ignition, powershell); it carries a fresh bootstrap token",
  flags: [
    ...CLIENT_FLAGS,
    { name: "machine", type: "string", value: "NS/NAME", required: true, help: "the machine" },
    {
      name: "format",
      type: "string",
      value: FORMATS.join("|"),
      default: "cloud-init",
      help: "the kind of stub",
    },
    {
      name: "output",
      type: "string",
      value: "FILE",
      help: "write the stub to this file (0600) instead of standard output",
    },
  ],
  notes: ["The stub's new bootstrap token replaces the machine's previous one, which stops working."],
} as const satisfies CommandSpec;

export const userdataCommand: Command = {
  spec,
  async run(args, io) {
    const { values } = parseFlags(spec, args, io.env);
    const format = values.format;
    if (!(FORMATS as readonly string[]).includes(format))
      throw new BootsealError("USAGE", `--format must be one of ${FORMATS.join(", ")}`);
    const m = parseMachineId(values.machine as string);
    const settings = await clientSettings(values, io, "userdata");
    const url = serviceUrl(settings, `/v1/machines/${m.namespace}/${m.name}/userdata`, { format });
    const res = await call(settings, "GET", url);
    // The stub holds a bootstrap token: a file gets 0600.
    if (values.output !== undefined) await writeFileAtomic(values.output, res.body, { mode: 0o600 });
    else io.stdout.write(res.body);
    return 0;
  },
};
