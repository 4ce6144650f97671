import { SharedInformers } from '../client/informer.js';
import { groupVersion, type KindInfo } from '../registry/types.js';
import type { ResourceInfo } from '../runtime/controller.js';
import type { ControllerHost } from '../runtime/manager.js';
import type { Cluster } from './cluster.js';
import { InProcessClient } from './in-process-client.js';

/**
 * A cluster as its controllers, scheduler and kubelets see it: in-process clients and the kinds its registry serves.
 * `informers: 'shared'` gives every manager made on the host the one informer cache of the process (stopped when
 * the cluster closes); 'separate' (the default here) gives each its own, as components in processes of their own have.
 */
export function controllerHost(cluster: Cluster, options: { informers?: 'shared' | 'separate' } = {}): ControllerHost {
  const toInfo = (k: KindInfo): ResourceInfo => ({
    gvr: { group: k.group, version: k.version, resource: k.resource },
    apiVersion: groupVersion(k),
    kind: k.kind,
    namespaced: k.namespaced,
  });
  let informers: SharedInformers | undefined;
  if (options.informers === 'shared') {
    const shared = new SharedInformers(new InProcessClient(cluster), cluster.clock, (gvr, error) =>
      cluster.log(
        'error',
        `informer of ${gvr.resource}: an event handler failed: ${error instanceof Error ? error.message : String(error)}`,
      ),
    );
    cluster.onClose(() => shared.stop());
    informers = shared;
  }
  return {
    client: () => new InProcessClient(cluster),
    informers,
    resources: {
      all: () => cluster.registry.kinds().map(toInfo),
      byKind: (apiVersion, kind) => {
        const k = cluster.registry.byGroupVersionKind(apiVersion, kind);
        return k ? toInfo(k) : undefined;
      },
      onChange: (fn) => cluster.registry.onChange(fn),
    },
    clock: cluster.clock,
    random: cluster.random,
    certificates: cluster.certificates,
    metrics: cluster.metrics,
  };
}
