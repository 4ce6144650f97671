import { resolvePath, type Proc } from '../proc.js';

/**
 * `test` and `[`: POSIX's rules by argument count (so `[ -n ]` is true and `[ "$x" = = ]` works), then -a, -o,
 * `!` and parentheses for longer expressions. File tests look at the container's files; every file is
 * readable and writable (the shell runs as root), and executable when a mode bit says so.
 */

class TestError extends Error {}

const UNARY = new Set([
  '-e',
  '-f',
  '-d',
  '-s',
  '-r',
  '-w',
  '-x',
  '-n',
  '-z',
  '-h',
  '-L',
  '-b',
  '-c',
  '-p',
  '-S',
  '-t',
  '-g',
  '-u',
  '-k',
  '-O',
  '-G',
]);
const BINARY = new Set(['=', '==', '!=', '<', '>', '-eq', '-ne', '-lt', '-le', '-gt', '-ge', '-nt', '-ot', '-ef']);

function integer(text: string): bigint {
  const t = text.trim();
  if (!/^[+-]?\d+$/.test(t)) throw new TestError(`${text}: integer expression expected`);
  return BigInt(t);
}

function unary(p: Proc, op: string, operand: string): boolean {
  if (op === '-n') return operand !== '';
  if (op === '-z') return operand === '';
  if (op === '-t') return false;
  const st = operand === '' ? undefined : p.fs.stat(resolvePath(p, operand));
  switch (op) {
    case '-e':
    case '-r':
    case '-w':
      return st !== undefined;
    case '-f':
      return st?.kind === 'file';
    case '-d':
      return st?.kind === 'dir';
    case '-s':
      return st !== undefined && st.kind === 'file' ? st.size > 0 : st !== undefined;
    case '-x':
      return st !== undefined && (st.kind === 'dir' || (st.mode & 0o111) !== 0);
    case '-O':
    case '-G':
      return st !== undefined;
    case '-u':
      return st !== undefined && (st.mode & 0o4000) !== 0;
    case '-g':
      return st !== undefined && (st.mode & 0o2000) !== 0;
    case '-k':
      return st !== undefined && (st.mode & 0o1000) !== 0;
    default:
      return false; // -h -L -b -c -p -S: there are no links, devices, pipes or sockets among the files
  }
}

function binary(p: Proc, left: string, op: string, right: string): boolean {
  switch (op) {
    case '=':
    case '==':
      return left === right;
    case '!=':
      return left !== right;
    case '<':
      return left < right;
    case '>':
      return left > right;
    case '-eq':
      return integer(left) === integer(right);
    case '-ne':
      return integer(left) !== integer(right);
    case '-lt':
      return integer(left) < integer(right);
    case '-le':
      return integer(left) <= integer(right);
    case '-gt':
      return integer(left) > integer(right);
    case '-ge':
      return integer(left) >= integer(right);
    case '-nt':
    case '-ot': {
      const a = p.fs.stat(resolvePath(p, left));
      const b = p.fs.stat(resolvePath(p, right));
      if (op === '-nt') return a !== undefined && (b === undefined || a.mtime > b.mtime);
      return b !== undefined && (a === undefined || a.mtime < b.mtime);
    }
    default:
      return resolvePath(p, left) === resolvePath(p, right) && p.fs.stat(resolvePath(p, left)) !== undefined;
  }
}

/** Evaluates a test expression; throws TestError on a malformed one. */
export function evaluateTest(p: Proc, args: string[]): boolean {
  let i = 0;
  const byCount = (n: number, from: number): boolean | undefined => {
    const a = args.slice(from, from + n);
    if (n === 0) return false;
    if (n === 1) return a[0] !== '';
    if (n === 2) {
      if (a[0] === '!') return a[1] === '';
      if (UNARY.has(a[0]!)) return unary(p, a[0]!, a[1]!);
      return undefined;
    }
    if (n === 3) {
      if (BINARY.has(a[1]!)) return binary(p, a[0]!, a[1]!, a[2]!);
      if (a[1] === '-a' || a[1] === '-o') return undefined;
      if (a[0] === '!') return !byCount(2, from + 1);
      if (a[0] === '(' && a[2] === ')') return a[1] !== '';
      return undefined;
    }
    if (n === 4) {
      if (a[0] === '!') {
        const inner = byCount(3, from + 1);
        return inner === undefined ? undefined : !inner;
      }
      if (a[0] === '(' && a[3] === ')') return byCount(2, from + 1);
    }
    return undefined;
  };
  const simple = args.length <= 4 ? byCount(args.length, 0) : undefined;
  if (simple !== undefined) return simple;

  const peek = (): string | undefined => args[i];
  const or = (): boolean => {
    let v = and();
    while (peek() === '-o') {
      i++;
      const r = and();
      v = v || r;
    }
    return v;
  };
  const and = (): boolean => {
    let v = not();
    while (peek() === '-a') {
      i++;
      const r = not();
      v = v && r;
    }
    return v;
  };
  const not = (): boolean => {
    if (peek() === '!') {
      i++;
      return !not();
    }
    return primary();
  };
  const primary = (): boolean => {
    const a = args[i];
    if (a === undefined) throw new TestError('argument expected');
    if (a === '(') {
      i++;
      const v = or();
      if (args[i] !== ')') throw new TestError("')' expected");
      i++;
      return v;
    }
    if (BINARY.has(args[i + 1] ?? '') && args[i + 2] !== undefined) {
      i += 3;
      return binary(p, a, args[i - 2]!, args[i - 1]!);
    }
    if (UNARY.has(a) && args[i + 1] !== undefined) {
      i += 2;
      return unary(p, a, args[i - 1]!);
    }
    i++;
    return a !== '';
  };
  const v = or();
  if (i < args.length) throw new TestError(`${args[i]}: unexpected operator`);
  return v;
}

export async function test(p: Proc): Promise<number> {
  const name = p.argv[0] ?? 'test';
  let args = p.argv.slice(1);
  if (name === '[') {
    if (args.at(-1) !== ']') {
      await p.stderr.write("[: missing ']'\n");
      return 2;
    }
    args = args.slice(0, -1);
  }
  try {
    return evaluateTest(p, args) ? 0 : 1;
  } catch (err) {
    if (!(err instanceof TestError)) throw err;
    await p.stderr.write(`${name}: ${err.message}\n`);
    return 2;
  }
}
