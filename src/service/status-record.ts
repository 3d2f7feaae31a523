/**
 * A machine's status record (`status/<ns>/<name>.json`): its phase, publish counter, the
 * published config, the history of reports and publishes (bounded by status-history.ts) and
 * the mirror of its current bootstrap token. Types and the check of a stored record.
 */
import { BootsealError } from "../errors.ts";
import type { Phase } from "../machine/status-protocol.ts";

export type DocumentFormat = "binary" | "json" | "yaml";

export interface StatusEntry {
  readonly phase: Phase;
  readonly at: string;
  /** Who set it: a controller name or `machine`. */
  readonly by: string;
  readonly message?: string;
  readonly attempt?: number;
  readonly exitCode?: number;
  readonly output?: string;
  /** The publish this entry belongs to. */
  readonly version: number;
  /** Set when the output or message was cut to HISTORY_ENTRY_MAX_BYTES when stored. */
  readonly truncated?: boolean;
}

/**
 * The Cluster API objects a publish was made for, as the controller names them (each a
 * Kubernetes object name, checked by the publish route's schema): shown by the fleet page.
 */
export interface CapiRef {
  readonly cluster?: string;
  readonly machine?: string;
  readonly bootsealConfig?: string;
}

export interface PublishedConfig {
  readonly etag: string;
  readonly sha256: string;
  readonly publishedAt: string;
  readonly format: DocumentFormat;
  /** Set when the publisher named its Cluster API objects (`?capiCluster=` …). */
  readonly capi?: CapiRef;
  /** The SHA-256 of the EK (SubjectPublicKeyInfo) the data key is sealed to (X-Bootseal-Tpm-Ek). */
  readonly tpmEkSha256?: string;
}

/** The machine's current bootstrap token as its status record mirrors it (never the token). */
export interface TokenMirror {
  readonly sha256: string;
  readonly expiresAt: string;
  /** A derived token's salt and the published bootstrap command: GET …/userdata renders from these. */
  readonly salt?: string;
  readonly command?: string;
}

export interface StatusRecord {
  readonly namespace: string;
  readonly name: string;
  readonly phase: Phase;
  /** Publish counter: 1 on the first publish, +1 on each one after. */
  readonly version: number;
  readonly updatedAt: string;
  /** null after the config was deleted. */
  readonly config: PublishedConfig | null;
  readonly history: readonly StatusEntry[];
  /**
   * The current token's digest and expiry, written with every token (publish, mint) before the
   * token record itself; null once the token is deleted. Absent in records written before
   * the mirror existed: the token record is read instead.
   */
  readonly token?: TokenMirror | null;
}

export function decodeStatus(text: string): StatusRecord {
  try {
    const r = JSON.parse(text) as StatusRecord;
    if (typeof r.phase === "string" && typeof r.version === "number" && Array.isArray(r.history)) return r;
  } catch {
    // fall through
  }
  throw new BootsealError("INTERNAL", "a stored status record is malformed");
}
