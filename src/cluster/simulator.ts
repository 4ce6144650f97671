import { CONTROLLER_NAMES, controllerFactories } from '../controllers/index.js';
import { KubeletFleet, type KubeletOptions } from '../kubelet/fleet.js';
import { defaultProfile } from '../kubelet/node.js';
import { defaultImageCatalog } from '../kubelet/images.js';
import { defaultStages } from '../kubelet/stages.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { ControllerManager, selectControllers, type ControllerHost, type LogFn } from '../runtime/manager.js';
import type { FastifyInstance } from 'fastify';
import type { KubeClient } from '../client/client.js';
import { buildServer, type ServerOptions } from '../server/server.js';
import { buildKubeletServer } from '../server/kubelet-server.js';
import type { KubeletEndpoint } from '../api/kubelet-connector.js';
import type { AddressInfo } from 'node:net';
import { Cluster, type ClusterOptions } from './cluster.js';
import { controllerHost } from './controller-host.js';
import { InProcessClient } from './in-process-client.js';
import { LeaderElector } from '../runtime/leader-election.js';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { RestoredNodes } from './snapshot-restore.js';

export interface SimulatorOptions extends ClusterOptions {
  /** Controllers to run, kube-controller-manager style ('*', 'name', '-name'); default '*'. */
  controllers?: string;
  log?: LogFn;
  /** Simulated nodes node-1 … node-N, each with a kubelet (which also adopts Nodes created later); 0 or unset: no kubelets. */
  nodes?: number;
  /** The kubelets' node profile, lifecycle stages, kube-sim.dev/* defaults and pod CIDR range. */
  kubelet?: Partial<Omit<KubeletOptions, 'nodes'>>;
  /** Run the default scheduler (default: when there are simulated nodes). */
  scheduler?: boolean;
  /**
   * Which of the controllers, the scheduler and the kubelets this process runs (`sim serve --components`; default
   * all). With etcd, the controllers and the scheduler elect a leader on their Lease in kube-system, so that several
   * processes may run them and one at a time leads.
   */
  components?: ReadonlySet<Component>;
  /**
   * Over etcd, the address this process serves its kubelets' API on (an ephemeral port), for API servers in other
   * processes: `sim serve --host`; default 127.0.0.1.
   */
  kubeletAddress?: string;
  /**
   * 'shared' (the default): the controllers, the scheduler and the kubelets of this process read one informer cache,
   * so each kind is listed, watched and cached once (kube-controller-manager's SharedInformerFactory, across the
   * components); 'separate': each has its own client, watches and cache, as out-of-process components would.
   */
  informers?: 'shared' | 'separate';
}

export const COMPONENTS = ['apiserver', 'controllers', 'scheduler', 'kubelets'] as const;
export type Component = (typeof COMPONENTS)[number];

export interface Simulator {
  cluster: Cluster;
  controllers: ControllerManager;
  /** What buildServer needs from the components (e.g. the simulated kubelets): `buildServer(cluster, {...sim.serverOptions, ...})`. */
  serverOptions: Partial<ServerOptions>;
  /** The cluster's HTTP face with its components (not listening): buildServer with serverOptions and these. */
  buildServer(options?: ServerOptions): FastifyInstance;
  /** A new in-process client of the cluster, as a controller of its own would have. */
  client(): KubeClient;
  /** Stops every component and closes the cluster (watches, data file). */
  close(): Promise<void>;
}

/**
 * Over etcd, this process's kubelets' own API on an ephemeral port of `address`, which API servers in other
 * processes reach for pods/log and exec; resolves with where it listens (as its nodes publish it).
 */
async function serveKubelets(
  cluster: Cluster,
  kubelet: KubeletFleet,
  address: string,
  log: LogFn,
): Promise<KubeletEndpoint> {
  const app = buildKubeletServer(cluster, kubelet, { logger: (line) => log('error', line) });
  await app.listen({ host: address, port: 0 });
  cluster.onClose(() => app.close());
  const { port } = app.server.address() as AddressInfo;
  // A wildcard address is reached on loopback from this machine.
  const host = address === '0.0.0.0' || address === '::' ? '127.0.0.1' : address;
  log('info', `kubelets: API on ${host}:${port} for the API servers of other processes`);
  return { host, port };
}

/**
 * Everything `sim serve` runs, minus the HTTP listener: the cluster and the components attached to it.
 * `sim serve` and `sim replay` both start here, so a component added once runs in both. Keep it short:
 * each component is one or two lines that attach to the cluster and register their shutdown on it.
 * Throws (with a message for the user) when an option is invalid.
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const log: LogFn = options.log ?? (() => undefined);
  // Who this process is to the others (Lease holders): from the OS's random source, not the seeded RNG, since two
  // processes started with the same --seed must still be told apart.
  const processId = randomUUID();
  const selected = selectControllers(options.controllers ?? '*', CONTROLLER_NAMES);
  const cluster = await Cluster.start(options);
  const { controllers, serverOptions } = await startComponents(
    {
      host: controllerHost(cluster, { informers: options.informers ?? 'shared' }),
      identity: `${hostname()}_${processId}`,
      // With etcd other processes may run the same components: they lead on Leases, through this process's store.
      electionClient: options.etcd ? new InProcessClient(cluster) : undefined,
      onClose: (fn) => cluster.onClose(fn),
      restoredNodes: cluster.restoredNodes,
      // Over etcd other processes may run kubelets too: each node runs in one of them (node-ownership.ts), and
      // this process serves its kubelets' API for the API servers of the others.
      sharedKubelets: options.etcd && {
        leaseName: `kubelets-${processId}`,
        serve: (fleet) => serveKubelets(cluster, fleet, options.kubeletAddress ?? '127.0.0.1', log),
      },
    },
    options,
    selected,
  );
  return {
    cluster,
    controllers,
    serverOptions,
    buildServer: (extra = {}) => buildServer(cluster, { ...serverOptions, ...extra }),
    client: () => new InProcessClient(cluster),
    close: () => cluster.close(),
  };
}

/** Where components run: the host they work through, and how they lead when other processes may run them too. */
export interface ComponentSite {
  host: ControllerHost;
  /** This process as a Lease holder: `<hostname>_<uuid>`. */
  identity: string;
  /** The client the controllers' and the scheduler's leader electors use; undefined: this process alone runs them. */
  electionClient?: KubeClient;
  onClose(fn: () => Promise<void> | void): void;
  restoredNodes: RestoredNodes;
  /** Other processes run kubelets too: the nodes are shared out on Leases, and this one serves its kubelets' API. */
  sharedKubelets?: { leaseName: string; serve(fleet: KubeletFleet): Promise<KubeletEndpoint> };
}

/**
 * The controllers, the scheduler and the kubelets that `options.components` names, started on a site: a Cluster of
 * this process (startSimulator) or an API server reached over HTTP (attached.ts), the same code either way.
 */
export async function startComponents(
  site: ComponentSite,
  options: SimulatorOptions,
  selected: ReadonlySet<string>,
): Promise<{ controllers: ControllerManager; serverOptions: Partial<ServerOptions> }> {
  const log: LogFn = options.log ?? (() => undefined);
  const { host, identity } = site;
  const runs = (component: Component): boolean => options.components?.has(component) ?? true;
  /**
   * Starts a component's manager, or, where other processes may run it too (over etcd, or attached to an API
   * server), once this process leads its Lease; a leader that loses the Lease stops, and a fresh manager starts
   * should it lead again.
   */
  const startElected = async (
    lease: string,
    start: (manager: ControllerManager) => Promise<void>,
  ): Promise<ControllerManager> => {
    let manager = new ControllerManager(host, log);
    site.onClose(() => manager.stop());
    if (!site.electionClient) {
      await start(manager);
      return manager;
    }
    const elector = new LeaderElector({
      name: lease,
      identity,
      client: site.electionClient,
      clock: host.clock,
      log,
      onStartedLeading: () => start(manager),
      onStoppedLeading: () => {
        manager.stop();
        manager = new ControllerManager(host, log);
      },
    });
    site.onClose(() => elector.stop());
    elector.start();
    return manager;
  };
  const controllers = runs('controllers')
    ? await startElected('kube-controller-manager', (m) => m.start(controllerFactories, selected))
    : new ControllerManager(host, log);
  const serverOptions: Partial<ServerOptions> = {};
  // The scheduler and the kubelets are components of their own (own client; informers shared unless 'separate').
  // A snapshot's Nodes get kubelets (and pods a scheduler) as node-1 … node-N do.
  const restoredNodes = site.restoredNodes;
  const simulatedNodes = (options.nodes ?? 0) + restoredNodes.size;
  if (runs('scheduler') && (options.scheduler ?? simulatedNodes > 0)) {
    await startElected('kube-scheduler', (m) =>
      m.start(new Map([['scheduler', (ctx) => new Scheduler(ctx)]]), new Set(['scheduler'])),
    );
  }
  if (runs('kubelets') && simulatedNodes > 0) {
    const kubelets = new ControllerManager(host, log);
    let endpoint: KubeletEndpoint | undefined;
    const shared = site.sharedKubelets;
    const fleet = new KubeletFleet(kubelets.context, {
      nodes: options.nodes ?? 0,
      restoredNodes,
      profile: options.kubelet?.profile ?? defaultProfile(),
      stages: options.kubelet?.stages ?? defaultStages(),
      settings: options.kubelet?.settings ?? {},
      clusterCidr: options.kubelet?.clusterCidr ?? '10.244.0.0/16',
      images: options.kubelet?.images ?? defaultImageCatalog(),
      missingImages: options.kubelet?.missingImages ?? [],
      manages: options.kubelet?.manages,
      shared: shared && { identity, leaseName: shared.leaseName, endpoint: () => endpoint },
    });
    site.onClose(() => kubelets.stop());
    // Closers run last first: the node Leases are given up before the kubelets' informers stop.
    site.onClose(() => fleet.release());
    if (shared) endpoint = await shared.serve(fleet);
    await kubelets.start(new Map([['kubelet', () => fleet]]), new Set(['kubelet']));
    serverOptions.kubelet = fleet;
  }
  return { controllers, serverOptions };
}
