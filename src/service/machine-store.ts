/**
 * The store layout (design.md) and the compare-and-swap loops over it. Nothing here is cached:
 * every replica reads the store, and every read-modify-write is a conditional put retried on
 * a lost race, so any number of replicas can serve the same machines.
 *
 *   configs/<ns>/<name>         the encrypted document
 *   tokens/<ns>/<name>.json     bootstrap token record (SHA-256, expiry, uses left)
 *   status/<ns>/<name>.json     current phase, publish counter and history (last 100)
 */

import type { ObjectInfo, ObjectStore } from "../../providers/stores/object-store.ts";
import type { CallOptions } from "../call-options.ts";
import { BootsealError } from "../errors.ts";
import { isDnsLabel, type MachineRef, machineId } from "./names.ts";
import { decodeTokenRecord, digestsEqual, encodeTokenRecord, sha256Hex, type TokenRecord } from "./tokens.ts";

export const MACHINE_PHASES = ["fetching", "decrypted", "written", "running", "succeeded", "failed"] as const;
export const PHASES = ["published", ...MACHINE_PHASES] as const;
export type Phase = (typeof PHASES)[number];
export type DocumentFormat = "binary" | "json" | "yaml";

export const HISTORY_LIMIT = 100;
const CAS_ATTEMPTS = 20;

export const configKey = (m: MachineRef): string => `configs/${m.namespace}/${m.name}`;
export const tokenKey = (m: MachineRef): string => `tokens/${m.namespace}/${m.name}.json`;
export const statusKey = (m: MachineRef): string => `status/${m.namespace}/${m.name}.json`;

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
}

export interface PublishedConfig {
  readonly etag: string;
  readonly sha256: string;
  readonly publishedAt: string;
  readonly format: DocumentFormat;
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
}

const encodeJson = (value: unknown): Uint8Array => Buffer.from(`${JSON.stringify(value)}\n`);

function decodeStatus(body: Uint8Array): StatusRecord {
  try {
    const r = JSON.parse(Buffer.from(body).toString("utf8")) as StatusRecord;
    if (typeof r.phase === "string" && typeof r.version === "number" && Array.isArray(r.history)) return r;
  } catch {
    // fall through
  }
  throw new BootsealError("INTERNAL", "a stored status record is malformed");
}

function isLostRace(err: unknown): boolean {
  return err instanceof BootsealError && err.code === "PRECONDITION_FAILED";
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Read-modify-write of one JSON object with a conditional put, retried when another writer
 * got there first. `mutate` returns the new value, or undefined to leave the object as is.
 */
async function updateJson<T>(
  store: ObjectStore,
  key: string,
  decode: (body: Uint8Array) => T,
  mutate: (current: T | null) => T | undefined,
  options: CallOptions,
): Promise<T | undefined> {
  for (let attempt = 0; ; attempt++) {
    const current = await store.get(key, options);
    const next = mutate(current ? decode(current.body) : null);
    if (next === undefined) return undefined;
    try {
      await store.put(key, encodeJson(next), current ? { ifMatch: current.etag } : { ifNoneMatch: "*" }, {
        ...options,
        contentType: "application/json",
      });
      return next;
    } catch (err) {
      if (!isLostRace(err) || attempt + 1 >= CAS_ATTEMPTS) throw err;
      // Jittered backoff: racing replicas spread out instead of colliding again.
      await pause(Math.random() * Math.min(200, 5 * 2 ** attempt));
    }
  }
}

export function appendHistory(history: readonly StatusEntry[], entry: StatusEntry): StatusEntry[] {
  return [...history, entry].slice(-HISTORY_LIMIT);
}

export interface MachineStore {
  readonly store: ObjectStore;
  readStatus(m: MachineRef, options?: CallOptions): Promise<StatusRecord | null>;
  /** A publish: bumps the version, sets phase `published`. */
  recordPublish(
    m: MachineRef,
    config: PublishedConfig,
    by: string,
    now: Date,
    options?: CallOptions,
  ): Promise<StatusRecord>;
  recordPhase(
    m: MachineRef,
    entry: Omit<StatusEntry, "version">,
    options?: CallOptions,
  ): Promise<StatusRecord>;
  recordDeleted(m: MachineRef, now: Date, options?: CallOptions): Promise<void>;
  readToken(m: MachineRef, options?: CallOptions): Promise<TokenRecord | null>;
  writeToken(m: MachineRef, record: TokenRecord, options?: CallOptions): Promise<void>;
  /** Takes one fetch off the token with this hash; TOKEN_EXHAUSTED when none is left. */
  consumeTokenUse(m: MachineRef, tokenSha256: string, options?: CallOptions): Promise<TokenRecord>;
  deleteConfigAndToken(m: MachineRef, options?: CallOptions): Promise<boolean>;
  deleteToken(m: MachineRef, options?: CallOptions): Promise<void>;
  /** Machines with a status record, in store (key) order. */
  listMachines(namespace: string | undefined, options?: CallOptions): AsyncIterable<MachineRef>;
}

export function machineStore(store: ObjectStore): MachineStore {
  return {
    store,

    async readStatus(m, options = {}) {
      const obj = await store.get(statusKey(m), options);
      return obj ? decodeStatus(obj.body) : null;
    },

    async recordPublish(m, config, by, now, options = {}) {
      const at = now.toISOString();
      const out = await updateJson(
        store,
        statusKey(m),
        decodeStatus,
        (current) => {
          const version = (current?.version ?? 0) + 1;
          return {
            namespace: m.namespace,
            name: m.name,
            phase: "published" as const,
            version,
            updatedAt: at,
            config,
            history: appendHistory(current?.history ?? [], { phase: "published", at, by, version }),
          };
        },
        options,
      );
      return out as StatusRecord;
    },

    async recordPhase(m, entry, options = {}) {
      const out = await updateJson(
        store,
        statusKey(m),
        decodeStatus,
        (current) => {
          const version = current?.version ?? 0;
          return {
            namespace: m.namespace,
            name: m.name,
            phase: entry.phase,
            version,
            updatedAt: entry.at,
            config: current?.config ?? null,
            history: appendHistory(current?.history ?? [], { ...entry, version }),
          };
        },
        options,
      );
      return out as StatusRecord;
    },

    async recordDeleted(m, now, options = {}) {
      await updateJson(
        store,
        statusKey(m),
        decodeStatus,
        (current) => (current ? { ...current, config: null, updatedAt: now.toISOString() } : undefined),
        options,
      );
    },

    async readToken(m, options = {}) {
      const obj = await store.get(tokenKey(m), options);
      return obj ? decodeTokenRecord(obj.body) : null;
    },

    async writeToken(m, record, options = {}) {
      // Unconditional on purpose: a new token replaces the old one, whoever wrote it.
      await store.put(
        tokenKey(m),
        encodeTokenRecord(record),
        { unconditional: true },
        {
          ...options,
          contentType: "application/json",
        },
      );
    },

    async consumeTokenUse(m, tokenSha256, options = {}) {
      const out = await updateJson(
        store,
        tokenKey(m),
        decodeTokenRecord,
        (current) => {
          if (!current || !digestsEqual(current.sha256, tokenSha256)) {
            throw new BootsealError("UNAUTHORIZED", "the bootstrap token was revoked or replaced");
          }
          if (current.usesLeft <= 0) {
            throw new BootsealError("TOKEN_EXHAUSTED", "the bootstrap token has no fetches left");
          }
          return { ...current, usesLeft: current.usesLeft - 1 };
        },
        options,
      );
      return out as TokenRecord;
    },

    async deleteConfigAndToken(m, options = {}) {
      const existed = await store.delete(configKey(m), undefined, options);
      await store.delete(tokenKey(m), undefined, options);
      return existed;
    },

    async deleteToken(m, options = {}) {
      await store.delete(tokenKey(m), undefined, options);
    },

    async *listMachines(namespace, options = {}) {
      const prefix = namespace ? `status/${namespace}/` : "status/";
      for await (const info of store.list(prefix, options)) {
        const ref = machineFromStatusKey(info);
        if (ref) yield ref;
      }
    },
  };
}

/** `status/<ns>/<name>.json` -> the machine; null for anything else under status/. */
export function machineFromStatusKey(info: ObjectInfo): MachineRef | null {
  const m = /^status\/([^/]+)\/([^/]+)\.json$/.exec(info.key);
  if (!m || !isDnsLabel(m[1] as string) || !isDnsLabel(m[2] as string)) return null;
  return { namespace: m[1] as string, name: m[2] as string };
}

/** A token presented by a machine, checked against its record: hash, then expiry. */
export function checkToken(record: TokenRecord | null, token: string, m: MachineRef, now: Date): TokenRecord {
  if (!record || record.machine !== machineId(m) || !digestsEqual(record.sha256, sha256Hex(token))) {
    throw new BootsealError("UNAUTHORIZED", "unknown, revoked or replaced bootstrap token");
  }
  if (Date.parse(record.expiresAt) <= now.getTime()) {
    throw new BootsealError(
      "TOKEN_EXPIRED",
      "the bootstrap token has expired; publish again or mint a new one",
    );
  }
  return record;
}
