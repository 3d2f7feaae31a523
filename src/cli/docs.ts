/**
 * The generated parts of docs/cli.md: the synopsis of every command, the key flag table and
 * one flag table per command, all from the commands' own tables (./flags.ts). Each part sits
 * between BEGIN/END markers; scripts/cli-docs.ts rewrites them and test/cli/flags.test.ts
 * fails when the doc and the tables differ.
 */
import type { Command } from "./command.ts";
import { exitCodesMarkdown } from "./exit-codes.ts";
import { flagDescription, flagsMarkdown, flagTerm, usageLines } from "./flags.ts";
import { keyFlags } from "./key-flags.ts";

const BEGIN = (name: string) => `<!-- BEGIN generated:${name} (scripts/cli-docs.ts) -->`;
const END = (name: string) => `<!-- END generated:${name} -->`;

/** Section name -> its Markdown, for these commands (main.ts's order). */
export function cliDocSections(commands: readonly Command[]): Map<string, string> {
  const sections = new Map<string, string>();
  sections.set("usage", ["```", ...commands.flatMap((c) => usageLines(c.spec)), "```"].join("\n"));
  const keyRows = keyFlags("set").map(
    (f) => `| \`${flagTerm(f)}\` | \`${f.env}\` | ${flagDescription({ ...f, env: undefined })} |`,
  );
  sections.set("key-flags", ["| flag | environment | keys |", "| --- | --- | --- |", ...keyRows].join("\n"));
  for (const c of commands) sections.set(`command:${c.spec.name}`, flagsMarkdown(c.spec));
  sections.set("exit-codes", exitCodesMarkdown());
  return sections;
}

/**
 * `doc` with every generated section replaced. A section the doc lacks, or a marker with no
 * section behind it, is an error: the doc and the command list must name the same commands.
 */
export function replaceGenerated(doc: string, sections: ReadonlyMap<string, string>): string {
  let out = doc;
  for (const [name, body] of sections) {
    const begin = out.indexOf(BEGIN(name));
    const end = out.indexOf(END(name));
    if (begin < 0 || end < begin) throw new Error(`docs/cli.md has no generated section "${name}"`);
    out = `${out.slice(0, begin + BEGIN(name).length)}\n${body}\n${out.slice(end)}`;
  }
  for (const m of out.matchAll(/<!-- BEGIN generated:(\S+)/g)) {
    if (!sections.has(m[1] as string)) throw new Error(`docs/cli.md names an unknown section "${m[1]}"`);
  }
  return out;
}
