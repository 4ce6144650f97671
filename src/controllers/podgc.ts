import { rfc3339 } from '../clock/clock.js';
import { deepCopy, isPlainObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { cacheKey } from '../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../runtime/controller.js';
import { podNodeName as nodeOf, setPodCondition } from '../api/pod-util.js';
import { ignoreNotFound } from '../api/errors.js';

type Obj = Record<string, unknown>;

/** How long a node must stay gone before its pods are collected (podgc's quarantine). */
export const POD_GC_QUARANTINE_MS = 40_000;

/**
 * Pod GC's orphan pass: pods bound to a node that has been gone for 40 s get the DisruptionTarget condition
 * (DeletionByPodGC) and are deleted at once, since no kubelet will ever finish them.
 */
export function podGarbageCollector(ctx: ControllerContext): Controller {
  const nodes = ctx.informers.for(Resources.nodes);
  const pods = ctx.informers.for(Resources.pods);
  const loop = new ReconcileLoop('podgc', ctx, reconcile);
  pods.addIndex('podgc-node', (p) => (nodeOf(p) ? [nodeOf(p)] : []));
  pods.addEventHandler({
    add: (pod) => {
      if (nodeOf(pod) && !nodes.get(undefined, nodeOf(pod))) loop.queue.addAfter(cacheKey(pod), POD_GC_QUARANTINE_MS);
    },
  });
  nodes.addEventHandler({
    delete: (node) => {
      for (const p of pods.byIndex('podgc-node', node.metadata.name!))
        loop.queue.addAfter(cacheKey(p), POD_GC_QUARANTINE_MS);
    },
  });

  async function reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const pod = pods.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pod || !nodeOf(pod) || nodes.get(undefined, nodeOf(pod))) return;
    const status = deepCopy(isPlainObject(pod.status) ? pod.status : {}) as Obj;
    setPodCondition(
      status,
      { type: 'DisruptionTarget', status: 'True', reason: 'DeletionByPodGC', message: 'PodGC: node no longer exists' },
      rfc3339(ctx.clock.now()),
    );
    await ignoreNotFound(ctx.client.updateStatus(Resources.pods, { ...pod, status }));
    await ignoreNotFound(
      ctx.client.delete(Resources.pods, pod.metadata.namespace, pod.metadata.name!, {
        gracePeriodSeconds: 0,
        preconditions: { uid: pod.metadata.uid! },
      }),
    );
  }

  return { name: 'podgc', start: async () => loop.start(), stop: () => loop.stop() };
}
