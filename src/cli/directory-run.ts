/**
 * One command's per-file step over every sops document under a directory, in one process
 * (`updatekeys --recursive`, `rotate --recursive`): what sops users script as a shell loop,
 * without a process start, a config lookup and an identity load per file.
 *
 * Files are visited in lexical order of their paths (Go's filepath.Walk order); hidden
 * directories (`.git`, …) are not entered. A file without sops metadata (no `lastmodified`
 * anywhere in it: every store writes that word) is skipped unread; any other failure is
 * reported and the run goes on. On a terminal, standard error shows a progress bar and only
 * the files that did not change cleanly; otherwise one line per file, in file order. One
 * summary line ends the run; the exit code is the first failure's (0 when none failed).
 * Several files are in flight at once (`concurrency`), and each directory is fsynced once at
 * the end instead of after every file's atomic replacement (the step writes through the
 * `replace` it is given): a directory fsync per file cost more than the rest of the work.
 */
import { readdir, readFile } from "node:fs/promises";
import { join, relative, resolve } from "node:path";
import { describeError, type ErrorCode } from "../errors.ts";
import { replaceFile, syncDirectory } from "../files/atomic-write.ts";
import type { CliIo } from "./command.ts";
import { EXIT_CODES, EXIT_OK } from "./exit-codes.ts";
import { Progress } from "./progress.ts";

/** What the step did with one file; `skipped` carries why (shown to the user). */
export type FileOutcome =
  | { readonly kind: "changed" | "unchanged" }
  | { readonly kind: "skipped"; readonly reason: string };

export interface DirectoryRunWords {
  /** The command, for the summary: `updatekeys`. */
  readonly command: string;
  /** How a file that changed and one that did not are reported: `updated`, `already up to date`. */
  readonly changed: string;
  readonly unchanged: string;
}

export interface DirectorySummary {
  changed: number;
  unchanged: number;
  skipped: number;
  failed: number;
  firstFailure?: ErrorCode;
  /** Index of the file of firstFailure. */
  firstFailureAt?: number;
}

const SOPS_MARKER = Buffer.from("lastmodified");

/** Atomically replaces a file as part of the run (its directory is fsynced at the end). */
export type ReplaceFile = (path: string, data: Uint8Array) => Promise<void>;

/** Files in flight at once when nothing asks the user: enough to overlap the fsyncs. */
export const DIRECTORY_CONCURRENCY = 8;

/** Every regular file under `root`, lexically ordered, hidden directories left out. */
export async function filesUnder(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        if (!e.name.startsWith(".")) await walk(path);
      } else if (e.isFile()) out.push(path);
    }
  };
  await walk(root);
  return out;
}

/** Runs `step` on every sops document under `dir` (relative to io.cwd); resolves to the exit code. */
export async function runOverDirectory(
  dir: string,
  io: CliIo,
  words: DirectoryRunWords,
  step: (file: string, bytes: Uint8Array, replace: ReplaceFile) => Promise<FileOutcome>,
  concurrency = 1,
): Promise<number> {
  const written = new Set<string>();
  const replace: ReplaceFile = (path, data) => replaceFile(path, data, { syncDirectoryLater: written });
  const root = resolve(io.cwd, dir);
  const files = await filesUnder(root);
  const started = Date.now();
  const tty = (io.stderr as { isTTY?: boolean }).isTTY === true;
  const progress = tty ? new Progress({ total: files.length, stream: io.stderr }) : undefined;
  const sum: DirectorySummary = { changed: 0, unchanged: 0, skipped: 0, failed: 0 };
  // Each file's line, or null while it runs; lines go out in file order as they are known.
  const lines: ({ text: string; always: boolean } | null)[] = files.map(() => null);
  let shown = 0;
  const flush = () => {
    for (let line = lines[shown]; shown < lines.length && line; line = lines[++shown]) {
      if (!progress) io.stderr.write(`${line.text}\n`);
      else if (line.always) progress.note(line.text);
    }
  };
  const visit = async (k: number): Promise<void> => {
    const file = files[k] as string;
    const name = relative(io.cwd, file) || file;
    try {
      const bytes = await readFile(file);
      const outcome: FileOutcome = bytes.includes(SOPS_MARKER)
        ? await step(file, bytes, replace)
        : { kind: "skipped", reason: "not a sops document" };
      sum[outcome.kind]++;
      const text =
        outcome.kind === "skipped"
          ? `skipped (${outcome.reason})`
          : outcome.kind === "changed"
            ? words.changed
            : words.unchanged;
      lines[k] = { text: `${name}: ${text}`, always: false };
    } catch (err) {
      const { code, message } = describeError(err, "internal error: ");
      sum.failed++;
      // The first failure in file order decides the exit code, whatever order they end in.
      if (sum.firstFailureAt === undefined || k < sum.firstFailureAt) {
        sum.firstFailure = code;
        sum.firstFailureAt = k;
      }
      lines[k] = { text: `${name}: failed: ${message}`, always: true };
    }
    progress?.tick();
    flush();
  };
  let next = 0;
  const worker = async () => {
    while (next < files.length) await visit(next++);
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  for (const d of written) await syncDirectory(d);
  progress?.finish();
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  io.stderr.write(
    `${words.command}: ${files.length} files in ${seconds} s: ${sum.changed} ${words.changed}, ` +
      `${sum.unchanged} ${words.unchanged}, ${sum.skipped} skipped, ${sum.failed} failed\n`,
  );
  return sum.firstFailure === undefined ? EXIT_OK : EXIT_CODES[sum.firstFailure];
}
