import { isIP } from 'node:net';
import { ApiError } from '../../api/errors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import { cacheKey } from '../../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';
import { LAST_CHANGE_TRIGGER_TIME, subsetsOf } from './endpoints.js';
import {
  annotateWrites,
  endpointKey,
  MANAGED_BY_LABEL,
  pairCreatesWithDeletes,
  portsKey,
  reconcileGroups,
  SERVICE_NAME_LABEL,
  type PortGroup,
  type SliceOwner,
  type SlicePlan,
} from './endpointslices.js';
import { serviceSelector } from './pods.js';
import { requeueOnSliceChanges, SliceTracker, writeSlicePlan } from './slice-tracker.js';

/**
 * The EndpointSlice mirroring controller (pkg/controller/endpointslicemirroring): the Endpoints of a Service without
 * a selector, written by someone else, are mirrored into EndpointSlices (owned by the Endpoints, ready as the
 * addresses are), so that consumers of slices see them too. The first 1000 addresses of a subset are mirrored.
 */
type Obj = Record<string, unknown>;

export const MIRRORING_CONTROLLER = 'endpointslicemirroring-controller.k8s.io';
export const SKIP_MIRROR_LABEL = 'endpointslice.kubernetes.io/skip-mirror';
/** --mirroring-max-endpoints-per-subset and --mirroring-max-endpoints-per-slice defaults. */
const MAX_PER_SUBSET = 1000;
const MAX_PER_SLICE = 100;

const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

/** Whether an Endpoints object is one to mirror: its Service exists without a selector, and it does not opt out. */
export function shouldMirror(endpoints: KubeObject | undefined, service: KubeObject | undefined): boolean {
  if (!endpoints || !service) return false;
  if (endpoints.metadata.labels?.[SKIP_MIRROR_LABEL] === 'true') return false;
  return serviceSelector(service) === undefined;
}

function mirrorLabels(endpoints: KubeObject): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(endpoints.metadata.labels ?? {}))
    if (k !== MANAGED_BY_LABEL && k !== SERVICE_NAME_LABEL) labels[k] = v;
  labels[SERVICE_NAME_LABEL] = endpoints.metadata.name!;
  labels[MANAGED_BY_LABEL] = MIRRORING_CONTROLLER;
  return labels;
}

/** addressToEndpoint: the address, ready or not, its pod, node and hostname. */
function addressToEndpoint(address: Obj, ready: boolean): Obj {
  const endpoint: Obj = { addresses: [String(address.ip)], conditions: { ready } };
  if (typeof address.hostname === 'string' && address.hostname !== '') endpoint.hostname = address.hostname;
  if (address.targetRef !== undefined) endpoint.targetRef = address.targetRef;
  if (typeof address.nodeName === 'string') endpoint.nodeName = address.nodeName;
  return endpoint;
}

/** The slices mirroring an Endpoints object, from those there are: one group per subset's ports and address type. */
export function planMirroredSlices(endpoints: KubeObject, existing: readonly KubeObject[]): SlicePlan {
  const byType = new Map<string, Map<string, PortGroup>>();
  for (const subset of subsetsOf(endpoints)) {
    const ports = (subset.ports ?? []).map((p) => {
      const port: Obj = { name: p.name ?? '', protocol: p.protocol ?? 'TCP', port: p.port };
      if (p.appProtocol !== undefined) port.appProtocol = p.appProtocol;
      return port;
    });
    const addresses = [
      ...(subset.addresses ?? []).map((a) => [a, true] as const),
      ...(subset.notReadyAddresses ?? []).map((a) => [a, false] as const),
    ].slice(0, MAX_PER_SUBSET);
    for (const [address, ready] of addresses) {
      const family = isIP(String(obj(address).ip)) === 6 ? 'IPv6' : 'IPv4';
      let groups = byType.get(family);
      if (!groups) byType.set(family, (groups = new Map()));
      const key = portsKey(ports);
      let group = groups.get(key);
      if (!group) groups.set(key, (group = { ports, endpoints: new Map() }));
      const endpoint = addressToEndpoint(obj(address), ready);
      group.endpoints.set(endpointKey(endpoint), endpoint);
    }
  }
  const labels = mirrorLabels(endpoints);
  const plan: SlicePlan = { create: [], update: [], delete: [] };
  for (const type of new Set([...byType.keys(), ...existing.map((s) => String(s.addressType))])) {
    const owner: SliceOwner = {
      newSlice: (ports) => ({
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: {
          generateName: `${endpoints.metadata.name}-`,
          namespace: endpoints.metadata.namespace,
          labels,
          ownerReferences: [
            {
              apiVersion: 'v1',
              kind: 'Endpoints',
              name: endpoints.metadata.name!,
              uid: endpoints.metadata.uid!,
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        addressType: type,
        endpoints: [],
        ports,
      }),
      labels: (slice) => ({ labels, changed: !deepEqual(slice.metadata.labels ?? {}, labels) }),
    };
    const part = reconcileGroups(
      owner,
      byType.get(type) ?? new Map(),
      existing.filter((s) => s.addressType === type),
      MAX_PER_SLICE,
    );
    plan.create.push(...part.create);
    plan.update.push(...part.update);
    plan.delete.push(...part.delete);
  }
  pairCreatesWithDeletes(plan, (victim, slice) => victim.addressType === slice.addressType);
  annotateWrites(plan, LAST_CHANGE_TRIGGER_TIME, endpoints.metadata.annotations?.[LAST_CHANGE_TRIGGER_TIME]);
  return plan;
}

export function endpointSliceMirroringController(ctx: ControllerContext): Controller {
  const services = ctx.informers.for(Resources.services);
  const endpoints = ctx.informers.for(Resources.endpoints);
  const slices = ctx.informers.for(Resources.endpointslices);
  const tracker = new SliceTracker();
  const loop = new ReconcileLoop('endpointslicemirroring', ctx, reconcile, 5);
  const BY_ENDPOINTS = 'endpointslicemirroring-controller-endpoints';
  const endpointsOfSlice = (s: KubeObject): string | undefined =>
    s.metadata.labels?.[MANAGED_BY_LABEL] === MIRRORING_CONTROLLER && s.metadata.labels[SERVICE_NAME_LABEL]
      ? `${s.metadata.namespace}/${s.metadata.labels[SERVICE_NAME_LABEL]}`
      : undefined;
  slices.addIndex(BY_ENDPOINTS, (s) => {
    const key = endpointsOfSlice(s);
    return key ? [key] : [];
  });

  const enqueue = (o: KubeObject): void => loop.queue.add(cacheKey(o));
  services.addEventHandler({ add: enqueue, update: (_o, n) => enqueue(n), delete: enqueue });
  endpoints.addEventHandler({ add: enqueue, update: (_o, n) => enqueue(n), delete: enqueue });
  requeueOnSliceChanges(slices, tracker, endpointsOfSlice, (key) => loop.queue.add(key));

  async function reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const ep = endpoints.get(namespace, name);
    const existing = slices.byIndex(BY_ENDPOINTS, key);
    if (tracker.stale(key, (n) => slices.get(namespace, n))) return;
    const plan: SlicePlan = shouldMirror(ep, services.get(namespace, name))
      ? planMirroredSlices(ep!, existing)
      : { create: [], update: [], delete: [...existing] };
    try {
      await writeSlicePlan(ctx.client, tracker, key, namespace, plan);
    } catch (err) {
      // The namespace is going: so are the Endpoints and their slices.
      if (err instanceof ApiError && (err.details?.causes ?? []).some((c) => c.reason === 'NamespaceTerminating'))
        return;
      throw err;
    }
    if (!ep) tracker.forget(key);
  }

  return { name: 'endpointslicemirroring', start: async () => loop.start(), stop: () => loop.stop() };
}
