/**
 * Prometheus metrics (GET /metrics; every metric and label in docs/api.md "Metrics"): build
 * info, machines per phase (fleet-wide, phase-counts.ts), boot durations and failures by
 * reason, requests by route and status with latency, publishes, fetches, status posts by
 * phase, store operations by kind and outcome (with latency and errors), key-service calls,
 * and Node's defaults (event loop delay `nodejs_eventloop_lag_*`, heap, GC) without the three
 * `nodejs_active_*_total` gauges (a gauge must not end in `_total`: `promtool check metrics`).
 * Every label value is lower case; error codes become snake case (`PRECONDITION_FAILED` ->
 * `precondition_failed`). One registry per app, so tests can build several apps in one process.
 */
import type { FastifyInstance } from "fastify";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { ObjectStore } from "../../../providers/stores/object-store.ts";
import type { CallOptions } from "../../call-options.ts";
import { packageVersion } from "../../config/package-root.ts";
import type { MasterKey } from "../../envelope/sops/master-key.ts";
import { BootsealError, ERROR_CODES } from "../../errors.ts";
import { PHASES } from "../../machine/status-protocol.ts";
import { PhaseCounter, type StatusSource } from "../phase-counts.ts";
import { routeConfigOf } from "../request-state.ts";
import type { StatusRecord } from "../status-record.ts";

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
  /**
   * Machines per phase from now on, counted from `source` at most once per `refreshMs`
   * (`metrics.phaseRefresh`). Until it is called, `bootseal_machines` has no samples.
   */
  countMachines(source: StatusSource, refreshMs: number): void;
  /**
   * A machine's report, once written (`record` is what the store holds now): `succeeded`
   * observes the boot duration (the first success of a publish only, so once per machine and
   * version across replicas), `failed` counts its reason code.
   */
  observeReport(record: StatusRecord, report: { readonly phase: string; readonly message?: string }): void;
  /** Stops a phase count in flight (app close). */
  close(): void;
}

/** A label value: lower case, `-` as `_` (`PRECONDITION_FAILED`, `not-modified` -> snake case). */
export function labelValue(text: string): string {
  return text.toLowerCase().replaceAll("-", "_");
}

/** An error as a label value: its code in snake case, `internal` for anything else. */
export function errorLabel(err: unknown): string {
  return labelValue(err instanceof BootsealError ? err.code : "INTERNAL");
}
const KNOWN_CODES: ReadonlySet<string> = new Set(ERROR_CODES);

/** A failed report's reason: the fetcher leads its message with the code (`MAC_MISMATCH: …`). */
export function failureReason(message: string | undefined): string {
  const code = /^([A-Z][A-Z0-9_]*):/.exec(message ?? "")?.[1];
  return code && KNOWN_CODES.has(code) ? labelValue(code) : "other";
}

/** `nodejs_active_{handles,requests,resources}_total`: gauges named like counters (sum the unsuffixed gauges instead). */
const DROPPED_DEFAULTS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/** Defaults whose `type` label is Node's class name (`PipeWrap`, `Socket`): lower-cased (`pipewrap`). */
const LOWER_CASED_DEFAULTS = ["nodejs_active_handles", "nodejs_active_requests", "nodejs_active_resources"];

/** Serves a registered metric with its label values lower-cased. */
function lowerCaseLabels(registry: Registry, name: string): void {
  const metric = registry.getSingleMetric(name);
  if (!metric) return;
  const get = metric.get.bind(metric);
  const lowered: typeof metric.get = async () => {
    const out = await get();
    return {
      ...out,
      values: out.values.map((v) => ({
        ...v,
        labels: Object.fromEntries(
          Object.entries(v.labels).map(([k, value]) => [
            k,
            typeof value === "string" ? value.toLowerCase() : value,
          ]),
        ),
      })),
    };
  };
  metric.get = lowered;
}

/** Published to succeeded, seconds: a boot takes seconds to tens of minutes. */
const BOOT_BUCKETS = [0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  for (const name of DROPPED_DEFAULTS) registry.removeSingleMetric(name);
  for (const name of LOWER_CASED_DEFAULTS) lowerCaseLabels(registry, name);
  new Gauge({
    name: "bootseal_build_info",
    help: "Always 1: the service's version and the Node version it runs on",
    labelNames: ["version", "node_version"] as const,
    registers: [registry],
  }).set({ version: packageVersion().toLowerCase(), node_version: process.versions.node }, 1);
  let counter: PhaseCounter | undefined;
  const countErrors = new Counter({
    name: "bootseal_machines_count_errors_total",
    help: "Counts of machines per phase that failed (the store did not answer); the last count is served meanwhile",
    registers: [registry],
  });
  // Both gauges ask the counter: a scrape collects them concurrently, and they share one count.
  new Gauge({
    name: "bootseal_machines_counted_timestamp_seconds",
    help: "When the count bootseal_machines shows began (Unix time): it includes every status written before",
    registers: [registry],
    async collect() {
      const count = await counter?.current();
      this.reset();
      if (count) this.set(count.startedAt / 1000);
    },
  });
  new Gauge({
    name: "bootseal_machines",
    help: "Machines by current phase, fleet-wide (from the store's status records; the same on every replica: aggregate with max by (phase))",
    labelNames: ["phase"] as const,
    registers: [registry],
    async collect() {
      const count = await counter?.current();
      this.reset();
      if (count) for (const phase of PHASES) this.set({ phase }, count.counts[phase]);
    },
  });
  const bootDuration = new Histogram({
    name: "bootseal_machine_bootstrap_duration_seconds",
    help: "Time from a publish to the machine's first succeeded report for it, observed once per machine and publish by the replica that writes it",
    buckets: BOOT_BUCKETS,
    registers: [registry],
  });
  const failures = new Counter({
    name: "bootseal_machine_failures_total",
    help: "Failed reports written, by reason code (the fetcher's error code in snake case, or other)",
    labelNames: ["reason"] as const,
    registers: [registry],
  });
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
      const code = errorLabel(err);
      observeStore(op, started, code === "precondition_failed" ? "conflict" : "error");
      if (code !== "precondition_failed") storeErrors.inc({ op, code });
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
                storeErrors.inc({ op: "list", code: errorLabel(err) });
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
            kmsErrors.inc({ kind: key.kind, op: "wrap", code: errorLabel(err) });
            throw err;
          }
        },
      };
    },
    countMachines(source, refreshMs) {
      counter?.close();
      counter = new PhaseCounter({ source, refreshMs, failed: () => countErrors.inc() });
    },
    observeReport(record, report) {
      if (report.phase === "failed") failures.inc({ reason: failureReason(report.message) });
      if (report.phase !== "succeeded") return;
      const mine = record.history.filter((e) => e.version === record.version);
      const published = mine.findLast((e) => e.phase === "published");
      const successes = mine.filter((e) => e.phase === "succeeded");
      if (!published || successes.length !== 1) return;
      const seconds = (Date.parse(successes[0]!.at) - Date.parse(published.at)) / 1000;
      if (Number.isFinite(seconds)) bootDuration.observe(Math.max(0, seconds));
    },
    close() {
      counter?.close();
    },
  };
}

/** Counts and times every request by its route pattern (never the raw URL: no cardinality blow-up). */
export function metricsPlugin(app: FastifyInstance, metrics: Metrics): void {
  const requests = metrics.registry.getSingleMetric("bootseal_http_requests_total") as Counter<string>;
  const latency = metrics.registry.getSingleMetric(
    "bootseal_http_request_duration_seconds",
  ) as Histogram<string>;
  // A callback hook, not an async one: no promise per request.
  app.addHook("onResponse", (request, reply, done) => {
    const labels = {
      method: labelValue(request.method),
      route: routeConfigOf(request).url ?? "unmatched",
      status: String(reply.statusCode),
    };
    requests.inc(labels);
    latency.observe(labels, reply.elapsedTime / 1000);
    done();
  });
}
