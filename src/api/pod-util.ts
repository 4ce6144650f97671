import { isPlainObject, type KubeObject } from './types.js';

/**
 * Pod state as controllers read it (k8s.io/kubernetes/pkg/api/v1/pod and controller utils): phase, readiness,
 * availability after minReadySeconds, termination. Shared by the workload controllers.
 */

export interface PodCondition {
  type: string;
  status: string;
  lastTransitionTime?: string;
  reason?: string;
  message?: string;
}

export interface ContainerStatus {
  name: string;
  ready?: boolean;
  restartCount?: number;
  state?: {
    running?: unknown;
    waiting?: unknown;
    terminated?: { exitCode?: number; finishedAt?: string; reason?: string };
  };
}

/** Sets (or replaces) a pod condition, moving lastTransitionTime only when the status changes. */
export function setPodCondition(
  status: Record<string, unknown>,
  condition: Record<string, unknown>,
  now: string,
): void {
  const conditions = Array.isArray(status.conditions) ? [...(status.conditions as Array<Record<string, unknown>>)] : [];
  const i = conditions.findIndex((c) => c.type === condition.type);
  const previous = i >= 0 ? conditions[i] : undefined;
  const next: Record<string, unknown> = {
    ...condition,
    lastProbeTime: null,
    lastTransitionTime: previous && previous.status === condition.status ? previous.lastTransitionTime : now,
  };
  if (i >= 0) conditions[i] = next;
  else conditions.push(next);
  status.conditions = conditions;
}

function status(pod: KubeObject): Record<string, unknown> {
  return isPlainObject(pod.status) ? pod.status : {};
}

export function podPhase(pod: KubeObject): string {
  return String(status(pod).phase ?? '');
}

export function podConditions(pod: KubeObject): PodCondition[] {
  const c = status(pod).conditions;
  return Array.isArray(c) ? (c as PodCondition[]) : [];
}

export function podCondition(pod: KubeObject, type: string): PodCondition | undefined {
  return podConditions(pod).find((c) => c.type === type);
}

export function containerStatuses(
  pod: KubeObject,
  which: 'containerStatuses' | 'initContainerStatuses' = 'containerStatuses',
): ContainerStatus[] {
  const c = status(pod)[which];
  return Array.isArray(c) ? (c as ContainerStatus[]) : [];
}

/** spec.nodeName, or '' for a pod not bound yet. */
export function podNodeName(pod: KubeObject): string {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return typeof spec.nodeName === 'string' ? spec.nodeName : '';
}

export function isTerminating(pod: KubeObject): boolean {
  return pod.metadata.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null;
}

export function isTerminal(pod: KubeObject): boolean {
  const phase = podPhase(pod);
  return phase === 'Succeeded' || phase === 'Failed';
}

export function isPodReady(pod: KubeObject): boolean {
  return podCondition(pod, 'Ready')?.status === 'True';
}

export function isRunningAndReady(pod: KubeObject): boolean {
  return podPhase(pod) === 'Running' && isPodReady(pod);
}

/** Ready for at least minReadySeconds (podutil.IsPodAvailable). */
export function isPodAvailable(pod: KubeObject, minReadySeconds: number, now: number): boolean {
  const ready = podCondition(pod, 'Ready');
  if (ready?.status !== 'True') return false;
  if (minReadySeconds <= 0) return true;
  const since = ready.lastTransitionTime ? Date.parse(ready.lastTransitionTime) : NaN;
  return !Number.isNaN(since) && since + minReadySeconds * 1000 <= now;
}

/** Milliseconds until a ready pod becomes available, or undefined when it is not ready (or already available). */
export function msUntilAvailable(pod: KubeObject, minReadySeconds: number, now: number): number | undefined {
  const ready = podCondition(pod, 'Ready');
  if (ready?.status !== 'True' || minReadySeconds <= 0 || !ready.lastTransitionTime) return undefined;
  const left = Date.parse(ready.lastTransitionTime) + minReadySeconds * 1000 - now;
  return left > 0 ? left : undefined;
}

/** Active in the sense of controller.FilterActivePods: not terminal and not being deleted. */
export function isPodActive(pod: KubeObject): boolean {
  return !isTerminal(pod) && !isTerminating(pod);
}

export function creationTime(obj: KubeObject): number {
  return obj.metadata.creationTimestamp ? Date.parse(obj.metadata.creationTimestamp) : 0;
}
