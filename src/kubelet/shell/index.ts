import { posix } from 'node:path';
import type { ExecStreams } from '../../api/kubelet-connector.js';
import type { Clock } from '../../clock/clock.js';
import type { ContainerFs } from '../filesystem.js';
import { FILE_UTILITIES } from './commands/files.js';
import { echo, printf } from './commands/format.js';
import { SYSTEM_UTILITIES, uptime } from './commands/system.js';
import { tar } from './commands/tar.js';
import { test } from './commands/test.js';
import { TEXT_UTILITIES } from './commands/text.js';
import { readAndRun, runShell, Shell, type Machine, type Streams } from './interpreter.js';
import { Reader } from './io.js';
import { parse } from './parse.js';
import { SHELL_NAMES } from './names.js';
import type { Utility } from './proc.js';
import { Terminal } from './terminal.js';

/** What a command runs in: the container's environment, files, clock and the client's streams. */
export interface ShellContext {
  env: Map<string, string>;
  fs: ContainerFs;
  clock: Clock;
  io: ExecStreams;
  /** When the container started (cluster time), for `uptime`. */
  startedAt?: number;
  /** Runs a program the shell does not have (a container's command waits in it); else `not found`. */
  missing?: Machine['missing'];
  /** Between the steps of a long loop (see Machine). */
  pause?: Machine['pause'];
}

/** Every command a container has, built once. */
const UTILITIES: Record<string, Utility> = {
  ...TEXT_UTILITIES,
  ...FILE_UTILITIES,
  ...SYSTEM_UTILITIES,
  echo,
  printf,
  tar,
  test,
  '[': test,
  uptime,
};

function hostnameOf(ctx: ShellContext): string {
  const st = ctx.fs.stat('/etc/hostname');
  return (st?.kind === 'file' ? ctx.fs.read('/etc/hostname').toString('utf8') : (ctx.env.get('HOSTNAME') ?? '')).trim();
}

/** Loads the parser (its WebAssembly), so that a script's first parse needs no I/O. */
export async function warmUp(): Promise<void> {
  await parse('true');
}

/** Runs `argv` (as exec gives it) in the container; resolves to its exit code. */
export async function runCommand(argv: string[], ctx: ShellContext): Promise<number> {
  const closed = new AbortController();
  void ctx.io.closed.then(() => closed.abort());
  const machine: Machine = {
    fs: ctx.fs,
    clock: ctx.clock,
    hostname: () => hostnameOf(ctx),
    utilities: UTILITIES,
    ...(ctx.startedAt === undefined ? {} : { startedAt: ctx.startedAt }),
    ...(ctx.missing === undefined ? {} : { missing: ctx.missing }),
    ...(ctx.pause === undefined ? {} : { pause: ctx.pause }),
  };
  const shell = new Shell(machine, ctx.env, closed.signal);
  const name = argv[0] === undefined ? '' : posix.basename(argv[0]);
  const interactive =
    ctx.io.tty === true && SHELL_NAMES.has(name) && !argv.slice(1).some((a) => a === '-c' || !a.startsWith('-'));
  if (interactive) return terminalSession(shell, ctx);
  let io: Streams;
  let term: Terminal | undefined;
  if (ctx.io.tty) {
    // any command on a terminal: CR LF output, canonical input, Ctrl-C interrupts it
    term = new Terminal(ctx.io.stdin, (text) => ctx.io.stdout(text));
    io = { in: term.input, out: term.out, err: term.out };
    shell.signal = AbortSignal.any([closed.signal, term.startCommand()]);
  } else {
    const input = ctx.io.stdin;
    io = {
      in: new Reader(input ? { read: () => input.read() } : undefined),
      out: { write: (d) => ctx.io.stdout(d) },
      err: { write: (d) => ctx.io.stderr(d) },
    };
  }
  const err = io.err;
  try {
    if (argv.length === 0) return 0;
    if (SHELL_NAMES.has(name)) {
      shell.arg0 = name;
      return await runShell(shell, argv, io);
    }
    if (!shell.canRun(argv[0]!)) {
      if (ctx.missing) return await ctx.missing(argv, io);
      await err.write(`${argv[0]}: command not found\n`);
      return 127;
    }
    return await shell.invoke(argv, undefined, io);
  } catch (err) {
    const code = shell.outcome(err);
    if (code < 0) throw err;
    return code;
  }
}

/** `kubectl exec -it POD -- sh`: a prompt, line editing and canonical input for the commands it runs. */
function terminalSession(shell: Shell, ctx: ShellContext): Promise<number> {
  const term = new Terminal(ctx.io.stdin, (text) => ctx.io.stdout(text));
  shell.arg0 = 'sh';
  return readAndRun(
    shell,
    { in: term.input, out: term.out, err: term.out },
    {
      next: (continued) => term.readLine(continued ? (shell.vars.get('PS2') ?? '> ') : `${shell.cwd} # `),
      interactive: { start: () => term.startCommand(), end: () => term.endCommand() },
    },
  );
}
