/**
 * `bootseal fetch`, start to finish:
 *
 *   marker present and no --force -> nothing to do (a reboot after a successful bootstrap)
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
import { isBootsealError } from "../errors.ts";
import { writeResolved } from "../files/atomic-write.ts";
import { readTokenFile } from "../files/token-file.ts";
import { sendOk } from "../http/client.ts";
import { formatMachineId } from "../machine/machine-id.ts";
import { type BackoffPolicy, withRetry } from "../retry.ts";
import { decryptPayload } from "./decrypt-payload.ts";
import { ExecFailedError, type ExecResult, runCommand } from "./exec.ts";
import { type LoginSettings, loginForToken } from "./identity/login.ts";
import { type PathPolicy, resolveTarget, rootDirectory } from "./paths.ts";
import { type AppliedPayload, applyPayload } from "./payloads/apply.ts";
import { runCommands } from "./payloads/commands.ts";
import type { SystemdControl } from "./payloads/ignition.ts";
import { type PayloadChoice, payloadKind } from "./payloads/kind.ts";
import { systemctlControl } from "./payloads/systemctl.ts";
import { createReporter, type StatusReport } from "./report.ts";
import type { SelinuxLabeler } from "./selinux.ts";
import { download, parseSource, type Source, statusUrlFor } from "./source.ts";
import type { FileWriter } from "./write-plan.ts";

export const DEFAULT_MARKER = "/var/lib/bootseal/bootstrap.done";
export const DEFAULT_SENTINEL = "/run/cluster-api/bootstrap-success.complete";

export interface FetchOptions {
  readonly from: string;
  readonly machine?: string;
  readonly tokenFile?: string;
  /** --auth aws-iam|gcp|azure: log in with the cloud identity for this boot's token instead. */
  readonly login?: LoginSettings;
  /** The raw payload's file; with it the payload is `raw`. */
  readonly out?: string;
  /** --apply: apply the payload (the same as leaving out --out). */
  readonly apply?: boolean;
  /** --payload: the kind to apply, or auto (detected; the default). */
  readonly payload?: PayloadChoice;
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
  /** A cloud-config's unsupported modules are a warning instead of BAD_INPUT. */
  readonly allowUnknownModules?: boolean;
  /** The systemctl an Ignition config's units are enabled with (default `systemctl`). */
  readonly systemctl?: string;
  /**
   * --json: standard output gets one JSON object, the result; the bootstrap commands' own
   * output goes to standard error instead, so nothing else lands there.
   */
  readonly json?: boolean;
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
  /** systemd for Ignition configs (default: `systemctl` from --systemctl); a seam for tests. */
  readonly systemd?: SystemdControl;
}

function describe(err: unknown): { code: string; message: string } {
  if (isBootsealError(err)) return { code: err.code, message: err.message };
  return { code: "INTERNAL", message: err instanceof Error ? err.message : String(err) };
}

export async function runFetch(options: FetchOptions, deps: FetchDeps): Promise<number> {
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
  const policy: PathPolicy = { root, allowedRoots: options.allowedRoots };
  // Marker and sentinel are the operator's own paths: anywhere under --root, links still checked.
  const anywhere: PathPolicy = { root, allowedRoots: ["/"] };
  const marker = await resolveTarget(options.marker, anywhere);
  if (marker.existing !== null && !options.force) {
    log(`already bootstrapped (${options.marker} exists); nothing to do (--force runs again)`);
    emit({ outcome: "already-bootstrapped", marker: options.marker });
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
  let last: ExecResult | undefined;
  let attempts = 0;
  let payload: Uint8Array | undefined;
  let applied: AppliedPayload | undefined;
  let outcome: Record<string, unknown> = {};
  const commandIo = { env: io.env, stdout: io.stdout, stderr: io.stderr, root };
  const timeout = options.execTimeoutMs ? { timeoutMs: options.execTimeoutMs } : {};
  const onStart = (label: string): void => {
    reporter.report({ phase: "running", message: label });
    log(`running ${label}`);
  };
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

    const kind = options.out !== undefined ? "raw" : payloadKind(options.payload ?? "auto", payload);
    applied = await applyPayload(kind, payload, {
      policy,
      marker: { what: "the marker", target: marker },
      sentinel:
        sentinel && options.sentinel !== null
          ? { what: "the sentinel", target: sentinel, path: options.sentinel }
          : null,
      ...(options.out !== undefined ? { out: options.out } : {}),
      allowUnsafeModes: options.allowUnsafeModes === true,
      allowUnknownModules: options.allowUnknownModules === true,
      labeler: deps.labeler,
      log,
      ...(deps.write ? { write: deps.write } : {}),
      systemd: deps.systemd ?? systemctlControl(options.systemctl ?? "systemctl", io),
      env: io.env,
      run: (module, commands) => runCommands(module, commands, { ...commandIo, ...timeout, onStart }),
    });
    const written = applied.written;
    reporter.report({
      phase: "written",
      message: `${kind}: ${written.length} file(s): ${written.join(", ")}`,
    });

    // The bootstrap command: the payload's own (runcmd), then --exec; both must succeed.
    if (applied.commands.length > 0) {
      last = (await runCommands("runcmd", applied.commands, { ...commandIo, ...timeout, onStart })).at(-1);
    }
    if (options.exec !== undefined) {
      reporter.report({ phase: "running", message: options.exec });
      last = await runCommand(options.exec, {
        env: { ...io.env, BOOTSEAL_ROOT: root },
        stdout: io.stdout,
        stderr: io.stderr,
        ...timeout,
      });
      if (last.exitCode !== 0) throw new ExecFailedError(last);
    }

    const record = {
      completedAt: new Date().toISOString(),
      source: source.kind === "service" ? `${source.url.origin}${source.url.pathname}` : source.display,
      machine: machine ? formatMachineId(machine) : null,
      sha256: createHash("sha256").update(doc.bytes).digest("hex"),
      ...(doc.etag ? { etag: doc.etag } : {}),
      kind,
      files: written,
    };
    await writeResolved(marker, new TextEncoder().encode(`${JSON.stringify(record, null, 2)}\n`), {
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
      log(note.slice(2));
    }
    const done: StatusReport = {
      phase: "succeeded",
      attempt: attempts,
      message: `bootstrap done in ${((Date.now() - started) / 1000).toFixed(1)}s${note}`,
      ...(last ? { exitCode: last.exitCode ?? -1, output: last.outputTail } : {}),
    };
    reporter.report(done);
    outcome = {
      outcome: "succeeded",
      machine: record.machine,
      source: record.source,
      kind,
      files: written,
      sha256: record.sha256,
      ...(doc.etag ? { etag: doc.etag } : {}),
      attempts,
      ...(last ? { exitCode: last.exitCode ?? -1 } : {}),
    };
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
    applied?.wipe();
  }
  await reporter.flush(options.reportTimeoutMs);
  if (options.oneTime && source.kind === "service") await deleteConfig(source, token, ca, log);
  log(`succeeded in ${((Date.now() - started) / 1000).toFixed(2)}s`);
  emit({ ...outcome, seconds: Number(((Date.now() - started) / 1000).toFixed(3)) });
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
