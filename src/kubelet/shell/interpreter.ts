import { posix } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Clock } from '../../clock/clock.js';
import { FsError, type ContainerFs } from '../filesystem.js';
import type { Arith, Command, Part, Redirect, SimpleCommand, Statement, Word } from './ast.js';
import { readerOf } from './commands/text.js';
import { globToRegExp, expandGlob } from './glob.js';
import { BrokenPipe, Capture, InputTooLarge, NULL_WRITER, Pipe, Reader, type Writer } from './io.js';
import { SHELL_NAMES } from './names.js';
import { parse } from './parse.js';
import type { Proc, Utility } from './proc.js';

/**
 * The exec shell: a POSIX sh (with the bash forms scripts commonly use) that runs the syntax tree of parse.ts
 * over the container's files and the cluster clock. Commands of a pipeline run at once, joined by bounded pipes;
 * builtins that change the shell (cd, export, read, set, …) live here, the other commands in commands/.
 */

export interface Streams {
  in: Reader;
  out: Writer;
  err: Writer;
}

/** What the shell runs in: the container's files, clock and names, and the commands it can find. */
export interface Machine {
  fs: ContainerFs;
  clock: Clock;
  hostname(): string;
  utilities: Record<string, Utility>;
  /** When the container started (cluster time), for `uptime`. */
  startedAt?: number;
  /**
   * Runs a program the shell does not have, instead of `not found`: a container's command waits in it (kube-sim runs
   * no real process) until the container is stopped. Without it (kubectl exec), the shell says `not found`.
   */
  missing?: (argv: string[], io: Streams) => Promise<number>;
  /**
   * Between every 128 steps of a long loop, so that the server's other work runs: one event-loop turn, unless the
   * machine says otherwise (a container's command that never waits is parked there).
   */
  pause?: () => Promise<void>;
}

/** Unwinds the interpreter to a loop, a function or the end of the script. */
class Flow {
  constructor(
    readonly kind: 'break' | 'continue' | 'return' | 'exit',
    readonly n: number,
  ) {}
}

/** An expansion failed (`${x?}`, bad arithmetic): a non-interactive shell stops, as sh does. */
class ExpansionError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** The command was interrupted (Ctrl-C, the client went away). */
export class Interrupted extends Error {}

const BIN_DIRS = new Set(['/bin', '/usr/bin', '/sbin', '/usr/sbin', '/usr/local/bin', '/usr/local/sbin']);
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

interface Field {
  text: string;
  pattern: string;
  glob: boolean;
  quoted: boolean;
}

function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** Words in the form `set -x` prints them. */
function traceQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`;
}

export interface ShellOptions {
  errexit: boolean;
  nounset: boolean;
  xtrace: boolean;
  noglob: boolean;
  pipefail: boolean;
}

export class Shell {
  vars: Map<string, string>;
  exported: Set<string>;
  readonly readonly_ = new Set<string>();
  positional: string[] = [];
  arg0 = 'sh';
  functions = new Map<string, Command>();
  status = 0;
  cwd = '/';
  options: ShellOptions = { errexit: false, nounset: false, xtrace: false, noglob: false, pipefail: false };
  /** The interrupt of the command in the foreground; a terminal replaces it after Ctrl-C. */
  signal: AbortSignal;
  /** `exec >file` and friends: the streams the rest of the script runs with. */
  execStreams?: Streams;
  traps = new Map<string, string>();
  private locals: Array<Map<string, string | undefined>> = [];
  private conditionDepth = 0;
  private steps = 0;
  private substitutionStatus?: number;
  private jobs: Array<Promise<number>> = [];
  private lastJob = '';
  private readonly pid: number;
  /** Cluster time the shell started ($SECONDS counts from it). */
  private startedAt: number;
  private static nextPid = 7;

  constructor(
    readonly machine: Machine,
    env: Map<string, string>,
    signal: AbortSignal,
  ) {
    this.vars = new Map(env);
    this.exported = new Set(env.keys());
    if (!this.vars.has('PATH')) this.vars.set('PATH', '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
    if (!this.vars.has('HOME')) this.vars.set('HOME', '/root');
    this.vars.set('PWD', this.cwd);
    this.signal = signal;
    this.pid = Shell.nextPid++;
    this.startedAt = machine.clock.now();
  }

  /** A subshell: a copy of everything; what it changes stays in it. */
  fork(): Shell {
    const s = new Shell(this.machine, new Map(), this.signal);
    s.vars = new Map(this.vars);
    s.exported = new Set(this.exported);
    for (const r of this.readonly_) s.readonly_.add(r);
    s.positional = [...this.positional];
    s.arg0 = this.arg0;
    s.functions = new Map(this.functions);
    s.status = this.status;
    s.cwd = this.cwd;
    s.options = { ...this.options };
    s.traps = new Map(this.traps);
    s.startedAt = this.startedAt;
    return s;
  }

  /** The process environment of a command run now, with `extra` (prefix assignments) over it. */
  environment(extra?: Map<string, string>): Map<string, string> {
    const env = new Map<string, string>();
    for (const name of this.exported) {
      const v = this.vars.get(name);
      if (v !== undefined) env.set(name, v);
    }
    if (extra) for (const [k, v] of extra) env.set(k, v);
    return env;
  }

  // ---------------------------------------------------------------------------------------------------------
  // running scripts

  /** Parses and runs `source`; resolves to the exit status (syntax errors: 2). */
  async runScript(source: string, io: Streams): Promise<number> {
    const parsed = await parse(source);
    if ('error' in parsed) {
      await io.err.write(`${this.arg0}: ${parsed.error}\n`);
      return 2;
    }
    return this.runStatements(parsed.script.body, io, true);
  }

  /** Runs statements as a whole script: `exit` and errors end it, the EXIT trap runs. */
  async runStatements(body: Statement[], io: Streams, top: boolean): Promise<number> {
    try {
      this.status = await this.list(body, io);
    } catch (err) {
      this.status = this.outcome(err);
      if (this.status < 0) throw err;
      if (err instanceof ExpansionError) await io.err.write(`${err.message}\n`);
    }
    if (top) await this.finish(io);
    return this.status;
  }

  /** The EXIT trap and background jobs' end, when the script is done. */
  async finish(io: Streams): Promise<void> {
    const trap = this.traps.get('EXIT');
    if (trap) {
      this.traps.delete('EXIT');
      const saved = this.status;
      await this.runScript(trap, io).catch(() => undefined);
      this.status = saved;
    }
  }

  /** The status a thrown control flow or error leaves; -1 for errors that are not the script's. */
  outcome(err: unknown): number {
    if (err instanceof Flow) return err.kind === 'exit' || err.kind === 'return' ? err.n : this.status;
    if (err instanceof ExpansionError) return err.status;
    if (err instanceof Interrupted) return 130;
    if (err instanceof BrokenPipe) return 141;
    return -1;
  }

  private async tick(): Promise<void> {
    if (this.signal.aborted) throw new Interrupted();
    // a long loop lets the server's other work run between its commands
    if (++this.steps % 128 === 0) await (this.machine.pause ? this.machine.pause() : nextTurn());
  }

  async list(body: Statement[], io: Streams): Promise<number> {
    let status = this.status;
    for (const st of body) {
      const streams = this.execStreams ?? io;
      if (st.background) {
        const job = this.fork();
        const pid = String(Shell.nextPid++);
        this.lastJob = pid;
        this.jobs.push(
          job.command(st.command, streams).catch((err: unknown) => {
            const code = job.outcome(err);
            return code < 0 ? 1 : code;
          }),
        );
        status = 0;
      } else status = await this.command(st.command, streams);
      this.status = status;
    }
    return status;
  }

  /** Runs `body` as a condition (`set -e` does not apply). */
  private async condition(body: Statement[], io: Streams): Promise<number> {
    this.conditionDepth++;
    try {
      return await this.list(body, io);
    } finally {
      this.conditionDepth--;
    }
  }

  private async conditionCommand(cmd: Command, io: Streams): Promise<number> {
    this.conditionDepth++;
    try {
      return await this.command(cmd, io);
    } finally {
      this.conditionDepth--;
    }
  }

  private errexit(status: number): number {
    if (status !== 0 && this.options.errexit && this.conditionDepth === 0) throw new Flow('exit', status);
    return status;
  }

  async command(cmd: Command, io: Streams): Promise<number> {
    await this.tick();
    switch (cmd.type) {
      case 'simple':
        return this.errexit(await this.simple(cmd, io));
      case 'pipeline':
        return this.errexit(await this.pipeline(cmd.commands, cmd.stderr, io));
      case 'and': {
        const left = await this.conditionCommand(cmd.left, io);
        this.status = left;
        return left === 0 ? this.command(cmd.right, io) : left;
      }
      case 'or': {
        const left = await this.conditionCommand(cmd.left, io);
        this.status = left;
        return left !== 0 ? this.command(cmd.right, io) : left;
      }
      case 'not':
        return (await this.conditionCommand(cmd.command, io)) === 0 ? 1 : 0;
      case 'group':
        return this.list(cmd.body, io);
      case 'subshell': {
        const sub = this.fork();
        try {
          return await sub.list(cmd.body, io);
        } catch (err) {
          const code = sub.outcome(err);
          if (code < 0 || err instanceof Interrupted) throw err;
          return code;
        }
      }
      case 'if': {
        for (const branch of cmd.branches) {
          if ((await this.condition(branch.condition, io)) === 0) return this.list(branch.body, io);
        }
        return cmd.otherwise ? this.list(cmd.otherwise, io) : 0;
      }
      case 'loop':
        return this.loop(async () => ((await this.condition(cmd.condition, io)) === 0) !== cmd.until, cmd.body, io);
      case 'for': {
        const items = cmd.items ? await this.expandWords(cmd.items, io) : [...this.positional];
        let i = 0;
        return this.loop(
          async () => {
            if (i >= items.length) return false;
            this.setVar(cmd.variable, items[i++]!);
            return true;
          },
          cmd.body,
          io,
        );
      }
      case 'cfor': {
        if (cmd.init) await this.arith(cmd.init, io);
        let first = true;
        return this.loop(
          async () => {
            if (!first && cmd.update) await this.arith(cmd.update, io);
            first = false;
            return cmd.condition ? (await this.arith(cmd.condition, io)) !== 0n : true;
          },
          cmd.body,
          io,
        );
      }
      case 'case':
        return this.caseCommand(cmd, io);
      case 'function':
        this.functions.set(cmd.name, cmd.body);
        return 0;
      case 'redirected': {
        const opened = await this.redirect(cmd.redirects, io);
        if (typeof opened === 'number') return opened;
        try {
          return cmd.command ? await this.command(cmd.command, opened) : 0;
        } finally {
          await this.closeRedirects(opened);
        }
      }
      case 'test':
        return this.testCommand(cmd.words, cmd.extended, io);
      case 'arith':
        return (await this.arith(cmd.expr, io)) === 0n ? 1 : 0;
    }
  }

  private async loop(next: () => Promise<boolean>, body: Statement[], io: Streams): Promise<number> {
    let status = 0;
    for (;;) {
      await this.tick();
      if (!(await next())) break;
      try {
        status = await this.list(body, io);
      } catch (err) {
        if (!(err instanceof Flow) || (err.kind !== 'break' && err.kind !== 'continue')) throw err;
        if (err.n > 1) throw new Flow(err.kind, err.n - 1);
        if (err.kind === 'break') break;
      }
    }
    return status;
  }

  private async caseCommand(cmd: Extract<Command, { type: 'case' }>, io: Streams): Promise<number> {
    const subject = await this.expandString(cmd.subject, io);
    let status = 0;
    let falling = false;
    for (const item of cmd.items) {
      let hit = falling;
      if (!hit) {
        for (const pattern of item.patterns) {
          if (globToRegExp(await this.expandPattern(pattern, io)).test(subject)) {
            hit = true;
            break;
          }
        }
      }
      if (!hit) continue;
      status = await this.list(item.body, io);
      if (item.next === ';;') return status;
      falling = item.next === ';&';
    }
    return status;
  }

  private async testCommand(words: Word[], extended: boolean, io: Streams): Promise<number> {
    if (!extended) {
      const args = await this.expandWords(words, io);
      return this.invoke(['[', ...args, ']'], undefined, io);
    }
    // [[ … ]]: no splitting or globbing; the right of == and != is a pattern, of =~ a regular expression
    const args: string[] = [];
    for (let i = 0; i < words.length; i++) {
      const prev = args.at(-1);
      if (prev === '==' || prev === '=' || prev === '!=') args.push(`\0${await this.expandPattern(words[i]!, io)}`);
      else args.push(await this.expandString(words[i]!, io));
    }
    return this.extendedTest(args, io);
  }

  private async extendedTest(args: string[], io: Streams): Promise<number> {
    // split on || and && (lowest precedence first) and evaluate the simple tests in between with test(1)
    const orAt = args.lastIndexOf('||');
    if (orAt > 0)
      return (await this.extendedTest(args.slice(0, orAt), io)) === 0 ? 0 : this.extendedTest(args.slice(orAt + 1), io);
    const andAt = args.lastIndexOf('&&');
    if (andAt > 0)
      return (await this.extendedTest(args.slice(0, andAt), io)) !== 0
        ? 1
        : this.extendedTest(args.slice(andAt + 1), io);
    if (args[0] === '!') return (await this.extendedTest(args.slice(1), io)) === 0 ? 1 : 0;
    if (args.length === 3 && args[2]!.startsWith('\0')) {
      const match = globToRegExp(args[2]!.slice(1)).test(args[0]!);
      return match === (args[1] !== '!=') ? 0 : 1;
    }
    if (args.length === 3 && args[1] === '=~') {
      try {
        const m = new RegExp(args[2]!).exec(args[0]!);
        return m ? 0 : 1;
      } catch {
        return 2;
      }
    }
    return this.invoke(
      ['test', ...args.map((a) => (a.startsWith('\0') ? a.slice(1).replace(/\\(.)/g, '$1') : a))],
      undefined,
      io,
    );
  }

  // ---------------------------------------------------------------------------------------------------------
  // simple commands, pipelines, redirections

  private async simple(cmd: SimpleCommand, io: Streams): Promise<number> {
    this.substitutionStatus = undefined;
    const argv = await this.expandWords(cmd.words, io);
    if (argv.length === 0) {
      for (const a of cmd.assigns) this.setVar(a.name, await this.assignValue(a.name, a.value, a.append, io));
      if (cmd.redirects.length > 0) {
        const opened = await this.redirect(cmd.redirects, io);
        if (typeof opened === 'number') return opened;
        await this.closeRedirects(opened);
      }
      return this.substitutionStatus ?? 0;
    }
    const prefix = new Map<string, string>();
    for (const a of cmd.assigns) prefix.set(a.name, await this.assignValue(a.name, a.value, a.append, io));
    if (this.options.xtrace)
      await io.err.write(
        `+ ${[...[...prefix].map(([k, v]) => `${k}=${traceQuote(v)}`), ...argv.map(traceQuote)].join(' ')}\n`,
      );
    if (argv[0] === 'exec' && argv.length === 1) {
      // exec with only redirections: they apply to the rest of the script
      const opened = await this.redirect(cmd.redirects, io);
      if (typeof opened === 'number') return opened;
      this.execStreams = opened;
      return 0;
    }
    if (cmd.redirects.length === 0) return this.invoke(argv, prefix, io);
    const opened = await this.redirect(cmd.redirects, io);
    if (typeof opened === 'number') return opened;
    try {
      return await this.invoke(argv, prefix, opened);
    } finally {
      await this.closeRedirects(opened);
    }
  }

  private async pipeline(commands: Command[], stderrToo: boolean[], io: Streams): Promise<number> {
    if (commands.length === 1) return this.command(commands[0]!, io);
    const pipes = commands.slice(1).map(() => new Pipe());
    const last = commands.length - 1;
    const stages = commands.map(async (c, i) => {
      const stdin = i === 0 ? io.in : new Reader(pipes[i - 1]!);
      const stdout = i === last ? io.out : pipes[i]!;
      const stderr = stderrToo[i] && i < last ? pipes[i]! : io.err;
      const sub = this.fork();
      try {
        return await sub.command(c, { in: stdin, out: stdout, err: stderr });
      } catch (err) {
        const code = sub.outcome(err);
        if (code < 0 || err instanceof Interrupted) throw err;
        return code;
      } finally {
        if (i < last) pipes[i]!.end();
        if (i > 0) stdin.close();
      }
    });
    const codes = await Promise.all(stages);
    if (this.options.pipefail) return [...codes].reverse().find((c) => c !== 0) ?? 0;
    return codes[last]!;
  }

  /** Opens redirections left to right; a number is the failure status (the command does not run). */
  private async redirect(redirects: Redirect[], io: Streams): Promise<Streams | number> {
    const streams: Streams = { ...io };
    for (const r of redirects) {
      const fd = r.fd ?? (r.op.startsWith('<') && r.op !== '<>' ? 0 : r.op === '<>' ? 0 : 1);
      if (fd > 2) {
        await io.err.write(`${this.arg0}: ${fd}: file descriptors above 2 are not supported\n`);
        return 1;
      }
      if (r.op === '<<' || r.op === '<<-' || r.op === '<<<') {
        const text = await this.expandString(r.target, io);
        streams.in = readerOf(Buffer.from(r.op === '<<<' ? `${text}\n` : text));
        continue;
      }
      const target = await this.expandString(r.target, io);
      if (r.op === '>&' || r.op === '<&') {
        if (target === '-') {
          if (fd === 0) streams.in = readerOf(Buffer.alloc(0));
          else if (fd === 1) streams.out = NULL_WRITER;
          else streams.err = NULL_WRITER;
          continue;
        }
        if (/^\d+$/.test(target)) {
          const from = Number(target);
          if (from > 2) {
            await io.err.write(`${this.arg0}: ${from}: bad file descriptor\n`);
            return 1;
          }
          if (fd === 0 && from === 0) continue;
          if (fd === 0) {
            await io.err.write(`${this.arg0}: ${from}: bad file descriptor\n`);
            return 1;
          }
          const w = from === 1 ? streams.out : from === 2 ? streams.err : undefined;
          if (!w) {
            await io.err.write(`${this.arg0}: ${from}: bad file descriptor\n`);
            return 1;
          }
          if (fd === 1) streams.out = w;
          else streams.err = w;
          continue;
        }
        // `>&file`: stdout and stderr to the file
        const w = this.openWriter(target, false, io);
        if (typeof w === 'string') return this.redirectFailed(w, io);
        streams.out = w;
        streams.err = w;
        continue;
      }
      if (r.op === '<' || r.op === '<>') {
        const reader = this.openReader(target);
        if (typeof reader === 'string') return this.redirectFailed(reader, io);
        streams.in = reader;
        continue;
      }
      const w = this.openWriter(target, r.op === '>>' || r.op === '&>>', io);
      if (typeof w === 'string') return this.redirectFailed(w, io);
      if (r.op === '&>' || r.op === '&>>') {
        streams.out = w;
        streams.err = w;
      } else if (fd === 1) streams.out = w;
      else streams.err = w;
    }
    return streams;
  }

  private async redirectFailed(message: string, io: Streams): Promise<number> {
    await io.err.write(`${this.arg0}: ${message}\n`);
    return 1;
  }

  private async closeRedirects(_streams: Streams): Promise<void> {
    // files are written through as commands write; nothing is buffered to flush
  }

  private openWriter(target: string, append: boolean, io: Streams): Writer | string {
    if (target === '/dev/null') return NULL_WRITER;
    if (target === '/dev/stdout' || target === '/dev/tty' || target === '/proc/self/fd/1') return io.out;
    if (target === '/dev/stderr' || target === '/proc/self/fd/2') return io.err;
    const path = posix.resolve(this.cwd, target);
    try {
      if (!append || !this.machine.fs.stat(path)) this.machine.fs.write(path, Buffer.alloc(0));
      else if (this.machine.fs.isDir(path)) throw new FsError('EISDIR', path);
    } catch (err) {
      return `${target}: ${(err as Error).message}`;
    }
    const fs = this.machine.fs;
    return {
      write: (data) =>
        fs.write(path, typeof data === 'string' ? Buffer.from(data) : Buffer.from(data), { append: true }),
    };
  }

  private openReader(target: string): Reader | string {
    if (target === '/dev/null') return readerOf(Buffer.alloc(0));
    try {
      return readerOf(this.machine.fs.read(posix.resolve(this.cwd, target)));
    } catch (err) {
      return `${target}: ${(err as Error).message}`;
    }
  }

  // ---------------------------------------------------------------------------------------------------------
  // finding and running a command

  /** Whether `name` is a function, builtin, shell, utility or an executable file. */
  canRun(name: string): boolean {
    if (!name.includes('/') && (this.functions.has(name) || Object.hasOwn(BUILTINS, name))) return true;
    const base = posix.basename(name);
    const known = !name.includes('/') || BIN_DIRS.has(posix.dirname(name));
    if (known && (SHELL_NAMES.has(base) || Object.hasOwn(this.machine.utilities, base))) return true;
    return name.includes('/') && this.machine.fs.stat(posix.resolve(this.cwd, name))?.kind === 'file';
  }

  /** Runs a command by name: a function, a builtin of the shell, or a utility. */
  async invoke(argv: string[], prefix: Map<string, string> | undefined, io: Streams): Promise<number> {
    const name = argv[0]!;
    const fn = name.includes('/') ? undefined : this.functions.get(name);
    if (fn) return this.callFunction(fn, argv, prefix, io);
    const builtin = Object.hasOwn(BUILTINS, name) ? BUILTINS[name] : undefined;
    if (builtin) {
      // assignments before a builtin last for it only (POSIX lets special builtins keep them; bash does not)
      const saved = this.withPrefix(prefix);
      try {
        return await builtin(this, argv, io);
      } finally {
        this.restorePrefix(saved);
      }
    }
    const base = posix.basename(name);
    const known = !name.includes('/') || BIN_DIRS.has(posix.dirname(name));
    if (known && SHELL_NAMES.has(base)) return this.subshellCommand(argv, prefix, io);
    const utility = known && Object.hasOwn(this.machine.utilities, base) ? this.machine.utilities[base] : undefined;
    if (!utility) {
      if (name.includes('/') && this.machine.fs.stat(posix.resolve(this.cwd, name))?.kind === 'file')
        return this.runFile(posix.resolve(this.cwd, name), argv, io);
      if (this.machine.missing) return this.machine.missing(argv, io);
      await io.err.write(`${this.arg0}: ${name}: not found\n`);
      return 127;
    }
    return this.runUtility(utility, argv, this.environment(prefix), io);
  }

  async runUtility(utility: Utility, argv: string[], env: Map<string, string>, io: Streams): Promise<number> {
    const proc: Proc = {
      argv,
      stdin: io.in,
      stdout: io.out,
      stderr: io.err,
      env,
      cwd: this.cwd,
      fs: this.machine.fs,
      clock: this.machine.clock,
      ...(this.machine.startedAt === undefined ? {} : { startedAt: this.machine.startedAt }),
      signal: this.signal,
      hostname: () => this.machine.hostname(),
      run: async (next, overrides = {}) => {
        const child = this.fork();
        if (overrides.env) {
          child.vars = new Map(overrides.env);
          child.exported = new Set(overrides.env.keys());
        }
        const streams = {
          in: overrides.stdin ?? io.in,
          out: overrides.stdout ?? io.out,
          err: overrides.stderr ?? io.err,
        };
        try {
          return await child.invoke(next, undefined, streams);
        } catch (err) {
          const code = child.outcome(err);
          if (code < 0 || err instanceof Interrupted || err instanceof BrokenPipe) throw err;
          return code;
        }
      },
    };
    try {
      return await utility(proc);
    } catch (err) {
      if (err instanceof BrokenPipe || err instanceof Interrupted || err instanceof Flow) throw err;
      if (this.signal.aborted) throw new Interrupted();
      // a write that failed (a full disk, a read-only file) or input past the bound ends the command, as in C
      const what =
        err instanceof FsError ? `write error: ${err.message}` : err instanceof Error ? err.message : String(err);
      await io.err.write(`${posix.basename(argv[0]!)}: ${what}\n`);
      return err instanceof InputTooLarge ? 1 : err instanceof FsError ? 1 : 2;
    }
  }

  private withPrefix(prefix: Map<string, string> | undefined): Map<string, string | undefined> | undefined {
    if (!prefix || prefix.size === 0) return undefined;
    const saved = new Map<string, string | undefined>();
    for (const [k, v] of prefix) {
      saved.set(k, this.vars.get(k));
      this.vars.set(k, v);
    }
    return saved;
  }

  private restorePrefix(saved: Map<string, string | undefined> | undefined): void {
    if (!saved) return;
    for (const [k, v] of saved) {
      if (v === undefined) this.vars.delete(k);
      else this.vars.set(k, v);
    }
  }

  private async callFunction(
    body: Command,
    argv: string[],
    prefix: Map<string, string> | undefined,
    io: Streams,
  ): Promise<number> {
    if (this.locals.length > 200) {
      await io.err.write(`${this.arg0}: ${argv[0]}: maximum function nesting level exceeded (200)\n`);
      return 2;
    }
    const savedArgs = this.positional;
    const savedPrefix = this.withPrefix(prefix);
    this.positional = argv.slice(1);
    this.locals.push(new Map());
    try {
      return await this.command(body, io);
    } catch (err) {
      if (err instanceof Flow && err.kind === 'return') return err.n;
      throw err;
    } finally {
      const scope = this.locals.pop()!;
      for (const [k, v] of scope) {
        if (v === undefined) this.vars.delete(k);
        else this.vars.set(k, v);
      }
      this.positional = savedArgs;
      this.restorePrefix(savedPrefix);
    }
  }

  /** `sh -c SCRIPT [NAME [ARG…]]`, `sh FILE [ARG…]`, `sh` reading stdin, run in a child shell. */
  private async subshellCommand(argv: string[], prefix: Map<string, string> | undefined, io: Streams): Promise<number> {
    const child = this.fork();
    child.functions = new Map();
    child.vars = this.environment(prefix);
    child.exported = new Set(child.vars.keys());
    child.cwd = this.cwd;
    child.options = { errexit: false, nounset: false, xtrace: false, noglob: false, pipefail: false };
    return runShell(child, argv, io);
  }

  private async runFile(path: string, argv: string[], io: Streams): Promise<number> {
    const st = this.machine.fs.stat(path);
    if (!st || (st.mode & 0o111) === 0) {
      await io.err.write(`${this.arg0}: ${argv[0]}: Permission denied\n`);
      return 126;
    }
    const source = this.machine.fs.read(path).toString('utf8');
    const shebang = /^#!\s*(\S+)/.exec(source)?.[1];
    if (shebang && !SHELL_NAMES.has(posix.basename(shebang))) {
      await io.err.write(`${this.arg0}: ${argv[0]}: ${shebang}: not found\n`);
      return 127;
    }
    const child = this.fork();
    child.functions = new Map();
    child.arg0 = argv[0]!;
    child.positional = argv.slice(1);
    return child.runScript(source, io).catch((err: unknown) => {
      const code = child.outcome(err);
      if (code < 0) throw err;
      return code;
    });
  }

  // ---------------------------------------------------------------------------------------------------------
  // variables

  lookup(name: string): string | undefined {
    switch (name) {
      case '?':
        return String(this.status);
      case '#':
        return String(this.positional.length);
      case '@':
      case '*':
        return this.positional.join(name === '*' ? (this.vars.get('IFS') ?? ' ').slice(0, 1) : ' ');
      case '$':
        return String(this.pid);
      case '!':
        return this.lastJob;
      case '-':
        return `${this.options.errexit ? 'e' : ''}${this.options.nounset ? 'u' : ''}${this.options.xtrace ? 'x' : ''}${this.options.noglob ? 'f' : ''}`;
      case '0':
        return this.arg0;
      default:
        if (/^\d+$/.test(name)) return this.positional[Number(name) - 1];
        if (name === 'PWD') return this.cwd;
        if (name === 'SECONDS') return String(Math.floor((this.machine.clock.now() - this.startedAt) / 1000));
        return this.vars.get(name);
    }
  }

  setVar(name: string, value: string): void {
    if (this.readonly_.has(name)) throw new ExpansionError(`${this.arg0}: ${name}: is read only`, 1);
    this.vars.set(name, value);
  }

  /** `local NAME[=VALUE]`: saved now, restored when the function returns. */
  makeLocal(name: string): void {
    const scope = this.locals.at(-1);
    if (scope && !scope.has(name)) scope.set(name, this.vars.get(name));
  }

  get inFunction(): boolean {
    return this.locals.length > 0;
  }

  private async assignValue(name: string, value: Word | undefined, append: boolean, io: Streams): Promise<string> {
    const v = value ? await this.expandString(value, io, true) : '';
    return append ? (this.vars.get(name) ?? '') + v : v;
  }

  /** Waits for background jobs (`wait`); resolves to the status of the last. */
  async waitJobs(): Promise<number> {
    const jobs = this.jobs;
    this.jobs = [];
    const codes = await Promise.all(jobs);
    return codes.at(-1) ?? 0;
  }

  // ---------------------------------------------------------------------------------------------------------
  // expansion

  async expandWords(words: Word[], io: Streams): Promise<string[]> {
    const out: string[] = [];
    for (const w of words) out.push(...(await this.expandWord(w, io)));
    return out;
  }

  /** A word as fields: expanded, split where unquoted expansions left IFS characters, globbed. */
  async expandWord(word: Word, io: Streams): Promise<string[]> {
    const fields: Field[] = [];
    let cur: Field = { text: '', pattern: '', glob: false, quoted: false };
    let broken = false;
    const ifs = this.vars.get('IFS') ?? ' \t\n';
    const start = (): void => {
      if (broken) {
        if (cur.text !== '' || cur.quoted) fields.push(cur);
        cur = { text: '', pattern: '', glob: false, quoted: false };
        broken = false;
      }
    };
    const literal = (text: string, quoted: boolean): void => {
      if (text === '' && !quoted) return;
      start();
      cur.text += text;
      cur.pattern += quoted ? escapeGlob(text) : text;
      if (quoted) cur.quoted = true;
      else if (/[*?[]/.test(text)) cur.glob = true;
    };
    const split = (value: string): void => {
      if (ifs === '') return literal(value, false);
      for (const c of value) {
        if (!ifs.includes(c)) {
          literal(c, false);
          continue;
        }
        if (' \t\n'.includes(c)) {
          if (cur.text !== '' || cur.quoted) broken = true;
        } else {
          fields.push(cur);
          cur = { text: '', pattern: '', glob: false, quoted: false };
          broken = false;
        }
      }
    };
    for (const part of word.parts) {
      if (part.t === 'text') literal(part.text, part.quoted);
      else if (part.t === 'tilde') literal(this.vars.get('HOME') ?? '/root', true);
      else if (
        part.t === 'param' &&
        (part.name === '@' || (part.name === '*' && !part.quoted)) &&
        !part.op &&
        !part.length
      ) {
        const values = this.positional;
        values.forEach((v, i) => {
          if (i > 0) {
            if (part.quoted) {
              fields.push(cur);
              cur = { text: '', pattern: '', glob: false, quoted: false };
            } else broken = cur.text !== '' || cur.quoted;
          }
          if (part.quoted) literal(v, true);
          else split(v);
        });
        if (part.quoted && values.length === 0 && word.parts.length === 1) return [];
      } else {
        const value = await this.partValue(part, io);
        if (part.quoted) literal(value, true);
        else split(value);
      }
    }
    if (cur.text !== '' || cur.quoted) fields.push(cur);
    const out: string[] = [];
    for (const f of fields) {
      if (f.glob && !this.options.noglob) {
        const matches = expandGlob(this.machine.fs, this.cwd, f.pattern);
        if (matches.length > 0) {
          out.push(...matches);
          continue;
        }
      }
      out.push(f.text);
    }
    return out;
  }

  /** A word as one string: no splitting or globbing (assignments, redirection targets, here-documents). */
  async expandString(word: Word, io: Streams, _assignment = false): Promise<string> {
    let s = '';
    for (const part of word.parts) {
      if (part.t === 'text') s += part.text;
      else if (part.t === 'tilde') s += this.vars.get('HOME') ?? '/root';
      else s += await this.partValue(part, io);
    }
    return s;
  }

  /** A word as a glob pattern: quoted parts match themselves. */
  private async expandPattern(word: Word, io: Streams): Promise<string> {
    let s = '';
    for (const part of word.parts) {
      if (part.t === 'text') s += part.quoted ? escapeGlob(part.text) : part.text;
      else if (part.t === 'tilde') s += escapeGlob(this.vars.get('HOME') ?? '/root');
      else {
        const v = await this.partValue(part, io);
        s += part.quoted ? escapeGlob(v) : v;
      }
    }
    return s;
  }

  private async partValue(part: Exclude<Part, { t: 'text' } | { t: 'tilde' }>, io: Streams): Promise<string> {
    if (part.t === 'command') return this.substitute(part.body, io);
    if (part.t === 'arith') return String(await this.arith(part.expr, io));
    return this.param(part, io);
  }

  private async substitute(body: Statement[], io: Streams): Promise<string> {
    const sub = this.fork();
    const out = new Capture();
    let status: number;
    try {
      status = await sub.list(body, { in: io.in, out, err: io.err });
    } catch (err) {
      status = sub.outcome(err);
      if (status < 0 || err instanceof Interrupted) throw err;
    }
    this.substitutionStatus = status;
    this.status = status;
    return out.text().replace(/\n+$/, '');
  }

  private async param(part: Extract<Part, { t: 'param' }>, io: Streams): Promise<string> {
    const value = this.lookup(part.name);
    if (part.length) return String([...(value ?? '')].length);
    const op = part.op;
    const unset = value === undefined;
    const empty = unset || value === '';
    const argText = async (): Promise<string> => (part.arg ? this.expandString(part.arg, io) : '');
    switch (op) {
      case undefined:
        if (unset && this.options.nounset && part.name !== '@' && part.name !== '*')
          throw new ExpansionError(`${this.arg0}: ${part.name}: parameter not set`, 1);
        return value ?? '';
      case '-':
      case ':-':
        return (op === '-' ? unset : empty) ? argText() : value!;
      case '=':
      case ':=':
        if (op === '=' ? unset : empty) {
          const v = await argText();
          if (!NAME.test(part.name))
            throw new ExpansionError(`${this.arg0}: $${part.name}: cannot assign in this way`, 1);
          this.setVar(part.name, v);
          return v;
        }
        return value!;
      case '?':
      case ':?':
        if (op === '?' ? unset : empty) {
          const msg = await argText();
          throw new ExpansionError(
            `${this.arg0}: ${part.name}: ${msg || (unset ? 'parameter not set' : 'parameter null')}`,
            1,
          );
        }
        return value!;
      case '+':
      case ':+':
        return (op === '+' ? unset : empty) ? '' : argText();
      case '#':
      case '##':
      case '%':
      case '%%':
        return trim(value ?? '', await this.expandPattern(part.arg ?? { parts: [] }, io), op);
      case '/':
      case '//':
      case '/#':
      case '/%': {
        const re = globToRegExp(
          await this.expandPattern(part.arg ?? { parts: [] }, io),
          op === '/#' ? 'start' : op === '/%' ? 'end' : 'any',
        );
        const replacement = part.replacement ? await this.expandString(part.replacement, io) : '';
        const g = new RegExp(re.source, op === '//' ? 'g' : '');
        return (value ?? '').replace(g, () => replacement);
      }
      case ':': {
        const [offset, length] = (await argText()).split(':');
        const v = [...(value ?? '')];
        let from = Number(await this.arithText(offset ?? '0', io));
        if (from < 0) from = Math.max(0, v.length + from);
        const len = length === undefined ? v.length : Number(await this.arithText(length, io));
        return v.slice(from, len < 0 ? v.length + len : from + len).join('');
      }
      case '^^':
        return (value ?? '').toUpperCase();
      case ',,':
        return (value ?? '').toLowerCase();
      case '^':
        return (value ?? '').charAt(0).toUpperCase() + (value ?? '').slice(1);
      case ',':
        return (value ?? '').charAt(0).toLowerCase() + (value ?? '').slice(1);
      default:
        throw new ExpansionError(`${this.arg0}: \${${part.name}${op}…}: bad substitution`, 2);
    }
  }

  private async arithText(text: string, io: Streams): Promise<bigint> {
    const parsed = await parse(`(( ${text} ))`);
    if ('error' in parsed || parsed.script.body[0]?.command.type !== 'arith')
      throw new ExpansionError(`${this.arg0}: arithmetic syntax error: "${text}"`, 2);
    return this.arith(parsed.script.body[0].command.expr, io);
  }

  /** Shell arithmetic: 64-bit signed integers, C's operators. */
  async arith(e: Arith, io: Streams, depth = 0): Promise<bigint> {
    const wrap = (v: bigint): bigint => BigInt.asIntN(64, v);
    const read = async (name: string): Promise<bigint> => {
      const v = this.lookup(name);
      if (v === undefined || v.trim() === '') {
        if (this.options.nounset && v === undefined)
          throw new ExpansionError(`${this.arg0}: ${name}: parameter not set`, 1);
        return 0n;
      }
      return this.number(v, io, depth);
    };
    switch (e.t) {
      case 'num':
        return e.value;
      case 'var':
        return read(e.name);
      case 'word':
        return this.number(await this.expandString(e.word, io), io, depth);
      case 'unary': {
        const v = await this.arith(e.arg, io, depth);
        if (e.op === '-') return wrap(-v);
        if (e.op === '+') return v;
        if (e.op === '!') return v === 0n ? 1n : 0n;
        if (e.op === '~') return wrap(~v);
        break;
      }
      case 'incdec': {
        const v = await read(e.name);
        const next = wrap(e.op === '++' ? v + 1n : v - 1n);
        this.setVar(e.name, String(next));
        return e.prefix ? next : v;
      }
      case 'assign': {
        let v = await this.arith(e.value, io, depth);
        if (e.op !== '=') v = this.binary(e.op.slice(0, -1), await read(e.name), v);
        this.setVar(e.name, String(v));
        return v;
      }
      case 'ternary':
        return (await this.arith(e.condition, io, depth)) !== 0n
          ? this.arith(e.consequence, io, depth)
          : this.arith(e.alternative, io, depth);
      case 'binary': {
        const left = await this.arith(e.left, io, depth);
        if (e.op === '&&') return left !== 0n && (await this.arith(e.right, io, depth)) !== 0n ? 1n : 0n;
        if (e.op === '||') return left !== 0n || (await this.arith(e.right, io, depth)) !== 0n ? 1n : 0n;
        if (e.op === ',') return this.arith(e.right, io, depth);
        return this.binary(e.op, left, await this.arith(e.right, io, depth));
      }
    }
    throw new ExpansionError(`${this.arg0}: arithmetic syntax error`, 2);
  }

  private binary(op: string, a: bigint, b: bigint): bigint {
    const wrap = (v: bigint): bigint => BigInt.asIntN(64, v);
    switch (op) {
      case '+':
        return wrap(a + b);
      case '-':
        return wrap(a - b);
      case '*':
        return wrap(a * b);
      case '/':
      case '%':
        if (b === 0n) throw new ExpansionError(`${this.arg0}: arithmetic expression: division by zero`, 2);
        return op === '/' ? wrap(a / b) : wrap(a % b);
      case '**':
        if (b < 0n) throw new ExpansionError(`${this.arg0}: arithmetic expression: exponent less than 0`, 2);
        return wrap(a ** b);
      case '<<':
        return wrap(a << (b & 63n));
      case '>>':
        return wrap(a >> (b & 63n));
      case '<':
        return a < b ? 1n : 0n;
      case '<=':
        return a <= b ? 1n : 0n;
      case '>':
        return a > b ? 1n : 0n;
      case '>=':
        return a >= b ? 1n : 0n;
      case '==':
        return a === b ? 1n : 0n;
      case '!=':
        return a !== b ? 1n : 0n;
      case '&':
        return a & b;
      case '|':
        return a | b;
      case '^':
        return a ^ b;
      default:
        throw new ExpansionError(`${this.arg0}: arithmetic syntax error: operator ${op}`, 2);
    }
  }

  /** A variable's value as a number; a value that names another variable is read through (bash does). */
  private async number(text: string, io: Streams, depth: number): Promise<bigint> {
    const t = text.trim();
    if (t === '') return 0n;
    if (/^[+-]?\d+$/.test(t))
      return BigInt(
        t.length > 1 && /^[+-]?0\d/.test(t)
          ? t.startsWith('-')
            ? `-0o${t.slice(2)}`
            : `0o${t.replace(/^\+?0/, '')}`
          : t,
      );
    if (/^0[xX][0-9a-fA-F]+$/.test(t)) return BigInt(t);
    if (NAME.test(t) && depth < 16) {
      const v = this.lookup(t);
      return v === undefined ? 0n : this.number(v, io, depth + 1);
    }
    if (depth < 16) return this.arithText(t, io);
    throw new ExpansionError(`${this.arg0}: arithmetic syntax error: "${t}"`, 2);
  }
}

/** `${x#p}` and friends: the shortest or longest prefix (#) or suffix (%) that matches the pattern, removed. */
function trim(value: string, pattern: string, op: '#' | '##' | '%' | '%%'): string {
  const re = globToRegExp(pattern);
  const chars = [...value];
  if (op === '#' || op === '##') {
    const lengths = op === '#' ? [...chars.keys(), chars.length] : [...chars.keys(), chars.length].reverse();
    for (const n of lengths) if (re.test(chars.slice(0, n).join(''))) return chars.slice(n).join('');
    return value;
  }
  const starts = op === '%' ? [...chars.keys(), chars.length].reverse() : [...chars.keys(), chars.length];
  for (const n of starts) if (re.test(chars.slice(n).join(''))) return chars.slice(0, n).join('');
  return value;
}

/** Runs a shell command line as sh does with its arguments: -c SCRIPT, a script file, or stdin. */
export async function runShell(shell: Shell, argv: string[], io: Streams): Promise<number> {
  const args = argv.slice(1);
  let script: string | undefined;
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') {
      i++;
      break;
    }
    if (!/^[-+][a-zA-Z]+$/.test(a)) break;
    const on = a[0] === '-';
    for (const c of a.slice(1)) {
      if (c === 'c') script = '';
      else if (c === 'e') shell.options.errexit = on;
      else if (c === 'u') shell.options.nounset = on;
      else if (c === 'x') shell.options.xtrace = on;
      else if (c === 'f') shell.options.noglob = on;
      // -l (login), -i (interactive), -s (stdin), -v: nothing to do here
    }
  }
  const rest = args.slice(i);
  const finish = async (run: () => Promise<number>): Promise<number> => {
    try {
      return await run();
    } catch (err) {
      const code = shell.outcome(err);
      if (code < 0) throw err;
      if (err instanceof ExpansionError) await io.err.write(`${err.message}\n`);
      await shell.finish(io);
      return code;
    }
  };
  if (script !== undefined) {
    const source = rest[0];
    if (source === undefined) {
      await io.err.write(`${shell.arg0}: -c requires an argument\n`);
      return 2;
    }
    if (rest[1] !== undefined) shell.arg0 = rest[1];
    shell.positional = rest.slice(2);
    return finish(() => shell.runScript(source, io));
  }
  if (rest.length > 0) {
    const path = posix.resolve(shell.cwd, rest[0]!);
    let source: string;
    try {
      source = shell.machine.fs.read(path).toString('utf8');
    } catch (err) {
      await io.err.write(`${shell.arg0}: can't open '${rest[0]}': ${(err as Error).message}\n`);
      return 127;
    }
    shell.arg0 = rest[0]!;
    shell.positional = rest.slice(1);
    return finish(() => shell.runScript(source, io));
  }
  return finish(() => readAndRun(shell, io));
}

/** Where a shell reading commands gets its lines: stdin, or a terminal's line editor. */
export interface LineSource {
  /** The next line (without its newline); `continued` when the command so far is incomplete. */
  next(continued: boolean): Promise<string | undefined>;
  /** An interactive shell goes on after errors and interrupts; it also sets the signal of each command. */
  interactive?: { start(): AbortSignal; end(): void };
}

/** Lines from the shell's stdin, which the commands it runs then read on from. */
export function stdinLines(io: Streams): LineSource {
  return { next: async () => (await io.in.line())?.text };
}

/**
 * A shell reading its commands line by line: each complete command runs as soon as its last line arrives (the
 * client may never close stdin), and the commands it runs read the rest of the same input.
 */
export async function readAndRun(shell: Shell, io: Streams, source: LineSource = stdinLines(io)): Promise<number> {
  const interactive = source.interactive;
  const base = shell.signal;
  let pending = '';
  for (;;) {
    const line = await source.next(pending !== '');
    if (line === undefined || base.aborted) {
      if (pending.trim() !== '') {
        const parsed = await parse(pending);
        if ('error' in parsed) {
          await io.err.write(`${shell.arg0}: ${parsed.error}\n`);
          shell.status = 2;
        }
      }
      break;
    }
    pending += `${line}\n`;
    const parsed = await parse(pending);
    if ('error' in parsed) {
      if (parsed.incomplete) continue;
      await io.err.write(`${shell.arg0}: ${parsed.error}\n`);
      pending = '';
      shell.status = 2;
      if (!interactive) return 2;
      continue;
    }
    pending = '';
    if (interactive) shell.signal = AbortSignal.any([base, interactive.start()]);
    try {
      await shell.list(parsed.script.body, io);
    } catch (err) {
      const code = shell.outcome(err);
      if (code < 0) throw err;
      shell.status = code;
      if (err instanceof ExpansionError) await io.err.write(`${err.message}\n`);
      if (err instanceof Flow && err.kind === 'exit') break;
      if (!interactive && !(err instanceof Interrupted)) break;
    } finally {
      if (interactive) {
        interactive.end();
        shell.signal = base;
      }
    }
  }
  await shell.finish(io);
  return shell.status;
}

type Builtin = (shell: Shell, argv: string[], io: Streams) => Promise<number> | number;

function flowCount(shell: Shell, arg: string | undefined): number {
  const n = arg === undefined ? 1 : Number(arg);
  if (!Number.isInteger(n) || n < 1) throw new ExpansionError(`${shell.arg0}: ${arg}: numeric argument required`, 1);
  return n;
}

/** Builtins that change the shell itself; everything else is a utility. */
const BUILTINS: Record<string, Builtin> = {
  ':': () => 0,
  exit: (shell, argv) => {
    const code = argv[1] === undefined ? shell.status : Number(argv[1]);
    throw new Flow('exit', Number.isInteger(code) ? code & 255 : 2);
  },
  return: (shell, argv) => {
    if (!shell.inFunction) throw new Flow('exit', argv[1] === undefined ? shell.status : Number(argv[1]) & 255);
    throw new Flow('return', argv[1] === undefined ? shell.status : Number(argv[1]) & 255);
  },
  break: (shell, argv) => {
    throw new Flow('break', flowCount(shell, argv[1]));
  },
  continue: (shell, argv) => {
    throw new Flow('continue', flowCount(shell, argv[1]));
  },
  cd: async (shell, argv, io) => {
    const target =
      argv[1] === undefined
        ? (shell.vars.get('HOME') ?? '/')
        : argv[1] === '-'
          ? (shell.vars.get('OLDPWD') ?? shell.cwd)
          : argv[1];
    const path = posix.resolve(shell.cwd, target);
    const st = shell.machine.fs.stat(path);
    if (st?.kind !== 'dir') {
      await io.err.write(
        `${shell.arg0}: cd: can't cd to ${target}: ${st ? 'Not a directory' : 'No such file or directory'}\n`,
      );
      return 2;
    }
    shell.vars.set('OLDPWD', shell.cwd);
    shell.cwd = path;
    shell.vars.set('PWD', path);
    if (argv[1] === '-') await io.out.write(`${path}\n`);
    return 0;
  },
  pwd: async (shell, _argv, io) => {
    await io.out.write(`${shell.cwd}\n`);
    return 0;
  },
  export: async (shell, argv, io) => {
    const args = argv.slice(1).filter((a) => a !== '-p' && a !== '-n');
    if (args.length === 0) {
      for (const name of [...shell.exported].sort()) {
        const v = shell.vars.get(name);
        if (v !== undefined) await io.out.write(`export ${name}='${v.replace(/'/g, "'\\''")}'\n`);
      }
      return 0;
    }
    for (const a of args) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a : a.slice(0, eq).replace(/\+$/, '');
      if (!NAME.test(name)) {
        await io.err.write(`${shell.arg0}: export: ${a}: bad variable name\n`);
        return 1;
      }
      if (eq >= 0) {
        const value = a.slice(eq + 1);
        shell.setVar(name, a[eq - 1] === '+' ? (shell.vars.get(name) ?? '') + value : value);
      }
      shell.exported.add(name);
    }
    return 0;
  },
  readonly: async (shell, argv, io) => {
    for (const a of argv.slice(1).filter((x) => x !== '-p')) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a : a.slice(0, eq);
      if (!NAME.test(name)) {
        await io.err.write(`${shell.arg0}: readonly: ${a}: bad variable name\n`);
        return 1;
      }
      if (eq >= 0) shell.setVar(name, a.slice(eq + 1));
      shell.readonly_.add(name);
    }
    return 0;
  },
  local: async (shell, argv, io) => {
    if (!shell.inFunction) {
      await io.err.write(`${shell.arg0}: local: not in a function\n`);
      return 1;
    }
    for (const a of argv.slice(1).filter((x) => !x.startsWith('-'))) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a : a.slice(0, eq);
      shell.makeLocal(name);
      if (eq >= 0) shell.setVar(name, a.slice(eq + 1));
    }
    return 0;
  },
  unset: (shell, argv) => {
    const functions = argv.includes('-f');
    for (const name of argv.slice(1).filter((a) => !a.startsWith('-'))) {
      if (functions) shell.functions.delete(name);
      else if (shell.readonly_.has(name)) throw new ExpansionError(`${shell.arg0}: unset: ${name}: is read only`, 1);
      else {
        shell.vars.delete(name);
        shell.exported.delete(name);
      }
    }
    return 0;
  },
  set: async (shell, argv, io) => {
    const args = argv.slice(1);
    if (args.length === 0) {
      for (const [k, v] of [...shell.vars].sort(([a], [b]) => (a < b ? -1 : 1)))
        await io.out.write(`${k}='${v.replace(/'/g, "'\\''")}'\n`);
      return 0;
    }
    let i = 0;
    for (; i < args.length; i++) {
      const a = args[i]!;
      if (a === '--') {
        i++;
        shell.positional = args.slice(i);
        return 0;
      }
      if (!/^[-+]/.test(a) || a === '-' || a === '+') break;
      const on = a[0] === '-';
      if (a.slice(1) === 'o') {
        const opt = args[++i];
        if (opt === 'errexit') shell.options.errexit = on;
        else if (opt === 'nounset') shell.options.nounset = on;
        else if (opt === 'xtrace') shell.options.xtrace = on;
        else if (opt === 'noglob') shell.options.noglob = on;
        else if (opt === 'pipefail') shell.options.pipefail = on;
        else if (
          opt !== undefined &&
          !['posix', 'vi', 'emacs', 'monitor', 'noclobber', 'allexport', 'verbose'].includes(opt)
        ) {
          await io.err.write(`${shell.arg0}: set: illegal option -o ${opt}\n`);
          return 2;
        }
        continue;
      }
      for (const c of a.slice(1)) {
        if (c === 'e') shell.options.errexit = on;
        else if (c === 'u') shell.options.nounset = on;
        else if (c === 'x') shell.options.xtrace = on;
        else if (c === 'f') shell.options.noglob = on;
        else if (!'vmbCnah'.includes(c)) {
          await io.err.write(`${shell.arg0}: set: illegal option -${c}\n`);
          return 2;
        }
      }
    }
    if (i < args.length) shell.positional = args.slice(i);
    return 0;
  },
  shift: async (shell, argv, io) => {
    const n = argv[1] === undefined ? 1 : Number(argv[1]);
    if (!Number.isInteger(n) || n < 0 || n > shell.positional.length) {
      await io.err.write(`${shell.arg0}: shift: can't shift that many\n`);
      return 1;
    }
    shell.positional = shell.positional.slice(n);
    return 0;
  },
  eval: async (shell, argv, io) => {
    const source = argv.slice(1).join(' ');
    if (source.trim() === '') return 0;
    const parsed = await parse(source);
    if ('error' in parsed) {
      await io.err.write(`${shell.arg0}: eval: ${parsed.error}\n`);
      return 2;
    }
    return shell.list(parsed.script.body, io);
  },
  '.': (shell, argv, io) => BUILTINS.source!(shell, argv, io),
  source: async (shell, argv, io) => {
    const file = argv[1];
    if (file === undefined) {
      await io.err.write(`${shell.arg0}: .: filename argument required\n`);
      return 2;
    }
    let source: string;
    try {
      source = shell.machine.fs.read(posix.resolve(shell.cwd, file)).toString('utf8');
    } catch (err) {
      await io.err.write(`${shell.arg0}: .: can't open '${file}': ${(err as Error).message}\n`);
      return 1;
    }
    const parsed = await parse(source);
    if ('error' in parsed) {
      await io.err.write(`${shell.arg0}: ${file}: ${parsed.error}\n`);
      return 2;
    }
    const saved = shell.positional;
    if (argv.length > 2) shell.positional = argv.slice(2);
    try {
      return await shell.list(parsed.script.body, io);
    } finally {
      shell.positional = saved;
    }
  },
  exec: (shell, argv, io) =>
    argv.length > 1
      ? shell.invoke(argv.slice(1), undefined, io).then((code) => {
          throw new Flow('exit', code);
        })
      : 0,
  /** read [-r] [-p PROMPT] [-s] [-n N] [-d DELIM] [NAME]…: a line from stdin, split into the names. */
  read: async (shell, argv, io) => {
    let raw = false;
    const names: string[] = [];
    for (let i = 1; i < argv.length; i++) {
      const a = argv[i]!;
      if (a === '-r') raw = true;
      else if (a === '-p') await io.err.write(argv[++i] ?? '');
      else if (a === '-s' || a === '-e') continue;
      else if (a === '-t' || a === '-n' || a === '-d' || a === '-u') i++;
      else names.push(a);
    }
    if (names.length === 0) names.push('REPLY');
    let text = '';
    let terminated = false;
    for (;;) {
      const line = await io.in.line();
      if (line === undefined) break;
      terminated = line.terminated;
      if (!raw && line.text.endsWith('\\') && line.terminated) {
        text += line.text.slice(0, -1);
        continue;
      }
      text += line.text;
      break;
    }
    if (!raw) text = text.replace(/\\(.)/g, '$1');
    const ifs = shell.vars.get('IFS') ?? ' \t\n';
    const white = [...ifs].filter((c) => ' \t\n'.includes(c)).join('');
    let rest =
      names.length === 1 && names[0] === 'REPLY' ? text : text.replace(new RegExp(`^[${escapeClass(white)}]+`), '');
    for (let n = 0; n < names.length; n++) {
      if (n === names.length - 1) {
        shell.setVar(
          names[n]!,
          names[n] === 'REPLY' && names.length === 1 ? rest : rest.replace(new RegExp(`[${escapeClass(white)}]+$`), ''),
        );
        break;
      }
      const m = ifs === '' ? null : new RegExp(`[${escapeClass(ifs)}]`).exec(rest);
      const field = m ? rest.slice(0, m.index) : rest;
      shell.setVar(names[n]!, field);
      rest = m ? rest.slice(m.index + 1).replace(new RegExp(`^[${escapeClass(white)}]+`), '') : '';
    }
    return terminated ? 0 : 1;
  },
  trap: async (shell, argv, io) => {
    const args = argv.slice(1);
    if (args.length === 0) {
      for (const [sig, action] of shell.traps) await io.out.write(`trap -- '${action}' ${sig}\n`);
      return 0;
    }
    if (args[0] === '-l' || args[0] === '-p') return 0;
    const [action, ...signals] = args.length === 1 ? ['-', args[0]!] : args;
    for (const s of signals) {
      const sig = s === '0' ? 'EXIT' : s.toUpperCase().replace(/^SIG/, '');
      if (action === '-' || action === '') shell.traps.delete(sig);
      else shell.traps.set(sig, action!);
    }
    return 0;
  },
  wait: (shell) => shell.waitJobs(),
  type: async (shell, argv, io) => {
    let code = 0;
    for (const name of argv.slice(1)) {
      const where = describeCommand(shell, name);
      if (where === undefined) {
        await io.err.write(`${shell.arg0}: type: ${name}: not found\n`);
        code = 1;
      } else await io.out.write(`${name} is ${where}\n`);
    }
    return code;
  },
  command: async (shell, argv, io) => {
    const args = argv.slice(1);
    if (args[0] === '-v' || args[0] === '-V') {
      let code = 0;
      for (const name of args.slice(1)) {
        const where = describeCommand(shell, name);
        if (where === undefined) code = 1;
        else
          await io.out.write(args[0] === '-v' ? `${where.startsWith('/') ? where : name}\n` : `${name} is ${where}\n`);
      }
      return code;
    }
    if (args.length === 0) return 0;
    const saved = shell.functions;
    shell.functions = new Map();
    try {
      return await shell.invoke(args, undefined, io);
    } finally {
      shell.functions = saved;
    }
  },
  which: async (shell, argv, io) => {
    let code = 0;
    for (const name of argv.slice(1)) {
      const where = describeCommand(shell, name);
      if (where?.startsWith('/')) await io.out.write(`${where}\n`);
      else code = 1;
    }
    return code;
  },
  let: async (shell, argv, io) => {
    let last = 0n;
    for (const expr of argv.slice(1)) {
      const parsed = await parse(`(( ${expr} ))`);
      if ('error' in parsed || parsed.script.body[0]?.command.type !== 'arith') {
        await io.err.write(`${shell.arg0}: let: ${expr}: syntax error\n`);
        return 2;
      }
      last = await shell.arith(parsed.script.body[0].command.expr, io);
    }
    return last === 0n ? 1 : 0;
  },
  umask: async (_shell, argv, io) => {
    if (argv.length === 1) await io.out.write('0022\n');
    return 0;
  },
  ulimit: async (_shell, argv, io) => {
    if (argv.length === 1 || argv[1] === '-n' || argv[1] === '-a')
      await io.out.write(argv[1] === '-n' ? '1048576\n' : 'unlimited\n');
    return 0;
  },
};

function escapeClass(chars: string): string {
  return chars.replace(/[\]\\^-]/g, '\\$&');
}

function describeCommand(shell: Shell, name: string): string | undefined {
  if (shell.functions.has(name)) return 'a shell function';
  if (Object.hasOwn(BUILTINS, name)) return 'a shell builtin';
  if (SHELL_NAMES.has(name) || Object.hasOwn(shell.machine.utilities, name)) return `/bin/${name}`;
  return undefined;
}

export { BUILTINS as SHELL_BUILTINS };
