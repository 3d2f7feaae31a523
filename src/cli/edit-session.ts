/**
 * The editor half of `edit` (sops cmd/sops/edit.go): a private temporary directory (0700)
 * holding one file (0600) named like the document, the editor from SOPS_EDITOR, then EDITOR
 * (split like a shell command line: google/shlex), else the first of vim, nano, vi on the
 * PATH; the file's SHA-256 decides whether anything changed. Content that does not parse
 * sends the user back to the editor after a key press, as sops does, but at most
 * MAX_EDIT_ROUNDS times (sops loops for ever when its standard input is at its end).
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { access, mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, delimiter, join } from "node:path";
import { BootsealError } from "../errors.ts";
import type { CliIo } from "./command.ts";

export const MAX_EDIT_ROUNDS = 20;
const PRESS_KEY = "Press enter to return to the editor, or Ctrl+C to exit.";

/** google/shlex Split: words, '…' literal, "…" and bare text with backslash escapes, # comments. */
export function splitCommandLine(text: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let i = 0;
  const fail = (why: string) => new BootsealError("USAGE", why);
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
      i++;
    } else if (c === "#" && word === null) {
      const end = text.indexOf("\n", i);
      i = end === -1 ? text.length : end;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end === -1) throw fail("EOF found when expecting closing quote");
      word = (word ?? "") + text.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      let out = "";
      i++;
      for (;;) {
        if (i >= text.length) throw fail("EOF found when expecting closing quote");
        const d = text[i] as string;
        if (d === '"') break;
        if (d === "\\") {
          if (i + 1 >= text.length) throw fail("EOF found after escape character");
          out += text[i + 1];
          i += 2;
        } else {
          out += d;
          i++;
        }
      }
      word = (word ?? "") + out;
      i++;
    } else if (c === "\\") {
      if (i + 1 >= text.length) throw fail("EOF found after escape character");
      word = (word ?? "") + text[i + 1];
      i += 2;
    } else {
      word = (word ?? "") + c;
      i++;
    }
  }
  if (word !== null) words.push(word);
  return words;
}

async function onPath(name: string, env: CliIo["env"]): Promise<string | undefined> {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    try {
      await access(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The editor's argv (without the file), as sops picks it. */
export async function editorCommand(env: CliIo["env"]): Promise<string[]> {
  for (const name of ["SOPS_EDITOR", "EDITOR"]) {
    const text = env[name];
    if (text === undefined || text === "") continue;
    let parts: string[];
    try {
      parts = splitCommandLine(text);
    } catch {
      throw new BootsealError("NO_EDITOR", `Could not run editor: invalid $${name}`);
    }
    if (parts.length === 0) throw new BootsealError("NO_EDITOR", `Could not run editor: invalid $${name}`);
    return parts;
  }
  for (const name of ["vim", "nano", "vi"]) {
    const found = await onPath(name, env);
    if (found) return [found];
  }
  throw new BootsealError(
    "NO_EDITOR",
    "Could not run editor: no editor available: bootseal uses the editor in SOPS_EDITOR or EDITOR, else any of vim, nano, vi, and none was found",
  );
}

function runEditor(argv: readonly string[], file: string, env: CliIo["env"]): Promise<void> {
  const [command, ...args] = argv as [string, ...string[]];
  return new Promise((resolve, reject) => {
    // The editor owns the terminal: it gets our standard streams.
    const child = spawn(command, [...args, file], { stdio: "inherit", env: env as NodeJS.ProcessEnv });
    child.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        new BootsealError("NO_EDITOR", `Could not run editor: ${err.code ?? "cannot start"} ${command}`),
      ),
    );
    child.once("exit", (code, signal) => {
      if (code === 0) resolve();
      else
        reject(
          new BootsealError("NO_EDITOR", `Could not run editor: ${command} exited with ${signal ?? code}`),
        );
    });
  });
}

/** sops's waitForKeyPress: one read from standard input (or its end). */
function waitForKeyPress(stdin: NodeJS.ReadableStream): Promise<void> {
  const stream = stdin as NodeJS.ReadableStream & { readableEnded?: boolean };
  if (stream.readableEnded) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      stream.off("data", done);
      stream.off("end", done);
      stream.pause();
      resolve();
    };
    stream.on("data", done);
    stream.on("end", done);
    stream.resume();
  });
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

export interface EditSession<T> {
  /** The document's name: the temporary file gets its base name (editors pick a mode by it). */
  readonly name: string;
  readonly initial: Uint8Array;
  /** Parse the edited bytes; throw a BootsealError to send the user back with its message. */
  readonly accept: (edited: Uint8Array) => T;
}

/**
 * Write `initial` to a private temporary file, run the editor until `accept` takes the result;
 * the directory is removed on every way out (also SIGINT/SIGTERM while the editor runs).
 */
export async function editUntilValid<T>(session: EditSession<T>, io: CliIo): Promise<T> {
  const argv = await editorCommand(io.env);
  const dir = await mkdtemp(join(tmpdir(), "bootseal-edit-"));
  const file = join(dir, basename(session.name));
  let cancel: ((err: Error) => void) | undefined;
  const cancelled = new Promise<never>((_, reject) => {
    cancel = reject;
  });
  const onSignal = () => cancel?.(new BootsealError("USAGE", "User canceled operation"));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const handle = await open(file, "wx", 0o600);
    try {
      await handle.writeFile(session.initial);
    } finally {
      await handle.close();
    }
    const original = sha256(session.initial);
    for (let round = 1; ; round++) {
      await Promise.race([runEditor(argv, file, io.env), cancelled]);
      const edited = new Uint8Array(await readFile(file));
      if (sha256(edited) === original)
        throw new BootsealError("NOT_MODIFIED", "File has not changed, exiting.");
      try {
        return session.accept(edited);
      } catch (err) {
        if (!(err instanceof BootsealError)) throw err;
        if (round >= MAX_EDIT_ROUNDS) {
          throw new BootsealError("BAD_INPUT", `${err.message} (giving up after ${MAX_EDIT_ROUNDS} edits)`);
        }
        io.stderr.write(`bootseal: ${err.message} ${PRESS_KEY}\n`);
        await Promise.race([waitForKeyPress(io.stdin), cancelled]);
      }
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await rm(dir, { recursive: true, force: true });
  }
}
