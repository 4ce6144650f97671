import { Errors } from '../api/errors.js';
import { remember } from './ip-allocator.js';
import type { SeededRandom } from '../clock/random.js';
import type { KubeObject } from '../api/types.js';

/** kube-apiserver's default --service-node-port-range. */
export const NODE_PORT_RANGE: readonly [number, number] = [30000, 32767];

/**
 * The node ports Services hold, kept from the stored Services (every write of one passes here), and free ones drawn
 * with the seeded RNG. A port a Service names for several protocols is one allocation, as kube-apiserver counts it.
 */
export class NodePortAllocator {
  private readonly used = new Set<number>();
  /**
   * Over etcd (clusterWide, service-ranges.ts): the ports drawn for writes not yet made, which may be drawn again
   * there; and etcd's bitmap, not this process's view (which may lag a deletion elsewhere), decides what is held.
   */
  readonly drawn = new Set<number>();
  clusterWide = false;

  constructor(
    private readonly random: SeededRandom,
    readonly range: readonly [number, number] = NODE_PORT_RANGE,
  ) {}

  isAllocated(port: number): boolean {
    return !this.clusterWide && this.used.has(port);
  }

  /** A free port in the range that is not one of `taken` (ports the same request already chose). */
  allocate(taken: ReadonlySet<number>): number {
    const [low, high] = this.range;
    const size = high - low + 1;
    const start = this.random.int(size);
    for (let i = 0; i < size; i++) {
      const port = low + ((start + i) % size);
      if (!this.used.has(port) && !taken.has(port)) {
        if (this.clusterWide) remember(this.drawn, port);
        return port;
      }
    }
    // kube-apiserver's answer (an internal error, as it is no fault of the request's fields).
    throw Errors.internal('failed to allocate a nodePort: range is full');
  }

  /** A Service was written or deleted: what it holds now replaces what it held. */
  changed(old: KubeObject | undefined, next: KubeObject | undefined): void {
    for (const port of nodePortsOf(old)) this.used.delete(port);
    for (const port of nodePortsOf(next)) this.used.add(port);
  }
}

/** The node ports a Service holds: its ports' and its health check's. */
export function nodePortsOf(svc: KubeObject | undefined): number[] {
  const spec = svc?.spec as { ports?: Array<{ nodePort?: unknown }>; healthCheckNodePort?: unknown } | undefined;
  const out: number[] = [];
  for (const p of spec?.ports ?? []) if (typeof p.nodePort === 'number' && p.nodePort > 0) out.push(p.nodePort);
  if (typeof spec?.healthCheckNodePort === 'number' && spec.healthCheckNodePort > 0) out.push(spec.healthCheckNodePort);
  return out;
}
