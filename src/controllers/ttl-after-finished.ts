import { isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import { isJobFinished, jobFinishTime } from './job/plan.js';
import { ignoreNotFound } from '../api/errors.js';

/**
 * Milliseconds until a finished Job with spec.ttlSecondsAfterFinished expires: ≤ 0 means delete it now,
 * undefined means it never expires (no TTL, not finished, or already being deleted).
 *
 * Example: finished at 12:00:00 with ttlSecondsAfterFinished 100 → at 12:01:00 the answer is 40 000.
 */
export function ttlRemainingMs(job: KubeObject, now: number): number | undefined {
  const ttl = isPlainObject(job.spec) ? job.spec.ttlSecondsAfterFinished : undefined;
  if (typeof ttl !== 'number' || job.metadata.deletionTimestamp || !isJobFinished(job)) return undefined;
  const finished = jobFinishTime(job);
  if (finished === undefined) return undefined;
  return finished + ttl * 1000 - now;
}

/**
 * The ttl-after-finished controller (pkg/controller/ttlafterfinished): deletes a finished Job, with
 * foreground cascading so its pods go first, once ttlSecondsAfterFinished has passed on the clock.
 */
export function ttlAfterFinishedController(ctx: ControllerContext): Controller {
  const jobs = ctx.informers.for(Resources.jobs);
  const loop = new ReconcileLoop('ttl-after-finished', ctx, reconcile);
  const enqueue = (job: KubeObject): void => {
    if (ttlRemainingMs(job, ctx.clock.now()) !== undefined)
      loop.queue.add(`${job.metadata.namespace}/${job.metadata.name}`);
  };
  jobs.addEventHandler({ add: enqueue, update: (_old, job) => enqueue(job) });

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const cached = jobs.get(namespace, name);
    if (!cached) return;
    const left = ttlRemainingMs(cached, ctx.clock.now());
    if (left === undefined) return;
    if (left > 0) return { requeueAfterMs: left };
    // The cache may lag: check the Job as the API has it now (its TTL may have been changed) before deleting.
    const fresh = await ignoreNotFound(ctx.client.get(Resources.jobs, namespace, name));
    if (!fresh) return;
    const freshLeft = ttlRemainingMs(fresh, ctx.clock.now());
    if (freshLeft === undefined) return;
    if (freshLeft > 0) return { requeueAfterMs: freshLeft };
    ctx.log('debug', `ttl-after-finished: deleting Job ${key}`);
    await ignoreNotFound(
      ctx.client.delete(Resources.jobs, namespace, name, {
        propagationPolicy: 'Foreground',
        preconditions: { uid: fresh.metadata.uid! },
      }),
    );
  }

  return { name: 'ttl-after-finished', start: async () => loop.start(), stop: () => loop.stop() };
}
