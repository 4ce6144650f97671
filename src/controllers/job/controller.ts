import { ApiError } from '../../api/errors.js';
import { deepCopy, isPlainObject, type KubeObject } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import {
  ReconcileLoop,
  type Controller,
  type ControllerContext,
  type ReconcileResult,
} from '../../runtime/controller.js';
import { Expectations } from '../../runtime/expectations.js';
import { controlledBy, indexByController, newControllerRef, wakeOwnerOnPodEvents } from '../controller-ref.js';
import { NO_BACKOFF, type BackoffRecord } from './backoff.js';
import { COMPLETION_INDEX } from './indexes.js';
import { JOB_TRACKING_FINALIZER, jobSpec, planJob, statusChanged, type JobStatus } from './plan.js';

/**
 * kube-controller-manager's syncJobBatchPeriod: pod events and the Job's own status updates sync it a second
 * later, so that the changes of that second (a pod bound, started and ready) make one sync and one status write.
 */
export const SYNC_JOB_BATCH_PERIOD_MS = 1000;

/**
 * The Job controller: runs a Job's pods to completion (see planJob for the rules), counting finished pods
 * through the job-tracking finalizer, and re-syncing on the clock for back-off and activeDeadlineSeconds.
 */
export function jobController(ctx: ControllerContext): Controller {
  const jobs = ctx.informers.for(Resources.jobs);
  const pods = ctx.informers.for(Resources.pods);
  indexByController(pods);
  const expectations = new Expectations(ctx.clock);
  const backoffs = new Map<string, BackoffRecord>();
  const recorder = ctx.recorder('job-controller');
  const loop = new ReconcileLoop('job', ctx, reconcile, 2);
  const keyOf = (job: KubeObject): string => `${job.metadata.namespace}/${job.metadata.name}`;

  const syncBatched = { add: (key: string) => loop.queue.addAfter(key, SYNC_JOB_BATCH_PERIOD_MS) };
  jobs.addEventHandler({
    add: (job) => loop.queue.add(keyOf(job)),
    // As job_controller.go's updateJob: a spec change (new generation) syncs at once, a status update batched.
    update: (old, job) =>
      (job.metadata.generation === old.metadata.generation ? syncBatched : loop.queue).add(keyOf(job)),
    delete: (job) => {
      expectations.forget(keyOf(job));
      backoffs.delete(job.metadata.uid!);
    },
  });
  wakeOwnerOnPodEvents(pods, 'Job', syncBatched, expectations);

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const job = jobs.get(namespace, name);
    if (!job || !expectations.satisfied(key)) return;
    const uid = job.metadata.uid!;
    const owned = controlledBy(pods, uid);
    const plan = planJob(job, owned, ctx.clock.now(), backoffs.get(uid) ?? NO_BACKOFF);

    let current = job;
    if (plan.recordUncounted) current = await writeStatus(current, plan.recordUncounted);
    backoffs.set(uid, plan.backoff);
    await Promise.all([...new Set(plan.removeFinalizers)].map(removeTrackingFinalizer));

    if (plan.delete.length > 0) {
      expectations.expectDeletions(
        key,
        plan.delete.map((p) => p.metadata.uid!),
      );
      await Promise.all(
        plan.delete.map(async (pod) => {
          try {
            await ctx.client.delete(Resources.pods, namespace, pod.metadata.name!, {
              preconditions: { uid: pod.metadata.uid! },
            });
            recorder.event(job, 'Normal', 'SuccessfulDelete', `Deleted pod: ${pod.metadata.name}`);
          } catch (err) {
            expectations.deletionObserved(key, pod.metadata.uid!);
            if (!(err instanceof ApiError && err.code === 404))
              recorder.event(job, 'Warning', 'FailedDelete', `Error deleting: ${(err as Error).message}`);
          }
        }),
      );
    }
    if (plan.create.length > 0) {
      expectations.expectCreations(key, plan.create.length);
      await Promise.all(
        plan.create.map(async ({ index }) => {
          try {
            const pod = await ctx.client.create(Resources.pods, namespace, jobPod(job, index));
            recorder.event(job, 'Normal', 'SuccessfulCreate', `Created pod: ${pod.metadata.name}`);
          } catch (err) {
            expectations.creationObserved(key);
            recorder.event(job, 'Warning', 'FailedCreate', `Error creating: ${(err as Error).message}`);
          }
        }),
      );
    }
    if (statusChanged(current, plan.status)) current = await writeStatus(current, plan.status);
    for (const e of plan.events) recorder.event(job, e.type, e.reason, e.message);
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  }

  async function writeStatus(job: KubeObject, status: JobStatus): Promise<KubeObject> {
    return ctx.client.updateStatus(Resources.jobs, { ...job, status });
  }

  async function removeTrackingFinalizer(pod: KubeObject): Promise<void> {
    const i = pod.metadata.finalizers?.indexOf(JOB_TRACKING_FINALIZER) ?? -1;
    if (i < 0) return;
    try {
      await ctx.client.patch(Resources.pods, pod.metadata.namespace, pod.metadata.name!, 'json', [
        { op: 'test', path: `/metadata/finalizers/${i}`, value: JOB_TRACKING_FINALIZER },
        { op: 'remove', path: `/metadata/finalizers/${i}` },
      ]);
    } catch (err) {
      // Gone already, or its finalizers moved under us: the next sync looks again.
      if (!(err instanceof ApiError && (err.code === 404 || err.code === 422 || err.code === 409))) throw err;
    }
  }

  return {
    name: 'job',
    start: async () => loop.start(),
    stop: () => loop.stop(),
  };
}

/** A pod for the Job from its template (with the completion index for Indexed Jobs), tracked by the finalizer. */
export function jobPod(job: KubeObject, index?: number): KubeObject {
  const template = deepCopy(
    (jobSpec(job).template ?? {}) as { metadata?: Record<string, unknown>; spec?: Record<string, unknown> },
  );
  const meta = template.metadata ?? {};
  const labels = { ...((meta.labels as Record<string, string> | undefined) ?? {}) };
  const annotations = { ...((meta.annotations as Record<string, string> | undefined) ?? {}) };
  const spec = template.spec ?? {};
  const name = job.metadata.name!;
  if (index !== undefined) {
    annotations[COMPLETION_INDEX] = String(index);
    labels[COMPLETION_INDEX] = String(index);
    if (!spec.hostname) spec.hostname = `${name}-${index}`;
    for (const list of ['initContainers', 'containers']) {
      for (const c of Array.isArray(spec[list]) ? (spec[list] as Array<Record<string, unknown>>) : []) {
        const env = Array.isArray(c.env) ? (c.env as Array<Record<string, unknown>>) : [];
        if (env.some((e) => e.name === 'JOB_COMPLETION_INDEX')) continue;
        c.env = [
          ...env,
          {
            name: 'JOB_COMPLETION_INDEX',
            valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${COMPLETION_INDEX}']` } },
          },
        ];
      }
    }
  }
  const metadata: KubeObject['metadata'] = {
    generateName: index !== undefined ? `${name}-${index}-` : `${name}-`,
    namespace: job.metadata.namespace,
    labels,
    finalizers: [JOB_TRACKING_FINALIZER],
    ownerReferences: [newControllerRef(job, 'batch/v1', 'Job')],
  };
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec: isPlainObject(spec) ? spec : {} };
}
