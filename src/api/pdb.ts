import { isPlainObject, type KubeObject } from './types.js';

/**
 * PodDisruptionBudget arithmetic shared by the eviction subresource and the disruption controller
 * (k8s.io/component-helpers/apps/poddisruptionbudget): the spec and status as read, the DisruptionAllowed
 * condition, and intstr's scaled values.
 */
export type IntOrString = number | string;

export interface PdbCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

/** PodDisruptionBudgetStatus, its keys in the Go struct's order (so the JSON reads as kube-apiserver's). */
export interface PdbStatus {
  observedGeneration?: number;
  disruptedPods?: Record<string, string>;
  disruptionsAllowed: number;
  currentHealthy: number;
  desiredHealthy: number;
  expectedPods: number;
  conditions?: PdbCondition[];
}

export const DISRUPTION_ALLOWED = 'DisruptionAllowed';
export const SUFFICIENT_PODS = 'SufficientPods';
export const INSUFFICIENT_PODS = 'InsufficientPods';
export const SYNC_FAILED = 'SyncFailed';

export function pdbSpec(pdb: KubeObject): {
  minAvailable?: IntOrString;
  maxUnavailable?: IntOrString;
  selector?: unknown;
  unhealthyPodEvictionPolicy?: string;
} {
  return isPlainObject(pdb.spec) ? (pdb.spec as ReturnType<typeof pdbSpec>) : {};
}

/** The status as stored, every counter present (a status never written reads as zeros, as Go's would). */
export function pdbStatus(pdb: KubeObject): PdbStatus {
  const s = isPlainObject(pdb.status) ? pdb.status : {};
  const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
  const status: PdbStatus = {
    disruptionsAllowed: n(s.disruptionsAllowed),
    currentHealthy: n(s.currentHealthy),
    desiredHealthy: n(s.desiredHealthy),
    expectedPods: n(s.expectedPods),
  };
  if (typeof s.observedGeneration === 'number') status.observedGeneration = s.observedGeneration;
  if (isPlainObject(s.disruptedPods) && Object.keys(s.disruptedPods).length > 0)
    status.disruptedPods = s.disruptedPods as Record<string, string>;
  if (Array.isArray(s.conditions)) status.conditions = s.conditions as PdbCondition[];
  return orderedStatus(status);
}

/** A copy with the keys in PodDisruptionBudgetStatus's order; empty optional fields left out (omitempty). */
export function orderedStatus(s: PdbStatus): PdbStatus {
  const out: PdbStatus = {} as PdbStatus;
  if (s.observedGeneration) out.observedGeneration = s.observedGeneration;
  if (s.disruptedPods && Object.keys(s.disruptedPods).length > 0) out.disruptedPods = s.disruptedPods;
  out.disruptionsAllowed = s.disruptionsAllowed;
  out.currentHealthy = s.currentHealthy;
  out.desiredHealthy = s.desiredHealthy;
  out.expectedPods = s.expectedPods;
  if (s.conditions && s.conditions.length > 0) out.conditions = s.conditions;
  return out;
}

/**
 * apimeta.SetStatusCondition: replaces the condition of the same type, moving lastTransitionTime only when the
 * status changes; returns the new list.
 */
export function setCondition(
  conditions: readonly PdbCondition[] | undefined,
  next: Omit<PdbCondition, 'lastTransitionTime'>,
  now: string,
): PdbCondition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const previous = i >= 0 ? list[i] : undefined;
  const lastTransitionTime = previous && previous.status === next.status ? previous.lastTransitionTime : now;
  // metav1.Condition's key order: type, status, observedGeneration (omitempty), lastTransitionTime, reason, message.
  const condition: PdbCondition = next.observedGeneration
    ? {
        type: next.type,
        status: next.status,
        observedGeneration: next.observedGeneration,
        lastTransitionTime,
        reason: next.reason,
        message: next.message,
      }
    : { type: next.type, status: next.status, lastTransitionTime, reason: next.reason, message: next.message };
  if (i >= 0) list[i] = condition;
  else list.push(condition);
  return list;
}

/** pdbhelper.UpdateDisruptionAllowedCondition: True/SufficientPods while disruptions are allowed, else False/InsufficientPods. */
export function withDisruptionAllowedCondition(status: PdbStatus, now: string): PdbStatus {
  const allowed = status.disruptionsAllowed > 0;
  const conditions = setCondition(
    status.conditions,
    {
      type: DISRUPTION_ALLOWED,
      status: allowed ? 'True' : 'False',
      observedGeneration: status.observedGeneration,
      reason: allowed ? SUFFICIENT_PODS : INSUFFICIENT_PODS,
      message: '',
    },
    now,
  );
  return { ...status, conditions };
}

/** pdbhelper.ConditionsAreUpToDate. */
export function conditionsAreUpToDate(pdb: KubeObject, status: PdbStatus): boolean {
  const cond = status.conditions?.find((c) => c.type === DISRUPTION_ALLOWED);
  if (!cond || (status.observedGeneration ?? 0) !== (pdb.metadata.generation ?? 0)) return false;
  return status.disruptionsAllowed > 0
    ? cond.status === 'True' && cond.reason === SUFFICIENT_PODS
    : cond.status === 'False' && cond.reason === INSUFFICIENT_PODS;
}

/**
 * intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true), with its errors: an integer is itself,
 * "N%" is ceil(N% of total), any other string is refused.
 */
export function scaledIntOrPercent(value: IntOrString, total: number): number {
  if (typeof value === 'number') return value;
  const match = /^(\d+)%$/.exec(value);
  if (!match) throw new Error(`invalid value for IntOrString: invalid type: string is not a percentage`);
  return Math.ceil((Number(match[1]) * total) / 100);
}
