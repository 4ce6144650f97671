import { Errors } from '../../api/errors.js';
import { formatQuantity, milliValue, parseQuantity, unitValue, type Quantity } from '../../api/quantity.js';
import { podRequestsAndLimits, type ResourceList } from '../../api/quota.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import type { MemoryStore } from '../../storage/memory-store.js';
import type { AdmissionPlugin, AdmissionRequest } from '../types.js';
import { namespaceObjects } from './namespace-objects.js';

/**
 * kube-apiserver's LimitRanger plugin: the LimitRanges of a pod's namespace give its containers (and init
 * containers) the `default` limits and `defaultRequest` requests they do not set, noted in the
 * `kubernetes.io/limit-ranger` annotation, then every Container, Pod and PersistentVolumeClaim limit is checked:
 * min, max and maxLimitRequestRatio, with the plugin's messages. Pods are looked at on create only (their
 * containers cannot change afterwards); claims on create and update.
 */
type Obj = Record<string, unknown>;

const LIMIT_RANGES = '/limitranges';
const ANNOTATION = 'kubernetes.io/limit-ranger';
/** resource.MaxMilliValue: past it, Quantity compares whole units rather than milli-units. */
const MAX_MILLI_VALUE = (2n ** 63n - 1n) / 1000n;

interface LimitItem {
  type: string;
  min: ResourceList;
  max: ResourceList;
  default: ResourceList;
  defaultRequest: ResourceList;
  maxLimitRequestRatio: ResourceList;
  /** The texts as stored, copied into containers as they are. */
  raw: { default: Obj; defaultRequest: Obj };
}

function quantities(value: unknown): ResourceList {
  const out: ResourceList = new Map();
  if (!isPlainObject(value)) return out;
  for (const k of Object.keys(value).sort()) {
    const q = parseQuantity(value[k]);
    if (q) out.set(k, q);
  }
  return out;
}

function limitItems(limitRange: KubeObject): LimitItem[] {
  const spec = isPlainObject(limitRange.spec) ? limitRange.spec : {};
  const limits = Array.isArray(spec.limits) ? (spec.limits.filter(isPlainObject) as Obj[]) : [];
  return limits.map((l) => ({
    type: String(l.type ?? ''),
    min: quantities(l.min),
    max: quantities(l.max),
    default: quantities(l.default),
    defaultRequest: quantities(l.defaultRequest),
    maxLimitRequestRatio: quantities(l.maxLimitRequestRatio),
    raw: {
      default: isPlainObject(l.default) ? l.default : {},
      defaultRequest: isPlainObject(l.defaultRequest) ? l.defaultRequest : {},
    },
  }));
}

/** requestLimitEnforcedValues: milli-units when none of the three is too large for them, else whole units. */
function comparable(request: Quantity | undefined, limit: Quantity | undefined, enforced: Quantity): bigint[] {
  const zero: Quantity = { nanos: 0n, format: 'DecimalSI' };
  const all = [request ?? zero, limit ?? zero, enforced];
  const units = all.map(unitValue);
  return units.every((u) => u <= MAX_MILLI_VALUE) ? all.map(milliValue) : units;
}

function minConstraint(type: string, name: string, enforced: Quantity, requests: ResourceList, limits: ResourceList) {
  const req = requests.get(name);
  const lim = limits.get(name);
  const [r, l, e] = comparable(req, lim, enforced) as [bigint, bigint, bigint];
  const min = formatQuantity(enforced);
  if (!req) return `minimum ${name} usage per ${type} is ${min}.  No request is specified`;
  if (r < e) return `minimum ${name} usage per ${type} is ${min}, but request is ${formatQuantity(req)}`;
  if (lim && l < e) return `minimum ${name} usage per ${type} is ${min}, but limit is ${formatQuantity(lim)}`;
  return undefined;
}

function maxConstraint(type: string, name: string, enforced: Quantity, requests: ResourceList, limits: ResourceList) {
  const req = requests.get(name);
  const lim = limits.get(name);
  const [r, l, e] = comparable(req, lim, enforced) as [bigint, bigint, bigint];
  const max = formatQuantity(enforced);
  if (!lim) return `maximum ${name} usage per ${type} is ${max}.  No limit is specified`;
  if (l > e) return `maximum ${name} usage per ${type} is ${max}, but limit is ${formatQuantity(lim)}`;
  if (req && r > e) return `maximum ${name} usage per ${type} is ${max}, but request is ${formatQuantity(req)}`;
  return undefined;
}

/** maxRequestConstraint: claims have requests only. */
function maxRequestConstraint(type: string, name: string, enforced: Quantity, requests: ResourceList) {
  const req = requests.get(name);
  const [r, , e] = comparable(req, undefined, enforced) as [bigint, bigint, bigint];
  const max = formatQuantity(enforced);
  if (!req) return `maximum ${name} usage per ${type} is ${max}.  No request is specified`;
  if (r > e) return `maximum ${name} usage per ${type} is ${max}, but request is ${formatQuantity(req)}`;
  return undefined;
}

function ratioConstraint(type: string, name: string, enforced: Quantity, requests: ResourceList, limits: ResourceList) {
  const req = requests.get(name);
  const lim = limits.get(name);
  const [r, l] = comparable(req, lim, enforced) as [bigint, bigint, bigint];
  const ratio = formatQuantity(enforced);
  if (!req || r === 0n)
    return `${name} max limit to request ratio per ${type} is ${ratio}, but no request is specified or request is 0`;
  if (!lim || l === 0n)
    return `${name} max limit to request ratio per ${type} is ${ratio}, but no limit is specified or limit is 0`;
  const observed = Number(l) / Number(r);
  const enforcedUnits = unitValue(enforced);
  const exceeds =
    enforcedUnits <= MAX_MILLI_VALUE
      ? observed * 1000 > Number(milliValue(enforced))
      : observed > Number(enforcedUnits);
  return exceeds
    ? `${name} max limit to request ratio per ${type} is ${ratio}, but provided ratio is ${observed.toFixed(6)}`
    : undefined;
}

function containersOf(pod: KubeObject): Array<{ c: Obj; kind: 'container' | 'init container' }> {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const of = (list: unknown, kind: 'container' | 'init container') =>
    (Array.isArray(list) ? (list.filter(isPlainObject) as Obj[]) : []).map((c) => ({ c, kind }));
  return [...of(spec.containers, 'container'), ...of(spec.initContainers, 'init container')];
}

function containerLists(c: Obj): { requests: ResourceList; limits: ResourceList } {
  const resources = isPlainObject(c.resources) ? c.resources : {};
  return { requests: quantities(resources.requests), limits: quantities(resources.limits) };
}

/** mergePodResourceRequirements: what one LimitRange's Container defaults add to the pod, and the annotation. */
function applyDefaults(pod: KubeObject, items: LimitItem[]): void {
  const limits: Obj = {};
  const requests: Obj = {};
  for (const item of items) {
    if (item.type !== 'Container') continue;
    Object.assign(requests, item.raw.defaultRequest);
    Object.assign(limits, item.raw.default);
  }
  const notes: string[] = [];
  for (const { c, kind } of containersOf(pod)) {
    const resources: Obj = isPlainObject(c.resources) ? { ...c.resources } : {};
    const own = { limits: isPlainObject(resources.limits) ? { ...resources.limits } : {}, requests: {} as Obj };
    own.requests = isPlainObject(resources.requests) ? { ...resources.requests } : {};
    const setLimits = Object.keys(limits).filter((k) => own.limits[k] === undefined);
    const setRequests = Object.keys(requests).filter((k) => own.requests[k] === undefined);
    for (const k of setLimits) own.limits[k] = limits[k];
    for (const k of setRequests) own.requests[k] = requests[k];
    if (setLimits.length === 0 && setRequests.length === 0) continue;
    if (Object.keys(own.limits).length > 0) resources.limits = own.limits;
    if (Object.keys(own.requests).length > 0) resources.requests = own.requests;
    c.resources = resources;
    if (setRequests.length > 0) notes.push(`${setRequests.sort().join(', ')} request for ${kind} ${String(c.name)}`);
    if (setLimits.length > 0) notes.push(`${setLimits.sort().join(', ')} limit for ${kind} ${String(c.name)}`);
  }
  if (notes.length > 0)
    pod.metadata.annotations = {
      ...(pod.metadata.annotations ?? {}),
      [ANNOTATION]: `LimitRanger plugin set: ${notes.join('; ')}`,
    };
}

/** PodValidateLimitFunc: every container against Container limits, the pod's sums against Pod limits. */
function podErrors(pod: KubeObject, items: LimitItem[]): string[] {
  const errors: string[] = [];
  const check = (type: string, item: LimitItem, requests: ResourceList, limits: ResourceList): void => {
    for (const [k, v] of item.min) {
      const e = minConstraint(type, k, v, requests, limits);
      if (e) errors.push(e);
    }
    for (const [k, v] of item.max) {
      const e = maxConstraint(type, k, v, requests, limits);
      if (e) errors.push(e);
    }
    for (const [k, v] of item.maxLimitRequestRatio) {
      const e = ratioConstraint(type, k, v, requests, limits);
      if (e) errors.push(e);
    }
  };
  for (const item of items) {
    if (item.type === 'Container')
      for (const { c } of containersOf(pod)) {
        const { requests, limits } = containerLists(c);
        check('Container', item, requests, limits);
      }
    if (item.type === 'Pod') {
      const { requests, limits } = podRequestsAndLimits(pod, { overhead: false });
      check('Pod', item, requests, limits);
    }
  }
  return errors;
}

function claimErrors(claim: KubeObject, items: LimitItem[]): string[] {
  const spec = isPlainObject(claim.spec) ? claim.spec : {};
  const resources = isPlainObject(spec.resources) ? spec.resources : {};
  const requests = quantities(resources.requests);
  const errors: string[] = [];
  for (const item of items) {
    if (item.type !== 'PersistentVolumeClaim') continue;
    for (const [k, v] of item.min) {
      const e = minConstraint('PersistentVolumeClaim', k, v, requests, new Map());
      if (e) errors.push(e);
    }
    for (const [k, v] of item.max) {
      const e = maxRequestConstraint('PersistentVolumeClaim', k, v, requests);
      if (e) errors.push(e);
    }
  }
  return errors;
}

export class LimitRanger implements AdmissionPlugin {
  readonly name = 'LimitRanger';

  constructor(private readonly store: MemoryStore) {}

  /** SupportsAttributes: pods on create, claims on create and update, no subresource; nothing being deleted. */
  private limitRanges(request: AdmissionRequest): readonly KubeObject[] | undefined {
    const { info, operation, obj, old } = request;
    if (info.group !== '' || request.subresource !== '' || !obj) return undefined;
    if (info.resource === 'pods' ? operation !== 'CREATE' : info.resource !== 'persistentvolumeclaims')
      return undefined;
    if (old?.metadata.deletionTimestamp) return undefined;
    const namespace = obj.metadata.namespace;
    if (namespace === undefined) return undefined;
    const ranges = namespaceObjects(this.store, LIMIT_RANGES, namespace);
    return ranges.length > 0 ? ranges : undefined;
  }

  admit(request: AdmissionRequest): void {
    if (request.info.resource !== 'pods') return;
    for (const limitRange of this.limitRanges(request) ?? []) applyDefaults(request.obj!, limitItems(limitRange));
  }

  validate(request: AdmissionRequest): undefined {
    const ranges = this.limitRanges(request);
    const obj = request.obj;
    if (!ranges || !obj) return undefined;
    for (const limitRange of ranges) {
      const items = limitItems(limitRange);
      const errors = request.info.resource === 'pods' ? podErrors(obj, items) : claimErrors(obj, items);
      if (errors.length === 0) continue;
      // utilerrors.NewAggregate: one error as it is, several in brackets.
      const why = errors.length === 1 ? errors[0]! : `[${errors.join(', ')}]`;
      throw Errors.forbidden(request.info, obj.metadata.name ?? obj.metadata.generateName ?? '', why);
    }
    return undefined;
  }
}
