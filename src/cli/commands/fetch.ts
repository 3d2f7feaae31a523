import { parseArgs } from "node:util";
import { parseFlagDuration as parseDuration } from "../../duration.ts";
import type { Format } from "../../envelope/sops/codecs/codec.ts";
import { FORMATS } from "../../envelope/sops/codecs/codec.ts";
import { BootsealError } from "../../errors.ts";
import { DEFAULT_MARKER, DEFAULT_SENTINEL, runFetch } from "../../fetcher/fetch-run.ts";
import { DEFAULT_ALLOWED_ROOTS, parseAllowedRoots } from "../../fetcher/paths.ts";
import { defaultLabeler } from "../../fetcher/selinux.ts";
import type { Command } from "../command.ts";
import { parseDecryptionOrder } from "../sops-file.ts";

export const fetchCommand: Command = {
  name: "fetch",
  summary:
    "first boot: download this machine's config, decrypt it with its own keys, write files, run, report",
  usage:
    "bootseal fetch --from URL [--token-file F] [--machine NS/NAME] (--out FILE | --apply)\n" +
    "               [--root DIR] [--allowed-roots /etc,/var/lib,/run,/opt] [--exec CMD] [--exec-timeout DUR]\n" +
    "               [--report URL] [--marker PATH] [--sentinel PATH] [--force] [--one-time]\n" +
    "               [--deadline DUR] [--attempt-timeout DUR] [--report-timeout DUR] [--ca-file F]\n" +
    "               [--input-type T] [--decryption-order L]\n" +
    "  URL: https://HOST/v1/machines/NS/NAME/config, s3://BUCKET/KEY, gs://BUCKET/KEY or file:///PATH",
  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: false,
      options: {
        from: { type: "string" },
        "token-file": { type: "string" },
        machine: { type: "string" },
        out: { type: "string" },
        apply: { type: "boolean" },
        root: { type: "string" },
        "allowed-roots": { type: "string" },
        exec: { type: "string" },
        "exec-timeout": { type: "string" },
        report: { type: "string" },
        marker: { type: "string" },
        sentinel: { type: "string" },
        force: { type: "boolean" },
        "one-time": { type: "boolean" },
        deadline: { type: "string" },
        "attempt-timeout": { type: "string" },
        "report-timeout": { type: "string" },
        "ca-file": { type: "string" },
        "input-type": { type: "string" },
        "decryption-order": { type: "string" },
      },
    });
    if (positionals.length > 0) throw new BootsealError("USAGE", "fetch takes no positional arguments");
    const from = values.from ?? io.env.BOOTSEAL_FROM;
    if (!from) throw new BootsealError("USAGE", "fetch needs --from");
    if ((values.out === undefined) === (values.apply !== true)) {
      throw new BootsealError("USAGE", "fetch needs exactly one of --out FILE and --apply");
    }
    const inputType = values["input-type"];
    if (inputType !== undefined && !(FORMATS as readonly string[]).includes(inputType)) {
      throw new BootsealError("USAGE", `--input-type must be one of ${FORMATS.join(", ")}`);
    }
    if (values.report !== undefined && !/^https?:\/\//.test(values.report)) {
      throw new BootsealError("USAGE", "--report wants the http(s) URL of a status route");
    }
    const order = parseDecryptionOrder(values["decryption-order"] ?? io.env.SOPS_DECRYPTION_ORDER);
    const tokenFile = values["token-file"] ?? io.env.BOOTSEAL_TOKEN_FILE;
    return runFetch(
      {
        from,
        apply: values.apply === true,
        root: values.root ?? "/",
        allowedRoots: values["allowed-roots"]
          ? parseAllowedRoots(values["allowed-roots"])
          : io.env.BOOTSEAL_ALLOWED_ROOTS
            ? parseAllowedRoots(io.env.BOOTSEAL_ALLOWED_ROOTS)
            : DEFAULT_ALLOWED_ROOTS,
        marker: values.marker ?? DEFAULT_MARKER,
        sentinel: values.sentinel === "" ? null : (values.sentinel ?? DEFAULT_SENTINEL),
        force: values.force === true,
        oneTime: values["one-time"] === true,
        deadlineMs: parseDuration(values.deadline ?? "10m", "deadline"),
        attemptTimeoutMs: parseDuration(values["attempt-timeout"] ?? "30s", "attempt-timeout"),
        reportTimeoutMs: parseDuration(values["report-timeout"] ?? "15s", "report-timeout"),
        ...(values.machine !== undefined ? { machine: values.machine } : {}),
        ...(tokenFile !== undefined ? { tokenFile } : {}),
        ...(values.out !== undefined ? { out: values.out } : {}),
        ...(values.exec !== undefined ? { exec: values.exec } : {}),
        ...(values["exec-timeout"] !== undefined
          ? { execTimeoutMs: parseDuration(values["exec-timeout"], "exec-timeout") }
          : {}),
        ...(values.report !== undefined ? { report: values.report } : {}),
        ...(values["ca-file"] !== undefined ? { caFile: values["ca-file"] } : {}),
        ...(inputType !== undefined ? { inputType: inputType as Format } : {}),
        ...(order ? { order } : {}),
      },
      { io, labeler: defaultLabeler() },
    );
  },
};
