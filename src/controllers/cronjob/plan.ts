import { rfc3339 } from '../../clock/clock.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { newControllerRef } from '../controller-ref.js';
import { isJobFinished, jobStatus } from '../job/plan.js';
import { parseSchedule, ScheduleError, type Schedule } from './schedule.js';

/** Kubernetes looks again 100 ms after a schedule time, so the tick is surely past it. */
export const NEXT_SCHEDULE_DELTA_MS = 100;
export const SCHEDULED_TIMESTAMP_ANNOTATION = 'batch.kubernetes.io/cronjob-scheduled-timestamp';
const TOO_MANY_MISSED = 100;

export interface CronJobStatus {
  active?: ObjectReference[];
  lastScheduleTime?: string;
  lastSuccessfulTime?: string;
  [extra: string]: unknown;
}

export interface ObjectReference {
  apiVersion?: string;
  kind?: string;
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

interface CronJobSpec {
  schedule?: string;
  timeZone?: string;
  startingDeadlineSeconds?: number;
  concurrencyPolicy?: 'Allow' | 'Forbid' | 'Replace';
  suspend?: boolean;
  successfulJobsHistoryLimit?: number;
  failedJobsHistoryLimit?: number;
  jobTemplate?: {
    metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
    spec?: unknown;
  };
}

export interface CronJobEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface CronJobPlan {
  status: CronJobStatus;
  /** The Job to create for the schedule time, if one is due. */
  create?: KubeObject;
  /** Jobs to delete: Replace's running ones, then the finished ones beyond the history limits. */
  delete: KubeObject[];
  events: CronJobEvent[];
  requeueAfterMs?: number;
}

function spec(cj: KubeObject): CronJobSpec {
  return isPlainObject(cj.spec) ? (cj.spec as CronJobSpec) : {};
}

export function cronJobStatus(cj: KubeObject): CronJobStatus {
  return isPlainObject(cj.status) ? (cj.status as CronJobStatus) : {};
}

/** `<cronjob>-<scheduled time in minutes since the epoch>`, as getJobName names it. */
export function jobNameFor(cronJobName: string, scheduledMs: number): string {
  return `${cronJobName}-${Math.floor(scheduledMs / 60_000)}`;
}

/** Go's time.RFC1123Z, as the MissSchedule event prints the time (in UTC). */
function rfc1123z(ms: number): string {
  const d = new Date(ms);
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${days[d.getUTCDay()]}, ${p(d.getUTCDate())} ${months[d.getUTCMonth()]} ${d.getUTCFullYear()} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000`;
}

/** RFC 3339 of an instant in a time zone, with its offset (Go's time.In(loc).Format(time.RFC3339)). */
const formatters = new Map<string, Intl.DateTimeFormat>();

export function rfc3339In(ms: number, zone: string): string {
  // UTC needs no zone arithmetic (Go prints its offset as Z); Intl's formatToParts is the costly path.
  if (zone === 'UTC' || zone === 'Etc/UTC') return rfc3339(ms);
  let format = formatters.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(zone, format);
  }
  const parts = Object.fromEntries(format.formatToParts(new Date(ms)).map((p) => [p.type, p.value]));
  const local = Date.UTC(
    Number(parts.year),
    Number(parts.month) - 1,
    Number(parts.day),
    Number(parts.hour),
    Number(parts.minute),
    Number(parts.second),
  );
  const offsetMin = Math.round((local - Math.floor(ms / 1000) * 1000) / 60_000);
  const p = (n: number): string => String(n).padStart(2, '0');
  const offset =
    offsetMin === 0
      ? 'Z'
      : `${offsetMin > 0 ? '+' : '-'}${p(Math.floor(Math.abs(offsetMin) / 60))}:${p(Math.abs(offsetMin) % 60)}`;
  return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${offset}`;
}

/**
 * Date.parse of the timestamps a sync compares, remembered: each sync parses every owned Job's start and
 * completion times again (sorting them for the history limits), which was most of planCronJob's time.
 * Cleared past 10,000 texts so that it stays small.
 */
const parsedTimes = new Map<string, number>();

function timeOf(text: string): number {
  let t = parsedTimes.get(text);
  if (t === undefined) {
    if (parsedTimes.size >= 10_000) parsedTimes.clear();
    parsedTimes.set(text, (t = Date.parse(text)));
  }
  return t;
}

/**
 * The most recent schedule time that is due and not yet handled, and how many were missed
 * (cronjob utils mostRecentScheduleTime): counting starts after lastScheduleTime (or creation), or after
 * now - startingDeadlineSeconds when that is later.
 *
 * Example: hourly, last scheduled 01:00, now 04:30 → 02:00, 03:00 and 04:00 are due: 3 missed, most recent
 * 04:00 (only that one runs). With startingDeadlineSeconds 600 counting starts at 04:20: none due.
 */
export function mostRecentScheduleTime(
  cj: KubeObject,
  now: number,
  schedule: Schedule,
  includeStartingDeadline = true,
): { mostRecent?: number; missed: number } {
  const s = cronJobStatus(cj);
  let earliest = timeOf(s.lastScheduleTime ?? cj.metadata.creationTimestamp ?? '');
  if (Number.isNaN(earliest)) earliest = now;
  const deadline = spec(cj).startingDeadlineSeconds;
  if (includeStartingDeadline && typeof deadline === 'number') earliest = Math.max(earliest, now - deadline * 1000);
  const first = schedule.next(earliest);
  if (first > now) return { missed: 0 };
  let count = 1;
  let last = first;
  for (let t = schedule.next(first); t <= now; t = schedule.next(t)) {
    count++;
    last = t;
    if (count > TOO_MANY_MISSED) {
      last = schedule.previous(now) ?? last;
      break;
    }
  }
  return { mostRecent: last, missed: count };
}

function finishedCondition(job: KubeObject): string | undefined {
  return isJobFinished(job);
}

/** Sorts by status.startTime, jobs without one last, then by name (byJobStartTime). */
function byStartTime(a: KubeObject, b: KubeObject): number {
  const sa = jobStatus(a).startTime;
  const sb = jobStatus(b).startTime;
  if (!sa && sb) return 1;
  if (sa && !sb) return -1;
  if (sa === sb) return (a.metadata.name ?? '').localeCompare(b.metadata.name ?? '');
  return timeOf(sa!) - timeOf(sb!);
}

/**
 * One sync of a CronJob (pkg/controller/cronjob/cronjob_controllerv2.go), as a pure function of the
 * CronJob, the Jobs it owns and the time:
 *   1. reconcile status.active with the Jobs (finished ones leave it; lastSuccessfulTime follows them),
 *   2. unless suspended, find the most recent due schedule time; too late for startingDeadlineSeconds →
 *      MissSchedule; Forbid with a Job running → JobAlreadyActive; Replace → delete the running ones,
 *   3. create `<name>-<minutes>` for it, set lastScheduleTime, and look again at the next schedule + 100 ms,
 *   4. delete the oldest finished Jobs beyond successfulJobsHistoryLimit / failedJobsHistoryLimit.
 */
export function planCronJob(cj: KubeObject, jobs: readonly KubeObject[], now: number): CronJobPlan {
  const s = spec(cj);
  const old = cronJobStatus(cj);
  const status: CronJobStatus = deepCopy(old);
  const plan: CronJobPlan = { status, delete: [], events: [] };
  const byUid = new Map(jobs.map((j) => [j.metadata.uid!, j]));
  let active = [...(status.active ?? [])];

  // 1. The active list against the Jobs that exist.
  for (const job of jobs) {
    const uid = job.metadata.uid!;
    const listed = active.some((r) => r.uid === uid);
    const finished = finishedCondition(job);
    if (!listed && !finished && !job.metadata.deletionTimestamp) {
      plan.events.push({
        type: 'Warning',
        reason: 'UnexpectedJob',
        message: `Saw a job that the controller did not create or forgot: ${job.metadata.name}`,
      });
      active.push(jobRef(job));
    } else if (listed && finished) {
      active = active.filter((r) => r.uid !== uid);
      plan.events.push({
        type: 'Normal',
        reason: 'SawCompletedJob',
        message: `Saw completed job: ${job.metadata.name}, condition: ${finished}`,
      });
    }
    const completion = jobStatus(job).completionTime;
    if (
      finished === 'Complete' &&
      completion &&
      (!status.lastSuccessfulTime || timeOf(completion) > timeOf(status.lastSuccessfulTime))
    ) {
      status.lastSuccessfulTime = completion;
    }
  }
  for (const ref of [...active]) {
    if (ref.uid && !byUid.has(ref.uid)) {
      active = active.filter((r) => r !== ref);
      plan.events.push({ type: 'Normal', reason: 'MissingJob', message: `Active job went missing: ${ref.name}` });
    }
  }

  const finish = (): CronJobPlan => {
    cleanupHistory(plan, s, jobs);
    if (active.length > 0) status.active = active;
    else if (status.active !== undefined) {
      // Not 'delete': it would leave a dictionary-mode object to be copied and compared on every write.
      const { active: _none, ...rest } = status;
      plan.status = rest;
    }
    return plan;
  };
  if (cj.metadata.deletionTimestamp) return finish();

  // 2. The schedule.
  let schedule: Schedule;
  try {
    schedule = parseSchedule(s.schedule ?? '', s.timeZone);
  } catch (err) {
    const msg = (err as Error).message;
    if (s.timeZone !== undefined && err instanceof ScheduleError && msg.startsWith('provided bad location')) {
      plan.events.push({
        type: 'Warning',
        reason: 'UnknownTimeZone',
        message: `invalid timeZone: "${s.timeZone}": ${msg}`,
      });
    } else
      plan.events.push({
        type: 'Warning',
        reason: 'UnparseableSchedule',
        message: `unparseable schedule: "${s.schedule ?? ''}" : ${msg}`,
      });
    return finish();
  }
  if (s.suspend) return finish();

  const { mostRecent, missed } = mostRecentScheduleTime(cj, now, schedule);
  // The next activation after now (nextScheduleTimeDuration: the one after the most recent due time).
  const requeueNext = (): void => {
    plan.requeueAfterMs = Math.max(0, schedule.next(now) + NEXT_SCHEDULE_DELTA_MS - now);
  };
  if (missed > TOO_MANY_MISSED) {
    plan.events.push({
      type: 'Warning',
      reason: 'TooManyMissedTimes',
      message: `too many missed start times: ${missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew`,
    });
  }
  if (mostRecent === undefined) {
    requeueNext();
    return finish();
  }
  const scheduled = mostRecent;
  if (typeof s.startingDeadlineSeconds === 'number' && scheduled + s.startingDeadlineSeconds * 1000 < now) {
    plan.events.push({
      type: 'Warning',
      reason: 'MissSchedule',
      message: `Missed scheduled time to start a job: ${rfc1123z(scheduled)}`,
    });
    requeueNext();
    return finish();
  }
  const name = jobNameFor(cj.metadata.name!, scheduled);
  if (active.some((r) => r.name === name) || (old.lastScheduleTime && timeOf(old.lastScheduleTime) === scheduled)) {
    requeueNext();
    return finish();
  }
  if (s.concurrencyPolicy === 'Forbid' && active.length > 0) {
    plan.events.push({
      type: 'Normal',
      reason: 'JobAlreadyActive',
      message: 'Not starting job because prior execution is running and concurrency policy is Forbid',
    });
    requeueNext();
    return finish();
  }
  if (s.concurrencyPolicy === 'Replace') {
    for (const ref of active) {
      const job = ref.uid ? byUid.get(ref.uid) : undefined;
      if (job) {
        plan.delete.push(job);
        plan.events.push({ type: 'Normal', reason: 'SuccessfulDelete', message: `Deleted job ${job.metadata.name}` });
      }
    }
    active = [];
  }

  // 3. The Job for this schedule time.
  plan.create = jobFor(cj, s, scheduled, schedule.timeZone);
  status.lastScheduleTime = rfc3339(scheduled);
  requeueNext();
  return finish();
}

function jobRef(job: KubeObject): ObjectReference {
  return {
    kind: 'Job',
    namespace: job.metadata.namespace,
    name: job.metadata.name,
    uid: job.metadata.uid,
    apiVersion: 'batch/v1',
    resourceVersion: job.metadata.resourceVersion,
  };
}

/** The Job for a schedule time (getJobFromTemplate2). */
export function jobFor(cj: KubeObject, s: CronJobSpec, scheduled: number, zone: string): KubeObject {
  const template = deepCopy(s.jobTemplate ?? {});
  const annotations = {
    ...(template.metadata?.annotations ?? {}),
    [SCHEDULED_TIMESTAMP_ANNOTATION]: rfc3339In(scheduled, zone),
  };
  const metadata: KubeObject['metadata'] = {
    name: jobNameFor(cj.metadata.name!, scheduled),
    namespace: cj.metadata.namespace,
    annotations,
    ownerReferences: [newControllerRef(cj, 'batch/v1', 'CronJob')],
  };
  if (template.metadata?.labels) metadata.labels = { ...template.metadata.labels };
  return { apiVersion: 'batch/v1', kind: 'Job', metadata, spec: template.spec ?? {} };
}

/** Adds a created Job to the plan's status (once its uid is known). */
export function withCreatedJob(status: CronJobStatus, job: KubeObject): CronJobStatus {
  return { ...status, active: [...(status.active ?? []), jobRef(job)] };
}

/** Step 4: the oldest finished Jobs beyond the history limits go (cleanupFinishedJobs). */
function cleanupHistory(plan: CronJobPlan, s: CronJobSpec, jobs: readonly KubeObject[]): void {
  const trim = (kind: 'Complete' | 'Failed', limit: number | undefined): void => {
    if (typeof limit !== 'number') return;
    const finished = jobs
      .filter((j) => finishedCondition(j) === kind && !j.metadata.deletionTimestamp)
      .sort(byStartTime);
    for (const job of finished.slice(0, Math.max(0, finished.length - limit))) {
      if (plan.delete.includes(job)) continue;
      plan.delete.push(job);
      plan.events.push({ type: 'Normal', reason: 'SuccessfulDelete', message: `Deleted job ${job.metadata.name}` });
    }
  };
  trim('Complete', s.successfulJobsHistoryLimit);
  trim('Failed', s.failedJobsHistoryLimit);
}

export function cronStatusChanged(cj: KubeObject, status: CronJobStatus): boolean {
  return !deepEqual(cronJobStatus(cj), status);
}
