/**
 * Everything the service reads and writes about a machine, over the store layout of
 * src/machine/store-layout.ts (the only place that spells a key): its config, token record
 * and status record. This file is the façade; the work is in
 * - records.ts: reads and compare-and-swap writes of the JSON records, retried on a lost race;
 * - status-record.ts, status-transitions.ts, status-history.ts: the status record, what a
 *   publish or report does to it, and its bounded history;
 * - tokens.ts: the token checks a write makes (revoked or replaced, uses left).
 *
 * The store is the truth, so any number of replicas can serve the same machines. What a
 * replica caches (record-cache.ts) is the last version of each token and status record it
 * read or wrote, and only as a first guess: a read-modify-write may start from it, or from a
 * version the request already read (`Seen`), and only a conditional put on that very version
 * confirms it; a stale guess costs one lost race and a re-read, never a stale decision. The
 * one other use is readPhase, for the very version the store's listing names. Reads that
 * answer a request (readStatus, readToken) always go to the store.
 *
 * Store operations per request (docs/benchmarks.md): the status record mirrors the machine's
 * current token (`token`), so a status post checks its token and appends its entry with one
 * read and one conditional write of that record.
 */
import { randomUUID } from "node:crypto";
import type {
  ObjectInfo,
  ObjectStore,
  StoredObject,
  WriteCondition,
} from "../../providers/stores/object-store.ts";
import type { CallOptions } from "../call-options.ts";
import { BootsealError } from "../errors.ts";
import type { MachineId } from "../machine/machine-id.ts";
import type { Phase } from "../machine/status-protocol.ts";
import {
  configKey,
  machineFromStatusKey,
  READINESS_PROBE_KEY,
  statusKey,
  statusPrefix,
  tokenKey,
  writeProbeKey,
} from "../machine/store-layout.ts";
import type { RecordCache } from "./record-cache.ts";
import { isLostRace, Records, type Seen, type Versioned } from "./records.ts";
import { decodeStatus, type StatusRecord } from "./status-record.ts";
import { afterPublish, afterReport, type PhaseRecord, type PublishRecord } from "./status-transitions.ts";
import {
  decodeTokenRecord,
  isCurrentToken,
  mirrorOf,
  requireCurrentToken,
  spendUse,
  type TokenRecord,
} from "./tokens.ts";

export interface MachineStore {
  /** One cheap read of a key that is normally absent: the store answers and lets us read. */
  probe(options?: CallOptions): Promise<void>;
  /** A probe object created, read back and deleted: the store takes writes (POST /v1/check). */
  probeWrite(options?: CallOptions): Promise<void>;
  /** The stored document, or null when none is published. */
  getConfig(m: MachineId, options?: CallOptions): Promise<StoredObject | null>;
  /** The stored config's ETag as the store gives it, or null when none is published. */
  configEtag(m: MachineId, options?: CallOptions): Promise<string | null>;
  putConfig(
    m: MachineId,
    bytes: Uint8Array,
    condition: WriteCondition,
    contentType: string,
    options?: CallOptions,
  ): Promise<ObjectInfo>;
  /**
   * Deletes the config; with `etag`, only if it is still that version. False when nothing was
   * deleted: none was there, or another publish replaced it (left alone).
   */
  deleteConfig(m: MachineId, etag: string | undefined, options?: CallOptions): Promise<boolean>;
  readStatus(m: MachineId, options?: CallOptions): Promise<Versioned<StatusRecord> | null>;
  /**
   * A publish: bumps the version, sets phase `published` and mirrors the new token. `seen`
   * null when the machine is new (one create-only write).
   */
  recordPublish(m: MachineId, publish: PublishRecord, options?: CallOptions): Promise<StatusRecord>;
  /**
   * A machine's report, appended with one conditional write of the record it read (`seen`).
   * The write itself checks the reporting token against the record's mirror (UNAUTHORIZED
   * when it was replaced or deleted meanwhile), so a check made on a stale guess never lets a
   * report in.
   */
  recordPhase(m: MachineId, report: PhaseRecord, options?: CallOptions): Promise<StatusRecord>;
  /** A new token minted for a published machine: the status record mirrors it. */
  recordToken(m: MachineId, token: TokenRecord, options?: CallOptions): Promise<void>;
  /** The config and token are gone: `config` and the token mirror become null. */
  recordDeleted(m: MachineId, now: Date, options?: CallOptions): Promise<void>;
  readToken(m: MachineId, options?: CallOptions): Promise<Versioned<TokenRecord> | null>;
  /**
   * This replica's last seen version of a record, or undefined: a guess only, for checks that
   * a conditional write of that record confirms before anything is answered (RouteAuth
   * `confirmedBy`).
   */
  cachedToken(m: MachineId): Versioned<TokenRecord> | undefined;
  cachedStatus(m: MachineId): Versioned<StatusRecord> | undefined;
  writeToken(m: MachineId, record: TokenRecord, options?: CallOptions): Promise<void>;
  /** Takes one fetch off the token with this hash; TOKEN_EXHAUSTED when none is left. */
  consumeTokenUse(
    m: MachineId,
    tokenSha256: string,
    options?: CallOptions,
    seen?: Seen<TokenRecord>,
  ): Promise<TokenRecord>;
  /**
   * Gives back one fetch spent by consumeTokenUse, when the token with this hash is still the
   * machine's (a fetch that spent it while reading the config had nothing to send after all).
   */
  refundTokenUse(m: MachineId, tokenSha256: string, options?: CallOptions): Promise<void>;
  /**
   * One-time fetch `after-first-fetch`: claims the config version `etag` for this token with
   * one compare-and-swap on the token record (a use is spent and `firstFetch` set), before any
   * byte of the config is sent. Exactly one of any number of concurrent fetches, through any
   * replicas, gets `claimed`; the others get `already-fetched`. UNAUTHORIZED when the token was
   * replaced meanwhile, TOKEN_EXHAUSTED when it has no use left.
   */
  claimFirstFetch(
    m: MachineId,
    tokenSha256: string,
    etag: string,
    now: Date,
    options?: CallOptions,
    seen?: Seen<TokenRecord>,
  ): Promise<{ readonly claimed: true; readonly record: TokenRecord } | { readonly claimed: false }>;
  deleteConfigAndToken(m: MachineId, options?: CallOptions): Promise<boolean>;
  deleteToken(m: MachineId, options?: CallOptions): Promise<void>;
  /**
   * Machines with a status record, in store (key) order; `after` (`<ns>/<name>`, a page
   * cursor) skips every machine up to and including it in that order.
   */
  listMachines(
    namespace: string | undefined,
    after: string | undefined,
    options?: CallOptions,
  ): AsyncIterable<MachineId>;
  /** Every status record's version as the listing gives it: the phase counts (phase-counts.ts). */
  statusVersions(
    options?: CallOptions,
  ): AsyncIterable<{ readonly machine: MachineId; readonly etag: string }>;
  /**
   * The phase of the status record whose listed version is `etag`: from this replica's record
   * cache when it holds that very version (a boot storm's records were all written here), else
   * read from the store without caching it; null when absent.
   */
  readPhase(m: MachineId, etag: string, options?: CallOptions): Promise<Phase | null>;
}

/** `cache`: this replica's last seen records (record-cache.ts); without it every update reads first. */
export function machineStore(store: ObjectStore, cache?: RecordCache): MachineStore {
  const records = new Records(store, cache);
  // A machine's record of one kind, read, changed and written back (records.ts).
  const updater =
    <T>(keyOf: (m: MachineId) => string, decode: (text: string) => T) =>
    (m: MachineId, change: (current: T | null) => T | undefined, options: CallOptions, seen?: Seen<T>) =>
      records.update(keyOf(m), decode, change, options, seen);
  const updateStatus = updater(statusKey, decodeStatus);
  const updateToken = updater(tokenKey, decodeTokenRecord);

  return {
    async probe(options = {}) {
      await store.head(READINESS_PROBE_KEY, options);
    },

    async probeWrite(options = {}) {
      const key = writeProbeKey(randomUUID());
      const body = new TextEncoder().encode(`bootseal check ${new Date().toISOString()}\n`);
      await store.put(key, body, { ifNoneMatch: "*" }, { ...options, contentType: "text/plain" });
      try {
        const back = await store.get(key, options);
        if (!back || Buffer.compare(Buffer.from(back.body), Buffer.from(body)) !== 0)
          throw new BootsealError(
            "STORE_UNAVAILABLE",
            `the probe object ${key} did not read back as written`,
          );
      } finally {
        await store.delete(key, undefined, options);
      }
    },

    getConfig: (m, options = {}) => store.get(configKey(m), options),

    async configEtag(m, options = {}) {
      const info = await store.head(configKey(m), options);
      return info ? info.etag : null;
    },

    putConfig: (m, bytes, condition, contentType, options = {}) =>
      store.put(configKey(m), bytes, condition, { ...options, contentType }),

    async deleteConfig(m, etag, options = {}) {
      try {
        return await store.delete(configKey(m), etag === undefined ? undefined : { ifMatch: etag }, options);
      } catch (err) {
        if (isLostRace(err)) return false;
        throw err;
      }
    },

    readStatus: (m, options = {}) => records.read(statusKey(m), decodeStatus, options),
    cachedStatus: (m) => records.cached(statusKey(m), decodeStatus),
    cachedToken: (m) => records.cached(tokenKey(m), decodeTokenRecord),

    // A publish or a report always writes (never undefined: nothing to write).
    recordPublish: async (m, publish, options = {}) =>
      (await updateStatus(m, (current) => afterPublish(m, current, publish), options, publish.seen))!,

    recordPhase: async (m, report, options = {}) =>
      (await updateStatus(m, (current) => afterReport(m, current, report), options, report.seen))!,

    async recordToken(m, token, options = {}) {
      await updateStatus(
        m,
        (current) => (current ? { ...current, token: mirrorOf(token) } : undefined),
        options,
      );
    },

    async recordDeleted(m, now, options = {}) {
      const updatedAt = now.toISOString();
      await updateStatus(
        m,
        (current) => (current ? { ...current, config: null, token: null, updatedAt } : undefined),
        options,
      );
    },

    readToken: (m, options = {}) => records.read(tokenKey(m), decodeTokenRecord, options),

    async writeToken(m, record, options = {}) {
      // Unconditional on purpose: a new token replaces the old one, whoever wrote it.
      await records.write(tokenKey(m), record, { unconditional: true }, options);
    },

    async consumeTokenUse(m, tokenSha256, options = {}, seen) {
      const out = await updateToken(
        m,
        (current) => {
          requireCurrentToken(current, tokenSha256);
          return spendUse(current);
        },
        options,
        seen,
      );
      return out as TokenRecord;
    },

    async refundTokenUse(m, tokenSha256, options = {}) {
      await updateToken(
        m,
        (current) =>
          isCurrentToken(current, tokenSha256) ? { ...current, usesLeft: current.usesLeft + 1 } : undefined,
        options,
      );
    },

    async claimFirstFetch(m, tokenSha256, etag, now, options = {}, seen) {
      // Nothing to write only when the token's first fetch was already claimed.
      const out = await updateToken(
        m,
        (current) => {
          requireCurrentToken(current, tokenSha256);
          if (current.firstFetch) return undefined;
          return { ...spendUse(current), firstFetch: { etag, at: now.toISOString() } };
        },
        options,
        seen,
      );
      return out ? { claimed: true, record: out } : { claimed: false };
    },

    async deleteConfigAndToken(m, options = {}) {
      const existed = await store.delete(configKey(m), undefined, options);
      records.forget(tokenKey(m));
      await store.delete(tokenKey(m), undefined, options);
      return existed;
    },

    async deleteToken(m, options = {}) {
      records.forget(tokenKey(m));
      await store.delete(tokenKey(m), undefined, options);
    },

    async *listMachines(namespace, after, options = {}) {
      // The cursor is compared as a store key, the order the listing comes in. It is not
      // checked as labels: the route's schema bounds it, and any text orders somewhere.
      const [afterNs = "", afterName = ""] = after?.split("/") ?? [];
      const afterKey = after === undefined ? undefined : statusKey({ namespace: afterNs, name: afterName });
      for await (const info of store.list(statusPrefix(namespace), options)) {
        if (afterKey !== undefined && info.key <= afterKey) continue;
        const machine = machineFromStatusKey(info.key);
        if (machine) yield machine;
      }
    },

    async *statusVersions(options = {}) {
      for await (const info of store.list(statusPrefix(undefined), options)) {
        const machine = machineFromStatusKey(info.key);
        if (machine) yield { machine, etag: info.etag };
      }
    },

    async readPhase(m, etag, options = {}) {
      const cached = records.cached(statusKey(m), decodeStatus);
      if (cached !== undefined && cached.etag === etag) return cached.value.phase;
      const record = await records.readUncached(statusKey(m), decodeStatus, options);
      return record ? record.phase : null;
    },
  };
}
