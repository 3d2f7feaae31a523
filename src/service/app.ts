/**
 * buildApp(deps) assembles the Fastify instance and never listens: unit tests call
 * app.inject(), server.ts binds it to a socket. Everything per-machine lives in the store
 * (deps.store); the app itself holds only configuration, metrics and this replica's event ring.
 */
import rateLimit from "@fastify/rate-limit";
import swagger from "@fastify/swagger";
import Fastify, { type FastifyInstance, type FastifyServerOptions } from "fastify";
import { pino } from "pino";
import type { ProviderDeps } from "../../providers/keys/index.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import type { ControllerConfig, FetcherArtifact, OneTimeFetch } from "../config/service-config.ts";
import type { SopsConfig } from "../config/sops-config.ts";
import type { ServiceContext } from "./context.ts";
import { eventsBus } from "./events-bus.ts";
import { machineStore } from "./machine-store.ts";
import { type AuditLogger, auditPlugin } from "./plugins/audit.ts";
import { authPlugin } from "./plugins/auth.ts";
import { errorHandlerPlugin } from "./plugins/error-handler.ts";
import { createMetrics, metricsPlugin } from "./plugins/metrics.ts";
import { docsRoutes } from "./routes/docs.ts";
import { eventsRoutes } from "./routes/events.ts";
import { healthRoutes, type ReadinessProbe } from "./routes/health.ts";
import { machineConfigRoutes } from "./routes/machine-config.ts";
import { machineStatusRoutes } from "./routes/machine-status.ts";
import { machinesRoutes } from "./routes/machines.ts";
import { userdataRoutes } from "./routes/userdata.ts";

export interface AppDeps {
  readonly store: ObjectStore;
  /** `.sops.yaml`-shaped creation rules, matched against `<ns>/<name>`. */
  readonly rules: SopsConfig;
  readonly controllers: readonly ControllerConfig[];
  readonly keyDeps?: ProviderDeps;
  readonly bootstrapToken?: { readonly ttlMs: number; readonly uses: number };
  readonly oneTimeFetch?: OneTimeFetch;
  readonly bodyLimit?: number;
  readonly authFailuresPerMinute?: number;
  /** Linux fetcher: cloud-init and Ignition stubs. */
  readonly fetcherArtifact?: FetcherArtifact;
  /** Windows fetcher (bootseal.exe): PowerShell stubs; without it they are 501. */
  readonly fetcherArtifactWindows?: FetcherArtifact;
  readonly publicUrl?: string;
  /** Fastify trustProxy: believe X-Forwarded-For from these proxies (request.ip is the client). */
  readonly trustProxy?: boolean | readonly string[];
  /** Where audit lines go; default: nowhere (tests that do not look at them). */
  readonly audit?: AuditLogger;
  /** false for silence; a level otherwise. The access log never carries bodies or credentials. */
  readonly logger?: false | { readonly level: string; readonly stream?: NodeJS.WritableStream };
  /** More readiness probes; the store probe is always there. */
  readonly probes?: readonly ReadinessProbe[];
  /** TLS material; `ca` with `mutualTls` verifies optional controller client certificates. */
  readonly https?: { readonly cert: Buffer; readonly key: Buffer; readonly ca?: Buffer };
  readonly heartbeatMs?: number;
  readonly eventsBufferSize?: number;
  readonly now?: () => Date;
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
    level: deps.logger?.level ?? "info",
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    ...(deps.logger?.stream ? { stream: deps.logger.stream } : {}),
  };
}

export function buildApp(deps: AppDeps): FastifyInstance {
  const bodyLimit = deps.bodyLimit ?? 1024 * 1024;
  const https = deps.https
    ? {
        cert: deps.https.cert,
        key: deps.https.key,
        // Client certificates are optional: machines authenticate with tokens instead.
        ...(deps.https.ca ? { ca: deps.https.ca, requestCert: true, rejectUnauthorized: false } : {}),
      }
    : null;
  const app = Fastify({
    logger: loggerOptions(deps),
    bodyLimit,
    // Request ids come from us, never from a client header that could be forged into the audit log.
    genReqId: () => crypto.randomUUID(),
    // Unknown fields are refused (400), not silently dropped: a typo in a report is a bug to see.
    ajv: { customOptions: { removeAdditional: false } },
    // No automatic HEAD twins: a HEAD of a machine's config must not spend a token use.
    exposeHeadRoutes: false,
    trustProxy:
      typeof deps.trustProxy === "boolean" ? deps.trustProxy : deps.trustProxy ? [...deps.trustProxy] : false,
    ...(https ? { https } : {}),
  }) as unknown as FastifyInstance;

  errorHandlerPlugin(app);
  app.decorateRequest("bootsealState", null);
  const metrics = createMetrics();
  metricsPlugin(app, metrics);
  auditPlugin(app, deps.audit ?? silentAudit());

  const store = metrics.instrumentStore(deps.store);
  const machines = machineStore(store);
  const storeProbe: ReadinessProbe = {
    name: "store",
    // A head of a key that is normally absent: one cheap round trip that needs read access.
    check: async () => {
      await store.head("status/.readyz");
    },
  };

  void app.register(rateLimit, { global: false });
  void app.register(swagger, {
    openapi: {
      openapi: "3.0.3",
      info: {
        title: "bootseal",
        version: "v1",
        description: "Machine bootstrap secrets as SOPS v3 documents (docs/api.md)",
      },
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
    const guard = authPlugin(api, {
      controllers: deps.controllers,
      mutualTls: deps.https?.ca !== undefined,
      authFailuresPerMinute: deps.authFailuresPerMinute ?? 20,
      machines,
    });
    const ctx: ServiceContext = {
      machines,
      rules: deps.rules,
      keyDeps: deps.keyDeps ?? {},
      bootstrapToken: deps.bootstrapToken ?? { ttlMs: 24 * 3_600_000, uses: 10 },
      oneTimeFetch: deps.oneTimeFetch ?? "off",
      bodyLimit,
      fetcherArtifact: deps.fetcherArtifact,
      fetcherArtifactWindows: deps.fetcherArtifactWindows,
      publicUrl: deps.publicUrl,
      events: eventsBus(deps.eventsBufferSize ?? 1000),
      metrics,
      heartbeatMs: deps.heartbeatMs ?? 15_000,
      guard,
      now: deps.now ?? (() => new Date()),
    };
    healthRoutes(api, [storeProbe, ...(deps.probes ?? [])], metrics.registry);
    docsRoutes(api);
    machineStatusRoutes(api, ctx);
    machinesRoutes(api, ctx);
    userdataRoutes(api, ctx);
    eventsRoutes(api, ctx);
    // Own context: the config routes swap the body parsers for one raw-bytes parser.
    await api.register(async (raw) => machineConfigRoutes(raw, ctx));
  });
  return app;
}

function silentAudit(): AuditLogger {
  return pino({ level: "silent" });
}
