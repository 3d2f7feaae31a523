/**
 * Prometheus metrics (GET /metrics): requests by route and status with latency, publishes,
 * fetches, status posts by phase, store operations by kind and outcome (with latency and
 * errors), key-service calls, and Node's defaults (event loop delay `nodejs_eventloop_lag_*`,
 * heap, GC). One registry per app, so tests can build several apps in one process.
 */
import type { FastifyInstance } from "fastify";
import { Counter, collectDefaultMetrics, Histogram, Registry } from "prom-client";
import type { ObjectStore } from "../../../providers/stores/object-store.ts";
import type { CallOptions } from "../../call-options.ts";
import type { MasterKey } from "../../envelope/sops/master-key.ts";
import { BootsealError } from "../../errors.ts";

export interface Metrics {
  readonly registry: Registry;
  readonly requests: Counter<"method" | "route" | "status">;
  readonly latency: Histogram<"method" | "route" | "status">;
  readonly publishes: Counter<"outcome">;
  readonly fetches: Counter<"who" | "outcome">;
  readonly statusPosts: Counter<"phase">;
  /** Held (202) status reports that could not be written (status-coalescer.ts). */
  readonly statusReportsDropped: Counter;
  instrumentStore(store: ObjectStore): ObjectStore;
  instrumentKey(key: MasterKey): MasterKey;
}

function codeOf(err: unknown): string {
  return err instanceof BootsealError ? err.code : "INTERNAL";
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "bootseal_http_requests_total",
    help: "HTTP requests by method, route and status code",
    labelNames: ["method", "route", "status"] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: "bootseal_http_request_duration_seconds",
    help: "HTTP request latency by method, route and status code",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const storeLatency = new Histogram({
    name: "bootseal_store_operation_duration_seconds",
    help: "Object store call latency by operation and outcome",
    labelNames: ["op", "outcome"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const storeOps = new Counter({
    name: "bootseal_store_operations_total",
    help: "Object store calls by operation (get, head, put, delete, list) and outcome (ok, not_found, conflict, error)",
    labelNames: ["op", "outcome"] as const,
    registers: [registry],
  });
  const storeErrors = new Counter({
    name: "bootseal_store_errors_total",
    help: "Object store call failures by operation and error code",
    labelNames: ["op", "code"] as const,
    registers: [registry],
  });
  const kmsLatency = new Histogram({
    name: "bootseal_key_operation_duration_seconds",
    help: "Master key (age, PGP, KMS...) wrap latency by kind and outcome",
    labelNames: ["kind", "op", "outcome"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const kmsErrors = new Counter({
    name: "bootseal_key_errors_total",
    help: "Master key call failures by kind and error code",
    labelNames: ["kind", "op", "code"] as const,
    registers: [registry],
  });
  const publishes = new Counter({
    name: "bootseal_publishes_total",
    help: "Config publishes by outcome",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  const fetches = new Counter({
    name: "bootseal_fetches_total",
    help: "Config fetches by caller kind and outcome",
    labelNames: ["who", "outcome"] as const,
    registers: [registry],
  });
  const statusPosts = new Counter({
    name: "bootseal_status_posts_total",
    help: "Machine status reports by phase",
    labelNames: ["phase"] as const,
    registers: [registry],
  });
  const statusReportsDropped = new Counter({
    name: "bootseal_status_reports_dropped_total",
    help: "Status reports answered 202 and then not written (token revoked meanwhile, or the store stayed down)",
    registers: [registry],
  });

  function observeStore(op: string, started: bigint, outcome: string): void {
    storeLatency.observe({ op, outcome }, Number(process.hrtime.bigint() - started) / 1e9);
    storeOps.inc({ op, outcome });
  }

  /** A call that found nothing (null, false) is `not_found`: an expected outcome, not an error. */
  async function timeStore<T>(op: string, run: () => Promise<T>): Promise<T> {
    const started = process.hrtime.bigint();
    try {
      const out = await run();
      observeStore(op, started, out === null || out === false ? "not_found" : "ok");
      return out;
    } catch (err) {
      // A lost race is the store working as designed, not a store error.
      const code = codeOf(err);
      observeStore(op, started, code === "PRECONDITION_FAILED" ? "conflict" : "error");
      if (code !== "PRECONDITION_FAILED") storeErrors.inc({ op, code });
      throw err;
    }
  }

  return {
    registry,
    requests,
    latency,
    publishes,
    fetches,
    statusPosts,
    statusReportsDropped,
    instrumentStore(store) {
      return {
        url: store.url,
        get: (key, options) => timeStore("get", () => store.get(key, options)),
        head: (key, options) => timeStore("head", () => store.head(key, options)),
        put: (key, body, condition, options) =>
          timeStore("put", () => store.put(key, body, condition, options)),
        delete: (key, condition, options) => timeStore("delete", () => store.delete(key, condition, options)),
        list: (prefix, options) => {
          const inner = store.list(prefix, options);
          return {
            async *[Symbol.asyncIterator]() {
              const started = process.hrtime.bigint();
              try {
                yield* inner;
                observeStore("list", started, "ok");
              } catch (err) {
                observeStore("list", started, "error");
                storeErrors.inc({ op: "list", code: codeOf(err) });
                throw err;
              }
            },
          };
        },
      };
    },
    instrumentKey(key) {
      return {
        kind: key.kind,
        id: key.id,
        toMetadata: (enc, createdAt) => key.toMetadata(enc, createdAt),
        unwrap: (enc, options?: CallOptions) => key.unwrap(enc, options),
        async wrap(secret, options?: CallOptions) {
          const end = kmsLatency.startTimer({ kind: key.kind, op: "wrap" });
          try {
            const enc = await key.wrap(secret, options);
            end({ outcome: "ok" });
            return enc;
          } catch (err) {
            end({ outcome: "error" });
            kmsErrors.inc({ kind: key.kind, op: "wrap", code: codeOf(err) });
            throw err;
          }
        },
      };
    },
  };
}

/** Counts and times every request by its route pattern (never the raw URL: no cardinality blow-up). */
export function metricsPlugin(app: FastifyInstance, metrics: Metrics): void {
  const requests = metrics.registry.getSingleMetric("bootseal_http_requests_total") as Counter<string>;
  const latency = metrics.registry.getSingleMetric(
    "bootseal_http_request_duration_seconds",
  ) as Histogram<string>;
  app.addHook("onResponse", async (request, reply) => {
    const labels = {
      method: request.method,
      route: request.routeOptions.url ?? "unmatched",
      status: String(reply.statusCode),
    };
    requests.inc(labels);
    latency.observe(labels, reply.elapsedTime / 1000);
  });
}
