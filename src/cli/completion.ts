import type { Command, Option } from 'commander';

/**
 * `sim completion bash|zsh|fish`: completion scripts made from the command tree itself (program.ts), so every
 * command, option and choice there is completed and none that is not. Static scripts: a TAB never starts node.
 */

type Values = { kind: 'none' } | { kind: 'files' } | { kind: 'yaml' } | { kind: 'choices'; choices: string[] };

interface OptionSpec {
  flags: string[];
  description: string;
  /** Undefined: a switch that takes no value. */
  value?: Values;
}

interface CommandSpec {
  /** "sim", "sim clock", "sim clock advance". */
  path: string;
  description: string;
  options: OptionSpec[];
  subcommands: Array<{ name: string; description: string }>;
  /** What its positional arguments are. */
  args: Values;
}

function valuesOf(option: Option): Values | undefined {
  if (!option.required && !option.optional) return undefined;
  if (option.argChoices) return { kind: 'choices', choices: option.argChoices };
  return /<(file|path)>/.test(option.flags) ? { kind: 'files' } : { kind: 'none' };
}

function specs(command: Command, prefix = ''): CommandSpec[] {
  const path = prefix ? `${prefix} ${command.name()}` : command.name();
  const options: OptionSpec[] = command.options
    .filter((o) => !o.hidden)
    .map((o) => {
      const spec: OptionSpec = {
        flags: [o.long, o.short].filter((f): f is string => f !== undefined),
        description: o.description,
      };
      const values = valuesOf(o);
      if (values) spec.value = values;
      return spec;
    });
  options.push({ flags: ['--help', '-h'], description: 'display help for command' });
  const first = command.registeredArguments[0];
  const args: Values = !first
    ? { kind: 'none' }
    : first.argChoices
      ? { kind: 'choices', choices: first.argChoices }
      : /file/.test(first.name())
        ? { kind: 'yaml' }
        : { kind: 'none' };
  const subcommands = command.commands.map((c) => ({ name: c.name(), description: c.description() }));
  return [
    { path, description: command.description(), options, subcommands, args },
    ...command.commands.flatMap((c) => specs(c, path)),
  ];
}

const single = (text: string): string => `'${text.replace(/'/g, `'\\''`)}'`;

export function completionScript(program: Command, shell: 'bash' | 'zsh' | 'fish'): string {
  const tree = specs(program);
  return shell === 'bash' ? bash(tree) : shell === 'zsh' ? zsh(tree) : fish(tree);
}

function bash(tree: CommandSpec[]): string {
  const walk = tree.flatMap((c) =>
    c.subcommands.map((s) => `      ${single(`${c.path}|${s.name}`)}) path=${single(`${c.path} ${s.name}`)} ;;`),
  );
  const takesValue = tree.flatMap((c) =>
    c.options.filter((o) => o.value).flatMap((o) => o.flags.map((f) => single(`${c.path}|${f}`))),
  );
  const valueCases = tree.flatMap((c) =>
    c.options
      .filter((o) => o.value)
      .map((o) => {
        const v = o.value!;
        const reply =
          v.kind === 'choices'
            ? `COMPREPLY=($(compgen -W ${single(v.choices.join(' '))} -- "$cur"))`
            : v.kind === 'files'
              ? 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur"))'
              : 'COMPREPLY=()';
        return `    ${o.flags.map((f) => single(`${c.path}|${f}`)).join('|')}) ${reply}; return ;;`;
      }),
  );
  const commandCases = tree.map((c) => {
    const args =
      c.args.kind === 'choices' ? `choices:${c.args.choices.join(' ')}` : c.args.kind === 'yaml' ? 'yaml' : '';
    return `    ${single(c.path)}) opts=${single(c.options.flatMap((o) => o.flags).join(' '))}; subs=${single(c.subcommands.map((s) => s.name).join(' '))}; args=${single(args)} ;;`;
  });
  return `# sim completion for bash. Load it with: source <(sim completion bash)
# or keep it: sim completion bash > ~/.local/share/bash-completion/completions/sim
_sim() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" path=sim i w opts subs args skip=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    if ((skip)); then skip=0; continue; fi
    case "$path|$w" in
${walk.join('\n')}
      ${takesValue.length > 0 ? takesValue.join('|') : "'-'"}) skip=1 ;;
    esac
  done
  case "$path|$prev" in
${valueCases.join('\n')}
  esac
  case "$path" in
${commandCases.join('\n')}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  elif [[ -n "$subs" ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  elif [[ "$args" == yaml ]]; then
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -X '!*.y*ml' -- "$cur") $(compgen -d -- "$cur"))
  elif [[ "$args" == choices:* ]]; then
    COMPREPLY=($(compgen -W "\${args#choices:}" -- "$cur"))
  else
    COMPREPLY=()
  fi
}
complete -F _sim sim
`;
}

/** zsh's _arguments spec text: brackets and colons in descriptions would end its fields. */
function zshText(text: string): string {
  return text.replace(/\[/g, '(').replace(/\]/g, ')').replace(/:/g, '\\:');
}

function zsh(tree: CommandSpec[]): string {
  const walk = tree.flatMap((c) =>
    c.subcommands.map(
      (s) => `      (${single(`${c.path}|${s.name}`)}) path=${single(`${c.path} ${s.name}`)}; start=$((i + 1)) ;;`,
    ),
  );
  const cases = tree.map((c) => {
    const specsOf = c.options.map((o) => {
      const action = !o.value
        ? ''
        : o.value.kind === 'choices'
          ? `:value:(${o.value.choices.join(' ')})`
          : o.value.kind === 'files'
            ? ':file:_files'
            : ':value: ';
      const flags = o.flags.length > 1 ? `(${o.flags.join(' ')})'{${o.flags.join(',')}}'` : o.flags[0]!;
      return `'${flags}[${zshText(o.description).replace(/'/g, `'\\''`)}]${action}'`;
    });
    if (c.subcommands.length > 0) {
      const list = c.subcommands.map((s) => `${s.name}\\:${single(zshText(s.description)).replace(/^'|'$/g, '"')}`);
      specsOf.push(`'1:command:((${list.join(' ').replace(/'/g, `'\\''`)}))'`);
    } else if (c.args.kind === 'yaml') specsOf.push(`'*:scenario file:_files -g "*.(yaml|yml)"'`);
    else if (c.args.kind === 'choices') specsOf.push(`'1:value:(${c.args.choices.join(' ')})'`);
    return `    (${single(c.path)})\n      _arguments -s ${specsOf.join(' \\\n        ')} ;;`;
  });
  return `#compdef sim
# sim completion for zsh. Load it with: source <(sim completion zsh)   (after compinit)
# or keep it as _sim in a directory of $fpath: sim completion zsh > "\${fpath[1]}/_sim"
_sim() {
  local path=sim i w start=2
  for ((i = 2; i < CURRENT; i++)); do
    w="\${words[i]}"
    case "$path|$w" in
${walk.join('\n')}
    esac
  done
  # _arguments sees this command's own words only.
  words=("\${words[1]}" "\${(@)words[start,-1]}")
  (( CURRENT -= start - 2 ))
  case "$path" in
${cases.join('\n')}
  esac
}
if [[ "\${zsh_eval_context[-1]}" == loadautofunc ]]; then
  _sim "$@"
else
  compdef _sim sim
fi
`;
}

function fish(tree: CommandSpec[]): string {
  const walk = tree.flatMap((c) =>
    c.subcommands.map(
      (s) => `      case ${single(`${c.path}|${s.name}`)}\n        set path ${single(`${c.path} ${s.name}`)}`,
    ),
  );
  const lines: string[] = [];
  for (const c of tree) {
    const when = `-n ${single(`test (__sim_path) = ${JSON.stringify(c.path)}`)}`;
    for (const s of c.subcommands)
      lines.push(`complete -c sim ${when} -a ${single(s.name)} -d ${single(s.description)}`);
    for (const o of c.options) {
      const names = o.flags.map((f) => (f.startsWith('--') ? `-l ${f.slice(2)}` : `-s ${f.slice(1)}`)).join(' ');
      const value = !o.value
        ? ''
        : o.value.kind === 'choices'
          ? ` -x -a ${single(o.value.choices.join(' '))}`
          : o.value.kind === 'files'
            ? ' -r -F'
            : ' -x';
      lines.push(`complete -c sim ${when} ${names}${value} -d ${single(o.description)}`);
    }
    if (c.args.kind === 'yaml')
      lines.push(`complete -c sim ${when} -a '(__fish_complete_suffix .yaml; __fish_complete_suffix .yml)'`);
    if (c.args.kind === 'choices') lines.push(`complete -c sim ${when} -a ${single(c.args.choices.join(' '))}`);
  }
  return `# sim completion for fish. Load it with: sim completion fish | source
# or keep it: sim completion fish > ~/.config/fish/completions/sim.fish
function __sim_path
  set -l path sim
  for w in (commandline -opc)[2..-1]
    switch "$path|$w"
${walk.join('\n')}
    end
  end
  echo $path
end
complete -c sim -f
${lines.join('\n')}
`;
}
