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
import {
  REPORT_MESSAGE_MAX_BYTES,
  REPORT_OUTPUT_MAX_BYTES,
  type ReportedPhase,
} from "../machine/status-protocol.ts";
import { cutToBytes } from "../machine/text-budget.ts";
import { withRetry } from "../retry.ts";

export interface StatusReport {
  readonly phase: ReportedPhase;
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

/** The first (or, with fromEnd, the last) at most `max` UTF-8 bytes of `text`, on a character boundary. */
export function truncateUtf8(text: string, max: number, fromEnd = false): string {
  return cutToBytes(text, max, { measure: "utf8", keep: fromEnd ? "end" : "start" });
}

/** The JSON body the status route takes. */
export function statusBody(status: StatusReport): Record<string, unknown> {
  const message =
    status.code !== undefined ? `${status.code}: ${status.message ?? ""}`.trimEnd() : status.message;
  return {
    phase: status.phase,
    ...(message !== undefined ? { message: truncateUtf8(message, REPORT_MESSAGE_MAX_BYTES) } : {}),
    ...(status.attempt !== undefined ? { attempt: status.attempt } : {}),
    ...(status.exitCode !== undefined ? { exitCode: status.exitCode } : {}),
    ...(status.output !== undefined
      ? { output: truncateUtf8(status.output, REPORT_OUTPUT_MAX_BYTES, true) }
      : {}),
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
