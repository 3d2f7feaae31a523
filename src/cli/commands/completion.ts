/**
 * completion bash|zsh|fish (sops completion bash|zsh): a shell completion script generated
 * from the command table and each command's flag table, so it knows every command and flag
 * this build has. Load it with `source <(bootseal completion bash)`.
 */
import { BootsealError } from "../../errors.ts";
import type { Command } from "../command.ts";
import type { CommandSpec, Flag } from "../flags.ts";
import { parseFlags } from "../flags.ts";
import { LEGACY_FLAGS } from "../legacy-args.ts";

const SHELLS = ["bash", "zsh", "fish"] as const;

/** Operand words some commands take first (sub-actions). */
const ACTIONS: Record<string, readonly string[]> = {
  groups: ["add", "delete"],
  completion: SHELLS,
};

const spec = {
  name: "completion",
  summary: "print a bash, zsh or fish completion script: source <(bootseal completion bash)",
  operands: "bash|zsh|fish",
  flags: [],
} as const satisfies CommandSpec;

function flagWords(flags: readonly Flag[]): string[] {
  return flags.flatMap((f) => [`--${f.name}`, ...(f.short ? [`-${f.short}`] : [])]);
}

/** Words safe inside single quotes and shell case labels (flag and command names are). */
function checkWord(word: string): string {
  if (!/^[A-Za-z0-9_.|-]+$/.test(word)) throw new Error(`completion: unexpected word ${word}`);
  return word;
}

function bash(specs: readonly CommandSpec[]): string {
  const names = specs.map((s) => checkWord(s.name)).join(" ");
  const cases = specs.map((s) => {
    const flags = flagWords(s.flags).map(checkWord).join(" ");
    const actions = (ACTIONS[s.name] ?? []).join(" ");
    return `    ${s.name}) flags='${flags} --help'; actions='${actions}' ;;`;
  });
  return `# bash completion for bootseal: source <(bootseal completion bash)
_bootseal() {
  local cur cmd i flags actions
  cur="\${COMP_WORDS[COMP_CWORD]}"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in
      -*) ;;
      *) cmd="\${COMP_WORDS[i]}"; break ;;
    esac
  done
  if [[ -z "$cmd" ]]; then
    if [[ "$cur" == -* ]]; then
      COMPREPLY=($(compgen -W '${flagWords(LEGACY_FLAGS).map(checkWord).join(" ")} --help --version' -- "$cur"))
    else
      COMPREPLY=($(compgen -W '${names}' -- "$cur"))
      [[ \${#COMPREPLY[@]} -eq 0 ]] && COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
  fi
  flags=""; actions=""
  case "$cmd" in
${cases.join("\n")}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif [[ -n "$actions" && $((i + 1)) -eq $COMP_CWORD ]]; then
    COMPREPLY=($(compgen -W "$actions" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}
complete -o filenames -F _bootseal bootseal
`;
}

function zsh(specs: readonly CommandSpec[]): string {
  const names = specs.map((s) => checkWord(s.name)).join(" ");
  const cases = specs.map((s) => {
    const flags = flagWords(s.flags).map(checkWord).join(" ");
    const actions = (ACTIONS[s.name] ?? []).join(" ");
    return `    ${s.name}) flags=(${flags} --help); actions=(${actions}) ;;`;
  });
  return `#compdef bootseal
# zsh completion for bootseal: source <(bootseal completion zsh) after compinit
_bootseal() {
  local -a flags actions
  if (( CURRENT == 2 )); then
    compadd -- ${names}
    return
  fi
  case "\${words[2]}" in
${cases.join("\n")}
  esac
  if [[ "\${words[CURRENT]}" == -* ]]; then
    compadd -- $flags
  elif (( CURRENT == 3 )) && (( \${#actions} > 0 )); then
    compadd -- $actions
  else
    _files
  fi
}
compdef _bootseal bootseal
`;
}

/** fish's help text in double quotes: no expansions. */
function fishText(text: string): string {
  return `"${text.replace(/[\\"$]/g, (c) => `\\${c}`)}"`;
}

function fish(specs: readonly CommandSpec[]): string {
  const lines = [
    "# fish completion for bootseal: bootseal completion fish | source",
    "complete -c bootseal -f",
  ];
  for (const s of specs) {
    lines.push(
      `complete -c bootseal -n __fish_use_subcommand -a ${checkWord(s.name)} -d ${fishText(s.summary)}`,
    );
    for (const action of ACTIONS[s.name] ?? []) {
      lines.push(`complete -c bootseal -n "__fish_seen_subcommand_from ${s.name}" -a ${action}`);
    }
    for (const f of s.flags) {
      const short = f.short ? ` -s ${checkWord(f.short)}` : "";
      const arg = f.type === "string" ? " -r -F" : "";
      lines.push(
        `complete -c bootseal -n "__fish_seen_subcommand_from ${s.name}" -l ${checkWord(f.name)}${short}${arg} -d ${fishText(f.help)}`,
      );
    }
  }
  return `${lines.join("\n")}\n`;
}

/**
 * The command, given the whole command table: the table (../command-registry.ts) lists this
 * command too, so it hands itself in rather than being imported here (no import circle).
 */
export function completionCommand(allCommands: () => Promise<readonly Command[]>): Command {
  return {
    spec,
    async run(args, io) {
      const { positionals } = parseFlags(spec, args, io.env);
      const shell = positionals[0];
      if (positionals.length !== 1 || !SHELLS.includes(shell as (typeof SHELLS)[number])) {
        throw new BootsealError("USAGE", "completion needs one of bash, zsh, fish");
      }
      const specs = (await allCommands()).map((c) => c.spec);
      io.stdout.write(shell === "bash" ? bash(specs) : shell === "zsh" ? zsh(specs) : fish(specs));
      return 0;
    },
  };
}
