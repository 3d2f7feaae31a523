/**
 * INI syntax exactly as gopkg.in/ini.v1 v1.67.3 reads and writes it with the one option sops
 * sets (AllowNonUniqueSections; stores/ini/store.go). Everything else is the library's
 * default: `=` and `:` both delimit, `#`/`;` start an inline comment anywhere in an unquoted
 * value, a trailing `\` continues the value, `"""` and backticks quote (also across lines),
 * surrounding '…' or "…" are removed, a duplicate key overwrites the earlier value in place.
 *
 * Works on byte strings (./flat-text.ts) because the library measures, trims and pads bytes.
 * ./ini.ts maps this model to the sops tree.
 */
import { BootsealError } from "../../../errors.ts";
import { indexOfAny, trimLeftSpace, trimSpace } from "./flat-text.ts";
import { checkOutputSize } from "./output.ts";

export interface IniKey {
  readonly name: string;
  value: string;
  /** Raw comment text, `;`/`#` prefixes included (sops strips them), "" for none. */
  comment: string;
}

export interface IniSection {
  readonly name: string;
  comment: string;
  readonly keys: IniKey[];
}

export const DEFAULT_SECTION = "DEFAULT";
const DELIMITERS = "=:";

function badInput(message: string, line: number): never {
  throw new BootsealError("BAD_INPUT", `INI: ${message} at line ${line}`);
}

/** Each section's keys by name (putKey is the only writer), so a large section stays linear. */
const keyIndex = new WeakMap<IniSection, Map<string, IniKey>>();

/** Section.NewKey: an existing name keeps its place and takes the new value. */
export function putKey(section: IniSection, name: string, value: string): IniKey {
  let index = keyIndex.get(section);
  if (index === undefined) {
    index = new Map(section.keys.map((k) => [k.name, k]));
    keyIndex.set(section, index);
  }
  const existing = index.get(name);
  if (existing) {
    existing.value = value;
    return existing;
  }
  const key: IniKey = { name, value, comment: "" };
  section.keys.push(key);
  index.set(name, key);
  return key;
}

/** Go's hasSurroundedQuote: quote at both ends and nowhere else. */
function hasSurroundedQuote(s: string, q: string): boolean {
  return s.length >= 2 && s[0] === q && s.at(-1) === q && s.indexOf(q, 1) === s.length - 1;
}

/** Parse (File.parse). The implicit DEFAULT section always comes first, even when empty. */
export function parseIni(input: string): IniSection[] {
  let src = input;
  // BOM(): UTF-16 marks are dropped as two bytes, the UTF-8 one as three.
  if (src.startsWith("\xfe\xff") || src.startsWith("\xff\xfe")) src = src.slice(2);
  else if (src.startsWith("\xef\xbb\xbf")) src = src.slice(3);

  // readUntil('\n'): every line keeps its `\n`; the last read is the rest, flagged EOF.
  const pieces = src.split("\n");
  let cursor = 0;
  const readLine = (): { text: string; eof: boolean } => {
    const piece = pieces[cursor];
    if (piece === undefined) return { text: "", eof: true };
    cursor++;
    const eof = cursor === pieces.length;
    return { text: eof ? piece : `${piece}\n`, eof };
  };

  let section: IniSection = { name: DEFAULT_SECTION, comment: "", keys: [] };
  const sections: IniSection[] = [section];
  let pendingComment = "";
  let autoCount = 1;
  let lineNo = 0;

  const readMultilines = (first: string, quote: string, startLine: number): string => {
    let value = first;
    for (;;) {
      const { text: next, eof } = readLine();
      lineNo = cursor;
      const pos = next.lastIndexOf(quote);
      if (pos > -1) {
        // v1.67.3: a line ending in `\` after the closing quote continues the value.
        const rest = next.slice(pos + quote.length).replace(/[\r\n]+$/, "");
        if (trimSpace(rest).endsWith("\\")) {
          value += next;
          continue;
        }
        value += next.slice(0, pos);
        const c = indexOfAny(next, "#;", pos);
        if (c > -1) pendingComment += trimSpace(next.slice(c));
        return value;
      }
      value += next;
      if (eof) badInput("missing closing quote of the value starting", startLine);
    }
  };

  const readContinuation = (first: string): string => {
    let value = first;
    for (;;) {
      const next = trimSpace(readLine().text);
      lineNo = cursor;
      if (next.length === 0) return value;
      value += next;
      if (!value.endsWith("\\")) return value;
      value = value.slice(0, -1);
    }
  };

  const readValue = (rest: string, startLine: number): string => {
    let line = trimLeftSpace(rest);
    if (line.length === 0) return "";
    const quote = line.length > 3 && line.startsWith('"""') ? '"""' : line[0] === "`" ? "`" : "";
    if (quote) {
      const pos = line.slice(quote.length).lastIndexOf(quote);
      if (pos === -1) return readMultilines(line.slice(quote.length), quote, startLine);
      // Anything after the closing quote, comment or not, is dropped by the library.
      return line.slice(quote.length, pos + quote.length);
    }
    line = trimSpace(line);
    if (line.endsWith("\\")) return readContinuation(line.slice(0, -1));
    const c = indexOfAny(line, "#;");
    if (c > -1) {
      pendingComment += line.slice(c);
      line = trimSpace(line.slice(0, c));
    }
    if (hasSurroundedQuote(line, "'") || hasSurroundedQuote(line, '"')) line = line.slice(1, -1);
    return line;
  };

  const readKeyName = (line: string): [name: string, offset: number] => {
    const quote =
      line[0] === '"'
        ? line.length > 6 && line.startsWith('"""')
          ? '"""'
          : '"'
        : line[0] === "`"
          ? "`"
          : "";
    if (quote) {
      const pos = line.indexOf(quote, quote.length);
      if (pos === -1) badInput("missing closing key quote", lineNo);
      const d = indexOfAny(line, DELIMITERS, pos + quote.length);
      if (d === -1) badInput("key-value delimiter not found", lineNo);
      return [trimSpace(line.slice(quote.length, pos)), d + 1];
    }
    const d = indexOfAny(line, DELIMITERS);
    if (d === -1) badInput("key-value delimiter not found", lineNo);
    if (d === 0) badInput("empty key name", lineNo);
    return [trimSpace(line.slice(0, d)), d + 1];
  };

  for (;;) {
    const { text: raw, eof } = readLine();
    lineNo = cursor;
    const line = trimLeftSpace(raw);
    if (line.length > 0) {
      if (line[0] === "#" || line[0] === ";") {
        // Kept with its `\n`: consecutive comment lines become one multi-line comment.
        pendingComment += line;
      } else if (line[0] === "[") {
        const close = line.lastIndexOf("]");
        if (close === -1) badInput("unclosed section", lineNo);
        const name = line.slice(1, close);
        if (name.length === 0) badInput("empty section name", lineNo);
        const c = indexOfAny(line, "#;", close + 1);
        if (c > -1) pendingComment += line.slice(c);
        section = { name, comment: trimSpace(pendingComment), keys: [] };
        sections.push(section);
        pendingComment = "";
        autoCount = 1;
      } else {
        const startLine = lineNo;
        let [name, offset] = readKeyName(line);
        // `-` is the library's auto-increment key.
        if (name === "-") name = `#${autoCount++}`;
        const value = readValue(line.slice(offset), startLine);
        if (name.length === 0) badInput("empty key name", startLine);
        putKey(section, name, value).comment = trimSpace(pendingComment);
        pendingComment = "";
      }
    }
    if (eof || cursor >= pieces.length) return sections;
  }
}

/** One comment line as the writer prints it: `; text`, or the line's own `#`/`;` marker. */
function commentLines(comment: string, trimPlain: boolean, line: string): string {
  let out = "";
  for (const l of comment.split("\n")) {
    // The library indexes l[0] and would panic on an empty line.
    if (l.length === 0) throw new BootsealError("BAD_INPUT", `INI: empty line in a comment of ${line}`);
    if (l[0] === "#" || l[0] === ";") out += `${l[0]} ${trimSpace(l.slice(1))}\n`;
    else out += `; ${trimPlain ? trimSpace(l) : l}\n`;
  }
  return out;
}

/** Write (File.writeToBuffer with PrettyFormat, PrettySection, no DefaultHeader, LF). */
export function writeIni(sections: readonly IniSection[]): string {
  let out = "";
  for (const [i, sec] of sections.entries()) {
    if (sec.comment.length > 0) out += commentLines(sec.comment, false, "a section");
    // Only a DEFAULT section in first place goes without a header (and without a blank line
    // after it when it is empty).
    if (i > 0 || sec.name.toUpperCase() !== DEFAULT_SECTION) {
      out += `[${sec.name}]\n`;
    } else if (sec.keys.length === 0) {
      continue;
    }
    const names = sec.keys.map((k) => quoteKeyName(k.name));
    // Pad to the longest (quoted) name, counted in bytes. (A loop: spreading a section's
    // names into Math.max overflows the stack for a large one.) One long name pads every
    // line of its section, so the output is checked against the cap line by line.
    let width = 0;
    for (const n of names) width = Math.max(width, n.length);
    for (const [j, key] of sec.keys.entries()) {
      if (key.comment.length > 0) out += commentLines(key.comment, true, "a key");
      const name = names[j] as string;
      checkOutputSize("ini", out.length + width);
      out += `${name}${" ".repeat(width - name.length)} = ${quoteValue(key.value)}\n`;
    }
    checkOutputSize("ini", out.length);
    if (i < sections.length - 1) out += "\n";
  }
  return out;
}

function quoteKeyName(name: string): string {
  if (name.includes('"') || indexOfAny(name, DELIMITERS) > -1) return `\`${name}\``;
  if (name.includes("`")) return `"""${name}"""`;
  return name;
}

function quoteValue(value: string): string {
  if (indexOfAny(value, "\n`") > -1) return `"""${value}"""`;
  if (indexOfAny(value, "#;") > -1) return `\`${value}\``;
  if (trimSpace(value).length !== value.length) return `"${value}"`;
  return value;
}
