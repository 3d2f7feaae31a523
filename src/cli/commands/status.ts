import { parseArgs } from "node:util";
import { BootsealError } from "../../errors.ts";
import { parseMachineId } from "../../machine/machine-id.ts";
import type { Command } from "../command.ts";
import { CLIENT_OPTIONS, call, clientSettings, serviceUrl } from "../service-client.ts";

export const statusCommand: Command = {
  name: "status",
  summary: "show a machine's bootstrap phase and history, or list machines with their phase",
  usage: "bootseal status --server URL [--token-file F] [--ca-file F] [--namespace NS] [--phase P] [NS/NAME]",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: { ...CLIENT_OPTIONS, namespace: { type: "string" }, phase: { type: "string" } },
    });
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
