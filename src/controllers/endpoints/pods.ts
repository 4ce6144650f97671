import { isIP } from 'node:net';
import { isPodReady, isTerminal } from '../../api/pod-util.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';

/**
 * What the endpoints and EndpointSlice controllers read of a pod and a Service (k8s.io/endpointslice's util and
 * podutil): whether the pod is an endpoint, at which address, which container port a Service port names, and
 * whether its hostname is published.
 */
type Obj = Record<string, unknown>;

const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const list = (v: unknown): Obj[] => (Array.isArray(v) ? (v as unknown[]).map(obj) : []);

export function serviceSpec(svc: KubeObject): Obj {
  return obj(svc.spec);
}

/** The Service's port list. */
export function servicePorts(svc: KubeObject): Obj[] {
  return list(serviceSpec(svc).ports);
}

/** A Service with a selector gets its endpoints from the controllers; without one, from whoever writes them. */
export function serviceSelector(svc: KubeObject): Record<string, string> | undefined {
  const selector = serviceSpec(svc).selector;
  return isPlainObject(selector) ? (selector as Record<string, string>) : undefined;
}

/** helper.IsServiceIPSet: a cluster IP that is not "None" (a headless Service has none). */
export function isServiceIPSet(svc: KubeObject): boolean {
  const ip = serviceSpec(svc).clusterIP;
  return typeof ip === 'string' && ip !== '' && ip !== 'None';
}

export function isHeadless(svc: KubeObject): boolean {
  return serviceSpec(svc).clusterIP === 'None';
}

/**
 * ShouldPodBeInEndpoints: not finished, with an IP; a pod being deleted only when terminating endpoints are wanted
 * (EndpointSlices always want them; Endpoints only for publishNotReadyAddresses).
 */
export function shouldPodBeInEndpoints(pod: KubeObject, includeTerminating: boolean): boolean {
  if (isTerminal(pod)) return false;
  const status = obj(pod.status);
  if (!status.podIP && list(status.podIPs).length === 0) return false;
  return includeTerminating || pod.metadata.deletionTimestamp === undefined;
}

/** The Service's IP family: its first ipFamilies entry, IPv4 by default. */
export function serviceFamily(svc: KubeObject): 'IPv4' | 'IPv6' {
  const families = serviceSpec(svc).ipFamilies;
  return Array.isArray(families) && families[0] === 'IPv6' ? 'IPv6' : 'IPv4';
}

/** The pod's address of the Service's family (podToEndpointAddressForService), or undefined. */
export function podAddress(pod: KubeObject, family: 'IPv4' | 'IPv6'): string | undefined {
  const status = obj(pod.status);
  const want = family === 'IPv6' ? 6 : 4;
  const ips = list(status.podIPs).map((p) => String(p.ip ?? ''));
  if (ips.length === 0 && typeof status.podIP === 'string') ips.push(status.podIP);
  return ips.find((ip) => isIP(ip) === want);
}

/**
 * podutil.FindPort: a numeric targetPort as it is; a named one is the container port of that name and the Service
 * port's protocol, in the containers and the restartable (sidecar) init containers; undefined when none has it.
 */
export function findPort(pod: KubeObject, servicePort: Obj): number | undefined {
  const target = servicePort.targetPort ?? servicePort.port;
  if (typeof target === 'number') return target;
  if (typeof target !== 'string') return undefined;
  const protocol = servicePort.protocol ?? 'TCP';
  const spec = obj(pod.spec);
  const containers = [
    ...list(spec.containers),
    ...list(spec.initContainers).filter((c) => c.restartPolicy === 'Always'),
  ];
  for (const c of containers)
    for (const p of list(c.ports))
      if (p.name === target && (p.protocol ?? 'TCP') === protocol && typeof p.containerPort === 'number')
        return p.containerPort;
  return undefined;
}

/** ShouldSetHostname: a pod with a hostname whose subdomain is the Service (a StatefulSet's governing Service). */
export function shouldSetHostname(pod: KubeObject, svc: KubeObject): boolean {
  const spec = obj(pod.spec);
  return (
    typeof spec.hostname === 'string' &&
    spec.hostname !== '' &&
    spec.subdomain === svc.metadata.name &&
    pod.metadata.namespace === svc.metadata.namespace
  );
}

/**
 * Whether a pod change can change the endpoints of a Service selecting it (podEndpointsChanged plus what
 * ShouldPodBeInEndpoints reads): `labels` when its Service memberships may have changed.
 */
export function podEndpointsChanged(old: KubeObject, pod: KubeObject): { endpoints: boolean; labels: boolean } {
  const labels =
    !deepEqual(old.metadata.labels ?? {}, pod.metadata.labels ?? {}) ||
    obj(old.spec).hostname !== obj(pod.spec).hostname ||
    obj(old.spec).subdomain !== obj(pod.spec).subdomain;
  const a = obj(old.status);
  const b = obj(pod.status);
  const endpoints =
    old.metadata.deletionTimestamp !== pod.metadata.deletionTimestamp ||
    isPodReady(old) !== isPodReady(pod) ||
    a.podIP !== b.podIP ||
    !deepEqual(a.podIPs ?? [], b.podIPs ?? []) ||
    isTerminal(old) !== isTerminal(pod) ||
    obj(old.spec).nodeName !== obj(pod.spec).nodeName;
  return { endpoints, labels };
}

/**
 * The pod's endpoints trigger time (getPodTriggerTime): when its Ready condition last changed, in ms (NaN if none).
 */
export function podTriggerTime(pod: KubeObject): number {
  let t = triggerTimes.get(pod);
  if (t === undefined) {
    const ready = list(obj(pod.status).conditions).find((c) => c.type === 'Ready');
    t = typeof ready?.lastTransitionTime === 'string' ? Date.parse(ready.lastTransitionTime) : Number.NaN;
    triggerTimes.set(pod, t);
  }
  return t;
}

/** Per pod version (cache objects never change): a sync reads every member's. */
const triggerTimes = new WeakMap<KubeObject, number>();
