import { ApiError } from '../../api/errors.js';
import { isPodReady } from '../../api/pod-util.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import { cacheKey } from '../../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';
import { HEADLESS_LABEL, LAST_CHANGE_TRIGGER_TIME } from './endpoints.js';
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
import { requeueOnSliceChanges, SliceTracker, writeSlicePlan } from './slice-tracker.js';
import { rfc3339Nano, TriggerTimeTracker } from './trigger-time.js';

/**
 * The EndpointSlice controller (pkg/controller/endpointslice): a Service with a selector gets EndpointSlices of at
 * most 100 endpoints, one group of slices per set of ports its pods offer (named target ports resolved per pod),
 * every pod with an address listed — terminating ones too, with `ready`, `serving` and `terminating` conditions. A
 * sync changes as few slices as it can (the reconciler's fill-and-reuse rules), and a Service with no endpoints
 * keeps one empty placeholder slice.
 */
type Obj = Record<string, unknown>;

export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
export const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';
export const SLICE_CONTROLLER = 'endpointslice-controller.k8s.io';
/** kube-controller-manager's --max-endpoints-per-slice default. */
export const MAX_ENDPOINTS_PER_SLICE = 100;
const RESERVED_LABELS = [SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL];
const ZONE_LABEL = 'topology.kubernetes.io/zone';

export interface SlicePlan {
  create: KubeObject[];
  update: KubeObject[];
  delete: KubeObject[];
  /** Pods were left out for naming Nodes that do not exist: the sync is retried. */
  missingNodes?: boolean;
}

export interface PortGroup {
  ports: Obj[];
  /** Desired endpoints by their identity (addresses, hostname, pod), in pod order. */
  endpoints: Map<string, Obj>;
}

/** The identity of an endpoint within a slice (endpointsliceutil's hashEndpoint): what it is, not its conditions. */
export function endpointKey(e: Obj): string {
  let key = endpointKeys.get(e);
  if (key === undefined) endpointKeys.set(e, (key = computeEndpointKey(e)));
  return key;
}

/** Per endpoint object: the stored ones are read again at every sync of their Service. */
const endpointKeys = new WeakMap<Obj, string>();

function computeEndpointKey(e: Obj): string {
  const ref = isPlainObject(e.targetRef) ? e.targetRef : {};
  return `${(Array.isArray(e.addresses) ? e.addresses : []).join(',')}\0${String(e.hostname ?? '')}\0${String(ref.namespace ?? '')}/${String(ref.name ?? '')}`;
}

export function portsKey(ports: unknown): string {
  const list = Array.isArray(ports) ? (ports as Obj[]) : [];
  return list
    .map(
      (p) =>
        `${String(p.name ?? '')}\0${String(p.protocol ?? '')}\0${String(p.port ?? '')}\0${String(p.appProtocol ?? '')}`,
    )
    .sort()
    .join('\u0001');
}

/** podToEndpoint: the pod's address and conditions, its hostname under a governing Service, its node and zone. */
function podToEndpoint(
  pod: KubeObject,
  service: KubeObject,
  ip: string,
  zoneOf: (node: string) => string | undefined,
): Obj {
  const serving = isPodReady(pod);
  const terminating = pod.metadata.deletionTimestamp !== undefined;
  // Never ready while terminating, unless the Service publishes not-ready addresses.
  const ready = serviceSpec(service).publishNotReadyAddresses === true || (serving && !terminating);
  const endpoint: Obj = { addresses: [ip], conditions: { ready, serving, terminating } };
  if (shouldSetHostname(pod, service)) endpoint.hostname = (pod.spec as Obj).hostname;
  endpoint.targetRef = {
    kind: 'Pod',
    namespace: pod.metadata.namespace,
    name: pod.metadata.name,
    uid: pod.metadata.uid,
  };
  const node = (pod.spec as Obj | undefined)?.nodeName;
  if (typeof node === 'string' && node !== '') {
    endpoint.nodeName = node;
    const zone = zoneOf(node);
    if (zone) endpoint.zone = zone;
  }
  return endpoint;
}

/** getEndpointPorts: the Service's ports as this pod offers them (a headless Service may have none). */
function podPorts(service: KubeObject, pod: KubeObject): Obj[] {
  const out: Obj[] = [];
  for (const servicePort of servicePorts(service)) {
    const number = findPort(pod, servicePort);
    if (number === undefined) continue;
    const port: Obj = { name: servicePort.name ?? '', protocol: servicePort.protocol ?? 'TCP', port: number };
    if (servicePort.appProtocol) port.appProtocol = servicePort.appProtocol;
    out.push(port);
  }
  return out;
}

/** setEndpointSliceLabels: the Service's labels but the reserved ones, which say whose slice it is. */
function sliceLabels(
  service: KubeObject,
  slice: KubeObject | undefined,
): { labels: Record<string, string>; changed: boolean } {
  const own: Record<string, string> = {};
  for (const [k, v] of Object.entries(slice?.metadata.labels ?? {})) if (!RESERVED_LABELS.includes(k)) own[k] = v;
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(service.metadata.labels ?? {})) if (!RESERVED_LABELS.includes(k)) labels[k] = v;
  const changed = Object.entries(own).some(([k, v]) => labels[k] !== v);
  if (!isServiceIPSet(service)) labels[HEADLESS_LABEL] = '';
  labels[SERVICE_NAME_LABEL] = service.metadata.name!;
  labels[MANAGED_BY_LABEL] = SLICE_CONTROLLER;
  return { labels, changed: changed || !deepEqual(slice?.metadata.labels ?? {}, labels) };
}

/** newEndpointSlice: `<service>-` and a generated suffix, owned by the Service. */
function newSlice(service: KubeObject, addressType: string, ports: Obj[] | null): KubeObject {
  const name = service.metadata.name!;
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      generateName: name.length < 253 ? `${name}-` : name,
      namespace: service.metadata.namespace,
      labels: sliceLabels(service, undefined).labels,
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Service',
          name,
          uid: service.metadata.uid!,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    addressType,
    endpoints: [],
    ports,
  };
}

/** A pod's endpoint in a Service's slices, with the ports it offers and the identities both are grouped by. */
interface DesiredEndpoint {
  endpoint: Obj;
  key: string;
  ports: Obj[];
  portsKey: string;
  zone: string | undefined;
}

/** By Service object, then pod object: a sync of a Service of many pods recomputes only the pods that changed. */
const desiredEndpoints = new WeakMap<KubeObject, WeakMap<KubeObject, DesiredEndpoint | null>>();

function desiredEndpoint(
  service: KubeObject,
  pod: KubeObject,
  addressType: 'IPv4' | 'IPv6',
  zone: string | undefined,
): DesiredEndpoint | null {
  let perPod = desiredEndpoints.get(service);
  if (!perPod) desiredEndpoints.set(service, (perPod = new WeakMap()));
  const known = perPod.get(pod);
  if (known !== undefined && (known === null || known.zone === zone)) return known;
  let desired: DesiredEndpoint | null = null;
  const ip = shouldPodBeInEndpoints(pod, true) ? podAddress(pod, addressType) : undefined;
  if (ip !== undefined) {
    const ports = podPorts(service, pod);
    const endpoint = podToEndpoint(pod, service, ip, () => zone);
    desired = { endpoint, key: endpointKey(endpoint), ports, portsKey: portsKey(ports), zone };
  }
  perPod.set(pod, desired);
  return desired;
}

/** deepEqual, remembered for the last stored endpoint a desired one was found equal to. */
function sameEndpoint(want: Obj, stored: Obj): boolean {
  if (lastEqual.get(want) === stored) return true;
  const same = deepEqual(want, stored);
  if (same) lastEqual.set(want, stored);
  return same;
}
const lastEqual = new WeakMap<Obj, Obj>();

/**
 * The reconciler's decision for one Service: which slices to create, update and delete so that they hold exactly
 * the desired endpoints, touching as few as it can. Per group of ports: kept endpoints stay in their slice (updated
 * where they changed), gone ones leave it (a slice left empty goes), new ones fill the slices being updated anyway
 * (fullest first), then the unchanged slice that fits them closest, then new slices of `maxPerSlice`. A create and
 * a delete pair up into an update of the slice that would go. Example: 250 pods → slices of 100, 100 and 50; one pod
 * goes from the first slice and two come → the first slice is updated to 100 again and a third endpoint is appended
 * to the slice of 50 only if the first is full.
 */
export function planEndpointSlices(
  service: KubeObject,
  pods: Iterable<KubeObject>,
  existing: readonly KubeObject[],
  options: {
    zoneOf?: (node: string) => string | undefined;
    nodeExists?: (node: string) => boolean;
    triggerTime?: number;
    maxPerSlice?: number;
  } = {},
): SlicePlan {
  const max = options.maxPerSlice ?? MAX_ENDPOINTS_PER_SLICE;
  const zoneOf = options.zoneOf ?? (() => undefined);
  const nodeExists = options.nodeExists;
  const addressType = serviceFamily(service);
  const toDelete: KubeObject[] = existing.filter((s) => s.addressType !== addressType);
  const current = existing.filter((s) => s.addressType === addressType);

  const groups = new Map<string, PortGroup>();
  const publishNotReady = serviceSpec(service).publishNotReadyAddresses === true;
  let missingNodes = false;
  for (const pod of pods) {
    const node = (pod.spec as Obj | undefined)?.nodeName;
    // A pod on a Node that does not exist is left out (and the sync retried), unless not-ready ones are published.
    if (typeof node === 'string' && node !== '' && nodeExists && !nodeExists(node) && !publishNotReady) {
      if (shouldPodBeInEndpoints(pod, true)) missingNodes = true;
      continue;
    }
    const desired = desiredEndpoint(service, pod, addressType, typeof node === 'string' ? zoneOf(node) : undefined);
    if (!desired) continue;
    let group = groups.get(desired.portsKey);
    if (!group) groups.set(desired.portsKey, (group = { ports: desired.ports, endpoints: new Map() }));
    group.endpoints.set(desired.key, desired.endpoint);
  }

  const owner: SliceOwner = {
    newSlice: (ports) => newSlice(service, addressType, ports),
    labels: (slice) => sliceLabels(service, slice),
  };
  const plan = reconcileGroups(owner, groups, current, max);
  plan.delete.unshift(...toDelete);

  // A Service without endpoints keeps one empty slice (kept as it is, when it is the one about to go).
  if (existing.length === plan.delete.length && plan.create.length === 0) {
    const placeholder = newSlice(service, addressType, null);
    placeholder.endpoints = null as unknown as Obj[];
    if (plan.delete.length === 1 && isPlaceholderFor(plan.delete[0]!, placeholder)) plan.delete.length = 0;
    else plan.create.push(placeholder);
  }
  // Only a slice of the same address type and owned by this Service (not one of a deleted namesake) is reused.
  pairCreatesWithDeletes(plan, (victim, slice) => victim.addressType === slice.addressType && ownedBy(victim, service));
  annotateWrites(
    plan,
    LAST_CHANGE_TRIGGER_TIME,
    options.triggerTime === undefined ? undefined : rfc3339Nano(options.triggerTime),
  );
  if (missingNodes) plan.missingNodes = true;
  return plan;
}

function isPlaceholderFor(slice: KubeObject, placeholder: KubeObject): boolean {
  const endpoints = Array.isArray(slice.endpoints) ? slice.endpoints : [];
  const ports = Array.isArray(slice.ports) ? slice.ports : [];
  return (
    endpoints.length === 0 &&
    ports.length === 0 &&
    slice.addressType === placeholder.addressType &&
    deepEqual(slice.metadata.labels ?? {}, placeholder.metadata.labels ?? {})
  );
}

function ownedBy(slice: KubeObject, service: KubeObject): boolean {
  return (slice.metadata.ownerReferences ?? []).some((r) => r.kind === 'Service' && r.uid === service.metadata.uid);
}

/** Whose slices a reconcile writes: how a new one looks, and the labels one should carry. */
export interface SliceOwner {
  newSlice(ports: Obj[] | null): KubeObject;
  labels(slice: KubeObject): { labels: Record<string, string>; changed: boolean };
}

/** reconcileByPortMapping for one set of ports. */
export function reconcilePorts(
  owner: SliceOwner,
  group: PortGroup,
  slices: readonly KubeObject[],
  max: number,
): SlicePlan {
  const desired = new Map(group.endpoints);
  const toUpdate = new Map<string, KubeObject>();
  const unchanged = new Map<string, KubeObject>();
  const toDelete: KubeObject[] = [];
  // 1. Keep the wanted endpoints of each slice (as they are wanted now), drop the others.
  for (const slice of slices) {
    const endpoints = Array.isArray(slice.endpoints) ? (slice.endpoints as Obj[]) : [];
    const kept: Obj[] = [];
    let changed = false;
    for (const e of endpoints) {
      const key = endpointKey(e);
      const want = desired.get(key);
      if (!want) continue;
      kept.push(want);
      if (!sameEndpoint(want, e)) changed = true;
      desired.delete(key);
    }
    const { labels, changed: labelsChanged } = owner.labels(slice);
    if (changed || kept.length !== endpoints.length) {
      if (kept.length === 0) toDelete.push(slice);
      else toUpdate.set(slice.metadata.name!, { ...slice, metadata: { ...slice.metadata, labels }, endpoints: kept });
    } else if (labelsChanged)
      toUpdate.set(slice.metadata.name!, {
        ...slice,
        metadata: { ...slice.metadata, labels },
        endpoints: [...endpoints],
      });
    else unchanged.set(slice.metadata.name!, slice);
  }
  const pending = [...desired.values()];
  // 2. Fill the slices that are written anyway, fullest first.
  const updating = [...toUpdate.values()].sort((a, b) => (b.endpoints as Obj[]).length - (a.endpoints as Obj[]).length);
  for (const slice of updating) {
    const endpoints = slice.endpoints as Obj[];
    while (pending.length > 0 && endpoints.length < max) endpoints.push(pending.shift()!);
  }
  // 3. The rest: into the unchanged slice they fit best, else into new slices.
  const create: KubeObject[] = [];
  while (pending.length > 0) {
    let target: KubeObject | undefined;
    if (pending.length < max && unchanged.size > 0) {
      const fit = closestFit([...unchanged.values()], pending.length, max);
      if (fit) {
        unchanged.delete(fit.metadata.name!);
        target = { ...fit, endpoints: Array.isArray(fit.endpoints) ? [...(fit.endpoints as Obj[])] : [] };
        toUpdate.set(fit.metadata.name!, target);
      }
    }
    if (!target) {
      target = owner.newSlice(group.ports.length > 0 ? group.ports : null);
      create.push(target);
    }
    const endpoints = target.endpoints as Obj[];
    while (pending.length > 0 && endpoints.length < max) endpoints.push(pending.shift()!);
  }
  return { create, update: [...toUpdate.values()], delete: toDelete };
}

/**
 * Every group of ports of one address type against the slices there are: a group's slices reconciled, the slices of
 * ports no longer wanted deleted.
 */
export function reconcileGroups(
  owner: SliceOwner,
  groups: ReadonlyMap<string, PortGroup>,
  slices: readonly KubeObject[],
  max: number,
): SlicePlan {
  const byPorts = new Map<string, KubeObject[]>();
  for (const slice of slices) {
    const key = portsKey(slice.ports);
    const list = byPorts.get(key) ?? [];
    list.push(slice);
    byPorts.set(key, list);
  }
  const plan: SlicePlan = { create: [], update: [], delete: [] };
  for (const key of new Set([...byPorts.keys(), ...groups.keys()])) {
    const group = groups.get(key);
    const existing = byPorts.get(key) ?? [];
    if (!group) {
      plan.delete.push(...existing);
      continue;
    }
    const result = reconcilePorts(owner, group, existing, max);
    plan.create.push(...result.create);
    plan.update.push(...result.update);
    plan.delete.push(...result.delete);
  }
  return plan;
}

/** A create and a delete of slices alike make one update of the slice that would go (finalize's pairing). */
export function pairCreatesWithDeletes(
  plan: SlicePlan,
  reusable: (victim: KubeObject, slice: KubeObject) => boolean,
): void {
  while (plan.create.length > 0 && plan.delete.length > 0) {
    const victim = plan.delete[plan.delete.length - 1]!;
    const slice = plan.create[plan.create.length - 1]!;
    if (!reusable(victim, slice)) break;
    plan.create.pop();
    plan.delete.pop();
    const { generateName: _generated, ...metadata } = { ...victim.metadata, labels: slice.metadata.labels };
    plan.update.push({ ...slice, metadata });
  }
}

/** Sets (or removes) an annotation on every slice the plan writes. */
export function annotateWrites(plan: SlicePlan, annotation: string, value: string | undefined): void {
  for (const slice of [...plan.create, ...plan.update]) {
    const annotations = { ...(slice.metadata.annotations ?? {}) };
    if (value !== undefined) annotations[annotation] = value;
    else delete annotations[annotation];
    if (Object.keys(annotations).length > 0) slice.metadata = { ...slice.metadata, annotations };
    else {
      const { annotations: _gone, ...rest } = slice.metadata;
      slice.metadata = rest;
    }
  }
}

/** getSliceToFill: the slice with the least room that still fits `count` more endpoints. */
function closestFit(slices: readonly KubeObject[], count: number, max: number): KubeObject | undefined {
  let best: KubeObject | undefined;
  let bestRoom = Number.POSITIVE_INFINITY;
  for (const slice of slices) {
    const room = max - (Array.isArray(slice.endpoints) ? slice.endpoints.length : 0);
    if (room >= count && room < bestRoom) {
      best = slice;
      bestRoom = room;
    }
  }
  return best;
}

export function endpointSliceController(ctx: ControllerContext): Controller {
  const services = ctx.informers.for(Resources.services);
  const pods = ctx.informers.for(Resources.pods);
  const slices = ctx.informers.for(Resources.endpointslices);
  const nodes = ctx.informers.for(Resources.nodes);
  const membership = serviceMembership(ctx.informers);
  const triggers = new TriggerTimeTracker();
  const tracker = new SliceTracker();
  const recorder = ctx.recorder('endpoint-slice-controller');
  const loop = new ReconcileLoop('endpointslice', ctx, reconcile, 5, { batchTurns: 4 });
  const BY_SERVICE = 'endpointslice-controller-service';
  slices.addIndex(BY_SERVICE, (s) =>
    s.metadata.labels?.[MANAGED_BY_LABEL] === SLICE_CONTROLLER && s.metadata.labels[SERVICE_NAME_LABEL]
      ? [`${s.metadata.namespace}/${s.metadata.labels[SERVICE_NAME_LABEL]}`]
      : [],
  );
  const serviceOfSlice = (s: KubeObject): string | undefined =>
    s.metadata.labels?.[MANAGED_BY_LABEL] === SLICE_CONTROLLER && s.metadata.labels[SERVICE_NAME_LABEL]
      ? `${s.metadata.namespace}/${s.metadata.labels[SERVICE_NAME_LABEL]}`
      : undefined;

  services.addEventHandler({
    add: (svc) => loop.queue.add(cacheKey(svc)),
    update: (_old, svc) => loop.queue.add(cacheKey(svc)),
    delete: (svc) => {
      triggers.forget(cacheKey(svc));
      tracker.forget(cacheKey(svc));
      pacer.forget(cacheKey(svc));
    },
  });
  const pacer = new SyncPacer(ctx.clock, loop.queue);
  membership.onPodChanges(pods, (key, pod, selected) => {
    triggers.podChanged(key, pod, selected);
    pacer.add(key);
  });
  // A slice changed by someone else (or deleted) is reconciled again; our own writes only confirm the tracker.
  requeueOnSliceChanges(slices, tracker, serviceOfSlice, (key) => pacer.add(key));

  async function reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const service = services.get(namespace, name);
    // A deleted Service's slices go with it (they are owned by it): the garbage collector removes them.
    if (!service || service.metadata.deletionTimestamp) return;
    const existing = slices.byIndex(BY_SERVICE, key).filter((s) => ownedBy(s, service) || !s.metadata.ownerReferences);
    if (tracker.stale(key, (n) => slices.get(namespace, n))) return;
    let plan: SlicePlan;
    if (serviceSpec(service).type === 'ExternalName' || !serviceSelector(service)) {
      // Slices are for Services that select pods: those of an ExternalName or selector-less one go.
      if (existing.length === 0) return;
      plan = { create: [], update: [], delete: [...existing] };
    } else {
      const selected = [...membership.podsOf(key)];
      pacer.synced(key, selected.length);
      plan = planEndpointSlices(service, selected, existing, {
        zoneOf: (node) => nodes.get(undefined, node)?.metadata.labels?.[ZONE_LABEL],
        nodeExists: (node) => nodes.get(undefined, node) !== undefined,
        triggerTime: triggers.compute(key, service, selected),
      });
    }
    try {
      await writeSlicePlan(ctx.client, tracker, key, namespace, plan);
    } catch (err) {
      if (err instanceof ApiError && (err.details?.causes ?? []).some((c) => c.reason === 'NamespaceTerminating'))
        return;
      if (!(err instanceof ApiError && err.code === 409))
        recorder.event(
          service,
          'Warning',
          'FailedToUpdateEndpointSlices',
          `Error updating Endpoint Slices for Service ${namespace}/${name}: ${err instanceof Error ? err.message : String(err)}`,
        );
      throw err;
    }
    if (plan.missingNodes) throw new Error(`skipping pods of Service ${key}: their Node was not found`);
  }

  return { name: 'endpointslice', start: async () => loop.start(), stop: () => loop.stop() };
}
