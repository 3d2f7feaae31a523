/**
 * Wrapping the data key for key groups, and getting it back (docs/sops-format.md section 9).
 * OWNER: keys work package (with shamir.ts). Signatures below are the agreed contract.
 */
import type { KeyFailure } from "../../errors.ts";
import { BootsealError, NoKeyAvailableError, needs } from "../../errors.ts";
import type { KeyEntry, KeyResolver, MasterKey } from "./master-key.ts";
import { combine, MAX_SHARES, split } from "./shamir.ts";

const DATA_KEY_LENGTH = 32;

export interface WrapOptions {
  /** Shamir threshold; 0/undefined -> number of groups. Ignored with one group. */
  readonly threshold?: number;
  readonly now?: Date;
  readonly signal?: AbortSignal;
}

export interface UnwrapOptions {
  readonly threshold?: number;
  /** Kind names in the order to try them; default the resolver's `order` (sops's default). */
  readonly order?: readonly string[];
  readonly signal?: AbortSignal;
}

/** Label for an entry no MasterKey could be built for: the first identifying field. */
function entryLabel(entry: KeyEntry): string {
  for (const [name, value] of entry.fields) {
    if (name !== "enc" && name !== "created_at" && typeof value === "string" && value !== "") {
      return value;
    }
  }
  return `${entry.kind} key`;
}

/** Safe text for a failure: our own errors are written to be shown; others get their name. */
function failureReason(err: unknown): string {
  if (err instanceof BootsealError) return err.message;
  if (err instanceof Error) return `${err.name}: ${err.message}`.slice(0, 200);
  return "unexpected failure";
}

function zeroAll(buffers: readonly Uint8Array[]): void {
  for (const b of buffers) b.fill(0);
}

function resolveThreshold(threshold: number | undefined, groups: number): number {
  const t = threshold === undefined || threshold === 0 ? groups : threshold;
  if (!Number.isInteger(t) || t < 2 || t > Math.min(groups, MAX_SHARES)) {
    throw new BootsealError(
      "USAGE",
      `shamir threshold must be 2..${groups} for ${groups} key groups, got ${t}`,
    );
  }
  return t;
}

/**
 * One group: every key wraps the whole 32-byte data key. Several: one Shamir share per
 * group (33 bytes: y-bytes then x = group index + 1), every key of group i wraps share i.
 * Resolves to the metadata entries, one list per group, in key order.
 */
export async function wrapDataKey(
  dataKey: Uint8Array,
  groups: readonly (readonly MasterKey[])[],
  options: WrapOptions = {},
): Promise<KeyEntry[][]> {
  // Precondition: the data key is exactly 32 bytes (AES-256).
  needs(dataKey.length === DATA_KEY_LENGTH, "BAD_INPUT", "data key must be 32 bytes");
  // sops: "empty key group provided" (sops.go UpdateMasterKeysWithKeyServices).
  needs(groups.length > 0, "USAGE", "no key group provided");
  needs(
    groups.every((g) => g.length > 0),
    "USAGE",
    "empty key group provided",
  );
  const now = options.now ?? new Date();
  const callOptions = options.signal ? { signal: options.signal } : {};
  const secrets =
    groups.length === 1
      ? [dataKey]
      : split(dataKey, groups.length, resolveThreshold(options.threshold, groups.length));
  try {
    const pending = groups.map((group, i) =>
      group.map(async (key) => key.toMetadata(await key.wrap(secrets[i] as Uint8Array, callOptions), now)),
    );
    // allSettled, not all: no wrap may still be reading a share when the shares are zeroed.
    const settled = await Promise.all(pending.map((g) => Promise.allSettled(g)));
    const entries: KeyEntry[][] = [];
    for (const group of settled) {
      const out: KeyEntry[] = [];
      for (const result of group) {
        if (result.status === "rejected") throw result.reason;
        out.push(result.value);
      }
      entries.push(out);
    }
    return entries;
  } finally {
    if (groups.length > 1) zeroAll(secrets);
  }
}

/** Keys of a group in decryption order: listed kinds by rank, others after, stable. */
function ordered(group: readonly KeyEntry[], order: readonly string[]): KeyEntry[] {
  const rank = (kind: string): number => {
    const i = order.indexOf(kind);
    return i === -1 ? order.length : i;
  };
  return group
    .map((entry, index) => ({ entry, index }))
    .sort((a, b) => rank(a.entry.kind) - rank(b.entry.kind) || a.index - b.index)
    .map((x) => x.entry);
}

/**
 * A failure as users and logs see it: the key id and reason may quote the document's own
 * fields (a recipient, a fingerprint), so they are one line and cut at 200 characters.
 */
function failure(keyId: string, reason: string): KeyFailure {
  const clean = (text: string) => {
    const flat = text.replace(/\p{Cc}+/gu, " ");
    return flat.length > 200 ? `${flat.slice(0, 199)}…` : flat;
  };
  return { keyId: clean(keyId), reason: clean(reason) };
}

/** The first secret any key of the group unwraps, or null; every failure goes to `failures`. */
async function openGroup(
  group: readonly KeyEntry[],
  resolve: KeyResolver,
  order: readonly string[],
  failures: KeyFailure[],
  signal: AbortSignal | undefined,
): Promise<Uint8Array | null> {
  for (const entry of ordered(group, order)) {
    signal?.throwIfAborted();
    let keyId = entryLabel(entry);
    try {
      const key = resolve(entry);
      if (key === null) {
        failures.push(failure(keyId, `${entry.kind} keys are not available here`));
        continue;
      }
      keyId = key.id;
      const secret = await key.unwrap(entry.enc, signal ? { signal } : {});
      if (secret === null) {
        failures.push(failure(keyId, "no matching credential"));
        continue;
      }
      return secret;
    } catch (err) {
      // An abort is the caller's decision, not a key failure: stop trying.
      if (signal?.aborted) throw err;
      failures.push(failure(keyId, failureReason(err)));
    }
  }
  return null;
}

/** sops's first line when no master key opens the data key, which scripts match. */
const NO_DATA_KEY = "Failed to get the data key required to decrypt the SOPS file.";

/**
 * The 32-byte data key, from the first key per group that unwraps (in `order`), recombining
 * shares when there are several groups. Throws NoKeyAvailableError listing every key's
 * failure when not enough groups could be opened.
 */
export async function unwrapDataKey(
  groups: readonly (readonly KeyEntry[])[],
  resolve: KeyResolver,
  options: UnwrapOptions = {},
): Promise<Uint8Array> {
  needs(groups.length > 0, "BAD_INPUT", "no keys found in the document");
  const order = options.order ?? resolve.order ?? [];
  const failures: KeyFailure[] = [];
  const secrets: Uint8Array[] = [];
  try {
    // Every group is tried, as sops does (GetDataKeyWithKeyServices), so the error lists
    // every key's failure and all recovered shares are combined.
    for (const group of groups) {
      const secret = await openGroup(group, resolve, order, failures, options.signal);
      if (secret !== null) secrets.push(secret);
    }
    if (groups.length === 1) {
      const dataKey = secrets.pop();
      if (dataKey === undefined) throw new NoKeyAvailableError(NO_DATA_KEY, failures);
      if (dataKey.length !== DATA_KEY_LENGTH) {
        dataKey.fill(0);
        throw new BootsealError("BAD_INPUT", `data key has ${dataKey.length} bytes, expected 32`);
      }
      return dataKey;
    }
    const threshold =
      options.threshold === undefined || options.threshold === 0 ? groups.length : options.threshold;
    // Combine needs two shares even if a document claims a threshold of 1.
    if (secrets.length < Math.max(threshold, 2)) {
      throw new NoKeyAvailableError(
        `${NO_DATA_KEY} ${secrets.length} of ${threshold} required key groups opened`,
        failures,
      );
    }
    const dataKey = combine(secrets);
    if (dataKey.length !== DATA_KEY_LENGTH) {
      dataKey.fill(0);
      throw new BootsealError("BAD_INPUT", `data key from shares has ${dataKey.length} bytes, expected 32`);
    }
    return dataKey;
  } finally {
    zeroAll(secrets);
  }
}
