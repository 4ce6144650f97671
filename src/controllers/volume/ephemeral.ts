import { ApiError } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import { cacheKey } from '../../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';

/**
 * kube-controller-manager's ephemeral-volume controller: each generic ephemeral volume of a pod
 * (`volumes[].ephemeral.volumeClaimTemplate`) gets a PersistentVolumeClaim `<pod>-<volume>` made from the template
 * and owned by the pod (controller, blockOwnerDeletion), so it is bound like any claim and goes with the pod. A claim
 * of that name that the pod does not own is left alone (the scheduler and kubelet refuse to use it).
 */
type Obj = Record<string, unknown>;

function ephemeralVolumes(pod: KubeObject): Array<{ name: string; template: Obj }> {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const volumes = Array.isArray(spec.volumes) ? spec.volumes : [];
  const out: Array<{ name: string; template: Obj }> = [];
  for (const v of volumes)
    if (isPlainObject(v) && isPlainObject(v.ephemeral) && isPlainObject(v.ephemeral.volumeClaimTemplate))
      out.push({ name: String(v.name), template: v.ephemeral.volumeClaimTemplate });
  return out;
}

export function ephemeralVolumeController(ctx: ControllerContext): Controller {
  const pods = ctx.informers.for(Resources.pods);
  const claims = ctx.informers.for(Resources.persistentvolumeclaims);
  const loop = new ReconcileLoop('ephemeral-volume', ctx, reconcile);
  const recorder = ctx.recorder('ephemeral_volume');
  const enqueue = (pod: KubeObject): void => {
    if (ephemeralVolumes(pod).length > 0 && !pod.metadata.deletionTimestamp) loop.queue.add(cacheKey(pod));
  };
  pods.addEventHandler({ add: enqueue });
  // A claim deleted under a pod that still needs it is made again.
  claims.addEventHandler({
    delete: (c) => {
      for (const ref of c.metadata.ownerReferences ?? [])
        if (ref.kind === 'Pod' && ref.controller) loop.queue.add(`${c.metadata.namespace}/${ref.name}`);
    },
  });

  async function reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const pod = pods.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pod || pod.metadata.deletionTimestamp) return;
    const namespace = pod.metadata.namespace!;
    for (const { name, template } of ephemeralVolumes(pod)) {
      const claimName = `${pod.metadata.name}-${name}`;
      const existing = claims.get(namespace, claimName);
      if (existing) {
        if (!existing.metadata.ownerReferences?.some((r) => r.uid === pod.metadata.uid))
          recorder.event(
            pod,
            'Warning',
            'FailedBinding',
            `PVC ${namespace}/${claimName} was not created for pod ${key} (pod is not owner)`,
          );
        continue;
      }
      const meta = isPlainObject(template.metadata) ? template.metadata : {};
      try {
        await ctx.client.create(Resources.persistentvolumeclaims, namespace, {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: {
            name: claimName,
            namespace,
            ...(isPlainObject(meta.labels) ? { labels: meta.labels as Record<string, string> } : {}),
            ...(isPlainObject(meta.annotations) ? { annotations: meta.annotations as Record<string, string> } : {}),
            ownerReferences: [
              {
                apiVersion: 'v1',
                kind: 'Pod',
                name: pod.metadata.name!,
                uid: pod.metadata.uid!,
                controller: true,
                blockOwnerDeletion: true,
              },
            ],
          },
          spec: isPlainObject(template.spec) ? template.spec : {},
        });
      } catch (err) {
        if (err instanceof ApiError && err.reason === 'AlreadyExists') continue;
        throw err;
      }
    }
  }

  return { name: 'ephemeral-volume', start: async () => loop.start(), stop: () => loop.stop() };
}
