/**
 * `%YAML` and `%TAG` directives as go-yaml v3 (and so sops) reads them (parserc.go
 * yaml_parser_process_directives, scannerc.go yaml_parser_scan_directive). go-yaml is a YAML
 * 1.1 parser: it refuses any other `%YAML` version ("found incompatible YAML document"), a
 * second `%YAML` or a repeated `%TAG` handle before one document, and any other directive
 * name. The `yaml` package accepts all of these (it reads YAML 1.2), so they are checked here.
 * `%TAG` handles apply to the one document they precede.
 */
import type { CST } from "yaml";
import { BootsealError } from "../../../errors.ts";

/** Tag handle (`!e!`) -> prefix, for one document. */
export type TagHandles = ReadonlyMap<string, string>;

/** A directive line as the CST gives it (line 1-based). */
interface Directive {
  readonly source: string;
  readonly line: number;
}

/**
 * The directives of a token stream, checked: each document's tag handles, in document order,
 * and the (1-based) lines directives are on.
 */
export function streamDirectives(
  tokens: readonly CST.Token[],
  lineOf: (offset: number) => number,
): { handles: TagHandles[]; lines: Set<number> } {
  const handles: TagHandles[] = [];
  const lines = new Set<number>();
  let pending: Directive[] = [];
  for (const token of tokens) {
    if (token.type === "directive") {
      const line = lineOf(token.offset);
      lines.add(line);
      pending.push({ source: token.source, line });
    } else if (token.type === "document") {
      handles.push(checkDirectives(pending));
      pending = [];
    }
  }
  return { handles, lines };
}

const CORE = "tag:yaml.org,2002:";
const DEFAULT_HANDLES: TagHandles = new Map([
  ["!", "!"],
  ["!!", CORE],
]);

const bad = (line: number, message: string): never => {
  throw new BootsealError("BAD_INPUT", `yaml: line ${line}: ${message}`);
};

/** The directive's words, without a trailing comment. */
function words(source: string): string[] {
  return source
    .replace(/[ \t]+#.*$/, "")
    .trim()
    .split(/[ \t]+/);
}

/** Checks the directives in front of one document; returns the tag handles it may use. */
function checkDirectives(directives: readonly Directive[]): TagHandles {
  const handles = new Map(DEFAULT_HANDLES);
  const declared = new Set<string>();
  let version = false;
  for (const d of directives) {
    const [name, ...args] = words(d.source);
    if (name === "%YAML") {
      if (version) bad(d.line, "found duplicate %YAML directive");
      version = true;
      const m = /^(\d{1,9})\.(\d{1,9})$/.exec(args[0] ?? "");
      if (!m || args.length > 1) bad(d.line, "did not find expected version number in %YAML directive");
      if (Number(m?.[1]) !== 1 || Number(m?.[2]) !== 1) bad(d.line, "found incompatible YAML document");
    } else if (name === "%TAG") {
      const [handle, prefix] = args;
      if (handle === undefined || prefix === undefined || !/^!(?:[\w-]*!)?$/.test(handle)) {
        bad(d.line, "did not find expected tag handle in %TAG directive");
      }
      if (declared.has(handle as string)) bad(d.line, "found duplicate %TAG directive");
      declared.add(handle as string);
      handles.set(handle as string, prefix as string);
    } else {
      bad(d.line, "found unknown directive name");
    }
  }
  return handles;
}

/**
 * A node's tag as go-yaml resolves it, in the short form the scalar resolver takes (`!!int`
 * for the core schema, else the full tag): handles expanded, `!<…>` taken verbatim.
 */
export function expandTag(tag: string, handles: TagHandles, line: number): string {
  if (tag === "!") return tag; // the non-specific tag
  let full: string;
  const verbatim = /^!<(.*)>$/.exec(tag);
  if (verbatim) full = verbatim[1] ?? "";
  else {
    const m = /^(!(?:[\w-]*!)?)(.*)$/.exec(tag);
    const prefix = m ? handles.get(m[1] ?? "") : undefined;
    if (prefix === undefined) return bad(line, "found undefined tag handle");
    full = prefix + decodeTagSuffix(m?.[2] ?? "", line);
  }
  return full.startsWith(CORE) ? `!!${full.slice(CORE.length)}` : full;
}

/** go-yaml unescapes `%XX` in a tag's suffix. */
function decodeTagSuffix(suffix: string, line: number): string {
  if (!suffix.includes("%")) return suffix;
  try {
    return decodeURIComponent(suffix);
  } catch {
    return bad(line, "did not find URI escaped octet");
  }
}
