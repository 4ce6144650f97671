import { Errors } from '../../api/errors.js';
import { rfc3339 } from '../../clock/clock.js';
import { podNodeName, podPhase } from '../../api/pod-util.js';
import { addQuantities, formatQuantity, milliValue, parseQuantity, ZERO_QUANTITY } from '../../api/quantity.js';
import { FieldSelector, LabelSelector, selectorFromObject } from '../../api/selectors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import {
  containerProfiles,
  IDLE_CPU_MILLI,
  IDLE_MEMORY_BYTES,
  meanOver,
  runningContainers,
  servesTraffic,
  serviceLoad,
  valueAt,
  type UsageProfile,
} from '../../api/usage.js';
import type { MemoryStore } from '../../storage/memory-store.js';
import { col } from '../printers.js';
import type { ComputedRead, KindInfo, StrategyContext } from '../types.js';

/**
 * metrics.k8s.io/v1beta1 as metrics-server serves it (pkg/api/pod.go, node.go; pkg/storage/pod.go): PodMetrics and
 * NodeMetrics, get and list, computed on each read from the pods' and nodes' state and the cluster clock, never
 * stored. Usage is simulated (src/api/usage.ts). What metrics-server's scrapes would show is modelled on the clock:
 *
 * - it scrapes every 15 s (--metric-resolution): a read at 12:00:37 sees the scrape of 12:00:30, `timestamp` that
 *   instant and `window` the 15 s since the previous one;
 * - CPU is a rate between two samples, so a container is reported once it ran 10 s before a scrape (a fresh
 *   container's first window runs from its start: started 12:00:18, at the 12:00:30 scrape window 12s); a pod is
 *   reported when it is Running on a Ready node and every running container is, memory being the working set at
 *   the scrape;
 * - a node is its pods plus the system's own use (kubelet, runtime, OS), reported while it is Ready (a node that is
 *   not has a kubelet that does not answer the scrape: neither it nor its pods are reported).
 *
 * Quantities are in metrics-server's units: CPU from nanocores (`12345n`, canonical `250m` when exact), memory in
 * bytes of whole pages (`10184Ki`).
 */
export const METRIC_RESOLUTION_MS = 15_000;
/** metrics-server's freshContainerMinMetricsResolution. */
const FRESH_CONTAINER_MS = 10_000;
/** What a node's kubelet, runtime and OS use besides its pods. */
const SYSTEM_CPU_MILLI = 50;
const SYSTEM_MEMORY_BYTES = 400 * 1024 * 1024;
const PAGE_BYTES = 4096;

const PODS = '/pods';
const NODES = '/nodes';
const SERVICES = '/services';
const GROUP = 'metrics.k8s.io';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

interface Usage {
  /** Nanocores. */
  cpu: number;
  /** Bytes. */
  memory: number;
}

interface Sample {
  timestamp: number;
  windowMs: number;
}

const cpuQuantity = (nanocores: number): string =>
  formatQuantity({ nanos: BigInt(Math.round(nanocores)), format: 'DecimalSI' });
const memoryQuantity = (bytes: number): string =>
  formatQuantity({ nanos: BigInt(Math.ceil(bytes / PAGE_BYTES) * PAGE_BYTES) * 1_000_000_000n, format: 'BinarySI' });
const usageOf = (u: Usage): Obj => ({ cpu: cpuQuantity(u.cpu), memory: memoryQuantity(u.memory) });

/** metav1.Duration's text (Go's time.Duration.String) for the windows metrics report: "15s", "12.5s". */
function goDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${ms / 1000}s`;
  return `${Math.floor(ms / 60_000)}m${(ms % 60_000) / 1000}s`;
}

/** The last scrape at or before `now`. */
export function lastScrape(now: number): number {
  return Math.floor(now / METRIC_RESOLUTION_MS) * METRIC_RESOLUTION_MS;
}

/** The sample of something running since `since`, at the scrape `at`; undefined when too fresh to have a rate. */
function sampleSince(since: number, at: number): Sample | undefined {
  const ran = at - since;
  if (ran < FRESH_CONTAINER_MS) return undefined;
  return { timestamp: at, windowMs: Math.min(ran, METRIC_RESOLUTION_MS) };
}

/**
 * One read of the metrics API: the scrape it sees and what it looked up so far (a list asks about each Service's
 * endpoints once, not once per pod).
 */
class MetricsRead {
  readonly scrape: number;
  /** When the read happens: metrics-server stamps each object's creationTimestamp with it. */
  private readonly now: number;
  private readonly loads = new Map<string, Array<{ selector: LabelSelector; load: UsageProfile; created: number }>>();
  private readonly readyCounts = new Map<object, number>();

  constructor(
    private readonly store: Pick<MemoryStore, 'get' | 'list'>,
    now: number,
  ) {
    this.scrape = lastScrape(now);
    this.now = now;
  }

  /** The Services of a namespace with a load, with their selectors. */
  private loadsIn(namespace: string): Array<{ selector: LabelSelector; load: UsageProfile; created: number }> {
    let found = this.loads.get(namespace);
    if (!found) {
      found = [];
      for (const svc of this.store.list(SERVICES, { namespace, label: LabelSelector.everything(), field: NO_FIELDS })
        .items) {
        const load = serviceLoad(svc);
        const selector = obj(svc.spec).selector;
        if (!load || !isPlainObject(selector) || Object.keys(selector).length === 0) continue;
        found.push({
          selector: selectorFromObject({ matchLabels: selector }),
          load,
          created: Date.parse(svc.metadata.creationTimestamp ?? '') || 0,
        });
      }
      this.loads.set(namespace, found);
    }
    return found;
  }

  private readyCount(namespace: string, selector: LabelSelector): number {
    let count = this.readyCounts.get(selector);
    if (count === undefined) {
      count = this.store
        .list(PODS, { namespace, label: selector, field: NO_FIELDS })
        .items.filter(servesTraffic).length;
      this.readyCounts.set(selector, count);
    }
    return count;
  }

  /** The share of Service load a pod serves over [from, to), in millicores. */
  private loadShare(pod: KubeObject, from: number, to: number): number {
    if (!servesTraffic(pod)) return 0;
    let share = 0;
    for (const { selector, load, created } of this.loadsIn(pod.metadata.namespace ?? '')) {
      if (!selector.matches(pod.metadata.labels)) continue;
      share +=
        meanOver(load, 0, from - created, to - created) /
        Math.max(1, this.readyCount(pod.metadata.namespace ?? '', selector));
    }
    return share;
  }

  /** A running container's usage over a window ending at the scrape (CPU its mean, memory at the scrape). */
  private containerUsage(
    pod: KubeObject,
    name: string,
    startedAt: number,
    windowMs: number,
    extraMilli: number,
  ): Usage {
    const { cpu, memory } = containerProfiles(pod, name);
    const from = this.scrape - windowMs - startedAt;
    const to = this.scrape - startedAt;
    const wanted = (cpu ? meanOver(cpu, IDLE_CPU_MILLI, from, to) : IDLE_CPU_MILLI) + extraMilli;
    // A container is throttled at its CPU limit, whatever its load asks for.
    const limit = cpuLimitMilli(pod, name);
    return {
      cpu: Math.min(wanted, limit) * 1e6,
      memory: memory ? valueAt(memory, IDLE_MEMORY_BYTES, to) : IDLE_MEMORY_BYTES,
    };
  }

  private readonly readyNodes = new Map<string, boolean>();

  /** Whether a node's kubelet answers scrapes: its Ready condition is True. */
  private nodeReady(name: string): boolean {
    let ready = this.readyNodes.get(name);
    if (ready === undefined) {
      const node = this.store.get(NODES, undefined, name);
      ready = node !== undefined && readySince(node) !== undefined;
      this.readyNodes.set(name, ready);
    }
    return ready;
  }

  /** PodMetrics of a pod, or undefined when metrics-server would have none for it. */
  podMetrics(pod: KubeObject): KubeObject | undefined {
    if (podPhase(pod) !== 'Running' || !this.nodeReady(podNodeName(pod))) return undefined;
    const running = runningContainers(pod).filter((c) => c.startedAt <= this.scrape);
    if (running.length === 0) return undefined;
    const samples = running.map((c) => sampleSince(c.startedAt, this.scrape));
    if (samples.some((s) => s === undefined)) return undefined;
    const first = samples[0]!;
    const containers = running.map((c, i) => {
      const windowMs = samples[i]!.windowMs;
      const extra = i === 0 ? this.loadShare(pod, this.scrape - windowMs, this.scrape) : 0;
      return { name: c.name, usage: usageOf(this.containerUsage(pod, c.name, c.startedAt, windowMs, extra)) };
    });
    return {
      kind: 'PodMetrics',
      apiVersion: `${GROUP}/v1beta1`,
      metadata: metadataOf(pod, this.now),
      timestamp: rfc3339(first.timestamp),
      window: goDuration(first.windowMs),
      containers,
    };
  }

  /** A pod's total usage as its node's stats count it: every running container, fresh ones too. */
  private podTotal(pod: KubeObject): Usage {
    const total: Usage = { cpu: 0, memory: 0 };
    if (podPhase(pod) !== 'Running') return total;
    const running = runningContainers(pod).filter((c) => c.startedAt <= this.scrape);
    running.forEach((c, i) => {
      const windowMs = Math.min(METRIC_RESOLUTION_MS, this.scrape - c.startedAt);
      const extra = i === 0 ? this.loadShare(pod, this.scrape - windowMs, this.scrape) : 0;
      const u = this.containerUsage(pod, c.name, c.startedAt, windowMs, extra);
      total.cpu += u.cpu;
      total.memory += Math.ceil(u.memory / PAGE_BYTES) * PAGE_BYTES;
    });
    return total;
  }

  /** NodeMetrics of a node, or undefined while it is not Ready (its kubelet does not answer the scrape). */
  nodeMetrics(node: KubeObject, pods?: readonly KubeObject[]): KubeObject | undefined {
    const since = readySince(node);
    if (since === undefined) return undefined;
    const sample = sampleSince(since, this.scrape);
    if (!sample) return undefined;
    const onNode =
      pods ??
      this.store.list(PODS, {
        label: LabelSelector.everything(),
        field: new FieldSelector([{ field: 'spec.nodeName', value: node.metadata.name!, negate: false }]),
      }).items;
    const usage: Usage = { cpu: SYSTEM_CPU_MILLI * 1e6, memory: SYSTEM_MEMORY_BYTES };
    for (const pod of onNode) {
      const u = this.podTotal(pod);
      usage.cpu += u.cpu;
      usage.memory += u.memory;
    }
    return {
      kind: 'NodeMetrics',
      apiVersion: `${GROUP}/v1beta1`,
      metadata: metadataOf(node, this.now),
      timestamp: rfc3339(sample.timestamp),
      window: goDuration(sample.windowMs),
      usage: usageOf(usage),
    };
  }
}

const NO_FIELDS = new FieldSelector([]);

/** When a node turned Ready, or undefined while it is not (its kubelet does not answer metrics-server). */
function readySince(node: KubeObject): number | undefined {
  const conditions = obj(node.status).conditions;
  const ready = (Array.isArray(conditions) ? conditions.map(obj) : []).find((c) => c.type === 'Ready');
  if (ready?.status !== 'True') return undefined;
  return Date.parse(String(ready.lastTransitionTime ?? node.metadata.creationTimestamp ?? '')) || 0;
}

/** A container's resources.limits.cpu in millicores (Infinity without one). */
function cpuLimitMilli(pod: KubeObject, container: string): number {
  const containers = obj(pod.spec).containers;
  const spec = Array.isArray(containers) ? containers.map(obj).find((c) => c.name === container) : undefined;
  const limit = parseQuantity(obj(obj(spec?.resources).limits).cpu);
  return limit ? Number(milliValue(limit)) : Number.POSITIVE_INFINITY;
}

/** metrics-server's ObjectMeta: the object's name, namespace and labels, created "now" (when it is read). */
function metadataOf(o: KubeObject, at: number): KubeObject['metadata'] {
  const metadata: KubeObject['metadata'] = { name: o.metadata.name };
  if (o.metadata.namespace) metadata.namespace = o.metadata.namespace;
  metadata.creationTimestamp = rfc3339(at);
  if (o.metadata.labels && Object.keys(o.metadata.labels).length > 0) metadata.labels = o.metadata.labels;
  return metadata;
}

const podMetricsResource = { group: GROUP, resource: 'podmetrics' };
const nodeMetricsResource = { group: GROUP, resource: 'nodemetrics' };

function computePods(ctx: StrategyContext, read: ComputedRead): KubeObject[] {
  const reader = new MetricsRead(read.store, ctx.clock.now());
  if (read.name !== undefined) {
    const pod = read.store.get(PODS, read.namespace, read.name);
    if (!pod) throw Errors.notFound({ group: '', resource: 'pods' }, read.name);
    const metrics = reader.podMetrics(pod);
    if (!metrics) throw Errors.notFound(podMetricsResource, `${read.namespace ?? ''}/${read.name}`);
    return [metrics];
  }
  const pods = read.store.list(PODS, { namespace: read.namespace, label: read.label, field: NO_FIELDS }).items;
  return pods.flatMap((pod) => reader.podMetrics(pod) ?? []);
}

function computeNodes(ctx: StrategyContext, read: ComputedRead): KubeObject[] {
  const reader = new MetricsRead(read.store, ctx.clock.now());
  if (read.name !== undefined) {
    const node = read.store.get(NODES, undefined, read.name);
    if (!node) throw Errors.notFound({ group: '', resource: 'nodes' }, read.name);
    const metrics = reader.nodeMetrics(node);
    if (!metrics) throw Errors.notFound(nodeMetricsResource, read.name);
    return [metrics];
  }
  const nodes = read.store.list(NODES, { label: read.label, field: NO_FIELDS }).items;
  if (nodes.length === 0) return [];
  // One pass over the pods for every node's share, rather than one lookup per node.
  const byNode = new Map<string, KubeObject[]>();
  for (const pod of read.store.list(PODS, { label: LabelSelector.everything(), field: NO_FIELDS }).items) {
    const node = podNodeName(pod);
    if (node === '') continue;
    let list = byNode.get(node);
    if (!list) byNode.set(node, (list = []));
    list.push(pod);
  }
  return nodes.flatMap((node) => reader.nodeMetrics(node, byNode.get(node.metadata.name!) ?? []) ?? []);
}

/** The sum of a PodMetrics' containers' usage of a resource, as metrics-server's table shows it. */
function podTotalCell(resource: 'cpu' | 'memory'): (o: KubeObject) => string {
  return (o) => {
    const containers = Array.isArray(o.containers) ? o.containers.map(obj) : [];
    let sum = ZERO_QUANTITY;
    for (const c of containers) sum = addQuantities(sum, parseQuantity(obj(c.usage)[resource]) ?? ZERO_QUANTITY);
    return formatQuantity(sum);
  };
}

const windowColumn = col('Window', (o) => String(o.window ?? ''), { format: 'duration' });

export const podMetrics: KindInfo = {
  group: GROUP,
  version: 'v1beta1',
  kind: 'PodMetrics',
  resource: 'pods',
  singular: '',
  namespaced: true,
  verbs: ['get', 'list'],
  computed: computePods,
  columns: [
    col('cpu', podTotalCell('cpu'), { format: 'quantity' }),
    col('memory', podTotalCell('memory'), { format: 'quantity' }),
    windowColumn,
  ],
  noAge: true,
};

export const nodeMetrics: KindInfo = {
  group: GROUP,
  version: 'v1beta1',
  kind: 'NodeMetrics',
  resource: 'nodes',
  singular: '',
  namespaced: false,
  verbs: ['get', 'list'],
  computed: computeNodes,
  columns: [
    col('cpu', (o) => String(obj(o.usage).cpu ?? ''), { format: 'quantity' }),
    col('memory', (o) => String(obj(o.usage).memory ?? ''), { format: 'quantity' }),
    windowColumn,
  ],
  noAge: true,
};

export const metricsKinds: readonly KindInfo[] = [podMetrics, nodeMetrics];
