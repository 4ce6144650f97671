import { Errors, FieldErrors, type StatusCause } from '../api/errors.js';
import type { KubeObject, Preconditions } from '../api/types.js';
import type { Clock, TimerHandle } from '../clock/clock.js';
import { rfc3339 } from '../clock/clock.js';
import type { SeededRandom } from '../clock/random.js';
import type { MaybePromise } from '../api/maybe-async.js';
import type { MemoryStore, StoreWrites } from '../storage/memory-store.js';
import { SERVICE_IP_BASE, SERVICE_IP_SIZE, ipNumber, ipText, type ClusterIPAllocator } from './ip-allocator.js';
import { nodePortsOf, type NodePortAllocator } from './node-port-allocator.js';

/** A compare-and-swap of keys under etcd's prefix that hold no resource (EtcdStore.swap). */
export interface RangeSwap {
  swap<T>(
    names: readonly string[],
    update: (values: Array<Buffer | undefined>) => { values?: Buffer[]; result: T },
  ): Promise<T>;
}

/** kube-apiserver's keys of its allocator bitmaps (under the prefix). */
export const SERVICE_IPS_KEY = 'ranges/serviceips';
export const NODE_PORTS_KEY = 'ranges/servicenodeports';

/**
 * One of kube-apiserver's ranges: the values a RangeAllocation's bitmap stands for. Bit i of the bitmap (a
 * big-endian integer, as Go's big.Int.Bytes writes it) is the range's i-th value: for 10.96.0.0/12, 10.96.0.1 is
 * bit 0 (the network address is not allocatable), for 30000-32767, 30000 is.
 */
interface Range<T> {
  what: 'IP' | 'port';
  key: string;
  text: string;
  size: number;
  offset(value: T): number | undefined;
  value(offset: number): T;
}

const SERVICE_IPS: Range<string> = {
  what: 'IP',
  key: SERVICE_IPS_KEY,
  text: '10.96.0.0/12',
  size: SERVICE_IP_SIZE - 2,
  offset: (ip) => {
    const n = ipNumber(ip);
    const offset = n === undefined ? -1 : n - SERVICE_IP_BASE - 1;
    return offset >= 0 && offset < SERVICE_IP_SIZE - 2 ? offset : undefined;
  },
  value: (offset) => ipText(SERVICE_IP_BASE + 1 + offset),
};

function nodePortRange(range: readonly [number, number]): Range<number> {
  const [low, high] = range;
  return {
    what: 'port',
    key: NODE_PORTS_KEY,
    text: `${low}-${high}`,
    size: high - low + 1,
    offset: (port) => (port >= low && port <= high ? port - low : undefined),
    value: (offset) => low + offset,
  };
}

/** A RangeAllocation's bitmap, little-endian in memory. */
class Bitmap {
  private constructor(
    private readonly bits: Uint8Array,
    readonly created: string | undefined,
  ) {}

  static decode(value: Buffer | undefined, size: number): Bitmap {
    const bits = new Uint8Array(Math.ceil(size / 8));
    if (!value) return new Bitmap(bits, undefined);
    const stored = JSON.parse(value.toString('utf8')) as { data?: string; metadata?: { creationTimestamp?: string } };
    const data = Buffer.from(stored.data ?? '', 'base64');
    for (let i = 0; i < data.length && i < bits.length; i++) bits[i] = data[data.length - 1 - i]!;
    return new Bitmap(bits, stored.metadata?.creationTimestamp);
  }

  /** The offsets set, in order (zero bytes skipped: a 10.96.0.0/12 bitmap is 128 KiB). */
  *setOffsets(): Generator<number> {
    for (let i = 0; i < this.bits.length; i++) {
      const byte = this.bits[i]!;
      if (byte === 0) continue;
      for (let b = 0; b < 8; b++) if (byte & (1 << b)) yield i * 8 + b;
    }
  }

  has(offset: number): boolean {
    return (this.bits[offset >> 3]! & (1 << (offset & 7))) !== 0;
  }

  set(offset: number, on: boolean): void {
    if (on) this.bits[offset >> 3]! |= 1 << (offset & 7);
    else this.bits[offset >> 3]! &= ~(1 << (offset & 7));
  }

  encode(range: string, now: string): Buffer {
    let top = this.bits.length;
    while (top > 0 && this.bits[top - 1] === 0) top--;
    const data = Buffer.alloc(top);
    for (let i = 0; i < top; i++) data[top - 1 - i] = this.bits[i]!;
    return Buffer.from(
      JSON.stringify({
        kind: 'RangeAllocation',
        apiVersion: 'v1',
        metadata: { creationTimestamp: this.created ?? now },
        range,
        data: data.toString('base64'),
      }),
    );
  }
}

/** The cluster IPs and node ports a Service holds. */
function held(svc: KubeObject | undefined): { ips: string[]; ports: number[] } {
  const spec = (svc?.spec ?? {}) as { clusterIP?: unknown; clusterIPs?: unknown };
  const ips = Array.isArray(spec.clusterIPs) ? spec.clusterIPs : [spec.clusterIP];
  return {
    ips: ips.filter((ip): ip is string => typeof ip === 'string' && SERVICE_IPS.offset(ip) !== undefined),
    ports: [...new Set(nodePortsOf(svc))],
  };
}

/** kube-apiserver's repair interval, and how many repairs in a row must find a value leaked before it is freed. */
const REPAIR_MS = 3 * 60_000;
const LEAK_REPAIRS = 3;

const minus = <T>(a: readonly T[], b: readonly T[]): T[] => a.filter((v) => !b.includes(v));

/**
 * Cluster-wide ClusterIP and NodePort allocation over etcd, as kube-apiserver's allocators keep it: a RangeAllocation
 * bitmap at `/registry/ranges/serviceips` and one at `/registry/ranges/servicenodeports`, changed by compare-and-swap
 * before a Service is written, so that two API servers never hand out one value. The strategy draws from this
 * process's view (every Service any process stored, through the watch); a value another process took meanwhile is
 * found taken in the bitmap, and one this process drew is then drawn again there, while one the client named is
 * 422 "provided … is already allocated". A write that fails gives back what it took; a Service deleted or updated
 * gives back what it no longer holds. Start-up marks what the stored Services hold (a cluster made before the
 * bitmaps, or a crash between a take and its write).
 */
export class ServiceRangeWrites implements StoreWrites {
  private readonly nodePortRange: Range<number>;

  constructor(
    private readonly inner: StoreWrites,
    private readonly ranges: RangeSwap,
    private readonly store: MemoryStore,
    private readonly ips: ClusterIPAllocator,
    private readonly nodePorts: NodePortAllocator,
    private readonly random: SeededRandom,
    private readonly clock: Clock,
  ) {
    this.nodePortRange = nodePortRange(nodePorts.range);
    ips.clusterWide = true;
    nodePorts.clusterWide = true;
  }

  /** Marks what every stored Service holds (one swap; nothing is given back here). */
  async markStored(): Promise<void> {
    const { ips, ports } = this.storedValues();
    await this.change(undefined, [...ips], [...ports], true);
  }

  private storedValues(): { ips: Set<string>; ports: Set<number> } {
    const ips = new Set<string>();
    const ports = new Set<number>();
    for (const svc of this.store.all('/services')) {
      const h = held(svc);
      for (const ip of h.ips) ips.add(ip);
      for (const port of h.ports) ports.add(port);
    }
    return { ips, ports };
  }

  /** Offsets found set with no Service holding them, and in how many repairs in a row. */
  private leaks = new Map<string, number>();
  private repairTimer: TimerHandle | undefined;

  /**
   * kube-apiserver's repair controllers, every 3 minutes: what stored Services hold is marked, and a value marked
   * that no Service holds (a crash between a take and its write, or a give-back) is freed once three repairs in a
   * row found it so, which no write in flight outlasts.
   */
  startRepair(): void {
    this.repairTimer = this.clock.setTimer(REPAIR_MS, () => {
      this.repair().then(
        () => this.startRepair(),
        () => this.startRepair(),
      );
    });
  }

  stopRepair(): void {
    this.repairTimer?.cancel();
    this.repairTimer = undefined;
  }

  async repair(): Promise<void> {
    const stored = this.storedValues();
    const leaks = new Map<string, number>();
    await this.ranges.swap([SERVICE_IPS.key, NODE_PORTS_KEY], (values) => {
      const now = rfc3339(this.clock.now());
      let changed = false;
      leaks.clear();
      const out = [
        [SERVICE_IPS as Range<string | number>, stored.ips as Set<string | number>, values[0]] as const,
        [this.nodePortRange as Range<string | number>, stored.ports as Set<string | number>, values[1]] as const,
      ].map(([range, holds, value]) => {
        const bitmap = Bitmap.decode(value, range.size);
        for (const v of holds) {
          const offset = range.offset(v as never);
          if (offset !== undefined && !bitmap.has(offset)) {
            bitmap.set(offset, true);
            changed = true;
          }
        }
        for (const offset of bitmap.setOffsets()) {
          const v = range.value(offset);
          if (holds.has(v)) continue;
          const key = `${range.key}/${offset}`;
          const seen = (this.leaks.get(key) ?? 0) + 1;
          if (seen >= LEAK_REPAIRS) {
            bitmap.set(offset, false);
            changed = true;
          } else leaks.set(key, seen);
        }
        return bitmap.encode(range.text, now);
      });
      return changed ? { values: out, result: undefined } : { result: undefined };
    });
    this.leaks = leaks;
  }

  create(resource: string, obj: KubeObject): MaybePromise<KubeObject> {
    if (resource !== '/services') return this.inner.create(resource, obj);
    return this.createService(obj);
  }

  private async createService(obj: KubeObject): Promise<KubeObject> {
    const { ips, ports } = held(obj);
    // A Service of that name is there: etcd's AlreadyExists, not an allocation error, is the answer.
    if (this.store.get('/services', obj.metadata.namespace, obj.metadata.name!))
      return this.inner.create('/services', obj);
    const taken = await this.take(obj, ips, ports);
    try {
      return await this.inner.create('/services', obj);
    } catch (err) {
      await this.giveBack(taken.ips, taken.ports);
      throw err;
    }
  }

  guaranteedUpdate(
    resource: string,
    namespace: string | undefined,
    name: string,
    preconditions: Preconditions,
    tryUpdate: (current: KubeObject) => KubeObject,
    dryRun?: boolean,
  ): MaybePromise<{ object: KubeObject; changed: boolean }> {
    if (resource !== '/services' || dryRun)
      return this.inner.guaranteedUpdate(resource, namespace, name, preconditions, tryUpdate, dryRun);
    return this.updateService(namespace, name, preconditions, tryUpdate);
  }

  private async updateService(
    namespace: string | undefined,
    name: string,
    preconditions: Preconditions,
    tryUpdate: (current: KubeObject) => KubeObject,
  ): Promise<{ object: KubeObject; changed: boolean }> {
    let current: KubeObject;
    try {
      current = this.store.current('/services', namespace, name, preconditions);
    } catch {
      // Not here (yet), or a precondition fails: etcd's store says which, as without allocations.
      return this.inner.guaranteedUpdate('/services', namespace, name, preconditions, tryUpdate);
    }
    const next = tryUpdate(current);
    const before = held(current);
    const after = held(next);
    const taken = await this.take(next, minus(after.ips, before.ips), minus(after.ports, before.ports));
    let result: { object: KubeObject; changed: boolean };
    try {
      result = await this.inner.guaranteedUpdate('/services', namespace, name, preconditions, (latest) =>
        latest === current ? next : tryUpdate(latest),
      );
    } catch (err) {
      await this.giveBack(taken.ips, taken.ports);
      throw err;
    }
    const now = held(result.object);
    if (!result.changed) await this.giveBack(minus(taken.ips, now.ips), minus(taken.ports, now.ports));
    else await this.giveBack(minus(before.ips, now.ips), minus(before.ports, now.ports));
    return result;
  }

  async delete(
    resource: string,
    namespace: string | undefined,
    name: string,
    preconditions?: Preconditions,
  ): Promise<KubeObject> {
    const gone = await this.inner.delete(resource, namespace, name, preconditions);
    if (resource === '/services') {
      const { ips, ports } = held(gone);
      await this.giveBack(ips, ports);
    }
    return gone;
  }

  /** Takes these values of `svc` in the bitmaps (drawing again the ones this process drew that are taken). */
  private async take(svc: KubeObject, ips: string[], ports: number[]): Promise<{ ips: string[]; ports: number[] }> {
    let taken: { ips: string[]; ports: number[] } | undefined;
    try {
      taken = await this.change(svc, ips, ports, true);
      return taken;
    } finally {
      // Drawn or drawn again, they are this write's now (or nobody's): no later request may draw them again.
      for (const ip of [...ips, ...(taken?.ips ?? [])]) this.ips.drawn.delete(ip);
      for (const port of [...ports, ...(taken?.ports ?? [])]) this.nodePorts.drawn.delete(port);
    }
  }

  private async giveBack(ips: string[], ports: number[]): Promise<void> {
    if (ips.length === 0 && ports.length === 0) return;
    await this.change(undefined, ips, ports, false);
  }

  /**
   * One swap over the bitmaps these values are in: set (`on`) or cleared. With `svc`, a value already set is drawn
   * again when this process drew it (the Service is given the new one), else it is an error of the request's.
   * Resolves with the values it set (after redraws).
   */
  private change(
    svc: KubeObject | undefined,
    ips: readonly string[],
    ports: readonly number[],
    on: boolean,
  ): Promise<{ ips: string[]; ports: number[] }> {
    const names = [...(ips.length > 0 ? [SERVICE_IPS.key] : []), ...(ports.length > 0 ? [NODE_PORTS_KEY] : [])];
    if (names.length === 0) return Promise.resolve({ ips: [], ports: [] });
    const drawnIps = new Set(ips.filter((ip) => this.ips.drawn.has(ip)));
    const drawnPorts = new Set(ports.filter((port) => this.nodePorts.drawn.has(port)));
    const redrawn = new Map<unknown, unknown>();
    return this.ranges.swap(names, (values) => {
      const now = rfc3339(this.clock.now());
      const out: Buffer[] = [];
      const causes: StatusCause[] = [];
      let changed = false;
      const apply = <T>(range: Range<T>, list: readonly T[], drawn: Set<T>, value: Buffer | undefined): T[] => {
        const bitmap = Bitmap.decode(value, range.size);
        const result: T[] = [];
        for (const named of list) {
          // A run after a lost race starts from what an earlier run drew again (the Service holds that now).
          const v = (redrawn.get(named) ?? named) as T;
          const offset = range.offset(v);
          if (offset === undefined) continue;
          if (!on) {
            if (bitmap.has(offset)) {
              bitmap.set(offset, false);
              changed = true;
            }
            continue;
          }
          if (!bitmap.has(offset)) {
            bitmap.set(offset, true);
            changed = true;
            result.push(v);
            continue;
          }
          if (!svc) continue;
          if (!drawn.has(v)) {
            causes.push(alreadyAllocated(svc, range.what, v));
            continue;
          }
          const again = this.freeOffset(bitmap, range.size);
          if (again === undefined) {
            causes.push(FieldErrors.invalid('spec', v, `range ${range.text} is full`));
            continue;
          }
          const replacement = range.value(again);
          bitmap.set(again, true);
          changed = true;
          drawn.add(replacement);
          redrawn.set(named, replacement);
          replaceValue(svc, v, replacement);
          result.push(replacement);
        }
        out.push(bitmap.encode(range.text, now));
        return result;
      };
      let i = 0;
      const takenIps = ips.length > 0 ? apply(SERVICE_IPS, ips, drawnIps, values[i++]) : [];
      const takenPorts = ports.length > 0 ? apply(this.nodePortRange, ports, drawnPorts, values[i++]) : [];
      if (causes.length > 0) throw Errors.invalid('', 'Service', svc?.metadata.name ?? '', causes);
      const result = { ips: takenIps, ports: takenPorts };
      return changed ? { values: out, result } : { result };
    });
  }

  /** A free offset of the bitmap, from a random start (kube-apiserver's random scan). */
  private freeOffset(bitmap: Bitmap, size: number): number | undefined {
    const start = this.random.int(size);
    for (let i = 0; i < size; i++) {
      const offset = (start + i) % size;
      if (!bitmap.has(offset)) return offset;
    }
    return undefined;
  }
}

/** kube-apiserver's answer to a value the client named that another Service holds. */
function alreadyAllocated(svc: KubeObject, what: 'IP' | 'port', value: unknown): StatusCause {
  if (what === 'IP')
    return FieldErrors.invalid(
      'spec.clusterIPs',
      [value],
      `failed to allocate IP ${String(value)}: provided IP is already allocated`,
    );
  const spec = svc.spec as { ports?: Array<{ nodePort?: unknown }>; healthCheckNodePort?: unknown };
  const i = (spec.ports ?? []).findIndex((p) => p.nodePort === value);
  return FieldErrors.invalid(
    i >= 0 ? `spec.ports[${i}].nodePort` : 'spec.healthCheckNodePort',
    value,
    'provided port is already allocated',
  );
}

/** A value this process drew, replaced in the Service by the one drawn again. */
function replaceValue(svc: KubeObject, from: unknown, to: unknown): void {
  const spec = svc.spec as Record<string, unknown>;
  if (typeof from === 'string') {
    if (spec.clusterIP === from) spec.clusterIP = to;
    if (Array.isArray(spec.clusterIPs)) spec.clusterIPs = spec.clusterIPs.map((ip) => (ip === from ? to : ip));
    return;
  }
  if (Array.isArray(spec.ports))
    spec.ports = (spec.ports as Array<Record<string, unknown>>).map((p) =>
      p.nodePort === from ? { ...p, nodePort: to } : p,
    );
  if (spec.healthCheckNodePort === from) spec.healthCheckNodePort = to;
}
