import type { KubeObject } from '../../api/types.js';
import { deploymentStatus } from './model.js';
import { deploymentComplete, replicaSetFailure, rolloutStatus } from './progress.js';
import { actualReplicaCount, filterActive } from './replicasets.js';
import { cleanup, syncRevision, type DeploymentPlan, type Planner } from './sync.js';
import { podPhase } from '../../api/pod-util.js';

/**
 * A Recreate step (pkg/controller/deployment/recreate.go): scale every old ReplicaSet to 0; wait until no old pod
 * is left (terminating ones included: nothing of the old template may run next to the new); only then create or
 * scale up the new ReplicaSet, to the full replicas at once.
 */
export function rolloutRecreate(p: Planner): DeploymentPlan {
  let { newRS, allOld } = syncRevision(p, false);
  let allRSs = [...allOld, ...(newRS ? [newRS] : [])];
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

  let scaledDown = false;
  for (const rs of filterActive(allOld)) if (p.scaleTo(rs, 0).scaled) scaledDown = true;
  if (scaledDown) return finish();
  if (oldPodsRunning(newRS, allOld, p.podsOf)) return finish();

  if (!newRS) {
    ({ newRS, allOld } = syncRevision(p, true));
    allRSs = [...allOld, newRS!];
  }
  p.scaleTo(newRS!, p.replicas);
  if (deploymentComplete(p.d, deploymentStatus(p.d)))
    cleanup(
      p,
      allOld.map((rs) => p.originalOf(rs)),
    );
  return finish();
}

/** Old ReplicaSets still report pods, or any pod of theirs is not finished (oldPodsRunning). */
export function oldPodsRunning(
  newRS: KubeObject | undefined,
  oldRSs: readonly KubeObject[],
  podsOf: (uid: string) => readonly KubeObject[],
): boolean {
  if (actualReplicaCount(oldRSs) > 0) return true;
  for (const rs of oldRSs) {
    if (rs.metadata.uid === newRS?.metadata.uid) continue;
    for (const pod of podsOf(rs.metadata.uid!)) {
      const phase = podPhase(pod);
      if (phase !== 'Failed' && phase !== 'Succeeded') return true;
    }
  }
  return false;
}
