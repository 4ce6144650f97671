import { RealClock, VirtualClock, type Clock } from '../clock/clock.js';
import { SeededRandom } from '../clock/random.js';
import type { KubeObject } from '../api/types.js';
import { builtinKinds } from '../registry/builtin/index.js';
import { GenericStore } from '../registry/generic-store.js';
import { Registry } from '../registry/registry.js';
import { resourceKey, type KindInfo, type StrategyContext } from '../registry/types.js';
import { MemoryStore } from '../storage/memory-store.js';
import { SnapshotPersistence } from '../storage/snapshot.js';
import { DEFAULT_EVENT_TTL_MS, EventExpiry } from './event-ttl.js';
import { ClusterIPAllocator } from './ip-allocator.js';

export interface ClusterOptions {
  clock?: 'real' | 'virtual';
  /** Start of virtual time (ms since epoch); defaults to 2025-01-01T00:00:00Z so replays agree. */
  startTime?: number;
  seed?: number;
  /** Events retained per resource for resuming watches. */
  watchHistory?: number;
  /** lowdb snapshot file to keep the cluster in across restarts. */
  dataPath?: string;
  /** How long Events live after their last write (kube-apiserver --event-ttl; default 1 h). */
  eventTtlMs?: number;
}

export const DEFAULT_VIRTUAL_START = Date.UTC(2025, 0, 1);
const SYSTEM_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

/**
 * One simulated control plane: clock, RNG, store, the table of kinds, and the generic REST store that every
 * client (HTTP or in-process) goes through. Controllers, nodes and the server are attached to it.
 */
export class Cluster {
  readonly registry: Registry;
  readonly api: GenericStore;
  private closers: Array<() => Promise<void> | void> = [];

  private constructor(
    readonly clock: Clock,
    readonly random: SeededRandom,
    readonly store: MemoryStore,
    private readonly persistence: SnapshotPersistence | undefined,
    eventTtlMs: number = DEFAULT_EVENT_TTL_MS,
  ) {
    this.registry = new Registry(store);
    const ips = new ClusterIPAllocator(random);
    const ctx: StrategyContext = { clock, random, allocateClusterIP: () => ips.allocate() };
    this.api = new GenericStore(store, this.registry, ctx);
    for (const info of builtinKinds) this.registry.add(info);
    store.onChange((key, event) => {
      if (key !== '/services') return;
      const ip = (o: KubeObject | undefined): unknown => (o?.spec as { clusterIP?: unknown } | undefined)?.clusterIP;
      if (event.type === 'DELETED') ips.release(ip(event.object));
      else ips.reserve(ip(event.object));
    });
    this.ipAllocator = ips;
    const expiry = new EventExpiry(store, clock, eventTtlMs);
    this.closers.push(() => expiry.stop());
  }

  private readonly ipAllocator: ClusterIPAllocator;

  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    const clock: Clock = options.clock === 'virtual' ? new VirtualClock(options.startTime ?? DEFAULT_VIRTUAL_START) : new RealClock();
    const random = options.seed !== undefined ? new SeededRandom(options.seed) : SeededRandom.fromOs();
    let persistence: SnapshotPersistence | undefined;
    let store: MemoryStore;
    if (options.dataPath) {
      const probe = new MemoryStore(options.watchHistory);
      const snapshot = await new SnapshotPersistence(options.dataPath, probe).read();
      store = new MemoryStore(options.watchHistory, snapshot.revision);
      persistence = new SnapshotPersistence(options.dataPath, store);
      const cluster = new Cluster(clock, random, store, persistence, options.eventTtlMs);
      persistence.restore(snapshot, new Set(store.resourceKeys()));
      for (const svc of store.all('/services')) cluster.ipAllocator.reserve((svc.spec as { clusterIP?: unknown }).clusterIP);
      persistence.attach();
      cluster.bootstrap();
      return cluster;
    }
    store = new MemoryStore(options.watchHistory);
    const cluster = new Cluster(clock, random, store, undefined, options.eventTtlMs);
    cluster.bootstrap();
    return cluster;
  }

  /** What a fresh kube-apiserver creates: the system namespaces and the `kubernetes` Service. */
  private bootstrap(): void {
    const namespaces = this.kind('', 'v1', 'namespaces');
    for (const name of SYSTEM_NAMESPACES) {
      if (!this.store.get(resourceKey(namespaces), undefined, name)) this.api.create(namespaces, undefined, { metadata: { name } });
    }
    const services = this.kind('', 'v1', 'services');
    if (!this.store.get(resourceKey(services), 'default', 'kubernetes')) {
      this.api.create(services, 'default', {
        metadata: { name: 'kubernetes', labels: { component: 'apiserver', provider: 'kubernetes' } },
        spec: { clusterIP: '10.96.0.1', ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: 6443 }] },
      });
    }
  }

  kind(group: string, version: string, resource: string): KindInfo {
    const info = this.registry.lookup(group, version, resource);
    if (!info) throw new Error(`unknown resource ${group}/${version}/${resource}`);
    return info;
  }

  get virtualClock(): VirtualClock | undefined {
    return this.clock instanceof VirtualClock ? this.clock : undefined;
  }

  onClose(fn: () => Promise<void> | void): void {
    this.closers.push(fn);
  }

  /** Stops everything attached, closes watches and flushes the data file. */
  async close(): Promise<void> {
    for (const fn of this.closers.reverse()) await fn();
    this.closers = [];
    this.store.closeWatches();
    await this.persistence?.flush();
  }

  async flush(): Promise<void> {
    await this.persistence?.flush();
  }
}
