/**
 * The audit log: one JSON line per publish, fetch, delete, status post, token minting and
 * authentication failure, through its own pino instance and destination (never the access
 * log): `audit.path`, `-` for standard error. Lines name who (controller name,
 * `machine:<ns>/<name>` or `anonymous`), the machine, the action, the outcome, the request id
 * and the source address; never a token, a payload or a key. A refused second fetch of a
 * one-time config has the outcome `second-fetch` (code ALREADY_FETCHED).
 *
 * The file is created with `audit.mode` (default 0600: it names every machine and controller
 * and where they connect from) and, when it is a regular file, set to that mode on every start,
 * so a log an older version created 0644 is tightened too.
 */
import { fchmodSync, fstatSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { type DestinationStream, type Logger, pino } from "pino";
import { BootsealError } from "../../errors.ts";
import { routeConfigOf, stateOf, who } from "../request-state.ts";

export type AuditLogger = Logger;

export const DEFAULT_AUDIT_MODE = 0o600;

let lastMs = Number.NaN;
let lastField = "";

/**
 * Every log line's `time`, ISO-8601 UTC, as pino's `isoTime` writes it, made once per
 * millisecond: a boot storm logs two lines per request, many within the same millisecond.
 */
export function isoTimeField(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastField = `,"time":"${new Date(now).toISOString()}"`;
  }
  return lastField;
}

/** The audit file, opened for appending with its mode applied; a device or FIFO keeps its own. */
function openAuditFile(path: string, mode: number): number {
  try {
    mkdirSync(dirname(path), { recursive: true });
    const fd = openSync(path, "a", mode);
    if (fstatSync(fd).isFile()) fchmodSync(fd, mode);
    return fd;
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? "error";
    throw new BootsealError("IO_ERROR", `cannot open the audit log ${path} (${code})`, { cause });
  }
}

export function createAuditLogger(
  path: string,
  mode: number = DEFAULT_AUDIT_MODE,
): { logger: AuditLogger; close(): Promise<void> } {
  const toStderr = path === "-";
  const destination = pino.destination(
    toStderr ? { dest: 2, sync: true } : { dest: openAuditFile(path, mode), sync: false },
  );
  const logger = pino({ base: { log: "audit" }, timestamp: isoTimeField }, destination);
  return {
    logger,
    // Resolves once every line is written and the file closed: flushSync alone skips a write
    // already in flight, which could then be lost at exit. Stderr is written synchronously.
    close: () =>
      new Promise<void>((resolve) => {
        if (toStderr) return resolve();
        destination.once("close", () => resolve());
        destination.once("error", () => resolve()); // a failing disk: nothing more to do at shutdown
        try {
          destination.end();
        } catch {
          resolve(); // already closed
        }
      }),
  };
}

/** An audit logger writing to a stream (tests). */
export function auditLoggerTo(stream: DestinationStream): AuditLogger {
  return pino({ base: { log: "audit" }, timestamp: isoTimeField }, stream);
}

function outcomeOf(status: number, code: string | null): string {
  // A one-time config fetched again with the same token: the machine retried, or someone
  // else has the token. Either way the operator has to see it (and publish again).
  if (code === "ALREADY_FETCHED") return "second-fetch";
  if (status < 300) return "ok";
  if (status === 304) return "not-modified";
  if (status === 401 || status === 403 || status === 429) return "denied";
  return "failed";
}

function machineOf(request: FastifyRequest): string | undefined {
  const p = request.params as { ns?: string; name?: string } | undefined;
  return p?.ns && p.name ? `${p.ns}/${p.name}` : undefined;
}

/** An onResponse hook: audited routes always, every other route on authentication failure. */
export function auditPlugin(app: FastifyInstance, audit: AuditLogger): void {
  // A callback hook, not an async one: no promise per request.
  app.addHook("onResponse", (request, reply, done) => {
    const route = routeConfigOf(request);
    const action = route.audit;
    const status = reply.statusCode;
    const authFailure = status === 401 || status === 403 || status === 429;
    if (!action && !authFailure) return done();
    const state = stateOf(request);
    const machine = machineOf(request);
    audit.info({
      action: action ?? "auth",
      outcome: outcomeOf(status, state.errorCode),
      status,
      who: who(state.principal),
      identity: state.identity ?? undefined,
      ...(machine ? { machine } : {}),
      ...(state.errorCode ? { code: state.errorCode } : {}),
      reqId: request.id,
      source: request.ip,
      route: route.url ?? "unmatched",
    });
    done();
  });
}
