import {
  addQuantities,
  compareQuantities,
  formatQuantity,
  parseQuantity,
  ZERO_QUANTITY,
  type Quantity,
} from './quantity.js';
import { requirementMatches } from './node-fit.js';
import { claimClass } from './volumes.js';
import { isPlainObject, type KubeObject } from './types.js';

/**
 * ResourceQuota accounting (k8s.io/apiserver/pkg/quota/v1 and kubernetes/pkg/quota/v1/evaluator/core): what an
 * object of a resource uses of a quota, which quotas and scopes it falls under, and the arithmetic of resource lists.
 * Quota admission (registry) charges with it and the resourcequota controller counts with it, so the two agree.
 */
export type ResourceList = Map<string, Quantity>;

type Obj = Record<string, unknown>;

export interface ScopeSelectorRequirement {
  scopeName: string;
  operator: string;
  values?: string[];
}

/** How one group/resource is counted: the quota resources it can match, its usage, and which scopes apply to it. */
export interface QuotaEvaluator {
  /** Updates change usage (services change type, claims grow); other kinds are charged on create only. */
  readonly chargesUpdates: boolean;
  matchingResources(names: readonly string[]): string[];
  /** `now` (ms) applies the rule that a pod terminating past its grace period no longer counts; omitted, it counts. */
  usage(obj: KubeObject, now?: number): ResourceList;
  /** Scopes are pods' alone: every other evaluator matches no scope, so a scoped quota never counts them. */
  matchesScope(scope: ScopeSelectorRequirement, obj: KubeObject): boolean;
  /** Resources the object must declare for the quota to count it (pods' cpu and memory): the refusal, or undefined. */
  constraints?(required: readonly string[], obj: KubeObject): string | undefined;
}

export const STANDARD_SCOPES = [
  'Terminating',
  'NotTerminating',
  'BestEffort',
  'NotBestEffort',
  'PriorityClass',
  'CrossNamespacePodAffinity',
] as const;

const ONE = parseQuantity('1')!;
const STORAGE_CLASS_SUFFIX = '.storageclass.storage.k8s.io/';

/** `count/pods`, `count/deployments.apps`: the object count name of a group/resource. */
export function objectCountName(group: string, resource: string): string {
  return group ? `count/${resource}.${group}` : `count/${resource}`;
}

function spec(obj: KubeObject): Obj {
  return isPlainObject(obj.spec) ? obj.spec : {};
}

function list(value: unknown): Obj[] {
  return Array.isArray(value) ? (value.filter(isPlainObject) as Obj[]) : [];
}

function quantities(value: unknown): ResourceList {
  const out: ResourceList = new Map();
  if (!isPlainObject(value)) return out;
  for (const [k, v] of Object.entries(value)) {
    const q = parseQuantity(v);
    if (q) out.set(k, q);
  }
  return out;
}

/** quota.Add: every key of both, summed. */
export function addLists(a: ResourceList, b: ResourceList): ResourceList {
  const out: ResourceList = new Map(a);
  for (const [k, v] of b) out.set(k, addQuantities(out.get(k) ?? ZERO_QUANTITY, v));
  return out;
}

/** quota.SubtractWithNonNegativeResult: a − b per key of a, never below zero. */
export function subtractNonNegative(a: ResourceList, b: ResourceList): ResourceList {
  const out: ResourceList = new Map();
  for (const [k, v] of a) {
    const other = b.get(k);
    const nanos = other ? v.nanos - other.nanos : v.nanos;
    out.set(k, { nanos: nanos > 0n ? nanos : 0n, format: v.format });
  }
  return out;
}

/** quota.Mask: only the named keys. */
export function maskList(a: ResourceList, names: Iterable<string>): ResourceList {
  const out: ResourceList = new Map();
  for (const n of names) {
    const v = a.get(n);
    if (v) out.set(n, v);
  }
  return out;
}

export function removeZeros(a: ResourceList): ResourceList {
  const out: ResourceList = new Map();
  for (const [k, v] of a) if (v.nanos !== 0n) out.set(k, v);
  return out;
}

export function listsEqual(a: ResourceList, b: ResourceList): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) {
    const other = b.get(k);
    if (!other || compareQuantities(v, other) !== 0) return false;
  }
  return true;
}

/** A resource list as a quota's status holds it: canonical quantity strings. */
export function listToJson(a: ResourceList): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of [...a.keys()].sort()) out[k] = formatQuantity(a.get(k)!);
  return out;
}

export function listFromJson(value: unknown): ResourceList {
  return quantities(value);
}

/** prettyPrint of the admission messages: `pods=1,requests.cpu=500m`, keys sorted. */
export function prettyPrint(a: ResourceList): string {
  return [...a.keys()]
    .sort()
    .map((k) => `${k}=${formatQuantity(a.get(k)!)}`)
    .join(',');
}

/** A quota's scope selectors: `spec.scopes` (each an Exists) and `spec.scopeSelector.matchExpressions`. */
export function quotaScopes(quota: KubeObject): ScopeSelectorRequirement[] {
  const s = spec(quota);
  const out: ScopeSelectorRequirement[] = [];
  for (const scope of Array.isArray(s.scopes) ? s.scopes : [])
    if (typeof scope === 'string') out.push({ scopeName: scope, operator: 'Exists' });
  const selector = isPlainObject(s.scopeSelector) ? s.scopeSelector : {};
  for (const e of list(selector.matchExpressions))
    out.push({
      scopeName: String(e.scopeName ?? ''),
      operator: String(e.operator ?? ''),
      values: Array.isArray(e.values) ? e.values.map(String) : undefined,
    });
  return out;
}

/** The quota's `status.hard` resource names (what admission and the controller enforce and count). */
export function hardResourceNames(quota: KubeObject): string[] {
  const status = isPlainObject(quota.status) ? quota.status : {};
  return isPlainObject(status.hard) ? Object.keys(status.hard) : [];
}

/** generic.Matches: the quota limits something this evaluator counts, and the object is in every one of its scopes. */
export function quotaMatches(
  evaluator: QuotaEvaluator,
  resources: readonly string[],
  scopes: readonly ScopeSelectorRequirement[],
  obj: KubeObject,
): boolean {
  if (evaluator.matchingResources(resources).length === 0) return false;
  return scopes.every((scope) => evaluator.matchesScope(scope, obj));
}

// ---------------------------------------------------------------------------------------------------
// pods

const POD_RESOURCES = new Set([
  'count/pods',
  'cpu',
  'memory',
  'ephemeral-storage',
  'requests.cpu',
  'requests.memory',
  'requests.ephemeral-storage',
  'limits.cpu',
  'limits.memory',
  'limits.ephemeral-storage',
  'pods',
]);
/** Quota tracking these makes every container declare them (kube's "BACKWARD COMPATIBILITY REQUIREMENT"). */
const MUST_DECLARE = ['cpu', 'memory', 'requests.cpu', 'requests.memory', 'limits.cpu', 'limits.memory'];
const NATIVE_PREFIXES = ['kubernetes.io/', 'requests.kubernetes.io/'];

function isExtendedForQuota(name: string): boolean {
  const native = !name.includes('/') || NATIVE_PREFIXES.some((p) => name.startsWith(p));
  return !native && name.startsWith('requests.');
}

function containerResources(c: Obj): { requests: ResourceList; limits: ResourceList } {
  const resources = isPlainObject(c.resources) ? c.resources : {};
  return { requests: quantities(resources.requests), limits: quantities(resources.limits) };
}

/** podComputeUsageHelper: what requests and limits add up to in quota resource names. */
function computeUsage(requests: ResourceList, limits: ResourceList): ResourceList {
  const out: ResourceList = new Map([['pods', ONE]]);
  for (const r of ['cpu', 'memory', 'ephemeral-storage']) {
    const request = requests.get(r);
    if (request) {
      out.set(r, request);
      out.set(`requests.${r}`, request);
    }
    const limit = limits.get(r);
    if (limit) out.set(`limits.${r}`, limit);
  }
  for (const [name, request] of requests) {
    if (name.startsWith('hugepages-')) {
      out.set(name, request);
      out.set(`requests.${name}`, request);
    } else if (name.includes('/') && !NATIVE_PREFIXES.some((p) => name.startsWith(p)))
      out.set(`requests.${name}`, request);
  }
  return out;
}

function maxLists(a: ResourceList, b: ResourceList): ResourceList {
  const out: ResourceList = new Map(a);
  for (const [k, v] of b) {
    const current = out.get(k);
    if (!current || compareQuantities(v, current) > 0) out.set(k, v);
  }
  return out;
}

/**
 * resourcehelper.PodRequests/PodLimits: the containers' sum, or the largest init container when more (sidecars,
 * restartPolicy Always, add to both), plus spec.overhead (which LimitRanger leaves out).
 */
export function podRequestsAndLimits(
  pod: KubeObject,
  options: { overhead?: boolean } = {},
): { requests: ResourceList; limits: ResourceList } {
  const s = spec(pod);
  let requests: ResourceList = new Map();
  let limits: ResourceList = new Map();
  for (const c of list(s.containers)) {
    const r = containerResources(c);
    requests = addLists(requests, r.requests);
    limits = addLists(limits, r.limits);
  }
  let sidecarRequests: ResourceList = new Map();
  let sidecarLimits: ResourceList = new Map();
  let initRequests: ResourceList = new Map();
  let initLimits: ResourceList = new Map();
  for (const c of list(s.initContainers)) {
    const r = containerResources(c);
    if (c.restartPolicy === 'Always') {
      requests = addLists(requests, r.requests);
      limits = addLists(limits, r.limits);
      sidecarRequests = addLists(sidecarRequests, r.requests);
      sidecarLimits = addLists(sidecarLimits, r.limits);
      initRequests = maxLists(initRequests, sidecarRequests);
      initLimits = maxLists(initLimits, sidecarLimits);
    } else {
      initRequests = maxLists(initRequests, addLists(r.requests, sidecarRequests));
      initLimits = maxLists(initLimits, addLists(r.limits, sidecarLimits));
    }
  }
  requests = maxLists(requests, initRequests);
  limits = maxLists(limits, initLimits);
  const overhead = options.overhead === false ? new Map() : quantities(s.overhead);
  if (overhead.size > 0) {
    requests = addLists(requests, overhead);
    // Overhead joins a limit only where the pod has one for that resource.
    for (const [k, v] of overhead) {
      const limit = limits.get(k);
      if (limit) limits.set(k, addQuantities(limit, v));
    }
  }
  return { requests, limits };
}

/** QuotaV1Pod: terminal pods, and pods terminating for longer than their grace period, use no compute quota. */
function podCounts(pod: KubeObject, now: number | undefined): boolean {
  const phase = isPlainObject(pod.status) ? pod.status.phase : undefined;
  if (phase === 'Succeeded' || phase === 'Failed') return false;
  return now === undefined || !pastGrace(pod, now);
}

/** When a terminating pod stops counting (deletionTimestamp plus its grace period again), or undefined. */
export function podQuotaExpiry(pod: KubeObject): number | undefined {
  const deletion = Date.parse(pod.metadata.deletionTimestamp ?? '');
  const grace = pod.metadata.deletionGracePeriodSeconds;
  if (Number.isNaN(deletion) || typeof grace !== 'number') return undefined;
  return deletion + grace * 1000;
}

function pastGrace(pod: KubeObject, now: number): boolean {
  const expiry = podQuotaExpiry(pod);
  return expiry !== undefined && now > expiry;
}

function podQos(pod: KubeObject): string {
  const status = isPlainObject(pod.status) ? pod.status : {};
  if (typeof status.qosClass === 'string') return status.qosClass;
  for (const c of [...list(spec(pod).containers), ...list(spec(pod).initContainers)]) {
    const { requests, limits } = containerResources(c);
    for (const r of ['cpu', 'memory']) if (requests.has(r) || limits.has(r)) return 'Burstable';
  }
  return 'BestEffort';
}

function crossNamespaceAffinity(pod: KubeObject): boolean {
  const affinity = isPlainObject(spec(pod).affinity) ? (spec(pod).affinity as Obj) : {};
  for (const kind of ['podAffinity', 'podAntiAffinity']) {
    const a = isPlainObject(affinity[kind]) ? (affinity[kind] as Obj) : {};
    const terms = [
      ...list(a.requiredDuringSchedulingIgnoredDuringExecution),
      ...list(a.preferredDuringSchedulingIgnoredDuringExecution).map((w) =>
        isPlainObject(w.podAffinityTerm) ? w.podAffinityTerm : {},
      ),
    ];
    if (terms.some((t) => (Array.isArray(t.namespaces) && t.namespaces.length > 0) || t.namespaceSelector != null))
      return true;
  }
  return false;
}

const podEvaluator: QuotaEvaluator = {
  chargesUpdates: false,
  matchingResources(names) {
    return names.filter((n) => POD_RESOURCES.has(n) || n.startsWith('hugepages-') || isExtendedForQuota(n));
  },
  usage(pod, now) {
    const out: ResourceList = new Map([['count/pods', ONE]]);
    if (!podCounts(pod, now)) return out;
    const { requests, limits } = podRequestsAndLimits(pod);
    return addLists(out, computeUsage(requests, limits));
  },
  matchesScope(scope, pod) {
    const s = spec(pod);
    switch (scope.scopeName) {
      case 'Terminating':
        return typeof s.activeDeadlineSeconds === 'number' && s.activeDeadlineSeconds >= 0;
      case 'NotTerminating':
        return !(typeof s.activeDeadlineSeconds === 'number' && s.activeDeadlineSeconds >= 0);
      case 'BestEffort':
        return podQos(pod) === 'BestEffort';
      case 'NotBestEffort':
        return podQos(pod) !== 'BestEffort';
      case 'PriorityClass': {
        const name = typeof s.priorityClassName === 'string' && s.priorityClassName !== '' ? s.priorityClassName : '';
        if (scope.operator === 'Exists') return name !== '';
        // ScopedResourceSelectorRequirementsAsSelector: a label selector over {PriorityClass: name}.
        return requirementMatches(scope, name === '' ? undefined : name);
      }
      case 'CrossNamespacePodAffinity':
        return crossNamespaceAffinity(pod);
      default:
        return false;
    }
  },
  constraints(required, pod) {
    const needed = required.filter((r) => MUST_DECLARE.includes(r));
    if (needed.length === 0) return undefined;
    const missing = new Map<string, Set<string>>();
    for (const c of [...list(spec(pod).containers), ...list(spec(pod).initContainers)]) {
      const { requests, limits } = containerResources(c);
      const declared = computeUsage(requests, limits);
      for (const r of needed) {
        if (declared.has(r)) continue;
        let names = missing.get(r);
        if (!names) missing.set(r, (names = new Set()));
        names.add(String(c.name ?? ''));
      }
    }
    if (missing.size === 0) return undefined;
    const parts = [...missing.keys()].sort().map((r) => `${r} for: ${[...missing.get(r)!].sort().join(',')}`);
    return `must specify ${parts.join('; ')}`;
  },
};

// ---------------------------------------------------------------------------------------------------
// services, claims, and object counts

const SERVICE_RESOURCES = new Set(['count/services', 'services', 'services.nodeports', 'services.loadbalancers']);

const serviceEvaluator: QuotaEvaluator = {
  chargesUpdates: true,
  matchingResources(names) {
    return names.filter((n) => SERVICE_RESOURCES.has(n));
  },
  usage(svc) {
    const s = spec(svc);
    const ports = list(s.ports);
    let nodePorts = 0;
    let loadBalancers = 0;
    if (s.type === 'NodePort') nodePorts = ports.length;
    else if (s.type === 'LoadBalancer') {
      nodePorts = s.allocateLoadBalancerNodePorts === false ? ports.filter((p) => p.nodePort).length : ports.length;
      loadBalancers = 1;
    }
    return new Map([
      ['count/services', ONE],
      ['services', ONE],
      ['services.nodeports', parseQuantity(String(nodePorts))!],
      ['services.loadbalancers', parseQuantity(String(loadBalancers))!],
    ]);
  },
  matchesScope: () => false,
};

const CLAIM_RESOURCES = ['persistentvolumeclaims', 'requests.storage'];

const claimEvaluator: QuotaEvaluator = {
  chargesUpdates: true,
  matchingResources(names) {
    return names.filter(
      (n) =>
        n === 'count/persistentvolumeclaims' ||
        CLAIM_RESOURCES.includes(n) ||
        CLAIM_RESOURCES.some((r) => n.endsWith(`${STORAGE_CLASS_SUFFIX}${r}`)),
    );
  },
  usage(claim) {
    const out: ResourceList = new Map([
      ['persistentvolumeclaims', ONE],
      ['count/persistentvolumeclaims', ONE],
    ]);
    const cls = claimClass(claim);
    if (cls !== '') out.set(`${cls}${STORAGE_CLASS_SUFFIX}persistentvolumeclaims`, ONE);
    const resources = isPlainObject(spec(claim).resources) ? (spec(claim).resources as Obj) : {};
    let storage = quantities(resources.requests).get('storage');
    const status = isPlainObject(claim.status) ? claim.status : {};
    const allocated = quantities(status.allocatedResources).get('storage');
    if (storage && allocated && compareQuantities(allocated, storage) > 0) storage = allocated;
    if (storage) {
      // Whole bytes (kubernetes#94313): a fractional request is charged rounded up.
      const rounded = storage.nanos % 1_000_000_000n === 0n ? storage : roundUpToUnit(storage);
      out.set('requests.storage', rounded);
      if (cls !== '') out.set(`${cls}${STORAGE_CLASS_SUFFIX}requests.storage`, rounded);
    }
    return out;
  },
  matchesScope: () => false,
};

function roundUpToUnit(q: Quantity): Quantity {
  const units = q.nanos / 1_000_000_000n + (q.nanos > 0n ? 1n : 0n);
  return { nanos: units * 1_000_000_000n, format: q.format };
}

/** The legacy names configmaps, secrets, resourcequotas and replicationcontrollers count beside `count/…`. */
const LEGACY_ALIASES: Record<string, string> = {
  configmaps: 'configmaps',
  secrets: 'secrets',
  resourcequotas: 'resourcequotas',
  replicationcontrollers: 'replicationcontrollers',
};

function objectCountEvaluator(group: string, resource: string): QuotaEvaluator {
  const names = [objectCountName(group, resource)];
  if (group === '' && LEGACY_ALIASES[resource]) names.push(LEGACY_ALIASES[resource]!);
  const usage: ResourceList = new Map(names.map((n) => [n, ONE]));
  return {
    chargesUpdates: false,
    matchingResources: (input) => input.filter((n) => names.includes(n)),
    usage: () => usage,
    matchesScope: () => false,
  };
}

const evaluators = new Map<string, QuotaEvaluator>([
  ['/pods', podEvaluator],
  ['/services', serviceEvaluator],
  ['/persistentvolumeclaims', claimEvaluator],
]);

/** The evaluator of a group/resource: pods, services and claims have their own; every other kind counts objects. */
export function quotaEvaluator(group: string, resource: string): QuotaEvaluator {
  const key = `${group}/${resource}`;
  let e = evaluators.get(key);
  if (!e) evaluators.set(key, (e = objectCountEvaluator(group, resource)));
  return e;
}

/**
 * The group/resource a quota resource name counts, when it names one: `count/deployments.apps`, the legacy
 * `configmaps`, or the compute and storage names of pods, services and claims.
 */
export function resourceOfQuotaName(name: string): { group: string; resource: string } | undefined {
  if (name.startsWith('count/')) {
    const rest = name.slice('count/'.length);
    const dot = rest.indexOf('.');
    return dot < 0 ? { group: '', resource: rest } : { group: rest.slice(dot + 1), resource: rest.slice(0, dot) };
  }
  if (LEGACY_ALIASES[name]) return { group: '', resource: name };
  for (const resource of ['pods', 'services', 'persistentvolumeclaims'])
    if (quotaEvaluator('', resource).matchingResources([name]).length > 0) return { group: '', resource };
  return undefined;
}

// ---------------------------------------------------------------------------------------------------
// validation helpers shared by the ResourceQuota kind

/** standardQuotaResources: the names a quota may use without a `/`. */
export const STANDARD_QUOTA_RESOURCES = new Set([
  'cpu',
  'memory',
  'ephemeral-storage',
  'requests.cpu',
  'requests.memory',
  'requests.storage',
  'requests.ephemeral-storage',
  'limits.cpu',
  'limits.memory',
  'limits.ephemeral-storage',
  'pods',
  'quotas',
  'services',
  'replicationcontrollers',
  'secrets',
  'persistentvolumeclaims',
  'configmaps',
  'services.nodeports',
  'services.loadbalancers',
]);

export const INTEGER_QUOTA_RESOURCES = new Set([
  'pods',
  'quotas',
  'services',
  'replicationcontrollers',
  'secrets',
  'configmaps',
  'persistentvolumeclaims',
  'services.nodeports',
  'services.loadbalancers',
]);

const POD_COMPUTE = new Set(['cpu', 'memory', 'limits.cpu', 'limits.memory', 'requests.cpu', 'requests.memory']);

/** IsResourceQuotaScopeValidForResource. */
export function scopeValidForResource(scope: string, resource: string): boolean {
  switch (scope) {
    case 'Terminating':
    case 'NotTerminating':
    case 'NotBestEffort':
    case 'PriorityClass':
    case 'CrossNamespacePodAffinity':
      return resource === 'pods' || POD_COMPUTE.has(resource);
    case 'BestEffort':
      return resource === 'pods';
    default:
      return true;
  }
}

/** a − b per key of either (usage taken back out of a tally; never below zero where the tally is right). */
export function subtractLists(a: ResourceList, b: ResourceList): ResourceList {
  const out: ResourceList = new Map(a);
  for (const [k, v] of b) {
    const current = out.get(k) ?? ZERO_QUANTITY;
    out.set(k, { nanos: current.nanos - v.nanos, format: current.format });
  }
  return out;
}
