/**
 * `bootseal.yaml`, the service configuration (docs/configuration.md), validated against the
 * one schema (service-config-schema.ts) with Ajv, which also fills the defaults. Every key can
 * also be set by a BOOTSEAL_* variable named by one rule (envName); precedence: command-line
 * flag, then variable, then file, then default. Unknown keys are refused and a bad value is
 * named in a one-line USAGE error, so a typo never turns into a service that quietly does
 * something else. What a schema cannot say (a listen address, a duration, creation rules,
 * a key file to read, rules across keys) is checked here, after the schema.
 */
import { readFileSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { type StoreSettings, storeSettingsOf } from "../../providers/stores/index.ts";
import { parseDuration } from "../duration.ts";
import { compileRegex, type GoRegexp } from "../envelope/sops/walk.ts";
import { BootsealError } from "../errors.ts";
import { type MachineAuthConfig, parseMachineAuth, type RawMachineAuth } from "./machine-auth.ts";
import { defaultArtifactsDir } from "./package-root.ts";
import { schemaChecker } from "./schema-check.ts";
import {
  configLeaves,
  type LOG_LEVELS,
  type ONE_TIME_MODES,
  type SCOPES,
  SERVICE_CONFIG_SCHEMA,
} from "./service-config-schema.ts";
import { parseSopsConfig, type SopsConfig } from "./sops-config.ts";

export { envName, LOG_LEVELS, ONE_TIME_MODES, SCOPES, schemaDefault } from "./service-config-schema.ts";
export type Scope = (typeof SCOPES)[number];
export type OneTimeFetch = (typeof ONE_TIME_MODES)[number];
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * What one credential may do: these scopes, in the namespaces matching one of these names or
 * globs (`*` is any run of label characters). A credential's grants add up.
 */
export interface Grant {
  readonly scopes: readonly Scope[];
  /** Names or globs; absent (only in code-built configurations): every namespace. */
  readonly namespaces?: readonly string[];
}

export interface ControllerConfig extends Grant {
  readonly name: string;
  /** SHA-256 of the bearer token, lower-case hex; absent for a certificate-only controller. */
  readonly tokenSha256?: string;
}

/** A grant for Kubernetes ServiceAccounts: `ns/name`, or `ns/*` for a whole namespace. */
export interface KubernetesBinding extends Grant {
  readonly serviceAccount: string;
}

/** Where ServiceAccount tokens are reviewed (TokenReview). */
export interface KubernetesReview {
  readonly server: string;
  /** The API server's CA, PEM (read at validation, so a reload picks a new one up). */
  readonly caPem?: string;
  /** The reviewer's own token: re-read on every review (projected tokens rotate). */
  readonly tokenFile: string;
  readonly audiences?: readonly string[];
  readonly cacheTtlMs: number;
}

export interface FetcherArtifact {
  readonly url: string;
  readonly sha256: string;
  /** Ignition stubs' verification.hash; optional (Ignition stubs are 501 without it). */
  readonly sha512?: string;
  readonly signatureUrl: string;
  readonly publicKeyPem: string;
}

/** A `bootstrapCommands` entry: the first whose `match` finds `<ns>/<name>` gives the command. */
export interface BootstrapCommandRule {
  readonly match: GoRegexp;
  readonly command: string;
}

/** The longest bootstrap command, UTF-8 bytes: it travels in user data, which clouds cap at 16 to 64 KiB. */
export const MAX_BOOTSTRAP_COMMAND_BYTES = 4096;

/**
 * A bootstrap command as the stubs can carry it: 1 to 4096 bytes of printable text (no
 * control, format or line-separator character, so it stays one line in every stub language).
 * BAD_INPUT naming `where`; the message never echoes the command.
 */
export function checkBootstrapCommand(value: unknown, where: string): string {
  if (typeof value !== "string" || value.trim() === "") {
    throw new BootsealError("BAD_INPUT", `${where}: expected a non-empty command`);
  }
  if (Buffer.byteLength(value, "utf8") > MAX_BOOTSTRAP_COMMAND_BYTES) {
    throw new BootsealError("BAD_INPUT", `${where}: longer than ${MAX_BOOTSTRAP_COMMAND_BYTES} bytes`);
  }
  if (/[\p{C}\u2028\u2029]/u.test(value)) {
    throw new BootsealError(
      "BAD_INPUT",
      `${where}: only printable characters (no control character or line break)`,
    );
  }
  return value;
}

/**
 * The resolved configuration: every key with a default is present. The optional ones are
 * those whose absence means "not configured" (no TLS, no artifact, the bound URL, a store
 * setting the environment gives). Each store scheme with settings has its section
 * (StoreSettings: `s3`, from the scheme registry).
 */
export interface ServiceConfig extends StoreSettings {
  readonly listen: { readonly host: string; readonly port: number };
  /** The URL machines reach the service at (user-data stubs); default: the bound URL. */
  readonly publicUrl?: string;
  /**
   * Proxies whose X-Forwarded-For is believed (Fastify trustProxy): true for any, or a list of
   * addresses/CIDRs. Off by default; behind a load balancer it makes rate limiting and the
   * audit log see the client, not the balancer.
   */
  readonly trustProxy: boolean | readonly string[];
  /** File paths; clientCa turns on optional mutual TLS for controllers. */
  readonly tls?: { readonly cert: string; readonly key: string; readonly clientCa?: string };
  readonly store: string;
  /** `.sops.yaml`-shaped rules, matched against `<ns>/<name>`. */
  readonly creationRules: SopsConfig;
  readonly controllers: readonly ControllerConfig[];
  readonly kubernetesBindings: readonly KubernetesBinding[];
  readonly controllerAuth: { readonly kubernetes?: KubernetesReview };
  readonly bootstrapToken: {
    readonly ttlMs: number;
    readonly uses: number;
    /** The secret publish derives tokens from (stable user-data stubs); absent: GET …/userdata is 409. */
    readonly derivationKey?: Uint8Array;
  };
  /** Per-machine bootstrap commands (`--exec` of the stub), first match wins. */
  readonly bootstrapCommands: readonly BootstrapCommandRule[];
  /** The executables the service serves and signs (/v1/artifacts/). */
  readonly artifacts: { readonly dir: string; readonly signingKeyFile: string };
  readonly oneTimeFetch: OneTimeFetch;
  readonly limits: {
    readonly bodyBytes: number;
    /** Request line and headers must have arrived this long after the first byte (408). */
    readonly headersTimeoutMs: number;
    /** The whole request, body included (408). */
    readonly requestTimeoutMs: number;
    /** Idle keep-alive connections are closed after this. */
    readonly idleTimeoutMs: number;
    /** 0: no cap. */
    readonly maxConnections: number;
    /** 0: no cap; trustProxy addresses are exempt. */
    readonly maxConnectionsPerAddress: number;
  };
  readonly rateLimit: { readonly authFailuresPerMinute: number };
  /** Machine-identity logins (AWS IAM, GCP, Azure) and their bindings to machines. */
  readonly machineAuth: MachineAuthConfig;
  /** The Linux fetcher: what cloud-init and Ignition stubs download. */
  readonly fetcherArtifact?: FetcherArtifact;
  /**
   * The Windows fetcher (`bootseal.exe`): what PowerShell stubs download. Never falls back to
   * fetcherArtifact, so a Windows stub cannot point at a Linux executable.
   */
  readonly fetcherArtifactWindows?: FetcherArtifact;
  /** "-" is standard error; `mode` applies to a file. */
  readonly audit: { readonly path: string; readonly mode: number };
  readonly events: { readonly heartbeatSeconds: number; readonly bufferSize: number };
  /** 0: no coalescing (every status report written before its answer). */
  readonly statusReports: { readonly coalesceMs: number; readonly maxHeldMachines: number };
  /** How often, at most, a replica counts machines per phase (`bootseal_machines`). */
  readonly metrics: { readonly phaseRefreshMs: number };
  readonly dataDir: string;
  readonly logLevel: LogLevel;
}

type Raw = Record<string, unknown>;
type Env = Readonly<Record<string, string | undefined>>;

/** BOOTSEAL_* variable -> key path, from the schema; `yaml` values are parsed as YAML (lists). */
export const ENV_KEYS: readonly { env: string; path: readonly string[]; yaml: boolean }[] =
  configLeaves().map(({ env, path, yaml }) => ({ env, path, yaml }));

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

function isMapping(value: unknown): value is Raw {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function setPath(raw: Raw, path: readonly string[], value: unknown): void {
  let node = raw;
  for (const key of path.slice(0, -1)) {
    if (!isMapping(node[key])) node[key] = {};
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

export function parseListenAddress(text: string, where = "listen"): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[3]) : Number.NaN;
  if (!match || port < 0 || port > 65535) throw usage(where, `wants HOST:PORT, got "${text}"`);
  return { host: (match[1] ?? match[2]) as string, port };
}

const checkSchema = schemaChecker(SERVICE_CONFIG_SCHEMA);

/** What the schema checked, as Ajv left it (defaults filled). */
interface Checked {
  listen: string;
  publicUrl?: string;
  trustProxy: boolean | string | unknown[];
  tls?: { cert: string; key: string; clientCa?: string };
  store: string;
  creation_rules: unknown[];
  controllers: { name: string; tokenSha256?: string; scopes: Scope[]; namespaces: string[] }[];
  kubernetesBindings: KubernetesBinding[];
  controllerAuth: {
    kubernetes?: {
      server: string;
      caFile?: string;
      tokenFile: string;
      audiences?: string[];
      cacheTtl: string | number;
    };
  };
  bootstrapToken: { ttl: string | number; uses: number; derivationKeyFile?: string };
  bootstrapCommands: { match: string; command: string }[];
  artifacts: { dir?: string; signingKeyFile?: string };
  oneTimeFetch: OneTimeFetch;
  limits: {
    bodyBytes: number;
    headersTimeout: string | number;
    requestTimeout: string | number;
    idleTimeout: string | number;
    maxConnections: number;
    maxConnectionsPerAddress: number;
  };
  rateLimit: { authFailuresPerMinute: number };
  machineAuth: RawMachineAuth;
  fetcherArtifact?: RawArtifact;
  fetcherArtifactWindows?: RawArtifact;
  audit: { path: string; mode: string };
  events: { heartbeatSeconds: number; bufferSize: number };
  statusReports: { coalesce: string | number; maxHeldMachines: number };
  metrics: { phaseRefresh: string | number };
  dataDir: string;
  logLevel: LogLevel;
}

interface RawArtifact {
  url: string;
  sha256: string;
  sha512?: string;
  signatureUrl: string;
  publicKeyPem?: string;
  publicKeyFile?: string;
}

function parseControllers(value: Checked["controllers"], mtls: boolean): ControllerConfig[] {
  const names = new Set<string>();
  return value.map((c, i) => {
    const where = `controllers[${i}]`;
    if (names.has(c.name)) throw usage(`${where}.name`, `duplicate controller name "${c.name}"`);
    names.add(c.name);
    if (c.tokenSha256 === undefined && !mtls) {
      throw usage(`${where}.tokenSha256`, "is required unless tls.clientCa is set (certificate controllers)");
    }
    const grant = { scopes: c.scopes, namespaces: c.namespaces };
    if (c.tokenSha256 === undefined) return { name: c.name, ...grant };
    return { name: c.name, tokenSha256: c.tokenSha256.toLowerCase(), ...grant };
  });
}

/** Longest reuse of a positive TokenReview: a revoked ServiceAccount keeps working this long. */
const MAX_REVIEW_CACHE_MS = 5 * 60_000;

function parseControllerAuth(c: Checked, cwd: string): ServiceConfig["controllerAuth"] {
  const k = c.controllerAuth.kubernetes;
  if (k === undefined) {
    if (c.kubernetesBindings.length > 0)
      throw usage(
        "kubernetesBindings",
        "needs controllerAuth.kubernetes (the API server that reviews the tokens)",
      );
    return {};
  }
  const tokenFile = resolve(cwd, k.tokenFile);
  readFileText(tokenFile, "controllerAuth.kubernetes.tokenFile");
  const kubernetes: { -readonly [K in keyof KubernetesReview]: KubernetesReview[K] } = {
    server: k.server.replace(/\/+$/, ""),
    tokenFile,
    cacheTtlMs: parseDuration(k.cacheTtl, "controllerAuth.kubernetes.cacheTtl", { min: 0 }),
  };
  if (kubernetes.cacheTtlMs > MAX_REVIEW_CACHE_MS)
    throw usage("controllerAuth.kubernetes.cacheTtl", "must be at most 5m");
  if (k.caFile !== undefined) {
    const caPem = readFileText(resolve(cwd, k.caFile), "controllerAuth.kubernetes.caFile");
    if (!caPem.includes("-----BEGIN CERTIFICATE-----"))
      throw usage("controllerAuth.kubernetes.caFile", "must be a PEM certificate");
    kubernetes.caPem = caPem;
  }
  if (k.audiences !== undefined) kubernetes.audiences = k.audiences;
  return { kubernetes };
}

function parseCreationRules(value: unknown[]): SopsConfig {
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
  f: RawArtifact | undefined,
  key: "fetcherArtifact" | "fetcherArtifactWindows",
  cwd: string,
): FetcherArtifact | undefined {
  if (f === undefined) return undefined;
  if ((f.publicKeyPem === undefined) === (f.publicKeyFile === undefined)) {
    throw usage(key, "needs exactly one of publicKeyPem and publicKeyFile");
  }
  const publicKeyPem =
    f.publicKeyPem ?? readFileText(resolve(cwd, f.publicKeyFile as string), `${key}.publicKeyFile`);
  if (!publicKeyPem.includes("-----BEGIN PUBLIC KEY-----")) {
    throw usage(`${key}.publicKeyPem`, "must be a PEM public key (-----BEGIN PUBLIC KEY-----)");
  }
  const out: { -readonly [K in keyof FetcherArtifact]: FetcherArtifact[K] } = {
    url: f.url,
    sha256: f.sha256.toLowerCase(),
    signatureUrl: f.signatureUrl,
    publicKeyPem: publicKeyPem.trim(),
  };
  if (f.sha512 !== undefined) out.sha512 = f.sha512.toLowerCase();
  return out;
}

/** Bytes of a derivation key file, at least 32 (256 bits); never echoed. */
function readDerivationKey(path: string | undefined, cwd: string): Uint8Array | undefined {
  if (path === undefined) return undefined;
  let bytes: Buffer;
  try {
    bytes = readFileSync(resolve(cwd, path));
  } catch {
    throw usage("bootstrapToken.derivationKeyFile", `cannot read ${path}`);
  }
  // A trailing line break (an editor's, a copy's) is not part of a key written as text. A key
  // of random bytes (`head -c 32 /dev/urandom`) ends in 0x0a or 0x0d one time in 128: it is
  // used whole when taking the break off would leave fewer than 32 bytes.
  let end = bytes.length;
  while (end > 0 && (bytes[end - 1] === 0x0a || bytes[end - 1] === 0x0d)) end--;
  if (end >= 32) bytes = bytes.subarray(0, end);
  if (bytes.length < 32) throw usage("bootstrapToken.derivationKeyFile", `${path} holds fewer than 32 bytes`);
  return new Uint8Array(bytes);
}

function parseBootstrapCommands(rules: Checked["bootstrapCommands"]): BootstrapCommandRule[] {
  return rules.map((r, i) => {
    const where = `bootstrapCommands[${i}]`;
    try {
      return { match: compileRegex(r.match), command: checkBootstrapCommand(r.command, `${where}.command`) };
    } catch (err) {
      if (err instanceof BootsealError) throw usage(where, err.message);
      throw err;
    }
  });
}

/** `trustProxy`: a boolean, or addresses/CIDRs as a list or a comma-separated string. */
function parseTrustProxy(value: Checked["trustProxy"]): boolean | string[] {
  if (typeof value === "boolean") return value;
  const items: unknown[] = typeof value === "string" ? value.split(",") : value;
  const addresses = items.map((a) => (typeof a === "string" ? a.trim() : ""));
  if (addresses.length === 0 || addresses.some((a) => !/^[0-9a-fA-F.:]+(\/\d{1,3})?$/.test(a))) {
    throw usage("trustProxy", "must be true, false, or a list of IP addresses or CIDRs");
  }
  return addresses;
}

function parseLimits(l: Checked["limits"]): ServiceConfig["limits"] {
  const ms = (key: "headersTimeout" | "requestTimeout" | "idleTimeout") =>
    parseDuration(l[key], `limits.${key}`, { min: 1000 });
  const headersTimeoutMs = ms("headersTimeout");
  const requestTimeoutMs = ms("requestTimeout");
  // Node refuses a head deadline later than the whole request's.
  if (headersTimeoutMs > requestTimeoutMs) {
    throw usage("limits.headersTimeout", "must not be longer than limits.requestTimeout");
  }
  return {
    bodyBytes: l.bodyBytes,
    headersTimeoutMs,
    requestTimeoutMs,
    idleTimeoutMs: ms("idleTimeout"),
    maxConnections: l.maxConnections,
    maxConnectionsPerAddress: l.maxConnectionsPerAddress,
  };
}

/** Validates a raw configuration (file + variables + flags merged) into a ServiceConfig. */
export function validateServiceConfig(rawInput: Raw, cwd: string = process.cwd()): ServiceConfig {
  if (!isMapping(rawInput)) throw usage("config", "must be a mapping");
  // YAML reads `oneTimeFetch: off` as a string but `oneTimeFetch: false` as a boolean: both mean off.
  const raw = rawInput.oneTimeFetch === false ? { ...rawInput, oneTimeFetch: "off" } : rawInput;
  const c = checkSchema(raw) as Checked;
  const tls = c.tls && {
    cert: resolve(cwd, c.tls.cert),
    key: resolve(cwd, c.tls.key),
    ...(c.tls.clientCa === undefined ? {} : { clientCa: resolve(cwd, c.tls.clientCa) }),
  };
  const fetcherArtifact = parseFetcherArtifact(c.fetcherArtifact, "fetcherArtifact", cwd);
  const fetcherArtifactWindows = parseFetcherArtifact(
    c.fetcherArtifactWindows,
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
  if (c.controllers.length === 0 && c.kubernetesBindings.length === 0)
    throw usage("controllers", "needs at least one controller ({name, tokenSha256, scopes})");
  const config: ServiceConfig = {
    listen: parseListenAddress(c.listen),
    trustProxy: parseTrustProxy(c.trustProxy),
    store: c.store,
    ...storeSettingsOf(c),
    creationRules: parseCreationRules(c.creation_rules),
    controllers: parseControllers(c.controllers, tls?.clientCa !== undefined),
    kubernetesBindings: c.kubernetesBindings,
    controllerAuth: parseControllerAuth(c, cwd),
    bootstrapToken: {
      ttlMs: parseDuration(c.bootstrapToken.ttl, "bootstrapToken.ttl", { min: 1000 }),
      uses: c.bootstrapToken.uses,
    },
    bootstrapCommands: parseBootstrapCommands(c.bootstrapCommands),
    artifacts: {
      dir: c.artifacts.dir === undefined ? defaultArtifactsDir() : resolve(cwd, c.artifacts.dir),
      signingKeyFile: resolve(
        cwd,
        c.artifacts.signingKeyFile ?? join(c.dataDir, "keys", "artifact-signing.pem"),
      ),
    },
    oneTimeFetch: c.oneTimeFetch,
    limits: parseLimits(c.limits),
    rateLimit: c.rateLimit,
    machineAuth: parseMachineAuth(c.machineAuth, c.publicUrl),
    audit: {
      path: c.audit.path === "-" || isAbsolute(c.audit.path) ? c.audit.path : resolve(cwd, c.audit.path),
      mode: Number.parseInt(c.audit.mode, 8),
    },
    events: c.events,
    statusReports: {
      coalesceMs: parseDuration(c.statusReports.coalesce, "statusReports.coalesce", { min: 0 }),
      maxHeldMachines: c.statusReports.maxHeldMachines,
    },
    metrics: { phaseRefreshMs: parseDuration(c.metrics.phaseRefresh, "metrics.phaseRefresh", { min: 0 }) },
    dataDir: resolve(cwd, c.dataDir),
    logLevel: c.logLevel,
  };
  // Assigned, not spread: an absent key stays absent (the "not configured" of ServiceConfig).
  const out = config as { -readonly [K in keyof ServiceConfig]: ServiceConfig[K] };
  if (c.publicUrl !== undefined) out.publicUrl = c.publicUrl.replace(/\/+$/, "");
  if (tls) out.tls = tls;
  const derivationKey = readDerivationKey(c.bootstrapToken.derivationKeyFile, cwd);
  if (derivationKey) out.bootstrapToken = { ...out.bootstrapToken, derivationKey };
  if (fetcherArtifact) out.fetcherArtifact = fetcherArtifact;
  if (fetcherArtifactWindows) out.fetcherArtifactWindows = fetcherArtifactWindows;
  return config;
}
