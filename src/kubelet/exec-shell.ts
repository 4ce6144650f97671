import { posix } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Clock } from '../clock/clock.js';
import type { ContainerFs } from './filesystem.js';
import type { ShellContext } from './shell/index.js';

/**
 * The shell `kubectl exec` reaches in a simulated container, and what a container's command runs in: shell/ holds
 * the parser (tree-sitter-bash), the interpreter and the commands. It is loaded on the first exec or command, not
 * at start-up: most runs of kube-sim never need it.
 */
export type { ShellContext };

type ShellModule = typeof import('./shell/index.js');
let loading: Promise<ShellModule> | undefined;

/**
 * Loads the shell and its parser (once). Awaited before a container's command starts, so that the command then runs
 * on the cluster clock alone: between its timers it is promise chains only, which a virtual clock's advance waits for.
 */
export function loadShell(): Promise<ShellModule> {
  loading ??= (async () => {
    const shell = await import('./shell/index.js');
    await shell.warmUp();
    return shell;
  })();
  return loading;
}

/** Runs `argv` in a container with the given environment and filesystem; resolves to the exit code. */
export async function runInContainer(argv: string[], ctx: ShellContext): Promise<number> {
  const { runCommand } = await loadShell();
  return runCommand(argv, { ...ctx, env: new Map(ctx.env) });
}

/** Turns of 128 steps (some 128,000 commands) without a wait on the clock, after which a command counts as spinning. */
const SPIN_TURNS = 1000;

/** Output split into lines, as the container runtime writes a container's log; a last line without newline on flush. */
export class LineSplitter {
  private readonly decoder = new TextDecoder();
  private partial = '';

  constructor(private readonly line: (text: string) => void) {}

  write(data: string | Uint8Array): void {
    const text = this.partial + (typeof data === 'string' ? data : this.decoder.decode(data, { stream: true }));
    const lines = text.split('\n');
    this.partial = lines.pop()!;
    for (const l of lines) this.line(l);
  }

  flush(): void {
    const rest = this.partial + this.decoder.decode();
    this.partial = '';
    if (rest !== '') this.line(rest);
  }
}

/** What a container's command reports while it runs. */
export interface CommandHooks {
  /** A line it wrote (stdout and stderr both: the container's log). */
  line(text: string): void;
  /** It reached a program the shell does not have (a server, python, curl): it waits in it until it is stopped. */
  waiting(program: string): void;
  /**
   * It loops without ever waiting on the clock (`while true; do :; done`): kube-sim stops running it there, as it
   * would take the server's time from everything else; the container runs until it is stopped.
   */
  spinning(): void;
  /** It exited by itself with this code (not called once it was stopped). */
  exited(code: number): void;
}

/** Where a container's command runs: its environment, its files, the cluster clock, when it started. */
export interface CommandContext {
  env: ReadonlyArray<readonly [string, string]>;
  fs: ContainerFs;
  clock: Clock;
  startedAt: number;
}

/**
 * Starts a container's command (its PID 1) in the exec shell loaded by loadShell, with no input, as a container
 * has none; returns what stops it (the end of its grace period, its pod gone).
 */
export function startCommand(
  shell: ShellModule,
  argv: readonly string[],
  ctx: CommandContext,
  hooks: CommandHooks,
): () => void {
  let stopped = false;
  let stop!: () => void;
  const closed = new Promise<void>((resolve) => {
    stop = () => {
      stopped = true;
      resolve();
    };
  });
  const out = new LineSplitter((l) => hooks.line(l));
  const err = new LineSplitter((l) => hooks.line(l));
  // Turns of a long loop (128 steps each) since the command last waited on the clock.
  let turns = 0;
  const clock: Clock = {
    mode: ctx.clock.mode,
    now: () => ctx.clock.now(),
    setTimer: (ms, fn) => {
      turns = 0;
      return ctx.clock.setTimer(ms, fn);
    },
  };
  const finish = (code: number): void => {
    out.flush();
    err.flush();
    if (!stopped) hooks.exited(code);
  };
  shell
    .runCommand([...argv], {
      env: new Map(ctx.env),
      fs: ctx.fs,
      clock,
      startedAt: ctx.startedAt,
      io: { stdout: (d) => out.write(d), stderr: (d) => err.write(d), closed },
      missing: (command) => {
        hooks.waiting(posix.basename(command[0] ?? ''));
        // SIGTERM or SIGKILL: 143 when it exits on SIGTERM; it is stopped by then, and nothing reads the code.
        return closed.then(() => 143);
      },
      pause: async () => {
        if (++turns === SPIN_TURNS) {
          hooks.spinning();
          await closed;
        }
        await nextTurn();
      },
    })
    .then(finish, () => finish(1));
  return stop;
}
