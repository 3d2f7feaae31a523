/**
 * The RE2 features sops users write in encrypted_regex & co. and path_regex, checked twice:
 * against a table of Go's regexp answers, and against the real sops (which evaluates
 * encrypted_regex with Go's regexp.MatchString) on the same keys.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { compileRegex, compileRule } from "../../../src/envelope/sops/walk.ts";
import { type SopsPeer, startSopsPeer } from "./codecs/sops-peer.ts";

// [pattern, input, does Go's regexp.MatchString find a match]
const CASES: [string, string, boolean][] = [
  ["^(data|stringData)$", "data", true],
  ["^(data|stringData)$", "xdata", false],
  ["data", "metadata_x", true], // unanchored search, not a whole-string match
  ["(?i)^PASS", "password", true],
  ["a(?i)b|c", "C", true], // an inline flag lasts to the end of the group, across |
  ["a(?i)b|c", "AB", false],
  ["a(?i:b)c", "aBc", true],
  ["a(?i:b)c", "aBC", false],
  ["(?i)k", "\u212a", true], // Kelvin sign folds to k in Go
  ["foo\\z", "foo\n", false],
  ["foo$", "foo\n", false], // $ is end of text without (?m), unlike Perl
  ["(?m)^bar$", "foo\nbar", true],
  ["\\Afoo", "xfoo", false],
  ["(?P<name>ab)+$", "abab", true],
  ["(?<name>ab)", "ab", true],
  ["[[:alpha:]]+_[[:digit:]]", "ab_1", true],
  ["[[:alpha:]]", "é", false], // POSIX classes are ASCII
  ["^[[:^alpha:]]+$", "1-2", true],
  ["^[[:^alpha:]]+$", "1a", false],
  ["\\Qa.b\\E", "axb", false],
  ["\\Qa.b\\E", "a.b", true],
  ["x{2,3}", "xx", true],
  ["^{foo}$", "{foo}", true], // a brace that is no repeat count is a literal
  ["a.c", "a\rc", true],
  ["a.c", "a\nc", false],
  ["(?s)a.c", "a\nc", true],
  ["\\d", "\u0663", false], // \d \s \w are ASCII in Go
  ["\\s", "\v", false],
  ["\\s", "\u00a0", false],
  ["\\w", "é", false],
  ["\\pL", "é", true],
  ["\\pN", "\u0663", true],
  ["\\p{Greek}", "α", true],
  ["\\PL", "a", false],
  ["[\\d-]+$", "1-2", true],
  ["\\x41\\x{42}\\103", "ABC", true],
  ["\\-\\#\\:", "-#:", true],
  ["a]", "a]", true],
  ["[]a]", "]", true],
  ["é+", "éé", true],
  ["^.$", "😀", true], // . is one code point, not one UTF-16 unit
  ["^a+?$", "aaa", true], // non-greedy still has to reach $
  ["(?U)^a+$", "aaa", true], // Go's ungreedy flag
  ["_unencrypted$", "token_unencrypted", true],
  ["\\bpass\\b", "a pass b", true],
  ["\\bpass\\b", "passwd", false],
];

// Patterns Go's regexp.Compile refuses; the key would match if a JS engine accepted them.
const REFUSED: [string, string][] = [
  ["(?=a)", "a"],
  ["a(?!b)", "ac"],
  ["(?<=a)b", "ab"],
  ["(?<!a)b", "b"],
  ["(a)\\1", "aa"],
  ["\\C", "a"],
  ["a**", "a"],
  ["x{1001}", "x".repeat(1001)],
  ["[a", "a"],
  ["a)", "a)"],
  ["(a", "a"],
  ["*a", "a"],
  ["[z-a]", "a"],
  ["\\e", "\u001b"],
  ["\\p{Nope}", "a"],
  ["(?x)a", "a"],
];

describe("Go RE2 semantics (re2js)", () => {
  for (const [pattern, input, want] of CASES) {
    test(`${pattern} on ${JSON.stringify(input)} -> ${want}`, () =>
      assert.equal(compileRegex(pattern).test(input), want));
  }
  for (const [pattern] of REFUSED) {
    test(`refuses ${pattern} with BAD_INPUT and Go's reason`, () =>
      assert.throws(() => compileRegex(pattern), {
        code: "BAD_INPUT",
        message: /^Invalid regular expression: error parsing regexp: /,
      }));
  }
  test("a selector's remembered answers equal fresh ones", () => {
    const select = compileRule({ kind: "encrypted_regex", value: "^(a|b)$" });
    const paths = [["a"], ["x", "b"], ["a"], ["x"], ["x", "b"], ["ab"]];
    const first = paths.map((p) => select(p, [], false));
    assert.deepEqual(first, [true, true, true, false, true, false]);
    assert.deepEqual(
      paths.map((p) => select(p, [], false)),
      first,
    );
  });
});

describe("the real sops selects the same keys", () => {
  let sops: SopsPeer;
  before(() => {
    sops = startSopsPeer();
  });
  after(() => sops.cleanup());

  /** Which of `keys` sops encrypts under `--encrypted-regex pattern` (top-level keys). */
  const sopsEncrypts = (pattern: string, keys: readonly string[]): boolean[] => {
    const doc = Object.fromEntries(keys.map((k) => [k, "v"]));
    const out = sops.encrypt(new TextEncoder().encode(JSON.stringify(doc)), "json", [
      "--encrypted-regex",
      pattern,
    ]);
    const parsed = JSON.parse(new TextDecoder().decode(out)) as Record<string, string>;
    return keys.map((k) => String(parsed[k]).startsWith("ENC["));
  };

  test("on every table case (one sops run per pattern)", () => {
    const byPattern = new Map<string, [string, boolean][]>();
    for (const [pattern, input, want] of CASES) {
      byPattern.set(pattern, [...(byPattern.get(pattern) ?? []), [input, want]]);
    }
    for (const [pattern, rows] of byPattern) {
      const keys = rows.map(([input]) => input);
      const select = compileRule({ kind: "encrypted_regex", value: pattern });
      const ours = keys.map((k) => select([k], [], false));
      assert.deepEqual(
        ours,
        rows.map(([, want]) => want),
        `table for ${pattern}`,
      );
      assert.deepEqual(sopsEncrypts(pattern, keys), ours, `sops on ${pattern}`);
    }
  });

  test("sops encrypts nothing for a pattern Go refuses; we refuse it outright", () => {
    for (const [pattern, key] of REFUSED) {
      assert.deepEqual(sopsEncrypts(pattern, [key]), [false], `sops on ${pattern}`);
      assert.throws(() => compileRule({ kind: "encrypted_regex", value: pattern }), { code: "BAD_INPUT" });
    }
  });
});
