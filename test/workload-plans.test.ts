import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { rfc3339 } from '../src/clock/clock.js';
import { jobNameFor, mostRecentScheduleTime, planCronJob, rfc3339In } from '../src/controllers/cronjob/plan.js';
import { parseSchedule } from '../src/controllers/cronjob/schedule.js';
import { daemonPod, nodeShouldRunDaemonPod, planDaemonSet } from '../src/controllers/daemonset.js';
import {
  hashRevision,
  newRevision,
  planUpdateRevision,
  revisionsToTruncate,
  templatePatch,
} from '../src/controllers/history.js';
import { nextBackoffRecord, remainingBackoffMs } from '../src/controllers/job/backoff.js';
import { jobPod } from '../src/controllers/job/controller.js';
import { formatIndexes, parseIndexes } from '../src/controllers/job/indexes.js';
import { JOB_TRACKING_FINALIZER, planJob } from '../src/controllers/job/plan.js';
import { planStatefulSet, statefulPod } from '../src/controllers/statefulset.js';
import { ttlRemainingMs } from '../src/controllers/ttl-after-finished.js';

// Plans are pure: these tests need no server. Times are on a fixed virtual day.
const T0 = Date.UTC(2025, 0, 1);
const S = 1000;
let uidSeq = 0;

function pod(
  name: string,
  opts: {
    phase?: string;
    ready?: boolean;
    owner?: KubeObject;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    exitCode?: number;
    finishedAt?: number;
    deleting?: boolean;
    finalizers?: string[];
    created?: number;
    nodeName?: string;
    spec?: Record<string, unknown>;
  } = {},
): KubeObject {
  const status: Record<string, unknown> = { phase: opts.phase ?? 'Pending' };
  if (opts.ready !== undefined)
    status.conditions = [
      { type: 'Ready', status: opts.ready ? 'True' : 'False', lastTransitionTime: rfc3339(opts.finishedAt ?? T0) },
    ];
  if (opts.exitCode !== undefined) {
    status.containerStatuses = [
      {
        name: 'main',
        state: {
          terminated: {
            exitCode: opts.exitCode,
            finishedAt: rfc3339(opts.finishedAt ?? T0),
            reason: opts.exitCode === 0 ? 'Completed' : 'Error',
          },
        },
      },
    ];
  }
  const meta: KubeObject['metadata'] = {
    name,
    namespace: 'default',
    uid: `uid-${name}-${uidSeq++}`,
    creationTimestamp: rfc3339(opts.created ?? T0),
    labels: opts.labels ?? {},
  };
  if (opts.annotations) meta.annotations = opts.annotations;
  if (opts.deleting) meta.deletionTimestamp = rfc3339(T0);
  if (opts.finalizers) meta.finalizers = opts.finalizers;
  if (opts.owner)
    meta.ownerReferences = [
      {
        apiVersion: 'x',
        kind: String(opts.owner.kind),
        name: opts.owner.metadata.name!,
        uid: opts.owner.metadata.uid!,
        controller: true,
      },
    ];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: meta,
    spec: {
      containers: [{ name: 'main', image: 'x' }],
      ...(opts.nodeName ? { nodeName: opts.nodeName } : {}),
      ...(opts.spec ?? {}),
    },
    status,
  };
}

function job(spec: Record<string, unknown>, status: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'pi', namespace: 'default', uid: 'job-uid', creationTimestamp: rfc3339(T0) },
    spec: {
      parallelism: 1,
      completions: 1,
      backoffLimit: 6,
      completionMode: 'NonIndexed',
      template: {
        metadata: { labels: { app: 'pi' } },
        spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: 'perl' }] },
      },
      ...spec,
    },
    status,
  };
}

const tracked = (j: KubeObject, name: string, opts: Parameters<typeof pod>[1] = {}): KubeObject =>
  pod(name, { owner: j, finalizers: [JOB_TRACKING_FINALIZER], ...opts });
const NONE = { failuresAfterLastSuccess: 0 };

describe('job back-off', () => {
  test('10 s doubling per consecutive failure, capped at 10 min, reset by a success', () => {
    assert.equal(remainingBackoffMs({ failuresAfterLastSuccess: 1, lastFailureTime: T0 }, T0), 10 * S);
    assert.equal(remainingBackoffMs({ failuresAfterLastSuccess: 3, lastFailureTime: T0 }, T0 + 5 * S), 35 * S);
    assert.equal(remainingBackoffMs({ failuresAfterLastSuccess: 20, lastFailureTime: T0 }, T0), 600 * S);
    assert.equal(remainingBackoffMs({ failuresAfterLastSuccess: 1, lastFailureTime: T0 }, T0 + 11 * S), 0);
    const j = job({});
    const failed = tracked(j, 'a', { phase: 'Failed', exitCode: 1, finishedAt: T0 });
    const later = tracked(j, 'b', { phase: 'Failed', exitCode: 1, finishedAt: T0 + 20 * S });
    const ok = tracked(j, 'c', { phase: 'Succeeded', exitCode: 0, finishedAt: T0 + 10 * S });
    assert.deepEqual(nextBackoffRecord(NONE, [], [failed]), { failuresAfterLastSuccess: 1, lastFailureTime: T0 });
    assert.deepEqual(nextBackoffRecord({ failuresAfterLastSuccess: 4, lastFailureTime: T0 }, [ok], [failed, later]), {
      failuresAfterLastSuccess: 1,
      lastFailureTime: T0 + 20 * S,
    });
  });

  test('completed indexes are kept as compressed intervals', () => {
    assert.equal(formatIndexes([0, 1, 2, 5, 7, 8, 9]), '0-2,5,7-9');
    assert.deepEqual(parseIndexes('0-2,5', 4), [0, 1, 2]);
  });
});

describe('planJob', () => {
  test('a new Job gets parallelism pods, and completes when they succeed', () => {
    const j = job({ completions: 3, parallelism: 2 });
    const first = planJob(j, [], T0, NONE);
    assert.equal(first.create.length, 2);
    assert.equal(first.status.startTime, rfc3339(T0));
    assert.equal(first.status.active, 2);

    const running = { ...j, status: first.status };
    const a = tracked(j, 'a', { phase: 'Succeeded', exitCode: 0 });
    const b = tracked(j, 'b', { phase: 'Running', ready: true });
    const second = planJob(running, [a, b], T0 + 5 * S, NONE);
    assert.deepEqual(second.recordUncounted?.uncountedTerminatedPods, { succeeded: [a.metadata.uid], failed: [] });
    assert.deepEqual(second.removeFinalizers, [a]);
    assert.equal(second.create.length, 1, 'min(parallelism 2, 3 - 1 succeeded) = 2 active wanted, 1 running');
    assert.equal(second.status.succeeded, 1);
    assert.deepEqual(second.status.uncountedTerminatedPods, {});

    const done = { ...j, status: { ...first.status, succeeded: 2 } };
    const c = tracked(j, 'c', { phase: 'Succeeded', exitCode: 0 });
    const last = planJob(done, [c], T0 + 9 * S, NONE);
    assert.deepEqual(
      last.status.conditions?.map((x) => [x.type, x.status, x.reason]),
      [
        ['SuccessCriteriaMet', 'True', 'CompletionsReached'],
        ['Complete', 'True', 'CompletionsReached'],
      ],
    );
    assert.equal(last.status.completionTime, rfc3339(T0 + 9 * S));
    assert.deepEqual(last.events, [{ type: 'Normal', reason: 'Completed', message: 'Job completed' }]);
  });

  test('a failure waits out the back-off before its replacement; backoffLimit fails the Job', () => {
    const j = job({ backoffLimit: 1 }, { startTime: rfc3339(T0) });
    const f1 = tracked(j, 'f1', { phase: 'Failed', exitCode: 1, finishedAt: T0 + S });
    const p1 = planJob(j, [f1], T0 + 2 * S, NONE);
    assert.equal(p1.create.length, 0);
    assert.equal(p1.requeueAfterMs, 9 * S);
    assert.equal(p1.status.failed, 1);
    const counted = { ...f1, metadata: { ...f1.metadata, finalizers: [] } };
    const p2 = planJob({ ...j, status: p1.status }, [counted], T0 + 11 * S, p1.backoff);
    assert.equal(p2.create.length, 1);

    const j2 = job({ backoffLimit: 1 }, { startTime: rfc3339(T0), failed: 1 });
    const f2 = tracked(j2, 'f2', { phase: 'Failed', exitCode: 1 });
    const p3 = planJob(j2, [f2], T0 + 30 * S, p1.backoff);
    assert.deepEqual(
      p3.status.conditions?.map((c) => [c.type, c.reason, c.message]),
      [
        ['FailureTarget', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit'],
        ['Failed', 'BackoffLimitExceeded', 'Job has reached the specified backoff limit'],
      ],
    );
    assert.equal(p3.status.completionTime, undefined);
    assert.deepEqual(p3.events, [
      { type: 'Warning', reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit' },
    ]);
  });

  test('activeDeadlineSeconds deletes the running pods and fails the Job once they are gone', () => {
    const j = job({ activeDeadlineSeconds: 30 }, { startTime: rfc3339(T0) });
    const r = tracked(j, 'r', { phase: 'Running', ready: true });
    const before = planJob(j, [r], T0 + 10 * S, NONE);
    assert.equal(before.requeueAfterMs, 20 * S);
    const at = planJob(j, [r], T0 + 30 * S, NONE);
    assert.deepEqual(at.delete, [r]);
    assert.deepEqual(
      at.status.conditions?.map((c) => c.type),
      ['FailureTarget'],
    );
    const after = planJob({ ...j, status: at.status }, [], T0 + 31 * S, NONE);
    assert.deepEqual(
      after.status.conditions?.map((c) => [c.type, c.reason]),
      [
        ['FailureTarget', 'DeadlineExceeded'],
        ['Failed', 'DeadlineExceeded'],
      ],
    );
  });

  test('podFailurePolicy: Ignore does not count, FailJob fails at once', () => {
    const policy = {
      rules: [
        { action: 'FailJob', onExitCodes: { operator: 'In', values: [42] } },
        { action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget' }] },
      ],
    };
    const j = job({ podFailurePolicy: policy }, { startTime: rfc3339(T0) });
    const evicted = tracked(j, 'e', { phase: 'Failed' });
    (evicted.status as Record<string, unknown>).conditions = [{ type: 'DisruptionTarget', status: 'True' }];
    const ignored = planJob(j, [evicted], T0, NONE);
    assert.equal(ignored.status.failed, undefined);
    assert.equal(ignored.create.length, 1, 'an ignored failure is replaced at once');
    const fatal = tracked(j, 'x', { phase: 'Failed', exitCode: 42 });
    const failed = planJob(j, [fatal], T0, NONE);
    assert.equal(failed.status.conditions?.at(-1)?.reason, 'PodFailurePolicy');
    assert.match(
      failed.status.conditions!.at(-1)!.message,
      /^Container main for pod default\/x failed with exit code 42 matching FailJob rule at index 0$/,
    );
  });

  test('Indexed: one pod per pending index with the completion index and hostname', () => {
    const j = job(
      { completionMode: 'Indexed', completions: 4, parallelism: 2 },
      { startTime: rfc3339(T0), completedIndexes: '0' },
    );
    const one = tracked(j, 'pi-1-x', {
      phase: 'Running',
      annotations: { 'batch.kubernetes.io/job-completion-index': '1' },
    });
    const plan = planJob(j, [one], T0, NONE);
    assert.deepEqual(plan.create, [{ index: 2 }]);
    const p = jobPod(j, 2);
    assert.equal(p.metadata.generateName, 'pi-2-');
    assert.equal(p.metadata.annotations?.['batch.kubernetes.io/job-completion-index'], '2');
    assert.equal(p.metadata.labels?.['batch.kubernetes.io/job-completion-index'], '2');
    assert.equal((p.spec as { hostname?: string }).hostname, 'pi-2');
    assert.deepEqual(p.metadata.finalizers, [JOB_TRACKING_FINALIZER]);
  });

  test('successPolicy completes an Indexed Job early and stops the rest; OnFailure restarts count against backoffLimit', () => {
    const j = job(
      {
        completionMode: 'Indexed',
        completions: 3,
        parallelism: 3,
        successPolicy: { rules: [{ succeededIndexes: '0', succeededCount: 1 }] },
      },
      { startTime: rfc3339(T0) },
    );
    const leader = tracked(j, 'pi-0-a', {
      phase: 'Succeeded',
      exitCode: 0,
      annotations: { 'batch.kubernetes.io/job-completion-index': '0' },
    });
    const worker = tracked(j, 'pi-1-b', {
      phase: 'Running',
      annotations: { 'batch.kubernetes.io/job-completion-index': '1' },
    });
    const plan = planJob(j, [leader, worker], T0, NONE);
    assert.deepEqual(plan.delete, [worker]);
    assert.deepEqual(
      plan.status.conditions?.map((c) => [c.type, c.reason, c.message]),
      [['SuccessCriteriaMet', 'SuccessPolicy', 'Matched rules at index 0']],
    );
    const after = planJob({ ...j, status: plan.status }, [], T0 + S, NONE);
    assert.equal(after.status.conditions?.at(-1)?.type, 'Complete');

    const restarting = job(
      {
        backoffLimit: 2,
        template: { spec: { restartPolicy: 'OnFailure', containers: [{ name: 'main', image: 'x' }] } },
      },
      { startTime: rfc3339(T0) },
    );
    const crashy = tracked(restarting, 'c', { phase: 'Running' });
    (crashy.status as Record<string, unknown>).containerStatuses = [
      { name: 'main', restartCount: 3, state: { waiting: { reason: 'CrashLoopBackOff' } } },
    ];
    assert.equal(planJob(restarting, [crashy], T0, NONE).status.conditions?.[0]?.reason, 'BackoffLimitExceeded');
  });

  test('suspend deletes active pods and sets Suspended; resume restarts the clock', () => {
    const j = job({ suspend: true }, { startTime: rfc3339(T0) });
    const r = tracked(j, 'r', { phase: 'Running' });
    const s = planJob(j, [r], T0 + S, NONE);
    assert.deepEqual(s.delete, [r]);
    assert.equal(s.status.startTime, undefined);
    assert.deepEqual(
      s.status.conditions?.map((c) => [c.type, c.status, c.reason]),
      [['Suspended', 'True', 'JobSuspended']],
    );
    const resumed = planJob(
      { ...j, spec: { ...(j.spec as object), suspend: false }, status: s.status },
      [],
      T0 + 60 * S,
      NONE,
    );
    assert.deepEqual(
      resumed.status.conditions?.map((c) => [c.type, c.status, c.reason]),
      [['Suspended', 'False', 'JobResumed']],
    );
    assert.equal(resumed.status.startTime, rfc3339(T0 + 60 * S));
    assert.equal(resumed.create.length, 1);
  });

  test('ttlSecondsAfterFinished counts from the finish', () => {
    const finished = job(
      { ttlSecondsAfterFinished: 100 },
      { conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: rfc3339(T0) }] },
    );
    assert.equal(ttlRemainingMs(finished, T0 + 60 * S), 40 * S);
    assert.equal(ttlRemainingMs(job({ ttlSecondsAfterFinished: 100 }), T0), undefined);
  });
});

describe('cron schedules', () => {
  test('standard fields, descriptors, time zones; six fields and unknown descriptors are rejected', () => {
    assert.equal(parseSchedule('@hourly').next(T0), T0 + 3600 * S);
    assert.equal(parseSchedule('0 2 * * *', 'Asia/Seoul').next(T0), Date.UTC(2025, 0, 1, 17));
    assert.equal(parseSchedule('TZ=America/New_York 30 9 * * MON-FRI').next(T0), Date.UTC(2025, 0, 1, 14, 30));
    assert.equal(parseSchedule('*/15 * * * *').previous(T0 + 20 * 60 * S), T0 + 15 * 60 * S);
    assert.throws(() => parseSchedule('0 0 0 13 * 5'), /expected exactly 5 fields/);
    assert.throws(() => parseSchedule('@minutely'), /unrecognized descriptor/);
    assert.throws(() => parseSchedule('0 * * * *', 'Mars/Olympus'), /unknown time zone/);
    assert.equal(rfc3339In(Date.UTC(2025, 0, 1, 17), 'Asia/Seoul'), '2025-01-02T02:00:00+09:00');
  });

  test('every-day UTC schedules: next and previous across hour, day and year ends, as cron-parser answers them', () => {
    const at = (text: string): number => Date.parse(text);
    const twice = parseSchedule('3,7 */5 * * *');
    assert.equal(
      twice.next(at('2025-01-01T20:07:00Z')),
      at('2025-01-02T00:03:00Z'),
      'past the last hour: the next day',
    );
    assert.equal(twice.next(at('2025-01-01T05:03:00.001Z')), at('2025-01-01T05:07:00Z'));
    assert.equal(twice.previous(at('2025-01-01T04:59:59Z')), at('2025-01-01T00:07:00Z'));
    assert.equal(
      twice.previous(at('2025-01-01T00:02:59Z')),
      at('2024-12-31T20:07:00Z'),
      'before the first: the day before',
    );
    assert.equal(parseSchedule('30 23 * * *').next(at('2025-12-31T23:30:00Z')), at('2026-01-01T23:30:00Z'));
    assert.equal(
      parseSchedule('*/15 * * * *').next(at('2025-03-01T10:15:00Z')),
      at('2025-03-01T10:30:00Z'),
      'strictly after',
    );
    assert.equal(
      parseSchedule('0 9 * * 0-6').previous(at('2025-03-01T09:00:00Z')),
      at('2025-03-01T09:00:00Z'),
      'at or before',
    );
    // The same answers as the general path (cron-parser) gives, at instants spread over a leap-year February.
    const general = parseSchedule('TZ=Etc/GMT 3,7 */5 * * *');
    for (let t = at('2024-02-27T00:00:00Z'); t < at('2024-03-02T00:00:00Z'); t += 7_777_777) {
      assert.equal(twice.next(t), general.next(t), new Date(t).toISOString());
      assert.equal(twice.previous(t), general.previous(t), new Date(t).toISOString());
    }
  });

  const cron = (spec: Record<string, unknown>, status: Record<string, unknown> = {}): KubeObject => ({
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: 'hello', namespace: 'default', uid: 'cj-uid', creationTimestamp: rfc3339(T0) },
    spec: {
      schedule: '0 * * * *',
      concurrencyPolicy: 'Allow',
      suspend: false,
      successfulJobsHistoryLimit: 3,
      failedJobsHistoryLimit: 1,
      jobTemplate: { spec: { template: { spec: {} } } },
      ...spec,
    },
    status,
  });

  test('only the most recent missed time runs; startingDeadlineSeconds narrows the window', () => {
    const cj = cron({}, { lastScheduleTime: rfc3339(T0 + 3600 * S) });
    const now = T0 + 4.5 * 3600 * S;
    assert.deepEqual(mostRecentScheduleTime(cj, now, parseSchedule('0 * * * *')), {
      mostRecent: T0 + 4 * 3600 * S,
      missed: 3,
    });
    const narrow = cron({ startingDeadlineSeconds: 600 }, { lastScheduleTime: rfc3339(T0 + 3600 * S) });
    assert.deepEqual(mostRecentScheduleTime(narrow, now, parseSchedule('0 * * * *')), { missed: 0 });
    const plan = planCronJob(cj, [], now);
    assert.equal(plan.create?.metadata.name, jobNameFor('hello', T0 + 4 * 3600 * S));
    assert.equal(plan.create?.metadata.name, `hello-${(T0 + 4 * 3600 * S) / 60000}`);
    assert.equal(plan.status.lastScheduleTime, rfc3339(T0 + 4 * 3600 * S));
    assert.equal(plan.requeueAfterMs, 1800 * S + 100, 'looks again 100 ms after 05:00');
  });

  const ownedJob = (name: string, start: number, condition?: string): KubeObject => ({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      namespace: 'default',
      uid: `uid-${name}`,
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'hello', uid: 'cj-uid', controller: true }],
    },
    status: {
      startTime: rfc3339(start),
      ...(condition
        ? {
            conditions: [{ type: condition, status: 'True', lastTransitionTime: rfc3339(start + S) }],
            completionTime: condition === 'Complete' ? rfc3339(start + S) : undefined,
          }
        : {}),
    },
  });

  test('Forbid skips while a Job runs; Replace deletes it; history limits trim the oldest', () => {
    const running = ownedJob('hello-1', T0);
    const ref = { kind: 'Job', name: 'hello-1', uid: 'uid-hello-1', namespace: 'default', apiVersion: 'batch/v1' };
    const now = T0 + 3600 * S + 100;
    const forbid = planCronJob(cron({ concurrencyPolicy: 'Forbid' }, { active: [ref] }), [running], now);
    assert.equal(forbid.create, undefined);
    assert.equal(forbid.events.at(-1)?.reason, 'JobAlreadyActive');
    const replace = planCronJob(cron({ concurrencyPolicy: 'Replace' }, { active: [ref] }), [running], now);
    assert.deepEqual(replace.delete, [running]);
    assert.ok(replace.create);

    const done = [0, 1, 2, 3, 4].map((i) => ownedJob(`hello-ok${i}`, T0 + i * 3600 * S, 'Complete'));
    const failed = [0, 1].map((i) => ownedJob(`hello-bad${i}`, T0 + i * 3600 * S, 'Failed'));
    const trimmed = planCronJob(
      cron({}, { lastScheduleTime: rfc3339(T0 + 3600 * S) }),
      [...done, ...failed],
      T0 + 3600 * S + 5,
    );
    assert.deepEqual(
      trimmed.delete.map((j) => j.metadata.name),
      ['hello-ok0', 'hello-ok1', 'hello-bad0'],
    );
    assert.equal(trimmed.status.lastSuccessfulTime, rfc3339(T0 + 4 * 3600 * S + S));
  });
});

describe('planStatefulSet', () => {
  const sts = (spec: Record<string, unknown> = {}): KubeObject => ({
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web', namespace: 'default', uid: 'sts-uid', generation: 1 },
    spec: {
      replicas: 3,
      serviceName: 'nginx',
      podManagementPolicy: 'OrderedReady',
      selector: { matchLabels: { app: 'web' } },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 0 } },
      template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'nginx', image: 'nginx:1' }] } },
      volumeClaimTemplates: [{ metadata: { name: 'www' }, spec: { resources: { requests: { storage: '1Gi' } } } }],
      ...spec,
    },
  });
  const rev = (set: KubeObject, image: string, n: number): KubeObject => {
    const template = { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'nginx', image }] } };
    return newRevision(set, 'apps/v1', 'StatefulSet', { app: 'web' }, templatePatch(template), n, 0);
  };
  const member = (set: KubeObject, r: KubeObject, ord: number, ready = true): KubeObject => {
    const p = statefulPod(set, r, ord);
    return {
      ...p,
      metadata: { ...p.metadata, uid: `uid-web-${ord}`, creationTimestamp: rfc3339(T0) },
      status: {
        phase: ready ? 'Running' : 'Pending',
        conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
      },
    };
  };

  test('OrderedReady creates web-0 first, with its claim, hostname and subdomain; web-1 only once web-0 is Ready', () => {
    const set = sts();
    const a = rev(set, 'nginx:1', 1);
    const first = planStatefulSet(set, [], a, a, new Map(), T0);
    assert.deepEqual(
      first.createPods.map((p) => p.metadata.name),
      ['web-0'],
    );
    assert.deepEqual(
      first.createClaims.map((c) => c.metadata.name),
      ['www-web-0'],
    );
    const spec0 = first.createPods[0]!.spec as { hostname: string; subdomain: string; volumes: unknown[] };
    assert.equal(spec0.hostname, 'web-0');
    assert.equal(spec0.subdomain, 'nginx');
    assert.deepEqual(spec0.volumes, [{ name: 'www', persistentVolumeClaim: { claimName: 'www-web-0' } }]);
    assert.equal(
      first.createPods[0]!.metadata.annotations?.['kube-sim.dev/dns-name'],
      'web-0.nginx.default.svc.cluster.local',
    );
    assert.deepEqual(planStatefulSet(set, [member(set, a, 0, false)], a, a, new Map(), T0).createPods, []);
    assert.deepEqual(
      planStatefulSet(set, [member(set, a, 0)], a, a, new Map(), T0).createPods.map((p) => p.metadata.name),
      ['web-1'],
    );
    const parallel = planStatefulSet(sts({ podManagementPolicy: 'Parallel' }), [], a, a, new Map(), T0);
    assert.deepEqual(
      parallel.createPods.map((p) => p.metadata.name),
      ['web-0', 'web-1', 'web-2'],
    );
  });

  test('scale down removes the highest ordinal first, one at a time', () => {
    const set = sts({ replicas: 1 });
    const a = rev(set, 'nginx:1', 1);
    const pods = [0, 1, 2].map((i) => member(set, a, i));
    assert.deepEqual(
      planStatefulSet(set, pods, a, a, new Map(), T0).deletePods.map((p) => p.metadata.name),
      ['web-2'],
    );
    const terminating = { ...pods[2]!, metadata: { ...pods[2]!.metadata, deletionTimestamp: rfc3339(T0) } };
    assert.deepEqual(planStatefulSet(set, [pods[0]!, pods[1]!, terminating], a, a, new Map(), T0).deletePods, []);
  });

  test('rolling update goes from the highest ordinal down to the partition', () => {
    const set = sts({ updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 1 } } });
    const a = rev(set, 'nginx:1', 1);
    const b = rev(set, 'nginx:2', 2);
    const old = [0, 1, 2].map((i) => member(set, a, i));
    const s1 = planStatefulSet(set, old, a, b, new Map(), T0);
    assert.deepEqual(
      s1.deletePods.map((p) => p.metadata.name),
      ['web-2'],
    );
    const s2 = planStatefulSet(set, [old[0]!, old[1]!, member(set, b, 2)], a, b, new Map(), T0);
    assert.deepEqual(
      s2.deletePods.map((p) => p.metadata.name),
      ['web-1'],
    );
    const s3 = planStatefulSet(set, [old[0]!, member(set, b, 1), member(set, b, 2)], a, b, new Map(), T0);
    assert.deepEqual(s3.deletePods, [], 'web-0 is below the partition');
    assert.equal(s3.status.updatedReplicas, 2);
    assert.equal(s3.status.currentRevision, a.metadata.name);
    const recreated = planStatefulSet(set, [old[0]!, member(set, b, 2)], a, b, new Map(), T0);
    assert.equal(recreated.createPods[0]!.metadata.labels?.['controller-revision-hash'], b.metadata.name);
  });

  test('revisions: same data keeps the newest, a rollback renumbers the old one, truncation keeps live ones', () => {
    const set = sts();
    const a = rev(set, 'nginx:1', 1);
    const b = rev(set, 'nginx:2', 2);
    assert.match(a.metadata.name!, /^web-[bcdfghjklmnpqrstvwxz2456789]+$/);
    assert.notEqual(hashRevision(a.data), hashRevision(b.data));
    assert.equal(planUpdateRevision([a, b], rev(set, 'nginx:2', 3)).action, 'none');
    assert.deepEqual(planUpdateRevision([a, b], rev(set, 'nginx:1', 3)), { action: 'renumber', revision: a, to: 3 });
    assert.equal(planUpdateRevision([a, b], rev(set, 'nginx:3', 3)).action, 'create');
    assert.deepEqual(revisionsToTruncate([a, b], new Set([b.metadata.name!]), 0), [a]);
  });
});

describe('planDaemonSet', () => {
  const node = (name: string, labels: Record<string, string> = {}, taints: unknown[] = []): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name, ...labels } },
    spec: { taints },
  });
  const ds = (
    podSpec: Record<string, unknown> = {},
    strategy: Record<string, unknown> = { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } },
  ): KubeObject => ({
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'agent', namespace: 'default', uid: 'ds-uid', generation: 1 },
    spec: {
      selector: { matchLabels: { app: 'agent' } },
      updateStrategy: strategy,
      template: {
        metadata: { labels: { app: 'agent' } },
        spec: { containers: [{ name: 'a', image: 'a:1' }], ...podSpec },
      },
    },
  });
  const onNode = (set: KubeObject, nodeName: string, hash: string, ready = true): KubeObject => {
    const p = daemonPod(set, nodeName, hash);
    return {
      ...p,
      metadata: {
        ...p.metadata,
        name: `agent-${nodeName}-${hash}`,
        uid: `uid-${nodeName}-${hash}`,
        creationTimestamp: rfc3339(T0),
      },
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
    };
  };

  test('one pod per eligible node: nodeSelector, taints and the automatic tolerations', () => {
    const set = ds({ nodeSelector: { disk: 'ssd' } });
    const nodes = [
      node('n1', { disk: 'ssd' }),
      node('n2', { disk: 'hdd' }),
      node('n3', { disk: 'ssd' }, [{ key: 'dedicated', value: 'db', effect: 'NoSchedule' }]),
      node('n4', { disk: 'ssd' }, [
        { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' },
        { key: 'node.kubernetes.io/not-ready', effect: 'NoExecute' },
      ]),
    ];
    const plan = planDaemonSet(set, nodes, [], 'h1', T0);
    assert.deepEqual(plan.createOn, ['n1', 'n4']);
    assert.equal(plan.status.desiredNumberScheduled, 2);
    assert.deepEqual(
      nodeShouldRunDaemonPod(set, nodes[2]!),
      { shouldRun: false, shouldContinueRunning: true },
      'NoSchedule keeps a running pod',
    );
    const p = daemonPod(set, 'n1', 'h1');
    assert.deepEqual((p.spec as { affinity: unknown }).affinity, {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] }],
        },
      },
    });
    assert.equal((p.spec as { nodeName?: string }).nodeName, undefined, 'the scheduler binds it');
  });

  test('relabelled and removed nodes lose their pods; numberMisscheduled counts stragglers', () => {
    const set = ds({ nodeSelector: { role: 'edge' } });
    const pods = [onNode(set, 'n1', 'h1'), onNode(set, 'n2', 'h1'), onNode(set, 'gone', 'h1')];
    const plan = planDaemonSet(set, [node('n1', { role: 'edge' }), node('n2', { role: 'core' })], pods, 'h1', T0);
    assert.deepEqual(plan.deletePods.map((p) => p.metadata.name).sort(), ['agent-gone-h1', 'agent-n2-h1']);
    assert.equal(plan.status.numberMisscheduled, 1);
    assert.equal(plan.status.numberReady, 1);
  });

  test('rolling update: maxUnavailable 1 replaces one node at a time; maxSurge starts the new pod first', () => {
    const set = ds();
    const nodes = ['n1', 'n2', 'n3'].map((n) => node(n));
    const old = nodes.map((n) => onNode(set, n.metadata.name!, 'old'));
    const plan = planDaemonSet(set, nodes, old, 'new', T0);
    assert.equal(plan.deletePods.length, 1);
    assert.equal(plan.status.updatedNumberScheduled, undefined);
    const mid = planDaemonSet(set, nodes, [onNode(set, 'n1', 'new', false), old[1]!, old[2]!], 'new', T0);
    assert.deepEqual(mid.deletePods, [], 'n1 is not available yet');
    const surge = ds({}, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    const s1 = planDaemonSet(surge, nodes, old, 'new', T0);
    assert.deepEqual(s1.createOn, ['n1']);
    assert.deepEqual(s1.deletePods, []);
    const s2 = planDaemonSet(surge, nodes, [onNode(surge, 'n1', 'new'), ...old], 'new', T0);
    assert.deepEqual(
      s2.deletePods.map((p) => p.metadata.name),
      ['agent-n1-old'],
    );
    assert.deepEqual(planDaemonSet(ds({}, { type: 'OnDelete' }), nodes, old, 'new', T0).deletePods, []);
  });
});
