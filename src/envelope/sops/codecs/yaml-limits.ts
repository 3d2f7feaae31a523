/**
 * The YAML reader's bounds on hostile input (docs/security.md):
 * - nesting depth, checked on the `yaml` package's CST without recursion before anything
 *   recursive (its composer, the walk in ./yaml-parse.ts) touches the tokens;
 * - alias expansion ("billion laughs"), counted while aliases are expanded: go-yaml v3's
 *   ratio rule (decode.go allowedAliasRatio) under a fixed ceiling, the nesting depth of the
 *   expanded tree, and the text it holds (at most MAX_DOCUMENT_BYTES: its output could not be
 *   larger than that anyway).
 * Messages name the line or the limit, never content.
 */
import { type CST, Lexer, type LineCounter, Parser } from "yaml";
import { BootsealError } from "../../../errors.ts";
import {
  describeBytes,
  MAX_ALIAS_EXPANSION_NODES,
  MAX_DOCUMENT_BYTES,
  MAX_NESTING_DEPTH,
} from "../../../limits.ts";

/** The error for a document nested deeper than MAX_NESTING_DEPTH (`line` when known). */
export function tooDeep(line?: number): BootsealError {
  const at = line === undefined ? "" : `line ${line}: `;
  return new BootsealError("BAD_INPUT", `yaml: ${at}nesting deeper than ${MAX_NESTING_DEPTH} levels`);
}

type Child = CST.Token | null | undefined;

/**
 * The offset of the first collection nested deeper than MAX_NESTING_DEPTH among the tokens,
 * or undefined. Iterative: the CST itself can be a hundred thousand levels deep.
 */
export function tooDeepAt(tokens: readonly CST.Token[]): number | undefined {
  const todo: [Child, number][] = tokens.map((t) => [t, 0]);
  for (let next = todo.pop(); next !== undefined; next = todo.pop()) {
    const [token, depth] = next;
    if (!token) continue;
    if (token.type === "document") {
      todo.push([token.value, depth]);
      continue;
    }
    if (token.type !== "block-map" && token.type !== "block-seq" && token.type !== "flow-collection")
      continue;
    const inner = depth + 1;
    if (inner > MAX_NESTING_DEPTH) return token.offset;
    for (const item of token.items) {
      if ("key" in item) todo.push([item.key, inner]);
      todo.push([item.value, inner]);
    }
  }
  return undefined;
}

/**
 * The CST of `text`, as `new Parser(lines.addNewLine).parse(text)` gives it, but stopped as
 * soon as the parser has more collections open than any document within the depth limit
 * could need (its stack holds the document, each open collection and the token being built),
 * so a megabyte of `[` costs no more than the first few hundred. The exact check on the
 * finished tokens is tooDeepAt.
 */
export function boundedTokens(text: string, lines: LineCounter): CST.Token[] {
  const parser = new Parser(lines.addNewLine);
  lines.addNewLine(0);
  const tokens: CST.Token[] = [];
  const open = 2 * MAX_NESTING_DEPTH + 8;
  for (const lexeme of new Lexer().lex(text)) {
    for (const token of parser.next(lexeme)) tokens.push(token);
    if (parser.stack.length > open) throw tooDeep(lines.linePos(parser.offset).line);
  }
  for (const token of parser.end()) tokens.push(token);
  return tokens;
}

/** go-yaml v3 decode.go: the share of decoded nodes that may come from aliases. */
export function allowedAliasRatio(decoded: number): number {
  const low = 400_000;
  const high = 4_000_000;
  if (decoded <= low) return 0.99;
  if (decoded >= high) return 0.1;
  return 0.99 - 0.89 * ((decoded - low) / (high - low));
}

/** What expanding the document has produced so far. */
export class Expansion {
  /** Nodes built: keys, values, collections (go-yaml's decodeCount). */
  private decoded = 0;
  /** Of those, nodes built while expanding an alias (go-yaml's aliasCount). */
  private aliased = 0;
  /** Aliases being expanded around the current node. */
  private aliasDepth = 0;
  /** UTF-16 units of text (keys, strings, comments): never more than their UTF-8 bytes. */
  private units = 0;

  enterAlias(): void {
    this.aliasDepth++;
  }

  leaveAlias(): void {
    this.aliasDepth--;
  }

  /** One node with `units` of text; a collection gives its nesting level (the top mapping is 1). */
  node(units: number, depth = 0): void {
    if (depth > MAX_NESTING_DEPTH) throw tooDeep();
    this.decoded++;
    if (this.aliasDepth > 0) this.aliased++;
    if (
      this.aliased > MAX_ALIAS_EXPANSION_NODES ||
      (this.aliased > 100 &&
        this.decoded > 1000 &&
        this.aliased / this.decoded > allowedAliasRatio(this.decoded))
    ) {
      throw new BootsealError("BAD_INPUT", "yaml: the document contains excessive aliasing");
    }
    this.text(units);
  }

  /** Text that is not a node of its own (a comment). */
  text(units: number): void {
    this.units += units;
    if (this.units > MAX_DOCUMENT_BYTES) {
      throw new BootsealError(
        "TOO_LARGE",
        `yaml: the document expands to more than ${describeBytes(MAX_DOCUMENT_BYTES)}`,
      );
    }
  }
}
