import { posix } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import * as tarStream from 'tar-stream';
import { FsError } from '../../filesystem.js';
import { InputTooLarge } from '../io.js';
import { resolvePath, type Proc } from '../proc.js';

/**
 * GNU tar over the container's files, as `kubectl cp` drives it: `tar -xmf - -C DIR` unpacks the archive kubectl
 * streams on stdin, `tar cf - PATH` packs what kubectl then unpacks locally. Also `t` (list), `z` (gzip),
 * `v`, `O` (extract to stdout), `--no-same-owner`/`--no-same-permissions` (kubectl cp --no-preserve), files other
 * than `-`. The archive format is tar-stream's (ustar with PAX headers for long names).
 */

interface TarOptions {
  mode?: 'c' | 'x' | 't';
  file?: string;
  directory?: string;
  verbose: boolean;
  gzip: boolean;
  keepOldMtime: boolean;
  toStdout: boolean;
  samePermissions: boolean;
  operands: string[];
}

const LONG_FLAGS: Record<string, (o: TarOptions) => void> = {
  '--create': (o) => (o.mode = 'c'),
  '--extract': (o) => (o.mode = 'x'),
  '--get': (o) => (o.mode = 'x'),
  '--list': (o) => (o.mode = 't'),
  '--verbose': (o) => (o.verbose = true),
  '--gzip': (o) => (o.gzip = true),
  '--gunzip': (o) => (o.gzip = true),
  '--touch': (o) => (o.keepOldMtime = false),
  '--to-stdout': (o) => (o.toStdout = true),
  '--no-same-owner': () => undefined,
  '--same-owner': () => undefined,
  '--no-same-permissions': (o) => (o.samePermissions = false),
  '--same-permissions': (o) => (o.samePermissions = true),
  '--preserve-permissions': (o) => (o.samePermissions = true),
  '--overwrite': () => undefined,
};

function parseArgs(args: string[]): TarOptions | string {
  const o: TarOptions = {
    verbose: false,
    gzip: false,
    keepOldMtime: true,
    toStdout: false,
    samePermissions: true,
    operands: [],
  };
  const flags = (letters: string, rest: string[], at: number): number | string => {
    let used = 0;
    for (const c of letters) {
      if (c === 'c' || c === 'x' || c === 't') {
        if (o.mode && o.mode !== c)
          return "You may not specify more than one '-Acdtrux', '--delete' or  '--test-label' option";
        o.mode = c;
      } else if (c === 'f' || c === 'C') {
        const value = rest[at + used];
        if (value === undefined) return `option requires an argument -- '${c}'`;
        used++;
        if (c === 'f') o.file = value;
        else o.directory = value;
      } else if (c === 'v') o.verbose = true;
      else if (c === 'z') o.gzip = true;
      else if (c === 'm') o.keepOldMtime = false;
      else if (c === 'O') o.toStdout = true;
      else if (c === 'p') o.samePermissions = true;
      else if (c === 'o') {
        // --no-same-owner: every file is root's here anyway
      } else return `invalid option -- '${c}'`;
    }
    return used;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a : a.slice(0, eq);
      const value = eq < 0 ? undefined : a.slice(eq + 1);
      if (name === '--file' || name === '--directory') {
        const v = value ?? args[++i];
        if (v === undefined) return `option '${name}' requires an argument`;
        if (name === '--file') o.file = v;
        else o.directory = v;
      } else if (Object.hasOwn(LONG_FLAGS, name)) LONG_FLAGS[name]!(o);
      else return `unrecognized option '${a}'`;
    } else if (a.startsWith('-') && a.length > 1) {
      // -C dir, -xmf -, -f- : a value may follow in the same word
      for (let j = 1; j < a.length; j++) {
        const c = a[j]!;
        if ((c === 'f' || c === 'C') && j + 1 < a.length) {
          const r = flags(c, [a.slice(j + 1)], 0);
          if (typeof r === 'string') return r;
          break;
        }
        const r = flags(c, args, i + 1);
        if (typeof r === 'string') return r;
        i += r;
      }
    } else if (i === 0) {
      // the old style: the first word is a bundle of letters without a dash ("cf", "xzvf")
      const r = flags(a, args, 1);
      if (typeof r === 'string') return r;
      i += r;
    } else o.operands.push(a);
  }
  return o;
}

/** Member names as GNU tar stores them: relative, without leading `/` or `../`. */
function memberName(path: string): { name: string; stripped?: string } {
  let name = path.replace(/\/+/g, '/');
  if (name.length > 1) name = name.replace(/\/$/, '');
  let stripped: string | undefined;
  const lead = /^(\/|(\.\.\/)+|\.\.$)+/.exec(name);
  if (lead) {
    stripped = lead[0].startsWith('/') ? '/' : lead[0];
    name = name.slice(lead[0].length);
  }
  if (name === '' || name === '.') name = '.';
  return stripped === undefined ? { name } : { name, stripped };
}

function modeString(kind: 'file' | 'dir', mode: number): string {
  const bits = 'rwxrwxrwx';
  let s = kind === 'dir' ? 'd' : '-';
  for (let i = 0; i < 9; i++) s += mode & (1 << (8 - i)) ? bits[i] : '-';
  return s;
}

function listLine(kind: 'file' | 'dir', mode: number, size: number, mtime: number, name: string): string {
  const d = new Date(mtime);
  const pad = (n: number): string => String(n).padStart(2, '0');
  const date = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
  return `${modeString(kind, mode)} root/root ${String(size).padStart(9)} ${date} ${name}\n`;
}

const FAILURE_TAIL = 'tar: Exiting with failure status due to previous errors\n';

export async function tar(p: Proc): Promise<number> {
  const parsed = parseArgs(p.argv.slice(1));
  if (typeof parsed === 'string') {
    await p.stderr.write(`tar: ${parsed}\nTry 'tar --help' or 'tar --usage' for more information.\n`);
    return 2;
  }
  if (!parsed.mode) {
    await p.stderr.write(
      "tar: You must specify one of the '-Acdtrux', '--delete' or '--test-label' options\nTry 'tar --help' or 'tar --usage' for more information.\n",
    );
    return 2;
  }
  let cwd = p.cwd;
  if (parsed.directory !== undefined) {
    cwd = resolvePath(p, parsed.directory);
    if (!p.fs.isDir(cwd)) {
      const why = p.fs.stat(cwd) ? 'Not a directory' : 'No such file or directory';
      await p.stderr.write(
        `tar: ${parsed.directory}: Cannot ${parsed.mode === 'c' ? 'chdir' : 'open'}: ${why}\ntar: Error is not recoverable: exiting now\n`,
      );
      return 2;
    }
  }
  try {
    return parsed.mode === 'c' ? await create(p, parsed, cwd) : await extract(p, parsed, cwd);
  } catch (err) {
    if (err instanceof InputTooLarge) {
      await p.stderr.write(`tar: ${err.message}\ntar: Error is not recoverable: exiting now\n`);
      return 2;
    }
    throw err;
  }
}

async function create(p: Proc, o: TarOptions, cwd: string): Promise<number> {
  if (o.operands.length === 0) {
    await p.stderr.write(
      "tar: Cowardly refusing to create an empty archive\nTry 'tar --help' or 'tar --usage' for more information.\n",
    );
    return 2;
  }
  const pack = tarStream.pack();
  let failed = false;
  let warnedSlash = false;
  const add = async (path: string, name: string): Promise<void> => {
    const member = memberName(name);
    if (member.stripped && !warnedSlash) {
      warnedSlash = true;
      await p.stderr.write(`tar: Removing leading \`${member.stripped}' from member names\n`);
    }
    const st = p.fs.stat(path);
    if (!st) {
      await p.stderr.write(`tar: ${name}: Cannot stat: No such file or directory\n`);
      failed = true;
      return;
    }
    const header = { mode: st.mode, mtime: new Date(st.mtime), uid: 0, gid: 0, uname: 'root', gname: 'root' };
    if (st.kind === 'dir') {
      const dirName = member.name === '.' ? './' : `${member.name}/`;
      pack.entry({ ...header, name: dirName, type: 'directory' });
      if (o.verbose) await (o.file === '-' || o.file === undefined ? p.stderr : p.stdout).write(`${dirName}\n`);
      for (const child of p.fs.list(path)) await add(posix.join(path, child), `${name.replace(/\/+$/, '')}/${child}`);
    } else {
      const data = p.fs.read(path);
      pack.entry({ ...header, name: member.name, type: 'file', size: data.length }, data);
      if (o.verbose) await (o.file === '-' || o.file === undefined ? p.stderr : p.stdout).write(`${member.name}\n`);
    }
  };
  for (const operand of o.operands) await add(posix.resolve(cwd, operand), operand);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  let archive = Buffer.concat(chunks);
  if (o.gzip) archive = gzipSync(archive);
  if (o.file === undefined || o.file === '-') await p.stdout.write(archive);
  else {
    try {
      p.fs.write(resolvePath(p, o.file), archive);
    } catch (err) {
      await p.stderr.write(
        `tar: ${o.file}: Cannot open: ${(err as Error).message}\ntar: Error is not recoverable: exiting now\n`,
      );
      return 2;
    }
  }
  if (failed) await p.stderr.write(FAILURE_TAIL);
  return failed ? 2 : 0;
}

async function archiveInput(p: Proc, o: TarOptions): Promise<Buffer | string> {
  if (o.file === undefined || o.file === '-') return p.stdin.all();
  try {
    return p.fs.read(resolvePath(p, o.file));
  } catch (err) {
    return `tar: ${o.file}: Cannot open: ${(err as Error).message}\ntar: Error is not recoverable: exiting now\n`;
  }
}

async function extract(p: Proc, o: TarOptions, cwd: string): Promise<number> {
  const input = await archiveInput(p, o);
  if (typeof input === 'string') {
    await p.stderr.write(input);
    return 2;
  }
  let archive = input;
  if (o.gzip || (archive[0] === 0x1f && archive[1] === 0x8b)) {
    try {
      archive = gunzipSync(archive, { maxOutputLength: 256 * 1024 * 1024 });
    } catch {
      await p.stderr.write(
        'gzip: stdin: not in gzip format\ntar: Child returned status 1\ntar: Error is not recoverable: exiting now\n',
      );
      return 2;
    }
  }
  if (archive.length === 0) return 0; // GNU tar accepts an empty archive
  const ex = tarStream.extract();
  let failed = false;
  const wanted = o.operands.map((op) => memberName(op).name);
  const found = new Set<string>();
  const selected = (name: string): boolean =>
    wanted.length === 0 ||
    wanted.some((w) => {
      const hit = name === w || name.startsWith(`${w}/`);
      if (hit) found.add(w);
      return hit;
    });
  const done = new Promise<void>((resolve, reject) => {
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  // a broken archive fails both the entries' iteration and `done`: the first is answered, the second must not
  // become an unhandled rejection
  done.catch(() => undefined);
  ex.end(archive);
  let warnedSlash = false;
  try {
    for await (const entry of ex) {
      const header = entry.header;
      const parts: Buffer[] = [];
      for await (const chunk of entry) parts.push(chunk as Buffer);
      const member = memberName(header.name.replace(/\/+$/, ''));
      if (!selected(member.name)) continue;
      if (member.stripped && !warnedSlash) {
        warnedSlash = true;
        await p.stderr.write(`tar: Removing leading \`${member.stripped}' from member names\n`);
      }
      const kind = header.type === 'directory' ? 'dir' : 'file';
      const mode = (header.mode ?? (kind === 'dir' ? 0o755 : 0o644)) & 0o7777;
      const mtime = header.mtime?.getTime() ?? p.clock.now();
      if (o.mode === 't') {
        await p.stdout.write(
          o.verbose ? listLine(kind, mode, header.size ?? 0, mtime, header.name) : `${header.name}\n`,
        );
        continue;
      }
      if (o.verbose) await p.stdout.write(`${header.name}\n`);
      if (header.type !== 'file' && header.type !== 'contiguous-file' && header.type !== 'directory') {
        await p.stderr.write(`tar: ${member.name}: Cannot create ${header.type}: Operation not supported\n`);
        failed = true;
        continue;
      }
      if (member.name === '.' && header.type === 'directory') continue;
      if (o.toStdout) {
        if (kind === 'file') await p.stdout.write(Buffer.concat(parts));
        continue;
      }
      const target = posix.join(cwd, member.name);
      const times = o.keepOldMtime ? { mtime } : {};
      try {
        if (kind === 'dir') {
          if (!p.fs.isDir(target)) p.fs.mkdir(target, { parents: true, mode, ...times });
          else if (o.samePermissions) p.fs.chmod(target, mode);
        } else {
          const parent = posix.dirname(target);
          if (!p.fs.isDir(parent)) p.fs.mkdir(parent, { parents: true });
          if (p.fs.isDir(target)) throw new FsError('EISDIR', target);
          p.fs.write(target, Buffer.concat(parts), { mode: o.samePermissions ? mode : 0o644, ...times });
        }
      } catch (err) {
        if (!(err instanceof FsError)) throw err;
        const verb = kind === 'dir' ? 'mkdir' : err.code === 'ENOSPC' ? 'write' : 'open';
        await p.stderr.write(`tar: ${member.name}: Cannot ${verb}: ${err.message}\n`);
        failed = true;
        if (err.code === 'ENOSPC') break;
      }
    }
    await done;
  } catch {
    ex.destroy();
    await p.stderr.write(
      'tar: This does not look like a tar archive\ntar: Exiting with failure status due to previous errors\n',
    );
    return 2;
  }
  for (const w of wanted)
    if (!found.has(w)) {
      await p.stderr.write(`tar: ${w}: Not found in archive\n`);
      failed = true;
    }
  if (failed) await p.stderr.write(FAILURE_TAIL);
  return failed ? 2 : 0;
}
