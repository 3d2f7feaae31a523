/**
 * The shell blocks README.md and docs/*.md tell a user to type, as the doc test runs them.
 *
 * A fenced block in `sh`, `bash` or `shell` is run, in order, unless the line before its fence
 * is a marker comment (invisible when the page is rendered):
 *
 * - `<!-- doc-test: not run: REASON -->`: left out, and REASON says why (needs a cloud account,
 *   it is the command running this test, …). A marker without a reason is an error.
 * - `<!-- doc-test: background -->`: a long-running command a user starts in a terminal of its
 *   own (the service); the next block runs once the service answers on its default address.
 * - `<!-- doc-test: file NAME -->` before a block in any language: the file a user would have
 *   written (`values-prod.yaml`), written to NAME in the working directory before the blocks run.
 */

export type DocBlockRole =
  | { readonly kind: "run" }
  | { readonly kind: "background" }
  | { readonly kind: "not-run"; readonly reason: string }
  | { readonly kind: "file"; readonly name: string };

export interface DocBlock {
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly code: string;
  readonly role: DocBlockRole;
}

const SHELL = new Set(["sh", "bash", "shell"]);
const MARKER = /^<!-- doc-test: (.*) -->$/;

function role(marker: string | undefined, lang: string, where: string): DocBlockRole | undefined {
  if (marker === undefined) return SHELL.has(lang) ? { kind: "run" } : undefined;
  if (marker === "background") return { kind: "background" };
  const notRun = /^not run: (\S.*)$/.exec(marker);
  if (notRun) return { kind: "not-run", reason: notRun[1] as string };
  const file = /^file ([\w.-]+)$/.exec(marker);
  if (file) return { kind: "file", name: file[1] as string };
  throw new Error(`${where}: unknown doc-test marker "${marker}" (not run: REASON | background | file NAME)`);
}

/** Every marked block and every shell block of one Markdown file, in document order. */
export function docBlocks(file: string, text: string): DocBlock[] {
  const lines = text.split("\n");
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,})([\w-]*)\s*$/.exec(lines[i] as string);
    if (!open) continue;
    const [, indent = "", fence = "", lang = ""] = open;
    let end = i + 1;
    while (end < lines.length && (lines[end] as string).trim() !== fence) end++;
    const body = lines.slice(i + 1, end).map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l));
    let before = i - 1;
    while (before >= 0 && (lines[before] as string).trim() === "") before--;
    const marker = MARKER.exec((lines[before] ?? "").trim())?.[1];
    const r = role(marker, lang, `${file}:${i + 1}`);
    if (r) blocks.push({ file, line: i + 1, lang, code: `${body.join("\n")}\n`, role: r });
    i = end;
  }
  return blocks;
}
