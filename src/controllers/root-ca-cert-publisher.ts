import { ApiError } from '../api/errors.js';
import { deepEqual, isPlainObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../runtime/controller.js';

export const ROOT_CA_CONFIGMAP = 'kube-root-ca.crt';
const DESCRIPTION_ANNOTATION = 'kubernetes.io/description';
const DESCRIPTION =
  'Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.';

/**
 * kube-controller-manager's root-ca-cert-publisher: every namespace has a ConfigMap `kube-root-ca.crt` whose `ca.crt`
 * is the cluster CA (what pods' projected service account volumes mount), made when the namespace appears, and made
 * again or put right when someone deletes or changes it.
 */
export function rootCaCertPublisher(ctx: ControllerContext): Controller {
  const namespaces = ctx.informers.for(Resources.namespaces);
  const configmaps = ctx.informers.for(Resources.configmaps);
  const loop = new ReconcileLoop('root-ca-cert-publisher', ctx, reconcile);
  const certificates = ctx.certificates;

  namespaces.addEventHandler({
    add: (ns) => loop.queue.add(ns.metadata.name!),
    update: (_old, ns) => isPlainObject(ns.status) && ns.status.phase === 'Active' && loop.queue.add(ns.metadata.name!),
  });
  const ours = (cm: { metadata: { name?: string; namespace?: string } }): void => {
    if (cm.metadata.name === ROOT_CA_CONFIGMAP) loop.queue.add(cm.metadata.namespace!);
  };
  configmaps.addEventHandler({ update: (_old, cm) => ours(cm), delete: ours });

  async function reconcile(namespace: string): Promise<void> {
    if (!certificates) return;
    const ns = namespaces.get(undefined, namespace);
    if (!ns || ns.metadata.deletionTimestamp) return;
    const data = { 'ca.crt': await certificates.certificate() };
    const cm = configmaps.get(namespace, ROOT_CA_CONFIGMAP);
    if (!cm) {
      try {
        await ctx.client.create(Resources.configmaps, namespace, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: ROOT_CA_CONFIGMAP, namespace, annotations: { [DESCRIPTION_ANNOTATION]: DESCRIPTION } },
          data,
        });
      } catch (err) {
        // Gone, or terminating since the cache saw it (403 NamespaceTerminating): nothing to publish; made meanwhile:
        // the informer brings it and a change of it comes back here.
        if (err instanceof ApiError && (err.code === 404 || err.code === 409 || isTerminating(err))) return;
        throw err;
      }
      return;
    }
    if (deepEqual(cm.data, data) && cm.metadata.annotations?.[DESCRIPTION_ANNOTATION]) return;
    await ctx.client.update(Resources.configmaps, {
      ...cm,
      metadata: { ...cm.metadata, annotations: { ...cm.metadata.annotations, [DESCRIPTION_ANNOTATION]: DESCRIPTION } },
      data,
    });
  }

  return { name: 'root-ca-cert-publisher', start: async () => loop.start(), stop: () => loop.stop() };
}

function isTerminating(err: ApiError): boolean {
  return err.code === 403 && (err.details?.causes ?? []).some((c) => c.reason === 'NamespaceTerminating');
}
