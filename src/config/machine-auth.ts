/**
 * `machineAuth` of the service configuration, resolved: the machine-identity logins
 * (docs/api.md "Machine login", docs/security.md "Machine identity"). The schema
 * (service-config-schema.ts) checks the shapes; this checks what it cannot say: the match
 * keys each method knows, the machine patterns, and that bindings come with an audience.
 * Matching itself lives with the service (src/service/identity/bindings.ts).
 */
import { parseDuration } from "../duration.ts";
import { BootsealError } from "../errors.ts";
import { type CloudAuthMethod, isCloudAuthMethod } from "../machine/identity-login.ts";
import { isDnsLabel } from "../machine/machine-id.ts";
import {
  type AzureMachineAuth,
  type AzureMachineAuthConfig,
  type GcpMachineAuth,
  type GcpMachineAuthConfig,
  resolveAzureMachineAuth,
  resolveGcpMachineAuth,
} from "./machine-auth-jwt.ts";
import {
  resolveSpiffeMachineAuth,
  type SpiffeMachineAuth,
  type SpiffeMachineAuthConfig,
} from "./machine-auth-spiffe.ts";

/**
 * What a binding may match on, per method (the attributes each verifier proves,
 * src/service/identity/verifier.ts). A typo in a key is refused instead of matching nothing.
 * Azure has no vmId: it is not in the token (src/service/identity/azure.ts).
 */
export const MATCH_KEYS: Readonly<Record<CloudAuthMethod, readonly string[]>> = {
  "aws-iam": ["arn", "account", "userId", "role", "session"],
  gcp: ["project", "projectNumber", "zone", "instanceName", "instanceId"],
  azure: [
    "tenant",
    "subscription",
    "resourceGroup",
    "vmName",
    "vmScaleSet",
    "vmResourceId",
    "objectId",
    "clientId",
  ],
  spiffe: ["id", "trustDomain", "path"],
  // ekPublicSha256 enrols one EK (exact, no glob); ekCertIssuer matches EKs certified by the CA bundle.
  tpm: ["ekPublicSha256", "ekCertIssuer"],
};

/** PCR indices a tpm binding may name (the sha256 bank of a PC-client TPM). */
const PCR_INDEX = /^(?:[0-9]|1[0-9]|2[0-3])$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** `ns/name`, or `ns/*` (name null): every machine of the namespace. */
export interface MachinePattern {
  readonly namespace: string;
  readonly name: string | null;
}

export interface MachineBinding {
  readonly method: CloudAuthMethod;
  /** Attribute -> exact value or a `*` glob (an IAM role ARN also matches its sessions). */
  readonly match: Readonly<Record<string, string>>;
  readonly machines: readonly MachinePattern[];
  /**
   * AWS: the caller must be an assumed role whose session name is an EC2 instance id (what
   * an instance profile's credentials carry), and the machine's name must be that id.
   */
  readonly instanceIdFromSession: boolean;
  /** tpm: PCR index -> its expected sha256-bank value (hex); what the quote must show. */
  readonly pcrs?: Readonly<Record<number, string>>;
  /** tpm: PCRs replayed from the machine's event log, and the event digests allowed in them. */
  readonly eventLog?: TpmEventLogPolicy;
}

/** A `tpm` binding's `eventLog`: measured boot checked event by event. */
export interface TpmEventLogPolicy {
  /** The PCRs whose values come from replaying the log (the quote must show the replay). */
  readonly pcrs: readonly number[];
  /** Every event extended into those PCRs must have one of these sha256 digests (hex). */
  readonly allowedDigests: ReadonlySet<string>;
}

/** `machineAuth.tpm`: how EKs are trusted, how long a challenge lives. */
export interface TpmMachineAuth {
  /** PEM file: the EK CAs (vendor or cloud) an EK certificate must chain to. */
  readonly ekCaFile?: string;
  readonly challengeTtlMs: number;
}

export interface MachineAuthConfig {
  /**
   * This service's identity for logins (the AWS server-ID header's value, the JWT audience):
   * `machineAuth.audience`, else the origin of `publicUrl`; undefined: logins are off.
   */
  readonly audience?: string;
  /** Lifetime of the bootstrap token a login mints (one boot). */
  readonly tokenTtlMs: number;
  readonly aws: { readonly stsEndpoint: string; readonly region: string };
  /** Google's keys and issuer by default: every service can verify GCP logins. */
  readonly gcp: GcpMachineAuth;
  /** Undefined: no tenant configured, no Azure logins. */
  readonly azure?: AzureMachineAuth;
  /** Undefined: no trust domains configured, no SPIFFE logins. */
  readonly spiffe?: SpiffeMachineAuth;
  readonly tpm: TpmMachineAuth;
  readonly bindings: readonly MachineBinding[];
}

/** As the schema left it (defaults filled). */
export interface RawMachineAuth {
  audience?: string;
  tokenTtl: string | number;
  aws: { stsEndpoint?: string; region: string };
  gcp?: GcpMachineAuthConfig;
  azure?: AzureMachineAuthConfig;
  spiffe?: SpiffeMachineAuthConfig;
  tpm?: { ekCaFile?: string; challengeTtl?: string | number };
  bindings: {
    method: string;
    match?: Record<string, unknown>;
    machines: string | string[];
    instanceIdFromSession?: boolean;
    pcrs?: Record<string, unknown>;
    eventLog?: { pcrs?: unknown; allowedDigests?: unknown };
  }[];
}

function usage(where: string, message: string): BootsealError {
  return new BootsealError("USAGE", `${where}: ${message}`);
}

function parsePattern(text: string, where: string): MachinePattern {
  const [namespace, name, ...rest] = text.split("/");
  if (namespace === undefined || name === undefined || rest.length > 0 || !isDnsLabel(namespace)) {
    throw usage(where, `wants "ns/name" or "ns/*", got ${JSON.stringify(text)}`);
  }
  if (name === "*") return { namespace, name: null };
  if (!isDnsLabel(name)) throw usage(where, `wants "ns/name" or "ns/*", got ${JSON.stringify(text)}`);
  return { namespace, name };
}

function parseBinding(b: RawMachineAuth["bindings"][number], i: number): MachineBinding {
  const where = `machineAuth.bindings[${i}]`;
  if (!isCloudAuthMethod(b.method))
    throw usage(`${where}.method`, `unknown method ${JSON.stringify(b.method)}`);
  const allowed = MATCH_KEYS[b.method];
  const match: Record<string, string> = {};
  for (const [key, value] of Object.entries(b.match ?? {})) {
    if (!allowed.includes(key)) {
      throw usage(
        `${where}.match.${key}`,
        `is not an attribute of ${b.method} (one of ${allowed.join(", ")})`,
      );
    }
    if (typeof value !== "string" || value === "") {
      throw usage(`${where}.match.${key}`, "must be a non-empty string");
    }
    // The azure verifier lower-cases what it proves (ARM ids and GUIDs are case-insensitive).
    match[key] = b.method === "azure" ? value.toLowerCase() : value;
  }
  // A binding that matched every caller of a method would let any cloud account in.
  if (Object.keys(match).length === 0) throw usage(`${where}.match`, "needs at least one attribute");
  const list = typeof b.machines === "string" ? [b.machines] : b.machines;
  if (list.length === 0) throw usage(`${where}.machines`, "needs at least one machine");
  const machines = list.map((m, j) => parsePattern(String(m), `${where}.machines[${j}]`));
  const instanceIdFromSession = b.instanceIdFromSession === true;
  if (instanceIdFromSession && b.method !== "aws-iam") {
    throw usage(`${where}.instanceIdFromSession`, "applies to aws-iam bindings only");
  }
  if (b.method === "tpm" && match.ekPublicSha256 !== undefined && !SHA256_HEX.test(match.ekPublicSha256)) {
    // A glob here would trust every EK.
    throw usage(`${where}.match.ekPublicSha256`, "must be 64 lower-case hex digits (no glob)");
  }
  const pcrs = parsePcrs(b, where);
  const eventLog = parseEventLog(b, where, pcrs);
  return {
    method: b.method,
    match,
    machines,
    instanceIdFromSession,
    ...(pcrs ? { pcrs } : {}),
    ...(eventLog ? { eventLog } : {}),
  };
}

function parseEventLog(
  b: RawMachineAuth["bindings"][number],
  where: string,
  fixed: Record<number, string> | undefined,
): TpmEventLogPolicy | undefined {
  if (b.eventLog === undefined) return undefined;
  if (b.method !== "tpm") throw usage(`${where}.eventLog`, "applies to tpm bindings only");
  const { pcrs, allowedDigests } = b.eventLog;
  if (!Array.isArray(pcrs) || pcrs.length === 0)
    throw usage(`${where}.eventLog.pcrs`, "needs the PCRs to replay from the log");
  for (const p of pcrs) {
    if (!PCR_INDEX.test(String(p)))
      throw usage(`${where}.eventLog.pcrs`, `${String(p).slice(0, 8)} is not a PCR index (0-23)`);
    // One source per PCR: a fixed value and a replay could disagree about what is allowed.
    if (fixed?.[Number(p)] !== undefined) throw usage(`${where}.eventLog.pcrs`, `PCR ${p} is in pcrs too`);
  }
  // Without an allowlist the replay would accept any boot: every replayed PCR is checked.
  if (!Array.isArray(allowedDigests) || allowedDigests.length === 0)
    throw usage(`${where}.eventLog.allowedDigests`, "needs the sha256 digests of the allowed events");
  const allowed = new Set<string>();
  for (const d of allowedDigests) {
    if (typeof d !== "string" || !SHA256_HEX.test(d.toLowerCase()))
      throw usage(`${where}.eventLog.allowedDigests`, "each must be a sha256 digest (64 hex digits)");
    allowed.add(d.toLowerCase());
  }
  return { pcrs: [...new Set(pcrs.map(Number))].sort((x, y) => x - y), allowedDigests: allowed };
}

function parsePcrs(b: RawMachineAuth["bindings"][number], where: string): Record<number, string> | undefined {
  if (b.method !== "tpm") {
    if (b.pcrs !== undefined) throw usage(`${where}.pcrs`, "applies to tpm bindings only");
    return undefined;
  }
  const entries = Object.entries(b.pcrs ?? {});
  // Without PCRs a quote proves nothing about the boot: a tpm binding always names some.
  if (entries.length === 0 && b.eventLog === undefined)
    throw usage(`${where}.pcrs`, "a tpm binding needs at least one PCR (pcrs or eventLog.pcrs)");
  if (entries.length === 0) return undefined;
  const pcrs: Record<number, string> = {};
  for (const [index, value] of entries) {
    if (!PCR_INDEX.test(index)) throw usage(`${where}.pcrs.${index}`, "is not a PCR index (0-23)");
    if (typeof value !== "string" || !SHA256_HEX.test(value.toLowerCase())) {
      throw usage(`${where}.pcrs.${index}`, "must be the sha256 value (64 hex digits)");
    }
    pcrs[Number(index)] = value.toLowerCase();
  }
  return pcrs;
}

export function parseMachineAuth(raw: RawMachineAuth, publicUrl: string | undefined): MachineAuthConfig {
  const bindings = raw.bindings.map(parseBinding);
  const audience = raw.audience ?? (publicUrl === undefined ? undefined : new URL(publicUrl).origin);
  if (bindings.length > 0 && audience === undefined) {
    throw usage("machineAuth.audience", "is required with bindings when publicUrl is not set");
  }
  const region = raw.aws.region;
  const stsEndpoint = (raw.aws.stsEndpoint ?? `https://sts.${region}.amazonaws.com`).replace(/\/+$/, "");
  const azure = raw.azure === undefined ? undefined : resolveAzureMachineAuth(raw.azure);
  const unverifiable = bindings.findIndex((b) => b.method === "azure" && azure === undefined);
  if (unverifiable >= 0) {
    throw usage(`machineAuth.bindings[${unverifiable}]`, "an azure binding needs machineAuth.azure.tenant");
  }
  const spiffe = raw.spiffe === undefined ? undefined : resolveSpiffeMachineAuth(raw.spiffe);
  const untrusted = bindings.findIndex((b) => b.method === "spiffe" && spiffe === undefined);
  if (untrusted >= 0) {
    throw usage(
      `machineAuth.bindings[${untrusted}]`,
      "a spiffe binding needs machineAuth.spiffe.trustDomains",
    );
  }
  return {
    audience,
    tokenTtlMs: parseDuration(raw.tokenTtl, "machineAuth.tokenTtl", { min: 1000 }),
    aws: { stsEndpoint, region },
    gcp: resolveGcpMachineAuth(raw.gcp ?? {}),
    azure,
    spiffe,
    tpm: {
      ...(raw.tpm?.ekCaFile !== undefined ? { ekCaFile: raw.tpm.ekCaFile } : {}),
      challengeTtlMs: parseDuration(raw.tpm?.challengeTtl ?? "2m", "machineAuth.tpm.challengeTtl", {
        min: 1000,
      }),
    },
    bindings,
  };
}
