/**
 * Status reports to `POST /v1/machines/:ns/:name/status`: `{phase, message?, attempt?,
 * exitCode?, output?}` (the service refuses other fields, so a failure's reason code leads
 * its message: `MAC_MISMATCH: …`). Message and output are cut to the service's limits in
 * UTF-8 bytes (4 KiB, 16 KiB; the output keeps its end). Reporting must never hold up the bootstrap: `report()` only
 * queues; a background chain sends the reports in order, each with a few quick retries
 * (5xx, 429 and no answer), and drops one that still fails (logging one line). `flush()`
 * waits for the queue at most a bounded time and then abandons what is left, aborting the
 * request in flight, so a dead service costs the machine seconds, not its boot.
 */
import { BootsealError, isBootsealError } from "../errors.ts";
import { sendOk } from "../http/client.ts";
import { withRetry } from "../retry.ts";

export const PHASES = ["fetching", "decrypted", "written", "running", "succeeded", "failed"] as const;
export type Phase = (typeof PHASES)[number];

export interface StatusReport {
  readonly phase: Phase;
  readonly message?: string;
  /** Which download attempt succeeded (or was last). */
  readonly attempt?: number;
  readonly exitCode?: number;
  /** The last 16 KiB of the command's output. */
  readonly output?: string;
  /** The failure's reason code (an ErrorCode) for `failed`. */
  readonly code?: string;
}

export interface ReporterOptions {
  /** null: report nowhere (phases are still logged). */
  readonly url: URL | null;
  readonly token?: string;
  readonly ca?: string | Buffer;
  readonly log: (line: string) => void;
  /** Per report (default 4). */
  readonly maxAttempts?: number;
  readonly attemptTimeoutMs?: number;
  readonly baseBackoffMs?: number;
}

export interface Reporter {
  report(status: StatusReport): void;
  /** Waits for queued reports, at most `timeoutMs`, then abandons the rest. */
  flush(timeoutMs: number): Promise<void>;
  /** Reports the service accepted, in order (for tests and the final log line). */
  readonly delivered: readonly StatusReport[];
}

export const MESSAGE_MAX_BYTES = 4 * 1024;
export const OUTPUT_MAX_BYTES = 16 * 1024;

/** The first (or, with fromEnd, the last) at most `max` UTF-8 bytes of `text`, on a character boundary. */
export function truncateUtf8(text: string, max: number, fromEnd = false): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return text;
  let cut = fromEnd ? bytes.subarray(bytes.length - max) : bytes.subarray(0, max);
  // Drop a partial sequence at the cut: continuation bytes at the start, a lead byte's
  // incomplete tail at the end.
  if (fromEnd) {
    let i = 0;
    while (i < cut.length && ((cut[i] as number) & 0xc0) === 0x80) i++;
    cut = cut.subarray(i);
  } else {
    let end = cut.length;
    let back = 0;
    while (back < 4 && end - back - 1 >= 0 && ((cut[end - back - 1] as number) & 0xc0) === 0x80) back++;
    const lead = cut[end - back - 1];
    if (lead !== undefined && lead >= 0xc0) {
      const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
      if (back + 1 < need) end = end - back - 1;
    }
    cut = cut.subarray(0, end);
  }
  return cut.toString("utf8");
}

/** The JSON body the status route takes. */
export function statusBody(status: StatusReport): Record<string, unknown> {
  const message =
    status.code !== undefined ? `${status.code}: ${status.message ?? ""}`.trimEnd() : status.message;
  return {
    phase: status.phase,
    ...(message !== undefined ? { message: truncateUtf8(message, MESSAGE_MAX_BYTES) } : {}),
    ...(status.attempt !== undefined ? { attempt: status.attempt } : {}),
    ...(status.exitCode !== undefined ? { exitCode: status.exitCode } : {}),
    ...(status.output !== undefined ? { output: truncateUtf8(status.output, OUTPUT_MAX_BYTES, true) } : {}),
  };
}

export function createReporter(options: ReporterOptions): Reporter {
  const delivered: StatusReport[] = [];
  const abort = new AbortController();
  let chain: Promise<void> = Promise.resolve();
  const url = options.url;

  async function deliver(status: StatusReport): Promise<void> {
    if (url === null || abort.signal.aborted) return;
    const body = statusBody(status);
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    try {
      await withRetry(
        ({ signal }) =>
          sendOk({
            method: "POST",
            url,
            headers,
            body: new TextEncoder().encode(JSON.stringify(body)),
            signal,
            ...(options.ca ? { ca: options.ca } : {}),
          }),
        {
          what: `report ${status.phase} to ${url.origin}${url.pathname}`,
          deadline: Date.now() + 60_000,
          attemptTimeoutMs: options.attemptTimeoutMs ?? 5000,
          maxAttempts: options.maxAttempts ?? 4,
          backoff: { baseMs: options.baseBackoffMs ?? 250, capMs: 4000 },
          signal: abort.signal,
          log: options.log,
        },
      );
      delivered.push(status);
    } catch (err) {
      const why = isBootsealError(err) ? `${err.code}: ${err.message}` : String(err);
      if (!abort.signal.aborted) options.log(`status ${status.phase} not delivered (${why})`);
    }
  }

  return {
    delivered,
    report(status) {
      options.log(
        `phase ${status.phase}${status.code ? ` ${status.code}` : ""}${status.message ? `: ${status.message}` : ""}`,
      );
      chain = chain.then(() => deliver(status));
    },
    async flush(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
      });
      const done = await Promise.race([chain.then(() => false), timedOut]);
      clearTimeout(timer);
      if (done) {
        abort.abort(new BootsealError("SERVICE_UNAVAILABLE", "status reporting abandoned"));
        options.log(`status reports abandoned after ${Math.round(timeoutMs / 1000)}s`);
        await chain.catch(() => {});
      }
    },
  };
}
