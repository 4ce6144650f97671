import type { Clock } from '../clock/clock.js';
import type { SeededRandom } from '../clock/random.js';
import type { KubeClient } from '../client/client.js';
import { SharedInformers, type InformerFactory } from '../client/informer.js';
import type { ApiResources, CertificateAuthority, Controller, ControllerContext } from './controller.js';
import type { Metrics } from '../metrics/metrics.js';
import { EventRecorder } from './events.js';

export type ControllerFactory = (ctx: ControllerContext) => Controller;
export type LogFn = ControllerContext['log'];

/**
 * Parses kube-controller-manager's --controllers syntax: `*` turns on every controller, `name` one,
 * `-name` turns one off (`*,-configwatcher`). Unknown names are an error, as they are there.
 */
export function selectControllers(spec: string, known: readonly string[]): Set<string> {
  const selected = new Set<string>();
  const items = spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const unknown = items.map((i) => i.replace(/^-/, '')).filter((n) => n !== '*' && !known.includes(n));
  if (unknown.length > 0)
    throw new Error(`unknown controller(s) in --controllers: ${unknown.join(', ')} (known: ${known.join(', ')})`);
  if (items.includes('*')) for (const n of known) selected.add(n);
  for (const item of items) {
    if (item.startsWith('-')) selected.delete(item.slice(1));
    else if (item !== '*') selected.add(item);
  }
  return selected;
}

/**
 * What a ControllerManager runs against (cluster/controller-host.ts makes one of a Cluster): a client of its own
 * for each manager, as every component of a cluster has, the kinds served, time and randomness.
 */
export interface ControllerHost {
  client(): KubeClient;
  /**
   * The process's informers, which every manager on this host shares (one list, watch and cache per resource);
   * absent, each manager lists and watches through its own client, as a component in a process of its own does.
   */
  readonly informers?: SharedInformers;
  readonly resources: ApiResources;
  readonly clock: Clock;
  readonly random: SeededRandom;
  readonly certificates?: CertificateAuthority;
  readonly metrics?: Metrics;
}

/**
 * Starts the selected controllers against a cluster through a client of their own and informers shared among them
 * (and with the host's other managers when it shares its informers).
 */
export class ControllerManager {
  readonly client: KubeClient;
  readonly informers: InformerFactory;
  readonly context: ControllerContext;
  private readonly controllers: Controller[] = [];

  constructor(host: ControllerHost, log: LogFn) {
    this.client = host.client();
    this.informers = (host.informers ?? new SharedInformers(this.client, host.clock)).component();
    const recorders = new Map<string, EventRecorder>();
    this.context = {
      resources: host.resources,
      certificates: host.certificates,
      client: this.client,
      informers: this.informers,
      clock: host.clock,
      random: host.random,
      metrics: host.metrics,
      recorder: (component) => {
        let r = recorders.get(component);
        if (!r) recorders.set(component, (r = new EventRecorder(this.client, host.clock, component)));
        return r;
      },
      log,
    };
  }

  async start(factories: ReadonlyMap<string, ControllerFactory>, selected: ReadonlySet<string>): Promise<void> {
    for (const [name, factory] of factories) if (selected.has(name)) this.controllers.push(factory(this.context));
    await this.informers.start();
    for (const c of this.controllers) await c.start();
  }

  stop(): void {
    for (const c of this.controllers) c.stop();
    this.informers.stop();
  }

  names(): string[] {
    return this.controllers.map((c) => c.name);
  }
}
