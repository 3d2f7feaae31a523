/**
 * `bootseal controller` wired together: informers on BootsealConfigs, Machines, Clusters and
 * Cluster API data secrets feed the work queue (a Machine, a Cluster or a secret maps to the
 * BootsealConfigs it concerns), the service's event stream wakes machines early, a periodic resync requeues
 * everything, `concurrency` workers run the reconciler, and the health server reports. With
 * leader election only the lease holder reconciles. Resolves when `signal` aborts (clean
 * stop) or rejects when the lease is lost.
 */

import { randomBytes } from "node:crypto";
import type { Server } from "node:http";
import { hostname } from "node:os";
import { BootsealError, isBootsealError } from "../errors.ts";
import { ControllerMetrics, startHealthServer } from "./health.ts";
import { type KObject, Kube, listPath, loadKubeConfig } from "./kube.ts";
import { LeaderElector } from "./leader.ts";
import { WorkQueue } from "./queue.ts";
import { type Log, Reconciler } from "./reconciler.ts";
import { ServiceApi, type ServiceSettings } from "./service-api.ts";
import {
  API_VERSION,
  CAPI_GROUP,
  CAPI_VERSION,
  CLUSTER_NAME_LABEL,
  GROUP,
  KIND,
  PLURAL,
  VERSION,
} from "./spec.ts";

export interface ControllerOptions {
  readonly kubeconfig?: string;
  /** Watch one namespace; undefined: all. */
  readonly namespace?: string;
  readonly service: ServiceSettings;
  readonly health?: { readonly host: string; readonly port: number };
  readonly leaderElect: boolean;
  readonly leaderElectionNamespace: string;
  readonly resyncMs: number;
  readonly concurrency: number;
  readonly log: Log;
  readonly pollMs?: number;
  readonly waitMs?: number;
  /** Called once the health server listens (tests read the port). */
  readonly onListening?: (server: Server) => void;
}

type Meta = {
  name?: string;
  namespace?: string;
  ownerReferences?: { kind: string; name: string; apiVersion: string }[];
};
type Watched = KObject & {
  metadata?: Meta;
  spec?: { bootstrap?: { configRef?: { apiGroup?: string; kind?: string; name?: string } } };
};

export async function runController(opts: ControllerOptions, signal: AbortSignal): Promise<void> {
  const { log } = opts;
  const kube = new Kube(loadKubeConfig(opts.kubeconfig));
  const service = new ServiceApi(opts.service);
  const metrics = new ControllerMetrics();
  const reconciler = new Reconciler({
    kube,
    service,
    log,
    pollMs: opts.pollMs ?? 5_000,
    waitMs: opts.waitMs ?? 2_000,
  });
  const queue = new WorkQueue({ concurrency: opts.concurrency, backoff: { baseMs: 500, capMs: 60_000 } });
  let synced = false;
  let standby = opts.leaderElect;
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  signal.addEventListener("abort", onAbort);

  let health: Server | undefined;
  if (opts.health) {
    health = await startHealthServer(
      opts.health.host,
      opts.health.port,
      { ready: () => synced || standby },
      metrics,
    );
    opts.onListening?.(health);
  }
  let lost = false;
  const elector = opts.leaderElect
    ? new LeaderElector(
        kube,
        {
          namespace: opts.leaderElectionNamespace,
          identity: `${hostname()}_${randomBytes(6).toString("hex")}`,
        },
        log,
      )
    : undefined;
  const informers: { stop(): Promise<void> }[] = [];
  try {
    if (elector) {
      if (!(await elector.acquire(stop.signal))) return;
      standby = false;
      void elector.hold(stop.signal, () => {
        lost = true;
        stop.abort();
      });
    }
    metrics.leading.set(1);

    const ns = opts.namespace;
    const keyOf = (o: Watched) => `${o.metadata?.namespace}/${o.metadata?.name}`;
    const bsc = kube.informer<Watched>(listPath(API_VERSION, PLURAL, ns), async () =>
      ns
        ? ((await kube.custom.listNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: ns,
            plural: PLURAL,
          })) as never)
        : ((await kube.custom.listClusterCustomObject({
            group: GROUP,
            version: VERSION,
            plural: PLURAL,
          })) as never),
    );
    const onConfig = (o: Watched) => queue.add(keyOf(o));
    bsc.on("add", onConfig);
    bsc.on("update", onConfig);
    bsc.on("delete", onConfig);

    const machines = kube.informer<Watched>(
      listPath(`${CAPI_GROUP}/${CAPI_VERSION}`, "machines", ns),
      async () =>
        ns
          ? ((await kube.custom.listNamespacedCustomObject({
              group: CAPI_GROUP,
              version: CAPI_VERSION,
              namespace: ns,
              plural: "machines",
            })) as never)
          : ((await kube.custom.listClusterCustomObject({
              group: CAPI_GROUP,
              version: CAPI_VERSION,
              plural: "machines",
            })) as never),
    );
    const onMachine = (o: Watched) => {
      const ref = o.spec?.bootstrap?.configRef;
      if (ref?.kind === KIND && ref.apiGroup === GROUP && ref.name)
        queue.add(`${o.metadata?.namespace}/${ref.name}`);
      const known = reconciler.machines.get(keyOf(o));
      if (known) queue.add(known);
    };
    machines.on("add", onMachine);
    machines.on("update", onMachine);
    machines.on("delete", onMachine);

    // A Cluster that becomes ready or is (un)paused: its configs look again (the inner provider
    // may need a nudge, a paused config waits for no poll).
    const clusters = kube.informer<Watched>(
      listPath(`${CAPI_GROUP}/${CAPI_VERSION}`, "clusters", ns),
      async () =>
        ns
          ? ((await kube.custom.listNamespacedCustomObject({
              group: CAPI_GROUP,
              version: CAPI_VERSION,
              namespace: ns,
              plural: "clusters",
            })) as never)
          : ((await kube.custom.listClusterCustomObject({
              group: CAPI_GROUP,
              version: CAPI_VERSION,
              plural: "clusters",
            })) as never),
    );
    const onCluster = (c: Watched) => {
      for (const o of bsc.list()) {
        const labels = (o.metadata as { labels?: Record<string, string> } | undefined)?.labels;
        if (
          o.metadata?.namespace === c.metadata?.namespace &&
          labels?.[CLUSTER_NAME_LABEL] === c.metadata?.name
        )
          queue.add(keyOf(o));
      }
    };
    clusters.on("add", onCluster);
    clusters.on("update", onCluster);

    // The inner providers' data secrets carry the cluster-name label (the contract).
    const secrets = kube.informer<Watched>(
      listPath("v1", "secrets", ns),
      async () =>
        ns
          ? ((await kube.core.listNamespacedSecret({
              namespace: ns,
              labelSelector: CLUSTER_NAME_LABEL,
            })) as never)
          : ((await kube.core.listSecretForAllNamespaces({ labelSelector: CLUSTER_NAME_LABEL })) as never),
      CLUSTER_NAME_LABEL,
    );
    const onSecret = (o: Watched) => {
      for (const r of o.metadata?.ownerReferences ?? []) {
        if (r.name.endsWith("-inner"))
          queue.add(`${o.metadata?.namespace}/${r.name.slice(0, -"-inner".length)}`);
      }
    };
    secrets.on("add", onSecret);
    secrets.on("update", onSecret);

    for (const [what, inf] of [
      ["bootsealconfigs", bsc],
      ["machines", machines],
      ["clusters", clusters],
      ["secrets", secrets],
    ] as const) {
      inf.on("error", (err: unknown) => {
        if (stop.signal.aborted) return;
        log.warn(
          { watch: what, code: (err as { code?: unknown })?.code ?? null },
          "watch failed; restarting",
        );
        const t = setTimeout(() => {
          if (!stop.signal.aborted) inf.start().catch(() => {});
        }, 2_000);
        t.unref();
      });
      informers.push(inf);
    }

    queue.start(async (key) => {
      const [namespace, name] = key.split("/") as [string, string];
      metrics.queueDepth.set(queue.length);
      try {
        const outcome = await reconciler.reconcile(namespace, name);
        if (outcome.failed) {
          const ms = queue.addRateLimited(key, outcome.failed.retryAfterMs);
          metrics.reconciles.inc({ result: "error" });
          log.debug(
            { bootsealConfig: key, reason: outcome.failed.reason, retryInMs: ms },
            "requeued with backoff",
          );
        } else {
          queue.forget(key);
          metrics.reconciles.inc({ result: outcome.requeueAfterMs ? "requeue" : "ok" });
          if (outcome.requeueAfterMs) queue.addAfter(key, outcome.requeueAfterMs);
        }
      } catch (err) {
        const after = (err as { retryAfterMs?: unknown }).retryAfterMs;
        const ms = queue.addRateLimited(key, typeof after === "number" ? after : 0);
        metrics.reconciles.inc({ result: "error" });
        log.warn(
          {
            bootsealConfig: key,
            code: isBootsealError(err) ? err.code : "INTERNAL",
            status: (err as { status?: unknown }).status ?? null,
            retryInMs: ms,
          },
          isBootsealError(err) ? err.message : "reconcile failed",
        );
      }
    });

    try {
      await Promise.all(informers.map((i) => (i as unknown as { start(): Promise<void> }).start()));
    } catch (err) {
      throw new BootsealError(
        "SERVICE_UNAVAILABLE",
        `the Kubernetes API server refused the first list: ${(err as { code?: unknown }).code ?? (err as Error).message}`,
        { cause: err },
      );
    }
    synced = true;
    log.info({ namespace: ns ?? "(all)", concurrency: opts.concurrency }, "controller started");

    const resync = setInterval(() => {
      for (const o of bsc.list()) queue.add(keyOf(o));
    }, opts.resyncMs);
    resync.unref();

    // Wake-ups only: every machine is polled anyway while it boots.
    const events = service.events(
      ns,
      (e) => {
        const key = reconciler.machines.get(`${e.namespace}/${e.name}`);
        if (key) queue.add(key);
      },
      stop.signal,
      (err) =>
        log.debug({ code: isBootsealError(err) ? err.code : null }, "event stream dropped; reconnecting"),
    );

    await new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      stop.signal.addEventListener("abort", () => resolve());
    });
    clearInterval(resync);
    await events.catch(() => {});
  } finally {
    signal.removeEventListener("abort", onAbort);
    stop.abort();
    await Promise.all(informers.map((i) => i.stop().catch(() => {})));
    await queue.stop();
    if (elector && !lost) await elector.release();
    metrics.leading.set(0);
    if (health) await new Promise<void>((resolve) => health.close(() => resolve()));
    log.info({}, "controller stopped");
  }
  if (lost)
    throw new BootsealError(
      "SERVICE_UNAVAILABLE",
      "lost the leader lease; exiting so a restart can re-elect",
    );
}
