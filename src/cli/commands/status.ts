import { BootsealError } from "../../errors.ts";
import { parseMachineId } from "../../machine/machine-id.ts";
import type { Command } from "../command.ts";
import { CLIENT_FLAGS } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { call, clientSettings, serviceUrl } from "../service-client.ts";

const spec = {
  name: "status",
  summary: "show a machine's bootstrap phase and history, or list machines with their phase",
  operands: "[NS/NAME]",
  flags: [
    ...CLIENT_FLAGS,
    { name: "namespace", type: "string", value: "NS", help: "list only the machines of this namespace" },
    { name: "phase", type: "string", value: "PHASE", help: "list only the machines in this phase" },
  ],
} as const satisfies CommandSpec;

export const statusCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    if (positionals.length > 1) throw new BootsealError("USAGE", "status takes at most one NS/NAME");
    const settings = await clientSettings(values, io.env, (l) => io.stderr.write(`bootseal status: ${l}\n`));
    const target = positionals[0];
    let url: URL;
    if (target !== undefined) {
      const m = parseMachineId(target, "NS/NAME");
      url = serviceUrl(settings, `/v1/machines/${m.namespace}/${m.name}/status`);
    } else {
      const query: Record<string, string> = {};
      if (values.namespace) query.namespace = values.namespace;
      if (values.phase) query.phase = values.phase;
      url = serviceUrl(settings, "/v1/machines", query);
    }
    const res = await call(settings, "GET", url);
    io.stdout.write(`${JSON.stringify(JSON.parse(new TextDecoder().decode(res.body)), null, 2)}\n`);
    return 0;
  },
};
