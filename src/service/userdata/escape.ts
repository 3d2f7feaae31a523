/**
 * Quoting for the languages a value is written into by hand: PowerShell literals, systemd
 * command lines (the bootstrap command in the unit's drop-in) and Windows command lines (the
 * scheduled task's arguments). YAML and JSON go through their serialisers; no value is ever
 * put in shell source (the install script reads its inputs from the environment, see
 * linux-files.ts for the env file).
 */

/**
 * A PowerShell single-quoted string: nothing is expanded inside; a quote is written twice.
 * PowerShell also takes the typographic single quotes U+2018..U+201B as quote characters,
 * so those are doubled too.
 */
export function psSingleQuoted(value: string): string {
  return `'${value.replace(/['\u2018\u2019\u201a\u201b]/g, (q) => q + q)}'`;
}

/**
 * One word of a systemd command line (ExecStart=): double-quoted, with `\` and `"` escaped
 * as C escapes, `%` doubled (no specifier expands) and `$` doubled (no variable expands).
 * The value has passed the printable check (no line break), so the word stays on its line.
 */
export function systemdQuoted(value: string): string {
  if (/[\u0000-\u001f\u007f]/.test(value)) throw new Error("a systemd word may not hold a control character");
  const escaped = value
    .replace(/\\/g, "\\\\")
    .replace(/"/g, '\\"')
    .replace(/%/g, "%%")
    .replace(/\$/g, "$$$$");
  return `"${escaped}"`;
}

/**
 * One argument of a Windows command line, quoted so that CommandLineToArgvW (and Node's own
 * argv on Windows) gives back exactly `value`: backslashes are literal except before a quote,
 * where they are doubled, and a quote is escaped with one more backslash.
 */
export function windowsArg(value: string): string {
  let out = '"';
  let backslashes = 0;
  for (const ch of value) {
    if (ch === "\\") {
      backslashes++;
      continue;
    }
    out += ch === '"' ? `${"\\".repeat(backslashes * 2 + 1)}"` : `${"\\".repeat(backslashes)}${ch}`;
    backslashes = 0;
  }
  return `${out}${"\\".repeat(backslashes * 2)}"`;
}
