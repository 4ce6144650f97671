import { rfc3339 } from '../../clock/clock.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { containerStatuses, isPodActive, isPodReady, isTerminal, isTerminating, podPhase } from '../../api/pod-util.js';
import { nextBackoffRecord, remainingBackoffMs, type BackoffRecord } from './backoff.js';
import { matchPodFailurePolicy } from './failure-policy.js';
import { formatIndexes, parseIndexes, podIndex } from './indexes.js';

/** Pods of a Job carry this finalizer until the Job has counted them (job tracking with finalizers). */
export const JOB_TRACKING_FINALIZER = 'batch.kubernetes.io/job-tracking';

export interface JobCondition {
  type: string;
  status: 'True' | 'False';
  lastProbeTime: string;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export interface JobStatus {
  startTime?: string;
  completionTime?: string;
  active?: number;
  ready?: number;
  terminating?: number;
  succeeded?: number;
  failed?: number;
  completedIndexes?: string;
  uncountedTerminatedPods?: { succeeded?: string[]; failed?: string[] };
  conditions?: JobCondition[];
  [extra: string]: unknown;
}

export interface JobEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface JobPlan {
  /**
   * Written first when pods finished since the last sync: their uids in uncountedTerminatedPods (and their
   * indexes in completedIndexes), so that removing their finalizers never loses a count.
   */
  recordUncounted?: JobStatus;
  /** Pods whose tracking finalizer goes (they are counted in `status`). */
  removeFinalizers: KubeObject[];
  /** Pods to create: one entry each, with its completion index for Indexed Jobs. */
  create: Array<{ index?: number }>;
  delete: KubeObject[];
  /** The status to write last: uncounted pods moved into the counters, conditions, active/ready. */
  status: JobStatus;
  events: JobEvent[];
  backoff: BackoffRecord;
  requeueAfterMs?: number;
}

interface JobSpec {
  parallelism?: number;
  completions?: number | null;
  completionMode?: string;
  backoffLimit?: number;
  activeDeadlineSeconds?: number;
  suspend?: boolean;
  successPolicy?: { rules?: Array<{ succeededIndexes?: string; succeededCount?: number }> };
  podReplacementPolicy?: string;
  template?: { spec?: { restartPolicy?: string } };
}

const MAX_POD_CREATE_DELETE_PER_SYNC = 500;

export function jobSpec(job: KubeObject): JobSpec {
  return isPlainObject(job.spec) ? (job.spec as JobSpec) : {};
}

export function jobStatus(job: KubeObject): JobStatus {
  return isPlainObject(job.status) ? (job.status as JobStatus) : {};
}

function hasCondition(status: JobStatus, type: string): JobCondition | undefined {
  return status.conditions?.find((c) => c.type === type && c.status === 'True');
}

/** Complete or Failed: nothing more happens to the Job but its cleanup. */
export function isJobFinished(job: KubeObject): 'Complete' | 'Failed' | undefined {
  const status = jobStatus(job);
  if (hasCondition(status, 'Complete')) return 'Complete';
  if (hasCondition(status, 'Failed')) return 'Failed';
  return undefined;
}

/** The moment a finished Job finished: its Complete/Failed condition's transition (or completionTime). */
export function jobFinishTime(job: KubeObject): number | undefined {
  const status = jobStatus(job);
  const c = hasCondition(status, 'Complete') ?? hasCondition(status, 'Failed');
  if (!c) return undefined;
  const at = Date.parse(c.lastTransitionTime || status.completionTime || '');
  return Number.isNaN(at) ? undefined : at;
}

/** Sets a condition, keeping lastTransitionTime when its status does not change (as ensureJobConditionStatus). */
function setCondition(
  conditions: JobCondition[],
  type: string,
  status: 'True' | 'False',
  reason: string,
  message: string,
  now: string,
): JobCondition[] {
  const existing = conditions.find((c) => c.type === type);
  if (existing && existing.status === status && existing.reason === reason && existing.message === message)
    return conditions;
  const next: JobCondition = {
    type,
    status,
    lastProbeTime: now,
    lastTransitionTime: existing && existing.status === status ? existing.lastTransitionTime : now,
    reason,
    message,
  };
  return existing ? conditions.map((c) => (c === existing ? next : c)) : [...conditions, next];
}

/** A success policy rule that the completed indexes satisfy, as "Matched rules at index N". */
function matchSuccessPolicy(spec: JobSpec, completed: ReadonlySet<number>, completions: number): number | undefined {
  const rules = spec.successPolicy?.rules ?? [];
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    if (rule.succeededIndexes !== undefined) {
      const wanted = parseIndexes(rule.succeededIndexes, completions);
      const have = wanted.filter((ix) => completed.has(ix)).length;
      if (have >= (rule.succeededCount ?? wanted.length) && wanted.length > 0) return i;
    } else if (rule.succeededCount !== undefined && completed.size >= rule.succeededCount) return i;
  }
  return undefined;
}

/**
 * Which active pods go first when there are too many (controller.ActivePods order): unscheduled before
 * scheduled, pending before running, not ready before ready, newer before older.
 */
function removalOrder(a: KubeObject, b: KubeObject): number {
  const scheduled = (p: KubeObject): number => ((p.spec as { nodeName?: string } | undefined)?.nodeName ? 1 : 0);
  const phaseRank = (p: KubeObject): number => ({ Pending: 0, Unknown: 1, Running: 2 })[podPhase(p)] ?? 0;
  return (
    scheduled(a) - scheduled(b) ||
    phaseRank(a) - phaseRank(b) ||
    Number(isPodReady(a)) - Number(isPodReady(b)) ||
    (b.metadata.creationTimestamp ?? '').localeCompare(a.metadata.creationTimestamp ?? '')
  );
}

/**
 * One sync of a Job (pkg/controller/job/job_controller.go syncJob), as a pure function of the Job, its pods,
 * the back-off record and the time. Order of decisions, as in Kubernetes:
 *   1. count pods that finished (podFailurePolicy may ignore a failure or fail the Job),
 *   2. fail the Job: a FailJob rule, failures > backoffLimit, or activeDeadlineSeconds passed,
 *   3. complete it: completions reached (or a successPolicy rule matched),
 *   4. suspend: delete active pods,
 *   5. else keep min(parallelism, completions - succeeded) pods active, waiting out the back-off.
 * A Job that fails or succeeds first gets FailureTarget/SuccessCriteriaMet and its active pods deleted;
 * Failed/Complete follow once no pod is terminating.
 *
 * Example: completions 5, parallelism 2, 3 succeeded, 1 running → want min(2, 5-3) = 2 active → create 1.
 */
export function planJob(job: KubeObject, pods: readonly KubeObject[], now: number, backoff: BackoffRecord): JobPlan {
  const spec = jobSpec(job);
  const old = jobStatus(job);
  const nowText = rfc3339(now);
  const indexed = spec.completionMode === 'Indexed';
  const completions = typeof spec.completions === 'number' ? spec.completions : undefined;
  const parallelism = spec.parallelism ?? 1;
  const backoffLimit = spec.backoffLimit ?? 6;
  const plan: JobPlan = { removeFinalizers: [], create: [], delete: [], status: old, events: [], backoff };
  const tracked = (p: KubeObject): boolean => p.metadata.finalizers?.includes(JOB_TRACKING_FINALIZER) ?? false;
  const alreadyFinished = isJobFinished(job);

  if (job.metadata.deletionTimestamp || alreadyFinished) {
    // A finished or deleted Job only lets go of its pods (and deletes any still running, if finished).
    plan.removeFinalizers = pods.filter(tracked);
    if (alreadyFinished) plan.delete = pods.filter(isPodActive);
    return plan;
  }

  // 1. Count finished pods.
  const uncountedSucceeded = new Set(old.uncountedTerminatedPods?.succeeded ?? []);
  const uncountedFailed = new Set(old.uncountedTerminatedPods?.failed ?? []);
  const completed = new Set(parseIndexes(old.completedIndexes, completions));
  const newSucceeded: KubeObject[] = [];
  const newFailed: KubeObject[] = [];
  let failJob: string | undefined;
  for (const pod of pods) {
    if (!tracked(pod)) continue;
    const uid = pod.metadata.uid!;
    const phase = podPhase(pod);
    if (phase === 'Succeeded') {
      plan.removeFinalizers.push(pod);
      const ix = podIndex(pod);
      if (indexed && (ix === undefined || completions === undefined || ix >= completions || completed.has(ix)))
        continue;
      if (indexed) completed.add(ix!);
      if (!uncountedSucceeded.has(uid)) newSucceeded.push(pod);
      uncountedSucceeded.add(uid);
    } else if (phase === 'Failed' || (isTerminating(pod) && spec.podReplacementPolicy !== 'Failed')) {
      plan.removeFinalizers.push(pod);
      // Pods stopped because the Job already met its success criteria are not failures.
      if (phase !== 'Failed' && hasCondition(old, 'SuccessCriteriaMet')) continue;
      const match = phase === 'Failed' ? matchPodFailurePolicy(job, pod) : undefined;
      if (match?.action === 'Ignore') continue;
      if (match?.action === 'FailJob') failJob ??= match.message;
      if (!uncountedFailed.has(uid)) newFailed.push(pod);
      uncountedFailed.add(uid);
    }
  }
  const uncounted = { succeeded: [...uncountedSucceeded], failed: [...uncountedFailed] };
  if (newSucceeded.length > 0 || newFailed.length > 0) {
    plan.recordUncounted = { ...old, uncountedTerminatedPods: uncounted };
    if (indexed) plan.recordUncounted.completedIndexes = formatIndexes(completed);
  }
  plan.backoff = nextBackoffRecord(backoff, newSucceeded, newFailed);

  const succeeded = indexed ? completed.size : (old.succeeded ?? 0) + uncounted.succeeded.length;
  const failed = (old.failed ?? 0) + uncounted.failed.length;
  let active = pods.filter(isPodActive);
  const terminatingPods = pods.filter((p) => isTerminating(p) && !isTerminal(p));

  let conditions = [...(old.conditions ?? [])];
  // Without `delete`: it turns the object into a slow dictionary that every later copy and comparison pays for.
  const { completionTime: _previous, ...status }: JobStatus = old;
  const suspended = spec.suspend === true;
  if (!suspended && !status.startTime) status.startTime = nowText;

  // 2–3. Terminal decisions.
  let target: { final: 'Failed' | 'Complete'; reason: string; message: string } | undefined;
  const failureTarget = hasCondition(old, 'FailureTarget');
  const successTarget = hasCondition(old, 'SuccessCriteriaMet');
  if (failureTarget) target = { final: 'Failed', reason: failureTarget.reason, message: failureTarget.message };
  else if (successTarget) target = { final: 'Complete', reason: successTarget.reason, message: successTarget.message };
  else {
    const restarts =
      spec.template?.spec?.restartPolicy === 'OnFailure'
        ? active.reduce((sum, p) => sum + containerStatuses(p).reduce((s, c) => s + (c.restartCount ?? 0), 0), 0)
        : 0;
    const start = status.startTime ? Date.parse(status.startTime) : undefined;
    if (failJob) target = { final: 'Failed', reason: 'PodFailurePolicy', message: failJob };
    else if (failed + restarts > backoffLimit)
      target = {
        final: 'Failed',
        reason: 'BackoffLimitExceeded',
        message: 'Job has reached the specified backoff limit',
      };
    else if (
      !suspended &&
      spec.activeDeadlineSeconds !== undefined &&
      start !== undefined &&
      now - start >= spec.activeDeadlineSeconds * 1000
    ) {
      target = {
        final: 'Failed',
        reason: 'DeadlineExceeded',
        message: 'Job was active longer than specified deadline',
      };
    } else if (indexed && completions !== undefined) {
      const rule = matchSuccessPolicy(spec, completed, completions);
      if (rule !== undefined)
        target = { final: 'Complete', reason: 'SuccessPolicy', message: `Matched rules at index ${rule}` };
      else if (completed.size >= completions)
        target = {
          final: 'Complete',
          reason: 'CompletionsReached',
          message: 'Reached expected number of succeeded pods',
        };
    } else if (completions !== undefined ? succeeded >= completions : succeeded > 0 && active.length === 0) {
      target = {
        final: 'Complete',
        reason: 'CompletionsReached',
        message: 'Reached expected number of succeeded pods',
      };
    }
    if (target)
      conditions = setCondition(
        conditions,
        target.final === 'Failed' ? 'FailureTarget' : 'SuccessCriteriaMet',
        'True',
        target.reason,
        target.message,
        nowText,
      );
  }

  if (target) {
    // Stop what still runs; the final condition waits until no pod is terminating and all are counted.
    plan.delete = active;
    const waiting = active.length > 0 || terminatingPods.length > 0;
    if (!waiting) {
      conditions = setCondition(conditions, target.final, 'True', target.reason, target.message, nowText);
      if (target.final === 'Complete') {
        status.completionTime = nowText;
        plan.events.push({ type: 'Normal', reason: 'Completed', message: 'Job completed' });
      } else plan.events.push({ type: 'Warning', reason: target.reason, message: target.message });
      plan.removeFinalizers = pods.filter(tracked);
    }
    active = [];
  } else if (suspended) {
    plan.delete = active;
    active = [];
    if (!hasCondition(old, 'Suspended'))
      plan.events.push({ type: 'Normal', reason: 'Suspended', message: 'Job suspended' });
    conditions = setCondition(conditions, 'Suspended', 'True', 'JobSuspended', 'Job suspended', nowText);
    delete status.startTime;
  } else {
    if (hasCondition(old, 'Suspended')) {
      conditions = setCondition(conditions, 'Suspended', 'False', 'JobResumed', 'Job resumed', nowText);
      plan.events.push({ type: 'Normal', reason: 'Resumed', message: 'Job resumed' });
      status.startTime = nowText;
    }
    planActivePods(plan, {
      indexed,
      completions,
      parallelism,
      succeeded,
      completed,
      active,
      terminating: terminatingPods.length,
      spec,
      now,
    });
    active = active.filter((p) => !plan.delete.includes(p));
    if (spec.activeDeadlineSeconds !== undefined && status.startTime) {
      const left = Date.parse(status.startTime) + spec.activeDeadlineSeconds * 1000 - now;
      if (left > 0) plan.requeueAfterMs = Math.min(plan.requeueAfterMs ?? Infinity, left);
    }
  }

  status.active = active.length + plan.create.length;
  status.ready = active.filter(isPodReady).length;
  status.terminating = terminatingPods.length + plan.delete.length;
  status.succeeded = succeeded;
  status.failed = failed;
  if (indexed) status.completedIndexes = formatIndexes(completed);
  status.uncountedTerminatedPods = {};
  if (conditions.length > 0) status.conditions = conditions;
  plan.status = tidyStatus(status);
  return plan;
}

/** Keep the right number of pods active (step 5). */
function planActivePods(
  plan: JobPlan,
  o: {
    indexed: boolean;
    completions?: number;
    parallelism: number;
    succeeded: number;
    completed: Set<number>;
    active: KubeObject[];
    terminating: number;
    spec: JobSpec;
    now: number;
  },
): void {
  let wantActive: number;
  if (o.completions === undefined) wantActive = o.succeeded > 0 ? o.active.length : o.parallelism;
  else wantActive = Math.max(0, Math.min(o.parallelism, o.completions - o.succeeded));

  const remove: KubeObject[] = [];
  let active = o.active;
  if (o.indexed) {
    // Pods of an index already completed, out of range, or duplicated go.
    const seen = new Set<number>();
    const keep: KubeObject[] = [];
    for (const p of [...active].sort((a, b) =>
      (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? ''),
    )) {
      const ix = podIndex(p);
      if (ix === undefined || ix >= (o.completions ?? 0) || o.completed.has(ix) || seen.has(ix)) remove.push(p);
      else {
        seen.add(ix);
        keep.push(p);
      }
    }
    active = keep;
  }
  const excess = active.length - wantActive;
  if (excess > 0) remove.push(...[...active].sort(removalOrder).slice(0, excess));
  plan.delete = remove.slice(0, MAX_POD_CREATE_DELETE_PER_SYNC);
  const remaining = active.length - Math.max(0, excess);
  let diff = wantActive - remaining;
  if (o.spec.podReplacementPolicy === 'Failed') diff -= o.terminating;
  if (diff <= 0) return;
  const wait = remainingBackoffMs(plan.backoff, o.now);
  if (wait > 0) {
    plan.requeueAfterMs = wait;
    return;
  }
  diff = Math.min(diff, MAX_POD_CREATE_DELETE_PER_SYNC);
  if (!o.indexed) {
    for (let i = 0; i < diff; i++) plan.create.push({});
    return;
  }
  const busy = new Set(active.map(podIndex));
  for (let ix = 0; ix < (o.completions ?? 0) && plan.create.length < diff; ix++) {
    if (!o.completed.has(ix) && !busy.has(ix)) plan.create.push({ index: ix });
  }
}

/** Counters that are zero are omitted, as the API's omitempty does; ready and terminating stay (pointers). */
function tidyStatus(status: JobStatus): JobStatus {
  const out: JobStatus = {};
  for (const [k, v] of Object.entries(status)) {
    if ((k === 'active' || k === 'succeeded' || k === 'failed') && !v) continue;
    if (k === 'completedIndexes' && v === '') continue;
    out[k] = v;
  }
  return out;
}

export function statusChanged(job: KubeObject, status: JobStatus): boolean {
  return !deepEqual(jobStatus(job), status);
}
