import { CONTROLLER_NAMES, controllerFactories } from '../controllers/index.js';
import { ControllerManager, selectControllers, type LogFn } from '../runtime/manager.js';
import type { ServerOptions } from '../server/server.js';
import { Cluster, type ClusterOptions } from './cluster.js';

export interface SimulatorOptions extends ClusterOptions {
  /** Controllers to run, kube-controller-manager style ('*', 'name', '-name'); default '*'. */
  controllers?: string;
  log?: LogFn;
}

export interface Simulator {
  cluster: Cluster;
  controllers: ControllerManager;
  /** What buildServer needs from the components (e.g. the simulated kubelets): `buildServer(cluster, {...sim.serverOptions, ...})`. */
  serverOptions: Partial<ServerOptions>;
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
  const controllers = new ControllerManager(cluster, log);
  cluster.onClose(() => controllers.stop());
  await controllers.start(controllerFactories, selected);
  return { cluster, controllers, serverOptions: {}, close: () => cluster.close() };
}
