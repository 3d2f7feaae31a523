/**
 * The controller's health server (--health-listen): /healthz (the process answers), /readyz
 * (the informers have synced and, with leader election, this replica leads or waits as a
 * standby), /metrics (Prometheus text from prom-client).
 */
import { createServer, type Server } from "node:http";
import { Counter, Gauge, Registry } from "prom-client";

export class ControllerMetrics {
  readonly registry = new Registry();
  readonly reconciles = new Counter({
    name: "bootseal_controller_reconciles_total",
    help: "Reconciles of BootsealConfigs, by result (ok, requeue, error)",
    labelNames: ["result"],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: "bootseal_controller_queue_depth",
    help: "BootsealConfig keys waiting in the work queue",
    registers: [this.registry],
  });
  readonly leading = new Gauge({
    name: "bootseal_controller_leader",
    help: "1 while this replica leads (always 1 without --leader-elect)",
    registers: [this.registry],
  });
}

export interface HealthState {
  ready(): boolean;
}

export async function startHealthServer(
  host: string,
  port: number,
  state: HealthState,
  metrics: ControllerMetrics,
): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405).end();
      return;
    }
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    } else if (path === "/readyz") {
      const ok = state.ready();
      res.writeHead(ok ? 200 : 503, { "content-type": "text/plain" }).end(ok ? "ok\n" : "not ready\n");
    } else if (path === "/metrics") {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
