import { posix } from 'node:path';
import type { ContainerFs } from '../filesystem.js';

/**
 * Shell patterns (`*`, `?`, `[a-z]`, `[!x]`, `[[:digit:]]`, `\*`): as regular expressions for `case` and
 * `${x#pattern}`, and matched against the container's files for pathname expansion.
 */

/** POSIX bracket classes (`[:digit:]`) as the insides of a JavaScript character class. */
export const CLASSES: Record<string, string> = {
  alpha: 'a-zA-Z',
  digit: '0-9',
  alnum: 'a-zA-Z0-9',
  upper: 'A-Z',
  lower: 'a-z',
  space: ' \\t\\n\\r\\f\\v',
  blank: ' \\t',
  punct: '!-\\/:-@\\[-`{-~',
  xdigit: '0-9A-Fa-f',
  print: ' -~',
  graph: '!-~',
  cntrl: '\\x00-\\x1f\\x7f',
};

function regexSource(pattern: string): string {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '\\' && i + 1 < pattern.length) out += escapeRe(pattern[++i]!);
    else if (c === '*') out += '[\\s\\S]*';
    else if (c === '?') out += '[\\s\\S]';
    else if (c === '[') {
      const close = bracketEnd(pattern, i);
      if (close < 0) {
        out += '\\[';
        continue;
      }
      let body = pattern.slice(i + 1, close);
      let negate = false;
      if (body.startsWith('!') || body.startsWith('^')) {
        negate = true;
        body = body.slice(1);
      }
      let cls = '';
      for (let j = 0; j < body.length; j++) {
        const named = /^\[:(\w+):\]/.exec(body.slice(j));
        if (named) {
          cls += CLASSES[named[1]!] ?? '';
          j += named[0].length - 1;
        } else if (body[j] === '\\' && j + 1 < body.length) cls += `\\${body[++j]}`;
        else if (body[j] === '-' && j > 0 && j < body.length - 1) cls += '-';
        else
          cls += body[j] === ']' || body[j] === '\\' || body[j] === '^' || body[j] === '-' ? `\\${body[j]}` : body[j];
      }
      out += `[${negate ? '^' : ''}${cls}]`;
      i = close;
    } else out += escapeRe(c);
  }
  return out;
}

/** Where a bracket expression that opens at `start` closes, or -1 (then `[` is literal). */
function bracketEnd(pattern: string, start: number): number {
  let j = start + 1;
  if (pattern[j] === '!' || pattern[j] === '^') j++;
  if (pattern[j] === ']') j++;
  for (; j < pattern.length; j++) {
    if (pattern.startsWith('[:', j)) {
      const end = pattern.indexOf(':]', j + 2);
      if (end > 0) {
        j = end + 1;
        continue;
      }
    }
    if (pattern[j] === ']') return j;
  }
  return -1;
}

function escapeRe(c: string): string {
  return /[.*+?^${}()|[\]\\/]/.test(c) ? `\\${c}` : c;
}

/** The pattern as a regular expression matching a whole string (or its start, its end, or anywhere). */
export function globToRegExp(pattern: string, anchor: 'full' | 'start' | 'end' | 'any' = 'full'): RegExp {
  const src = regexSource(pattern);
  if (anchor === 'any') return new RegExp(src);
  if (anchor === 'start') return new RegExp(`^${src}`);
  if (anchor === 'end') return new RegExp(`${src}$`);
  return new RegExp(`^${src}$`);
}

/** Whether the pattern has an unquoted `*`, `?` or `[`. */
export function hasGlob(pattern: string): boolean {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === '\\') i++;
    else if ('*?['.includes(pattern[i]!)) return true;
  }
  return false;
}

function unescapeGlob(segment: string): string {
  return segment.replace(/\\(.)/g, '$1');
}

/** Pathname expansion: the paths that match, sorted, written as the pattern was (relative or absolute). */
export function expandGlob(fs: ContainerFs, cwd: string, pattern: string): string[] {
  const absolute = pattern.startsWith('/');
  const segments = pattern.split('/').filter((s, i) => s !== '' || i === 0);
  let found: string[] = [absolute ? '/' : ''];
  for (const [index, segment] of segments.entries()) {
    if (index === 0 && absolute) continue;
    const last = index === segments.length - 1;
    const next: string[] = [];
    for (const base of found) {
      const dir = posix.resolve(cwd, base || '.');
      if (!hasGlob(segment)) {
        const path = base === '' ? unescapeGlob(segment) : posix.join(base, unescapeGlob(segment));
        if (last ? fs.stat(posix.resolve(cwd, path)) : fs.isDir(posix.resolve(cwd, path))) next.push(path);
        continue;
      }
      if (!fs.isDir(dir)) continue;
      const re = globToRegExp(segment);
      for (const name of fs.list(dir)) {
        if (name.startsWith('.') && !segment.startsWith('.')) continue;
        if (!re.test(name)) continue;
        const path = base === '' ? name : posix.join(base, name);
        if (last || fs.isDir(posix.resolve(cwd, path))) next.push(path);
      }
    }
    found = next;
    if (found.length === 0) return [];
  }
  return found.filter((f) => f !== '' && f !== '/').sort();
}
