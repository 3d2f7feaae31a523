/**
 * One flag table per command, in the manner of OpenBao's `base_flags.go`: each flag is declared
 * once (name, short alias, type, default, environment variable, value name, help) and the
 * table generates the `parseArgs` options, the environment fallbacks, the usage line, the
 * `--help` text and the flag lists in docs/cli.md. Nothing else spells a flag out, so the
 * parser, the help and the docs cannot drift apart.
 */
import { parseArgs } from "node:util";
import { BootsealError } from "../errors.ts";

export interface Flag {
  /** Long name without dashes. */
  readonly name: string;
  readonly short?: string;
  readonly type: "string" | "boolean";
  /** May be given more than once; the value is then an array. */
  readonly multiple?: boolean;
  /** Applied when neither the flag nor its environment variable gives a value. */
  readonly default?: string;
  /** Read when the flag is absent (defined, even empty, counts as given, as for a flag). */
  readonly env?: string;
  /**
   * Shown like `env`, but read by the configuration layer (serve's BOOTSEAL_* variables, with
   * the same precedence: flag, variable, file), so the table does not apply it a second time.
   */
  readonly configEnv?: string;
  /** What a string flag's value is, in the usage and help ("FILE", "URL"). */
  readonly value?: string;
  /** The command refuses to run without it (from the flag or `env`). */
  readonly required?: boolean;
  readonly help: string;
}

export interface CommandSpec<F extends readonly Flag[] = readonly Flag[]> {
  readonly name: string;
  /** One line: `bootseal --help` lists it, `bootseal NAME --help` repeats it. */
  readonly summary: string;
  /** The operands after the flags ("[FILE]", "FILE"); absent: the command takes none. */
  readonly operands?: string;
  /** What the usage line shows after `[flags]` when it is not just the operands. */
  readonly tail?: string;
  /** Further ways to call the command, after `bootseal NAME` ("--store URL [flags]"). */
  readonly forms?: readonly string[];
  readonly flags: F;
  /** Extra lines at the end of `--help` (what an operand may be, and so on). */
  readonly notes?: readonly string[];
}

type ValueOf<F extends Flag> = F extends { type: "boolean" }
  ? F extends { multiple: true }
    ? boolean[]
    : boolean
  : F extends { multiple: true }
    ? string[]
    : string;
/** Flags whose name is a literal: shared groups built at run time (key flags) stay untyped. */
type Named<F> = F extends Flag ? (string extends F["name"] ? never : F) : never;
type WithDefault<F> = F extends { default: string } ? F : never;

/** Parsed values, typed from a table declared `as const`; a flag with a default is always set. */
export type FlagValues<T extends readonly Flag[]> = {
  readonly [F in WithDefault<Named<T[number]>> as F["name"]]: ValueOf<F>;
} & {
  readonly [F in Exclude<Named<T[number]>, WithDefault<Named<T[number]>>> as F["name"]]?: ValueOf<F>;
};

export interface ParsedFlags<T extends readonly Flag[]> {
  readonly values: FlagValues<T>;
  readonly positionals: string[];
  /** Flags given on the command line or by their environment variable (not by a default). */
  readonly given: ReadonlySet<string>;
}

type ParseOptions = Record<string, { type: "string" | "boolean"; short?: string; multiple?: boolean }>;

export function parseOptions(flags: readonly Flag[]): ParseOptions {
  const options: ParseOptions = {};
  for (const f of flags) {
    if (options[f.name]) throw new Error(`flag --${f.name} is declared twice`);
    // parseArgs refuses `short: undefined`: set only what is declared.
    const option: ParseOptions[string] = { type: f.type };
    if (f.short !== undefined) option.short = f.short;
    if (f.multiple) option.multiple = true;
    options[f.name] = option;
  }
  return options;
}

function fromEnv(f: Flag, text: string): string | boolean | (string | boolean)[] {
  let value: string | boolean = text;
  if (f.type === "boolean") {
    if (!/^(1|true|0|false|)$/i.test(text))
      throw new BootsealError("USAGE", `${f.env} wants true or false, got "${text}"`);
    value = /^(1|true)$/i.test(text);
  }
  return f.multiple ? [value] : value;
}

/** `--flag=true` / `--flag=false` for a boolean flag, as sops (urfave/cli) accepts them. */
function booleanAssignments(
  args: readonly string[],
  flags: readonly Flag[],
): { args: string[]; set: Record<string, boolean> } {
  const set: Record<string, boolean> = {};
  const end = args.indexOf("--");
  const rest = args.filter((arg, i) => {
    const m = /^--([^=]+)=(true|false)$/i.exec(arg);
    if (!m || (end !== -1 && i > end)) return true;
    const flag = flags.find((f) => f.name === m[1] && f.type === "boolean" && !f.multiple);
    if (!flag) return true;
    set[flag.name] = (m[2] as string).toLowerCase() === "true";
    return false;
  });
  return { args: rest, set };
}

/**
 * parseArgs with the table's options, then, for each flag still unset, its environment
 * variable, then its default. A missing required flag is a usage error naming the flag.
 */
export function parseFlags<T extends readonly Flag[]>(
  spec: CommandSpec<T>,
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedFlags<T> {
  const booleans = booleanAssignments(args, spec.flags);
  const { values, positionals } = parseArgs({
    args: booleans.args,
    options: parseOptions(spec.flags),
    allowPositionals: spec.operands !== undefined,
    strict: true,
  });
  const out: Record<string, unknown> = { ...values, ...booleans.set };
  const given = new Set<string>();
  for (const f of spec.flags) {
    const envText = f.env === undefined ? undefined : env[f.env];
    if (out[f.name] === undefined && envText !== undefined) out[f.name] = fromEnv(f, envText);
    if (out[f.name] !== undefined) given.add(f.name);
    else if (f.default !== undefined) out[f.name] = f.type === "boolean" ? f.default === "true" : f.default;
    // An empty value is as good as none here, as `fetch --from ""` and `--server ""` always were.
    if (f.required && (out[f.name] === undefined || out[f.name] === "")) {
      const or = f.env ? ` (or ${f.env})` : "";
      throw new BootsealError("USAGE", `${spec.name} needs ${flagWithValue(f)}${or}`);
    }
  }
  return { values: out as FlagValues<T>, positionals, given };
}

function flagWithValue(f: Flag): string {
  return f.type === "string" ? `--${f.name} ${f.value ?? "VALUE"}` : `--${f.name}`;
}

/** `bootseal NAME --req V [flags] OPERANDS`, then one line per further form. */
export function usageLines(spec: CommandSpec): string[] {
  const required = spec.flags.filter((f) => f.required).map(flagWithValue);
  const optional = spec.flags.some((f) => !f.required) ? ["[flags]"] : [];
  const main = [`bootseal ${spec.name}`, ...required, ...optional, spec.tail ?? spec.operands ?? ""];
  const forms = (spec.forms ?? []).map((form) => `bootseal ${spec.name} ${form}`);
  return [main.filter((p) => p !== "").join(" "), ...forms];
}

/** One flag's left column, as sops prints it: `--kms ARN, -k ARN`. */
export function flagTerm(f: Flag): string {
  const value = f.type === "string" ? ` ${f.value ?? "VALUE"}` : "";
  return `--${f.name}${value}${f.short ? `, -${f.short}${value}` : ""}`;
}

/** The help text after the term: help, repeatability, default, then `[$ENV]` (sops's style). */
export function flagDescription(f: Flag): string {
  const parts = [f.help];
  if (f.multiple) parts.push("(may be repeated)");
  if (f.default !== undefined) parts.push(`(default: ${f.default === "" ? '""' : f.default})`);
  const env = f.env ?? f.configEnv;
  if (env) parts.push(`[$${env}]`);
  return parts.join(" ");
}

/** `bootseal NAME --help`. */
export function helpText(spec: CommandSpec): string {
  const [first, ...rest] = usageLines(spec);
  const lines = [`usage: ${first}`, ...rest.map((l) => `       ${l}`), "", spec.summary];
  if (spec.flags.length > 0) {
    const width = Math.max(...spec.flags.map((f) => flagTerm(f).length));
    lines.push("", "flags:");
    for (const f of spec.flags) lines.push(`   ${flagTerm(f).padEnd(width)}   ${flagDescription(f)}`);
  }
  if (spec.notes) lines.push("", ...spec.notes);
  return `${lines.join("\n")}\n`;
}

/** docs/cli.md's table for one command (scripts/cli-docs.ts writes it; a test compares). */
export function flagsMarkdown(spec: CommandSpec): string {
  // GitHub's tables split cells at "|" even inside code spans.
  const cell = (s: string) => s.replaceAll("|", "\\|");
  const rows = spec.flags.map((f) => {
    const env = f.env ?? f.configEnv;
    return `| \`${cell(flagTerm(f))}\` | ${env ? `\`${env}\`` : ""} | ${cell(flagDescriptionForDocs(f))} |`;
  });
  return [
    "```",
    ...usageLines(spec),
    "```",
    "",
    spec.summary,
    "",
    ...(rows.length > 0 ? ["| flag | environment | meaning |", "| --- | --- | --- |", ...rows] : []),
    ...(spec.notes ? ["", ...spec.notes.map((n) => n.trim())] : []),
  ].join("\n");
}

function flagDescriptionForDocs(f: Flag): string {
  const parts = [f.help];
  if (f.required) parts.push("(required)");
  if (f.multiple) parts.push("(may be repeated)");
  if (f.default !== undefined) parts.push(`(default: \`${f.default === "" ? '""' : f.default}\`)`);
  return parts.join(" ");
}
