import type { Format } from "../../envelope/sops/codecs/codec.ts";
import { FORMATS } from "../../envelope/sops/codecs/codec.ts";
import { BootsealError } from "../../errors.ts";
import { DEFAULT_MARKER, DEFAULT_SENTINEL, runFetch } from "../../fetcher/fetch-run.ts";
import { DEFAULT_ALLOWED_ROOTS, parseAllowedRoots } from "../../fetcher/paths.ts";
import { parseDuration } from "../../fetcher/retry.ts";
import { defaultLabeler } from "../../fetcher/selinux.ts";
import type { Command } from "../command.ts";
import { DECRYPTION_ORDER_FLAG, INPUT_TYPE_FLAG } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { parseDecryptionOrder } from "../sops-file.ts";

const spec = {
  name: "fetch",
  summary: "first boot: fetch this machine's config, decrypt it with its own keys, write files, run, report",
  tail: "(--apply | --out FILE)",
  flags: [
    {
      name: "from",
      type: "string",
      env: "BOOTSEAL_FROM",
      value: "URL",
      required: true,
      help: "where the config is (see URL below)",
    },
    {
      name: "token-file",
      type: "string",
      env: "BOOTSEAL_TOKEN_FILE",
      value: "FILE",
      help: "file holding the bootstrap token (not readable by group or others)",
    },
    {
      name: "machine",
      type: "string",
      value: "NS/NAME",
      help: "this machine, when the URL does not name it (s3://, gs://, file://)",
    },
    { name: "out", type: "string", value: "FILE", help: "write the decrypted config to this file" },
    { name: "apply", type: "boolean", help: "write the config's files (a bootstrap manifest) under --root" },
    { name: "root", type: "string", value: "DIR", default: "/", help: "the directory --apply writes under" },
    {
      name: "allowed-roots",
      type: "string",
      env: "BOOTSEAL_ALLOWED_ROOTS",
      value: "DIRS",
      default: DEFAULT_ALLOWED_ROOTS.join(","),
      help: "comma separated directories (under --root) that --apply may write in",
    },
    { name: "exec", type: "string", value: "CMD", help: "run this bootstrap command after writing" },
    {
      name: "exec-timeout",
      type: "string",
      value: "DUR",
      help: "kill --exec after this long (e.g. 10m); no limit if not set",
    },
    {
      name: "report",
      type: "string",
      value: "URL",
      help: "the http(s) status route to report each phase to",
    },
    {
      name: "marker",
      type: "string",
      value: "PATH",
      default: DEFAULT_MARKER,
      help: "written after success; while it exists, fetch does nothing (unless --force)",
    },
    {
      name: "sentinel",
      type: "string",
      value: "PATH",
      default: DEFAULT_SENTINEL,
      help: "Cluster API's success file, written after success (empty: none)",
    },
    { name: "force", type: "boolean", help: "run even though the marker exists" },
    { name: "one-time", type: "boolean", help: "ask the service to retire the token after this fetch" },
    {
      name: "deadline",
      type: "string",
      value: "DUR",
      default: "10m",
      help: "give up fetching after this long, retries included",
    },
    {
      name: "attempt-timeout",
      type: "string",
      value: "DUR",
      default: "30s",
      help: "one fetch attempt's limit",
    },
    {
      name: "report-timeout",
      type: "string",
      value: "DUR",
      default: "15s",
      help: "one status report's limit",
    },
    {
      name: "ca-file",
      type: "string",
      value: "FILE",
      help: "PEM file of the CA that signed the service's certificate",
    },
    INPUT_TYPE_FLAG,
    DECRYPTION_ORDER_FLAG,
  ],
  notes: ["URL: https://HOST/v1/machines/NS/NAME/config, s3://BUCKET/KEY, gs://BUCKET/KEY or file:///PATH"],
} as const satisfies CommandSpec;

export const fetchCommand: Command = {
  spec,
  async run(args, io) {
    const { values } = parseFlags(spec, args, io.env);
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
    const order = parseDecryptionOrder(values["decryption-order"]);
    return runFetch(
      {
        from: values.from as string,
        apply: values.apply === true,
        root: values.root,
        // An empty list (flag or variable) means the default, as it always has.
        allowedRoots: values["allowed-roots"]
          ? parseAllowedRoots(values["allowed-roots"])
          : DEFAULT_ALLOWED_ROOTS,
        marker: values.marker,
        sentinel: values.sentinel === "" ? null : values.sentinel,
        force: values.force === true,
        oneTime: values["one-time"] === true,
        deadlineMs: parseDuration(values.deadline, "deadline"),
        attemptTimeoutMs: parseDuration(values["attempt-timeout"], "attempt-timeout"),
        reportTimeoutMs: parseDuration(values["report-timeout"], "report-timeout"),
        machine: values.machine,
        tokenFile: values["token-file"],
        out: values.out,
        exec: values.exec,
        execTimeoutMs:
          values["exec-timeout"] !== undefined
            ? parseDuration(values["exec-timeout"], "exec-timeout")
            : undefined,
        report: values.report,
        caFile: values["ca-file"],
        inputType: inputType as Format | undefined,
        order,
      },
      { io, labeler: defaultLabeler() },
    );
  },
};
