/**
 * End of input, side by side with the real sops 3.13.2 (issue #31): for every codec that reads
 * a user's plaintext, documents that end in every way a file can end (no final newline, extra
 * newlines, trailing blanks, a comment, CRLF, a BOM, a second document) must mean the same to
 * both tools. For each plaintext:
 * - sops encrypts it and decrypts its own file: what it prints is the oracle;
 * - sops decrypts bootseal's encryption, bootseal decrypts sops's and its own: all print the
 *   oracle's bytes (so no value changed on the way in, on either side);
 * - when sops refuses the plaintext, bootseal refuses it too, with sops's exit code.
 * YAML gets a table of every scalar style at the end of the input and a fast-check property
 * over generated documents; the other formats get tables of their end-of-input cases.
 * bootseal runs in-process (src/cli/main.ts), sops as a process.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import { runChild } from "../helpers/child.ts";
import { runBootsealInProcess } from "../helpers/cli-in-process.ts";
import { peer } from "../helpers/peers.ts";
import { createHarness, type Harness, type RunResult } from "./harness.ts";

const TIMEOUT = 300_000;

/** `bootseal ARGS` in-process, with the harness's environment and the file's directory. */
const bootseal = (h: Harness, args: string[], cwd: string): Promise<RunResult> =>
  runBootsealInProcess(args, { env: h.env, cwd });

type SopsRun = (args: string[], cwd: string) => Promise<RunResult>;

const show = (b: Uint8Array | string): string => JSON.stringify(Buffer.from(b).toString("utf8"));

describe("end of input: bootseal and sops 3.13.2 read every plaintext the same", { timeout: 900_000 }, () => {
  let h: Harness;
  let n = 0;
  /** Plaintexts sops refused (so a property can check it did not test refusals only). */
  let refused = 0;

  before(() => {
    h = createHarness();
  });
  after(() => h?.cleanup());

  /**
   * The differential for one plaintext, `name` giving its format by extension. Returns a
   * description of the first disagreement, or undefined when the tools agree.
   */
  async function disagreement(
    name: string,
    plain: Uint8Array,
    sops: SopsRun = (args, cwd) => h.sops(args, { cwd }),
  ): Promise<string | undefined> {
    const dir = join(h.dir, `case-${n++}`);
    mkdirSync(dir);
    const file = join(dir, name);
    writeFileSync(file, plain);
    const encrypt = ["encrypt", "--age", h.ageRecipient, file];
    const [bySops, byBootseal] = [await sops(encrypt, dir), await bootseal(h, encrypt, dir)];
    if (bySops.status !== 0) {
      refused++;
      if (byBootseal.status === bySops.status) return undefined;
      return `sops refused (${bySops.status}: ${bySops.stderr.trim()}), bootseal exited ${byBootseal.status}: ${byBootseal.stderr.trim()}`;
    }
    if (byBootseal.status !== 0)
      return `bootseal refused (${byBootseal.status}): ${byBootseal.stderr.trim()}`;
    const ext = name.slice(name.lastIndexOf("."));
    const sopsFile = join(dir, `sops.enc${ext}`);
    const bootsealFile = join(dir, `bootseal.enc${ext}`);
    writeFileSync(sopsFile, bySops.stdout);
    writeFileSync(bootsealFile, byBootseal.stdout);
    const oracle = await sops(["decrypt", sopsFile], dir);
    if (oracle.status !== 0) return `sops cannot decrypt its own file: ${oracle.stderr.trim()}`;
    const expected = Buffer.from(oracle.stdout);
    const reads: [string, RunResult][] = [
      ["sops decrypt of bootseal's file", await sops(["decrypt", bootsealFile], dir)],
      ["bootseal decrypt of sops's file", await bootseal(h, ["decrypt", sopsFile], dir)],
      ["bootseal decrypt of its own file", await bootseal(h, ["decrypt", bootsealFile], dir)],
    ];
    for (const [what, got] of reads) {
      if (got.status !== 0) return `${what} exited ${got.status}: ${got.stderr.trim()}`;
      if (!got.stdout.equals(expected)) return `${what}: ${show(got.stdout)}, sops printed ${show(expected)}`;
    }
    return undefined;
  }

  /** One test per named plaintext of a table (with sops 3.13.3 too when `both`). */
  function table(ext: string, cases: Record<string, string>, both = false): void {
    for (const [label, plain] of Object.entries(cases)) {
      test(`${ext} ${label}: ${show(plain)}`, { timeout: TIMEOUT }, async () => {
        assert.equal(await disagreement(`doc.${ext}`, Buffer.from(plain, "utf8")), undefined, "sops 3.13.2");
        if (both) {
          const sops3 = peer("SOPS_3_13_3_BIN");
          const run: SopsRun = (args, cwd) => runChild(sops3, args, { env: h.env, cwd });
          assert.equal(
            await disagreement(`doc.${ext}`, Buffer.from(plain, "utf8"), run),
            undefined,
            "sops 3.13.3",
          );
        }
      });
    }
  }

  describe("YAML: every scalar style at the end of the input", () => {
    const LAST_VALUES: Record<string, string> = {
      plain: "a: word",
      "plain multi-line": "a: two\n  words",
      single: "a: 'quoted'",
      double: 'a: "quoted"',
      literal: "a: |\n  multi\n  line",
      "literal strip": "a: |-\n  multi\n  line",
      "literal keep": "a: |+\n  multi\n  line",
      "literal indicator": "a: |2\n    indented\n  line",
      folded: "a: >\n  x\n  y",
      "folded strip": "a: >-\n  x\n  y",
      "folded keep": "a: >+\n  x\n  y",
      "folded more-indented": "a: >\n  x\n    y",
      "literal in a list": "l:\n  - |\n    multi\n    line",
      "folded in a nested map": "m:\n  n: >\n    x\n    y",
      "literal top-level": "--- |\n  top\n  level",
      "empty literal": "a: |",
      "empty value": "a:",
    };
    const ENDINGS: Record<string, string> = {
      "no final newline": "",
      "final newline": "\n",
      "two final newlines": "\n\n",
      "trailing blanks": "  ",
      "indentation on the last line": "\n  ",
      "more-indented blank last line": "\n      ",
      "comment after": "\n# end",
      "second document": "\n---\nb: 1",
    };
    const cases: Record<string, string> = {};
    for (const [style, body] of Object.entries(LAST_VALUES)) {
      for (const [ending, tail] of Object.entries(ENDINGS)) cases[`${style}, ${ending}`] = body + tail;
    }
    table("yaml", cases);
  });

  describe("YAML: CRLF, BOM and comments at the end of the input", () => {
    table("yaml", {
      "CRLF literal, no final newline": "a: |\r\n  multi\r\n  line",
      "CRLF literal keep, final newline": "a: |+\r\n  multi\r\n  line\r\n\r\n",
      "CRLF folded": "a: >\r\n  x\r\n  y",
      "BOM literal": "\uFEFFa: |\n  multi\n  line",
      "BOM plain": "\uFEFFa: 1",
      "comment only": "# only a comment",
      "comment then literal": "# head\na: |\n  x # not a comment",
      "document end marker": "a: |\n  x\n...",
      "document end marker, literal keep": "a: |+\n  x\n\n...\n",
      "empty document": "",
      "newline only": "\n",
    });
  });

  describe("YAML: comments ending the input, with and without a final newline (sops 3.13.2 and 3.13.3)", () => {
    const RUNS: Record<string, string> = {
      "after a nested mapping": "a:\n  b:\n    c: x\n# end",
      "after a dedent": "a:\n  b:\n    c: x\n  d: y\n# end",
      "two lines": "a:\n  b: x\n# end\n# two",
      "after a blank line": "a:\n  b: x\n\n# end",
      "split by a blank line": "a:\n  b: x\n# one\n\n# two",
      "indented, then dedented after a blank line": "a:\n  b: x\n  # one\n\n# two",
      "two columns": "a:\n  b: x\n  # one\n# two",
      "several blank lines": "a:\n  b: x\n# one\n\n\n# two\n\n# three",
      "after a mapping in a list": "l:\n  - k: v\n# end",
      "after a literal in a list": "l:\n  - |\n    x\n# end",
      "after a nested list": "l:\n  - - x\n# end",
      "after a folded scalar": "m:\n  n: >\n    x\n    y\n# end",
      inline: "a:\n  b: x # end",
    };
    const cases: Record<string, string> = {
      // With a final newline sops cannot decrypt its own encryption of this one (the comment
      // moves between its write and its read, so its AAD path changes): no oracle then.
      "indented after a nested mapping, no final newline": "a:\n  b:\n    c: x\n  # end",
    };
    for (const [label, text] of Object.entries(RUNS)) {
      cases[`${label}, no final newline`] = text;
      cases[`${label}, final newline`] = `${text}\n`;
    }
    table("yaml", cases, true);
  });

  test("YAML: generated documents ending in every scalar style (fast-check)", {
    timeout: TIMEOUT,
  }, async () => {
    const word = fc.stringMatching(/^[a-z][a-z0-9 ]{0,8}[a-z0-9]$/);
    // A block scalar's lines after the first: text, empty, more-indented, trailing blanks.
    const line = fc.oneof(
      word.map((w) => `  ${w}`),
      fc.constantFrom("", "  "),
      word.map((w) => `    ${w}`),
      word.map((w) => `  ${w}  `),
    );
    const indicator = fc.constantFrom("|", "|-", "|+", ">", ">-", ">+", "|2", ">2-");
    const lastValue = fc.oneof(
      word,
      word.map((w) => `'${w}'`),
      word.map((w) => `"${w}"`),
      fc
        .tuple(indicator, word, fc.array(line, { maxLength: 3 }))
        .map(([ind, first, rest]) => [ind, `  ${first}`, ...rest].join("\n")),
    );
    const doc = fc.record({
      bom: fc.boolean(),
      head: fc.constantFrom("", "# head\n", "x: 1\n", "x: 1\n---\n", "l:\n  - 1\n"),
      key: fc.constantFrom("a", "key_unencrypted", "k"),
      value: lastValue,
      /** Where the last entry sits: at the top, in a nested mapping, in a list item. */
      nest: fc.constantFrom("top", "map", "list"),
      tail: fc.constantFrom(
        "",
        "\n",
        "\n\n",
        "\n\n\n",
        "  ",
        "\n  ",
        "\n      ",
        "\n# end",
        "\n# end\n",
        "\n---\nb: 2",
      ),
      crlf: fc.boolean(),
    });
    const runs = 60;
    const refusedBefore = refused;
    await fc.assert(
      fc.asyncProperty(doc, async (d) => {
        const entry = `${d.key}: ${d.value}`;
        const under = (prefix: string): string =>
          prefix + entry.replaceAll(/\n(?=.)/g, `\n${" ".repeat(prefix.length - 3)}`);
        const last = d.nest === "map" ? under("m:\n  ") : d.nest === "list" ? under("l:\n  - ") : entry;
        const text = `${d.head}${last}${d.tail}`;
        const plain = `${d.bom ? "\uFEFF" : ""}${d.crlf ? text.replaceAll("\n", "\r\n") : text}`;
        const problem = await disagreement("doc.yaml", Buffer.from(plain, "utf8"));
        assert.equal(problem, undefined, show(plain));
      }),
      { numRuns: runs },
    );
    assert.ok(
      refused - refusedBefore < runs / 4,
      `sops refused ${refused - refusedBefore} of ${runs} documents`,
    );
  });

  describe("JSON at the end of the input", () => {
    table("json", {
      "no final newline": '{"a": "x"}',
      "final newline": '{"a": "x"}\n',
      "trailing blanks": '{"a": "x"}  \n\n',
      CRLF: '{\r\n  "a": "x\\ny"\r\n}\r\n',
      "string with a final newline": '{"a": "multi\\nline\\n"}',
      "nested, no final newline": '{"a": {"b": [1, "two", null]}}',
      BOM: '\uFEFF{"a": 1}',
      unterminated: '{"a": 1',
    });
  });

  // sops's JSON store reads the first value and ignores the rest (it would encrypt `{"a": 1}`
  // of this input and drop `{"b": 2}`); bootseal refuses: docs/compatibility.md.
  for (const [label, plain] of [
    ["trailing text", '{"a": 1} x'],
    ["a second value", '{"a": 1}\n{"b": 2}'],
  ] as const) {
    test(`JSON with ${label} after the value: sops drops it, bootseal refuses (exit 2)`, async () => {
      const dir = join(h.dir, `case-${n++}`);
      mkdirSync(dir);
      const file = join(dir, "doc.json");
      writeFileSync(file, plain);
      const encrypt = ["encrypt", "--age", h.ageRecipient, file];
      const bySops = await h.sops(encrypt, { cwd: dir });
      assert.equal(bySops.status, 0, bySops.stderr);
      const sopsFile = join(dir, "sops.enc.json");
      writeFileSync(sopsFile, bySops.stdout);
      assert.deepEqual(JSON.parse((await h.sops(["decrypt", sopsFile], { cwd: dir })).stdout.toString()), {
        a: 1,
      });
      const byBootseal = await bootseal(h, encrypt, dir);
      assert.equal(byBootseal.status, 2);
      assert.match(
        byBootseal.stderr,
        /^bootseal: Error unmarshalling file: json: unexpected content after the top-level object at line \d+, column \d+\n$/,
      );
    });
  }

  describe("dotenv at the end of the input", () => {
    table("env", {
      "no final newline": "A=x\nB=y",
      "final newline": "A=x\nB=y\n",
      "two final newlines": "A=x\n\n",
      "empty last value": "A=x\nB=",
      "comment last": "A=x\n# end",
      "trailing blanks in the value": "A=x  ",
      CRLF: "A=x\r\nB=y\r\n",
      "CRLF, no final newline": "A=x\r\nB=y",
      "escaped newline in the value": "A=multi\\nline",
      BOM: "\uFEFFA=x\n",
      "blank line only": "\n",
    });
  });

  describe("INI at the end of the input", () => {
    table("ini", {
      "no final newline": "[s]\na = x",
      "final newline": "[s]\na = x\n",
      "two final newlines": "[s]\na = x\n\n",
      "empty last value": "[s]\na =",
      "comment last": "[s]\na = x\n; end",
      "empty last section": "[s]\na = x\n[t]",
      CRLF: "[s]\r\na = x\r\n",
      "CRLF, no final newline": "[s]\r\na = x",
      "trailing blanks": "[s]\na = x   ",
      BOM: "\uFEFF[s]\na = x\n",
    });
  });

  describe("binary at the end of the input", () => {
    table("bin", {
      "no final newline": "payload",
      "final newline": "payload\n",
      CRLF: "payload\r\n",
      BOM: "\uFEFFpayload",
      "only newlines": "\n\n",
    });
  });
});
