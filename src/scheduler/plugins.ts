import { parseMilli } from '../api/quantity.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import {
  nodeTaints,
  termMatches,
  tolerates,
  tolerationsOf,
  untoleratedTaint,
  type Taint,
  type Toleration,
} from '../api/node-fit.js';

/**
 * The default scheduler's filter and score plugins, as pure functions over a pod and a node's accounting
 * (kube-scheduler's NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodeResourcesFit filters in
 * that order, with their failure reasons; LeastAllocated, BalancedAllocation, PodTopologySpread's default
 * constraints, preferred node affinity and PreferNoSchedule taints as scores), and the FitError message.
 */
type Obj = Record<string, unknown>;

/** Requests in milli-units per resource name. */
export type Resources = Map<string, number>;

/** Requests assumed for scoring when a container asks for nothing (schedutil.DefaultMilliCPURequest / DefaultMemoryRequest). */
export const DEFAULT_MILLI_CPU = 100;
export const DEFAULT_MEMORY_MILLI = 200 * 1024 * 1024 * 1000;

export interface PodRequest {
  resources: Resources;
  /** cpu and memory with the defaults above for containers that request nothing, for scoring. */
  nonZeroCpu: number;
  nonZeroMemory: number;
}

export interface NodeState {
  name: string;
  node: KubeObject;
  allocatable: Resources;
  requested: Resources;
  nonZeroCpu: number;
  nonZeroMemory: number;
  pods: number;
}

export interface FilterFailure {
  reasons: string[];
  /** UnschedulableAndUnresolvable: preempting pods would not help (taints, affinity, cordon). */
  unresolvable: boolean;
}

function containers(pod: KubeObject, list: string): Obj[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return Array.isArray(spec[list]) ? ((spec[list] as unknown[]).filter(isPlainObject) as Obj[]) : [];
}

function requestsOf(c: Obj): Resources {
  const out: Resources = new Map();
  const resources = isPlainObject(c.resources) ? c.resources : {};
  const requests = isPlainObject(resources.requests) ? resources.requests : {};
  const limits = isPlainObject(resources.limits) ? resources.limits : {};
  // A limit without a request is the request (API defaulting), so read both.
  for (const [k, v] of Object.entries({ ...limits, ...requests })) {
    const milli = parseMilli(v);
    if (milli !== undefined && milli > 0) out.set(k, milli);
  }
  return out;
}

/**
 * A pod's effective request: the sum over its containers, or the largest init container when that is more
 * (init containers run one at a time before the others), plus spec.overhead.
 */
export function podRequest(pod: KubeObject): PodRequest {
  const total: Resources = new Map();
  let nonZeroCpu = 0;
  let nonZeroMemory = 0;
  for (const c of containers(pod, 'containers')) {
    const r = requestsOf(c);
    for (const [k, v] of r) total.set(k, (total.get(k) ?? 0) + v);
    nonZeroCpu += r.get('cpu') ?? DEFAULT_MILLI_CPU;
    nonZeroMemory += r.get('memory') ?? DEFAULT_MEMORY_MILLI;
  }
  for (const c of containers(pod, 'initContainers')) {
    for (const [k, v] of requestsOf(c)) if (v > (total.get(k) ?? 0)) total.set(k, v);
  }
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  if (isPlainObject(spec.overhead)) {
    for (const [k, v] of Object.entries(spec.overhead)) {
      const milli = parseMilli(v);
      if (milli) total.set(k, (total.get(k) ?? 0) + milli);
    }
  }
  // In the order NodeResourcesFit reports shortages: cpu, memory, ephemeral-storage, then the others by name.
  const order = (k: string): number => ['cpu', 'memory', 'ephemeral-storage'].indexOf(k) + 1 || 4;
  const sorted: Resources = new Map([...total].sort((a, b) => order(a[0]) - order(b[0]) || a[0].localeCompare(b[0])));
  return { resources: sorted, nonZeroCpu, nonZeroMemory };
}

export function allocatableOf(node: KubeObject): Resources {
  const status = isPlainObject(node.status) ? node.status : {};
  const alloc = isPlainObject(status.allocatable)
    ? status.allocatable
    : isPlainObject(status.capacity)
      ? status.capacity
      : {};
  const out: Resources = new Map();
  for (const [k, v] of Object.entries(alloc)) {
    const milli = parseMilli(v);
    if (milli !== undefined) out.set(k, milli);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// taints, tolerations, node affinity: the rules api/node-fit.ts shares with the DaemonSet controller

/** What the filters read from a pod, extracted once per scheduling attempt rather than once per node. */
export interface PodFilter {
  tolerations: Toleration[];
  tolerates: (taint: Taint) => boolean;
  nodeName: string;
  nodeSelector: Array<[string, string]>;
  /** Required node affinity terms (ORed), or undefined when there are none. */
  requiredTerms?: Obj[];
}

export function podFilter(pod: KubeObject): PodFilter {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const tolerations = tolerationsOf(pod);
  const affinity =
    isPlainObject(spec.affinity) && isPlainObject(spec.affinity.nodeAffinity) ? spec.affinity.nodeAffinity : undefined;
  const required =
    affinity && isPlainObject(affinity.requiredDuringSchedulingIgnoredDuringExecution)
      ? affinity.requiredDuringSchedulingIgnoredDuringExecution
      : undefined;
  return {
    tolerations,
    tolerates: (taint) => tolerations.some((t) => tolerates(t, taint)),
    nodeName: typeof spec.nodeName === 'string' ? spec.nodeName : '',
    nodeSelector: isPlainObject(spec.nodeSelector)
      ? Object.entries(spec.nodeSelector).map(([k, v]) => [k, String(v)])
      : [],
    requiredTerms: required
      ? Array.isArray(required.nodeSelectorTerms)
        ? (required.nodeSelectorTerms.filter(isPlainObject) as Obj[])
        : []
      : undefined,
  };
}

/** nodeSelector and requiredDuringSchedulingIgnoredDuringExecution (terms ORed). */
export function nodeAffinityMatches(pod: KubeObject | PodFilter, node: KubeObject): boolean {
  const f = 'metadata' in pod ? podFilter(pod) : pod;
  const labels = node.metadata.labels ?? {};
  for (const [k, v] of f.nodeSelector) if (labels[k] !== v) return false;
  if (f.requiredTerms && !f.requiredTerms.some((t) => termMatches(t, node))) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------------------
// filters

export const UNSCHEDULABLE_TAINT: Taint = { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' };

/** Runs the filters in the default profile's order; undefined when the pod fits the node. */
export function filterNode(
  pod: KubeObject | PodFilter,
  request: PodRequest,
  state: NodeState,
): FilterFailure | undefined {
  const node = state.node;
  const spec = isPlainObject(node.spec) ? node.spec : {};
  const f = 'metadata' in pod ? podFilter(pod) : pod;
  // NodeUnschedulable
  if (spec.unschedulable === true && !f.tolerates(UNSCHEDULABLE_TAINT))
    return { reasons: ['node(s) were unschedulable'], unresolvable: true };
  // NodeName
  if (f.nodeName !== '' && f.nodeName !== state.name)
    return { reasons: ["node(s) didn't match the requested node name"], unresolvable: true };
  // TaintToleration: NoSchedule and NoExecute taints must be tolerated.
  if (Array.isArray(spec.taints)) {
    const taint = untoleratedTaint(
      nodeTaints(node),
      f.tolerations,
      (t) => t.effect === 'NoSchedule' || t.effect === 'NoExecute',
    );
    if (taint)
      return { reasons: [`node(s) had untolerated taint {${taint.key}: ${taint.value ?? ''}}`], unresolvable: true };
  }
  // NodeAffinity
  if (!nodeAffinityMatches(f, node))
    return { reasons: ["node(s) didn't match Pod's node affinity/selector"], unresolvable: true };
  // NodeResourcesFit
  let reasons: string[] | undefined;
  const maxPods = state.allocatable.get('pods');
  if (maxPods !== undefined && (state.pods + 1) * 1000 > maxPods) reasons = ['Too many pods'];
  for (const [resource, amount] of request.resources) {
    if (resource === 'pods' || amount <= 0) continue;
    const free = (state.allocatable.get(resource) ?? 0) - (state.requested.get(resource) ?? 0);
    if (amount > free) (reasons ??= []).push(`Insufficient ${resource}`);
  }
  return reasons ? { reasons, unresolvable: false } : undefined;
}

/**
 * The scheduler's FitError text: a histogram of reasons over the nodes, then what preemption found, e.g.
 * "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
 */
export function fitErrorMessage(
  totalNodes: number,
  failures: readonly FilterFailure[],
  preemptionPolicy?: string,
): string {
  if (totalNodes === 0) return 'no nodes available to schedule pods';
  const histogram = new Map<string, number>();
  for (const f of failures) for (const r of f.reasons) histogram.set(r, (histogram.get(r) ?? 0) + 1);
  const sorted = [...histogram].map(([reason, n]) => `${n} ${reason}`).sort();
  let message = `0/${totalNodes} nodes are available: ${sorted.join(', ')}.`;
  if (preemptionPolicy === 'Never') return `${message} preemption: not eligible due to preemptionPolicy=Never.`;
  const notHelpful = failures.filter((f) => f.unresolvable).length;
  const noVictims = failures.length - notHelpful;
  const post = [
    noVictims > 0 ? `${noVictims} No preemption victims found for incoming pod` : '',
    notHelpful > 0 ? `${notHelpful} Preemption is not helpful for scheduling` : '',
  ]
    .filter((s) => s)
    .sort();
  message += ` preemption: 0/${totalNodes} nodes are available: ${post.join(', ')}.`;
  return message;
}

/** The FitError message of a pod a PreFilter plugin refused (VolumeBinding's missing or unbound claims). */
export function preFilterMessage(totalNodes: number, reason: string, preemptionPolicy?: string): string {
  if (totalNodes === 0) return 'no nodes available to schedule pods';
  const message = `0/${totalNodes} nodes are available: ${reason}.`;
  if (preemptionPolicy === 'Never') return `${message} preemption: not eligible due to preemptionPolicy=Never.`;
  return `${message} preemption: 0/${totalNodes} nodes are available: ${totalNodes} Preemption is not helpful for scheduling.`;
}

/**
 * How many feasible nodes to look for before scoring (percentageOfNodesToScore's adaptive default):
 * all of them under 100 nodes, else 50% minus 1% per 125 nodes, at least 5% and at least 100 nodes.
 */
export function feasibleNodesToFind(total: number): number {
  if (total < 100) return total;
  const percentage = Math.max(5, 50 - Math.floor(total / 125));
  return Math.max(100, Math.floor((total * percentage) / 100));
}

// ---------------------------------------------------------------------------------------------------------
// scores (each 0..100 before weights)

/** NodeResourcesFit LeastAllocated over cpu and memory: the emptier node scores higher. */
export function leastAllocatedScore(request: PodRequest, state: NodeState): number {
  const part = (alloc: number | undefined, used: number): number =>
    !alloc ? 0 : Math.max(0, ((alloc - used) * 100) / alloc);
  return (
    (part(state.allocatable.get('cpu'), state.nonZeroCpu + request.nonZeroCpu) +
      part(state.allocatable.get('memory'), state.nonZeroMemory + request.nonZeroMemory)) /
    2
  );
}

/** NodeResourcesBalancedAllocation: cpu and memory used in the same proportion scores higher. */
export function balancedAllocationScore(request: PodRequest, state: NodeState): number {
  const cpu = state.allocatable.get('cpu');
  const mem = state.allocatable.get('memory');
  if (!cpu || !mem) return 0;
  const fc = Math.min(1, (state.nonZeroCpu + request.nonZeroCpu) / cpu);
  const fm = Math.min(1, (state.nonZeroMemory + request.nonZeroMemory) / mem);
  return (1 - Math.abs(fc - fm) / 2) * 100;
}

/** The pod's preferred node affinity terms (read once per scheduling attempt, not once per node). */
function preferredTerms(pod: KubeObject): Obj[] {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const affinity =
    isPlainObject(spec.affinity) && isPlainObject(spec.affinity.nodeAffinity) ? spec.affinity.nodeAffinity : undefined;
  return affinity && Array.isArray(affinity.preferredDuringSchedulingIgnoredDuringExecution)
    ? (affinity.preferredDuringSchedulingIgnoredDuringExecution.filter(isPlainObject) as Obj[])
    : [];
}

/** Preferred node affinity: the sum of the weights of the terms the node matches. */
function preferredAffinityRaw(preferred: readonly Obj[], node: KubeObject): number {
  let sum = 0;
  for (const p of preferred)
    if (isPlainObject(p.preference) && termMatches(p.preference, node))
      sum += typeof p.weight === 'number' ? p.weight : 0;
  return sum;
}

/** PreferNoSchedule taints the pod does not tolerate (fewer is better); `tolerations` those that could apply. */
function intolerablePreferNoSchedule(tolerations: readonly Toleration[], node: KubeObject): number {
  let n = 0;
  for (const t of nodeTaints(node))
    if (t.effect === 'PreferNoSchedule' && !tolerations.some((tol) => tolerates(tol, t))) n++;
  return n;
}

export const ZONE_LABEL = 'topology.kubernetes.io/zone';

export interface Candidate {
  state: NodeState;
  /** Pods of the same owner already on the node and in its zone (PodTopologySpread's default constraints). */
  siblingsOnNode: number;
  siblingsInZone: number;
}

/**
 * Scores feasible nodes with the default profile's weights (NodeResourcesFit 1, BalancedAllocation 1,
 * PodTopologySpread 2, NodeAffinity 2, TaintToleration 3) and returns the index of the best, ties broken by
 * `pick(n)` (a seeded random choice among n, as the scheduler samples among equal scores).
 */
export function selectHost(
  pod: KubeObject,
  request: PodRequest,
  candidates: readonly Candidate[],
  pick: (n: number) => number,
): number {
  if (candidates.length === 1) return 0;
  // One pass for the raw scores, one to normalise them: this runs for every pod over up to all nodes.
  // Spreading: hostname maxSkew 3, zone maxSkew 5, both ScheduleAnyway; fewer siblings scores higher.
  const zones = new Set<string>();
  for (const c of candidates) zones.add(c.state.node.metadata.labels?.[ZONE_LABEL] ?? '');
  const wHost = Math.log(candidates.length + 2);
  const wZone = zones.size > 1 ? Math.log(zones.size + 2) : 0;
  const preferred = preferredTerms(pod);
  const tolerations = tolerationsOf(pod).filter(
    (t) => t.effect === undefined || t.effect === '' || t.effect === 'PreferNoSchedule',
  );
  const n = candidates.length;
  const spreadRaw = new Float64Array(n);
  const affinityRaw = new Float64Array(n);
  const taintRaw = new Float64Array(n);
  let maxSpread = -Infinity;
  let minSpread = Infinity;
  let maxAffinity = -Infinity;
  let maxTaint = -Infinity;
  for (let i = 0; i < n; i++) {
    const c = candidates[i]!;
    const spread = c.siblingsOnNode * wHost + c.siblingsInZone * wZone;
    const affinity = preferred.length === 0 ? 0 : preferredAffinityRaw(preferred, c.state.node);
    const taint = intolerablePreferNoSchedule(tolerations, c.state.node);
    spreadRaw[i] = spread;
    affinityRaw[i] = affinity;
    taintRaw[i] = taint;
    if (spread > maxSpread) maxSpread = spread;
    if (spread < minSpread) minSpread = spread;
    if (affinity > maxAffinity) maxAffinity = affinity;
    if (taint > maxTaint) maxTaint = taint;
  }
  let best = -Infinity;
  let ties: number[] = [];
  for (let i = 0; i < n; i++) {
    const c = candidates[i]!;
    const spread = maxSpread === minSpread ? 100 : (100 * (maxSpread - spreadRaw[i]!)) / (maxSpread - minSpread);
    const affinity = maxAffinity > 0 ? (100 * affinityRaw[i]!) / maxAffinity : 0;
    const taint = maxTaint > 0 ? 100 * (1 - taintRaw[i]! / maxTaint) : 100;
    const score = Math.round(
      leastAllocatedScore(request, c.state) +
        balancedAllocationScore(request, c.state) +
        2 * spread +
        2 * affinity +
        3 * taint,
    );
    if (score > best) {
      best = score;
      ties = [i];
    } else if (score === best) ties.push(i);
  }
  return ties[ties.length === 1 ? 0 : pick(ties.length)]!;
}
