/**
 * `rotate --store URL`: every object under a prefix gets a new data key (and the master key
 * changes of --add-<kind>/--rm-<kind>), one object at a time per worker:
 *
 *   get (body + etag) → rotateDocument (old MAC verified; new data key; key changes; the new
 *   bytes decrypted again with the same identities and compared byte for byte) → put with
 *   {ifMatch: etag}
 *
 * Never an unconditional write. A lost condition (someone changed the object between get and
 * put) is reported `skipped: changed during rotation` and left as the other writer made it: no
 * retry, because the other writer's document may have other keys or content than the one we
 * verified, and rerunning rotate picks it up. A document that fails (MAC mismatch, no key,
 * malformed) is reported and left untouched; the others go on.
 *
 * Since each object is replaced by one atomic conditional put, a rotation killed at any point
 * (SIGKILL included) leaves every object either the old or the new document, both verified to
 * decrypt to the same plaintext.
 */
import type { KeyKind, ProviderDeps } from "../../providers/keys/index.ts";
import type { KeyServices } from "../../providers/keys/keyservice-client.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import { contentTypeOf, type StoredFormat, sniffFormat } from "../envelope/document.ts";
import { BootsealError, describeError, type ErrorCode, hasCode } from "../errors.ts";
import { describeBytes, MAX_DOCUMENT_BYTES } from "../limits.ts";
import { type KeyChanges, rotateDocument } from "./rotate-document.ts";

export interface RotateStoreOptions {
  readonly store: ObjectStore;
  readonly prefix: string;
  /** The key changes for one object (KMS keys may be bound to the object's machine). */
  readonly changesFor: (key: string) => KeyChanges;
  readonly concurrency: number;
  readonly dryRun: boolean;
  readonly deps: ProviderDeps;
  readonly order?: readonly KeyKind[];
  readonly keyServices?: KeyServices;
  /** One line per object, without the newline; never plaintext or key material. */
  readonly report: (line: string) => void;
  /** Called once, after the listing and before any object is read: how many there are. */
  readonly onListed?: (total: number) => void;
  /** Called once per object as it finishes (after its report line). */
  readonly onOutcome?: (key: string, outcome: Outcome) => void;
  readonly signal?: AbortSignal;
}

export interface RotateStoreResult {
  readonly rotated: number;
  readonly unchanged: number;
  readonly skipped: number;
  readonly failed: number;
  /** The error code of the failed object whose key sorts first (deterministic), if any. */
  readonly firstFailure?: ErrorCode;
}

export type Outcome =
  | { readonly kind: "rotated" }
  | { readonly kind: "skipped"; readonly reason: string }
  | { readonly kind: "failed"; readonly code: ErrorCode };

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

function describe(err: unknown): { code: ErrorCode; message: string } {
  const { code, message } = describeError(err, "internal error: ");
  return { code, message: oneLine(message) };
}

async function rotateOne(key: string, size: number, options: RotateStoreOptions): Promise<Outcome> {
  const { store, report, dryRun } = options;
  const fail = (err: unknown): Outcome => {
    const { code, message } = describe(err);
    report(`failed ${key}: ${code} ${message}`);
    return { kind: "failed", code };
  };
  const skip = (reason: string): Outcome => {
    report(`skipped ${key}: ${reason}`);
    return { kind: "skipped", reason };
  };
  if (size > MAX_DOCUMENT_BYTES) {
    return fail(new BootsealError("TOO_LARGE", `larger than ${describeBytes(MAX_DOCUMENT_BYTES)}`));
  }
  let object: Awaited<ReturnType<ObjectStore["get"]>>;
  try {
    object = await store.get(key, { signal: options.signal });
  } catch (err) {
    return fail(err);
  }
  if (object === null) return skip("deleted since it was listed");

  let format: StoredFormat;
  let rotated: Awaited<ReturnType<typeof rotateDocument>>;
  try {
    format = sniffFormat(object.body);
    rotated = await rotateDocument(object.body, format, options.changesFor(key), {
      deps: options.deps,
      verify: true,
      order: options.order,
      signal: options.signal,
      keyServices: options.keyServices,
    });
  } catch (err) {
    return fail(err);
  }

  if (dryRun) {
    const changes = [
      "new data key",
      ...rotated.added.map((id) => `add ${id}`),
      ...rotated.removed.map((id) => `remove ${id}`),
    ];
    report(`would rotate ${key}: ${changes.join(", ")}`);
    return { kind: "rotated" };
  }
  try {
    await store.put(
      key,
      rotated.bytes,
      { ifMatch: object.etag },
      {
        contentType: contentTypeOf(format),
        signal: options.signal,
      },
    );
  } catch (err) {
    if (hasCode(err, "PRECONDITION_FAILED")) return skip("changed during rotation");
    return fail(err);
  }
  report(`rotated ${key}`);
  return { kind: "rotated" };
}

/** Lists `prefix` (fully, before any write), then rotates with `concurrency` workers. */
export async function rotateStore(options: RotateStoreOptions): Promise<RotateStoreResult> {
  const listed: { key: string; size: number }[] = [];
  for await (const info of options.store.list(options.prefix, { signal: options.signal })) {
    listed.push({ key: info.key, size: info.size });
  }
  listed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  options.onListed?.(listed.length);

  const outcomes: Outcome[] = new Array(listed.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < listed.length) {
      const i = next++;
      const item = listed[i] as { key: string; size: number };
      const outcome = await rotateOne(item.key, item.size, options);
      outcomes[i] = outcome;
      options.onOutcome?.(item.key, outcome);
    }
  };
  const workers = Math.max(1, Math.min(options.concurrency, listed.length));
  await Promise.all(Array.from({ length: workers }, worker));

  let rotated = 0;
  let skipped = 0;
  let failed = 0;
  let firstFailure: ErrorCode | undefined;
  for (const outcome of outcomes) {
    if (outcome.kind === "rotated") rotated++;
    else if (outcome.kind === "skipped") skipped++;
    else {
      failed++;
      firstFailure ??= outcome.code;
    }
  }
  return { rotated, unchanged: 0, skipped, failed, firstFailure };
}
