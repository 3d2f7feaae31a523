/**
 * `bootseal check`: what a first boot needs, checked and explained line by line (in the spirit
 * of `flux check`): through the service (--server) and in its configuration file (--config).
 * Exits 0 when nothing failed (warnings allowed), CHECK_FAILED (50) when a check failed.
 */
import { readFile } from "node:fs/promises";
import { loadPublicKey } from "../../artifact/signing.ts";
import { BootsealError } from "../../errors.ts";
import { configChecks } from "../check/config-checks.ts";
import { type CheckLine, counts, jsonReport, summaryLine, textReport } from "../check/report.ts";
import { serviceChecks } from "../check/service-checks.ts";
import type { Command } from "../command.ts";
import { CLIENT_FLAGS, JSON_FLAG } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { clientSettings } from "../service-client.ts";

const [SERVER_FLAG, ...OTHER_CLIENT_FLAGS] = CLIENT_FLAGS;

const spec = {
  name: "check",
  summary: "check a deployment for what a first boot needs, line by line; exits 50 when a check fails",
  operands: "",
  flags: [
    { ...SERVER_FLAG, required: false, help: "the service to check (http or https); with --config or alone" },
    ...OTHER_CLIENT_FLAGS.map((f) =>
      f.name === "deadline"
        ? { ...f, default: "10s", help: "each request's time limit (one attempt, no retries)" }
        : f,
    ),
    {
      name: "config",
      type: "string",
      value: "FILE",
      help: "the service's bootseal.yaml: checked as serve reads it, its keys tried with this machine's credentials",
    },
    {
      name: "machine-url",
      type: "string",
      value: "URL",
      help: "the service's URL as machines reach it (default: its configured publicUrl)",
    },
    {
      name: "artifact-public-key",
      type: "string",
      value: "PUB.pem",
      help: "the Ed25519 key the served executables must be signed with (default: the service's own)",
    },
    { ...JSON_FLAG, help: "print the checks as one JSON object (a failure also exits 50)" },
  ],
  notes: [
    "Each line: a mark, the check's name, what it found. Marks are ✓ ✗ ! on a terminal, ok FAIL warn",
    "otherwise. Warnings (!) do not fail the run. docs/cli.md lists every check.",
  ],
} as const satisfies CommandSpec;

function urlFlag(text: string, flag: string): URL {
  try {
    const url = new URL(text);
    if (url.protocol === "http:" || url.protocol === "https:") return url;
  } catch {
    // reported below
  }
  throw new BootsealError("USAGE", `--${flag} must be an http(s) URL`);
}

export const checkCommand: Command = {
  spec,
  async run(args, io) {
    const { values, positionals } = parseFlags(spec, args, io.env);
    if (positionals.length > 0) throw new BootsealError("USAGE", "check takes no operands");
    if (values.server === undefined && values.config === undefined)
      throw new BootsealError(
        "USAGE",
        "check needs --server URL (or BOOTSEAL_SERVER), --config FILE, or both",
      );
    const machineUrl =
      values["machine-url"] === undefined ? undefined : urlFlag(values["machine-url"], "machine-url");
    const keyFile = values["artifact-public-key"];
    const artifactKey =
      keyFile === undefined
        ? undefined
        : loadPublicKey(
            await readFile(keyFile).catch((err: unknown) => {
              throw new BootsealError("USAGE", `cannot read --artifact-public-key ${keyFile}`, {
                cause: err,
              });
            }),
            keyFile,
          );
    const lines: CheckLine[] = [];
    if (values.server !== undefined) {
      const settings = await clientSettings(values, io, "check");
      lines.push(...(await serviceChecks({ settings, machineUrl, artifactKey })));
    }
    if (values.config !== undefined) lines.push(...(await configChecks(values.config, io)));
    const terminal = (io.stdout as { isTTY?: boolean }).isTTY === true;
    io.stdout.write(values.json ? jsonReport(lines) : textReport(lines, terminal));
    if (counts(lines).fail > 0) throw new BootsealError("CHECK_FAILED", summaryLine(lines));
    return 0;
  },
};
