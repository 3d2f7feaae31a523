/**
 * Quoting for PowerShell, the one target language whose stub is written by hand. YAML and
 * JSON go through their serialisers; no value is ever put in shell source (the install
 * script reads its inputs from the environment, see linux-files.ts for the env file).
 */

/**
 * A PowerShell single-quoted string: nothing is expanded inside; a quote is written twice.
 * PowerShell also takes the typographic single quotes U+2018..U+201B as quote characters,
 * so those are doubled too.
 */
export function psSingleQuoted(value: string): string {
  return `'${value.replace(/['\u2018\u2019\u201a\u201b]/g, (q) => q + q)}'`;
}
