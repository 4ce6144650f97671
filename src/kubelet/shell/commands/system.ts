import { parseDuration } from '../../../clock/clock.js';
import { complain, sleepOn, type Proc, type Utility } from '../proc.js';

/** What a container can ask about itself and its time: all of it from the cluster clock and the pod. */

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const DAY_NAMES = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH_NAMES = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

const pad = (n: number, w = 2, c = '0'): string => String(n).padStart(w, c);

/** strftime in UTC (containers run with TZ unset): the conversions date(1) documents. */
export function strftime(format: string, ms: number): string {
  const d = new Date(ms);
  const hour12 = d.getUTCHours() % 12 === 0 ? 12 : d.getUTCHours() % 12;
  const dayOfYear = Math.floor((ms - Date.UTC(d.getUTCFullYear(), 0, 1)) / 86_400_000) + 1;
  const table: Record<string, () => string> = {
    a: () => DAYS[d.getUTCDay()]!,
    A: () => DAY_NAMES[d.getUTCDay()]!,
    b: () => MONTHS[d.getUTCMonth()]!,
    h: () => MONTHS[d.getUTCMonth()]!,
    B: () => MONTH_NAMES[d.getUTCMonth()]!,
    c: () => strftime('%a %b %e %H:%M:%S %Y', ms),
    C: () => pad(Math.floor(d.getUTCFullYear() / 100)),
    d: () => pad(d.getUTCDate()),
    D: () => strftime('%m/%d/%y', ms),
    e: () => pad(d.getUTCDate(), 2, ' '),
    F: () => strftime('%Y-%m-%d', ms),
    H: () => pad(d.getUTCHours()),
    I: () => pad(hour12),
    j: () => pad(dayOfYear, 3),
    k: () => pad(d.getUTCHours(), 2, ' '),
    l: () => pad(hour12, 2, ' '),
    m: () => pad(d.getUTCMonth() + 1),
    M: () => pad(d.getUTCMinutes()),
    n: () => '\n',
    N: () => pad(d.getUTCMilliseconds() * 1_000_000, 9),
    p: () => (d.getUTCHours() < 12 ? 'AM' : 'PM'),
    P: () => (d.getUTCHours() < 12 ? 'am' : 'pm'),
    r: () => strftime('%I:%M:%S %p', ms),
    R: () => strftime('%H:%M', ms),
    s: () => String(Math.floor(ms / 1000)),
    S: () => pad(d.getUTCSeconds()),
    t: () => '\t',
    T: () => strftime('%H:%M:%S', ms),
    u: () => String(d.getUTCDay() === 0 ? 7 : d.getUTCDay()),
    w: () => String(d.getUTCDay()),
    x: () => strftime('%m/%d/%y', ms),
    X: () => strftime('%H:%M:%S', ms),
    y: () => pad(d.getUTCFullYear() % 100),
    Y: () => String(d.getUTCFullYear()),
    z: () => '+0000',
    ':z': () => '+00:00',
    Z: () => 'UTC',
    '%': () => '%',
  };
  return format.replace(/%(:z|[a-zA-Z%])/g, (m, c: string) => table[c]?.() ?? m);
}

const date: Utility = async (p) => {
  let at = p.clock.now();
  let format = '%a %b %e %H:%M:%S %Z %Y';
  const args = p.argv.slice(1);
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith('+')) format = a.slice(1);
    else if (a === '-u' || a === '--utc' || a === '--universal') continue;
    else if (a === '-R' || a === '--rfc-email') format = '%a, %d %b %Y %H:%M:%S %z';
    else if (a === '-I' || a === '--iso-8601' || a.startsWith('-I') || a.startsWith('--iso-8601=')) {
      const unit = a.includes('=') ? a.split('=')[1] : a.slice(2);
      format =
        unit === 'seconds' || unit === 's'
          ? '%Y-%m-%dT%H:%M:%S%:z'
          : unit === 'minutes'
            ? '%Y-%m-%dT%H:%M%:z'
            : unit === 'hours'
              ? '%Y-%m-%dT%H%:z'
              : '%F';
    } else if (a === '-d' || a === '--date' || a.startsWith('--date=') || a.startsWith('-d')) {
      const text = a === '-d' || a === '--date' ? args[++i] : a.startsWith('--date=') ? a.slice(7) : a.slice(2);
      const parsed =
        text === undefined
          ? Number.NaN
          : text.startsWith('@')
            ? Number(text.slice(1)) * 1000
            : text === 'now'
              ? at
              : Date.parse(text.replace(/ UTC$/, 'Z'));
      if (Number.isNaN(parsed)) {
        await complain(p, `invalid date '${text ?? ''}'`);
        return 1;
      }
      at = parsed;
    } else {
      await complain(p, `invalid date '${a}'`);
      return 1;
    }
  }
  await p.stdout.write(`${strftime(format, at)}\n`);
  return 0;
};

/** sleep N[smhd]…, with fractions and `infinity`, on the cluster clock. */
const sleep: Utility = async (p) => {
  const args = p.argv.slice(1);
  if (args.length === 0) {
    await complain(p, "missing operand\nTry 'sleep --help' for more information.");
    return 1;
  }
  let ms = 0;
  for (const a of args) {
    if (a === 'inf' || a === 'infinity') ms = Number.POSITIVE_INFINITY;
    else {
      const m = /^(\d+\.?\d*|\.\d+)([smhd]?)$/.exec(a);
      if (!m) {
        try {
          ms += parseDuration(a);
          continue;
        } catch {
          await complain(p, `invalid time interval '${a}'\nTry 'sleep --help' for more information.`);
          return 1;
        }
      }
      const unit = { '': 1000, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as '' | 's' | 'm' | 'h' | 'd'];
      ms += Number(m[1]) * unit;
    }
  }
  if (ms === Number.POSITIVE_INFINITY) {
    await new Promise<void>((resolve) => p.signal.addEventListener('abort', () => resolve(), { once: true }));
    return 130;
  }
  return (await sleepOn(p.clock, Math.round(ms), p.signal)) ? 0 : 130;
};

/** `uptime`: how long the container has run (its start is the boot this simulated machine knows). */
export const uptime: Utility = async (p) => {
  const now = p.clock.now();
  const up = Math.max(0, now - (p.startedAt ?? now));
  const minutes = Math.floor(up / 60_000);
  const days = Math.floor(minutes / 1440);
  const hours = Math.floor((minutes % 1440) / 60);
  const mins = minutes % 60;
  if (p.argv.includes('-p') || p.argv.includes('--pretty')) {
    const parts = [];
    if (days) parts.push(`${days} day${days === 1 ? '' : 's'}`);
    if (hours) parts.push(`${hours} hour${hours === 1 ? '' : 's'}`);
    if (mins || parts.length === 0) parts.push(`${mins} minute${mins === 1 ? '' : 's'}`);
    await p.stdout.write(`up ${parts.join(', ')}\n`);
    return 0;
  }
  if (p.argv.includes('-s') || p.argv.includes('--since')) {
    await p.stdout.write(`${strftime('%Y-%m-%d %H:%M:%S', now - up)}\n`);
    return 0;
  }
  const span = `${days ? `${days} day${days === 1 ? '' : 's'}, ` : ''}${hours ? `${String(hours).padStart(2)}:${pad(mins)}` : `${mins} min`}`;
  await p.stdout.write(` ${strftime('%H:%M:%S', now)} up ${span},  0 users,  load average: 0.00, 0.00, 0.00\n`);
  return 0;
};

const printenv: Utility = async (p) => {
  const names = p.argv.slice(1);
  if (names.length === 0) {
    for (const [k, v] of p.env) await p.stdout.write(`${k}=${v}\n`);
    return 0;
  }
  let code = 0;
  for (const name of names) {
    const v = p.env.get(name);
    if (v === undefined) code = 1;
    else await p.stdout.write(`${v}\n`);
  }
  return code;
};

/** env [-i] [-u NAME] [NAME=VALUE]… [COMMAND [ARG]…] */
const env: Utility = async (p) => {
  const args = p.argv.slice(1);
  const vars = new Map(p.env);
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-i' || a === '-' || a === '--ignore-environment') vars.clear();
    else if (a === '-u' || a === '--unset') vars.delete(args[++i] ?? '');
    else if (a.startsWith('-u')) vars.delete(a.slice(2));
    else if (a === '--') {
      i++;
      break;
    } else if (/^[^=]+=/.test(a)) vars.set(a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1));
    else break;
  }
  if (i < args.length) return p.run(args.slice(i), { env: vars });
  for (const [k, v] of vars) await p.stdout.write(`${k}=${v}\n`);
  return 0;
};

function printed(text: (p: Proc) => string): Utility {
  return async (p) => {
    await p.stdout.write(text(p));
    return 0;
  };
}

const uname: Utility = async (p) => {
  const f = new Set(p.argv.slice(1).flatMap((a) => (a.startsWith('-') ? [...a.slice(1)] : [])));
  const all = f.has('a');
  const fields: string[] = [];
  if (all || f.has('s') || f.size === 0) fields.push('Linux');
  if (all || f.has('n')) fields.push(p.hostname());
  if (all || f.has('r')) fields.push('6.8.0-kube-sim');
  if (all || f.has('v')) fields.push('#1 SMP PREEMPT_DYNAMIC');
  if (all || f.has('m') || f.has('p') || f.has('i')) fields.push('x86_64');
  if (all || f.has('o')) fields.push('GNU/Linux');
  await p.stdout.write(`${fields.join(' ')}\n`);
  return 0;
};

const id: Utility = async (p) => {
  const args = p.argv.slice(1);
  if (args.includes('-u') || args.includes('-g')) await p.stdout.write(args.includes('-n') ? 'root\n' : '0\n');
  else if (args.includes('-un') || args.includes('-gn')) await p.stdout.write('root\n');
  else await p.stdout.write('uid=0(root) gid=0(root) groups=0(root)\n');
  return 0;
};

export const SYSTEM_UTILITIES: Record<string, Utility> = {
  date,
  sleep,
  printenv,
  env,
  uname,
  id,
  true: () => 0,
  false: () => 1,
  whoami: printed(() => 'root\n'),
  hostname: printed((p) => `${p.hostname()}\n`),
  sync: () => 0,
};
