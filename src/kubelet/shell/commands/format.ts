import { cEscapes } from '../parse.js';
import { complain, type Utility } from '../proc.js';

/** echo as bash's builtin: -n (no newline), -e (backslash escapes; \c stops output), -E. */
export const echo: Utility = async (p) => {
  let args = p.argv.slice(1);
  let newline = true;
  let escapes = false;
  while (args.length > 0 && /^-[neE]+$/.test(args[0]!)) {
    for (const c of args[0]!.slice(1)) {
      if (c === 'n') newline = false;
      else if (c === 'e') escapes = true;
      else escapes = false;
    }
    args = args.slice(1);
  }
  let text = args.join(' ');
  if (escapes) {
    const stop = text.indexOf('\\c');
    if (stop >= 0) {
      text = text.slice(0, stop);
      newline = false;
    }
    text = cEscapes(
      text.replace(/\\0([0-7]{0,3})/g, (_m, o: string) => String.fromCharCode(Number.parseInt(o || '0', 8))),
    );
  }
  await p.stdout.write(newline ? `${text}\n` : text);
  return 0;
};

function numberArg(arg: string | undefined, bad: string[]): number {
  if (arg === undefined || arg === '') return 0;
  if (/^['"]/.test(arg)) return arg.codePointAt(1) ?? 0;
  const t = arg.trim();
  const n = /^[+-]?0[xX][0-9a-fA-F]+$/.test(t)
    ? Number.parseInt(t, 16)
    : /^[+-]?0[0-7]+$/.test(t)
      ? Number.parseInt(t, 8)
      : Number(t);
  if (Number.isNaN(n)) {
    bad.push(arg);
    return 0;
  }
  return n;
}

/** printf FORMAT [ARG]...: %s %b %c %d %i %u %o %x %X %f %e %g %%, flags, width and precision; the format repeats while arguments are left. */
export const printf: Utility = async (p) => {
  const format = p.argv[1];
  if (format === undefined) {
    await p.stderr.write('printf: usage: printf format [arguments]\n');
    return 2;
  }
  const args = p.argv.slice(2);
  let at = 0;
  const bad: string[] = [];
  let out = '';
  let stop = false;
  const spec = /%([-+ 0#]*)(\*|\d+)?(?:\.(\*|\d*))?([diouxXfFeEgGcsbq%])|\\(?:[0-7]{1,3}|x[0-9a-fA-F]{1,2}|c|.)/gs;
  do {
    const before = at;
    out += format.replace(
      spec,
      (m, flags: string, width: string | undefined, precision: string | undefined, conv: string) => {
        if (stop) return '';
        if (m.startsWith('\\')) {
          if (m === '\\c') {
            stop = true;
            return '';
          }
          return cEscapes(m);
        }
        if (conv === '%') return '%';
        const w = width === '*' ? numberArg(args[at++], bad) : width === undefined ? undefined : Number(width);
        const pr =
          precision === '*'
            ? numberArg(args[at++], bad)
            : precision === undefined
              ? undefined
              : Number(precision || '0');
        const arg = args[at++];
        let s: string;
        switch (conv) {
          case 's':
            s = arg ?? '';
            if (pr !== undefined) s = s.slice(0, pr);
            break;
          case 'b': {
            const text = arg ?? '';
            const cut = text.indexOf('\\c');
            if (cut >= 0) stop = true;
            s = cEscapes(
              (cut >= 0 ? text.slice(0, cut) : text).replace(/\\0([0-7]{0,3})/g, (_x, o: string) => `\\${o || '0'}`),
            );
            break;
          }
          case 'q':
            s = /^[\w@%+=:,./-]+$/.test(arg ?? '') ? (arg ?? '') : `'${(arg ?? '').replace(/'/g, "'\\''")}'`;
            break;
          case 'c':
            s = (arg ?? '')[0] ?? '';
            break;
          case 'd':
          case 'i':
          case 'u': {
            const n = Math.trunc(numberArg(arg, bad));
            s = String(Math.abs(n));
            if (pr !== undefined) s = s.padStart(pr, '0');
            s = (n < 0 ? '-' : flags.includes('+') ? '+' : flags.includes(' ') ? ' ' : '') + s;
            break;
          }
          case 'o':
          case 'x':
          case 'X': {
            const n = Math.trunc(numberArg(arg, bad));
            s = (n >>> 0).toString(conv === 'o' ? 8 : 16);
            if (conv === 'X') s = s.toUpperCase();
            if (flags.includes('#') && n !== 0) s = (conv === 'o' ? '0' : conv === 'x' ? '0x' : '0X') + s;
            break;
          }
          default: {
            const n = numberArg(arg, bad);
            const digits = pr ?? 6;
            s =
              conv === 'f' || conv === 'F'
                ? n.toFixed(digits)
                : conv === 'e' || conv === 'E'
                  ? n.toExponential(digits).replace(/e([+-])(\d)$/, 'e$10$2')
                  : String(Number(n.toPrecision(digits || 1)));
            if (conv === 'E' || conv === 'G') s = s.toUpperCase();
            if (n >= 0 && flags.includes('+')) s = `+${s}`;
          }
        }
        if (w !== undefined && s.length < w) {
          if (flags.includes('-')) s = s.padEnd(w);
          else if (flags.includes('0') && /[diouxXfFeEgG]/.test(conv)) {
            const sign = /^[+-]/.test(s) ? s[0]! : '';
            s = sign + s.slice(sign.length).padStart(w - sign.length, '0');
          } else s = s.padStart(w);
        }
        return s;
      },
    );
    if (at === before) break;
  } while (at < args.length && !stop);
  await p.stdout.write(out);
  for (const b of bad) await complain(p, `${b}: invalid number`);
  return bad.length > 0 ? 1 : 0;
};
