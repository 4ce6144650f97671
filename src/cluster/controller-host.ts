import { groupVersion, type KindInfo } from '../registry/types.js';
import type { ResourceInfo } from '../runtime/controller.js';
import type { ControllerHost } from '../runtime/manager.js';
import type { Cluster } from './cluster.js';
import { InProcessClient } from './in-process-client.js';

/** A cluster as its controllers, scheduler and kubelets see it: in-process clients and the kinds its registry serves. */
export function controllerHost(cluster: Cluster): ControllerHost {
  const toInfo = (k: KindInfo): ResourceInfo => ({
    gvr: { group: k.group, version: k.version, resource: k.resource },
    apiVersion: groupVersion(k),
    kind: k.kind,
    namespaced: k.namespaced,
  });
  return {
    client: () => new InProcessClient(cluster),
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
