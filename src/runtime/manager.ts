import type { Cluster } from '../cluster/cluster.js';
import { InProcessClient } from '../cluster/in-process-client.js';
import { SharedInformers } from '../client/informer.js';
import { groupVersion, type KindInfo } from '../registry/types.js';
import type { Controller, ControllerContext, ResourceInfo } from './controller.js';
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

/** Starts the selected controllers against a cluster through the in-process client and shared informers. */
export class ControllerManager {
  readonly client: InProcessClient;
  readonly informers: SharedInformers;
  readonly context: ControllerContext;
  private readonly controllers: Controller[] = [];

  constructor(
    private readonly cluster: Cluster,
    log: LogFn,
  ) {
    this.client = new InProcessClient(cluster);
    this.informers = new SharedInformers(this.client, cluster.clock);
    const recorders = new Map<string, EventRecorder>();
    const toInfo = (k: KindInfo): ResourceInfo => ({
      gvr: { group: k.group, version: k.version, resource: k.resource },
      apiVersion: groupVersion(k),
      kind: k.kind,
      namespaced: k.namespaced,
    });
    this.context = {
      resources: {
        all: () => cluster.registry.kinds().map(toInfo),
        byKind: (apiVersion, kind) => {
          const k = cluster.registry.byGroupVersionKind(apiVersion, kind);
          return k ? toInfo(k) : undefined;
        },
        onChange: (fn) => cluster.registry.onChange(fn),
      },
      client: this.client,
      informers: this.informers,
      clock: cluster.clock,
      random: cluster.random,
      recorder: (component) => {
        let r = recorders.get(component);
        if (!r) recorders.set(component, (r = new EventRecorder(this.client, cluster.clock, component)));
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

  /** Lets a virtual clock know when controllers still have work. */
  watchIdle(isIdle: () => boolean): void {
    this.cluster.virtualClock?.addIdleCheck(isIdle);
  }
}
