import { posix } from 'node:path';
import type { Clock } from '../../clock/clock.js';
import { FsError, type ContainerFs } from '../filesystem.js';
import type { Reader, Writer } from './io.js';

/** What a command sees when it runs: its arguments, streams, environment, working directory and files. */
export interface Proc {
  /** argv[0] is the name it was called by. */
  argv: string[];
  stdin: Reader;
  stdout: Writer;
  stderr: Writer;
  /** The exported variables (the process environment). */
  env: Map<string, string>;
  cwd: string;
  fs: ContainerFs;
  clock: Clock;
  /** When the container started (cluster time), if known. */
  startedAt?: number;
  /** Aborted when the command is interrupted (Ctrl-C on a terminal) or the client goes away. */
  signal: AbortSignal;
  /** Runs another command with this one's streams (`env CMD`, `sh -c`, `timeout`); resolves to its exit code. */
  run(argv: string[], overrides?: Partial<Pick<Proc, 'env' | 'stdin' | 'stdout' | 'stderr'>>): Promise<number>;
  hostname(): string;
}

/** A command: resolves to its exit status. */
export type Utility = (p: Proc) => Promise<number> | number;

/** An absolute path for `path` as the command gives it (relative to its working directory). */
export function resolvePath(p: Pick<Proc, 'cwd'>, path: string): string {
  return posix.resolve(p.cwd, path);
}

/** Writes `name: text` to stderr, as the coreutils report errors. */
export async function complain(p: Proc, text: string): Promise<void> {
  await p.stderr.write(`${p.argv[0] ? posix.basename(p.argv[0]) : 'sh'}: ${text}\n`);
}

/** `name: 'path': strerror`, or the message of any other error. */
export function describe(err: unknown, path: string, quote = false): string {
  if (err instanceof FsError) return `${quote ? `'${path}'` : path}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

/** Sleeps on the cluster clock; ends early (false) when the command is interrupted. */
export function sleepOn(clock: Clock, ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      timer.cancel();
      resolve(false);
    };
    const timer = clock.setTimer(ms, () => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Splits short options the way getopt does: `-xvf file` is x, v, f=file when f takes a value; `--` ends options.
 * Returns the flags seen (in order, with values), the operands, or an error text for an unknown option.
 */
export function getopt(
  args: string[],
  flags: string,
  withValue = '',
): { opts: Array<[string, string | undefined]>; operands: string[] } | { error: string } {
  const opts: Array<[string, string | undefined]> = [];
  const operands: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') {
      operands.push(...args.slice(i + 1));
      break;
    }
    if (!a.startsWith('-') || a === '-') {
      operands.push(a);
      continue;
    }
    for (let j = 1; j < a.length; j++) {
      const c = a[j]!;
      if (withValue.includes(c)) {
        const value = j + 1 < a.length ? a.slice(j + 1) : args[++i];
        if (value === undefined) return { error: `option requires an argument -- '${c}'` };
        opts.push([c, value]);
        break;
      }
      if (!flags.includes(c)) return { error: `invalid option -- '${c}'` };
      opts.push([c, undefined]);
    }
  }
  return { opts, operands };
}
