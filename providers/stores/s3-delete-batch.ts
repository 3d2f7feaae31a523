/**
 * Conditional deletes on S3, grouped (a group commit, like the file store's directory
 * fsyncs): one call is in flight at a time; the deletes that arrive meanwhile wait for it and
 * then go together as one DeleteObjects (`POST /?delete`, at most 1000 keys, each with its
 * ETag condition), a delete that finds no other waiting as one DeleteObject. Each caller is
 * answered once its own key is deleted or refused, so nothing is answered earlier than
 * before; a boot storm's one-time deletes after `succeeded` then cost one store call per
 * group instead of one each. Only for a server that refuses a batch's key whose ETag does not
 * match (S3Store probes this: SeaweedFS does, moto 5.2.5 deletes it anyway).
 *
 * Here: the queue, and the request body and answer of DeleteObjects. The calls are S3Store's.
 */
import { createHash } from "node:crypto";

/** One conditional delete: the full key (prefix included) and the quoted ETag it must still have. */
export interface ConditionalDelete {
  readonly key: string;
  readonly etag: string;
}

/** S3 takes at most this many keys in one DeleteObjects. */
export const MAX_BATCH_KEYS = 1000;

export interface DeleteCalls {
  /** One DeleteObject with If-Match, as S3Store makes it alone: true deleted, false absent. */
  one(entry: ConditionalDelete): Promise<boolean>;
  /** One DeleteObjects; the keys it did not delete, with S3's error code for each. */
  many(entries: readonly ConditionalDelete[]): Promise<ReadonlyMap<string, string>>;
}

interface Waiting {
  readonly entry: ConditionalDelete;
  resolve(deleted: boolean): void;
  reject(err: unknown): void;
}

export class DeleteBatcher {
  readonly #calls: DeleteCalls;
  readonly #maxKeys: number;
  #queue: Waiting[] = [];
  #busy = false;

  constructor(calls: DeleteCalls, maxKeys = MAX_BATCH_KEYS) {
    this.#calls = calls;
    this.#maxKeys = maxKeys;
  }

  /** True when deleted, false when the key was absent; PRECONDITION_FAILED when it changed. */
  delete(entry: ConditionalDelete): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ entry, resolve, reject });
      if (!this.#busy) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#busy = true;
    try {
      while (this.#queue.length > 0) {
        const round = this.#take();
        if (round.length === 1) {
          const [w] = round as [Waiting];
          await this.#calls.one(w.entry).then(w.resolve, w.reject);
          continue;
        }
        let refused: ReadonlyMap<string, string>;
        try {
          refused = await this.#calls.many(round.map((w) => w.entry));
        } catch (err) {
          for (const w of round) w.reject(err);
          continue;
        }
        // An answer naming a key this round did not send (a server spelling keys otherwise):
        // nothing it says can be matched, so each delete is made alone (one already done by
        // the batch is then false, absent; never true for a key still there).
        const sent = new Set(round.map((w) => w.entry.key));
        if ([...refused.keys()].some((key) => !sent.has(key))) {
          for (const w of round) this.#calls.one(w.entry).then(w.resolve, w.reject);
          continue;
        }
        for (const w of round) {
          const code = refused.get(w.entry.key);
          if (code === undefined) w.resolve(true);
          else if (code === "NoSuchKey") w.resolve(false);
          // A changed object, or any other refusal: tried alone, whose answer says which (a
          // 412 then tells "changed" from "gone" as for any delete). Not awaited: the queue goes on.
          else this.#calls.one(w.entry).then(w.resolve, w.reject);
        }
      }
    } finally {
      this.#busy = false;
    }
  }

  /** The next round: up to maxKeys waiting deletes of distinct keys, oldest first. */
  #take(): Waiting[] {
    const round: Waiting[] = [];
    const rest: Waiting[] = [];
    const keys = new Set<string>();
    for (const w of this.#queue) {
      // A key twice in one request: S3 does not say which condition it applied. The later one waits.
      if (round.length >= this.#maxKeys || keys.has(w.entry.key)) rest.push(w);
      else {
        keys.add(w.entry.key);
        round.push(w);
      }
    }
    this.#queue = rest;
    return round;
  }
}

const XML_ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};

const escapeXml = (text: string): string => text.replace(/[&<>"']/g, (c) => XML_ESCAPES[c] as string);

function unescapeXml(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);/g, (_, name: string) => {
    if (name.startsWith("#x")) return String.fromCodePoint(Number.parseInt(name.slice(2), 16));
    if (name.startsWith("#")) return String.fromCodePoint(Number.parseInt(name.slice(1), 10));
    return { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" }[name] as string;
  });
}

/**
 * A DeleteObjects request: its XML body (quiet: the answer lists only the keys not deleted)
 * and the Content-MD5 S3 requires of it.
 */
export function deleteObjectsRequest(entries: readonly ConditionalDelete[]): {
  readonly body: Uint8Array;
  readonly contentMd5: string;
} {
  const objects = entries
    .map((e) => `<Object><Key>${escapeXml(e.key)}</Key><ETag>${escapeXml(e.etag)}</ETag></Object>`)
    .join("");
  const body = Buffer.from(
    `<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>${objects}</Delete>`,
  );
  return { body, contentMd5: createHash("md5").update(body).digest("base64") };
}

const ERROR_ELEMENT = /<Error>([\s\S]*?)<\/Error>/g;
const KEY_ELEMENT = /<Key>([\s\S]*?)<\/Key>/;
const CODE_ELEMENT = /<Code>([\s\S]*?)<\/Code>/;

/** The keys a DeleteObjects answer says it did not delete, with each one's error code. */
export function deleteObjectsErrors(xml: string): Map<string, string> {
  const refused = new Map<string, string>();
  for (const [, inner] of xml.matchAll(ERROR_ELEMENT)) {
    const key = KEY_ELEMENT.exec(inner as string)?.[1];
    if (key !== undefined) refused.set(unescapeXml(key), CODE_ELEMENT.exec(inner as string)?.[1] ?? "");
  }
  return refused;
}
