import { randomBytes } from 'node:crypto';
import { RealClock, VirtualClock, type Clock } from '../clock/clock.js';
import { SeededRandom } from '../clock/random.js';
import type { KubeObject } from '../api/types.js';
import type { Authorizer } from '../auth/authorizer.js';
import { builtinKinds } from '../registry/builtin/index.js';
import { systemPriorityClasses } from '../registry/builtin/scheduling.js';
import { defaultStorageClass } from '../registry/builtin/storage.js';
import { customResourceDefinitions, type CrdNamesLookup } from '../registry/crd/kind.js';
import { serveCustomResources } from '../registry/crd/serve.js';
import { LimitRanger } from '../registry/admission/limit-ranger.js';
import { ResourceQuotaAdmission } from '../registry/admission/resource-quota.js';
import { StorageObjectInUseProtection } from '../registry/admission/storage-protection.js';
import { GenericStore } from '../registry/generic-store.js';
import { Registry } from '../registry/registry.js';
import { resourceKey, type KindInfo, type StrategyContext } from '../registry/types.js';
import { MemoryStore, type StoreWrites } from '../storage/memory-store.js';
import type { EtcdStore, EtcdStoreOptions } from '../storage/etcd-store.js';
import { raceTolerant } from '../api/errors.js';
import { allOf, sync, then, type MaybePromise } from '../api/maybe-async.js';
import { SnapshotFile } from '../storage/snapshot.js';
import { dataPaths, scanWal, truncateWal, WriteAheadLog } from '../storage/wal.js';
import { ClusterCertificateAuthority, generateCa, type CaPem } from './certificate-authority.js';
import { ServiceAccountTokens } from '../auth/service-account-tokens.js';
import { serviceAccountTokens } from '../registry/serviceaccount-token.js';
import { DEFAULT_EVENT_TTL_MS, EventExpiry } from './event-ttl.js';
import { ClusterIPAllocator } from './ip-allocator.js';
import { ServiceRangeWrites, type RangeSwap } from './service-ranges.js';
import { WebhookClients, type ServiceMapping } from '../registry/webhook-client.js';

export { parseServiceMapping, type ServiceMapping } from '../registry/webhook-client.js';
import { webhookPlugins } from '../registry/admission/webhooks.js';
import { ValidatingAdmissionPolicies } from '../registry/admission/policies.js';
import { NodePortAllocator } from './node-port-allocator.js';
import { LocalApiServices, type ExtensionApiService } from './aggregator.js';
import { metricsKinds } from '../registry/builtin/metrics.js';
import { FlowControlConfig } from './apf.js';
import { KubernetesEndpoints } from './kubernetes-endpoints.js';
import { Metrics } from '../metrics/metrics.js';
import { registerObjectMetrics } from './object-metrics.js';
import type { Snapshot } from '../api/snapshot.js';
import { restoreSnapshot, type RestoredNodes } from './snapshot-restore.js';

export interface ClusterOptions {
  clock?: 'real' | 'virtual';
  /** Start of virtual time (ms since epoch); defaults to 2025-01-01T00:00:00Z so replays agree. */
  startTime?: number;
  seed?: number;
  /** Events retained per resource for resuming watches. */
  watchHistory?: number;
  /** Keep the cluster across restarts and crashes: a directory (snapshot.json + wal.log) or a snapshot file (+ FILE.wal). */
  dataPath?: string;
  /** Truncate a corrupt write-ahead log at its first bad record instead of refusing to start. */
  repairData?: boolean;
  /** Compact the log into the snapshot once it passes this many bytes (default 64 MiB). */
  walCompactBytes?: number;
  /** Where a failure of the data files (a full disk) is reported. */
  log?: (level: 'error' | 'warn' | 'info' | 'debug', message: string) => void;
  /** How long Events live after their last write (kube-apiserver --event-ttl; default 1 h). */
  eventTtlMs?: number;
  /** The cluster CA (`--tls`'s); without it one is made on first use. */
  ca?: CaPem;
  /** Where a CA made here is kept, and found again after a restart (with --data). */
  caDir?: string;
  /** Services whose webhook servers run on the host (`sim serve --map-service`). */
  serviceMappings?: ServiceMapping[];
  /**
   * Serve metrics.k8s.io as metrics-server does, from simulated usage (default true; false: a cluster without
   * metrics-server, where `kubectl top` and HPAs find no metrics API).
   */
  metricsServer?: boolean;
  /** etcd as the store (`--etcd-servers`), this process's store its watch cache; exclusive with dataPath. */
  etcd?: Omit<EtcdStoreOptions, 'log'>;
  /**
   * Boot from a snapshot (`sim serve --snapshot`): its objects are the cluster, with new uids; a virtual clock
   * starts at the snapshot's time unless startTime says otherwise. Not with dataPath.
   */
  snapshot?: Snapshot;
}

/** metrics-server's APIService, as its release manifest (components.yaml) registers it. */
const METRICS_SERVER: ExtensionApiService = {
  group: 'metrics.k8s.io',
  version: 'v1beta1',
  groupPriorityMinimum: 100,
  versionPriority: 100,
  service: { namespace: 'kube-system', name: 'metrics-server', port: 443 },
  labels: { 'k8s-app': 'metrics-server' },
};

export const DEFAULT_VIRTUAL_START = Date.UTC(2025, 0, 1);

/** The clock a cluster runs on: virtual time starts at options.startTime, else where it was left (`resumed`), else 2025-01-01. */
function clockFor(options: ClusterOptions, resumed?: number): Clock {
  return options.clock === 'virtual'
    ? new VirtualClock(options.startTime ?? resumed ?? DEFAULT_VIRTUAL_START)
    : new RealClock();
}
const SYSTEM_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];

/**
 * One simulated control plane: clock, RNG, store, the table of kinds, and the generic REST store that every
 * client (HTTP or in-process) goes through. Controllers, nodes and the server are attached to it.
 */
export class Cluster {
  readonly registry: Registry;
  readonly api: GenericStore;
  /** The CA that kube-root-ca.crt publishes and the CSR signers sign with. */
  readonly certificates: ClusterCertificateAuthority;
  private closers: Array<() => Promise<void> | void> = [];
  private wal: WriteAheadLog | undefined;
  /** What start-up found in --data or the snapshot worth telling the user (a discarded torn record, a repair). */
  readonly recoveryNotes: string[] = [];
  /** The nodes of the snapshot the cluster booted from (their kubelets adopt them as they are). */
  restoredNodes: RestoredNodes = new Map();

  /** The HTTPS client of admission and conversion webhooks. */
  readonly webhooks: WebhookClients;
  /**
   * The API server's authorizer once `--auth` is on, so that the reviews in-process controllers make
   * (csrapproving's SubjectAccessReviews) are decided by RBAC as kube-controller-manager's are. Unset: all allowed.
   */
  authorizer: Authorizer | undefined;
  /** With --etcd-servers: etcd, which every write goes to, feeding `store` as its watch cache. */
  private etcd: EtcdStore | undefined;
  readonly log: NonNullable<ClusterOptions['log']>;
  /** Over etcd: the admin token every API server of the cluster accepts (`sim serve --auth`), kept in etcd. */
  sharedAdminToken: string | undefined;
  /** What `/metrics` reports: the API server's, the components' and the objects' series. */
  readonly metrics = new Metrics();

  private constructor(
    readonly clock: Clock,
    readonly random: SeededRandom,
    readonly store: MemoryStore,
    options: ClusterOptions,
    writes: StoreWrites = store,
    ranges?: RangeSwap,
  ) {
    this.log = options.log ?? (() => undefined);
    this.certificates = new ClusterCertificateAuthority({ pem: options.ca, dir: options.caDir });
    this.registry = new Registry(store);
    registerObjectMetrics(this.metrics, store, this.registry);
    const ips = new ClusterIPAllocator(random);
    const nodePorts = new NodePortAllocator(random);
    // Over etcd, ClusterIPs and NodePorts are taken cluster-wide in kube-apiserver's bitmaps before a Service is written.
    if (ranges)
      writes = this.serviceRanges = new ServiceRangeWrites(writes, ranges, store, ips, nodePorts, random, clock);
    const crdKey = resourceKey(customResourceDefinitions);
    const ctx: StrategyContext & CrdNamesLookup = {
      clock,
      random,
      allocateClusterIP: () => ips.allocate(),
      nodePorts,
      objects: (table) => store.all(table),
      // CRD writes are rare and CRDs few: a scan per CRD write, as kube-apiserver's naming controller lists them.
      crdsOfGroup: (group) =>
        store.all(crdKey).filter((crd) => (crd.spec as { group?: unknown } | undefined)?.group === group),
    };
    this.api = new GenericStore(store, this.registry, ctx, writes);
    // kube-apiserver's admission chain: the plugins take their places in its order (admission/chain.ts).
    this.api.admission.register(new LimitRanger(store));
    this.api.admission.register(new StorageObjectInUseProtection());
    this.api.admission.register(new ResourceQuotaAdmission(store, writes));
    this.webhooks = new WebhookClients(store, random, options.serviceMappings ?? [], clock);
    this.closers.push(() => this.webhooks.close());
    const webhooks = webhookPlugins({ store, registry: this.registry, clients: this.webhooks, random });
    this.api.admission.register(webhooks.mutating);
    this.api.admission.register(webhooks.validating);
    this.api.admission.register(new ValidatingAdmissionPolicies(store, this.registry));
    for (const info of builtinKinds) this.registry.add(info);
    serveCustomResources(this.registry, store, this.api, { clients: this.webhooks, random });
    store.onChange((key, event) => {
      if (key !== '/services') return;
      const ip = (o: KubeObject | undefined): unknown => (o?.spec as { clusterIP?: unknown } | undefined)?.clusterIP;
      if (event.type === 'DELETED') ips.release(ip(event.object));
      else ips.reserve(ip(event.object));
      if (event.type === 'DELETED') nodePorts.changed(event.object, undefined);
      else nodePorts.changed(event.prevObject, event.object);
    });
    this.ipAllocator = ips;
    this.nodePorts = nodePorts;
    this.apiServices = new LocalApiServices(this.registry, this.api);
    if (options.metricsServer !== false) {
      for (const info of metricsKinds) this.registry.add(info);
      this.apiServices.registerExtension(METRICS_SERVER);
    }
    this.flowControl = new FlowControlConfig(this.api);
    this.kubernetesEndpoints = new KubernetesEndpoints(
      this.api,
      this.kind('', 'v1', 'endpoints'),
      this.kind('discovery.k8s.io', 'v1', 'endpointslices'),
    );
    const expiry = new EventExpiry(store, clock, options.eventTtlMs ?? DEFAULT_EVENT_TTL_MS, undefined, writes);
    this.closers.push(() => expiry.stop());
  }

  private readonly ipAllocator: ClusterIPAllocator;
  private readonly serviceRanges: ServiceRangeWrites | undefined;
  private readonly nodePorts: NodePortAllocator;
  private readonly apiServices: LocalApiServices;
  private readonly flowControl: FlowControlConfig;
  private readonly kubernetesEndpoints: KubernetesEndpoints;

  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    if (options.snapshot && (options.dataPath || options.etcd))
      throw new Error(
        '--snapshot boots a new cluster from the file: it cannot be combined with --data or --etcd-servers',
      );
    const random = options.seed !== undefined ? new SeededRandom(options.seed) : SeededRandom.fromOs();
    let store: MemoryStore;
    if (options.etcd) return Cluster.startOnEtcd(options, options.etcd, random);
    if (options.dataPath) {
      const paths = dataPaths(options.dataPath);
      const snapshotFile = new SnapshotFile(paths.snapshot);
      const snapshot = await snapshotFile.read();
      const scan = scanWal(paths.wal, options.repairData ?? false);
      if (scan.discarded) truncateWal(paths.wal, scan.goodLength);
      // A virtual clock resumes where the cluster's last durable write or snapshot left it: objects written
      // before the restart must not lie in the future, and CronJobs must not fire again for times already past.
      const resumeAt = Math.max(snapshot.clock ?? -Infinity, scan.clock ?? -Infinity);
      const clock = clockFor(options, Number.isFinite(resumeAt) ? resumeAt : undefined);
      store = new MemoryStore(options.watchHistory, snapshot.revision, () => clock.now());
      const wal = await WriteAheadLog.open(paths.wal, {
        compactBytes: options.walCompactBytes ?? 64 * 1024 * 1024,
        snapshot: () => snapshotFile.write(store, clock.now()),
        snapshotBytes: snapshotFile.bytes,
        now: () => clock.now(),
        onDurable: (revision) => store.releaseWatchEvents(revision),
        onError: (err) =>
          options.log?.(
            'error',
            `--data: writing ${paths.wal} failed (${err.message}); writes are no longer acknowledged`,
          ),
      });
      // From here to the log's attachment nothing awaits: a write that restoring triggers (a listener's
      // microtask) finds the log attached.
      const cluster = new Cluster(clock, random, store, options);
      // CustomResourceDefinitions first: loading one registers the table its objects go to.
      const crds = 'apiextensions.k8s.io/customresourcedefinitions';
      const resources = Object.entries(snapshot.resources).sort(([a], [b]) => Number(b === crds) - Number(a === crds));
      for (const [resource, objects] of resources)
        if (store.resourceKeys().includes(resource)) store.load(resource, objects);
      // The log on top of the snapshot: objects, the revision counter and the watch history after the snapshot.
      const unserved = new Set<string>();
      for (const r of scan.records)
        if (r.r > snapshot.revision && store.replay(r.k, r.t, r.r, r.o, r.n, r.m) === false) unserved.add(r.k);
      if (unserved.size > 0)
        cluster.recoveryNotes.push(
          `dropped logged changes of resources this server does not serve: ${[...unserved].join(', ')}`,
        );
      if (scan.discarded) {
        const { offset, why, repaired } = scan.discarded;
        cluster.recoveryNotes.push(
          repaired
            ? `--repair: truncated ${paths.wal} at byte offset ${offset} (${why}); ${scan.size - offset} bytes dropped`
            : `discarded a torn record at the end of ${paths.wal} (byte offset ${offset}, ${why}): a write that was never acknowledged`,
        );
      }
      for (const svc of store.all('/services')) {
        cluster.ipAllocator.reserve((svc.spec as { clusterIP?: unknown }).clusterIP);
        cluster.nodePorts.changed(undefined, svc);
      }
      wal.startAt(store.currentRevision);
      cluster.wal = wal;
      // On a virtual clock, time does not move on while watch events wait for their fsync.
      if (clock instanceof VirtualClock) clock.addIdleCheck(() => !wal.busy);
      store.holdWatchEvents();
      store.onChange((key, event) => wal.append(key, event));
      if (scan.records.length > 0 || scan.discarded) await wal.requestCompaction();
      sync(cluster.bootstrap());
      return cluster;
    }
    const snapshot = options.snapshot;
    const snapshotTime = snapshot?.header.time ? Date.parse(snapshot.header.time) : undefined;
    const clock = clockFor(options, snapshotTime);
    // A snapshot's objects take resourceVersions 1 … N: the store's revision starts after them.
    store = new MemoryStore(options.watchHistory, snapshot?.objects.length ?? 0, () => clock.now());
    const cluster = new Cluster(clock, random, store, options);
    if (snapshot) {
      const restored = await restoreSnapshot(snapshot, {
        store,
        registry: cluster.registry,
        api: cluster.api,
        random,
        now: clock.now(),
      });
      cluster.recoveryNotes.push(...restored.notes);
      cluster.restoredNodes = restored.nodes;
      const namespaces = cluster.kind('', 'v1', 'namespaces');
      for (const name of restored.missingNamespaces)
        await cluster.api.create(namespaces, undefined, { metadata: { name } }, { internal: true });
      if (restored.missingNamespaces.length > 0)
        cluster.recoveryNotes.push(
          `made the namespaces the snapshot's objects are in but it does not hold: ${restored.missingNamespaces.join(', ')}`,
        );
    }
    sync(cluster.bootstrap());
    return cluster;
  }

  /**
   * A cluster whose store is etcd: the cache is filled from one read of the prefix (CustomResourceDefinitions first,
   * so that their resources are served when their objects come), then one watch keeps it current. What bootstrap
   * makes is made once, by whichever API server comes first.
   */
  private static async startOnEtcd(
    options: ClusterOptions,
    etcdOptions: Omit<EtcdStoreOptions, 'log'>,
    random: SeededRandom,
  ): Promise<Cluster> {
    // Loaded only here: the etcd client (gRPC, protobuf) costs start-up time nobody else should pay.
    const { EtcdStore } = await import('../storage/etcd-store.js');
    const { snapshot, attach } = await EtcdStore.connect({ ...etcdOptions, log: options.log });
    const clock = clockFor(options);
    const store = new MemoryStore(options.watchHistory, snapshot.revision, () => clock.now());
    const etcd = attach(store);
    // Every API server over this etcd trusts one CA and verifies each other's ServiceAccount tokens, as
    // kube-apiservers given the same key files do: the first to start makes them, the others read them.
    // So is the admin token `sim serve --auth` prints: a kubeconfig written by one API server works with any.
    const shared = JSON.parse(
      await etcd.createOnce('cluster-keys', () =>
        JSON.stringify({
          ca: generateCa(),
          serviceAccountKey: ServiceAccountTokens.generateKey(),
          adminToken: randomBytes(32).toString('base64url'),
        }),
      ),
    ) as { ca: CaPem; serviceAccountKey: string; adminToken: string };
    const cluster = new Cluster(clock, random, store, { ...options, ca: options.ca ?? shared.ca }, etcd, etcd);
    serviceAccountTokens(cluster.api).useKey(shared.serviceAccountKey);
    cluster.sharedAdminToken = shared.adminToken;
    cluster.etcd = etcd;
    cluster.closers.push(() => etcd.close());
    const crds = resourceKey(customResourceDefinitions);
    const unserved = new Set<string>();
    for (const crdsFirst of [true, false]) {
      const byResource = new Map<string, KubeObject[]>();
      for (const kv of snapshot.kvs) {
        const where = etcd.parseKey(kv.key);
        if (!where) {
          if (!crdsFirst && !etcd.isRangeKey(kv.key)) unserved.add(kv.key.toString());
          continue;
        }
        if ((where.resource === crds) !== crdsFirst) continue;
        let objects = byResource.get(where.resource);
        if (!objects) byResource.set(where.resource, (objects = []));
        objects.push(etcd.decode(kv));
      }
      for (const [resource, objects] of byResource) store.load(resource, objects);
    }
    if (unserved.size > 0)
      cluster.recoveryNotes.push(`etcd holds ${unserved.size} keys of resources this server does not serve`);
    for (const svc of store.all('/services')) {
      cluster.ipAllocator.reserve((svc.spec as { clusterIP?: unknown }).clusterIP);
      cluster.nodePorts.changed(undefined, svc);
    }
    etcd.start();
    const ranges = cluster.serviceRanges;
    if (ranges) {
      await ranges.markStored();
      ranges.startRepair();
      cluster.closers.push(() => ranges.stopRepair());
    }
    await cluster.bootstrap();
    return cluster;
  }

  /**
   * What a fresh kube-apiserver creates: the system namespaces, PriorityClasses and the `kubernetes` Service; and
   * what kind adds to a new cluster: the default StorageClass.
   */
  /**
   * (With etcd, each step waits for the one before, as its objects must be in place for the next: the namespaces
   * before the `kubernetes` Service; another API server starting meanwhile may make some of them first.)
   */
  private bootstrap(): MaybePromise<void> {
    const namespaces = this.kind('', 'v1', 'namespaces');
    const fresh = !this.store.get(resourceKey(namespaces), undefined, 'default');
    const made: unknown[] = [];
    const make = (info: KindInfo, namespace: string | undefined, body: unknown): void => {
      made.push(raceTolerant(() => this.api.create(info, namespace, body, { internal: true })));
    };
    for (const name of SYSTEM_NAMESPACES) {
      if (!this.store.get(resourceKey(namespaces), undefined, name))
        make(namespaces, undefined, { metadata: { name } });
    }
    // The scheduling post-start hook's system PriorityClasses.
    const priorityClasses = this.kind('scheduling.k8s.io', 'v1', 'priorityclasses');
    for (const pc of systemPriorityClasses) {
      if (!this.store.get(resourceKey(priorityClasses), undefined, (pc.metadata as { name: string }).name))
        make(priorityClasses, undefined, pc);
    }
    // kind's default StorageClass comes with a new cluster (once: a cluster kept with --data may have deleted it).
    if (fresh) make(this.kind('storage.k8s.io', 'v1', 'storageclasses'), undefined, defaultStorageClass);
    // The aggregator's Local APIServices and the API Priority and Fairness configuration.
    made.push(this.apiServices.registerBuiltins());
    made.push(this.flowControl.bootstrap());
    const rest = (): MaybePromise<void> => {
      const services = this.kind('', 'v1', 'services');
      const service: unknown = !this.store.get(resourceKey(services), 'default', 'kubernetes')
        ? raceTolerant(() =>
            this.api.create(
              services,
              'default',
              {
                metadata: { name: 'kubernetes', labels: { component: 'apiserver', provider: 'kubernetes' } },
                spec: {
                  clusterIP: '10.96.0.1',
                  ports: [{ name: 'https', port: 443, protocol: 'TCP', targetPort: 6443 }],
                },
              },
              { internal: true },
            ),
          )
        : undefined;
      return then(allOf([service]), () => this.kubernetesEndpoints.reconcile());
    };
    return then(allOf(made), rest);
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

  /** Stops everything attached, closes watches, commits the log and compacts it into the snapshot. */
  async close(): Promise<void> {
    for (const fn of this.closers.reverse()) await fn();
    this.closers = [];
    this.store.closeWatches();
    const wal = this.wal;
    this.wal = undefined;
    await wal?.close();
  }

  /**
   * With --data, a promise that resolves once every change up to `revision` (default: the latest) is fsynced
   * in the write-ahead log; undefined when there is nothing to wait for (in memory, or already durable), so
   * callers can skip the await: `const d = cluster.durable(rv); if (d) await d;`.
   */
  durable(revision: number = this.store.currentRevision): Promise<void> | undefined {
    return this.wal?.whenDurable(revision);
  }

  /**
   * With etcd, a promise that resolves once this API server's cache has caught up with etcd's latest revision, so a
   * read without a resourceVersion sees every write acknowledged before it, by any API server; else undefined.
   */
  consistentRead(): Promise<void> | undefined {
    return this.etcd?.consistentRead();
  }

  get storedInEtcd(): boolean {
    return this.etcd !== undefined;
  }

  async flush(): Promise<void> {
    await this.durable();
  }
}
