import { CONTROLLER_NAMES, controllerFactories } from '../controllers/index.js';
import { KubeletFleet, type KubeletOptions } from '../kubelet/fleet.js';
import { defaultProfile } from '../kubelet/node.js';
import { defaultImageCatalog } from '../kubelet/images.js';
import { defaultStages } from '../kubelet/stages.js';
import { Scheduler } from '../scheduler/scheduler.js';
import { ControllerManager, selectControllers, type LogFn } from '../runtime/manager.js';
import type { FastifyInstance } from 'fastify';
import type { KubeClient } from '../client/client.js';
import { buildServer, type ServerOptions } from '../server/server.js';
import { Cluster, type ClusterOptions } from './cluster.js';
import { controllerHost } from './controller-host.js';
import { InProcessClient } from './in-process-client.js';
import { LeaderElector } from '../runtime/leader-election.js';
import { hostname } from 'node:os';

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
 * Everything `sim serve` runs, minus the HTTP listener: the cluster and the components attached to it.
 * `sim serve` and `sim replay` both start here, so a component added once runs in both. Keep it short:
 * each component is one or two lines that attach to the cluster and register their shutdown on it.
 * Throws (with a message for the user) when an option is invalid.
 */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const log: LogFn = options.log ?? (() => undefined);
  const selected = selectControllers(options.controllers ?? '*', CONTROLLER_NAMES);
  const cluster = await Cluster.start(options);
  const host = controllerHost(cluster);
  const runs = (component: Component): boolean => options.components?.has(component) ?? true;
  /**
   * Starts a component's manager, or, with etcd (where other processes may run it too), once this process leads its
   * Lease; a leader that loses the Lease stops, and a fresh manager starts should it lead again.
   */
  const startElected = async (
    lease: string,
    start: (manager: ControllerManager) => Promise<void>,
  ): Promise<ControllerManager> => {
    let manager = new ControllerManager(host, log);
    cluster.onClose(() => manager.stop());
    if (!options.etcd) {
      await start(manager);
      return manager;
    }
    const elector = new LeaderElector({
      name: lease,
      identity: `${hostname()}_${cluster.random.uuid()}`,
      client: new InProcessClient(cluster),
      clock: cluster.clock,
      log,
      onStartedLeading: () => start(manager),
      onStoppedLeading: () => {
        manager.stop();
        manager = new ControllerManager(host, log);
      },
    });
    cluster.onClose(() => elector.stop());
    elector.start();
    return manager;
  };
  const controllers = runs('controllers')
    ? await startElected('kube-controller-manager', (m) => m.start(controllerFactories, selected))
    : new ControllerManager(host, log);
  const serverOptions: Partial<ServerOptions> = {};
  // The scheduler and the kubelets are components of their own (own client and informers), as in a cluster.
  // A snapshot's Nodes get kubelets (and pods a scheduler) as node-1 … node-N do.
  const restoredNodes = cluster.restoredNodes;
  const simulatedNodes = (options.nodes ?? 0) + restoredNodes.size;
  if (runs('scheduler') && (options.scheduler ?? simulatedNodes > 0)) {
    await startElected('kube-scheduler', (m) =>
      m.start(new Map([['scheduler', (ctx) => new Scheduler(ctx)]]), new Set(['scheduler'])),
    );
  }
  if (runs('kubelets') && simulatedNodes > 0) {
    const kubelets = new ControllerManager(host, log);
    const fleet = new KubeletFleet(kubelets.context, {
      nodes: options.nodes ?? 0,
      restoredNodes,
      profile: options.kubelet?.profile ?? defaultProfile(),
      stages: options.kubelet?.stages ?? defaultStages(),
      settings: options.kubelet?.settings ?? {},
      clusterCidr: options.kubelet?.clusterCidr ?? '10.244.0.0/16',
      images: options.kubelet?.images ?? defaultImageCatalog(),
      missingImages: options.kubelet?.missingImages ?? [],
    });
    cluster.onClose(() => kubelets.stop());
    await kubelets.start(new Map([['kubelet', () => fleet]]), new Set(['kubelet']));
    serverOptions.kubelet = fleet;
  }
  return {
    cluster,
    controllers,
    serverOptions,
    buildServer: (extra = {}) => buildServer(cluster, { ...serverOptions, ...extra }),
    client: () => new InProcessClient(cluster),
    close: () => cluster.close(),
  };
}
