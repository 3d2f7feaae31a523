/**
 * How a publish and a machine's report change its status record: pure functions, applied by
 * machine-store.ts inside one compare-and-swap of the record (so they may run again, on what
 * the store holds, after a lost race or a stale guess).
 */
import type { MachineId } from "../machine/machine-id.ts";
import type { Seen } from "./records.ts";
import { appendHistory, madeBefore, mergeHistory } from "./status-history.ts";
import type { PublishedConfig, StatusEntry, StatusRecord } from "./status-record.ts";
import { mirrorOf, requireCurrentToken, type TokenRecord } from "./tokens.ts";

export interface PublishRecord {
  readonly config: PublishedConfig;
  /** Who published (a controller's name), for the history. */
  readonly by: string;
  readonly now: Date;
  /** The token the publish minted; a function of the new version for a derived token. */
  readonly token: TokenRecord | ((version: number) => TokenRecord);
  readonly seen?: Seen<StatusRecord>;
}

export interface PhaseRecord {
  /** One report, or several a replica held (status-coalescer.ts); at least one. */
  readonly entries: readonly Omit<StatusEntry, "version">[];
  /** How many of `entries`, from the first, the replica held (0 when absent). */
  readonly held?: number;
  /** SHA-256 of the reporting machine's token. */
  readonly tokenSha256: string;
  readonly seen?: Seen<StatusRecord>;
  /**
   * The config was deleted just before (one-time fetch `after-success`): the same write sets
   * `config` and the token mirror to null.
   */
  readonly configDeleted?: boolean;
}

/** A publish: the version goes up, the phase is `published` and the new token is mirrored. */
export function afterPublish(
  m: MachineId,
  current: StatusRecord | null,
  { config, by, now, token }: PublishRecord,
): StatusRecord {
  const at = now.toISOString();
  const version = (current?.version ?? 0) + 1;
  return {
    namespace: m.namespace,
    name: m.name,
    phase: "published",
    version,
    updatedAt: at,
    config,
    history: appendHistory(current?.history ?? [], { phase: "published", at, by, version }),
    token: mirrorOf(typeof token === "function" ? token(version) : token),
  };
}

/**
 * A machine's reports joined to its record; UNAUTHORIZED when the record's mirror says the
 * reporting token was revoked or replaced.
 */
export function afterReport(
  m: MachineId,
  current: StatusRecord | null,
  { entries, held = 0, tokenSha256, configDeleted = false }: PhaseRecord,
): StatusRecord {
  // A record without a mirror (older than it) was checked against the token record.
  const mirror = current?.token;
  const latest = entries.reduce((a, b) => (b.at >= a.at ? b : a));
  // Made before what the record holds now: held reports written late (status-coalescer.ts).
  const beforeStored =
    current !== null &&
    madeBefore(latest, { phase: current.phase, at: current.updatedAt }, entries.indexOf(latest) < held);
  // Reports a replica held that were made before the config and token went (a one-time
  // delete after `succeeded` through another replica) were checked when they were made:
  // they still join the history.
  const madeBeforeDelete = mirror === null && beforeStored;
  if (mirror !== undefined && !madeBeforeDelete) requireCurrentToken(mirror, tokenSha256);
  const version = current?.version ?? 0;
  // Held reports written late join the history, not the present.
  const present = beforeStored ? current : { phase: latest.phase, updatedAt: latest.at };
  return {
    namespace: m.namespace,
    name: m.name,
    phase: present.phase,
    version,
    updatedAt: present.updatedAt,
    config: configDeleted ? null : (current?.config ?? null),
    history: mergeHistory(
      current?.history ?? [],
      entries.map((e) => ({ ...e, version })),
      held,
    ),
    token: configDeleted ? null : current?.token,
  };
}
