import { ApiError } from '../../api/errors.js';
import { isPodReady } from '../../api/pod-util.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import { cacheKey } from '../../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';
import { serviceMembership } from './membership.js';
import { SyncPacer } from './pacer.js';
import {
  findPort,
  isServiceIPSet,
  podAddress,
  serviceFamily,
  servicePorts,
  serviceSelector,
  serviceSpec,
  shouldPodBeInEndpoints,
  shouldSetHostname,
} from './pods.js';
import { rfc3339Nano, TriggerTimeTracker } from './trigger-time.js';

/**
 * The endpoints controller (pkg/controller/endpoint): a Service with a selector gets an Endpoints object of its name
 * listing the pods it selects, ready ones under `addresses` and the others under `notReadyAddresses` (all as ready
 * with publishNotReadyAddresses), one subset per set of pods offering the same ports, named target ports resolved
 * per pod, at most 1000 addresses (the rest cut, with the over-capacity annotation).
 */
type Obj = Record<string, unknown>;

/** Endpoints holds at most this many addresses (maxCapacity). */
export const MAX_ENDPOINTS_CAPACITY = 1000;
export const OVER_CAPACITY = 'endpoints.kubernetes.io/over-capacity';
export const LAST_CHANGE_TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';
export const HEADLESS_LABEL = 'service.kubernetes.io/headless';
/** Endpoints used as a leader-election lock: never deleted as leftovers. */
const LEADER_ANNOTATION = 'control-plane.alpha.kubernetes.io/leader';

interface Subset {
  addresses?: Obj[];
  notReadyAddresses?: Obj[];
  ports?: Obj[];
}

/** What one pod gives a Service's Endpoints: its address, whether it is ready, the ports it offers. */
interface PodEntry {
  /** The sort key of the address (IP, then pod uid: addrsByIPAndUID). */
  sortKey: string;
  address: Obj;
  ready: boolean;
  ports: Obj[];
  /** The ports' identity: pods offering the same ports share a subset. */
  portsKey: string;
}

/** Entries by Service object, then pod object (cache objects never change: an update is a new object). */
const entries = new WeakMap<KubeObject, WeakMap<KubeObject, PodEntry | null>>();

/** The pod's entry for the Service, or null when it is no endpoint of it (computed once per pair of versions). */
function podEntry(service: KubeObject, pod: KubeObject): PodEntry | null {
  let perPod = entries.get(service);
  if (!perPod) entries.set(service, (perPod = new WeakMap()));
  let entry = perPod.get(pod);
  if (entry === undefined) perPod.set(pod, (entry = computeEntry(service, pod)));
  return entry;
}

function computeEntry(service: KubeObject, pod: KubeObject): PodEntry | null {
  const spec = serviceSpec(service);
  const publishNotReady = spec.publishNotReadyAddresses === true;
  if (!shouldPodBeInEndpoints(pod, publishNotReady)) return null;
  const ip = podAddress(pod, serviceFamily(service));
  if (ip === undefined) return null;
  const address: Obj = { ip };
  if (shouldSetHostname(pod, service)) address.hostname = (pod.spec as Obj).hostname;
  const nodeName = (pod.spec as Obj | undefined)?.nodeName;
  if (typeof nodeName === 'string' && nodeName !== '') address.nodeName = nodeName;
  address.targetRef = {
    kind: 'Pod',
    namespace: pod.metadata.namespace,
    name: pod.metadata.name,
    uid: pod.metadata.uid,
  };
  const servicePortList = servicePorts(service);
  const ports: Obj[] = [];
  for (const servicePort of servicePortList) {
    const number = findPort(pod, servicePort);
    if (number === undefined) continue;
    const port: Obj = { port: number, protocol: servicePort.protocol ?? 'TCP' };
    if (servicePort.name) port.name = servicePort.name;
    if (servicePort.appProtocol) port.appProtocol = servicePort.appProtocol;
    ports.push(port);
  }
  // A pod offering none of the ports is no endpoint; a headless Service may have no ports at all.
  if (ports.length === 0 && !(servicePortList.length === 0 && spec.clusterIP === 'None')) return null;
  const portKey = (p: Obj): string =>
    `${String(p.name ?? '')}\0${String(p.port)}\0${String(p.protocol)}\0${String(p.appProtocol ?? '')}`;
  ports.sort((a, b) => compare(portKey(a), portKey(b)));
  return {
    sortKey: `${ip}\0${pod.metadata.uid ?? ''}`,
    address,
    ready: publishNotReady || isPodReady(pod),
    ports,
    portsKey: ports.map(portKey).join('\u0001'),
  };
}

/**
 * The subsets of a Service over the pods it selects (syncService's loop, then RepackSubsets): addresses grouped by
 * the ports they offer, ready ones under `addresses`, sorted by IP and pod uid; subsets ordered by their first
 * address (kube-apiserver orders them by a hash, which no client relies on).
 */
export function endpointSubsets(service: KubeObject, pods: Iterable<KubeObject>): Subset[] {
  const groups = new Map<string, { ports: Obj[]; ready: PodEntry[]; notReady: PodEntry[] }>();
  for (const pod of pods) {
    const entry = podEntry(service, pod);
    if (!entry) continue;
    let group = groups.get(entry.portsKey);
    if (!group) groups.set(entry.portsKey, (group = { ports: entry.ports, ready: [], notReady: [] }));
    (entry.ready ? group.ready : group.notReady).push(entry);
  }
  const bySortKey = (a: PodEntry, b: PodEntry): number => compare(a.sortKey, b.sortKey);
  const subsets: Array<{ first: string; subset: Subset }> = [];
  for (const g of groups.values()) {
    const subset: Subset = {};
    g.ready.sort(bySortKey);
    g.notReady.sort(bySortKey);
    if (g.ready.length > 0) subset.addresses = g.ready.map((e) => e.address);
    if (g.notReady.length > 0) subset.notReadyAddresses = g.notReady.map((e) => e.address);
    if (g.ports.length > 0) subset.ports = g.ports;
    subsets.push({ first: (g.ready[0] ?? g.notReady[0])!.sortKey, subset });
  }
  return subsets.sort((a, b) => compare(a.first, b.first)).map((s) => s.subset);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * truncateEndpoints: past 1000 addresses, each subset keeps its share of the 1000 (rounded up, the last what is
 * left), ready addresses first: when the ready ones alone are too many, no not-ready address is kept. Worked
 * example: 900 ready and 300 not ready in one subset, 0 ready and 200 not ready in another → every ready address
 * stays, and the 100 not-ready places go 60 and 40 (300 and 200 of 500, rounded up: 60, then 40 left).
 */
export function truncateSubsets(subsets: readonly Subset[]): { subsets: Subset[]; truncated: boolean } {
  let ready = 0;
  let notReady = 0;
  for (const s of subsets) {
    ready += s.addresses?.length ?? 0;
    notReady += s.notReadyAddresses?.length ?? 0;
  }
  if (ready + notReady <= MAX_ENDPOINTS_CAPACITY) return { subsets: [...subsets], truncated: false };
  const truncateReady = ready > MAX_ENDPOINTS_CAPACITY;
  const max = truncateReady ? MAX_ENDPOINTS_CAPACITY : MAX_ENDPOINTS_CAPACITY - ready;
  const total = truncateReady ? ready : notReady;
  let room = max;
  const out = subsets.map((s) => {
    const n = (truncateReady ? s.addresses : s.notReadyAddresses)?.length ?? 0;
    const take = Math.min(Math.ceil((n / total) * max), room);
    const next: Subset = { ...s };
    if (truncateReady) {
      next.addresses = (s.addresses ?? []).slice(0, take);
      delete next.notReadyAddresses;
      room -= next.addresses.length;
    } else {
      next.notReadyAddresses = (s.notReadyAddresses ?? []).slice(0, take);
      room -= next.notReadyAddresses.length;
    }
    if (next.addresses?.length === 0) delete next.addresses;
    if (next.notReadyAddresses?.length === 0) delete next.notReadyAddresses;
    return next;
  });
  return { subsets: out, truncated: true };
}

/**
 * The Endpoints a Service's sync writes, or undefined when the current one already says it: subsets (truncated),
 * the Service's labels (plus the headless label), the over-capacity and trigger-time annotations.
 */
export function planEndpoints(
  service: KubeObject,
  pods: readonly KubeObject[],
  current: KubeObject | undefined,
  triggerTime: number | undefined,
): KubeObject | undefined {
  const { subsets, truncated } = truncateSubsets(endpointSubsets(service, pods));
  const labels: Record<string, string> = { ...(service.metadata.labels ?? {}) };
  if (isServiceIPSet(service)) delete labels[HEADLESS_LABEL];
  else labels[HEADLESS_LABEL] = '';
  if (current) {
    const currentLabels = current.metadata.labels ?? {};
    const overCapacity = current.metadata.annotations?.[OVER_CAPACITY] !== undefined;
    if (deepEqual(current.subsets ?? [], subsets) && deepEqual(currentLabels, labels) && overCapacity === truncated)
      return undefined;
  }
  const annotations: Record<string, string> = { ...(current?.metadata.annotations ?? {}) };
  if (triggerTime !== undefined) annotations[LAST_CHANGE_TRIGGER_TIME] = rfc3339Nano(triggerTime);
  else delete annotations[LAST_CHANGE_TRIGGER_TIME];
  if (truncated) annotations[OVER_CAPACITY] = 'truncated';
  else delete annotations[OVER_CAPACITY];
  const metadata: KubeObject['metadata'] = current
    ? { ...current.metadata, labels }
    : { name: service.metadata.name, namespace: service.metadata.namespace, labels };
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  else delete metadata.annotations;
  const endpoints: KubeObject = { apiVersion: 'v1', kind: 'Endpoints', metadata };
  if (subsets.length > 0) endpoints.subsets = subsets;
  return endpoints;
}

export function endpointsController(ctx: ControllerContext): Controller {
  const services = ctx.informers.for(Resources.services);
  const pods = ctx.informers.for(Resources.pods);
  const endpoints = ctx.informers.for(Resources.endpoints);
  const membership = serviceMembership(ctx.informers);
  const triggers = new TriggerTimeTracker();
  const recorder = ctx.recorder('endpoint-controller');
  // Batched as the ReplicaSet controller's: a sync covers the pod events of a few turns (work-queue.ts).
  const loop = new ReconcileLoop('endpoint', ctx, reconcile, 5, { batchTurns: 4 });
  let started = false;

  services.addEventHandler({
    add: (svc) => loop.queue.add(cacheKey(svc)),
    update: (_old, svc) => loop.queue.add(cacheKey(svc)),
    delete: (svc) => loop.queue.add(cacheKey(svc)),
  });
  const pacer = new SyncPacer(ctx.clock, loop.queue);
  membership.onPodChanges(pods, (key, pod, selected) => {
    triggers.podChanged(key, pod, selected);
    pacer.add(key);
  });
  // An Endpoints object deleted under a Service that should have one is made again.
  endpoints.addEventHandler({
    add: (ep) => {
      // checkLeftoverEndpoints: at start, Endpoints whose Service is gone are looked at (and deleted).
      if (!started && !ep.metadata.annotations?.[LEADER_ANNOTATION]) loop.queue.add(cacheKey(ep));
    },
    delete: (ep) => loop.queue.add(cacheKey(ep)),
  });

  async function reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const service = services.get(namespace, name);
    if (!service) {
      triggers.forget(key);
      pacer.forget(key);
      const leftover = endpoints.get(namespace, name);
      if (!leftover || leftover.metadata.annotations?.[LEADER_ANNOTATION]) return;
      try {
        await ctx.client.delete(Resources.endpoints, namespace, name, {
          preconditions: { uid: leftover.metadata.uid },
        });
      } catch (err) {
        if (!(err instanceof ApiError && (err.code === 404 || err.code === 409))) throw err;
      }
      return;
    }
    if (serviceSpec(service).type === 'ExternalName' || !serviceSelector(service)) return;
    const selected = [...membership.podsOf(key)];
    pacer.synced(key, selected.length);
    const current = endpoints.get(namespace, name);
    const next = planEndpoints(service, selected, current, triggers.compute(key, service, selected));
    if (!next) return;
    try {
      if (current) await ctx.client.update(Resources.endpoints, next);
      else await ctx.client.create(Resources.endpoints, namespace, next);
    } catch (err) {
      // Deleted, or the namespace going: the next change brings us back.
      if (err instanceof ApiError && (err.code === 404 || isTerminating(err))) return;
      recorder.event(
        service,
        'Warning',
        current ? 'FailedToUpdateEndpoint' : 'FailedToCreateEndpoint',
        `Failed to ${current ? 'update' : 'create'} endpoint ${namespace}/${name}: ${err instanceof Error ? err.message : String(err)}`,
      );
      throw err;
    }
  }

  return {
    name: 'endpoint',
    start: async () => {
      loop.start();
      started = true;
    },
    stop: () => loop.stop(),
  };
}

function isTerminating(err: ApiError): boolean {
  return (err.details?.causes ?? []).some((c) => c.reason === 'NamespaceTerminating');
}

/** Whether an object is an Endpoints subset list (for the mirroring controller and tests). */
export function subsetsOf(ep: KubeObject): Subset[] {
  return Array.isArray(ep.subsets) ? (ep.subsets as Subset[]).filter((s) => isPlainObject(s)) : [];
}
