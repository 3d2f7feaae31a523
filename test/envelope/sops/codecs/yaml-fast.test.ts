/**
 * The YAML fast path (yaml-fast.ts) against the general parser (yaml-parse.ts): on generated
 * documents shaped like what sops writes, and on those documents made hostile line by line,
 * whenever the fast path accepts a text its tree must equal the general parser's, and the
 * general parser must accept that text too. Declining (null) is always allowed; the clean
 * sops-shaped documents must not be declined, or the fast path would be dead code.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { parseSimpleYaml } from "../../../../src/envelope/sops/codecs/yaml-fast.ts";
import { parseYaml, parseYamlGeneral } from "../../../../src/envelope/sops/codecs/yaml-parse.ts";
import { BootsealError } from "../../../../src/errors.ts";
import { MAX_NESTING_DEPTH } from "../../../../src/limits.ts";

// A generated tree, before it is written as YAML text.
type Node =
  | { readonly t: "scalar"; readonly text: string }
  | { readonly t: "literal"; readonly header: "|" | "|-"; readonly lines: readonly string[] }
  | { readonly t: "map"; readonly entries: readonly (readonly [string, Node])[] }
  | { readonly t: "seq"; readonly items: readonly Node[] };

const hex = fc.stringMatching(/^[0-9a-f]{4,24}$/);
const b64 = fc.stringMatching(/^[A-Za-z0-9+/]{4,24}={0,2}$/);
const enc = fc
  .tuple(b64, b64, b64, fc.constantFrom("str", "int", "float", "bool", "bytes"))
  .map(([d, iv, tag, type]) => `ENC[AES256_GCM,data:${d},iv:${iv},tag:${tag},type:${type}]`);

/** Plain and quoted scalars sops writes, and the typed plain forms go-yaml resolves. */
const CLEAN_SCALARS = [
  ..."-12 -9223372036854775808 -x -1.5 -.Inf svc-1 a:b 3.13.2 0 +7 0x1F 0o17 017 1_000 9223372036854775807 0b101 1.5 1. .5 1e3 1.0e+3 .inf .nan true False yes on y n null ~ Null 2024-01-02 2024-01-02T03:04:05Z 2001-12-14t21:59:43.10-05:00 \"\" '' 'single' = a.b/c $HOME ^x (x) ~x x~".split(
    " ",
  ),
  "hello world",
  "2024-01-02 03:04:05",
  '"x y"',
  '"a: b"',
];
const cleanScalar = fc.oneof(
  { weight: 4, arbitrary: enc },
  { weight: 2, arbitrary: hex },
  fc.constantFrom(...CLEAN_SCALARS),
);

/** Scalars the fast path leaves to the general parser (or must type exactly as it does). */
const ODD_SCALARS = [
  ..."9223372036854775808 -9223372036854775809 18446744073709551616 'it''s' \"tab\\there\" \"a\\\" << @x `x %x !x &x *x x: [x] {x} |x >x 'open \"open é".split(
    " ",
  ),
  "? x",
  "- x",
  ": x",
  "a: b",
  "x #y",
];
const oddScalar = fc.constantFrom(...ODD_SCALARS);

const cleanKey = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[a-z][a-zA-Z0-9_]{0,10}$/) },
  fc.constantFrom("data", "stringData", "age", "mac", "lastmodified", "a.b", "a/b", "a-b", "_x", "Y1"),
);

const oddKey = fc.constantFrom(
  ...`1 true null ~ y << 0x10 1.5 2024-01-02 sops "quoted" 'single' -a .a é ?a`.split(" "),
  "a b",
  "x".repeat(1025),
);

const literalLine = fc.oneof(
  fc.constantFrom(
    "-----BEGIN AGE ENCRYPTED FILE-----",
    "-----END AGE ENCRYPTED FILE-----",
    "x: y",
    "- z",
    "a  b",
  ),
  b64,
);

/** literalItems: `- |` sequence items, which sops never writes (its literals are metadata values). */
function treeOf(
  scalar: fc.Arbitrary<string>,
  key: fc.Arbitrary<string>,
  literalItems: boolean,
): fc.Arbitrary<Node> {
  return fc.letrec<{ node: Node; map: Node; seq: Node }>((tie) => ({
    node: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      { weight: 5, arbitrary: scalar.map((text): Node => ({ t: "scalar", text })) },
      {
        weight: 1,
        arbitrary: fc
          .tuple(
            fc.constantFrom("|" as const, "|-" as const),
            fc.array(literalLine, { minLength: 1, maxLength: 4 }),
          )
          .map(([header, lines]): Node => ({ t: "literal", header, lines })),
      },
      { weight: 2, arbitrary: tie("map") },
      { weight: 2, arbitrary: tie("seq") },
    ),
    map: fc
      .uniqueArray(fc.tuple(key, tie("node")), { minLength: 1, maxLength: 5, selector: ([k]) => k })
      .map((entries): Node => ({ t: "map", entries })),
    seq: fc
      .array(
        tie("node").filter((n) => literalItems || n.t !== "literal"),
        { minLength: 1, maxLength: 4 },
      )
      .map((items): Node => ({ t: "seq", items })),
  })).map;
}

interface Style {
  /** Spaces per nesting level: sops writes 4, hand-written files often 2. */
  readonly step: number;
  /** Whether `- ` items sit under their key (sops) or in its column. */
  readonly seqIndented: boolean;
}

const pad = (n: number): string => " ".repeat(n);

/** The lines of `node` as the value of `head` (`key:` or `-`) at column `col`. */
function valueLines(head: string, node: Node, col: number, style: Style): string[] {
  switch (node.t) {
    case "scalar":
      return [`${pad(col)}${head} ${node.text}`];
    case "literal":
      return [`${pad(col)}${head} ${node.header}`, ...node.lines.map((l) => pad(col + style.step) + l)];
    case "map":
      if (head === "-") {
        // `- k: v`, the other keys two columns right of the dash.
        const [first, ...rest] = mapLines(node, col + 2, style);
        return [`${pad(col)}- ${(first as string).slice(col + 2)}`, ...rest];
      }
      return [`${pad(col)}${head}`, ...mapLines(node, col + style.step, style)];
    case "seq": {
      const inner = head === "-" || style.seqIndented ? col + style.step : col;
      return [`${pad(col)}${head}`, ...node.items.flatMap((item) => valueLines("-", item, inner, style))];
    }
  }
}

function mapLines(node: Node & { t: "map" }, col: number, style: Style): string[] {
  return node.entries.flatMap(([k, v]) => valueLines(`${k}:`, v, col, style));
}

/** A document as sops writes it: the data, then the metadata block. */
const documentOf = (
  scalar: fc.Arbitrary<string>,
  key: fc.Arbitrary<string>,
  seqIndent: fc.Arbitrary<boolean>,
  literalItems: boolean,
): fc.Arbitrary<string> =>
  fc
    .record({
      data: treeOf(scalar, key, literalItems),
      recipient: fc.stringMatching(/^age1[a-z0-9]{20}$/),
      armour: fc.array(b64, { minLength: 1, maxLength: 3 }),
      mac: enc,
      step: fc.constantFrom(2, 4),
      seqIndented: seqIndent,
    })
    .map(({ data, recipient, armour, mac, step, seqIndented }): string => {
      const style = { step, seqIndented };
      const meta: Node = {
        t: "map",
        entries: [
          [
            "age",
            {
              t: "seq",
              items: [
                {
                  t: "map",
                  entries: [
                    ["recipient", { t: "scalar", text: recipient }],
                    [
                      "enc",
                      { t: "literal", header: "|", lines: ["-----BEGIN AGE ENCRYPTED FILE-----", ...armour] },
                    ],
                  ],
                },
              ],
            },
          ],
          ["lastmodified", { t: "scalar", text: '"2026-12-01T19:44:02Z"' }],
          ["mac", { t: "scalar", text: mac }],
          ["unencrypted_suffix", { t: "scalar", text: "_unencrypted" }],
          ["version", { t: "scalar", text: "3.13.2" }],
        ],
      };
      const lines = [
        ...mapLines(data as Node & { t: "map" }, 0, style),
        ...valueLines("sops:", meta, 0, style),
      ];
      return `${lines.join("\n")}\n`;
    });

// sops indents `- ` items under their key; the fast path leaves the other form to the general parser.
const sopsDocument = documentOf(cleanScalar, cleanKey, fc.constant(true), false);
const oddDocument = documentOf(
  fc.oneof(cleanScalar, oddScalar),
  fc.oneof({ weight: 4, arbitrary: cleanKey }, oddKey),
  fc.boolean(),
  true,
);

/** One hostile edit of a line (chosen by `at`), or of the whole text. */
type Edit = (lines: string[], at: number) => string[];
const onLine =
  (f: (line: string) => string): Edit =>
  (lines, at) =>
    lines.map((l, i) => (i === at ? f(l) : l));
const insertAt =
  (text: string): Edit =>
  (lines, at) => [...lines.slice(0, at), text, ...lines.slice(at)];

const EDITS: Record<string, Edit> = {
  comment: insertAt("# a comment"),
  indentedComment: onLine((l) => `${l.replace(/\S.*/, "")}# c`),
  inlineComment: onLine((l) => `${l} # c`),
  hashInValue: onLine((l) => `${l}#x`),
  blank: insertAt(""),
  spaceLine: insertAt("  "),
  moreIndent: onLine((l) => ` ${l}`),
  indent2: onLine((l) => `  ${l}`),
  dedent2: onLine((l) => l.replace(/^ {2}/, "")),
  dedent4: onLine((l) => l.replace(/^ {4}/, "")),
  lessIndent: onLine((l) => l.replace(/^ /, "")),
  tab: onLine((l) => l.replace(/^ {1,4}/, "\t")),
  tabInside: onLine((l) => l.replace(": ", ":\t")),
  trailingSpace: onLine((l) => `${l} `),
  noSpaceAfterColon: onLine((l) => l.replace(": ", ":")),
  twoSpacesAfterColon: onLine((l) => l.replace(": ", ":  ")),
  anchor: onLine((l) => l.replace(/: (\S)/, ": &a $1")),
  alias: onLine((l) => l.replace(/: .*/, ": *a")),
  tag: onLine((l) => l.replace(/: (\S)/, ": !!str $1")),
  flowMap: onLine((l) => l.replace(/: .*/, ": {a: 1, b: [x, y]}")),
  flowSeq: onLine((l) => l.replace(/- .*/, "- [1, 2]")),
  emptyFlow: onLine((l) => l.replace(/: .*/, ": {}")),
  docStart: insertAt("---"),
  docEnd: insertAt("..."),
  directive: (lines) => ["%YAML 1.2", "---", ...lines],
  complexKey: insertAt("? k"),
  duplicate: (lines, at) => [...lines.slice(0, at + 1), ...lines.slice(at)],
  dashDash: onLine((l) => l.replace("- ", "- - ")),
  dashInColumn: onLine((l) => l.replace(/^( *)- /, "$1-")),
  unicodeValue: onLine((l) => l.replace(/: (\S)/, ": é$1")),
  unicodeKey: onLine((l) => l.replace(/^( *)(\w)/, "$1ß$2")),
  escape: onLine((l) => l.replace(/: (\S)/, ': "a\\u00e9"')),
  multilinePlain: (lines, at) => [...lines.slice(0, at + 1), `${pad(12)}continued`, ...lines.slice(at + 1)],
  keep: onLine((l) => l.replace(/: \|-?$/, ": |+")),
  folded: onLine((l) => l.replace(/: \|-?$/, ": >")),
  indentIndicator: onLine((l) => l.replace(/: \|-?$/, ": |2")),
  quoteOpen: onLine((l) => l.replace(/: (\S)/, ': "$1')),
  singleQuoteOpen: onLine((l) => l.replace(/: (\S)/, ": '$1")),
  merge: insertAt("<<: {a: 1}"),
  nul: onLine((l) => `${l}\u0000`),
};

const hostile = fc
  .tuple(
    fc.oneof(sopsDocument, oddDocument),
    fc.array(fc.tuple(fc.constantFrom(...Object.keys(EDITS)), fc.nat()), { minLength: 0, maxLength: 3 }),
    fc.constantFrom("", "crlf", "bom", "cr", "noFinalNewline"),
  )
  .map(([doc, edits, whole]) => {
    let lines = doc.slice(0, -1).split("\n");
    for (const [name, at] of edits) lines = (EDITS[name] as Edit)(lines, at % lines.length);
    const text = `${lines.join("\n")}\n`;
    if (whole === "crlf") return text.replaceAll("\n", "\r\n");
    if (whole === "cr") return text.replaceAll("\n", "\r");
    if (whole === "bom") return `\ufeff${text}`;
    if (whole === "noFinalNewline") return text.slice(0, -1);
    return text;
  });

/**
 * Hand-kept files: a sops-shaped document whose data lines get comments (full-line at the
 * line's column or left of it, trailing after the content) and blank lines, as people write
 * them; the metadata block stays as sops writes it. Comment texts include what sops writes for
 * an encrypted comment and texts that look like YAML.
 */
const commentText = fc.oneof(
  fc.constantFrom("", " x", "  two", " a: b", " - x", ' "q"', "##", " #", " key: |"),
  enc,
);
const commentedDocument = fc
  .tuple(
    sopsDocument,
    fc.array(
      fc.tuple(fc.constantFrom("head", "dedented", "trailing", "blank", "blank2"), fc.nat(), commentText),
      {
        minLength: 1,
        maxLength: 8,
      },
    ),
  )
  .map(([doc, edits]) => {
    const lines = doc.slice(0, -1).split("\n");
    const meta = lines.indexOf("sops:");
    const data = lines.slice(0, meta);
    for (const [kind, at, text] of edits) {
      const k = at % (data.length + 1);
      const line = data[k] ?? "";
      const indent = line.length - line.trimStart().length;
      if (kind === "head") data.splice(k, 0, `${pad(indent)}#${text}`);
      else if (kind === "dedented") data.splice(k, 0, `${pad(Math.floor(indent / 2))}#${text}`);
      else if (kind === "trailing" && k < data.length) data[k] = `${line} #${text}`;
      else if (kind === "blank") data.splice(k, 0, "");
      else data.splice(k, 0, "", `${pad(indent)}#${text}`, "");
    }
    return `${[...data, ...lines.slice(meta)].join("\n")}\n`;
  });

/** The property: when the fast path accepts, it agrees with the general parser. */
function agrees(text: string): boolean {
  const fast = parseSimpleYaml(text);
  if (fast === null) return false;
  let general: unknown;
  try {
    general = parseYamlGeneral(text);
  } catch (err) {
    assert.fail(
      `the fast path accepted a text the general parser refuses (${(err as Error).message}):\n${text}`,
    );
  }
  assert.deepStrictEqual(fast, general, text);
  return true;
}

describe("yaml fast path = general parser", () => {
  test("sops-shaped documents: accepted, and the same tree", () => {
    fc.assert(
      fc.property(sopsDocument, (text) => {
        assert.ok(agrees(text), `the fast path declined a sops-shaped document:\n${text}`);
      }),
      { numRuns: 300 },
    );
  });

  test("hostile edits: declined, or the same tree", () => {
    let accepted = 0;
    fc.assert(
      fc.property(hostile, (text) => {
        if (agrees(text)) accepted++;
      }),
      { numRuns: 1500 },
    );
    // Some edits keep the text inside the subset (an extra key, a two-space indent): the
    // comparison must have run on those, not only on declines.
    assert.ok(accepted > 0, "no hostile text was accepted: the comparison never ran");
  });

  test("documents with comments and blank lines: mostly accepted, and the same tree", () => {
    let accepted = 0;
    let runs = 0;
    fc.assert(
      fc.property(commentedDocument, (text) => {
        runs++;
        if (agrees(text)) accepted++;
      }),
      { numRuns: 1500 },
    );
    // Declines are allowed (a literal block with a comment below it, an empty `-` item,
    // text that cuts a quoted scalar), but the common shapes must take the fast path.
    assert.ok(accepted > runs / 2, `only ${accepted} of ${runs} commented documents took the fast path`);
  });

  test("comments in every position of a small document, each as the general parser places it", () => {
    const base = [
      "a: 1",
      "b:",
      "    c: x",
      "    d:",
      "        - y",
      "        - k: v",
      "          l: w",
      "e: |",
      "    z",
    ];
    const comments = ["#h", "  #h", "    #h", "        #h", "          #h", ""];
    let accepted = 0;
    for (let at = 0; at <= base.length; at++) {
      for (const c of comments) {
        const lines = [...base.slice(0, at), c, ...base.slice(at)];
        if (agrees(`${lines.join("\n")}\n`)) accepted++;
        if (at < base.length) {
          const trailing = base.map((l, i) => (i === at ? `${l} # t` : l));
          agrees(`${trailing.join("\n")}\n`);
        }
      }
    }
    assert.ok(accepted > 20, `only ${accepted} accepted`);
  });

  test("every scalar form, as a mapping value and as a sequence item", () => {
    for (const text of [...CLEAN_SCALARS, ...ODD_SCALARS]) {
      const asValue = agrees(`a: ${text}\nb: x\n`);
      agrees(`a:\n  - ${text}\n  - x\n`);
      if (CLEAN_SCALARS.includes(text)) assert.ok(asValue, `declined a: ${text}`);
    }
  });

  test("structure outside the subset is declined: errors, stray dedents, duplicate keys", () => {
    for (const text of [
      "a: 1\n- x\n",
      "a:\n  b: 1\n  - x\n",
      "a:\n- x\n",
      "a:\n  - x\n  b: 1\n",
      "a:\n  - x\n - y\n",
      "a: x\n  b: y\n",
      "a:\n    b: 1\n  c: 2\n",
      "a: |\n  x\n y\n",
      "- a\n",
      "a: 1\na: 2\n",
      "a:\n  - - x\n",
      "a:\n  - -\n",
    ]) {
      assert.equal(parseSimpleYaml(text), null, JSON.stringify(text));
    }
  });

  test("deep nesting, both styles", () => {
    // 120 levels at two spaces each stay under the fast path's indentation bound.
    for (const depth of [50, 120]) {
      for (const seq of [false, true]) {
        const lines: string[] = [];
        for (let d = 0; d < depth; d++) {
          lines.push(seq && d % 2 ? `${pad(d * 2)}- k${d}:` : `${pad(d * 2)}k${d}:`);
        }
        lines.push(`${pad(depth * 2)}leaf: ENC[AES256_GCM,data:aa,iv:bb,tag:cc,type:str]`);
        const text = `${lines.join("\n")}\n`;
        // Accepted or declined, never a different tree; the plain all-mapping form is accepted.
        const ok = agrees(text);
        if (!seq) assert.ok(ok, `declined a ${depth}-deep mapping`);
      }
    }
  });

  test("nesting deeper than the limit: declined, and the general parser refuses it", () => {
    const depth = MAX_NESTING_DEPTH + 1;
    const lines = Array.from({ length: depth }, (_, d) => `${pad(d)}k${d}:`);
    const text = `${lines.join("\n")}\n${pad(depth)}leaf: x\n`;
    assert.equal(parseSimpleYaml(text), null);
    assert.throws(
      () => parseYaml(text),
      (err: unknown) =>
        err instanceof BootsealError && err.code === "BAD_INPUT" && /nesting deeper/.test(err.message),
    );
  });

  test("random line soup over YAML's indicator characters", () => {
    const soup = fc
      .array(fc.stringMatching(/^ {0,4}[-a-z0-9:'"|#&*!?{}[\],.~ >%@`\t]{0,10}$/), {
        minLength: 1,
        maxLength: 8,
      })
      .map((lines) => `${lines.join("\n")}\n`);
    fc.assert(
      fc.property(soup, (text) => {
        agrees(text);
      }),
      { numRuns: 3000 },
    );
  });
});
