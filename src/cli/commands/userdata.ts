import { parseArgs } from "node:util";
import { BootsealError } from "../../errors.ts";
import { writeFileAtomic } from "../../files/atomic-write.ts";
import { parseMachineId } from "../../machine/machine-id.ts";
import type { Command } from "../command.ts";
import { CLIENT_OPTIONS, call, clientSettings, serviceUrl } from "../service-client.ts";

const FORMATS = ["cloud-init", "ignition", "powershell"];

export const userdataCommand: Command = {
  name: "userdata",
  summary:
    "get a machine's user-data stub (it carries a fresh bootstrap token: the previous one stops working)",
  usage:
    "bootseal userdata --server URL --machine NS/NAME --format cloud-init|ignition|powershell\n" +
    "                  [--token-file F] [--ca-file F] [--output FILE]",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: false,
      options: {
        ...CLIENT_OPTIONS,
        machine: { type: "string" },
        format: { type: "string" },
        output: { type: "string" },
      },
    });
    if (positionals.length > 0) throw new BootsealError("USAGE", "userdata takes no positional arguments");
    if (values.machine === undefined) throw new BootsealError("USAGE", "userdata needs --machine NS/NAME");
    const format = values.format ?? "cloud-init";
    if (!FORMATS.includes(format))
      throw new BootsealError("USAGE", `--format must be one of ${FORMATS.join(", ")}`);
    const m = parseMachineId(values.machine);
    const settings = await clientSettings(values, io.env, (l) =>
      io.stderr.write(`bootseal userdata: ${l}\n`),
    );
    const url = serviceUrl(settings, `/v1/machines/${m.namespace}/${m.name}/userdata`, { format });
    const res = await call(settings, "GET", url);
    // The stub holds a bootstrap token: a file gets 0600.
    if (values.output !== undefined) await writeFileAtomic(values.output, res.body, { mode: 0o600 });
    else io.stdout.write(res.body);
    return 0;
  },
};
