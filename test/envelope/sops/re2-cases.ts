/**
 * The RE2 table shared by re2.test.ts (our answers) and re2-sops.test.ts (the real sops's):
 * the features sops users write in encrypted_regex & co. and path_regex.
 */

// [pattern, input, does Go's regexp.MatchString find a match]
export const CASES: [string, string, boolean][] = [
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
export const REFUSED: [string, string][] = [
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
