/**
 * `path_regex` is Go RE2 syntax (sops compiles it with Go's regexp and matches unanchored).
 * JavaScript differs in the places that matter for paths, so the pattern is translated
 * token by token into an equivalent `u`-mode RegExp:
 *
 * - inline flags `(?i)`, `(?s)`, `(?m)`, `(?-i)` (anywhere) and flag groups `(?i:…)`:
 *   `s` and `m` are applied by the translator itself (they only change `.`, `^`, `$`),
 *   `i` becomes a JS modifier group `(?i:…)` that is closed at `|` and `)` and reopened
 *   after `|`, because a Go flag lasts to the end of the enclosing group, across `|`;
 * - `.` is "anything but \n" (JS also excludes \r and U+2028/9); `^`/`$` are text
 *   boundaries unless `m`; `\A`, `\z`; `\s` is ASCII `[\t\n\f\r ]`;
 * - `\Q…\E`, `\x{…}`, octal, escaped punctuation, literal `{` `}` `]`, POSIX classes
 *   `[[:alpha:]]`, `\pL`/`\p{Greek}`, `(?P<name>…)`;
 * - what Go refuses (back-references, look-around, `\C`, flag `U`) is refused too.
 */
import { BootsealError } from "../errors.ts";

const POSIX: Readonly<Record<string, string>> = {
  alnum: "0-9A-Za-z",
  alpha: "A-Za-z",
  ascii: "\\x00-\\x7F",
  blank: "\\t ",
  cntrl: "\\x00-\\x1F\\x7F",
  digit: "0-9",
  graph: "!-~",
  lower: "a-z",
  print: " -~",
  punct: "!-\\/:-@\\[-`{-~",
  space: "\\t\\n\\v\\f\\r ",
  upper: "A-Z",
  word: "0-9A-Za-z_",
  xdigit: "0-9A-Fa-f",
};

interface Flags {
  readonly i: boolean;
  readonly m: boolean;
  readonly s: boolean;
}

interface Scope {
  flags: Flags;
  /** JS modifier groups opened by inline flags in this scope, to close at `|`/`)`. */
  readonly opened: string[];
}

function unsupported(pattern: string, why: string): BootsealError {
  return new BootsealError("BAD_INPUT", `cannot compile path_regex ${JSON.stringify(pattern)}: ${why}`);
}

const cp = (code: number): string => `\\u{${code.toString(16)}}`;

/** Parses a flag string like `i`, `-s`, `im-s`; returns the new flags. */
function applyFlags(flags: Flags, spec: string, pattern: string): Flags {
  let on = true;
  const next = { ...flags };
  for (const ch of spec) {
    if (ch === "-") {
      if (!on) throw unsupported(pattern, "invalid flags");
      on = false;
    } else if (ch === "i" || ch === "m" || ch === "s") {
      next[ch] = on;
    } else {
      throw unsupported(pattern, ch === "U" ? "flag U is not supported" : "invalid flags");
    }
  }
  return next;
}

function modifier(from: Flags, to: Flags): string | null {
  if (from.i === to.i) return null;
  return to.i ? "(?i:" : "(?-i:";
}

/** One escape after `\` at `pattern[at]`; returns the JS text and the index after it. */
function translateEscape(pattern: string, at: number, inClass: boolean): [string, number] {
  const c = pattern[at];
  if (c === undefined) throw unsupported(pattern, "trailing backslash");
  const simple: Record<string, string> = { a: "\\x07", f: "\\f", t: "\\t", n: "\\n", r: "\\r", v: "\\v" };
  if (simple[c]) return [simple[c], at + 1];
  if ("dDwW".includes(c)) return [`\\${c}`, at + 1];
  if (c === "s") return [inClass ? "\\t\\n\\f\\r " : "[\\t\\n\\f\\r ]", at + 1];
  if (c === "S") return [inClass ? "\\S" : "[^\\t\\n\\f\\r ]", at + 1];
  if (!inClass && (c === "b" || c === "B")) return [`\\${c}`, at + 1];
  if (!inClass && c === "A") return ["(?<![\\s\\S])", at + 1];
  if (!inClass && c === "z") return ["(?![\\s\\S])", at + 1];
  if (c === "x") {
    const braced = /^\{([0-9A-Fa-f]{1,6})\}/.exec(pattern.slice(at + 1));
    if (braced?.[1]) return [cp(Number.parseInt(braced[1], 16)), at + 1 + braced[0].length];
    const two = /^[0-9A-Fa-f]{2}/.exec(pattern.slice(at + 1));
    if (two) return [cp(Number.parseInt(two[0], 16)), at + 3];
    throw unsupported(pattern, "invalid \\x escape");
  }
  if (/[0-7]/.test(c)) {
    const octal = /^[0-7]{1,3}/.exec(pattern.slice(at))?.[0] ?? c;
    // Go: a lone \1-\7 is a back-reference, which RE2 does not have.
    if (c !== "0" && octal.length === 1) throw unsupported(pattern, "back-references are not supported");
    return [cp(Number.parseInt(octal, 8)), at + octal.length];
  }
  if (c === "p" || c === "P") {
    let name: string;
    let end: number;
    if (pattern[at + 1] === "{") {
      const close = pattern.indexOf("}", at + 2);
      if (close < 0) throw unsupported(pattern, "invalid \\p escape");
      name = pattern.slice(at + 2, close);
      end = close + 1;
    } else {
      name = pattern[at + 1] ?? "";
      end = at + 2;
    }
    let negate = c === "P";
    if (name.startsWith("^")) {
      negate = !negate;
      name = name.slice(1);
    }
    if (!/^[A-Za-z_]+$/.test(name)) throw unsupported(pattern, "invalid \\p escape");
    // Go accepts general categories (L, Lu, …), scripts (Greek) and Any.
    const prop = name === "Any" || /^[A-Z][a-z]?$/.test(name) ? name : `Script=${name}`;
    return [`\\${negate ? "P" : "p"}{${prop}}`, end];
  }
  if (/[!-/:-@[-`{-~]/.test(c)) return [cp(c.charCodeAt(0)), at + 1];
  throw unsupported(pattern, `escape \\${c} is not supported`);
}

function translateClass(pattern: string, start: number): [string, number] {
  let i = start + 1;
  let out = "[";
  if (pattern[i] === "^") {
    out += "^";
    i++;
  }
  let first = true;
  for (;;) {
    const c = pattern[i];
    if (c === undefined) throw unsupported(pattern, "missing closing ]");
    if (c === "]" && !first) return [`${out}]`, i + 1];
    first = false;
    if (c === "[" && pattern[i + 1] === ":") {
      const close = pattern.indexOf(":]", i + 2);
      const name = close < 0 ? "" : pattern.slice(i + 2, close);
      const range = POSIX[name];
      if (!range) throw unsupported(pattern, "unsupported character class");
      out += range;
      i = close + 2;
    } else if (c === "\\") {
      const [text, next] = translateEscape(pattern, i + 1, true);
      out += text;
      i = next;
    } else {
      out += c === "]" || c === "[" ? cp(c.charCodeAt(0)) : c;
      i += c.length;
    }
  }
}

/** Translates a Go RE2 pattern; throws BAD_INPUT when Go would refuse it or JS cannot express it. */
export function translateGoRegex(pattern: string): string {
  const root: Scope = { flags: { i: false, m: false, s: false }, opened: [] };
  const stack: Scope[] = [root];
  let out = "";
  let i = 0;
  const top = (): Scope => stack[stack.length - 1] ?? root;
  const closeOpened = (scope: Scope): string => ")".repeat(scope.opened.length);
  while (i < pattern.length) {
    const c = pattern[i] ?? "";
    const scope = top();
    if (c === "\\") {
      if (pattern[i + 1] === "Q") {
        const end = pattern.indexOf("\\E", i + 2);
        const literal = pattern.slice(i + 2, end < 0 ? undefined : end);
        for (const ch of literal) out += cp(ch.codePointAt(0) ?? 0);
        i = end < 0 ? pattern.length : end + 2;
        continue;
      }
      if (pattern[i + 1] === "C") throw unsupported(pattern, "\\C is not supported");
      const [text, next] = translateEscape(pattern, i + 1, false);
      out += text;
      i = next;
    } else if (c === "[") {
      const [text, next] = translateClass(pattern, i);
      out += text;
      i = next;
    } else if (c === "(") {
      const rest = pattern.slice(i);
      const flagOnly = /^\(\?([a-zA-Z-]*)\)/.exec(rest);
      const flagGroup = /^\(\?([a-zA-Z-]*):/.exec(rest);
      const named = /^\(\?P?<([A-Za-z0-9_]+)>/.exec(rest);
      if (flagOnly) {
        const next = applyFlags(scope.flags, flagOnly[1] ?? "", pattern);
        const mod = modifier(scope.flags, next);
        if (mod) {
          out += mod;
          scope.opened.push(mod);
        }
        scope.flags = next;
        i += flagOnly[0].length;
      } else if (flagGroup) {
        const next = applyFlags(scope.flags, flagGroup[1] ?? "", pattern);
        out += modifier(scope.flags, next) ?? "(?:";
        stack.push({ flags: next, opened: [] });
        i += flagGroup[0].length;
      } else if (named) {
        out += `(?<${named[1]}>`;
        stack.push({ flags: scope.flags, opened: [] });
        i += named[0].length;
      } else if (rest.startsWith("(?")) {
        throw unsupported(pattern, "look-around and other (? groups are not supported");
      } else {
        out += "(";
        stack.push({ flags: scope.flags, opened: [] });
        i++;
      }
    } else if (c === ")") {
      if (stack.length === 1) throw unsupported(pattern, "unexpected )");
      out += `${closeOpened(scope)})`;
      stack.pop();
      i++;
    } else if (c === "|") {
      out += `${closeOpened(scope)}|${scope.opened.join("")}`;
      i++;
    } else if (c === ".") {
      out += scope.flags.s ? "[\\s\\S]" : "[^\\n]";
      i++;
    } else if (c === "^") {
      out += scope.flags.m ? "(?<![^\\n])" : "(?<![\\s\\S])";
      i++;
    } else if (c === "$") {
      out += scope.flags.m ? "(?![^\\n])" : "(?![\\s\\S])";
      i++;
    } else if (c === "{") {
      // Go reads `{` as a literal unless it starts a valid repeat; JS `u` mode refuses a lone one.
      const repeat = /^\{\d+(,\d*)?\}/.exec(pattern.slice(i));
      out += repeat ? repeat[0] : "\\{";
      i += repeat ? repeat[0].length : 1;
    } else if (c === "}" || c === "]") {
      out += `\\${c}`;
      i++;
    } else {
      const ch = String.fromCodePoint(pattern.codePointAt(i) ?? 0);
      out += ch;
      i += ch.length;
    }
  }
  if (stack.length !== 1) throw unsupported(pattern, "missing )");
  return out + closeOpened(root);
}

/** Compiles a `path_regex` for an unanchored search, as Go's MatchString does. */
export function compileGoRegex(pattern: string): RegExp {
  const source = translateGoRegex(pattern);
  try {
    return new RegExp(source, "u");
  } catch (err) {
    throw new BootsealError("BAD_INPUT", `cannot compile path_regex ${JSON.stringify(pattern)}`, {
      cause: err,
    });
  }
}
