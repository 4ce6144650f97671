import type { KubeObject } from '../api/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Registry } from '../registry/registry.js';
import { resourceKey } from '../registry/types.js';
import type { MemoryStore } from '../storage/memory-store.js';

const PODS = '/pods';
const PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown'] as const;

function phaseOf(pod: KubeObject | undefined): string | undefined {
  if (!pod) return undefined;
  const phase = (pod.status as { phase?: unknown } | undefined)?.phase;
  // A pod is created Pending (the strategy sets it); an object without a phase is one still.
  return typeof phase === 'string' && phase !== '' ? phase : 'Pending';
}

/**
 * What `/metrics` reports of the stored objects: kube-apiserver's apiserver_storage_objects (objects per resource,
 * read from the store's counts at scrape time) and pods by phase. kube-state-metrics' kube_pod_status_phase has a
 * series per pod and phase; at 150,000 pods that is a scrape of 750,000 lines, so kube-sim keeps the aggregate
 * kube_sim_pods{phase} instead, counted as pods change (a pod's write costs a comparison of two strings).
 */
export function registerObjectMetrics(metrics: Metrics, store: MemoryStore, registry: Registry): void {
  metrics.gauge(
    'apiserver_storage_objects',
    'Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.',
    ['resource'],
    (set) => {
      for (const key of store.resourceKeys()) {
        const slash = key.indexOf('/');
        const group = key.slice(0, slash);
        const resource = key.slice(slash + 1);
        set({ resource: group === '' ? resource : `${resource}.${group}` }, store.count(key));
      }
    },
  );
  // Every watch of a resource, HTTP or in-process (a component's informers), under the kind it is stored as.
  metrics.gauge(
    'apiserver_registered_watchers',
    'Number of currently registered watchers for a given resources',
    ['group', 'kind', 'version'],
    (set) => {
      const seen = new Set<string>();
      for (const info of registry.kinds()) {
        const key = resourceKey(info);
        if (info.storage || seen.has(key) || !store.spec(key)) continue;
        seen.add(key);
        set({ group: info.group, kind: info.kind, version: info.version }, store.watcherCount(key));
      }
    },
  );
  const byPhase = new Map<string, number>(PHASES.map((p) => [p, 0]));
  const move = (phase: string | undefined, delta: number): void => {
    if (phase !== undefined) byPhase.set(phase, (byPhase.get(phase) ?? 0) + delta);
  };
  store.onChange((key, event) => {
    if (key !== PODS) return;
    if (event.type === 'ADDED') move(phaseOf(event.object), 1);
    else if (event.type === 'DELETED') move(phaseOf(event.object), -1);
    else {
      const before = phaseOf(event.prevObject);
      const after = phaseOf(event.object);
      if (before === after) return;
      move(before, -1);
      move(after, 1);
    }
  });
  metrics.gauge(
    'kube_sim_pods',
    "The number of pods in each phase (kube-state-metrics' kube_pod_status_phase summed over pods).",
    ['phase'],
    (set) => {
      for (const [phase, n] of byPhase) set({ phase }, n);
    },
  );
}
