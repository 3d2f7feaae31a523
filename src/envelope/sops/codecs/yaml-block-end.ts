/**
 * A block scalar (`|`, `>`) whose last line ends the input without a line break, read as
 * go-yaml v3 reads it (scannerc.go yaml_parser_scan_block_scalar). The `yaml` package reads
 * the last line as if a break followed it, so `a: |\n  x` would be "x\n" there and "x" in
 * sops: a value changing on encrypt (issue #31). go-yaml keeps only the breaks it read:
 * - a last line with content (or spaces beyond the content indentation) is content without
 *   a break after it;
 * - a last line of spaces up to the content indentation is no line at all.
 * Everything else the `yaml` package resolves as go-yaml does (test/interop/sops-end-of-input.test.ts).
 */
import { CST } from "yaml";

/** True when the text ends in a line break (a lone CR is one in go-yaml as in `yaml`). */
const endsInBreak = (text: string): boolean => text.endsWith("\n") || text.endsWith("\r");

/** The header's text: `|`, `>-`, `|2+` … */
function headerOf(token: CST.BlockScalar): string {
  for (const p of token.props) if (p.type === "block-scalar-header") return p.source;
  return "";
}

/** The column the content starts at: the header's indentation indicator, else the first content line's. */
function contentIndent(token: CST.BlockScalar, lines: readonly string[]): number {
  const explicit = /[1-9]/.exec(headerOf(token))?.[0];
  if (explicit !== undefined) return token.indent + Number(explicit);
  const first = lines.find((l) => l.trim() !== "");
  return first === undefined ? Number.POSITIVE_INFINITY : first.length - first.trimStart().length;
}

/** The token's value as go-yaml reads it. */
export function blockScalarValue(token: CST.BlockScalar): string {
  // resolveAsScalar returns null only for tokens that are not scalars.
  const resolve = (source: string): string => CST.resolveAsScalar({ ...token, source })?.value ?? "";
  const { source } = token;
  if (source === "" || endsInBreak(source)) return resolve(source);
  const cut = Math.max(source.lastIndexOf("\n"), source.lastIndexOf("\r")) + 1;
  const last = source.slice(cut);
  const lines = source.slice(0, cut).split(/\r?\n|\r/);
  if (/^ *$/.test(last) && last.length <= contentIndent(token, lines)) return resolve(source.slice(0, cut));
  const value = resolve(`${source}\n`);
  return headerOf(token).includes("-") || !value.endsWith("\n") ? value : value.slice(0, -1);
}
