import { ignoreNotFound } from '../../api/errors.js';
import { isTerminal } from '../../api/pod-util.js';
import type { KubeObject } from '../../api/types.js';
import { podClaimNames, volumePhase } from '../../api/volumes.js';
import { Resources } from '../../client/client.js';
import { cacheKey } from '../../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';

/**
 * Storage object in-use protection (kube-controller-manager's persistentvolumeclaim-protection and
 * persistentvolume-protection, with the StorageObjectInUseProtection admission plugin that adds the finalizers): a
 * claim being deleted keeps `kubernetes.io/pvc-protection` while a pod that has not finished uses it, so it shows
 * Terminating until then; a volume keeps `kubernetes.io/pv-protection` while it is Bound.
 */
export const PVC_PROTECTION = 'kubernetes.io/pvc-protection';
export const PV_PROTECTION = 'kubernetes.io/pv-protection';
const CLAIM_INDEX = 'claims';

function withoutFinalizer(obj: KubeObject, finalizer: string): KubeObject {
  return {
    ...obj,
    metadata: { ...obj.metadata, finalizers: (obj.metadata.finalizers ?? []).filter((f) => f !== finalizer) },
  };
}

export function claimProtectionController(ctx: ControllerContext): Controller {
  const claims = ctx.informers.for(Resources.persistentvolumeclaims);
  const pods = ctx.informers.for(Resources.pods);
  const loop = new ReconcileLoop('persistentvolumeclaim-protection', ctx, reconcile);
  pods.addIndex(CLAIM_INDEX, (pod) => podClaimNames(pod).map((c) => `${pod.metadata.namespace}/${c.claim}`));

  const deleting = (c: KubeObject): boolean =>
    c.metadata.deletionTimestamp !== undefined && (c.metadata.finalizers ?? []).includes(PVC_PROTECTION);
  claims.addEventHandler({
    add: (c) => deleting(c) && loop.queue.add(cacheKey(c)),
    update: (_o, c) => deleting(c) && loop.queue.add(cacheKey(c)),
  });
  // A pod that finishes or goes may be the claim's last user.
  const podChanged = (pod: KubeObject): void => {
    for (const c of podClaimNames(pod)) loop.queue.add(`${pod.metadata.namespace}/${c.claim}`);
  };
  pods.addEventHandler({ update: (_o, p) => isTerminal(p) && podChanged(p), delete: podChanged });

  async function reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const claim = claims.get(key.slice(0, slash), key.slice(slash + 1));
    if (!claim || !deleting(claim)) return;
    if (pods.byIndex(CLAIM_INDEX, key).some((pod) => !isTerminal(pod))) return;
    await ignoreNotFound(ctx.client.update(Resources.persistentvolumeclaims, withoutFinalizer(claim, PVC_PROTECTION)));
  }

  return { name: 'persistentvolumeclaim-protection', start: async () => loop.start(), stop: () => loop.stop() };
}

export function volumeProtectionController(ctx: ControllerContext): Controller {
  const volumes = ctx.informers.for(Resources.persistentvolumes);
  const loop = new ReconcileLoop('persistentvolume-protection', ctx, reconcile);
  const deleting = (v: KubeObject): boolean =>
    v.metadata.deletionTimestamp !== undefined && (v.metadata.finalizers ?? []).includes(PV_PROTECTION);
  volumes.addEventHandler({
    add: (v) => deleting(v) && loop.queue.add(v.metadata.name!),
    update: (_o, v) => deleting(v) && loop.queue.add(v.metadata.name!),
  });

  async function reconcile(name: string): Promise<void> {
    const volume = volumes.get(undefined, name);
    if (!volume || !deleting(volume) || volumePhase(volume) === 'Bound') return;
    await ignoreNotFound(ctx.client.update(Resources.persistentvolumes, withoutFinalizer(volume, PV_PROTECTION)));
  }

  return { name: 'persistentvolume-protection', start: async () => loop.start(), stop: () => loop.stop() };
}
