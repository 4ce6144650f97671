/** What the views read off Kubernetes objects: a pod's state, a node's conditions, a rollout's bounds. */
import { isPodReady, isTerminating, podNodeName, podPhase } from '../../src/api/pod-util.js';
import { parseMilli } from '../../src/api/quantity.js';
import type { KubeObject } from './api.js';

export type PodState = 'unscheduled' | 'creating' | 'running' | 'ready' | 'terminating' | 'succeeded' | 'failed';

export function podState(pod: KubeObject): PodState {
  if (isTerminating(pod)) return 'terminating';
  const phase = podPhase(pod);
  if (phase === 'Succeeded') return 'succeeded';
  if (phase === 'Failed') return 'failed';
  if (!podNodeName(pod)) return 'unscheduled';
  if (phase === 'Running') return isPodReady(pod) ? 'ready' : 'running';
  return 'creating';
}

export const POD_STATE_TEXT: Record<PodState, string> = {
  unscheduled: 'Pending (not scheduled)',
  creating: 'ContainerCreating',
  running: 'Running, not ready',
  ready: 'Ready',
  terminating: 'Terminating',
  succeeded: 'Succeeded',
  failed: 'Failed',
};

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

export function conditions(obj: KubeObject): Condition[] {
  const list = (obj.status as { conditions?: Condition[] } | undefined)?.conditions;
  return Array.isArray(list) ? list : [];
}

export function condition(obj: KubeObject, type: string): Condition | undefined {
  return conditions(obj).find((c) => c.type === type);
}

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

export interface NodeView {
  ready: 'True' | 'False' | 'Unknown';
  cordoned: boolean;
  /** Taints besides the one cordoning puts on (node.kubernetes.io/unschedulable). */
  taints: Taint[];
}

export function nodeView(node: KubeObject | undefined): NodeView {
  const ready = node ? condition(node, 'Ready')?.status : undefined;
  const spec = (node?.spec ?? {}) as { unschedulable?: boolean; taints?: Taint[] };
  return {
    ready: ready === 'True' || ready === 'False' ? ready : 'Unknown',
    cordoned: spec.unschedulable === true,
    taints: (spec.taints ?? []).filter((t) => t.key !== 'node.kubernetes.io/unschedulable'),
  };
}

/** Milli-units a pod asks for, of one resource (its containers' requests, summed). */
function podRequest(pod: KubeObject, resource: string): number {
  const containers = (pod.spec as { containers?: Array<{ resources?: { requests?: Record<string, string> } }> })
    ?.containers;
  let sum = 0;
  for (const c of containers ?? []) sum += parseMilli(c.resources?.requests?.[resource]) ?? 0;
  return sum;
}

export interface Usage {
  resource: string;
  used: number;
  allocatable: number;
}

/** Requests of the pods that hold a place on the node (not finished), against what the node can allocate. */
export function nodeUsage(node: KubeObject | undefined, pods: KubeObject[]): Usage[] {
  const allocatable = ((node?.status as { allocatable?: Record<string, string> } | undefined)?.allocatable ??
    {}) as Record<string, string>;
  const holding = pods.filter((p) => {
    const phase = podPhase(p);
    return phase !== 'Succeeded' && phase !== 'Failed';
  });
  return ['cpu', 'memory', 'pods'].map((resource) => ({
    resource,
    used: resource === 'pods' ? holding.length * 1000 : holding.reduce((n, p) => n + podRequest(p, resource), 0),
    allocatable: parseMilli(allocatable[resource]) ?? 0,
  }));
}

/** An intOrString of a rolling update against a replica count (intstr.GetScaledValueFromIntOrPercent). */
function scaled(value: number | string | undefined, replicas: number, roundUp: boolean, fallback: string): number {
  const v = value ?? fallback;
  if (typeof v === 'number') return v;
  const pct = /^(\d+)%$/.exec(v);
  if (!pct) return Number(v) || 0;
  const exact = (Number(pct[1]) * replicas) / 100;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

export interface RolloutBounds {
  replicas: number;
  maxSurge: number;
  maxUnavailable: number;
  strategy: string;
}

/** A Deployment's rollout bounds as the deployment controller works them out (deploymentutil.ResolveFenceposts). */
export function rolloutBounds(deployment: KubeObject): RolloutBounds {
  const spec = (deployment.spec ?? {}) as {
    replicas?: number;
    strategy?: { type?: string; rollingUpdate?: { maxSurge?: number | string; maxUnavailable?: number | string } };
  };
  const replicas = spec.replicas ?? 1;
  const strategy = spec.strategy?.type ?? 'RollingUpdate';
  if (strategy !== 'RollingUpdate') return { replicas, maxSurge: 0, maxUnavailable: replicas, strategy };
  const rolling = spec.strategy?.rollingUpdate ?? {};
  const maxSurge = scaled(rolling.maxSurge, replicas, true, '25%');
  let maxUnavailable = scaled(rolling.maxUnavailable, replicas, false, '25%');
  if (maxSurge === 0 && maxUnavailable === 0) maxUnavailable = 1;
  return { replicas, maxSurge, maxUnavailable, strategy };
}

export function revisionOf(obj: KubeObject): number {
  return Number(obj.metadata.annotations?.['deployment.kubernetes.io/revision'] ?? 0);
}

/** A short, stable hue for a name, so that a ReplicaSet's pods share a colour wherever they are. */
export function hueOf(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % 360;
}

export function shortTime(ms: number): string {
  if (!Number.isFinite(ms) || ms === 0) return '';
  return new Date(ms).toISOString().slice(11, 19);
}

/** "3m", "2h", "5d": how long ago, on the cluster clock. */
export function age(since: string | undefined, now: number | undefined): string {
  if (!since || now === undefined) return '';
  const s = Math.max(0, Math.floor((now - Date.parse(since)) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}
