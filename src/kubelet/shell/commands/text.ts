import { posix } from 'node:path';
import { CLASSES } from '../glob.js';
import { InputTooLarge, Reader } from '../io.js';
import { complain, describe, getopt, resolvePath, type Proc, type Utility } from '../proc.js';

/**
 * The text utilities of a small image (busybox's, with GNU coreutils' messages): they read stdin or files as
 * streams, line by line where they can, so a pipeline fed by a client typing answers each line as it comes.
 */

/** The inputs named by operands (`-` is stdin), each as a Reader, or an error printed for a missing file. */
async function* inputs(
  p: Proc,
  operands: string[],
): AsyncGenerator<{ name: string; reader: Reader } | { error: true }> {
  if (operands.length === 0) {
    yield { name: '-', reader: p.stdin };
    return;
  }
  for (const name of operands) {
    if (name === '-') {
      yield { name, reader: p.stdin };
      continue;
    }
    try {
      const data = p.fs.read(resolvePath(p, name));
      yield { name, reader: readerOf(data) };
    } catch (err) {
      await complain(p, describe(err, name));
      yield { error: true };
    }
  }
}

/** A Reader over bytes already in memory (a file's content). */
export function readerOf(data: Buffer): Reader {
  let left: Buffer | undefined = data.length > 0 ? data : undefined;
  return new Reader({
    read: async () => {
      const chunk = left;
      left = undefined;
      return chunk;
    },
  });
}

async function usage(p: Proc, error: string): Promise<number> {
  await complain(p, error);
  return p.argv[0] === 'grep' ? 2 : 1;
}

const cat: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'nuAvetsbE');
  if ('error' in o) return usage(p, o.error);
  const number = o.opts.some(([f]) => f === 'n');
  let code = 0;
  let n = 0;
  for await (const input of inputs(p, o.operands)) {
    if ('error' in input) {
      code = 1;
      continue;
    }
    if (!number) {
      for (let chunk = await input.reader.chunk(); chunk !== undefined; chunk = await input.reader.chunk())
        await p.stdout.write(chunk);
      continue;
    }
    for await (const line of input.reader.lines()) await p.stdout.write(`${String(++n).padStart(6)}\t${line}\n`);
  }
  return code;
};

function count(text: string | undefined): number | undefined {
  if (text === undefined || !/^[+-]?\d+$/.test(text)) return undefined;
  return Number(text);
}

/** head and tail: -n N (tail: +N from line N), -c N, -N, several files with ==> name <== headers. */
function headTail(head: boolean): Utility {
  return async (p) => {
    const args = p.argv.slice(1).map((a) => (/^-\d+$/.test(a) ? `-n${a.slice(1)}` : a));
    const o = getopt(args, 'qvf', 'nc');
    if ('error' in o) return usage(p, o.error);
    let lines = 10;
    let bytes: number | undefined;
    let fromStart = false;
    let follow = false;
    for (const [flag, value] of o.opts) {
      if (flag === 'f') follow = true;
      if (flag !== 'n' && flag !== 'c') continue;
      const n = count(value);
      if (n === undefined) {
        await complain(p, `invalid number of ${flag === 'n' ? 'lines' : 'bytes'}: '${value}'`);
        return 1;
      }
      fromStart = !head && value!.startsWith('+');
      if (flag === 'n') lines = Math.abs(n);
      else bytes = Math.abs(n);
    }
    let code = 0;
    let first = true;
    const many = o.operands.length > 1;
    for await (const input of inputs(p, o.operands)) {
      if ('error' in input) {
        code = 1;
        continue;
      }
      if (many)
        await p.stdout.write(`${first ? '' : '\n'}==> ${input.name === '-' ? 'standard input' : input.name} <==\n`);
      first = false;
      if (bytes !== undefined) {
        const all = await input.reader.all();
        const part = head
          ? all.subarray(0, bytes)
          : fromStart
            ? all.subarray(Math.max(0, bytes - 1))
            : all.subarray(Math.max(0, all.length - bytes));
        await p.stdout.write(part);
        continue;
      }
      if (head) {
        let left = lines;
        for await (const line of left > 0 ? input.reader.lines() : []) {
          await p.stdout.write(`${line}\n`);
          if (--left <= 0) break;
        }
        continue;
      }
      if (fromStart) {
        let at = 0;
        for await (const line of input.reader.lines()) if (++at >= lines) await p.stdout.write(`${line}\n`);
        continue;
      }
      const kept: string[] = [];
      for await (const line of input.reader.lines()) {
        kept.push(line);
        if (kept.length > lines) kept.shift();
      }
      for (const line of kept) await p.stdout.write(`${line}\n`);
    }
    // tail -f: the files do not grow (nothing else writes to them), so it waits until interrupted
    if (follow && !head)
      await new Promise<void>((resolve) => p.signal.addEventListener('abort', () => resolve(), { once: true }));
    return code;
  };
}

const wc: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'lwcmL');
  if ('error' in o) return usage(p, o.error);
  const flags = new Set(o.opts.map(([f]) => f));
  const show = flags.size === 0 ? ['l', 'w', 'c'] : ['l', 'w', 'm', 'c', 'L'].filter((f) => flags.has(f));
  const total = { l: 0, w: 0, c: 0, m: 0, L: 0 };
  const rows: Array<{ counts: Record<string, number>; name: string }> = [];
  let code = 0;
  for await (const input of inputs(p, o.operands)) {
    if ('error' in input) {
      code = 1;
      continue;
    }
    const counts = { l: 0, w: 0, c: 0, m: 0, L: 0 };
    let inWord = false;
    for (let chunk = await input.reader.chunk(); chunk !== undefined; chunk = await input.reader.chunk()) {
      counts.c += chunk.length;
      const text = chunk.toString('utf8');
      counts.m += [...text].length;
      for (const ch of text) {
        if (ch === '\n') counts.l++;
        const space = /\s/.test(ch);
        if (!space && !inWord) counts.w++;
        inWord = !space;
      }
      for (const line of text.split('\n')) counts.L = Math.max(counts.L, line.length);
    }
    for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += counts[k];
    rows.push({ counts, name: input.name === '-' ? '' : input.name });
  }
  if (rows.length > 1) rows.push({ counts: total, name: 'total' });
  const width =
    rows.length === 1 && rows[0]!.name === ''
      ? 0
      : Math.max(...rows.flatMap((r) => show.map((f) => String(r.counts[f]).length)));
  for (const row of rows) {
    const cols = show.map((f) => String(row.counts[f]).padStart(width));
    await p.stdout.write(`${cols.join(' ')}${row.name ? ` ${row.name}` : ''}\n`);
  }
  return code;
};

/** A basic regular expression (grep's default) as a JavaScript one: \( \) \{ \} \| \+ \? are the operators. */
export function basicToExtended(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '\\' && i + 1 < pattern.length) {
      const n = pattern[++i]!;
      out += '(){}|+?'.includes(n) ? n : `\\${n}`;
    } else if ('(){}|+?'.includes(c)) out += `\\${c}`;
    else out += c;
  }
  return out;
}

/** POSIX bracket classes ([[:digit:]]) in JavaScript's terms. */
function posixClasses(pattern: string): string {
  return pattern.replace(/\[:(\w+):\]/g, (m, name: string) => CLASSES[name] ?? m);
}

const grep: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'ivcnlLqsEFwxohHrRz', 'emA');
  if ('error' in o) return usage(p, `${o.error}\nUsage: grep [OPTION]... PATTERNS [FILE]...`);
  const f = new Set(o.opts.map(([x]) => x));
  const patterns = o.opts.filter(([x]) => x === 'e').map(([, v]) => v!);
  const operands = [...o.operands];
  if (patterns.length === 0) {
    const first = operands.shift();
    if (first === undefined) {
      await p.stderr.write("Usage: grep [OPTION]... PATTERNS [FILE]...\nTry 'grep --help' for more information.\n");
      return 2;
    }
    patterns.push(...first.split('\n'));
  }
  const max = o.opts.find(([x]) => x === 'm')?.[1];
  const limit = max === undefined ? Infinity : Number(max);
  let re: RegExp;
  try {
    const sources = patterns.map((pat) => {
      let s = f.has('F')
        ? pat.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
        : posixClasses(f.has('E') ? pat : basicToExtended(pat));
      if (f.has('w')) s = `(?<![\\w])(?:${s})(?![\\w])`;
      if (f.has('x')) s = `^(?:${s})$`;
      return s;
    });
    re = new RegExp(sources.map((s) => `(?:${s})`).join('|'), f.has('i') ? 'gi' : 'g');
  } catch {
    await p.stderr.write(`grep: Invalid regular expression\n`);
    return 2;
  }
  const withName = f.has('H') || (!f.has('h') && operands.length > 1);
  let matched = false;
  let code = 0;
  for await (const input of inputs(p, operands)) {
    if ('error' in input) {
      code = 2;
      continue;
    }
    const label = input.name === '-' ? '(standard input)' : input.name;
    let n = 0;
    let hits = 0;
    for await (const line of input.reader.lines()) {
      n++;
      re.lastIndex = 0;
      const hit = re.test(line) !== f.has('v');
      if (!hit) continue;
      matched = true;
      hits++;
      if (f.has('q')) return 0;
      if (f.has('l') || f.has('c') || f.has('L')) {
        if (hits >= limit) break;
        continue;
      }
      const prefix = `${withName ? `${label}:` : ''}${f.has('n') ? `${n}:` : ''}`;
      if (f.has('o') && !f.has('v')) {
        re.lastIndex = 0;
        for (const m of line.matchAll(re)) if (m[0] !== '') await p.stdout.write(`${prefix}${m[0]}\n`);
      } else await p.stdout.write(`${prefix}${line}\n`);
      if (hits >= limit) break;
    }
    if (f.has('c')) await p.stdout.write(`${withName ? `${label}:` : ''}${hits}\n`);
    if (f.has('l') && hits > 0) await p.stdout.write(`${label}\n`);
    if (f.has('L') && hits === 0) await p.stdout.write(`${label}\n`);
  }
  if (code !== 0 && !f.has('s')) return 2;
  return matched ? 0 : 1;
};

const seq: Utility = async (p) => {
  const args = p.argv.slice(1);
  let separator = '\n';
  let equalWidth = false;
  const nums: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-s') separator = args[++i] ?? '';
    else if (a.startsWith('-s') && a.length > 2) separator = a.slice(2);
    else if (a === '-w') equalWidth = true;
    else nums.push(a);
  }
  if (nums.length === 0 || nums.length > 3) {
    await complain(p, nums.length === 0 ? 'missing operand' : `extra operand '${nums[3]}'`);
    return 1;
  }
  for (const n of nums)
    if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(n)) {
      await complain(p, `invalid floating point argument: '${n}'`);
      return 1;
    }
  const [first, step, last] =
    nums.length === 1
      ? ['1', '1', nums[0]!]
      : nums.length === 2
        ? [nums[0]!, '1', nums[1]!]
        : [nums[0]!, nums[1]!, nums[2]!];
  const decimals = Math.max(...[first, step].map((n) => (n.includes('.') ? n.split('.')[1]!.length : 0)));
  const a = Number(first);
  const d = Number(step);
  const b = Number(last);
  if (d === 0) {
    await complain(p, `invalid Zero increment value: '${step}'`);
    return 1;
  }
  const width = equalWidth ? Math.max(a.toFixed(decimals).length, b.toFixed(decimals).length) : 0;
  let out = '';
  let wrote = false;
  for (let i = 0; ; i++) {
    const v = a + i * d;
    if (d > 0 ? v > b + 1e-12 : v < b - 1e-12) break;
    if (p.signal.aborted) return 130;
    const text = v.toFixed(decimals);
    out += `${wrote ? separator : ''}${equalWidth ? text.padStart(width, '0') : text}`;
    wrote = true;
    if (out.length >= 4096) {
      await p.stdout.write(out);
      out = '';
    }
  }
  if (wrote) out += '\n';
  if (out) await p.stdout.write(out);
  return 0;
};

const yes: Utility = async (p) => {
  const line = `${p.argv.length > 1 ? p.argv.slice(1).join(' ') : 'y'}\n`;
  const block = line.repeat(Math.max(1, Math.floor(4096 / line.length)));
  while (!p.signal.aborted) await p.stdout.write(block);
  return 130;
};

const tee: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'ai');
  if ('error' in o) return usage(p, o.error);
  const append = o.opts.some(([f]) => f === 'a');
  let code = 0;
  const files: string[] = [];
  for (const name of o.operands) {
    const path = resolvePath(p, name);
    try {
      if (!append || !p.fs.stat(path)) p.fs.write(path, '');
      files.push(path);
    } catch (err) {
      await complain(p, describe(err, name));
      code = 1;
    }
  }
  for (let chunk = await p.stdin.chunk(); chunk !== undefined; chunk = await p.stdin.chunk()) {
    for (const file of files) p.fs.write(file, chunk, { append: true });
    await p.stdout.write(chunk);
  }
  return code;
};

/** What `sort` holds in memory at most (it has no temporary files to spill to). */
const SORT_LIMIT = 64 * 1024 * 1024;

const sort: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'rnufbhV', 'ktoS');
  if ('error' in o) return usage(p, o.error);
  const f = new Set(o.opts.map(([x]) => x));
  const key = o.opts.find(([x]) => x === 'k')?.[1];
  const sep = o.opts.find(([x]) => x === 't')?.[1];
  const field = key === undefined ? undefined : Number.parseInt(key, 10);
  const lines: string[] = [];
  let code = 0;
  let size = 0;
  for await (const input of inputs(p, o.operands)) {
    if ('error' in input) code = 2;
    else
      for await (const line of input.reader.lines()) {
        size += line.length + 1;
        if (size > SORT_LIMIT) throw new InputTooLarge(SORT_LIMIT);
        lines.push(line);
      }
  }
  const keyOf = (line: string): string => {
    if (field === undefined) return line;
    const parts = sep === undefined ? line.trim().split(/\s+/) : line.split(sep);
    return parts.slice(field - 1).join(sep ?? ' ');
  };
  const compare = (x: string, y: string): number => {
    let a = keyOf(x);
    let b = keyOf(y);
    if (f.has('f')) {
      a = a.toLowerCase();
      b = b.toLowerCase();
    }
    if (f.has('n') || f.has('h')) {
      const d = (Number.parseFloat(a) || 0) - (Number.parseFloat(b) || 0);
      if (d !== 0) return d;
    }
    return a < b ? -1 : a > b ? 1 : 0;
  };
  lines.sort(compare);
  if (f.has('r')) lines.reverse();
  let last: string | undefined;
  const out = o.opts.find(([x]) => x === 'o')?.[1];
  let text = '';
  for (const line of lines) {
    if (f.has('u') && last !== undefined && compare(last, line) === 0) continue;
    last = line;
    text += `${line}\n`;
  }
  if (out !== undefined) p.fs.write(resolvePath(p, out), text);
  else await p.stdout.write(text);
  return code;
};

const uniq: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'cdui');
  if ('error' in o) return usage(p, o.error);
  const f = new Set(o.opts.map(([x]) => x));
  let prev: string | undefined;
  let n = 0;
  const flush = async (): Promise<void> => {
    if (prev === undefined) return;
    if ((f.has('d') && n < 2) || (f.has('u') && n > 1)) return;
    await p.stdout.write(`${f.has('c') ? `${String(n).padStart(7)} ` : ''}${prev}\n`);
  };
  for await (const input of inputs(p, o.operands.slice(0, 1))) {
    if ('error' in input) return 1;
    for await (const line of input.reader.lines()) {
      const same = prev !== undefined && (f.has('i') ? prev.toLowerCase() === line.toLowerCase() : prev === line);
      if (same) n++;
      else {
        await flush();
        prev = line;
        n = 1;
      }
    }
  }
  await flush();
  return 0;
};

/** tr's SET: ranges (a-z), classes ([:upper:]) and escapes, expanded to its characters. */
function trSet(set: string): string[] {
  const s = posixClasses(set).replace(/\\n/g, '\n').replace(/\\t/g, '\t').replace(/\\r/g, '\r').replace(/\\\\/g, '\\');
  const out: string[] = [];
  const chars = [...s];
  for (let i = 0; i < chars.length; i++) {
    if (chars[i + 1] === '-' && i + 2 < chars.length) {
      const from = chars[i]!.codePointAt(0)!;
      const to = chars[i + 2]!.codePointAt(0)!;
      for (let c = from; c <= to; c++) out.push(String.fromCodePoint(c));
      i += 2;
    } else out.push(chars[i]!);
  }
  return out;
}

const tr: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'dscC');
  if ('error' in o) return usage(p, o.error);
  const f = new Set(o.opts.map(([x]) => x));
  const [a, b] = o.operands;
  if (a === undefined || (!f.has('d') && !f.has('s') && b === undefined)) {
    await complain(p, a === undefined ? 'missing operand' : `missing operand after '${a}'`);
    return 1;
  }
  const from = trSet(a);
  const to = b === undefined ? [] : trSet(b);
  const map = new Map<string, string>();
  if (!f.has('d')) from.forEach((c, i) => map.set(c, to[Math.min(i, to.length - 1)] ?? c));
  const squeeze = new Set(f.has('d') ? to : f.has('s') && b === undefined ? from : to);
  const drop = new Set(f.has('d') ? from : []);
  let last = '';
  for (let chunk = await p.stdin.chunk(); chunk !== undefined; chunk = await p.stdin.chunk()) {
    let out = '';
    for (const c of chunk.toString('utf8')) {
      if (drop.has(c)) continue;
      const m = map.get(c) ?? c;
      if (f.has('s') && m === last && squeeze.has(m)) continue;
      out += m;
      last = m;
    }
    await p.stdout.write(out);
  }
  return 0;
};

/** cut's LIST: 1,3-5,7- as a test on 1-based positions. */
function ranges(list: string): ((n: number) => boolean) | undefined {
  const parts = list.split(',').map((r) => {
    const m = /^(\d*)(-?)(\d*)$/.exec(r);
    if (!m || (m[1] === '' && m[3] === '')) return undefined;
    const lo = m[1] === '' ? 1 : Number(m[1]);
    const hi = m[2] === '' ? lo : m[3] === '' ? Infinity : Number(m[3]);
    return [lo, hi] as const;
  });
  if (parts.some((x) => x === undefined)) return undefined;
  return (n) => parts.some((r) => n >= r![0] && n <= r![1]);
}

const cut: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 's', 'dfcb');
  if ('error' in o) return usage(p, o.error);
  const delim = o.opts.find(([x]) => x === 'd')?.[1] ?? '\t';
  const fields = o.opts.find(([x]) => x === 'f')?.[1];
  const chars = o.opts.find(([x]) => x === 'c' || x === 'b')?.[1];
  const list = fields ?? chars;
  const pick = list === undefined ? undefined : ranges(list);
  if (!pick) {
    await complain(
      p,
      list === undefined ? 'you must specify a list of bytes, characters, or fields' : `invalid field range`,
    );
    return 1;
  }
  for await (const input of inputs(p, o.operands)) {
    if ('error' in input) continue;
    for await (const line of input.reader.lines()) {
      if (fields !== undefined) {
        if (!line.includes(delim)) {
          if (!o.opts.some(([x]) => x === 's')) await p.stdout.write(`${line}\n`);
          continue;
        }
        await p.stdout.write(
          `${line
            .split(delim)
            .filter((_, i) => pick(i + 1))
            .join(delim)}\n`,
        );
      } else await p.stdout.write(`${[...line].filter((_, i) => pick(i + 1)).join('')}\n`);
    }
  }
  return 0;
};

const basename: Utility = async (p) => {
  const [path, suffix] = p.argv.slice(1);
  if (path === undefined) return usage(p, 'missing operand');
  let base = path === '/' ? '/' : posix.basename(path.replace(/\/+$/, '') || '/');
  if (suffix && base.endsWith(suffix) && base !== suffix) base = base.slice(0, -suffix.length);
  await p.stdout.write(`${base}\n`);
  return 0;
};

const dirname: Utility = async (p) => {
  const path = p.argv[1];
  if (path === undefined) return usage(p, 'missing operand');
  await p.stdout.write(`${posix.dirname(path.replace(/(.)\/+$/, '$1'))}\n`);
  return 0;
};

export const TEXT_UTILITIES: Record<string, Utility> = {
  cat,
  head: headTail(true),
  tail: headTail(false),
  wc,
  grep,
  egrep: (p) => grep({ ...p, argv: ['grep', '-E', ...p.argv.slice(1)] }),
  fgrep: (p) => grep({ ...p, argv: ['grep', '-F', ...p.argv.slice(1)] }),
  seq,
  yes,
  tee,
  sort,
  uniq,
  tr,
  cut,
  basename,
  dirname,
};
