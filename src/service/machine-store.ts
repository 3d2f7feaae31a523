/**
 * Everything the service reads and writes about a machine, over the store layout of
 * src/machine/store-layout.ts (the only place that spells a key), and the compare-and-swap
 * loops over it. Nothing here is cached: every replica reads the store, and every
 * read-modify-write is a conditional put retried on a lost race, so any number of replicas
 * can serve the same machines. The status history keeps the last 100 entries, at most
 * 64 KiB of them (see appendHistory).
 *
 * Store operations per request (docs/benchmarks.md): a read-modify-write may start from a
 * version the request already read (`Seen`), so its first attempt is one conditional put; a
 * lost race re-reads. The status record mirrors the digest and expiry of the machine's
 * current bootstrap token (`token`), so a status post checks its token and appends its entry
 * with one read and one conditional write of that record.
 */
import type {
  ObjectInfo,
  ObjectStore,
  StoredObject,
  WriteCondition,
} from "../../providers/stores/object-store.ts";
import type { CallOptions } from "../call-options.ts";
import { BootsealError } from "../errors.ts";
import { formatMachineId, type MachineId } from "../machine/machine-id.ts";
import {
  configKey,
  machineFromStatusKey,
  READINESS_PROBE_KEY,
  statusKey,
  statusPrefix,
  tokenKey,
} from "../machine/store-layout.ts";
import { withRetry } from "../retry.ts";
import type { RecordCache } from "./record-cache.ts";
import {
  DEFAULT_TOKEN_WORK,
  DUMMY_TOKEN_RECORD,
  decodeTokenRecord,
  digestsEqual,
  type TokenRecord,
  type TokenWork,
} from "./tokens.ts";

export const MACHINE_PHASES = ["fetching", "decrypted", "written", "running", "succeeded", "failed"] as const;
export const PHASES = ["published", ...MACHINE_PHASES] as const;
export type Phase = (typeof PHASES)[number];
export type DocumentFormat = "binary" | "json" | "yaml";

export const HISTORY_LIMIT = 100;
/** Encoded (JSON, UTF-8) bytes of a status record's history, at most. */
export const HISTORY_MAX_BYTES = 64 * 1024;
/** Encoded bytes of one history entry, at most: its output keeps its end, then its message its start. */
export const HISTORY_ENTRY_MAX_BYTES = 24 * 1024;
/** Of which a cut message keeps at most this much (its start); the output (its end) gets the rest. */
const HISTORY_MESSAGE_SHARE_BYTES = 8 * 1024;
const CAS_ATTEMPTS = 20;

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

export interface PublishedConfig {
  readonly etag: string;
  readonly sha256: string;
  readonly publishedAt: string;
  readonly format: DocumentFormat;
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

/** An object as read, with the version a conditional write of it names. */
export interface Versioned<T> {
  readonly value: T;
  readonly etag: string;
}

/**
 * What a read-modify-write starts from: undefined reads the store first; null assumes the
 * object is absent (its first write is create-only); a version already read is used as is.
 * A wrong guess costs one lost race, never a lost update.
 */
export type Seen<T> = Versioned<T> | null | undefined;

const encodeJson = (value: unknown): string => `${JSON.stringify(value)}\n`;

function decodeStatus(text: string): StatusRecord {
  try {
    const r = JSON.parse(text) as StatusRecord;
    if (typeof r.phase === "string" && typeof r.version === "number" && Array.isArray(r.history)) return r;
  } catch {
    // fall through
  }
  throw new BootsealError("INTERNAL", "a stored status record is malformed");
}

/** A stored body as text, without copying it. */
const utf8 = (body: Uint8Array): string =>
  Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8");

function isLostRace(err: unknown): boolean {
  return err instanceof BootsealError && err.code === "PRECONDITION_FAILED";
}

/**
 * Reads and compare-and-swap writes of one store's JSON records, with this replica's last
 * seen version of each (record-cache.ts) kept up to date as a first guess.
 */
class Records {
  readonly #store: ObjectStore;
  readonly #cache: RecordCache | undefined;

  constructor(store: ObjectStore, cache: RecordCache | undefined) {
    this.#store = store;
    this.#cache = cache;
  }

  /** This replica's last seen version: a guess, to be confirmed by a conditional write. */
  cached<T>(key: string, decode: (text: string) => T): Versioned<T> | undefined {
    const entry = this.#cache?.get(key);
    return entry && { value: decode(entry.value), etag: entry.etag };
  }

  forget(key: string): void {
    this.#cache?.delete(key);
  }

  async read<T>(
    key: string,
    decode: (text: string) => T,
    options: CallOptions,
  ): Promise<Versioned<T> | null> {
    const obj = await this.#store.get(key, options);
    if (!obj) {
      this.forget(key);
      return null;
    }
    const text = utf8(obj.body);
    const value = decode(text);
    this.#cache?.set(key, { value: text, etag: obj.etag });
    return { value, etag: obj.etag };
  }

  /** Writes a record under `condition` and remembers the version written. */
  async write<T>(key: string, value: T, condition: WriteCondition, options: CallOptions): Promise<void> {
    const text = encodeJson(value);
    const info = await this.#store.put(key, Buffer.from(text), condition, {
      ...options,
      contentType: "application/json",
    });
    this.#cache?.set(key, { value: text, etag: info.etag });
  }

  /**
   * Read-modify-write with a conditional put, retried when another writer got there first.
   * `mutate` returns the new value, or undefined to leave the record as is. It starts from
   * `seen` (or this replica's cached version) when there is one: only a successful
   * conditional write confirms such a guess, so when `mutate` refuses it (throws) or keeps it
   * (undefined), the record is read again and `mutate` decides on what the store holds.
   */
  async update<T>(
    key: string,
    decode: (text: string) => T,
    mutate: (current: T | null) => T | undefined,
    options: CallOptions,
    seen?: Seen<T>,
  ): Promise<T | undefined> {
    let guess: Seen<T> = seen !== undefined ? seen : this.cached(key, decode);
    const { value } = await withRetry(
      async () => {
        let guessed = guess !== undefined;
        let current = guessed ? (guess as Versioned<T> | null) : await this.read(key, decode, options);
        guess = undefined; // a lost race reads the store
        for (;;) {
          let next: T | undefined;
          try {
            next = mutate(current ? current.value : null);
          } catch (err) {
            if (!guessed) throw err;
            next = undefined;
          }
          if (next === undefined && guessed) {
            current = await this.read(key, decode, options);
            guessed = false;
            continue;
          }
          if (next === undefined) return undefined;
          try {
            await this.write(key, next, current ? { ifMatch: current.etag } : { ifNoneMatch: "*" }, options);
          } catch (err) {
            if (isLostRace(err) && guessed) this.#cache?.lostRace(key);
            else this.forget(key);
            throw err;
          }
          return next;
        }
      },
      {
        what: `update ${key}`,
        maxAttempts: CAS_ATTEMPTS,
        // Only a lost race is worth another read-modify-write; the store retries its own failures.
        classify: (err) => ({ retry: isLostRace(err) }),
        // Jittered backoff: racing replicas spread out instead of colliding again.
        backoff: { baseMs: 5, capMs: 200 },
        rethrowLast: true,
        signal: options.signal,
      },
    );
    return value;
  }
}

const encodedBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value));

/** The end of `text` whose JSON encoding (without quotes) is at most `budget` bytes, whole characters only. */
function keepEnd(text: string, budget: number): string {
  let used = 0;
  let start = text.length;
  while (start > 0) {
    const low = text.charCodeAt(start - 1);
    const high = start > 1 ? text.charCodeAt(start - 2) : 0;
    const width = low >= 0xdc00 && low <= 0xdfff && high >= 0xd800 && high <= 0xdbff ? 2 : 1;
    const cost = encodedBytes(text.slice(start - width, start)) - 2;
    if (used + cost > budget) break;
    used += cost;
    start -= width;
  }
  return text.slice(start);
}

/** The start of `text` within `budget` encoded bytes (a reversed keepEnd). */
function keepStart(text: string, budget: number): string {
  let used = 0;
  let end = 0;
  while (end < text.length) {
    const high = text.charCodeAt(end);
    const low = text.charCodeAt(end + 1);
    const width = high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff ? 2 : 1;
    const cost = encodedBytes(text.slice(end, end + width)) - 2;
    if (used + cost > budget) break;
    used += cost;
    end += width;
  }
  return text.slice(0, end);
}

/** An entry as stored: cut to HISTORY_ENTRY_MAX_BYTES (the output keeps its end, as a tail should). */
export function boundEntry(entry: StatusEntry): StatusEntry {
  let size = encodedBytes(entry);
  if (size <= HISTORY_ENTRY_MAX_BYTES) return entry;
  let out: StatusEntry = { ...entry, truncated: true };
  // The message first gets a fixed share (its start), so the output tail keeps room too.
  if (out.message !== undefined && encodedBytes(out.message) - 2 > HISTORY_MESSAGE_SHARE_BYTES) {
    out = { ...out, message: keepStart(out.message, HISTORY_MESSAGE_SHARE_BYTES) };
  }
  size = encodedBytes(out);
  if (size > HISTORY_ENTRY_MAX_BYTES && out.output !== undefined) {
    const own = encodedBytes(out.output) - 2;
    out = { ...out, output: keepEnd(out.output, Math.max(0, own - (size - HISTORY_ENTRY_MAX_BYTES))) };
    size = encodedBytes(out);
  }
  if (size > HISTORY_ENTRY_MAX_BYTES && out.message !== undefined) {
    const own = encodedBytes(out.message) - 2;
    out = { ...out, message: keepStart(out.message, Math.max(0, own - (size - HISTORY_ENTRY_MAX_BYTES))) };
  }
  return out;
}

/**
 * Adds entries to a history in time order and bounds it: at most HISTORY_LIMIT entries (the
 * oldest go first) and HISTORY_MAX_BYTES encoded (the oldest machine reports go first, then the
 * oldest publishes). The newest entry and the latest `published` entry always stay, so a
 * chatty machine can neither grow its record without bound nor push its publish out of the
 * history. Time order, not arrival order: reports a replica held (status-coalescer.ts) can
 * reach the store after a later one written by another replica.
 */
export function mergeHistory(
  history: readonly StatusEntry[],
  entries: readonly StatusEntry[],
): StatusEntry[] {
  const all = [...history, ...entries.map(boundEntry)];
  // ISO-8601 UTC strings sort as their instants; the sort is stable, so ties keep arrival order.
  const byTime = (a: StatusEntry, b: StatusEntry) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0);
  if (all.some((e, i) => i > 0 && byTime(all[i - 1]!, e) > 0)) all.sort(byTime);
  const newest = all.length - 1;
  const latestPublish = all.findLastIndex((e) => e.phase === "published");
  const protectedAt = (i: number) => i === newest || i === latestPublish;
  const sizes = all.map(encodedBytes);
  const keep = all.map(() => true);
  let count = all.length;
  let bytes = 2 + sizes.reduce((a, b) => a + b + 1, 0) - 1; // [a,b,...]
  const drop = (i: number) => {
    keep[i] = false;
    count--;
    bytes -= sizes[i]! + 1;
  };
  for (let i = 0; i < all.length && count > HISTORY_LIMIT; i++) if (!protectedAt(i)) drop(i);
  for (const publishes of [false, true]) {
    for (let i = 0; i < all.length && bytes > HISTORY_MAX_BYTES; i++) {
      if (keep[i] && !protectedAt(i) && (all[i]!.phase === "published") === publishes) drop(i);
    }
  }
  return all.filter((_, i) => keep[i]);
}

/** One entry: mergeHistory's common case. */
export function appendHistory(history: readonly StatusEntry[], entry: StatusEntry): StatusEntry[] {
  return mergeHistory(history, [entry]);
}

export interface MachineStore {
  /** One cheap read of a key that is normally absent: the store answers and lets us read. */
  probe(options?: CallOptions): Promise<void>;
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

export interface PhaseRecord {
  /** One report, or several a replica held (status-coalescer.ts); at least one. */
  readonly entries: readonly Omit<StatusEntry, "version">[];
  /** SHA-256 of the reporting machine's token. */
  readonly tokenSha256: string;
  readonly seen?: Seen<StatusRecord>;
  /**
   * The config was deleted just before (one-time fetch `after-success`): the same write sets
   * `config` and the token mirror to null.
   */
  readonly configDeleted?: boolean;
}

export interface PublishRecord {
  readonly config: PublishedConfig;
  /** Who published (a controller's name), for the history. */
  readonly by: string;
  readonly now: Date;
  /** The token the publish minted; a function of the new version for a derived token. */
  readonly token: TokenRecord | ((version: number) => TokenRecord);
  readonly seen?: Seen<StatusRecord>;
}

function mirrorOf(token: TokenRecord): TokenMirror {
  const mirror: { -readonly [K in keyof TokenMirror]: TokenMirror[K] } = {
    sha256: token.sha256,
    expiresAt: token.expiresAt,
  };
  if (token.salt !== undefined) mirror.salt = token.salt;
  if (token.command !== undefined) mirror.command = token.command;
  return mirror;
}

/** The token record a mirror stands for, for checkToken (uses are not mirrored: status posts spend none). */
export function tokenFromMirror(m: MachineId, mirror: TokenMirror): TokenRecord {
  return {
    machine: formatMachineId(m),
    sha256: mirror.sha256,
    issuedAt: "",
    expiresAt: mirror.expiresAt,
    usesLeft: 0,
  };
}

/** `cache`: this replica's last seen records (record-cache.ts); without it every update reads first. */
export function machineStore(store: ObjectStore, cache?: RecordCache): MachineStore {
  const records = new Records(store, cache);
  return {
    async probe(options = {}) {
      await store.head(READINESS_PROBE_KEY, options);
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

    async recordPublish(m, { config, by, now, token, seen }, options = {}) {
      const at = now.toISOString();
      const out = await records.update(
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
            token: mirrorOf(typeof token === "function" ? token(version) : token),
          };
        },
        options,
        seen,
      );
      return out as StatusRecord;
    },

    async recordPhase(m, { entries, tokenSha256, seen, configDeleted = false }, options = {}) {
      const out = await records.update(
        statusKey(m),
        decodeStatus,
        (current) => {
          // A record without a mirror (older than it) was checked against the token record.
          const mirror = current?.token;
          const latest = entries.reduce((a, b) => (b.at >= a.at ? b : a));
          // Reports a replica held (status-coalescer.ts) that were made before the config and
          // token went (a one-time delete after `succeeded` through another replica) were
          // checked when they were made: they still join the history.
          const madeBeforeDelete = mirror === null && current !== null && latest.at < current.updatedAt;
          if (
            (mirror === null && !madeBeforeDelete) ||
            (mirror && !digestsEqual(mirror.sha256, tokenSha256))
          ) {
            throw new BootsealError("UNAUTHORIZED", "the bootstrap token was revoked or replaced");
          }
          const version = current?.version ?? 0;
          // Held reports written late (status-coalescer.ts) join the history, not the present.
          const now =
            current && current.updatedAt > latest.at
              ? current
              : { phase: latest.phase, updatedAt: latest.at };
          return {
            namespace: m.namespace,
            name: m.name,
            phase: now.phase,
            version,
            updatedAt: now.updatedAt,
            config: configDeleted ? null : (current?.config ?? null),
            history: mergeHistory(
              current?.history ?? [],
              entries.map((e) => ({ ...e, version })),
            ),
            token: configDeleted ? null : current?.token,
          };
        },
        options,
        seen,
      );
      return out as StatusRecord;
    },

    async recordToken(m, token, options = {}) {
      await records.update(
        statusKey(m),
        decodeStatus,
        (current) => (current ? { ...current, token: mirrorOf(token) } : undefined),
        options,
      );
    },

    async recordDeleted(m, now, options = {}) {
      await records.update(
        statusKey(m),
        decodeStatus,
        (current) =>
          current ? { ...current, config: null, token: null, updatedAt: now.toISOString() } : undefined,
        options,
      );
    },

    readToken: (m, options = {}) => records.read(tokenKey(m), decodeTokenRecord, options),

    async writeToken(m, record, options = {}) {
      // Unconditional on purpose: a new token replaces the old one, whoever wrote it.
      await records.write(tokenKey(m), record, { unconditional: true }, options);
    },

    async consumeTokenUse(m, tokenSha256, options = {}, seen) {
      const out = await records.update(
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
        seen,
      );
      return out as TokenRecord;
    },

    async refundTokenUse(m, tokenSha256, options = {}) {
      await records.update(
        tokenKey(m),
        decodeTokenRecord,
        (current) =>
          current && digestsEqual(current.sha256, tokenSha256)
            ? { ...current, usesLeft: current.usesLeft + 1 }
            : undefined,
        options,
      );
    },

    async claimFirstFetch(m, tokenSha256, etag, now, options = {}, seen) {
      let already = false;
      const out = await records.update(
        tokenKey(m),
        decodeTokenRecord,
        (current) => {
          already = false;
          if (!current || !digestsEqual(current.sha256, tokenSha256)) {
            throw new BootsealError("UNAUTHORIZED", "the bootstrap token was revoked or replaced");
          }
          if (current.firstFetch) {
            already = true;
            return undefined;
          }
          if (current.usesLeft <= 0) {
            throw new BootsealError("TOKEN_EXHAUSTED", "the bootstrap token has no fetches left");
          }
          return { ...current, usesLeft: current.usesLeft - 1, firstFetch: { etag, at: now.toISOString() } };
        },
        options,
        seen,
      );
      return already || !out ? { claimed: false } : { claimed: true, record: out };
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
      const obj = await store.get(statusKey(m), options);
      return obj ? decodeStatus(utf8(obj.body)).phase : null;
    },
  };
}

/**
 * A token presented by a machine, checked against its record: hash, then expiry. Without a
 * record the token is hashed and compared against a dummy one all the same, so a missing
 * record and a wrong token do the same work (timing says nothing about which machines exist).
 */
export function checkToken(
  record: TokenRecord | null,
  token: string,
  m: MachineId,
  now: Date,
  work: TokenWork = DEFAULT_TOKEN_WORK,
): TokenRecord {
  const against = record ?? DUMMY_TOKEN_RECORD;
  const hashMatches = work.equal(against.sha256, work.hash(token));
  const machineMatches = against.machine === formatMachineId(m);
  if (!record || !machineMatches || !hashMatches) {
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
