/**
 * `bootseal.yaml`, the service configuration (docs/configuration.md). Every key can also be
 * set by a BOOTSEAL_* variable (ENV_KEYS below); precedence: command-line flag, then variable,
 * then file, then default. The whole configuration is validated at start: unknown keys are
 * refused and a bad value is named in a one-line USAGE error, so a typo never turns into a
 * service that quietly does something else.
 */
import { readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { BootsealError } from "../errors.ts";
import { parseSopsConfig, type SopsConfig } from "./sops-config.ts";

export const SCOPES = ["configs:write", "configs:read", "status:read", "admin"] as const;
export type Scope = (typeof SCOPES)[number];

export const ONE_TIME_MODES = ["off", "after-success", "after-first-fetch"] as const;
export type OneTimeFetch = (typeof ONE_TIME_MODES)[number];

export interface ControllerConfig {
  readonly name: string;
  /** SHA-256 of the bearer token, lower-case hex; absent for a certificate-only controller. */
  readonly tokenSha256?: string;
  readonly scopes: readonly Scope[];
}

export interface FetcherArtifact {
  readonly url: string;
  readonly sha256: string;
  readonly signatureUrl: string;
  readonly publicKeyPem: string;
}

export interface ServiceConfig {
  readonly listen: { readonly host: string; readonly port: number };
  /** The URL machines reach the service at (user-data stubs); default: the bound URL. */
  readonly publicUrl?: string;
  /**
   * Proxies whose X-Forwarded-For is believed (Fastify trustProxy): true for any, or a list of
   * addresses/CIDRs. Off by default; behind a load balancer it makes rate limiting and the
   * audit log see the client, not the balancer.
   */
  readonly trustProxy?: boolean | readonly string[];
  /** File paths; clientCa turns on optional mutual TLS for controllers. */
  readonly tls?: { readonly cert: string; readonly key: string; readonly clientCa?: string };
  readonly store: string;
  readonly s3: { readonly endpoint?: string; readonly region?: string; readonly forcePathStyle?: boolean };
  /** `.sops.yaml`-shaped rules, matched against `<ns>/<name>`. */
  readonly creationRules: SopsConfig;
  readonly controllers: readonly ControllerConfig[];
  readonly bootstrapToken: { readonly ttlMs: number; readonly uses: number };
  readonly oneTimeFetch: OneTimeFetch;
  readonly limits: { readonly bodyBytes: number };
  readonly rateLimit: { readonly authFailuresPerMinute: number };
  /** The Linux fetcher: what cloud-init and Ignition stubs download. */
  readonly fetcherArtifact?: FetcherArtifact;
  /**
   * The Windows fetcher (`bootseal.exe`): what PowerShell stubs download. Never falls back to
   * fetcherArtifact, so a Windows stub cannot point at a Linux executable.
   */
  readonly fetcherArtifactWindows?: FetcherArtifact;
  /** "-" is standard error. */
  readonly audit: { readonly path: string };
  readonly events: { readonly heartbeatSeconds: number; readonly bufferSize: number };
  readonly dataDir: string;
  readonly logLevel: string;
}

type Raw = Record<string, unknown>;
type Env = Readonly<Record<string, string | undefined>>;

/** BOOTSEAL_* variable -> key path. `yaml` values are parsed as YAML (lists, maps). */
export const ENV_KEYS: readonly { env: string; path: readonly string[]; yaml?: boolean }[] = [
  { env: "BOOTSEAL_LISTEN", path: ["listen"] },
  { env: "BOOTSEAL_PUBLIC_URL", path: ["publicUrl"] },
  { env: "BOOTSEAL_TRUST_PROXY", path: ["trustProxy"] },
  { env: "BOOTSEAL_TLS_CERT", path: ["tls", "cert"] },
  { env: "BOOTSEAL_TLS_KEY", path: ["tls", "key"] },
  { env: "BOOTSEAL_TLS_CLIENT_CA", path: ["tls", "clientCa"] },
  { env: "BOOTSEAL_STORE", path: ["store"] },
  { env: "BOOTSEAL_S3_ENDPOINT", path: ["s3", "endpoint"] },
  { env: "BOOTSEAL_S3_REGION", path: ["s3", "region"] },
  { env: "BOOTSEAL_S3_FORCE_PATH_STYLE", path: ["s3", "forcePathStyle"] },
  { env: "BOOTSEAL_CREATION_RULES", path: ["creation_rules"], yaml: true },
  { env: "BOOTSEAL_CONTROLLERS", path: ["controllers"], yaml: true },
  { env: "BOOTSEAL_BOOTSTRAP_TOKEN_TTL", path: ["bootstrapToken", "ttl"] },
  { env: "BOOTSEAL_BOOTSTRAP_TOKEN_USES", path: ["bootstrapToken", "uses"] },
  { env: "BOOTSEAL_ONE_TIME_FETCH", path: ["oneTimeFetch"] },
  { env: "BOOTSEAL_LIMITS_BODY_BYTES", path: ["limits", "bodyBytes"] },
  { env: "BOOTSEAL_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE", path: ["rateLimit", "authFailuresPerMinute"] },
  { env: "BOOTSEAL_FETCHER_ARTIFACT_URL", path: ["fetcherArtifact", "url"] },
  { env: "BOOTSEAL_FETCHER_ARTIFACT_SHA256", path: ["fetcherArtifact", "sha256"] },
  { env: "BOOTSEAL_FETCHER_ARTIFACT_SIGNATURE_URL", path: ["fetcherArtifact", "signatureUrl"] },
  { env: "BOOTSEAL_FETCHER_ARTIFACT_PUBLIC_KEY_PEM", path: ["fetcherArtifact", "publicKeyPem"] },
  { env: "BOOTSEAL_FETCHER_ARTIFACT_PUBLIC_KEY_FILE", path: ["fetcherArtifact", "publicKeyFile"] },
  { env: "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_URL", path: ["fetcherArtifactWindows", "url"] },
  { env: "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_SHA256", path: ["fetcherArtifactWindows", "sha256"] },
  {
    env: "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_SIGNATURE_URL",
    path: ["fetcherArtifactWindows", "signatureUrl"],
  },
  {
    env: "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_PUBLIC_KEY_PEM",
    path: ["fetcherArtifactWindows", "publicKeyPem"],
  },
  {
    env: "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_PUBLIC_KEY_FILE",
    path: ["fetcherArtifactWindows", "publicKeyFile"],
  },
  { env: "BOOTSEAL_AUDIT_PATH", path: ["audit", "path"] },
  { env: "BOOTSEAL_EVENTS_HEARTBEAT_SECONDS", path: ["events", "heartbeatSeconds"] },
  { env: "BOOTSEAL_EVENTS_BUFFER_SIZE", path: ["events", "bufferSize"] },
  { env: "BOOTSEAL_DATA_DIR", path: ["dataDir"] },
  { env: "BOOTSEAL_LOG_LEVEL", path: ["logLevel"] },
];

/** Allowed keys per map; a nested map is named by its key. */
const SHAPE: Readonly<Record<string, readonly string[]>> = {
  "": [
    "listen",
    "publicUrl",
    "trustProxy",
    "tls",
    "store",
    "s3",
    "creation_rules",
    "controllers",
    "bootstrapToken",
    "oneTimeFetch",
    "limits",
    "rateLimit",
    "fetcherArtifact",
    "fetcherArtifactWindows",
    "audit",
    "events",
    "dataDir",
    "logLevel",
  ],
  tls: ["cert", "key", "clientCa"],
  s3: ["endpoint", "region", "forcePathStyle"],
  bootstrapToken: ["ttl", "uses"],
  limits: ["bodyBytes"],
  rateLimit: ["authFailuresPerMinute"],
  fetcherArtifact: ["url", "sha256", "signatureUrl", "publicKeyPem", "publicKeyFile"],
  fetcherArtifactWindows: ["url", "sha256", "signatureUrl", "publicKeyPem", "publicKeyFile"],
  audit: ["path"],
  events: ["heartbeatSeconds", "bufferSize"],
  controller: ["name", "tokenSha256", "scopes"],
};

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

function usage(where: string, message: string): BootsealError {
  return new BootsealError("USAGE", `${where}: ${message}`);
}

/** Reads `bootseal.yaml`; refuses duplicate keys and anything but a mapping at the top. */
export function readServiceConfigFile(path: string): Raw {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (cause) {
    throw new BootsealError("IO_ERROR", `cannot read config file ${path}`, { cause });
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { uniqueKeys: true, prettyErrors: false });
  } catch (cause) {
    const line = (cause as { linePos?: { line: number }[] }).linePos?.[0]?.line;
    throw new BootsealError("USAGE", `${path}: not valid YAML${line ? ` (line ${line})` : ""}`, { cause });
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw usage(path, "the top level must be a mapping");
  return doc as Raw;
}

function setPath(raw: Raw, path: readonly string[], value: unknown): void {
  let node = raw;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== "object" || next === null || Array.isArray(next)) node[key] = {};
    node = node[key] as Raw;
  }
  node[path[path.length - 1] as string] = value;
}

/** Applies BOOTSEAL_* variables over the file's values (a copy; the input is not changed). */
export function applyEnv(raw: Raw, env: Env): Raw {
  const out = structuredClone(raw);
  for (const { env: name, path, yaml } of ENV_KEYS) {
    const value = env[name];
    if (value === undefined || value === "") continue;
    let parsed: unknown = value;
    if (yaml) {
      try {
        parsed = parseYaml(value, { uniqueKeys: true });
      } catch {
        throw new BootsealError("USAGE", `${name}: not valid YAML`);
      }
    }
    setPath(out, path, parsed);
  }
  return out;
}

export { setPath as setConfigPath };

function checkKeys(value: unknown, shape: string, where: string): Raw {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw usage(where, "must be a mapping");
  const allowed = SHAPE[shape] ?? [];
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw usage(
        where === "config" ? key : `${where}.${key}`,
        `unknown key (allowed: ${allowed.join(", ")})`,
      );
    }
  }
  return value as Raw;
}

function optString(value: unknown, where: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string" || value.trim() === "") throw usage(where, "must be a non-empty string");
  return value.trim();
}

function reqString(value: unknown, where: string): string {
  const s = optString(value, where);
  if (s === undefined) throw usage(where, "is required");
  return s;
}

function optInt(value: unknown, where: string, min: number, max: number): number | undefined {
  if (value === undefined || value === null) return undefined;
  const n = typeof value === "string" && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
    throw usage(where, `must be an integer from ${min} to ${max}`);
  }
  return n;
}

function optBool(value: unknown, where: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "boolean") return value;
  if (typeof value === "string") {
    const v = value.toLowerCase();
    if (["1", "true", "yes", "on"].includes(v)) return true;
    if (["0", "false", "no", "off"].includes(v)) return false;
  }
  throw usage(where, "must be true or false");
}

const DURATION_UNITS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/** "24h", "90m", "1h30m", "1s", "500ms" (Go-style units plus d); a bare number is seconds. */
export function parseDuration(value: unknown, where: string): number {
  const text = typeof value === "number" ? `${value}s` : typeof value === "string" ? value.trim() : "";
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
  if (text === "" || parts.map((p) => p[0]).join("") !== text) {
    throw usage(where, `must be a duration such as 24h, 90m or 30s, got ${JSON.stringify(value)}`);
  }
  const ms = parts.reduce((sum, p) => sum + Number(p[1]) * (DURATION_UNITS[p[2] as string] ?? 0), 0);
  if (ms < 1000) throw usage(where, "must be at least 1s");
  return Math.round(ms);
}

export function parseListenAddress(text: string, where = "listen"): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[3]) : Number.NaN;
  if (!match || port < 0 || port > 65535) throw usage(where, `wants HOST:PORT, got "${text}"`);
  return { host: (match[1] ?? match[2]) as string, port };
}

function parseControllers(value: unknown, mtls: boolean): ControllerConfig[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw usage("controllers", "needs at least one controller ({name, tokenSha256, scopes})");
  }
  const names = new Set<string>();
  return value.map((item, i) => {
    const where = `controllers[${i}]`;
    const c = checkKeys(item, "controller", where);
    const name = reqString(c.name, `${where}.name`);
    if (names.has(name)) throw usage(`${where}.name`, `duplicate controller name "${name}"`);
    names.add(name);
    const hash = optString(c.tokenSha256, `${where}.tokenSha256`)?.toLowerCase();
    if (hash !== undefined && !/^[0-9a-f]{64}$/.test(hash)) {
      throw usage(`${where}.tokenSha256`, "must be 64 hex digits (sha256sum of the token)");
    }
    if (hash === undefined && !mtls) {
      throw usage(`${where}.tokenSha256`, "is required unless tls.clientCa is set (certificate controllers)");
    }
    if (!Array.isArray(c.scopes) || c.scopes.length === 0) {
      throw usage(`${where}.scopes`, `must list at least one of ${SCOPES.join(", ")}`);
    }
    const scopes = c.scopes.map((s, j) => {
      if (!(SCOPES as readonly unknown[]).includes(s)) {
        throw usage(
          `${where}.scopes[${j}]`,
          `unknown scope ${JSON.stringify(s)} (one of ${SCOPES.join(", ")})`,
        );
      }
      return s as Scope;
    });
    return { name, ...(hash ? { tokenSha256: hash } : {}), scopes };
  });
}

function parseCreationRules(value: unknown): SopsConfig {
  if (!Array.isArray(value) || value.length === 0) {
    throw usage("creation_rules", "needs at least one rule (same shape as .sops.yaml creation_rules)");
  }
  // Same parser as .sops.yaml, so the service and the CLI read rules identically.
  try {
    return parseSopsConfig(stringifyYaml({ creation_rules: value }), "creation_rules");
  } catch (err) {
    if (err instanceof BootsealError) throw new BootsealError("USAGE", err.message, { cause: err });
    throw err;
  }
}

function readFileText(path: string, where: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (cause) {
    throw new BootsealError("USAGE", `${where}: cannot read ${path}`, { cause });
  }
}

/** `key` is fetcherArtifact or fetcherArtifactWindows: same fields, messages name the key. */
function parseFetcherArtifact(
  value: unknown,
  key: "fetcherArtifact" | "fetcherArtifactWindows",
  cwd: string,
): FetcherArtifact | undefined {
  if (value === undefined || value === null) return undefined;
  const f = checkKeys(value, key, key);
  const url = reqString(f.url, `${key}.url`);
  const sha256 = reqString(f.sha256, `${key}.sha256`).toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw usage(`${key}.sha256`, "must be 64 hex digits");
  const signatureUrl = reqString(f.signatureUrl, `${key}.signatureUrl`);
  for (const [field, v] of [
    ["url", url],
    ["signatureUrl", signatureUrl],
  ] as const) {
    if (!/^https?:\/\/\S+$/.test(v)) throw usage(`${key}.${field}`, "must be an http(s) URL");
  }
  const pem = optString(f.publicKeyPem, `${key}.publicKeyPem`);
  const file = optString(f.publicKeyFile, `${key}.publicKeyFile`);
  if ((pem === undefined) === (file === undefined)) {
    throw usage(key, "needs exactly one of publicKeyPem and publicKeyFile");
  }
  const publicKeyPem = pem ?? readFileText(resolve(cwd, file as string), `${key}.publicKeyFile`);
  if (!publicKeyPem.includes("-----BEGIN PUBLIC KEY-----")) {
    throw usage(`${key}.publicKeyPem`, "must be a PEM public key (-----BEGIN PUBLIC KEY-----)");
  }
  return { url, sha256, signatureUrl, publicKeyPem: publicKeyPem.trim() };
}

/** `trustProxy`: a boolean, or addresses/CIDRs as a list or a comma-separated string. */
function parseTrustProxy(value: unknown): boolean | string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (
    typeof value === "boolean" ||
    (typeof value === "string" && /^(true|false|yes|no|on|off|1|0)$/i.test(value))
  ) {
    return optBool(value, "trustProxy");
  }
  const items = typeof value === "string" ? value.split(",") : Array.isArray(value) ? value : null;
  const addresses = items?.map((a) => (typeof a === "string" ? a.trim() : ""));
  if (
    !addresses ||
    addresses.length === 0 ||
    addresses.some((a) => !/^[0-9a-fA-F.:]+(\/\d{1,3})?$/.test(a))
  ) {
    throw usage("trustProxy", "must be true, false, or a list of IP addresses or CIDRs");
  }
  return addresses;
}

/** Validates a raw configuration (file + variables + flags merged) into a ServiceConfig. */
export function validateServiceConfig(rawInput: Raw, cwd: string = process.cwd()): ServiceConfig {
  const raw = checkKeys(rawInput, "", "config");
  const listen = parseListenAddress(optString(raw.listen, "listen") ?? "127.0.0.1:7480");
  const publicUrl = optString(raw.publicUrl, "publicUrl");
  const trustProxy = parseTrustProxy(raw.trustProxy);
  if (publicUrl !== undefined && !/^https?:\/\/[^\s/]+(\/\S*)?$/.test(publicUrl)) {
    throw usage("publicUrl", "must be an http(s) URL");
  }
  let tls: ServiceConfig["tls"];
  if (raw.tls !== undefined && raw.tls !== null) {
    const t = checkKeys(raw.tls, "tls", "tls");
    const clientCa = optString(t.clientCa, "tls.clientCa");
    tls = {
      cert: resolve(cwd, reqString(t.cert, "tls.cert")),
      key: resolve(cwd, reqString(t.key, "tls.key")),
      ...(clientCa ? { clientCa: resolve(cwd, clientCa) } : {}),
    };
  }
  const store = reqString(raw.store, "store");
  if (!/^(file|s3|gs):\/\//.test(store))
    throw usage("store", "must be file://DIR, s3://BUCKET/PREFIX or gs://BUCKET/PREFIX");
  const s3raw = checkKeys(raw.s3, "s3", "s3");
  const s3 = {
    ...(optString(s3raw.endpoint, "s3.endpoint")
      ? { endpoint: optString(s3raw.endpoint, "s3.endpoint") }
      : {}),
    ...(optString(s3raw.region, "s3.region") ? { region: optString(s3raw.region, "s3.region") } : {}),
    ...(optBool(s3raw.forcePathStyle, "s3.forcePathStyle") !== undefined
      ? { forcePathStyle: optBool(s3raw.forcePathStyle, "s3.forcePathStyle") }
      : {}),
  };
  const bt = checkKeys(raw.bootstrapToken, "bootstrapToken", "bootstrapToken");
  const oneTime = raw.oneTimeFetch ?? "off";
  const oneTimeFetch = (oneTime === false ? "off" : oneTime) as OneTimeFetch;
  if (!(ONE_TIME_MODES as readonly unknown[]).includes(oneTimeFetch)) {
    throw usage("oneTimeFetch", `must be one of ${ONE_TIME_MODES.join(", ")}`);
  }
  const limits = checkKeys(raw.limits, "limits", "limits");
  const rate = checkKeys(raw.rateLimit, "rateLimit", "rateLimit");
  const audit = checkKeys(raw.audit, "audit", "audit");
  const events = checkKeys(raw.events, "events", "events");
  const dataDir = resolve(cwd, optString(raw.dataDir, "dataDir") ?? "./data");
  const auditPath = optString(audit.path, "audit.path") ?? "-";
  const logLevel = optString(raw.logLevel, "logLevel") ?? "info";
  if (!LOG_LEVELS.includes(logLevel)) throw usage("logLevel", `must be one of ${LOG_LEVELS.join(", ")}`);
  const fetcherArtifact = parseFetcherArtifact(raw.fetcherArtifact, "fetcherArtifact", cwd);
  const fetcherArtifactWindows = parseFetcherArtifact(
    raw.fetcherArtifactWindows,
    "fetcherArtifactWindows",
    cwd,
  );
  // Identical bytes cannot be both a Linux and a Windows executable: a copy-paste slip.
  if (fetcherArtifactWindows && fetcherArtifactWindows.sha256 === fetcherArtifact?.sha256) {
    throw usage(
      "fetcherArtifactWindows.sha256",
      "is the same as fetcherArtifact.sha256 (the Windows bootseal.exe is a different file)",
    );
  }
  return {
    listen,
    ...(publicUrl ? { publicUrl: publicUrl.replace(/\/+$/, "") } : {}),
    ...(trustProxy !== undefined ? { trustProxy } : {}),
    ...(tls ? { tls } : {}),
    store,
    s3,
    creationRules: parseCreationRules(raw.creation_rules),
    controllers: parseControllers(raw.controllers, tls?.clientCa !== undefined),
    bootstrapToken: {
      ttlMs: bt.ttl === undefined ? 24 * 3_600_000 : parseDuration(bt.ttl, "bootstrapToken.ttl"),
      uses: optInt(bt.uses, "bootstrapToken.uses", 1, 1_000_000) ?? 10,
    },
    oneTimeFetch,
    limits: {
      bodyBytes: optInt(limits.bodyBytes, "limits.bodyBytes", 1024, 64 * 1024 * 1024) ?? 1024 * 1024,
    },
    rateLimit: {
      authFailuresPerMinute:
        optInt(rate.authFailuresPerMinute, "rateLimit.authFailuresPerMinute", 1, 1_000_000) ?? 20,
    },
    ...(fetcherArtifact ? { fetcherArtifact } : {}),
    ...(fetcherArtifactWindows ? { fetcherArtifactWindows } : {}),
    audit: { path: auditPath === "-" ? "-" : isAbsolute(auditPath) ? auditPath : resolve(cwd, auditPath) },
    events: {
      heartbeatSeconds: optInt(events.heartbeatSeconds, "events.heartbeatSeconds", 1, 3600) ?? 15,
      bufferSize: optInt(events.bufferSize, "events.bufferSize", 1, 100_000) ?? 1000,
    },
    dataDir,
    logLevel,
  };
}
