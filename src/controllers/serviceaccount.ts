import { ApiError } from '../api/errors.js';
import { isPlainObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../runtime/controller.js';

const DEFAULT_ACCOUNT = 'default';

/**
 * The ServiceAccount controller (kube-controller-manager's serviceaccount-controller): every active namespace
 * has a ServiceAccount named `default` — made when the namespace appears, and again if someone deletes it — so
 * pods that name no account, and `kubectl create token default`, find one.
 */
export function serviceAccountController(ctx: ControllerContext): Controller {
  const namespaces = ctx.informers.for(Resources.namespaces);
  const accounts = ctx.informers.for(Resources.serviceaccounts);
  const loop = new ReconcileLoop('serviceaccount', ctx, reconcile);

  namespaces.addEventHandler({
    add: (ns) => loop.queue.add(ns.metadata.name!),
    update: (_old, ns) => loop.queue.add(ns.metadata.name!),
  });
  accounts.addEventHandler({
    delete: (account) => account.metadata.name === DEFAULT_ACCOUNT && loop.queue.add(account.metadata.namespace!),
  });

  async function reconcile(namespace: string): Promise<void> {
    const ns = namespaces.get(undefined, namespace);
    const phase = isPlainObject(ns?.status) ? ns.status.phase : undefined;
    if (!ns || ns.metadata.deletionTimestamp || phase !== 'Active') return;
    if (accounts.get(namespace, DEFAULT_ACCOUNT)) return;
    try {
      await ctx.client.create(Resources.serviceaccounts, namespace, {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: DEFAULT_ACCOUNT, namespace },
      });
    } catch (err) {
      // Someone made it first, or the namespace began terminating since the cache saw it (403 NamespaceTerminating).
      if (err instanceof ApiError && (err.reason === 'AlreadyExists' || err.code === 403)) return;
      throw err;
    }
  }

  return { name: 'serviceaccount', start: async () => loop.start(), stop: () => loop.stop() };
}
