import { rfc3339 } from '../../clock/clock.js';
import { deepEqual, type KubeObject } from '../../api/types.js';
import type { ReplicaSetCondition } from '../replicaset.js';
import { maxUnavailable } from './fenceposts.js';
import {
  deploymentSpec,
  deploymentStatus,
  hasProgressDeadline,
  type DeploymentCondition,
  type DeploymentStatus,
} from './model.js';
import { actualReplicaCount, availableReplicaCount, readyReplicaCount, replicaCount } from './replicasets.js';

/**
 * A Deployment's status and its two conditions (pkg/controller/deployment/progress.go, sync.go's
 * calculateStatus, deploymentutil's condition helpers):
 *
 * - Available: True (MinimumReplicasAvailable) while available ≥ replicas − maxUnavailable, else False
 *   (MinimumReplicasUnavailable).
 * - Progressing: True NewReplicaSetCreated / FoundNewReplicaSet / ReplicaSetUpdated while a rollout moves,
 *   True NewReplicaSetAvailable once it completed, False ProgressDeadlineExceeded when nothing moved for
 *   progressDeadlineSeconds, Unknown DeploymentPaused / DeploymentResumed around a pause.
 */

export const AVAILABLE = 'Available';
export const PROGRESSING = 'Progressing';
export const REPLICA_FAILURE = 'ReplicaFailure';

export const Reasons = {
  replicaSetUpdated: 'ReplicaSetUpdated',
  failedRSCreate: 'ReplicaSetCreateError',
  newReplicaSet: 'NewReplicaSetCreated',
  foundNewRS: 'FoundNewReplicaSet',
  newRSAvailable: 'NewReplicaSetAvailable',
  timedOut: 'ProgressDeadlineExceeded',
  paused: 'DeploymentPaused',
  resumed: 'DeploymentResumed',
  minimumReplicasAvailable: 'MinimumReplicasAvailable',
  minimumReplicasUnavailable: 'MinimumReplicasUnavailable',
} as const;

export function newCondition(
  type: string,
  status: DeploymentCondition['status'],
  reason: string,
  message: string,
  now: number,
): DeploymentCondition {
  const t = rfc3339(now);
  return { type, status, lastUpdateTime: t, lastTransitionTime: t, reason, message };
}

export function getCondition(status: DeploymentStatus, type: string): DeploymentCondition | undefined {
  return status.conditions?.find((c) => c.type === type);
}

/**
 * SetDeploymentCondition: nothing changes when a condition of that type already has this status and reason;
 * otherwise it replaces it (at the end of the list), keeping lastTransitionTime if the status did not change.
 */
export function setCondition(status: DeploymentStatus, condition: DeploymentCondition): void {
  const current = getCondition(status, condition.type);
  if (current && current.status === condition.status && current.reason === condition.reason) return;
  const next =
    current && current.status === condition.status
      ? { ...condition, lastTransitionTime: current.lastTransitionTime }
      : condition;
  status.conditions = [...(status.conditions ?? []).filter((c) => c.type !== condition.type), next];
}

export function removeCondition(status: DeploymentStatus, type: string): void {
  status.conditions = (status.conditions ?? []).filter((c) => c.type !== type);
}

/** Go omits zero counts and empty lists from a DeploymentStatus. */
export function compactStatus(s: DeploymentStatus): DeploymentStatus {
  const out: DeploymentStatus = {};
  for (const k of [
    'observedGeneration',
    'replicas',
    'updatedReplicas',
    'readyReplicas',
    'availableReplicas',
    'unavailableReplicas',
  ] as const) {
    if (s[k]) out[k] = s[k];
  }
  if (s.conditions && s.conditions.length > 0) out.conditions = s.conditions;
  if (s.collisionCount !== undefined) out.collisionCount = s.collisionCount;
  return out;
}

/**
 * calculateStatus: counts from the ReplicaSets (replicas and updated are pods that exist, unavailable is what
 * the ReplicaSets want minus what is available), the conditions carried over from `working`, and Available.
 */
export function calculateStatus(
  d: KubeObject,
  working: DeploymentStatus,
  allRSs: readonly KubeObject[],
  newRS: KubeObject | undefined,
  now: number,
): DeploymentStatus {
  const available = availableReplicaCount(allRSs);
  const status: DeploymentStatus = {
    observedGeneration: d.metadata.generation,
    replicas: actualReplicaCount(allRSs),
    updatedReplicas: actualReplicaCount([newRS]),
    readyReplicas: readyReplicaCount(allRSs),
    availableReplicas: available,
    unavailableReplicas: Math.max(0, replicaCount(allRSs) - available),
    conditions: [...(working.conditions ?? [])],
    collisionCount: working.collisionCount,
  };
  if (available >= deploymentSpec(d).replicas - maxUnavailable(d)) {
    setCondition(
      status,
      newCondition(AVAILABLE, 'True', Reasons.minimumReplicasAvailable, 'Deployment has minimum availability.', now),
    );
  } else {
    setCondition(
      status,
      newCondition(
        AVAILABLE,
        'False',
        Reasons.minimumReplicasUnavailable,
        'Deployment does not have minimum availability.',
        now,
      ),
    );
  }
  return status;
}

/** Every replica updated, existing and available, at the current generation (DeploymentComplete). */
export function deploymentComplete(d: KubeObject, status: DeploymentStatus): boolean {
  const replicas = deploymentSpec(d).replicas;
  return (
    (status.updatedReplicas ?? 0) === replicas &&
    (status.replicas ?? 0) === replicas &&
    (status.availableReplicas ?? 0) === replicas &&
    (status.observedGeneration ?? 0) >= (d.metadata.generation ?? 0)
  );
}

/** Some progress since the stored status: more updated, fewer old, more ready or more available (DeploymentProgressing). */
export function deploymentProgressing(previous: DeploymentStatus, next: DeploymentStatus): boolean {
  const oldOld = (previous.replicas ?? 0) - (previous.updatedReplicas ?? 0);
  const newOld = (next.replicas ?? 0) - (next.updatedReplicas ?? 0);
  return (
    (next.updatedReplicas ?? 0) > (previous.updatedReplicas ?? 0) ||
    newOld < oldOld ||
    (next.readyReplicas ?? 0) > (previous.readyReplicas ?? 0) ||
    (next.availableReplicas ?? 0) > (previous.availableReplicas ?? 0)
  );
}

/** The Progressing condition's last update plus the deadline has passed (DeploymentTimedOut). */
export function deploymentTimedOut(d: KubeObject, status: DeploymentStatus, now: number): boolean {
  if (!hasProgressDeadline(d)) return false;
  const c = getCondition(status, PROGRESSING);
  if (!c || c.reason === Reasons.newRSAvailable) return false;
  if (c.reason === Reasons.timedOut) return true;
  const from = Date.parse(c.lastUpdateTime ?? '');
  return !Number.isNaN(from) && from + deploymentSpec(d).progressDeadlineSeconds! * 1000 < now;
}

/**
 * syncRolloutStatus, as a pure step: the status for a rolling or recreating Deployment, given the status kept so
 * far in this sync (`working`: conditions set by pausing or by finding or creating the new ReplicaSet), and when
 * to look again so a stuck rollout is caught at its deadline.
 *
 * Worked example of the look-again time (requeueStuckDeployment): Progressing last updated 00:00:00, now 00:03:00,
 * progressDeadlineSeconds 600 → look again in 7 min + 1 s, when the deadline has passed for sure.
 */
export function rolloutStatus(
  d: KubeObject,
  working: DeploymentStatus,
  allRSs: readonly KubeObject[],
  newRS: KubeObject | undefined,
  replicaSetFailure: DeploymentCondition | undefined,
  now: number,
): { status: DeploymentStatus; requeueAfterMs?: number } {
  const stored = deploymentStatus(d);
  const status = calculateStatus(d, working, allRSs, newRS, now);
  const deadline = hasProgressDeadline(d);
  if (!deadline) removeCondition(status, PROGRESSING);

  const current = getCondition(working, PROGRESSING);
  const complete = status.replicas === status.updatedReplicas && current?.reason === Reasons.newRSAvailable;
  if (deadline && !complete) {
    const rsName = newRS?.metadata.name;
    if (deploymentComplete(d, status)) {
      const msg = rsName
        ? `ReplicaSet "${rsName}" has successfully progressed.`
        : `Deployment "${d.metadata.name}" has successfully progressed.`;
      setCondition(status, newCondition(PROGRESSING, 'True', Reasons.newRSAvailable, msg, now));
    } else if (deploymentProgressing(stored, status)) {
      const msg = rsName ? `ReplicaSet "${rsName}" is progressing.` : `Deployment "${d.metadata.name}" is progressing.`;
      const condition = newCondition(PROGRESSING, 'True', Reasons.replicaSetUpdated, msg, now);
      // Progress moves lastUpdateTime even when the reason stays the same; lastTransitionTime only moves with the status.
      if (current) {
        if (current.status === 'True') condition.lastTransitionTime = current.lastTransitionTime;
        removeCondition(status, PROGRESSING);
      }
      setCondition(status, condition);
    } else if (deploymentTimedOut(d, status, now)) {
      const msg = rsName
        ? `ReplicaSet "${rsName}" has timed out progressing.`
        : `Deployment "${d.metadata.name}" has timed out progressing.`;
      setCondition(status, newCondition(PROGRESSING, 'False', Reasons.timedOut, msg, now));
    }
  }

  if (replicaSetFailure) setCondition(status, replicaSetFailure);
  else removeCondition(status, REPLICA_FAILURE);

  const result: { status: DeploymentStatus; requeueAfterMs?: number } = { status: compactStatus(status) };
  const wait = stuckRequeueMs(d, status, now);
  if (wait !== undefined) result.requeueAfterMs = wait;
  return result;
}

/** When to check a rollout that has not finished against its deadline (requeueStuckDeployment); undefined: no need. */
export function stuckRequeueMs(d: KubeObject, status: DeploymentStatus, now: number): number | undefined {
  const c = getCondition(status, PROGRESSING);
  if (!hasProgressDeadline(d) || !c) return undefined;
  if (deploymentComplete(d, status) || c.reason === Reasons.timedOut || c.reason === Reasons.newRSAvailable)
    return undefined;
  if (c.status === 'Unknown') return undefined;
  const from = Date.parse(c.lastUpdateTime ?? '');
  if (Number.isNaN(from)) return undefined;
  return Math.max(0, from + deploymentSpec(d).progressDeadlineSeconds! * 1000 - now) + 1000;
}

/** The first ReplicaFailure of the new ReplicaSet, else of any other, as a Deployment condition (getReplicaFailures). */
export function replicaSetFailure(
  newRS: KubeObject | undefined,
  allRSs: readonly KubeObject[],
): DeploymentCondition | undefined {
  const ordered = newRS ? [newRS, ...allRSs.filter((rs) => rs !== newRS)] : allRSs;
  for (const rs of ordered) {
    const conditions = (rs.status as { conditions?: ReplicaSetCondition[] } | undefined)?.conditions ?? [];
    const c = conditions.find((x) => x.type === REPLICA_FAILURE);
    if (c) {
      const out: DeploymentCondition = {
        type: c.type,
        status: c.status as DeploymentCondition['status'],
        lastUpdateTime: c.lastTransitionTime,
        lastTransitionTime: c.lastTransitionTime,
      };
      if (c.reason !== undefined) out.reason = c.reason;
      if (c.message !== undefined) out.message = c.message;
      return out;
    }
  }
  return undefined;
}

/** Whether the status and annotations a sync computed differ from what is stored. */
export function statusChanged(d: KubeObject, status: DeploymentStatus): boolean {
  return !deepEqual(compactStatus(deploymentStatus(d)), compactStatus(status));
}
