import { createRequire } from 'node:module';
import type { CronExpression, CronExpressionParser as Parser } from 'cron-parser';

let parser: typeof Parser | undefined;

/** cron-parser, loaded with the first schedule parsed: a server without CronJobs does not pay its loading at start. */
function cronParser(): typeof Parser {
  parser ??= (createRequire(import.meta.url)('cron-parser') as { CronExpressionParser: typeof Parser })
    .CronExpressionParser;
  return parser;
}
import { parseDuration } from '../../clock/clock.js';

/**
 * CronJob schedules as Kubernetes reads them (robfig/cron's standard parser): five fields
 * (minute hour day-of-month month day-of-week, names like JAN or MON allowed, `?` for any), the
 * descriptors @yearly @annually @monthly @weekly @daily @midnight @hourly and `@every <duration>`, an
 * optional `TZ=Zone ` / `CRON_TZ=Zone ` prefix, and spec.timeZone. When both day fields are restricted a
 * time matches either (vixie cron). Times are computed by cron-parser from the instant given, never from
 * the wall clock.
 */
export interface Schedule {
  /** The first activation strictly after `afterMs`. */
  next(afterMs: number): number;
  /** The last activation at or before `atMs`, or undefined when there is none. */
  previous(atMs: number): number | undefined;
  readonly timeZone: string;
}

export class ScheduleError extends Error {}

const DESCRIPTORS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const FIELD_NAMES = [[], [], [], MONTHS, DAYS] as const;

const zoneValidity = new Map<string, boolean>();

/** Whether Intl knows the IANA zone (Go's time.LoadLocation, as the API server checks spec.timeZone). */
export function isValidTimeZone(zone: string): boolean {
  let valid = zoneValidity.get(zone);
  if (valid === undefined) {
    valid = zone !== '' && zone.toLowerCase() !== 'local';
    try {
      if (valid) new Intl.DateTimeFormat('en-US', { timeZone: zone });
    } catch {
      valid = false;
    }
    zoneValidity.set(zone, valid);
  }
  return valid;
}

const parsed = new Map<string, Schedule | ScheduleError>();

/**
 * Parses a schedule (and spec.timeZone); throws ScheduleError with robfig/cron-like messages. Parsed
 * schedules are kept (they are pure functions of the text), so a sync does not parse again.
 */
export function parseSchedule(schedule: string, timeZone?: string): Schedule {
  const key = `${timeZone ?? ''}\u0000${schedule}`;
  let entry = parsed.get(key);
  if (!entry) {
    try {
      entry = parseUncached(schedule, timeZone);
    } catch (err) {
      entry = err instanceof ScheduleError ? err : new ScheduleError((err as Error).message);
    }
    if (parsed.size > 10_000) parsed.clear();
    parsed.set(key, entry);
  }
  if (entry instanceof ScheduleError) throw entry;
  return entry;
}

function parseUncached(schedule: string, timeZone?: string): Schedule {
  let text = schedule.trim();
  let zone = timeZone ?? 'UTC';
  const prefix = /^(?:CRON_)?TZ=(\S+)\s+/.exec(text);
  if (prefix) {
    zone = prefix[1]!;
    text = text.slice(prefix[0].length).trim();
  }
  if (!isValidTimeZone(zone)) throw new ScheduleError(`provided bad location ${zone}: unknown time zone ${zone}`);
  if (text.startsWith('@every ')) {
    let every: number;
    try {
      every = parseDuration(text.slice('@every '.length));
    } catch {
      throw new ScheduleError(`failed to parse duration ${text}`);
    }
    const delay = Math.max(1000, Math.floor(every / 1000) * 1000);
    return {
      timeZone: zone,
      next: (after) => Math.floor(after / 1000) * 1000 + delay,
      previous: () => undefined,
    };
  }
  if (text.startsWith('@')) {
    const expanded = DESCRIPTORS[text.toLowerCase()];
    if (!expanded) throw new ScheduleError(`unrecognized descriptor: ${text}`);
    text = expanded;
  }
  const fields = text.split(/\s+/);
  if (fields.length !== 5) throw new ScheduleError(`expected exactly 5 fields, found ${fields.length}: ${text}`);
  fields.forEach((f, i) => checkField(f, FIELD_NAMES[i]!));
  const expression = text.replace(/\?/g, '*');
  let parsedExpression: CronExpression;
  try {
    parsedExpression = cronParser().parse(expression, { currentDate: new Date(0), tz: zone }); // validates ranges now
  } catch (err) {
    throw new ScheduleError((err as Error).message);
  }
  const daily = everyDayInUtc(parsedExpression, zone);
  if (daily) return daily;
  // One parsed expression, moved to each instant asked about (parsing again per call was most of a sync).
  const at = (ms: number): CronExpression => {
    parsedExpression.reset(new Date(ms));
    return parsedExpression;
  };
  // Each answer next(a) = n says no activation lies in (a, n), so any later question in [a, n) has the same
  // answer: a controller asking about "now" every few seconds of an hourly schedule computes it once an hour.
  const known: Array<{ from: number; next: number }> = [];
  const next = (after: number): number => {
    for (const k of known) if (after >= k.from && after < k.next) return k.next;
    const answer = at(after).next().getTime();
    known.unshift({ from: after, next: answer });
    if (known.length > 8) known.pop();
    return answer;
  };
  return {
    timeZone: zone,
    next,
    previous: (atMs) => {
      try {
        return at(atMs + 1)
          .prev()
          .getTime();
      } catch {
        return undefined;
      }
    },
  };
}

const MINUTE_MS = 60_000;
const DAY_MINUTES = 1440;

/**
 * Schedules that fire on every day of every month in UTC (hourly, daily, every N minutes: most CronJobs),
 * answered by arithmetic on the expression's minutes and hours, since cron-parser steps through luxon dates, far
 * slower; with every day matching, the day-of-month / day-of-week rule (either or both) cannot matter.
 */
function everyDayInUtc(expression: CronExpression, zone: string): Schedule | undefined {
  const f = expression.fields;
  const allWeekdays = [0, 1, 2, 3, 4, 5, 6].every((d) => f.dayOfWeek.values.includes(d as never));
  if (
    (zone !== 'UTC' && zone !== 'Etc/UTC') ||
    f.dayOfMonth.values.length !== 31 ||
    !allWeekdays ||
    f.month.values.length !== 12
  )
    return undefined;
  const minutes = [...f.minute.values].sort((a, b) => a - b);
  const hours = [...f.hour.values].sort((a, b) => a - b);
  /** Minutes since the epoch of the first activation at or after minute `from`. */
  const firstFrom = (from: number): number => {
    const day = Math.floor(from / DAY_MINUTES);
    const minuteOfDay = from - day * DAY_MINUTES;
    const hour = Math.floor(minuteOfDay / 60);
    const minute = minuteOfDay % 60;
    for (const h of hours) {
      if (h < hour) continue;
      const m = h === hour ? minutes.find((x) => x >= minute) : minutes[0];
      if (m !== undefined) return day * DAY_MINUTES + h * 60 + m;
    }
    return (day + 1) * DAY_MINUTES + hours[0]! * 60 + minutes[0]!;
  };
  /** Minutes since the epoch of the last activation at or before minute `to`. */
  const lastUpTo = (to: number): number => {
    const day = Math.floor(to / DAY_MINUTES);
    const minuteOfDay = to - day * DAY_MINUTES;
    const hour = Math.floor(minuteOfDay / 60);
    const minute = minuteOfDay % 60;
    for (let i = hours.length - 1; i >= 0; i--) {
      const h = hours[i]!;
      if (h > hour) continue;
      const m = h === hour ? minutes.findLast((x) => x <= minute) : minutes.at(-1);
      if (m !== undefined) return day * DAY_MINUTES + h * 60 + m;
    }
    return (day - 1) * DAY_MINUTES + hours.at(-1)! * 60 + minutes.at(-1)!;
  };
  return {
    timeZone: zone,
    // Activations are whole minutes: the first one strictly after `after` is at or after the next whole minute.
    next: (after) => firstFrom(Math.floor(after / MINUTE_MS) + 1) * MINUTE_MS,
    previous: (atMs) => lastUpTo(Math.floor(atMs / MINUTE_MS)) * MINUTE_MS,
  };
}

/** Rejects what robfig/cron's standard parser does not know (L, W, #, H, seconds). */
function checkField(field: string, names: readonly string[]): void {
  for (const part of field.split(',')) {
    const m = /^(\*|\?|[0-9a-z]+(?:-[0-9a-z]+)?)(?:\/(\d+))?$/i.exec(part);
    if (!m) throw new ScheduleError(`failed to parse int from ${part}: invalid syntax`);
    for (const token of m[1]!.split('-')) {
      if (token === '*' || token === '?' || /^\d+$/.test(token)) continue;
      if (!names.includes(token.toLowerCase()))
        throw new ScheduleError(`failed to parse int from ${token}: invalid syntax`);
    }
  }
}
