import { posix } from 'node:path';
import { FsError, type Stat } from '../../filesystem.js';
import { complain, describe, getopt, resolvePath, type Proc, type Utility } from '../proc.js';

/** The file utilities over the container's files, with GNU coreutils' messages (ASCII quotes). */

async function usage(p: Proc, error: string): Promise<number> {
  await complain(p, `${error}\nTry '${p.argv[0]} --help' for more information.`);
  return 1;
}

function modeString(st: Stat): string {
  const bits = 'rwxrwxrwx';
  let s = st.kind === 'dir' ? 'd' : '-';
  for (let i = 0; i < 9; i++) s += st.mode & (1 << (8 - i)) ? bits[i] : '-';
  if (st.mode & 0o1000) s = `${s.slice(0, 9)}${st.mode & 1 ? 't' : 'T'}`;
  return s;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** `ls -l`'s date: the time of day for the last six months, else the year. */
function lsDate(mtime: number, now: number): string {
  const d = new Date(mtime);
  const day = `${MONTHS[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2)}`;
  const recent = now - mtime < 182 * 24 * 3600 * 1000 && mtime <= now + 3600 * 1000;
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${day} ${recent ? `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}` : String(d.getUTCFullYear()).padStart(5)}`;
}

function human(size: number): string {
  if (size < 1024) return String(size);
  const units = ['K', 'M', 'G', 'T'];
  let v = size;
  let u = -1;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v < 10 ? Math.ceil(v * 10) / 10 : Math.ceil(v)}${units[u]}`;
}

const ls: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'laA1dRhrtSFpi');
  if ('error' in o) return usage(p, o.error);
  const f = new Set(o.opts.map(([x]) => x));
  const targets = o.operands.length > 0 ? o.operands : ['.'];
  let code = 0;
  const now = p.clock.now();
  const entry = (name: string, st: Stat): string => {
    const suffix = f.has('F') || f.has('p') ? (st.kind === 'dir' ? '/' : f.has('F') && st.mode & 0o111 ? '*' : '') : '';
    if (!f.has('l')) return `${name}${suffix}`;
    const size = f.has('h') ? human(st.size) : String(st.size);
    return `${modeString(st)} ${st.kind === 'dir' ? 2 : 1} root root ${size.padStart(f.has('h') ? 5 : 8)} ${lsDate(st.mtime, now)} ${name}${suffix}`;
  };
  const sorted = (dir: string, names: string[]): string[] => {
    const stats = new Map(names.map((n) => [n, p.fs.stat(posix.join(dir, n))]));
    const out = [...names];
    if (f.has('t')) out.sort((a, b) => (stats.get(b)?.mtime ?? 0) - (stats.get(a)?.mtime ?? 0) || (a < b ? -1 : 1));
    else if (f.has('S')) out.sort((a, b) => (stats.get(b)?.size ?? 0) - (stats.get(a)?.size ?? 0) || (a < b ? -1 : 1));
    if (f.has('r')) out.reverse();
    return out;
  };
  const files: string[] = [];
  const dirs: string[] = [];
  for (const target of targets) {
    const st = p.fs.stat(resolvePath(p, target));
    if (!st) {
      await complain(p, `cannot access '${target}': No such file or directory`);
      code = 2;
    } else if (st.kind === 'dir' && !f.has('d')) dirs.push(target);
    else files.push(entry(target, st));
  }
  if (files.length > 0) await p.stdout.write(`${files.join('\n')}\n`);
  const many = targets.length > 1 || f.has('R');
  let first = files.length === 0;
  const listDir = async (target: string): Promise<void> => {
    const path = resolvePath(p, target);
    let names = p.fs.list(path);
    if (!f.has('a') && !f.has('A')) names = names.filter((n) => !n.startsWith('.'));
    names = sorted(path, names);
    if (f.has('a')) names = ['.', '..', ...names];
    if (many) await p.stdout.write(`${first ? '' : '\n'}${target}:\n`);
    first = false;
    const lines: string[] = [];
    if (f.has('l')) {
      const total = names.reduce(
        (sum, n) => sum + Math.ceil((p.fs.stat(posix.join(path, n))?.size ?? 0) / 4096) * 4,
        0,
      );
      lines.push(`total ${total}`);
    }
    for (const n of names)
      lines.push(entry(n, p.fs.stat(posix.join(path, n)) ?? { kind: 'dir', size: 4096, mode: 0o755, mtime: 0 }));
    if (lines.length > 0) await p.stdout.write(`${lines.join('\n')}\n`);
    if (f.has('R'))
      for (const n of names)
        if (n !== '.' && n !== '..' && p.fs.isDir(posix.join(path, n))) await listDir(posix.join(target, n));
  };
  for (const target of dirs) await listDir(target);
  return code;
};

function mode(text: string | undefined, fallback: number): number | undefined {
  if (text === undefined) return fallback;
  return /^[0-7]{1,4}$/.test(text) ? Number.parseInt(text, 8) : undefined;
}

const mkdir: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'pv', 'm');
  if ('error' in o) return usage(p, o.error);
  if (o.operands.length === 0) return usage(p, 'missing operand');
  const parents = o.opts.some(([x]) => x === 'p');
  const m = mode(o.opts.find(([x]) => x === 'm')?.[1], 0o755);
  if (m === undefined) return usage(p, 'invalid mode');
  let code = 0;
  for (const dir of o.operands) {
    try {
      p.fs.mkdir(resolvePath(p, dir), { parents, mode: m });
      if (o.opts.some(([x]) => x === 'v')) await p.stdout.write(`mkdir: created directory '${dir}'\n`);
    } catch (err) {
      await complain(p, `cannot create directory ${describe(err, dir, true)}`);
      code = 1;
    }
  }
  return code;
};

const rmdir: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'p');
  if ('error' in o) return usage(p, o.error);
  let code = 0;
  for (const dir of o.operands) {
    try {
      p.fs.remove(resolvePath(p, dir), { dirOnly: true });
    } catch (err) {
      await complain(p, `failed to remove ${describe(err, dir, true)}`);
      code = 1;
    }
  }
  return code;
};

const rm: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'rRfidv');
  if ('error' in o) return usage(p, o.error);
  const f = new Set(o.opts.map(([x]) => x));
  if (o.operands.length === 0 && !f.has('f')) return usage(p, 'missing operand');
  let code = 0;
  for (const target of o.operands) {
    const path = resolvePath(p, target);
    const st = p.fs.stat(path);
    if (!st) {
      if (!f.has('f')) {
        await complain(p, `cannot remove '${target}': No such file or directory`);
        code = 1;
      }
      continue;
    }
    if (path === '/' || posix.basename(target) === '.' || posix.basename(target) === '..') {
      await complain(
        p,
        path === '/'
          ? "it is dangerous to operate recursively on '/'"
          : `refusing to remove '.' or '..' directory: skipping '${target}'`,
      );
      code = 1;
      continue;
    }
    try {
      if (st.kind === 'dir' && !f.has('r') && !f.has('R')) {
        if (!f.has('d')) throw new FsError('EISDIR', path);
        p.fs.remove(path, { dirOnly: true });
      } else p.fs.remove(path, { recursive: true });
      if (f.has('v')) await p.stdout.write(`removed '${target}'\n`);
    } catch (err) {
      await complain(p, `cannot remove ${describe(err, target, true)}`);
      code = 1;
    }
  }
  return code;
};

const touch: Utility = async (p) => {
  const o = getopt(p.argv.slice(1), 'camh', 'dtr');
  if ('error' in o) return usage(p, o.error);
  const noCreate = o.opts.some(([x]) => x === 'c');
  const date = o.opts.find(([x]) => x === 'd')?.[1];
  const at =
    date === undefined
      ? p.clock.now()
      : Date.parse(date.startsWith('@') ? new Date(Number(date.slice(1)) * 1000).toISOString() : date);
  if (Number.isNaN(at)) {
    await complain(p, `invalid date format '${date}'`);
    return 1;
  }
  if (o.operands.length === 0) return usage(p, 'missing file operand');
  let code = 0;
  for (const file of o.operands) {
    const path = resolvePath(p, file);
    if (noCreate && !p.fs.stat(path)) continue;
    try {
      p.fs.touch(path, at);
    } catch (err) {
      await complain(p, `cannot touch ${describe(err, file, true)}`);
      code = 1;
    }
  }
  return code;
};

/** Copies `from` to `to` (a directory tree with `recursive`). */
function copy(p: Proc, from: string, to: string, recursive: boolean, keep: boolean): void {
  const st = p.fs.stat(from);
  if (!st) throw new FsError('ENOENT', from);
  const times = keep ? { mtime: st.mtime, mode: st.mode } : {};
  if (st.kind === 'file') {
    p.fs.write(to, Buffer.from(p.fs.read(from)), times);
    return;
  }
  if (!recursive) throw new FsError('EISDIR', from);
  if (to === from || to.startsWith(`${from}/`)) throw new FsError('EINVAL', to);
  if (!p.fs.isDir(to)) p.fs.mkdir(to, times);
  for (const name of p.fs.list(from)) copy(p, posix.join(from, name), posix.join(to, name), recursive, keep);
}

function copyOrMove(move: boolean): Utility {
  return async (p) => {
    const o = getopt(p.argv.slice(1), move ? 'fivn' : 'rRafpvidn');
    if ('error' in o) return usage(p, o.error);
    const f = new Set(o.opts.map(([x]) => x));
    const recursive = move || f.has('r') || f.has('R') || f.has('a');
    const keep = move || f.has('a') || f.has('p');
    if (o.operands.length < 2)
      return usage(
        p,
        o.operands.length === 0 ? 'missing file operand' : `missing destination file operand after '${o.operands[0]}'`,
      );
    const dest = o.operands.at(-1)!;
    const sources = o.operands.slice(0, -1);
    const destPath = resolvePath(p, dest);
    const intoDir = p.fs.isDir(destPath);
    if (sources.length > 1 && !intoDir) {
      await complain(p, `target '${dest}' is not a directory`);
      return 1;
    }
    let code = 0;
    for (const source of sources) {
      const from = resolvePath(p, source);
      const to = intoDir ? posix.join(destPath, posix.basename(from)) : destPath;
      try {
        if (!p.fs.stat(from)) throw new FsError('ENOENT', from);
        if (!recursive && p.fs.isDir(from)) {
          await complain(p, `-r not specified; omitting directory '${source}'`);
          code = 1;
          continue;
        }
        if (f.has('n') && p.fs.stat(to)) continue;
        copy(p, from, to, recursive, keep);
        if (move) p.fs.remove(from, { recursive: true });
        if (f.has('v'))
          await p.stdout.write(`'${source}' -> '${intoDir ? posix.join(dest, posix.basename(from)) : dest}'\n`);
      } catch (err) {
        const what =
          err instanceof FsError && err.path === from
            ? `cannot stat '${source}'`
            : `cannot ${move ? 'move' : 'create'} '${to}'`;
        await complain(p, `${what}: ${err instanceof Error ? err.message : String(err)}`);
        code = 1;
      }
    }
    return code;
  };
}

const chmod: Utility = async (p) => {
  const o = getopt(
    p.argv.slice(1).filter((a) => !/^-[rwxXst]+$/.test(a) || a === '-R'),
    'Rvf',
  );
  if ('error' in o) return usage(p, o.error);
  const [spec, ...files] = o.operands;
  if (spec === undefined || files.length === 0)
    return usage(p, spec === undefined ? 'missing operand' : `missing operand after '${spec}'`);
  const recursive = o.opts.some(([x]) => x === 'R');
  let code = 0;
  const apply = (path: string): void => {
    const st = p.fs.stat(path);
    if (!st) throw new FsError('ENOENT', path);
    p.fs.chmod(path, symbolicMode(spec, st.mode, st.kind === 'dir'));
    if (recursive && st.kind === 'dir') for (const n of p.fs.list(path)) apply(posix.join(path, n));
  };
  for (const file of files) {
    try {
      if (!/^[0-7]{1,4}$/.test(spec) && !/^[ugoa]*[-+=][rwxXst]*(,[ugoa]*[-+=][rwxXst]*)*$/.test(spec)) {
        await complain(p, `invalid mode: '${spec}'`);
        return 1;
      }
      apply(resolvePath(p, file));
    } catch (err) {
      await complain(p, `cannot access ${describe(err, file, true)}`);
      code = 1;
    }
  }
  return code;
};

/** chmod's MODE: octal, or symbolic (u+x, go-w, a=r, +x). */
export function symbolicMode(spec: string, current: number, dir: boolean): number {
  if (/^[0-7]{1,4}$/.test(spec)) return Number.parseInt(spec, 8);
  let m = current;
  for (const clause of spec.split(',')) {
    const match = /^([ugoa]*)([-+=])([rwxXst]*)$/.exec(clause);
    if (!match) continue;
    const who = match[1] === '' || match[1]!.includes('a') ? 'ugo' : match[1]!;
    let bits = 0;
    for (const c of match[3]!) {
      const shift = (w: string): number => (w === 'u' ? 6 : w === 'g' ? 3 : 0);
      for (const w of who) {
        if (c === 'r') bits |= 4 << shift(w);
        if (c === 'w') bits |= 2 << shift(w);
        if (c === 'x' || (c === 'X' && (dir || current & 0o111))) bits |= 1 << shift(w);
      }
      if (c === 's') bits |= (who.includes('u') ? 0o4000 : 0) | (who.includes('g') ? 0o2000 : 0);
      if (c === 't') bits |= 0o1000;
    }
    if (match[2] === '+') m |= bits;
    else if (match[2] === '-') m &= ~bits;
    else {
      let mask = 0;
      for (const w of who) mask |= 7 << (w === 'u' ? 6 : w === 'g' ? 3 : 0);
      m = (m & ~mask) | bits;
    }
  }
  return m;
}

export const FILE_UTILITIES: Record<string, Utility> = {
  ls,
  mkdir,
  rmdir,
  rm,
  touch,
  cp: copyOrMove(false),
  mv: copyOrMove(true),
  chmod,
};
