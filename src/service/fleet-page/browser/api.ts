/**
 * The fleet page's calls to the service API, each with the operator's bearer token: the
 * machine list a page at a time, one machine's status, and the event stream. The stream is
 * read with fetch() (EventSource cannot send the bearer token) and resumed with Last-Event-ID.
 */
import type { BootSummary } from "../../../machine/boot-summary.ts";
import type { Phase } from "../../../machine/status-protocol.ts";
import type { SseParser } from "./sse.ts";

const PAGE_LIMIT = 1000;

/** A machine as GET /v1/machines lists it (its current boot: src/machine/boot-summary.ts). */
export interface Summary extends Partial<BootSummary> {
  namespace: string;
  name: string;
  phase: Phase;
  version: number;
  updatedAt?: string;
  published?: boolean;
  /** The Cluster API objects the machine was published for, when the controller published it. */
  capi?: { cluster?: string; machine?: string; bootsealConfig?: string };
}

export interface HistoryEntry {
  phase: Phase;
  at: string;
  by: string;
  message?: string;
  attempt?: number;
  exitCode?: number;
  output?: string;
  version: number;
  truncated?: boolean;
}

export interface StatusRecord extends Summary {
  updatedAt: string;
  config: { publishedAt?: string; format?: string; capi?: Summary["capi"] } | null;
  history: HistoryEntry[];
}

/** The service did not accept the credential (401 or 403); the message is its error code. */
export class Refused extends Error {}

async function getJson<T>(token: string, path: string, signal?: AbortSignal): Promise<T> {
  const res = await fetch(path, {
    headers: { authorization: `Bearer ${token}`, accept: "application/json" },
    cache: "no-store",
    ...(signal ? { signal } : {}),
  });
  if (res.status === 401 || res.status === 403) throw new Refused(await errorCode(res));
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status} ${await errorCode(res)}`);
  return (await res.json()) as T;
}

async function errorCode(res: Response): Promise<string> {
  try {
    const body = (await res.json()) as { code?: unknown };
    return typeof body.code === "string" ? body.code : "";
  } catch {
    return "";
  }
}

/** One page of the machine list, after the `next` of the page before ("" for the first). */
export function listMachines(
  token: string,
  after: string,
  signal: AbortSignal,
): Promise<{ items: Summary[]; next?: string }> {
  const q = new URLSearchParams({ limit: String(PAGE_LIMIT) });
  if (after) q.set("after", after);
  return getJson(token, `v1/machines?${q}`, signal);
}

export function machineStatus(
  token: string,
  ns: string,
  name: string,
  signal?: AbortSignal,
): Promise<StatusRecord> {
  return getJson(token, `v1/machines/${encodeURIComponent(ns)}/${encodeURIComponent(name)}/status`, signal);
}

/** An open event stream's body. */
type EventBody = NonNullable<Response["body"]>;

/**
 * The event stream, opened (resumed after `lastEventId` when there is one). A refused
 * credential is an answer here, not an error: the stream stops on it.
 */
export async function openEvents(
  token: string,
  lastEventId: string,
  signal: AbortSignal,
): Promise<{ readonly refused: string } | { readonly body: EventBody }> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${token}`,
    accept: "text/event-stream",
  };
  if (lastEventId) headers["last-event-id"] = lastEventId;
  const res = await fetch("v1/events", { headers, cache: "no-store", signal });
  if (res.status === 401 || res.status === 403) return { refused: await errorCode(res) };
  if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
  return { body: res.body };
}

/** Reads an open event stream to its end, its text into the parser. */
export async function readEvents(body: EventBody, parser: SseParser): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parser.push(value);
  }
}

export function isAbort(err: unknown): boolean {
  return err instanceof DOMException && err.name === "AbortError";
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
