import type { KubeObject } from '../../api/types.js';
import { maxUnavailable } from './fenceposts.js';
import { availableReplicas, deploymentSpec, deploymentStatus, specReplicas } from './model.js';
import { deploymentComplete, replicaSetFailure, rolloutStatus } from './progress.js';
import { availableFloor, byCreation, filterActive, replicaCount } from './replicasets.js';
import { cleanup, newRSNewReplicas, syncRevision, type DeploymentPlan, type Planner } from './sync.js';

/**
 * A RollingUpdate step (pkg/controller/deployment/rolling.go): scale the new ReplicaSet up as far as maxSurge
 * allows; if it could not grow, scale old ReplicaSets down as far as maxUnavailable allows; once the rollout is
 * complete, trim history. Each sync takes one such step; the ReplicaSet writes bring the next sync.
 */
export function rolloutRolling(p: Planner): DeploymentPlan {
  const { newRS, allOld } = syncRevision(p, true);
  const allRSs = [...allOld, newRS!];
  const finish = (): DeploymentPlan => {
    const { status, requeueAfterMs } = rolloutStatus(
      p.d,
      p.status,
      allRSs,
      newRS,
      replicaSetFailure(newRS, allRSs),
      p.now,
    );
    if (requeueAfterMs !== undefined) p.requeueAfterMs = requeueAfterMs;
    return p.plan(status);
  };
  if (reconcileNewReplicaSet(p, allRSs, newRS!)) return finish();
  if (reconcileOldReplicaSets(p, allRSs, filterActive(allOld), newRS!)) return finish();
  if (deploymentComplete(p.d, deploymentStatus(p.d)))
    cleanup(
      p,
      allOld.map((rs) => p.originalOf(rs)),
    );
  return finish();
}

/** Grow the new ReplicaSet within the surge (or shrink it to replicas if it is above). True when it changed. */
export function reconcileNewReplicaSet(p: Planner, allRSs: readonly KubeObject[], newRS: KubeObject): boolean {
  const replicas = p.replicas;
  if (specReplicas(newRS) === replicas) return false;
  if (specReplicas(newRS) > replicas) return p.scaleTo(newRS, replicas).scaled;
  return p.scaleTo(newRS, newRSNewReplicas(p.d, allRSs, newRS)).scaled;
}

/**
 * Shrink old ReplicaSets: first their unavailable pods (they cost no availability), then available ones down to
 * minAvailable. Never more than allPods − minAvailable − (new pods not yet available), so that new pods that
 * never become available cannot drain the old ones.
 *
 * Worked example (from rolling.go): 10 replicas, maxUnavailable 2, maxSurge 3. The new ReplicaSet is at 5, old at
 * 8, and the new pods crash-loop: allPods 13, minAvailable 8, new unavailable 5 → 13 − 8 − 5 = 0, nothing is scaled
 * down even if an old pod fails. Roll back: the old template's ReplicaSet is new again with 1 unavailable →
 * 13 − 8 − 1 = 4 crash-looping pods can go.
 */
export function reconcileOldReplicaSets(
  p: Planner,
  allRSs: readonly KubeObject[],
  oldRSs: readonly KubeObject[],
  newRS: KubeObject,
): boolean {
  if (replicaCount(oldRSs) === 0) return false;
  const minAvailable = p.replicas - maxUnavailable(p.d);
  const newUnavailable = specReplicas(newRS) - availableReplicas(newRS);
  const maxScaledDown = replicaCount(allRSs) - minAvailable - newUnavailable;
  if (maxScaledDown <= 0) return false;
  const cleaned = cleanupUnhealthyReplicas(p, oldRSs, maxScaledDown);
  if (!cleaned) return false;
  const scaledDown = scaleDownForRollingUpdate(p, [...cleaned.oldRSs, newRS], cleaned.oldRSs);
  return cleaned.count + scaledDown > 0;
}

/** Scale old ReplicaSets down by their unavailable pods, oldest first, at most maxCleanup in all. */
function cleanupUnhealthyReplicas(
  p: Planner,
  oldRSs: readonly KubeObject[],
  maxCleanup: number,
): { oldRSs: KubeObject[]; count: number } | undefined {
  const sorted = [...oldRSs].sort(byCreation);
  let total = 0;
  for (let i = 0; i < sorted.length; i++) {
    const rs = sorted[i]!;
    if (total >= maxCleanup) break;
    const replicas = specReplicas(rs);
    if (replicas === 0 || replicas === availableReplicas(rs)) continue;
    const count = Math.min(maxCleanup - total, replicas - availableReplicas(rs));
    // A status reporting more available pods than the spec wants is stale; Kubernetes gives up the step too.
    if (count < 0) return undefined;
    sorted[i] = p.scaleTo(rs, replicas - count).rs;
    total += count;
  }
  return { oldRSs: sorted, count: total };
}

/** Scale old ReplicaSets down, oldest first, by what is available above minAvailable. */
function scaleDownForRollingUpdate(p: Planner, allRSs: readonly KubeObject[], oldRSs: readonly KubeObject[]): number {
  const minAvailable = deploymentSpec(p.d).replicas - maxUnavailable(p.d);
  const available = availableFloor(allRSs);
  if (available <= minAvailable) return 0;
  const toScaleDown = available - minAvailable;
  let total = 0;
  for (const rs of [...oldRSs].sort(byCreation)) {
    if (total >= toScaleDown) break;
    const replicas = specReplicas(rs);
    if (replicas === 0) continue;
    const count = Math.min(replicas, toScaleDown - total);
    p.scaleTo(rs, replicas - count);
    total += count;
  }
  return total;
}
