/**
 * `bootseal fetch`, start to finish:
 *
 *   marker present and no --force -> nothing to do (a reboot after a successful bootstrap)
 *   fetching  download with retries under --deadline
 *   decrypted the machine's own keys opened the data key and the MAC verified
 *   written   every path checked and resolved first, the entries against each other too
 *             (nothing is written if one is refused), then each file written atomically;
 *             a failed write undoes the files and directories the run wrote (write-plan.ts)
 *   running   --exec, its output streamed through and its tail kept
 *   succeeded marker and Cluster API sentinel written; one-time mode deletes the config
 *   failed    with the reason code (an ErrorCode), its message, and for --exec the exit
 *             code and output tail
 *
 * Reports go out in the background (report.ts) and are flushed, boundedly, at the end.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { KeyKind } from "../../providers/keys/index.ts";
import type { Format } from "../envelope/sops/codecs/codec.ts";
import { BootsealError, isBootsealError } from "../errors.ts";
import { writeResolved } from "../files/atomic-write.ts";
import { readTokenFile } from "../files/token-file.ts";
import { sendOk } from "../http/client.ts";
import { formatMachineId } from "../machine/machine-id.ts";
import { type BackoffPolicy, withRetry } from "../retry.ts";
import { parseManifest } from "./apply-manifest.ts";
import { decryptPayload } from "./decrypt-payload.ts";
import { type ExecResult, runCommand } from "./exec.ts";
import { type LoginSettings, loginForToken } from "./identity/login.ts";
import { loadAccounts } from "./owners.ts";
import { type PathPolicy, resolveTarget, rootDirectory } from "./paths.ts";
import { createReporter, type StatusReport } from "./report.ts";
import type { SelinuxLabeler } from "./selinux.ts";
import { download, parseSource, type Source, statusUrlFor } from "./source.ts";
import {
  applyPlan,
  checkReserved,
  type FileWriter,
  type PlannedFile,
  planFiles,
  type Reserved,
} from "./write-plan.ts";

export const DEFAULT_MARKER = "/var/lib/bootseal/bootstrap.done";
export const DEFAULT_SENTINEL = "/run/cluster-api/bootstrap-success.complete";

export interface FetchOptions {
  readonly from: string;
  readonly machine?: string;
  readonly tokenFile?: string;
  /** --auth aws-iam|gcp|azure: log in with the cloud identity for this boot's token instead. */
  readonly login?: LoginSettings;
  /** Exactly one of out / apply. */
  readonly out?: string;
  readonly apply: boolean;
  readonly root: string;
  readonly allowedRoots: readonly string[];
  readonly exec?: string;
  readonly execTimeoutMs?: number;
  readonly report?: string;
  readonly marker: string;
  /** null: no sentinel. */
  readonly sentinel: string | null;
  readonly force: boolean;
  readonly oneTime: boolean;
  readonly deadlineMs: number;
  readonly attemptTimeoutMs: number;
  readonly reportTimeoutMs: number;
  readonly caFile?: string;
  readonly inputType?: Format;
  readonly order?: readonly KeyKind[];
  /** Accept set-id, sticky and world-writable manifest modes (--allow-unsafe-modes). */
  readonly allowUnsafeModes?: boolean;
}

/**
 * The process streams and environment the fetch runs with: the fetcher's own type (the CLI's
 * CliIo fits it), so the fetcher never imports the CLI that drives it.
 */
export interface FetchIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly env: Readonly<Record<string, string | undefined>>;
}

export interface FetchDeps {
  readonly io: FetchIo;
  readonly labeler: SelinuxLabeler | null;
  readonly backoff?: BackoffPolicy;
  /** Writes one payload file (default: atomic-write.ts); a seam for failure tests. */
  readonly write?: FileWriter;
}

/** The outcome of --exec as a failure that carries what the status report needs. */
export class ExecFailedError extends BootsealError {
  readonly result: ExecResult;

  constructor(result: ExecResult) {
    const how = result.timedOut
      ? "timed out and was killed"
      : result.exitCode !== null
        ? `exited with code ${result.exitCode}`
        : `was killed by ${result.signal}`;
    super("EXEC_FAILED", `the bootstrap command ${how}`);
    this.name = "ExecFailedError";
    this.result = result;
  }
}

async function plan(
  payload: Uint8Array,
  options: FetchOptions,
  policy: PathPolicy,
  reserved: readonly Reserved[],
): Promise<PlannedFile[]> {
  if (options.out !== undefined) {
    const out = [{ target: await resolveTarget(options.out, policy), content: payload, mode: 0o600 }];
    checkReserved(out, reserved);
    return out;
  }
  const specs = parseManifest(payload);
  const accounts = await loadAccounts(policy.root);
  return planFiles(specs, policy, accounts, {
    allowUnsafeModes: options.allowUnsafeModes === true,
    reserved,
  });
}

function describe(err: unknown): { code: string; message: string } {
  if (isBootsealError(err)) return { code: err.code, message: err.message };
  return { code: "INTERNAL", message: err instanceof Error ? err.message : String(err) };
}

export async function runFetch(options: FetchOptions, deps: FetchDeps): Promise<number> {
  const { io } = deps;
  const log = (line: string): void => {
    io.stderr.write(`bootseal fetch: ${line}\n`);
  };
  const started = Date.now();
  const root = await rootDirectory(options.root);
  const policy: PathPolicy = { root, allowedRoots: options.allowedRoots };
  // Marker and sentinel are the operator's own paths: anywhere under --root, links still checked.
  const anywhere: PathPolicy = { root, allowedRoots: ["/"] };
  const marker = await resolveTarget(options.marker, anywhere);
  if (marker.existing !== null && !options.force) {
    log(`already bootstrapped (${options.marker} exists); nothing to do (--force runs again)`);
    return 0;
  }
  const sentinel = options.sentinel === null ? null : await resolveTarget(options.sentinel, anywhere);
  const source: Source = parseSource(options.from, options.machine);
  const ca = options.caFile !== undefined ? await readFile(options.caFile) : undefined;
  const token = options.login
    ? await loginForToken(options.login, source, {
        env: io.env,
        ca,
        retry: { deadline: started + options.deadlineMs, attemptTimeoutMs: options.attemptTimeoutMs, log },
      })
    : options.tokenFile !== undefined
      ? await readTokenFile(options.tokenFile)
      : undefined;
  const reportUrl = options.report !== undefined ? new URL(options.report) : statusUrlFor(source);
  const reporter = createReporter({
    url: reportUrl,
    ...(token ? { token } : {}),
    ...(ca ? { ca } : {}),
    log,
  });
  const machine = source.machine;
  const exec: { result?: ExecResult } = {};
  let attempts = 0;
  let payload: Uint8Array | undefined;
  let planned: PlannedFile[] = [];
  try {
    reporter.report({ phase: "fetching" });
    const doc = await download(source, {
      env: io.env,
      ...(token ? { token } : {}),
      ...(ca ? { ca } : {}),
      retry: {
        deadline: started + options.deadlineMs,
        attemptTimeoutMs: options.attemptTimeoutMs,
        log,
        ...(deps.backoff ? { backoff: deps.backoff } : {}),
      },
    });
    attempts = doc.attempts;
    payload = await decryptPayload(doc.bytes, {
      deps: { env: io.env },
      machine: machine ? formatMachineId(machine) : null,
      ...(options.inputType ? { inputType: options.inputType } : {}),
      ...(options.order ? { order: options.order } : {}),
      ...(doc.contentType ? { contentType: doc.contentType } : {}),
      ...(doc.format ? { formatHint: doc.format } : {}),
    });
    reporter.report({ phase: "decrypted", attempt: attempts });

    const reserved: Reserved[] = [{ what: "the marker", target: marker }];
    if (sentinel !== null) reserved.push({ what: "the sentinel", target: sentinel });
    planned = await plan(payload, options, policy, reserved);
    await applyPlan(planned, { labeler: deps.labeler, log, ...(deps.write ? { write: deps.write } : {}) });
    const written = planned.map((f) => f.target.requested);
    reporter.report({ phase: "written", message: `${written.length} file(s): ${written.join(", ")}` });

    if (options.exec !== undefined) {
      reporter.report({ phase: "running", message: options.exec });
      exec.result = await runCommand(options.exec, {
        env: { ...io.env, BOOTSEAL_ROOT: root },
        stdout: io.stdout,
        stderr: io.stderr,
        ...(options.execTimeoutMs ? { timeoutMs: options.execTimeoutMs } : {}),
      });
      if (exec.result.exitCode !== 0) throw new ExecFailedError(exec.result);
    }

    const record = {
      completedAt: new Date().toISOString(),
      source: source.kind === "service" ? `${source.url.origin}${source.url.pathname}` : source.display,
      machine: machine ? formatMachineId(machine) : null,
      sha256: createHash("sha256").update(doc.bytes).digest("hex"),
      ...(doc.etag ? { etag: doc.etag } : {}),
      files: written,
    };
    await writeResolved(marker, new TextEncoder().encode(`${JSON.stringify(record, null, 2)}\n`), {
      mode: 0o600,
      labeler: deps.labeler,
    });
    if (sentinel !== null) {
      await writeResolved(sentinel, new TextEncoder().encode("success\n"), {
        mode: 0o644,
        labeler: deps.labeler,
      });
    }
    const done: StatusReport = {
      phase: "succeeded",
      attempt: attempts,
      message: `bootstrap done in ${((Date.now() - started) / 1000).toFixed(1)}s`,
      ...(exec.result ? { exitCode: exec.result.exitCode ?? -1, output: exec.result.outputTail } : {}),
    };
    reporter.report(done);
  } catch (err) {
    const { code, message } = describe(err);
    const result = err instanceof ExecFailedError ? err.result : undefined;
    reporter.report({
      phase: "failed",
      code,
      message,
      ...(attempts > 0 ? { attempt: attempts } : {}),
      ...(result ? { exitCode: result.exitCode ?? -1, output: result.outputTail } : {}),
    });
    await reporter.flush(options.reportTimeoutMs);
    throw err;
  } finally {
    payload?.fill(0);
    for (const f of planned) f.content.fill(0);
  }
  await reporter.flush(options.reportTimeoutMs);
  if (options.oneTime && source.kind === "service") await deleteConfig(source, token, ca, log);
  log(`succeeded in ${((Date.now() - started) / 1000).toFixed(2)}s`);
  return 0;
}

/** One-time mode: the config (and the service's token record) goes once the machine is done. */
async function deleteConfig(
  source: Extract<Source, { kind: "service" }>,
  token: string | undefined,
  ca: Buffer | undefined,
  log: (line: string) => void,
): Promise<void> {
  try {
    await withRetry(
      ({ signal }) =>
        sendOk({
          method: "DELETE",
          url: source.url,
          headers: token ? { authorization: `Bearer ${token}` } : {},
          signal,
          ...(ca ? { ca } : {}),
        }),
      {
        what: `DELETE ${source.url.origin}${source.url.pathname}`,
        deadline: Date.now() + 30_000,
        attemptTimeoutMs: 5000,
        maxAttempts: 4,
        backoff: { baseMs: 250, capMs: 4000 },
        log,
      },
    );
    log("one-time: config deleted");
  } catch (err) {
    // after-success mode: the service already deleted it when it took `succeeded`.
    if (isBootsealError(err) && err.code === "NOT_FOUND") {
      log("one-time: config already gone");
      return;
    }
    // The bootstrap is done; a config left behind expires with its token.
    log(`one-time: config not deleted (${describe(err).message})`);
  }
}
