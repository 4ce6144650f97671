import { posix } from 'node:path';
import { parseDuration, type Clock } from '../clock/clock.js';
import type { ExecStreams } from '../api/kubelet-connector.js';
import type { ContainerFs } from './filesystem.js';
import { tar } from './shell/commands/tar.js';
import { test } from './shell/commands/test.js';
import { Reader, type ByteSource, type Writer } from './shell/io.js';
import type { Proc, Utility } from './shell/proc.js';

/**
 * The tiny shell `kubectl exec` reaches in a simulated container: the environment the container started with,
 * its mounted files, and a handful of commands (printenv, env, echo, cat, hostname, ls, sleep, true, false,
 * pwd, whoami, id, date, uname, grep, head, tail, wc, exit, sh -c). Unknown commands exit 127.
 */
export interface ShellContext {
  env: Map<string, string>;
  fs: ContainerFs;
  clock: Clock;
  io: ExecStreams;
}

interface Io {
  out(text: string): void;
  err(text: string): void;
  stdin(): Promise<string>;
  /** The raw input, for the commands that read it as a stream. */
  reader?: Reader;
}

/** Commands that read and write bytes as streams. */
const UTILITIES: Record<string, Utility> = { tar, test, '[': test };

type Builtin = (args: string[], io: Io, shell: Shell) => Promise<number> | number;

function utcDate(ms: number): string {
  const d = new Date(ms);
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${days[d.getUTCDay()]} ${months[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2, ' ')} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC ${d.getUTCFullYear()}`;
}

function lines(text: string): string[] {
  const parts = text.split('\n');
  if (parts[parts.length - 1] === '') parts.pop();
  return parts;
}

/** A sleep on the cluster clock that ends early when the client goes away. */
function sleep(clock: Clock, ms: number, closed: Promise<void>): Promise<void> {
  return new Promise((resolve) => {
    const timer = clock.setTimer(ms, resolve);
    void closed.then(() => {
      timer.cancel();
      resolve();
    });
  });
}

/** Writes `text` and succeeds: the whole of most builtins. */
function printed(io: { out(text: string): void }, text: string): number {
  io.out(text);
  return 0;
}

const BUILTINS: Record<string, Builtin> = {
  true: () => 0,
  false: () => 1,
  ':': () => 0,
  pwd: (_a, io) => printed(io, '/\n'),
  whoami: (_a, io) => printed(io, 'root\n'),
  id: (_a, io) => printed(io, 'uid=0(root) gid=0(root) groups=0(root)\n'),
  uname: (args, io, shell) =>
    printed(io, args.includes('-a') ? `Linux ${shell.hostname()} 6.8.0-kube-sim #1 SMP x86_64 GNU/Linux\n` : 'Linux\n'),
  hostname: (_a, io, shell) => printed(io, `${shell.hostname()}\n`),
  date: (_a, io, shell) => printed(io, `${utcDate(shell.ctx.clock.now())}\n`),
  echo: (args, io) => {
    const noNewline = args[0] === '-n';
    io.out(`${(noNewline ? args.slice(1) : args).join(' ')}${noNewline ? '' : '\n'}`);
    return 0;
  },
  printenv: (args, io, shell) => {
    if (args.length === 0) {
      for (const [k, v] of shell.env) io.out(`${k}=${v}\n`);
      return 0;
    }
    let code = 0;
    for (const name of args) {
      if (shell.env.has(name)) io.out(`${shell.env.get(name)}\n`);
      else code = 1;
    }
    return code;
  },
  env: async (args, io, shell) => {
    const assignments = new Map(shell.env);
    let i = 0;
    for (; i < args.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(args[i]!); i++) {
      const eq = args[i]!.indexOf('=');
      assignments.set(args[i]!.slice(0, eq), args[i]!.slice(eq + 1));
    }
    if (i < args.length) return new Shell({ ...shell.ctx, env: assignments }).run(args.slice(i), io);
    for (const [k, v] of assignments) io.out(`${k}=${v}\n`);
    return 0;
  },
  cat: async (args, io, shell) => {
    if (args.length === 0 || (args.length === 1 && args[0] === '-')) {
      io.out(await io.stdin());
      return 0;
    }
    let code = 0;
    for (const file of args) {
      const path = posix.resolve('/', file);
      const st = shell.ctx.fs.stat(path);
      if (st?.kind === 'file') io.out(shell.ctx.fs.read(path).toString('utf8'));
      else if (st?.kind === 'dir') {
        io.err(`cat: ${file}: Is a directory\n`);
        code = 1;
      } else {
        io.err(`cat: ${file}: No such file or directory\n`);
        code = 1;
      }
    }
    return code;
  },
  ls: (args, io, shell) => {
    const all = args.some((a) => a.startsWith('-') && a.includes('a'));
    const paths = args.filter((a) => !a.startsWith('-'));
    const targets = paths.length > 0 ? paths : ['.'];
    let code = 0;
    targets.forEach((target, i) => {
      const path = posix.resolve('/', target);
      if (shell.ctx.fs.stat(path)?.kind === 'file') io.out(`${target}\n`);
      else if (shell.ctx.fs.isDir(path)) {
        if (targets.length > 1) io.out(`${i > 0 ? '\n' : ''}${target}:\n`);
        const names = shell.ctx.fs.list(path);
        for (const n of all ? ['.', '..', ...names] : names) io.out(`${n}\n`);
      } else {
        io.err(`ls: cannot access '${target}': No such file or directory\n`);
        code = 2;
      }
    });
    return code;
  },
  sleep: async (args, io, shell) => {
    let ms = 0;
    for (const a of args) {
      try {
        ms += parseDuration(a);
      } catch {
        io.err(`sleep: invalid time interval '${a}'\n`);
        return 1;
      }
    }
    await sleep(shell.ctx.clock, ms, shell.ctx.io.closed);
    return 0;
  },
  grep: async (args, io) => {
    const flags = args.filter((a) => a.startsWith('-') && a.length > 1);
    const rest = args.filter((a) => !(a.startsWith('-') && a.length > 1));
    const pattern = rest[0];
    if (pattern === undefined) {
      io.err('Usage: grep [OPTION]... PATTERNS [FILE]...\n');
      return 2;
    }
    const invert = flags.some((f) => f.includes('v'));
    const ignoreCase = flags.some((f) => f.includes('i'));
    let re: RegExp;
    try {
      re = new RegExp(pattern, ignoreCase ? 'i' : '');
    } catch {
      re = new RegExp(pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), ignoreCase ? 'i' : '');
    }
    let found = false;
    for (const line of lines(await io.stdin())) {
      if (re.test(line) !== invert) {
        io.out(`${line}\n`);
        found = true;
      }
    }
    return found ? 0 : 1;
  },
  head: async (args, io) => headTail(args, io, true),
  tail: async (args, io) => headTail(args, io, false),
  wc: async (args, io) => {
    const text = await io.stdin();
    const count = lines(text).length;
    io.out(
      args.includes('-l')
        ? `${count}\n`
        : `${count} ${text.split(/\s+/).filter((w) => w).length} ${Buffer.byteLength(text)}\n`,
    );
    return 0;
  },
};

async function headTail(args: string[], io: Io, head: boolean): Promise<number> {
  let n = 10;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-n' && args[i + 1] !== undefined) n = Number(args[++i]);
    else if (/^-\d+$/.test(a)) n = Number(a.slice(1));
  }
  const all = lines(await io.stdin());
  for (const line of head ? all.slice(0, n) : all.slice(Math.max(0, all.length - n))) io.out(`${line}\n`);
  return 0;
}

const SHELLS = new Set(['sh', 'bash', 'ash', 'dash', 'zsh']);

/** Thrown by `exit` to end a script. */
class ExitSignal {
  constructor(readonly code: number) {}
}

type Token = { kind: 'word'; word: string } | { kind: 'op'; op: ';' | '&&' | '||' | '|' | '>' | '<' };

export class Shell {
  readonly env: Map<string, string>;
  private lastCode = 0;

  constructor(readonly ctx: ShellContext) {
    this.env = ctx.env;
  }

  hostname(): string {
    const st = this.ctx.fs.stat('/etc/hostname');
    return (
      st?.kind === 'file' ? this.ctx.fs.read('/etc/hostname').toString('utf8') : (this.env.get('HOSTNAME') ?? '')
    ).trim();
  }

  /** Runs one command (argv as exec gives it). */
  async run(argv: string[], io?: Io): Promise<number> {
    const streams = io ?? this.rootIo();
    try {
      return await this.exec(argv, streams);
    } catch (err) {
      if (err instanceof ExitSignal) return err.code;
      throw err;
    }
  }

  private rootIo(): Io {
    let stdin: Promise<string> | undefined;
    const input = this.ctx.io.stdin;
    const reader = new Reader(input ? { read: () => input.read() } : undefined);
    return {
      out: (t) => void this.ctx.io.stdout(t),
      err: (t) => void this.ctx.io.stderr(t),
      stdin: () => (stdin ??= reader.all().then((b) => b.toString('utf8'))),
      reader,
    };
  }

  private utility(run: Utility, argv: string[], io: Io): Promise<number> | number {
    const writer = (write: (t: string) => void, root: (d: string | Uint8Array) => void | Promise<void>): Writer => ({
      write: (d) => (io.reader ? root(d) : write(typeof d === 'string' ? d : Buffer.from(d).toString('utf8'))),
    });
    const source: ByteSource = { read: async () => (io.reader ? io.reader.chunk() : undefined) };
    const stdin =
      io.reader ??
      new Reader({
        read: async () => {
          const text = await io.stdin();
          source.read = async () => undefined;
          return text === '' ? undefined : Buffer.from(text);
        },
      });
    const abort = new AbortController();
    void this.ctx.io.closed.then(() => abort.abort());
    const proc: Proc = {
      argv,
      stdin,
      stdout: writer(io.out, (d) => this.ctx.io.stdout(d)),
      stderr: writer(io.err, (d) => this.ctx.io.stderr(d)),
      env: this.env,
      cwd: '/',
      fs: this.ctx.fs,
      clock: this.ctx.clock,
      signal: abort.signal,
      run: (a) => this.exec(a, io),
      hostname: () => this.hostname(),
    };
    return run(proc);
  }

  private async exec(argv: string[], io: Io): Promise<number> {
    const [cmd, ...args] = argv;
    if (cmd === undefined) return 0;
    const name = posix.basename(cmd);
    if (SHELLS.has(name)) {
      const c = args.indexOf('-c');
      if (c >= 0) return this.script(args[c + 1] ?? '', io);
      const input = this.ctx.io.stdin;
      if (this.ctx.io.tty && input)
        return this.interactive((listener) => {
          void (async () => {
            for (let chunk = await input.read(); chunk !== undefined; chunk = await input.read())
              listener(Buffer.from(chunk).toString('utf8'));
          })();
        });
      return this.script(await io.stdin(), io);
    }
    if (name === 'exit') throw new ExitSignal(args[0] === undefined ? this.lastCode : Number(args[0]) & 255);
    if (Object.hasOwn(UTILITIES, name)) return this.utility(UTILITIES[name]!, [name, ...args], io);
    const builtin = Object.hasOwn(BUILTINS, name) ? BUILTINS[name] : undefined;
    if (!builtin) {
      io.err(`${cmd}: command not found\n`);
      return 127;
    }
    return builtin(args, io, this);
  }

  /**
   * `kubectl exec -it POD -- sh`: a prompt and line editing over a raw terminal (echo, backspace, Ctrl-C,
   * Ctrl-D or `exit` to leave), each line run as a script; output newlines become CR LF, as a pty does.
   */
  private interactive(onStdin: (listener: (chunk: string) => void) => void): Promise<number> {
    const write = (text: string): void => void this.ctx.io.stdout(text.replace(/\r?\n/g, '\r\n'));
    const io: Io = { out: write, err: write, stdin: () => Promise.resolve('') };
    const prompt = (): void => write('# ');
    let line = '';
    let running = Promise.resolve();
    let finished = false;
    return new Promise<number>((resolve) => {
      const finish = (code: number): void => {
        if (finished) return;
        finished = true;
        resolve(code);
      };
      void this.ctx.io.closed.then(() => finish(0));
      onStdin((chunk) => {
        for (const c of chunk) {
          if (finished) return;
          if (c === '\r' || c === '\n') {
            write('\n');
            const script = line;
            line = '';
            running = running.then(async () => {
              if (finished) return;
              try {
                this.lastCode = await this.script(script, io);
              } catch (err) {
                if (err instanceof ExitSignal) return finish(err.code);
                throw err;
              }
              prompt();
            });
          } else if (c === '\u0004') {
            if (line === '') running = running.then(() => finish(this.lastCode));
          } else if (c === '\u0003') {
            line = '';
            write('^C\n');
            prompt();
          } else if (c === '\u007f' || c === '\b') {
            if (line.length > 0) {
              line = line.slice(0, -1);
              void this.ctx.io.stdout('\b \b');
            }
          } else if (c >= ' ') {
            line += c;
            void this.ctx.io.stdout(c);
          }
        }
      });
      prompt();
    });
  }

  /** A script: commands joined by ; && || and newlines, pipes between them. */
  async script(source: string, io: Io): Promise<number> {
    let tokens: Token[];
    try {
      tokens = this.tokenize(source);
    } catch (err) {
      io.err(`sh: ${(err as Error).message}\n`);
      return 2;
    }
    let code = 0;
    let skip: '&&' | '||' | undefined;
    let pipeline: string[][] = [];
    let current: string[] = [];
    const flush = async (): Promise<void> => {
      if (current.length > 0) pipeline.push(current);
      current = [];
      if (pipeline.length === 0) return;
      const run = pipeline;
      pipeline = [];
      if (skip === '&&' && code !== 0) return;
      if (skip === '||' && code === 0) return;
      code = await this.pipeline(run, io);
      this.lastCode = code;
    };
    for (const t of tokens) {
      if (t.kind === 'word') current.push(t.word);
      else if (t.op === '|') {
        pipeline.push(current);
        current = [];
      } else if (t.op === '>' || t.op === '<') {
        io.err('sh: redirections are not supported (the filesystem is read-only)\n');
        return 2;
      } else {
        await flush();
        skip = t.op === ';' ? undefined : t.op;
      }
    }
    await flush();
    return code;
  }

  private async pipeline(commands: string[][], io: Io): Promise<number> {
    let input: Promise<string> | undefined;
    let code = 0;
    for (let i = 0; i < commands.length; i++) {
      const last = i === commands.length - 1;
      let captured = '';
      const stage: Io = {
        out: last ? io.out : (t) => (captured += t),
        err: io.err,
        stdin: input ? () => input! : io.stdin,
      };
      const argv = commands[i]!;
      const assignments = argv.length > 0 && argv.every((w) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(w));
      if (assignments) {
        for (const w of argv) this.env.set(w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1));
        code = 0;
      } else code = await this.exec(argv, stage);
      input = Promise.resolve(captured);
    }
    return code;
  }

  private variable(name: string): string {
    if (name === '?') return String(this.lastCode);
    return this.env.get(name) ?? '';
  }

  /** Splits a script into words and operators, expanding $VAR, ${VAR} and $? outside single quotes. */
  private tokenize(source: string): Token[] {
    const tokens: Token[] = [];
    let i = 0;
    let word = '';
    let inWord = false;
    const end = (): void => {
      if (inWord) tokens.push({ kind: 'word', word });
      word = '';
      inWord = false;
    };
    const dollar = (): string => {
      // at source[i] === '$'
      const rest = source.slice(i + 1);
      let m: RegExpExecArray | null;
      if ((m = /^\{([A-Za-z_][A-Za-z0-9_]*|\?)\}/.exec(rest)) || (m = /^([A-Za-z_][A-Za-z0-9_]*|\?)/.exec(rest))) {
        i += 1 + m[0].length;
        return this.variable(m[1]!);
      }
      i++;
      return '$';
    };
    while (i < source.length) {
      const c = source[i]!;
      if (c === '#' && !inWord) {
        while (i < source.length && source[i] !== '\n') i++;
      } else if (c === ' ' || c === '\t') {
        end();
        i++;
      } else if (c === '\n' || c === ';') {
        end();
        tokens.push({ kind: 'op', op: ';' });
        i++;
      } else if (c === '&' && source[i + 1] === '&') {
        end();
        tokens.push({ kind: 'op', op: '&&' });
        i += 2;
      } else if (c === '|' && source[i + 1] === '|') {
        end();
        tokens.push({ kind: 'op', op: '||' });
        i += 2;
      } else if (c === '|' || c === '>' || c === '<') {
        end();
        tokens.push({ kind: 'op', op: c });
        i++;
      } else if (c === "'") {
        const close = source.indexOf("'", i + 1);
        if (close < 0) throw new Error('unterminated quoted string');
        word += source.slice(i + 1, close);
        inWord = true;
        i = close + 1;
      } else if (c === '"') {
        inWord = true;
        i++;
        while (i < source.length && source[i] !== '"') {
          if (source[i] === '\\' && i + 1 < source.length && '"\\$`'.includes(source[i + 1]!)) {
            word += source[i + 1];
            i += 2;
          } else if (source[i] === '$') word += dollar();
          else word += source[i++];
        }
        if (source[i] !== '"') throw new Error('unterminated quoted string');
        i++;
      } else if (c === '\\' && i + 1 < source.length) {
        word += source[i + 1];
        inWord = true;
        i += 2;
      } else if (c === '$') {
        word += dollar();
        inWord = true;
      } else {
        word += c;
        inWord = true;
        i++;
      }
    }
    end();
    return tokens;
  }
}

/** Runs `argv` in a container with the given environment and filesystem; resolves to the exit code. */
export function runInContainer(argv: string[], ctx: ShellContext): Promise<number> {
  return new Shell({ ...ctx, env: new Map(ctx.env) }).run(argv);
}
