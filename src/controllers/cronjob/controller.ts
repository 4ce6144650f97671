import { ApiError, ignoreNotFound } from '../../api/errors.js';
import type { KubeObject } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import {
  ReconcileLoop,
  type Controller,
  type ControllerContext,
  type ReconcileResult,
} from '../../runtime/controller.js';
import { controlledBy, indexByController, ownerKey } from '../controller-ref.js';
import { cronJobStatus, cronStatusChanged, planCronJob, withCreatedJob } from './plan.js';

/**
 * The CronJob controller: creates each schedule time's Job on the injected clock (it asks to be woken
 * 100 ms after the next activation), applies the concurrency policy, and trims finished Jobs to the history
 * limits. See planCronJob for the rules.
 */
export function cronJobController(ctx: ControllerContext): Controller {
  const cronjobs = ctx.informers.for(Resources.cronjobs);
  const jobs = ctx.informers.for(Resources.jobs);
  indexByController(jobs);
  const recorder = ctx.recorder('cronjob-controller');
  const loop = new ReconcileLoop('cronjob', ctx, reconcile);
  const keyOf = (o: KubeObject): string => `${o.metadata.namespace}/${o.metadata.name}`;

  cronjobs.addEventHandler({
    add: (cj) => loop.queue.add(keyOf(cj)),
    update: (old, cj) => {
      // Its own status writes need no new look (the requeue timer covers the schedule).
      if (
        old.metadata.generation === cj.metadata.generation &&
        old.metadata.deletionTimestamp === cj.metadata.deletionTimestamp
      )
        return;
      loop.queue.add(keyOf(cj));
    },
  });
  const onJob = (job: KubeObject): void => {
    const key = ownerKey(job, 'CronJob');
    if (key) loop.queue.add(key);
  };
  jobs.addEventHandler({
    add: onJob,
    update: (old, job) => {
      // Only transitions the CronJob cares about: finishing, or starting to be deleted.
      const finished = (j: KubeObject): boolean =>
        (j.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions?.some(
          (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
        ) ?? false;
      if (finished(old) !== finished(job) || old.metadata.deletionTimestamp !== job.metadata.deletionTimestamp)
        onJob(job);
    },
    delete: onJob,
  });

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const cj = cronjobs.get(namespace, name);
    if (!cj) return;
    const owned = controlledBy(jobs, cj.metadata.uid!);
    // An active Job the cache does not show may just be new: ask the API before calling it missing.
    const known = new Set(owned.map((j) => j.metadata.uid));
    for (const ref of cronJobStatus(cj).active ?? []) {
      if (!ref.uid || known.has(ref.uid) || !ref.name) continue;
      const job = await ignoreNotFound(ctx.client.get(Resources.jobs, namespace, ref.name));
      if (job && job.metadata.uid === ref.uid) owned.push(job);
    }
    const plan = planCronJob(cj, owned, ctx.clock.now());

    for (const job of plan.delete) {
      await ignoreNotFound(
        ctx.client.delete(Resources.jobs, namespace, job.metadata.name!, {
          propagationPolicy: 'Background',
          preconditions: { uid: job.metadata.uid! },
        }),
      );
    }
    let status = plan.status;
    if (plan.create) {
      try {
        const job = await ctx.client.create(Resources.jobs, namespace, plan.create);
        status = withCreatedJob(status, job);
        recorder.event(cj, 'Normal', 'SuccessfulCreate', `Created job ${job.metadata.name}`);
      } catch (err) {
        // Already there (made before a restart, or by someone else): this schedule time is handled.
        if (!(err instanceof ApiError && err.code === 409)) {
          recorder.event(cj, 'Warning', 'FailedCreate', `Error creating job: ${(err as Error).message}`);
          throw err;
        }
      }
    }
    for (const e of plan.events) recorder.event(cj, e.type, e.reason, e.message);
    if (cronStatusChanged(cj, status)) await ctx.client.updateStatus(Resources.cronjobs, { ...cj, status });
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  }

  return { name: 'cronjob', start: async () => loop.start(), stop: () => loop.stop() };
}
