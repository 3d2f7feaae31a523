import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pino } from "pino";
import { parseListenAddress } from "../../config/service-config.ts";
import { runController } from "../../controller/run.ts";
import { parseFlagDuration } from "../../duration.ts";
import { BootsealError } from "../../errors.ts";
import { exitWhenIdle } from "../../exit-when-idle.ts";
import type { Command } from "../command.ts";
import { type CommandSpec, parseFlags } from "../flags.ts";
import { serverUrl } from "../service-client.ts";

const SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

const spec = {
  name: "controller",
  summary: "run the Cluster API bootstrap provider (BootsealConfig; docs/controller.md)",
  flags: [
    {
      name: "server",
      type: "string",
      env: "BOOTSEAL_SERVER",
      value: "URL",
      required: true,
      help: "the bootseal service",
    },
    {
      name: "token-file",
      type: "string",
      value: "FILE",
      help: "the controller token (read again for every request: a projected ServiceAccount token rotates); else BOOTSEAL_TOKEN",
    },
    {
      name: "ca-file",
      type: "string",
      value: "FILE",
      help: "a private CA for the service's certificate (PEM)",
    },
    {
      name: "kubeconfig",
      type: "string",
      value: "FILE",
      help: "the management cluster's kubeconfig (default: in-cluster, then KUBECONFIG or ~/.kube/config)",
    },
    {
      name: "namespace",
      type: "string",
      value: "NS",
      help: "watch this namespace only (default: every namespace)",
    },
    {
      name: "health-listen",
      type: "string",
      value: "HOST:PORT",
      default: "0.0.0.0:8081",
      help: "/healthz, /readyz and /metrics",
    },
    {
      name: "leader-elect",
      type: "boolean",
      help: "reconcile only while holding the coordination.k8s.io Lease bootseal-controller",
    },
    {
      name: "leader-election-namespace",
      type: "string",
      value: "NS",
      help: "the Lease's namespace (default: the pod's namespace from the ServiceAccount mount, else default)",
    },
    {
      name: "resync",
      type: "string",
      value: "DURATION",
      default: "10m",
      help: "requeue every BootsealConfig this often",
    },
    { name: "concurrency", type: "string", value: "N", default: "4", help: "reconciles at once" },
  ],
  notes: ["SIGTERM or SIGINT stops the watches and exits 0. Logs are JSON lines on standard error."],
} as const satisfies CommandSpec;

export const controllerCommand: Command = {
  spec,
  async run(args, io) {
    const { values } = parseFlags(spec, args, io.env);
    const server = serverUrl(values.server);
    const tokenFile = values["token-file"];
    const token = io.env.BOOTSEAL_TOKEN?.trim() || undefined;
    if (tokenFile === undefined && token === undefined)
      throw new BootsealError("USAGE", "controller needs --token-file FILE (or BOOTSEAL_TOKEN)");
    const concurrency = Number(values.concurrency);
    if (!Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > 64)
      throw new BootsealError("USAGE", "--concurrency wants an integer from 1 to 64");
    const resyncMs = parseFlagDuration(values.resync, "resync");
    if (resyncMs < 1000) throw new BootsealError("USAGE", "--resync must be at least 1s");
    const health = parseListenAddress(values["health-listen"], "--health-listen");
    const leaseNs =
      values["leader-election-namespace"] ??
      (existsSync(SA_NAMESPACE) ? readFileSync(SA_NAMESPACE, "utf8").trim() : "");

    const log = pino(
      { base: { component: "bootseal-controller" } },
      pino.destination({ dest: 2, sync: true }),
    );
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once("SIGTERM", onSignal);
    process.once("SIGINT", onSignal);
    try {
      await runController(
        {
          ...(values.kubeconfig !== undefined ? { kubeconfig: resolve(io.cwd, values.kubeconfig) } : {}),
          ...(values.namespace !== undefined ? { namespace: values.namespace } : {}),
          service: {
            server,
            ...(tokenFile !== undefined ? { tokenFile: resolve(io.cwd, tokenFile) } : { token }),
            ...(values["ca-file"] !== undefined ? { caFile: resolve(io.cwd, values["ca-file"]) } : {}),
          },
          health,
          leaderElect: values["leader-elect"] === true,
          leaderElectionNamespace: leaseNs === "" ? "default" : leaseNs,
          resyncMs,
          concurrency,
          log,
        },
        stop.signal,
      );
    } finally {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    }
    // Everything is stopped; a keep-alive socket of a client library must not hold the exit.
    exitWhenIdle(0);
    return 0;
  },
};
