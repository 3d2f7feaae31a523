import { BootsealError } from "../../errors.ts";
import { parseMachineId } from "../../machine/machine-id.ts";
import type { Command } from "../command.ts";
import { CLIENT_FLAGS, JSON_FLAG } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { type ClientSettings, call, clientSettings, serviceUrl } from "../service-client.ts";
import { cell, shortTime, table } from "../table.ts";

const spec = {
  name: "status",
  summary: "show a machine's bootstrap phase and history, or list machines with their phase",
  operands: "[NS/NAME]",
  flags: [
    ...CLIENT_FLAGS,
    { name: "namespace", type: "string", value: "NS", help: "list only the machines of this namespace" },
    { name: "phase", type: "string", value: "PHASE", help: "list only the machines in this phase" },
    { ...JSON_FLAG, help: "print the service's JSON answer (the list: its first page) instead of a table" },
  ],
  notes: [
    "Without --json: a table of machines (all pages), or one machine's phase, config and history",
    "(time, phase, by, version, attempt, exit code, message; command output only with --json).",
  ],
} as const satisfies CommandSpec;

type Json = Record<string, unknown>;

async function getJson(settings: ClientSettings, url: URL): Promise<Json> {
  const res = await call(settings, "GET", url);
  return JSON.parse(new TextDecoder().decode(res.body)) as Json;
}

function machineTable(items: readonly Json[]): string {
  if (items.length === 0) return "no machines\n";
  return table(
    ["MACHINE", "PHASE", "VERSION", "UPDATED", "CONFIG"],
    items.map((m) => [
      `${cell(m.namespace)}/${cell(m.name)}`,
      cell(m.phase),
      cell(m.version),
      shortTime(m.updatedAt),
      m.published === false ? "deleted" : "stored",
    ]),
  );
}

function machineReport(record: Json): string {
  const config = record.config as Json | null | undefined;
  const head = [
    `machine  ${cell(record.namespace)}/${cell(record.name)}`,
    `phase    ${cell(record.phase)} (version ${cell(record.version)}, updated ${shortTime(record.updatedAt)})`,
    `config   ${
      config
        ? `etag ${cell(config.etag)}, ${cell(config.format)}, published ${shortTime(config.publishedAt)}`
        : "none (deleted)"
    }`,
  ];
  const history = Array.isArray(record.history) ? (record.history as Json[]) : [];
  const rows = history.map((h) => [
    shortTime(h.at),
    cell(h.phase),
    cell(h.by, 30),
    cell(h.version),
    cell(h.attempt),
    cell(h.exitCode),
    cell(h.message, 80),
  ]);
  const body = history.length
    ? table(["AT", "PHASE", "BY", "VERSION", "ATTEMPT", "EXIT", "MESSAGE"], rows)
    : "no history\n";
  return `${head.join("\n")}\n\n${body}`;
}

export const statusCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    if (positionals.length > 1) throw new BootsealError("USAGE", "status takes at most one NS/NAME");
    const settings = await clientSettings(values, io, "status");
    const target = positionals[0];
    if (target !== undefined) {
      const m = parseMachineId(target, "NS/NAME");
      const record = await getJson(
        settings,
        serviceUrl(settings, `/v1/machines/${m.namespace}/${m.name}/status`),
      );
      io.stdout.write(values.json ? `${JSON.stringify(record, null, 2)}\n` : machineReport(record));
      return 0;
    }
    const query: Record<string, string> = {};
    if (values.namespace) query.namespace = values.namespace;
    if (values.phase) query.phase = values.phase;
    if (values.json) {
      const page = await getJson(settings, serviceUrl(settings, "/v1/machines", query));
      io.stdout.write(`${JSON.stringify(page, null, 2)}\n`);
      return 0;
    }
    // The table lists every page (the service's pages hold up to 1000 machines).
    const items: Json[] = [];
    for (let after: string | undefined; ; ) {
      const page = await getJson(
        settings,
        serviceUrl(settings, "/v1/machines", { ...query, limit: "1000", ...(after ? { after } : {}) }),
      );
      if (Array.isArray(page.items)) items.push(...(page.items as Json[]));
      if (typeof page.next !== "string" || page.next === after) break;
      after = page.next;
    }
    io.stdout.write(machineTable(items));
    return 0;
  },
};
