import { objectUrlExamples, oneOf } from "../../../providers/stores/index.ts";
import { parseFlagDuration as parseDuration } from "../../duration.ts";
import type { Format } from "../../envelope/sops/codecs/codec.ts";
import { FORMATS } from "../../envelope/sops/codecs/codec.ts";
import { BootsealError } from "../../errors.ts";
import { DEFAULT_MARKER, DEFAULT_SENTINEL, runFetch } from "../../fetcher/fetch-run.ts";
import type { LoginSettings } from "../../fetcher/identity/login.ts";
import { DEFAULT_ALLOWED_ROOTS, parseAllowedRoots } from "../../fetcher/paths.ts";
import { PAYLOAD_CHOICES, type PayloadChoice } from "../../fetcher/payloads/kind.ts";
import { defaultLabeler } from "../../fetcher/selinux.ts";
import { CLOUD_AUTH_METHODS, isCloudAuthMethod } from "../../machine/identity-login.ts";
import type { Command } from "../command.ts";
import { CA_FILE_FLAG, INPUT_TYPE_FLAG, JSON_FLAG } from "../flag-groups.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { DECRYPTION_ORDER_FLAG } from "../key-flags.ts";
import { parseDecryptionOrder } from "../sops-file.ts";

const spec = {
  name: "fetch",
  summary: "first boot: fetch this machine's config, decrypt it with its own keys, write files, run, report",
  tail: "[--apply | --out FILE]",
  flags: [
    {
      name: "from",
      type: "string",
      env: "BOOTSEAL_FROM",
      value: "URL",
      required: true,
      help: "where the config is: the service, or a store object (URL below)",
    },
    {
      name: "token-file",
      type: "string",
      env: "BOOTSEAL_TOKEN_FILE",
      value: "FILE",
      help: "the bootstrap token, sent as Authorization: Bearer (file not readable by group or others)",
    },
    // Machine identity login (docs/api.md "Machine login"): one block of rows.
    {
      name: "auth",
      type: "string",
      env: "BOOTSEAL_AUTH",
      value: "METHOD",
      default: "token",
      help: "token (--token-file), or log in once per boot with the machine's cloud identity (aws-iam, gcp, azure), its SPIFFE JWT-SVID (spiffe) or its TPM (tpm; tpm2-tools, BOOTSEAL_TPM_TCTI, BOOTSEAL_TPM_EVENT_LOG)",
    },
    {
      name: "server-id",
      type: "string",
      env: "BOOTSEAL_SERVER_ID",
      value: "ID",
      help: "the service's identity in a cloud login, its machineAuth.audience (default: the origin of --from)",
    },
    {
      name: "aws-sts-region",
      type: "string",
      value: "REGION",
      help: "aws-iam: the region the STS request is signed for (default AWS_REGION, AWS_DEFAULT_REGION, us-east-1)",
    },
    {
      name: "aws-sts-endpoint",
      type: "string",
      value: "URL",
      help: "aws-iam: the STS endpoint, the service's machineAuth.aws.stsEndpoint (default AWS_ENDPOINT_URL_STS, https://sts.REGION.amazonaws.com)",
    },
    {
      name: "azure-resource",
      type: "string",
      env: "BOOTSEAL_AZURE_RESOURCE",
      value: "URI",
      help: "azure: the resource the managed-identity token is for, the service's machineAuth.azure.audience (default: the server id)",
    },
    {
      name: "spiffe-jwt-file",
      type: "string",
      env: "BOOTSEAL_SPIFFE_JWT_FILE",
      value: "FILE",
      help: "spiffe: the file holding the machine's JWT-SVID for the server id, kept fresh by its SPIFFE agent tooling; owner-readable only (default /run/bootseal/jwt-svid)",
    },
    {
      name: "machine",
      type: "string",
      value: "NS/NAME",
      help: "the machine id, for store sources whose key does not end in configs/NS/NAME",
    },
    {
      name: "out",
      type: "string",
      value: "FILE",
      help: "write the payload bytes to this file (mode 0600); the payload is raw",
    },
    {
      name: "apply",
      type: "boolean",
      help: "apply the payload (the default without --out): its kind from --payload",
    },
    {
      name: "payload",
      type: "string",
      env: "BOOTSEAL_PAYLOAD",
      value: "KIND",
      default: "auto",
      help: `the payload's kind: ${PAYLOAD_CHOICES.join(", ")} (auto: detected; --out means raw)`,
    },
    {
      name: "allow-unknown-modules",
      type: "boolean",
      help: "a cloud-config module bootseal does not apply is a warning, not an error (never silently)",
    },
    {
      name: "skip-module",
      type: "string",
      multiple: true,
      value: "NAME",
      help: "leave out a cloud-config module (a top-level key, or users_groups) with one warning line",
    },
    {
      name: "systemctl",
      type: "string",
      value: "PATH",
      default: "systemctl",
      help: "the systemctl an Ignition config's units are reloaded, enabled and started with",
    },
    {
      name: "root",
      type: "string",
      value: "DIR",
      default: "/",
      help: "resolve every written path, the marker and the sentinel under DIR, as in a chroot",
    },
    {
      name: "allowed-roots",
      type: "string",
      env: "BOOTSEAL_ALLOWED_ROOTS",
      value: "DIRS",
      default: DEFAULT_ALLOWED_ROOTS.join(","),
      help: "comma separated directories (relative to --root) files may be written below; / allows all",
    },
    {
      name: "exec",
      type: "string",
      value: "CMD",
      help: "run /bin/sh -c CMD after writing and after a cloud-config's runcmd (env gains BOOTSEAL_ROOT)",
    },
    {
      name: "exec-timeout",
      type: "string",
      value: "DUR",
      help: "SIGTERM the command's process group after DUR, SIGKILL 10 s later (default: no limit)",
    },
    {
      name: "report",
      type: "string",
      value: "URL",
      help: "where status reports go (default: the machine's status route when --from is the service)",
    },
    {
      name: "marker",
      type: "string",
      value: "PATH",
      default: DEFAULT_MARKER,
      help: "written after success; its presence makes the next run a no-op",
    },
    {
      name: "sentinel",
      type: "string",
      value: "PATH",
      default: DEFAULT_SENTINEL,
      help: 'the Cluster API bootstrap sentinel, written after a bootstrap command succeeded ("" disables it)',
    },
    {
      name: "allow-unsafe-modes",
      type: "boolean",
      help: "accept manifest modes with setuid, setgid, sticky or world-writable bits (refused by default)",
    },
    { name: "force", type: "boolean", help: "run even though the marker exists" },
    { name: "one-time", type: "boolean", help: "after success, DELETE the config on the service" },
    {
      name: "deadline",
      type: "string",
      value: "DUR",
      default: "10m",
      help: "overall time for the download, all retries included",
    },
    {
      name: "attempt-timeout",
      type: "string",
      value: "DUR",
      default: "30s",
      help: "one download attempt",
    },
    {
      name: "report-timeout",
      type: "string",
      value: "DUR",
      default: "15s",
      help: "how long the end of the run waits for undelivered reports",
    },
    CA_FILE_FLAG,
    {
      ...INPUT_TYPE_FLAG,
      help: "force the SOPS store format (yaml, json, binary, dotenv, ini); default: detected",
    },
    DECRYPTION_ORDER_FLAG,
    {
      ...JSON_FLAG,
      help: "print the result as one JSON object (outcome, files, sha256, attempts); commands' output goes to standard error",
    },
  ],
  notes: [
    `URL: ${oneOf(["https://HOST[/PREFIX]/v1/machines/NS/NAME/config", ...objectUrlExamples()])}`,
    "DUR: 500ms, 30s, 5m, 1h, or a bare number of seconds.",
  ],
} as const satisfies CommandSpec;

export const fetchCommand: Command = {
  spec,
  async run(args, io) {
    const { values } = parseFlags(spec, args, io.env);
    if (values.out !== undefined && values.apply === true) {
      throw new BootsealError("USAGE", "fetch takes one of --out FILE and --apply");
    }
    const payload = values.payload;
    if (!(PAYLOAD_CHOICES as readonly string[]).includes(payload)) {
      throw new BootsealError("USAGE", `--payload must be one of ${PAYLOAD_CHOICES.join(", ")}`);
    }
    if (values.out !== undefined && payload !== "raw" && payload !== "auto") {
      throw new BootsealError(
        "USAGE",
        "--out FILE writes the raw payload: it goes with --payload raw or auto only",
      );
    }
    if (values.out === undefined && payload === "raw") {
      throw new BootsealError("USAGE", "--payload raw needs --out FILE");
    }
    const inputType = values["input-type"];
    if (inputType !== undefined && !(FORMATS as readonly string[]).includes(inputType)) {
      throw new BootsealError("USAGE", `--input-type must be one of ${FORMATS.join(", ")}`);
    }
    if (values.report !== undefined && !/^https?:\/\//.test(values.report)) {
      throw new BootsealError("USAGE", "--report wants the http(s) URL of a status route");
    }
    const order = parseDecryptionOrder(values["decryption-order"]);
    const login = loginSettings(values);
    return runFetch(
      {
        from: values.from as string,
        payload: payload as PayloadChoice,
        allowUnknownModules: values["allow-unknown-modules"] === true,
        skipModules: values["skip-module"] ?? [],
        systemctl: values.systemctl,
        root: values.root,
        // An empty list (flag or variable) means the default, as it always has.
        allowedRoots: values["allowed-roots"]
          ? parseAllowedRoots(values["allowed-roots"])
          : DEFAULT_ALLOWED_ROOTS,
        marker: values.marker,
        sentinel: values.sentinel === "" ? null : values.sentinel,
        force: values.force === true,
        allowUnsafeModes: values["allow-unsafe-modes"] === true,
        oneTime: values["one-time"] === true,
        deadlineMs: parseDuration(values.deadline, "deadline"),
        attemptTimeoutMs: parseDuration(values["attempt-timeout"], "attempt-timeout"),
        reportTimeoutMs: parseDuration(values["report-timeout"], "report-timeout"),
        machine: values.machine,
        tokenFile: values["token-file"],
        login,
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
        json: values.json === true,
      },
      { io, labeler: defaultLabeler() },
    );
  },
};

/** --auth and its settings; undefined for a bootstrap token (the default). */
function loginSettings(values: {
  readonly auth: string;
  readonly "token-file"?: string | undefined;
  readonly "server-id"?: string | undefined;
  readonly "aws-sts-region"?: string | undefined;
  readonly "aws-sts-endpoint"?: string | undefined;
  readonly "azure-resource"?: string | undefined;
  readonly "spiffe-jwt-file"?: string | undefined;
}): LoginSettings | undefined {
  const method = values.auth;
  if (method === "token" || method === "") return undefined;
  if (!isCloudAuthMethod(method)) {
    throw new BootsealError("USAGE", `--auth must be one of token, ${CLOUD_AUTH_METHODS.join(", ")}`);
  }
  if (values["token-file"] !== undefined) {
    throw new BootsealError("USAGE", `--auth ${method} logs in for its token: leave out --token-file`);
  }
  return {
    method,
    serverId: values["server-id"],
    aws: { region: values["aws-sts-region"], endpoint: values["aws-sts-endpoint"] },
    azure: { resource: values["azure-resource"] },
    spiffe: { jwtFile: values["spiffe-jwt-file"] },
  };
}
