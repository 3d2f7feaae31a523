/**
 * Go RE2 (regexp/syntax) -> JavaScript RegExp, for the selection rules and `.sops.yaml`
 * path_regex. sops matches with regexp.Match: unanchored search over the UTF-8 string.
 *
 * The translation is exact for what it accepts: `.`, `^`, `$`, `\A`, `\z`, `\s`, `\d`, `\w`
 * and POSIX classes become explicit ASCII sets or lookarounds, because JavaScript's own
 * meanings differ (line terminators, Unicode spaces). Flags `i`, `m`, `s` work as in RE2
 * (`(?i)` mid-pattern, `(?i:…)`, `(?-s)`); named groups lose their names (no backreferences
 * in RE2 anyway). Anything RE2 rejects, and the few RE2 features with no faithful JavaScript
 * form (`U` ungreedy flag, `\C`), throw BAD_INPUT: a rule we cannot evaluate exactly is
 * refused rather than guessed at.
 */
import { BootsealError } from "../../errors.ts";

interface Flags {
  i: boolean;
  m: boolean;
  s: boolean;
}

const MAX_CODE_POINT = 0x10ffff;
type Range = readonly [number, number];

const ch = (c: string): number => c.codePointAt(0)!;
const r = (a: string, b: string = a): Range => [ch(a), ch(b)];

const POSIX: Readonly<Record<string, readonly Range[]>> = {
  alnum: [r("0", "9"), r("A", "Z"), r("a", "z")],
  alpha: [r("A", "Z"), r("a", "z")],
  ascii: [[0, 0x7f]],
  blank: [r("\t"), r(" ")],
  cntrl: [
    [0, 0x1f],
    [0x7f, 0x7f],
  ],
  digit: [r("0", "9")],
  graph: [r("!", "~")],
  lower: [r("a", "z")],
  print: [r(" ", "~")],
  punct: [r("!", "/"), r(":", "@"), r("[", "`"), r("{", "~")],
  space: [r("\t", "\r"), r(" ")],
  upper: [r("A", "Z")],
  word: [r("0", "9"), r("A", "Z"), r("a", "z"), r("_")],
  xdigit: [r("0", "9"), r("A", "F"), r("a", "f")],
};

// RE2's Perl classes are ASCII-only; \s has no \v.
const PERL: Readonly<Record<string, readonly Range[]>> = {
  d: POSIX.digit!,
  s: [r("\t", "\n"), r("\f", "\r"), r(" ")],
  w: POSIX.word!,
};

const GENERAL_CATEGORIES = new Set(
  "C Cc Cf Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps S Sc Sk Sm So Z Zl Zp Zs".split(
    " ",
  ),
);

function complement(ranges: readonly Range[]): Range[] {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Range[] = [];
  let next = 0;
  for (const [lo, hi] of sorted) {
    if (lo > next) out.push([next, lo - 1]);
    next = Math.max(next, hi + 1);
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

const lit = (cp: number): string => `\\u{${cp.toString(16)}}`;
const rangesBody = (ranges: readonly Range[]): string =>
  ranges.map(([lo, hi]) => (lo === hi ? lit(lo) : `${lit(lo)}-${lit(hi)}`)).join("");

function fail(): never {
  throw new BootsealError("BAD_INPUT", "Invalid regular expression");
}

class Translator {
  private readonly src: readonly string[];
  private pos = 0;

  constructor(pattern: string) {
    this.src = Array.from(pattern);
  }

  run(): string {
    const out = this.sequence({ i: false, m: false, s: false }, false);
    if (this.pos < this.src.length) fail();
    return out;
  }

  private peek(offset = 0): string | undefined {
    return this.src[this.pos + offset];
  }

  /** A run of alternatives up to `)` (when inGroup) or the end. */
  private sequence(start: Flags, inGroup: boolean): string {
    let flags = { ...start };
    let out = "";
    // Inline `(?i)` changes last to the end of the group, across `|`; JavaScript modifiers
    // only exist as groups, so each alternative reopens the pending modifier groups.
    let opened: string[] = [];
    while (this.pos < this.src.length) {
      const c = this.peek()!;
      if (c === ")") {
        if (!inGroup) fail();
        break;
      }
      if (c === "|") {
        this.pos++;
        out += ")".repeat(opened.length) + "|" + opened.join("");
        continue;
      }
      if (c === "(" && this.peek(1) === "?") {
        const change = this.tryInlineFlags(flags);
        if (change) {
          flags = change.flags;
          if (change.modifier) {
            out += change.modifier;
            opened = [...opened, change.modifier];
          }
          continue;
        }
      }
      out += this.atom(flags);
    }
    return out + ")".repeat(opened.length);
  }

  /** `(?flags)` alone: returns the new flags and the JS modifier group to open, if any. */
  private tryInlineFlags(flags: Flags): { flags: Flags; modifier: string } | null {
    const rest = this.src.slice(this.pos + 2, this.pos + 12).join("");
    const m = /^([imsU-]*)\)/.exec(rest);
    if (!m) return null;
    const next = applyFlags(flags, m[1]!);
    this.pos += 2 + m[0].length;
    const modifier = next.i === flags.i ? "" : next.i ? "(?i:" : "(?-i:";
    return { flags: next, modifier };
  }

  /** One atom and its repetition operators. */
  private atom(flags: Flags): string {
    const c = this.src[this.pos++]!;
    let text: string;
    switch (c) {
      case "(":
        text = this.group(flags);
        break;
      case "[":
        text = this.charClass();
        break;
      case ".":
        text = flags.s ? "[\\s\\S]" : "[^\\n]";
        break;
      // Assertions take no repetition (JavaScript would reject a quantified lookaround).
      case "^":
        return flags.m ? "(?<![^\\n])" : "(?<![\\s\\S])";
      case "$":
        return flags.m ? "(?![^\\n])" : "(?![\\s\\S])";
      case "\\":
        text = this.escape(false);
        break;
      case "*":
      case "+":
      case "?":
        fail();
        break;
      case "{":
        if (/^\{\d+(,\d*)?\}/.test(this.src.slice(this.pos - 1, this.pos + 24).join(""))) fail();
        text = lit(ch(c));
        break;
      default:
        text = /[A-Za-z0-9]/.test(c) ? c : lit(ch(c));
    }
    return text + this.repetition();
  }

  private repetition(): string {
    let out = "";
    let count = 0;
    for (;;) {
      const c = this.peek();
      if (c === "*" || c === "+" || c === "?") {
        this.pos++;
        out += c;
      } else if (c === "{") {
        const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.pos, this.pos + 24).join(""));
        if (!m) break;
        const lo = Number(m[1]);
        const hi = m[3] === undefined || m[3] === "" ? lo : Number(m[3]);
        // RE2 caps counted repetition at 1000.
        if (lo > 1000 || hi > 1000 || (m[2] !== undefined && m[3] !== "" && hi < lo)) fail();
        this.pos += m[0].length;
        out += m[0];
      } else {
        break;
      }
      count++;
      // RE2 rejects `a**` and `a*+`; only a trailing `?` (non-greedy) is allowed.
      if (count > 1 && !(count === 2 && out.endsWith("?"))) fail();
      if (this.peek() === "?" && count === 1) {
        this.pos++;
        out += "?";
        count++;
      }
    }
    return out;
  }

  private group(flags: Flags): string {
    let prefix = "(";
    let inner = flags;
    if (this.peek() === "?") {
      const rest = this.src.slice(this.pos, this.pos + 12).join("");
      const named = /^\?P?<([A-Za-z0-9_]+)>/.exec(this.src.slice(this.pos).join(""));
      const flagged = /^\?([imsU-]+):/.exec(rest);
      if (rest.startsWith("?:")) {
        prefix = "(?:";
        this.pos += 2;
      } else if (named) {
        // Names only matter for submatches, which selection never uses.
        this.pos += named[0].length;
      } else if (flagged) {
        inner = applyFlags(flags, flagged[1]!);
        this.pos += flagged[0].length;
        prefix = inner.i === flags.i ? "(?:" : inner.i ? "(?i:" : "(?-i:";
      } else {
        fail();
      }
    }
    const body = this.sequence(inner, true);
    if (this.peek() !== ")") fail();
    this.pos++;
    return prefix + body + ")";
  }

  /** An escape after `\`; inClass: returns ranges-body text usable inside `[...]`. */
  private escape(inClass: boolean): string {
    const c = this.src[this.pos++];
    if (c === undefined) fail();
    const perl = PERL[c.toLowerCase()];
    if (perl && /[dswDSW]/.test(c)) {
      const ranges = c === c.toLowerCase() ? perl : complement(perl);
      return inClass ? rangesBody(ranges) : `[${rangesBody(ranges)}]`;
    }
    if (c === "p" || c === "P") return this.unicodeClass(c === "P");
    if (!inClass) {
      if (c === "A") return "(?<![\\s\\S])";
      if (c === "z") return "(?![\\s\\S])";
      if (c === "b" || c === "B") return `\\${c}`;
      if (c === "Q") return this.quoted();
    }
    const cp = this.escapedCodePoint(c);
    return lit(cp);
  }

  private escapedCodePoint(c: string): number {
    const simple: Record<string, number> = { a: 7, f: 12, t: 9, n: 10, r: 13, v: 11 };
    if (simple[c] !== undefined) return simple[c];
    if (c >= "0" && c <= "7") {
      // Octal: \0 plus up to two more digits, or \1-\7 followed by digits (RE2 has no
      // backreferences, so a lone \1 is an error).
      let digits = c;
      while (digits.length < 3 && /[0-7]/.test(this.peek() ?? "")) digits += this.src[this.pos++];
      if (c !== "0" && digits.length === 1) fail();
      return Number.parseInt(digits, 8);
    }
    if (c === "x") {
      if (this.peek() === "{") {
        const m = /^\{([0-9A-Fa-f]+)\}/.exec(this.src.slice(this.pos, this.pos + 12).join(""));
        if (!m) fail();
        this.pos += m[0].length;
        const cp = Number.parseInt(m[1]!, 16);
        if (cp > MAX_CODE_POINT) fail();
        return cp;
      }
      const two = this.src.slice(this.pos, this.pos + 2).join("");
      if (!/^[0-9A-Fa-f]{2}$/.test(two)) fail();
      this.pos += 2;
      return Number.parseInt(two, 16);
    }
    // Any ASCII punctuation may be escaped; letters and digits may not (\C, \e, … are errors).
    if (c.length === 1 && /[!-/:-@[-`{-~]/.test(c)) return ch(c);
    fail();
  }

  private quoted(): string {
    let out = "";
    while (this.pos < this.src.length) {
      if (this.peek() === "\\" && this.peek(1) === "E") {
        this.pos += 2;
        return out;
      }
      out += lit(ch(this.src[this.pos++]!));
    }
    return out;
  }

  private unicodeClass(negated: boolean): string {
    let name: string;
    if (this.peek() === "{") {
      const end = this.src.indexOf("}", this.pos);
      if (end === -1) fail();
      name = this.src.slice(this.pos + 1, end).join("");
      this.pos = end + 1;
    } else {
      const next = this.src[this.pos++];
      if (next === undefined) fail();
      name = next;
    }
    if (name.startsWith("^")) {
      negated = !negated;
      name = name.slice(1);
    }
    if (!/^[A-Za-z_]+$/.test(name)) fail();
    let prop: string;
    if (name === "Any") prop = "Any";
    else if (GENERAL_CATEGORIES.has(name)) prop = `General_Category=${name}`;
    else prop = `Script=${name}`;
    const text = `\\${negated ? "P" : "p"}{${prop}}`;
    // Validate the property name now so an unknown script fails as a bad rule.
    try {
      new RegExp(text, "u");
    } catch {
      fail();
    }
    return text;
  }

  private charClass(): string {
    let negated = false;
    if (this.peek() === "^") {
      negated = true;
      this.pos++;
    }
    let body = "";
    let first = true;
    for (;;) {
      const c = this.peek();
      if (c === undefined) fail();
      if (c === "]" && !first) {
        this.pos++;
        break;
      }
      first = false;
      if (c === "[" && this.peek(1) === ":") {
        const m = /^\[:(\^?)([a-z]+):\]/.exec(this.src.slice(this.pos, this.pos + 12).join(""));
        if (m) {
          const ranges = POSIX[m[2]!];
          if (!ranges) fail();
          this.pos += m[0].length;
          body += rangesBody(m[1] === "^" ? complement(ranges) : ranges);
          continue;
        }
      }
      const lo = this.classChar();
      if (typeof lo === "string") {
        body += lo;
        continue;
      }
      if (this.peek() === "-" && this.peek(1) !== undefined && this.peek(1) !== "]") {
        this.pos++;
        const hi = this.classChar();
        if (typeof hi === "string" || hi < lo) fail();
        body += `${lit(lo)}-${lit(hi)}`;
      } else {
        body += lit(lo);
      }
    }
    if (body === "") fail();
    return `[${negated ? "^" : ""}${body}]`;
  }

  /** One class member: a code point, or (for \d, \pL, …) ready-made class body text. */
  private classChar(): number | string {
    const c = this.src[this.pos++]!;
    if (c !== "\\") return ch(c);
    const e = this.peek();
    if (e !== undefined && /[dswDSWpP]/.test(e)) return this.escape(true);
    this.pos++;
    if (e === undefined) fail();
    return this.escapedCodePoint(e);
  }
}

function applyFlags(flags: Flags, spec: string): Flags {
  const next = { ...flags };
  let on = true;
  let sawNegation = false;
  for (const f of spec) {
    if (f === "-") {
      if (sawNegation) fail();
      sawNegation = true;
      on = false;
      continue;
    }
    // Ungreedy mode has no JavaScript equivalent.
    if (f === "U") throw new BootsealError("BAD_INPUT", "Unsupported regular expression flag");
    next[f as keyof Flags] = on;
  }
  if (spec === "" || spec.endsWith("-")) fail();
  return next;
}

/** Translate a Go RE2 pattern to an equivalent JavaScript RegExp (unanchored search). */
export function compileRe2(pattern: string): RegExp {
  const source = new Translator(pattern).run();
  try {
    return new RegExp(source, "u");
  } catch (err) {
    throw new BootsealError("BAD_INPUT", "Invalid regular expression", { cause: err });
  }
}
