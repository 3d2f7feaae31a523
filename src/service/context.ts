/** What the routes share: built once per app by buildApp, holding no per-machine state. */
import type { ProviderDeps } from "../../providers/keys/index.ts";
import type { MachineAuthConfig } from "../config/machine-auth.ts";
import type { BootstrapCommandRule, FetcherArtifact, OneTimeFetch } from "../config/service-config.ts";
import type { SopsConfig } from "../config/sops-config.ts";
import type { ArtifactCatalog } from "./artifacts.ts";
import type { EventsBus } from "./events-bus.ts";
import type { MachineStore } from "./machine-store.ts";
import type { Metrics } from "./plugins/metrics.ts";
import type { StatusCoalescer } from "./status-coalescer.ts";

export interface ServiceContext {
  readonly machines: MachineStore;
  readonly rules: SopsConfig;
  readonly keyDeps: ProviderDeps;
  readonly bootstrapToken: {
    readonly ttlMs: number;
    readonly uses: number;
    /** Publishes derive their tokens from it (stable GET …/userdata); absent: random tokens. */
    readonly derivationKey?: Uint8Array;
  };
  /** The bootstrap command per machine (`bootstrapCommands`), when a publish names none. */
  readonly bootstrapCommands: readonly BootstrapCommandRule[];
  /** The executables the service serves and signs itself (/v1/artifacts/). */
  readonly artifacts: ArtifactCatalog;
  readonly oneTimeFetch: OneTimeFetch;
  readonly bodyLimit: number;
  /** Linux fetcher: cloud-init and Ignition stubs. */
  readonly fetcherArtifact: FetcherArtifact | undefined;
  /** Windows fetcher (bootseal.exe): PowerShell stubs; never replaced by the Linux one. */
  readonly fetcherArtifactWindows: FetcherArtifact | undefined;
  /** `publicUrl` from the configuration; undefined: derived from the request's Host. */
  readonly publicUrl: string | undefined;
  readonly events: EventsBus;
  /** Cloud-identity login: bindings (which machines log in how) and the flags stubs pass. */
  readonly machineAuth: MachineAuthConfig;
  /** Machines' status reports: intermediate ones held, terminal ones written (status-coalescer.ts). */
  readonly statusReports: StatusCoalescer;
  readonly metrics: Metrics;
  readonly heartbeatMs: number;
  now(): Date;
}

/** RFC 9110 strong etags are quoted; stores may hand them back either way. */
export function quoteEtag(etag: string): string {
  return etag.startsWith('"') || etag.startsWith('W/"') ? etag : `"${etag}"`;
}

/** True when an If-None-Match header names this etag (or is `*`). */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const bare = (t: string) => t.trim().replace(/^W\//, "").replace(/^"|"$/g, "");
  const wanted = bare(etag);
  return header.split(",").some((t) => t.trim() === "*" || bare(t) === wanted);
}
