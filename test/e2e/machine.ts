/**
 * The machine's side of a user-data stub, done by hand under a temporary root the way
 * cloud-init and systemd would do it on a real machine: write the stub's files,
 * read /etc/bootseal/fetch.env as systemd's EnvironmentFile= does, and turn the unit's
 * ExecStart=/ExecStartPre= lines into argv (systemd's quoting and ${VAR} expansion), with
 * the machine paths moved under the root.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

/** Writes one file under the root with exactly this mode (no umask), parents 0755. */
export async function writeUnder(root: string, path: string, bytes: string | Uint8Array, mode: number) {
  const target = join(root, path);
  await mkdir(dirname(target), { recursive: true, mode: 0o755 });
  await writeFile(target, bytes);
  await chmod(target, mode);
}

/** /etc/bootseal/fetch.env: `KEY='value'` lines (systemd takes the quoted value literally). */
export function envFileValues(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([A-Z_][A-Z0-9_]*)='([^']*)'$/.exec(line);
    assert.ok(m, `an environment file line: ${line}`);
    out[m[1] as string] = m[2] as string;
  }
  return out;
}

/**
 * The effective value of a unit setting after its drop-ins (in name order): an empty
 * assignment resets the list, as systemd does for ExecStart=/ExecStartPre=.
 */
export function effective(setting: string, unit: string, dropins: readonly string[]): string[] {
  let values: string[] = [];
  for (const text of [unit, ...dropins]) {
    for (const line of text.split("\n")) {
      if (!line.startsWith(`${setting}=`)) continue;
      const value = line.slice(setting.length + 1);
      values = value === "" ? [] : [...values, value];
    }
  }
  return values;
}

/**
 * One command line as systemd splits it: words separated by blanks, double-quoted words with
 * `\\` and `\"` escapes, `$$` and `%%` for a literal `$` and `%`, `${NAME}` from the
 * environment as one word.
 */
export function systemdArgv(line: string, env: Record<string, string>): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < line.length) {
    while (line[i] === " ") i++;
    if (i >= line.length) break;
    let word = "";
    const quoted = line[i] === '"';
    if (quoted) i++;
    while (i < line.length && (quoted ? line[i] !== '"' : line[i] !== " ")) {
      const c = line[i] as string;
      if (c === "\\" && quoted) {
        word += line[i + 1];
        i += 2;
      } else if ((c === "$" || c === "%") && line[i + 1] === c) {
        word += c;
        i += 2;
      } else if (c === "$" && line[i + 1] === "{") {
        const end = line.indexOf("}", i);
        const name = line.slice(i + 2, end);
        assert.ok(name in env, `${name} is set by the environment file`);
        word += env[name];
        i = end + 1;
      } else {
        word += c;
        i++;
      }
    }
    if (quoted) i++;
    words.push(word);
  }
  return words;
}

/** Machine paths in a command line moved under the root; `--root /` becomes `--root ROOT`. */
export function underRoot(argv: readonly string[], root: string): string[] {
  return argv.map((word, i) => {
    if (argv[i - 1] === "--root") return root;
    return /^\/(etc\/bootseal|usr\/local)\//.test(word) ? join(root, word) : word;
  });
}
