/**
 * buildApp(deps) assembles the Fastify instance and never listens: unit tests call
 * app.inject(), server.ts binds it to a socket. Everything per-machine lives in the store
 * (deps.store); the app itself holds only configuration, metrics and this replica's event ring.
 * The configuration arrives resolved (src/config applied every default): nothing here has a
 * default of its own, so a default is changed in one place.
 */
import swagger from "@fastify/swagger";
import Fastify, { type FastifyInstance, type FastifyServerOptions, LogController } from "fastify";
import { pino } from "pino";
import type { ProviderDeps } from "../../providers/keys/index.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import type { ServiceConfig } from "../config/service-config.ts";
import { isBootsealError } from "../errors.ts";
import { formatMachineId } from "../machine/machine-id.ts";
import { artifactCatalog } from "./artifacts.ts";
import type { ServiceContext } from "./context.ts";
import { ControllerCredentials } from "./controllers/credentials.ts";
import { eventsBus } from "./events-bus.ts";
import { machineStore } from "./machine-store.ts";
import { accessLogPlugin } from "./plugins/access-log.ts";
import { type AuditLogger, auditPlugin, isoTimeField } from "./plugins/audit.ts";
import { authPlugin } from "./plugins/auth.ts";
import { errorHandlerPlugin } from "./plugins/error-handler.ts";
import {
  edgeFastifyOptions,
  guardConnections,
  httpEdgePlugin,
  serverTimeouts,
  tlsServerOptions,
} from "./plugins/http-edge.ts";
import { createMetrics, metricsPlugin } from "./plugins/metrics.ts";
import { RecordCache } from "./record-cache.ts";
import { artifactsRoutes } from "./routes/artifacts.ts";
import { checkRoutes } from "./routes/check.ts";
import { docsRoutes } from "./routes/docs.ts";
import { eventsRoutes } from "./routes/events.ts";
import { fleetRoutes } from "./routes/fleet.ts";
import { healthRoutes, type ReadinessProbe } from "./routes/health.ts";
import { loginRoutes } from "./routes/login.ts";
import { machineConfigRoutes } from "./routes/machine-config.ts";
import { machineStatusRoutes } from "./routes/machine-status.ts";
import { machinesRoutes } from "./routes/machines.ts";
import { userdataRoutes } from "./routes/userdata.ts";
import { StatusCoalescer } from "./status-coalescer.ts";

/** Bytes of status reports one replica holds at most (status-coalescer.ts). */
const HELD_BYTES_MAX = 32 * 1024 * 1024;

/** What the app reads of the resolved service configuration (docs/configuration.md). */
export type AppConfig = Pick<
  ServiceConfig,
  | "creationRules"
  | "controllers"
  | "kubernetesBindings"
  | "controllerAuth"
  | "bootstrapToken"
  | "bootstrapCommands"
  | "artifacts"
  | "oneTimeFetch"
  | "limits"
  | "rateLimit"
  | "machineAuth"
  | "fetcherArtifact"
  | "fetcherArtifactWindows"
  | "publicUrl"
  | "trustProxy"
  | "events"
  | "statusReports"
  | "metrics"
  | "logLevel"
>;

/** The configuration, and what the process around the app provides. */
export interface AppDeps {
  readonly config: AppConfig;
  readonly store: ObjectStore;
  readonly keyDeps?: ProviderDeps;
  /** Where audit lines go; none: nowhere (tests that do not look at them). */
  readonly audit?: AuditLogger;
  /**
   * false: no access log (tests); otherwise it goes to `stream` (default standard output) at
   * config.logLevel. The access log never carries bodies or credentials.
   */
  readonly logger?: false | { readonly stream?: NodeJS.WritableStream };
  /** More readiness probes; the store probe is always there. */
  readonly probes?: readonly ReadinessProbe[];
  /** TLS material (read from config.tls); `ca` verifies optional controller client certificates. */
  readonly https?: { readonly cert: Buffer; readonly key: Buffer; readonly ca?: Buffer };
  readonly now?: () => Date;
  /** The live controller credentials (server.ts reloads them); default: fixed, from config. */
  readonly controllers?: ControllerCredentials;
}

/** Paths pino blanks in every access-log line, should a serializer ever include headers. */
export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  'req.headers["x-amz-security-token"]',
  'res.headers["set-cookie"]',
];

function loggerOptions(deps: AppDeps): FastifyServerOptions["logger"] {
  if (deps.logger === false) return false;
  return {
    level: deps.config.logLevel,
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    // The audit log's format (plugins/audit.ts): every log line's `time` is ISO-8601 UTC.
    timestamp: isoTimeField,
    // Standard output written asynchronously (pino flushes it on exit): a blocking write per
    // line held the event loop on every request of a boot storm.
    stream: deps.logger?.stream ?? pino.destination({ dest: 1, sync: false }),
  };
}

export function buildApp(deps: AppDeps): FastifyInstance {
  const { config } = deps;
  const bodyLimit = config.limits.bodyBytes;
  const timeouts = serverTimeouts(config.limits);
  const https = deps.https
    ? {
        ...tlsServerOptions(config.limits),
        ...timeouts,
        cert: deps.https.cert,
        key: deps.https.key,
        // Client certificates are optional: machines authenticate with tokens instead.
        ...(deps.https.ca ? { ca: deps.https.ca, requestCert: true, rejectUnauthorized: false } : {}),
      }
    : null;
  const app = Fastify({
    logger: loggerOptions(deps),
    // One access line per request instead (plugins/access-log.ts).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit,
    // Request ids come from us, never from a client header that could be forged into the audit log.
    genReqId: () => crypto.randomUUID(),
    // Unknown fields are refused (400), not silently dropped: a typo in a report is a bug to see.
    ajv: { customOptions: { removeAdditional: false } },
    // No automatic HEAD twins: a HEAD of a machine's config must not spend a token use.
    exposeHeadRoutes: false,
    trustProxy:
      typeof config.trustProxy === "boolean"
        ? config.trustProxy
        : config.trustProxy
          ? [...config.trustProxy]
          : false,
    ...edgeFastifyOptions(config.limits, { tls: deps.https !== undefined }),
    ...(https ? { https } : { http: timeouts }),
  }) as unknown as FastifyInstance;

  errorHandlerPlugin(app);
  httpEdgePlugin(app, { tls: https !== null });
  guardConnections(app.server, config.limits, { tls: https !== null, trustProxy: config.trustProxy });
  app.decorateRequest("bootsealState", null);
  const metrics = createMetrics();
  metricsPlugin(app, metrics);
  accessLogPlugin(app);
  auditPlugin(app, deps.audit ?? silentAudit());

  const store = metrics.instrumentStore(deps.store);
  // The last seen token and status records: first guesses for compare-and-swap (record-cache.ts).
  const machines = machineStore(store, new RecordCache());
  const storeProbe: ReadinessProbe = { name: "store", check: () => machines.probe() };
  metrics.countMachines(machines, config.metrics.phaseRefreshMs);
  app.addHook("onClose", async () => metrics.close());

  void app.register(swagger, {
    openapi: {
      openapi: "3.0.3",
      info: {
        title: "bootseal",
        version: "v1",
        description: "Machine bootstrap secrets as SOPS v3 documents (docs/api.md)",
        license: { name: "Apache-2.0", url: "https://www.apache.org/licenses/LICENSE-2.0" },
      },
      // The configured public address, else relative: the document's own host serves the API.
      servers: [{ url: config.publicUrl ?? "/", description: "this service" }],
      tags: [
        {
          name: "configs",
          description: "Publish, fetch and delete a machine's encrypted config; user-data stubs",
        },
        {
          name: "status",
          description: "Bootstrap phases: reports, records, the machine list and the event stream",
        },
        { name: "machines", description: "Machine login with a cloud identity" },
        { name: "artifacts", description: "The fetcher executables, their signatures and the signing key" },
        { name: "operations", description: "Liveness, readiness and metrics" },
      ],
      components: {
        securitySchemes: {
          bearer: {
            type: "http",
            scheme: "bearer",
            description: "controller token, or a machine's bootstrap token (bst.<ns>.<name>.<secret>)",
          },
        },
      },
      security: [{ bearer: [] }],
    },
  });
  void app.register(async (api) => {
    const now = deps.now ?? (() => new Date());
    authPlugin(api, {
      controllers: deps.controllers ?? new ControllerCredentials(config, { now: () => now().getTime() }),
      mutualTls: deps.https?.ca !== undefined,
      authFailuresPerMinute: config.rateLimit.authFailuresPerMinute,
      machines,
      now,
    });
    const events = eventsBus(config.events.bufferSize);
    const statusReports = new StatusCoalescer({
      windowMs: config.statusReports.coalesceMs,
      maxHeldMachines: config.statusReports.maxHeldMachines,
      maxHeldBytes: HELD_BYTES_MAX,
      write: (m, batch) => machines.recordPhase(m, batch),
      dropped: (m, entries, err) => {
        metrics.statusReportsDropped.inc(entries.length);
        api.log.warn(
          {
            machine: formatMachineId(m),
            reports: entries.length,
            code: isBootsealError(err) ? err.code : "INTERNAL",
          },
          "held status reports dropped",
        );
      },
    });
    api.addHook("onClose", () => statusReports.close());
    const ctx: ServiceContext = {
      machines,
      rules: config.creationRules,
      keyDeps: deps.keyDeps ?? {},
      bootstrapToken: config.bootstrapToken,
      bootstrapCommands: config.bootstrapCommands,
      artifacts: artifactCatalog(config.artifacts),
      oneTimeFetch: config.oneTimeFetch,
      bodyLimit,
      fetcherArtifact: config.fetcherArtifact,
      fetcherArtifactWindows: config.fetcherArtifactWindows,
      publicUrl: config.publicUrl,
      events,
      machineAuth: config.machineAuth,
      statusReports,
      metrics,
      heartbeatMs: config.events.heartbeatSeconds * 1000,
      now,
    };
    const artifactsProbe: ReadinessProbe = { name: "artifacts", check: () => ctx.artifacts.ready() };
    healthRoutes(api, [storeProbe, artifactsProbe, ...(deps.probes ?? [])], metrics.registry);
    docsRoutes(api);
    fleetRoutes(api);
    machineStatusRoutes(api, ctx);
    machinesRoutes(api, ctx);
    userdataRoutes(api, ctx);
    loginRoutes(api, ctx, {
      machineAuth: config.machineAuth,
      authFailuresPerMinute: config.rateLimit.authFailuresPerMinute,
    });
    artifactsRoutes(api, ctx);
    checkRoutes(api, ctx);
    eventsRoutes(api, ctx);
    // Own context: the config routes swap the body parsers for one raw-bytes parser.
    await api.register(async (raw) => machineConfigRoutes(raw, ctx));
  });
  return app;
}

function silentAudit(): AuditLogger {
  return pino({ level: "silent" });
}
