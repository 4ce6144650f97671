import type { Clock, VirtualClock } from '../clock/clock.js';
import type { GenericStore } from '../registry/generic-store.js';
import type { Registry } from '../registry/registry.js';
import type { Metrics } from '../metrics/metrics.js';

/** What the HTTP server serves (cluster/Cluster is one): the table of kinds, the generic store, time, durability. */
export interface ServedCluster {
  readonly registry: Registry;
  readonly api: GenericStore;
  readonly clock: Clock;
  /** The clock when it is virtual, for /sim/v1/clock. */
  readonly virtualClock: VirtualClock | undefined;
  /** The store's latest revision: the resourceVersion of a list and of a watch's bookmarks. */
  readonly store: { readonly currentRevision: number };
  /** With --data, resolves once every change up to `revision` (default: the latest) is on disk; else undefined. */
  durable(revision?: number): Promise<void> | undefined;
  /** Whether the cluster is kept in etcd (`--etcd-servers`), which other API servers may write too. */
  readonly storedInEtcd: boolean;
  /** With etcd, resolves once this server has seen every write etcd acknowledged so far; else undefined. */
  consistentRead(): Promise<void> | undefined;
  /** What `/metrics` serves; the server counts its requests in it. */
  readonly metrics: Metrics;
}
