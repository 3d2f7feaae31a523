/**
 * `bootseal fetch`, start to finish: set-up, then one function per phase the fetcher reports.
 *
 *   set-up    marker present and no --force -> nothing to do (a reboot after a successful
 *             bootstrap); else the source, the token (file or cloud login) and the reporter
 *   fetching  download with retries under --deadline
 *   decrypted the machine's own keys opened the data key and the MAC verified
 *   written   the payload applied by its kind's applier (payloads/: manifest, cloud-config,
 *             Ignition, raw --out): every path checked and resolved first, then each file
 *             written atomically; a failed write undoes what the run wrote (write-plan.ts)
 *   running   the bootstrap command: a cloud-config's runcmd, then --exec; output streamed
 *             through and its tail kept
 *   succeeded marker written; the Cluster API sentinel only when a bootstrap command ran
 *             and succeeded and the payload does not write it itself; one-time mode
 *             deletes the config
 *   failed    with the reason code (an ErrorCode), its message, and for a command the exit
 *             code and output tail
 *
 * Reports go out in the background (report.ts) and are flushed, boundedly, at the end.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { KeyKind } from "../../providers/keys/index.ts";
import type { Format } from "../envelope/sops/codecs/codec.ts";
import { describeError, hasCode } from "../errors.ts";
import { writeResolved } from "../files/atomic-write.ts";
import { readTokenFile } from "../files/token-file.ts";
import { sendOk } from "../http/client.ts";
import { formatMachineId } from "../machine/machine-id.ts";
import { type BackoffPolicy, withRetry } from "../retry.ts";
import { decryptPayload } from "./decrypt-payload.ts";
import { ExecFailedError, type ExecResult, runCommand } from "./exec.ts";
import { type LoginSettings, loginForToken } from "./identity/login.ts";
import { type PathPolicy, type ResolvedTarget, resolveTarget, rootDirectory } from "./paths.ts";
import { type AppliedPayload, applyPayload } from "./payloads/apply.ts";
import { type CommandRunOptions, runCommands } from "./payloads/commands.ts";
import type { SystemdControl } from "./payloads/ignition.ts";
import { type PayloadChoice, type PayloadKind, payloadKind } from "./payloads/kind.ts";
import { systemctlControl } from "./payloads/systemctl.ts";
import { createReporter, type Reporter, type StatusReport } from "./report.ts";
import type { SelinuxLabeler } from "./selinux.ts";
import { type Downloaded, download, parseSource, type Source, statusUrlFor } from "./source.ts";
import type { FileWriter } from "./write-plan.ts";

export const DEFAULT_MARKER = "/var/lib/bootseal/bootstrap.done";
export const DEFAULT_SENTINEL = "/run/cluster-api/bootstrap-success.complete";

/** Where the config is, how the fetcher gets in and how long it tries, and how it is opened. */
export interface FetchSourceOptions {
  readonly from: string;
  readonly machine?: string;
  readonly tokenFile?: string;
  /** --auth aws-iam|gcp|azure: log in with the cloud identity for this boot's token instead. */
  readonly login?: LoginSettings;
  readonly caFile?: string;
  readonly deadlineMs: number;
  readonly attemptTimeoutMs: number;
  readonly inputType?: Format;
  readonly order?: readonly KeyKind[];
}

/** What the payload may write, and how. */
export interface FetchApplyOptions {
  /** The raw payload's file; with it the payload is `raw`. */
  readonly out?: string;
  /** --apply: apply the payload (the same as leaving out --out). */
  readonly apply?: boolean;
  /** --payload: the kind to apply, or auto (detected; the default). */
  readonly payload?: PayloadChoice;
  readonly root: string;
  readonly allowedRoots: readonly string[];
  /** Accept set-id, sticky and world-writable manifest modes (--allow-unsafe-modes). */
  readonly allowUnsafeModes?: boolean;
  /** A cloud-config's unsupported modules are a warning instead of BAD_INPUT. */
  readonly allowUnknownModules?: boolean;
  /** --skip-module: cloud-config modules left out with a warning. */
  readonly skipModules?: readonly string[];
  /** The systemctl an Ignition config's units are enabled with (default `systemctl`). */
  readonly systemctl?: string;
}

/** The bootstrap command after the payload's own. */
export interface FetchCommandOptions {
  readonly exec?: string;
  readonly execTimeoutMs?: number;
}

/** Whether to run at all, what success leaves behind, and who hears about it. */
export interface FetchOutcomeOptions {
  readonly marker: string;
  /** null: no sentinel. */
  readonly sentinel: string | null;
  readonly force: boolean;
  readonly oneTime: boolean;
  /** The status route reports go to (default: the one next to a service --from). */
  readonly report?: string;
  readonly reportTimeoutMs: number;
  /**
   * --json: standard output gets one JSON object, the result; the bootstrap commands' own
   * output goes to standard error instead, so nothing else lands there.
   */
  readonly json?: boolean;
}

/** One flat bag (the CLI's flags), in the groups above. */
export type FetchOptions = FetchSourceOptions & FetchApplyOptions & FetchCommandOptions & FetchOutcomeOptions;

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
  /** systemd for Ignition configs (default: `systemctl` from --systemctl); a seam for tests. */
  readonly systemd?: SystemdControl;
}

/** What set-up found: everything the phases share. */
interface Run {
  readonly options: FetchOptions;
  readonly deps: FetchDeps;
  /** The commands' streams and environment (under --json their stdout is standard error). */
  readonly io: FetchIo;
  readonly log: (line: string) => void;
  /** The --json result line (nothing without --json). */
  readonly emit: (answer: Record<string, unknown>) => void;
  readonly started: number;
  readonly root: string;
  readonly marker: ResolvedTarget;
  readonly sentinel: ResolvedTarget | null;
  readonly source: Source;
  readonly ca: Buffer | undefined;
  readonly token: string | undefined;
  readonly reporter: Reporter;
}

const seconds = (run: Run, digits: number): string => ((Date.now() - run.started) / 1000).toFixed(digits);

export async function runFetch(options: FetchOptions, deps: FetchDeps): Promise<number> {
  const run = await setUp(options, deps);
  if (run === null) return 0;
  const outcome = await bootstrap(run);
  await run.reporter.flush(options.reportTimeoutMs);
  if (options.oneTime && run.source.kind === "service")
    await deleteConfig(run.source, run.token, run.ca, run.log);
  run.log(`succeeded in ${seconds(run, 2)}s`);
  run.emit({ ...outcome, seconds: Number(seconds(run, 3)) });
  return 0;
}

/** The paths, the source, the token and the reporter; null when the marker says it is done. */
async function setUp(options: FetchOptions, deps: FetchDeps): Promise<Run | null> {
  const result = deps.io.stdout;
  const io: FetchIo = options.json ? { ...deps.io, stdout: deps.io.stderr } : deps.io;
  const emit = (answer: Record<string, unknown>): void => {
    if (options.json) result.write(`${JSON.stringify(answer)}\n`);
  };
  const log = (line: string): void => {
    io.stderr.write(`bootseal fetch: ${line}\n`);
  };
  const started = Date.now();
  const root = await rootDirectory(options.root);
  // Marker and sentinel are the operator's own paths: anywhere under --root, links still checked.
  const anywhere: PathPolicy = { root, allowedRoots: ["/"] };
  const marker = await resolveTarget(options.marker, anywhere);
  if (marker.existing !== null && !options.force) {
    log(`already bootstrapped (${options.marker} exists); nothing to do (--force runs again)`);
    emit({ outcome: "already-bootstrapped", marker: options.marker });
    return null;
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
  return { options, deps, io, log, emit, started, root, marker, sentinel, source, ca, token, reporter };
}

/**
 * The phases in order: each reports itself and hands the next what it made. A failure is
 * reported (and the reports flushed) before it goes on to the caller; the decrypted bytes are
 * wiped either way.
 */
async function bootstrap(run: Run): Promise<Record<string, unknown>> {
  let attempts = 0;
  let payload: Uint8Array | undefined;
  let applied: AppliedPayload | undefined;
  try {
    const doc = await fetching(run);
    attempts = doc.attempts;
    payload = await decrypted(run, doc);
    const kind = payloadKindOf(run.options, payload);
    applied = await written(run, kind, payload);
    const last = await running(run, applied);
    return await succeeded(run, doc, kind, applied, last);
  } catch (err) {
    await failed(run, err, attempts);
    throw err;
  } finally {
    payload?.fill(0);
    applied?.wipe();
  }
}

/** fetching: the document, downloaded with retries under --deadline. */
async function fetching(run: Run): Promise<Downloaded> {
  const { options, deps, token, ca, log } = run;
  run.reporter.report({ phase: "fetching" });
  return download(run.source, {
    env: run.io.env,
    ...(token ? { token } : {}),
    ...(ca ? { ca } : {}),
    retry: {
      deadline: run.started + options.deadlineMs,
      attemptTimeoutMs: options.attemptTimeoutMs,
      log,
      ...(deps.backoff ? { backoff: deps.backoff } : {}),
    },
  });
}

/** decrypted: the payload, opened with the machine's own keys. */
async function decrypted(run: Run, doc: Downloaded): Promise<Uint8Array> {
  const { options } = run;
  const machine = run.source.machine;
  const payload = await decryptPayload(doc.bytes, {
    deps: { env: run.io.env },
    machine: machine ? formatMachineId(machine) : null,
    ...(options.inputType ? { inputType: options.inputType } : {}),
    ...(options.order ? { order: options.order } : {}),
    ...(doc.contentType ? { contentType: doc.contentType } : {}),
    ...(doc.format ? { formatHint: doc.format } : {}),
  });
  run.reporter.report({ phase: "decrypted", attempt: doc.attempts });
  return payload;
}

function payloadKindOf(options: FetchApplyOptions, payload: Uint8Array): PayloadKind {
  return options.out !== undefined ? "raw" : payloadKind(options.payload ?? "auto", payload);
}

/** How the payload's commands run: the run's streams, under --root, each announced as running. */
function commandOptions(run: Run): CommandRunOptions {
  const { io, root, options } = run;
  return {
    env: io.env,
    stdout: io.stdout,
    stderr: io.stderr,
    root,
    ...(options.execTimeoutMs ? { timeoutMs: options.execTimeoutMs } : {}),
    onStart: (label: string): void => {
      run.reporter.report({ phase: "running", message: label });
      run.log(`running ${label}`);
    },
  };
}

/** written: the payload applied by its kind's applier. */
async function written(run: Run, kind: PayloadKind, payload: Uint8Array): Promise<AppliedPayload> {
  const { options, deps, io, log } = run;
  const applied = await applyPayload(kind, payload, {
    policy: { root: run.root, allowedRoots: options.allowedRoots },
    marker: { what: "the marker", target: run.marker },
    sentinel:
      run.sentinel && options.sentinel !== null
        ? { what: "the sentinel", target: run.sentinel, path: options.sentinel }
        : null,
    ...(options.out !== undefined ? { out: options.out } : {}),
    allowUnsafeModes: options.allowUnsafeModes === true,
    allowUnknownModules: options.allowUnknownModules === true,
    skipModules: options.skipModules ?? [],
    labeler: deps.labeler,
    log,
    ...(deps.write ? { write: deps.write } : {}),
    systemd: deps.systemd ?? systemctlControl(options.systemctl ?? "systemctl", io),
    env: io.env,
    run: (module, commands) => runCommands(module, commands, commandOptions(run)),
  });
  const files = applied.written;
  run.reporter.report({
    phase: "written",
    message: `${kind}: ${files.length} file(s): ${files.join(", ")}`,
  });
  return applied;
}

/**
 * running: the bootstrap command, the payload's own (runcmd) then --exec; both must succeed.
 * The last command's result, or undefined when there was none.
 */
async function running(run: Run, applied: AppliedPayload): Promise<ExecResult | undefined> {
  const { options, io } = run;
  let last: ExecResult | undefined;
  if (applied.commands.length > 0) {
    last = (await runCommands("runcmd", applied.commands, commandOptions(run))).at(-1);
  }
  if (options.exec !== undefined) {
    run.reporter.report({ phase: "running", message: options.exec });
    last = await runCommand(options.exec, {
      env: { ...io.env, BOOTSEAL_ROOT: run.root },
      stdout: io.stdout,
      stderr: io.stderr,
      ...(options.execTimeoutMs ? { timeoutMs: options.execTimeoutMs } : {}),
    });
    if (last.exitCode !== 0) throw new ExecFailedError(last);
  }
  return last;
}

/** succeeded: the marker, the sentinel when it is ours to write, the report; the --json outcome. */
async function succeeded(
  run: Run,
  doc: Downloaded,
  kind: PayloadKind,
  applied: AppliedPayload,
  last: ExecResult | undefined,
): Promise<Record<string, unknown>> {
  const { source, deps, sentinel } = run;
  const machine = source.machine;
  const record = {
    completedAt: new Date().toISOString(),
    source: source.kind === "service" ? `${source.url.origin}${source.url.pathname}` : source.display,
    machine: machine ? formatMachineId(machine) : null,
    sha256: createHash("sha256").update(doc.bytes).digest("hex"),
    ...(doc.etag ? { etag: doc.etag } : {}),
    kind,
    files: applied.written,
  };
  await writeResolved(run.marker, new TextEncoder().encode(`${JSON.stringify(record, null, 2)}\n`), {
    mode: 0o600,
    labeler: deps.labeler,
  });
  // Success is Cluster API's to hear only once a bootstrap command ran and exited 0, and
  // only from us when the payload does not write the sentinel itself.
  const ranCommand = last !== undefined;
  let note = "";
  if (sentinel !== null && ranCommand && !applied.writesSentinel) {
    await writeResolved(sentinel, new TextEncoder().encode("success\n"), {
      mode: 0o644,
      labeler: deps.labeler,
    });
  } else if (sentinel !== null) {
    note = ranCommand
      ? "; the payload writes the Cluster API sentinel itself"
      : "; no bootstrap command, so no Cluster API sentinel";
    run.log(note.slice(2));
  }
  const done: StatusReport = {
    phase: "succeeded",
    attempt: doc.attempts,
    message: `bootstrap done in ${seconds(run, 1)}s${note}`,
    ...(last ? { exitCode: last.exitCode ?? -1, output: last.outputTail } : {}),
  };
  run.reporter.report(done);
  return {
    outcome: "succeeded",
    machine: record.machine,
    source: record.source,
    kind,
    files: applied.written,
    sha256: record.sha256,
    ...(doc.etag ? { etag: doc.etag } : {}),
    attempts: doc.attempts,
    ...(last ? { exitCode: last.exitCode ?? -1 } : {}),
  };
}

/** failed: the reason (and a command's exit code and output tail) reported and flushed. */
async function failed(run: Run, err: unknown, attempts: number): Promise<void> {
  const { code, message } = describeError(err);
  const result = err instanceof ExecFailedError ? err.result : undefined;
  run.reporter.report({
    phase: "failed",
    code,
    message,
    ...(attempts > 0 ? { attempt: attempts } : {}),
    ...(result ? { exitCode: result.exitCode ?? -1, output: result.outputTail } : {}),
  });
  await run.reporter.flush(run.options.reportTimeoutMs);
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
    if (hasCode(err, "NOT_FOUND")) {
      log("one-time: config already gone");
      return;
    }
    // The bootstrap is done; a config left behind expires with its token.
    log(`one-time: config not deleted (${describeError(err).message})`);
  }
}
