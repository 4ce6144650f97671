import { isPlainObject, type KubeObject } from '../../api/types.js';

/**
 * Typed reads of the Deployment and ReplicaSet fields the deployment controller works with. Objects come from
 * the informer cache: these never change them.
 */

/** The label (and selector term) that ties a ReplicaSet and its pods to one pod template. */
export const POD_TEMPLATE_HASH = 'pod-template-hash';

export type IntOrString = number | string;

export interface DeploymentCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  lastUpdateTime?: string;
  lastTransitionTime?: string;
  reason?: string;
  message?: string;
}

export interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  unavailableReplicas?: number;
  conditions?: DeploymentCondition[];
  collisionCount?: number;
}

export interface DeploymentSpec {
  replicas: number;
  selector: unknown;
  template: Record<string, unknown>;
  strategy: {
    type: 'RollingUpdate' | 'Recreate';
    rollingUpdate?: { maxSurge?: IntOrString; maxUnavailable?: IntOrString };
  };
  minReadySeconds: number;
  revisionHistoryLimit?: number;
  paused: boolean;
  progressDeadlineSeconds?: number;
}

function specOf(obj: KubeObject): Record<string, unknown> {
  return isPlainObject(obj.spec) ? obj.spec : {};
}

export function deploymentSpec(d: KubeObject): DeploymentSpec {
  const s = specOf(d);
  const strategy = isPlainObject(s.strategy)
    ? (s.strategy as DeploymentSpec['strategy'])
    : { type: 'RollingUpdate' as const };
  const out: DeploymentSpec = {
    replicas: typeof s.replicas === 'number' ? s.replicas : 1,
    selector: s.selector,
    template: isPlainObject(s.template) ? s.template : {},
    strategy: { ...strategy, type: strategy.type === 'Recreate' ? 'Recreate' : 'RollingUpdate' },
    minReadySeconds: typeof s.minReadySeconds === 'number' ? s.minReadySeconds : 0,
    paused: s.paused === true,
  };
  if (typeof s.revisionHistoryLimit === 'number') out.revisionHistoryLimit = s.revisionHistoryLimit;
  if (typeof s.progressDeadlineSeconds === 'number') out.progressDeadlineSeconds = s.progressDeadlineSeconds;
  return out;
}

export function deploymentStatus(d: KubeObject): DeploymentStatus {
  return isPlainObject(d.status) ? (d.status as DeploymentStatus) : {};
}

/** A ReplicaSet's spec.replicas (1 when unset, as defaulting makes it). */
export function specReplicas(rs: KubeObject): number {
  const r = specOf(rs).replicas;
  return typeof r === 'number' ? r : 1;
}

function statusNumber(rs: KubeObject, field: string): number {
  const s = isPlainObject(rs.status) ? rs.status : {};
  const v = s[field];
  return typeof v === 'number' ? v : 0;
}

export const statusReplicas = (rs: KubeObject): number => statusNumber(rs, 'replicas');
export const readyReplicas = (rs: KubeObject): number => statusNumber(rs, 'readyReplicas');
export const availableReplicas = (rs: KubeObject): number => statusNumber(rs, 'availableReplicas');
export const observedGeneration = (rs: KubeObject): number => statusNumber(rs, 'observedGeneration');

export function templateOf(obj: KubeObject): Record<string, unknown> {
  const t = specOf(obj).template;
  return isPlainObject(t) ? t : {};
}

/** spec.progressDeadlineSeconds is set and not "no deadline" (MaxInt32). */
export function hasProgressDeadline(d: KubeObject): boolean {
  const s = deploymentSpec(d);
  return s.progressDeadlineSeconds !== undefined && s.progressDeadlineSeconds !== 2147483647;
}

export function isRollingUpdate(d: KubeObject): boolean {
  return deploymentSpec(d).strategy.type === 'RollingUpdate';
}
