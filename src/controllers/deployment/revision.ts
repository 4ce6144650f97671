import { LAST_APPLIED } from '../../api/last-applied.js';
import type { KubeObject } from '../../api/types.js';
import { maxSurge } from './fenceposts.js';
import { deploymentSpec } from './model.js';

/**
 * The annotations a Deployment keeps on its ReplicaSets (deploymentutil): the revision each one rolled out as,
 * the revisions it rolled out as before (a rollback reuses a ReplicaSet), and the replicas and
 * replicas+maxSurge the Deployment had when it last sized it (what proportional scaling starts from).
 */
export const REVISION = 'deployment.kubernetes.io/revision';
export const REVISION_HISTORY = 'deployment.kubernetes.io/revision-history';
export const DESIRED_REPLICAS = 'deployment.kubernetes.io/desired-replicas';
export const MAX_REPLICAS = 'deployment.kubernetes.io/max-replicas';
export const ROLLBACK_TO = 'deprecated.deployment.rollback.to';
/** How long the revision-history annotation may grow (kube-controller-manager's default). */
export const MAX_REVISION_HISTORY_CHARS = 2000;

/** Deployment annotations that are not copied to its ReplicaSets (and not restored by a rollback). */
export const SKIPPED_ANNOTATIONS: ReadonlySet<string> = new Set([
  LAST_APPLIED,
  REVISION,
  REVISION_HISTORY,
  DESIRED_REPLICAS,
  MAX_REPLICAS,
  ROLLBACK_TO,
]);

/** The revision a ReplicaSet rolled out as: 0 when it has none, undefined when the annotation is not a number. */
export function revisionOf(obj: KubeObject): number | undefined {
  const v = obj.metadata.annotations?.[REVISION];
  if (v === undefined) return 0;
  return /^[+-]?\d+$/.test(v) ? Number(v) : undefined;
}

export function maxRevision(replicaSets: readonly KubeObject[]): number {
  let max = 0;
  for (const rs of replicaSets) max = Math.max(max, revisionOf(rs) ?? 0);
  return max;
}

function intAnnotation(obj: KubeObject, key: string): number | undefined {
  const v = obj.metadata.annotations?.[key];
  return v !== undefined && /^[+-]?\d+$/.test(v) ? Number(v) : undefined;
}

export const desiredReplicasAnnotation = (rs: KubeObject): number | undefined => intAnnotation(rs, DESIRED_REPLICAS);
export const maxReplicasAnnotation = (rs: KubeObject): number | undefined => intAnnotation(rs, MAX_REPLICAS);

/** Sets desired-replicas and max-replicas; true when either changed. */
export function setReplicasAnnotations(annotations: Record<string, string>, desired: number, max: number): boolean {
  let changed = false;
  if (annotations[DESIRED_REPLICAS] !== String(desired)) {
    annotations[DESIRED_REPLICAS] = String(desired);
    changed = true;
  }
  if (annotations[MAX_REPLICAS] !== String(max)) {
    annotations[MAX_REPLICAS] = String(max);
    changed = true;
  }
  return changed;
}

export function replicasAnnotationsNeedUpdate(rs: KubeObject, desired: number, max: number): boolean {
  const a = rs.metadata.annotations ?? {};
  return a[DESIRED_REPLICAS] !== String(desired) || a[MAX_REPLICAS] !== String(max);
}

/**
 * SetNewReplicaSetAnnotations, on a copy of the new ReplicaSet's annotations: copy the Deployment's own
 * annotations (change-cause and the like), raise the revision to `newRevision` if it is lower — keeping the
 * revisions it had in revision-history when it had one (a rollback) — and, for a ReplicaSet about to be
 * created, record the replicas annotations. True when anything changed.
 *
 * Example: revisions 1 (v1) and 2 (v2); undo to v1 finds the revision-1 ReplicaSet, newRevision is 3: it becomes
 * revision 3 with revision-history "1", and `kubectl rollout history` lists 2 and 3.
 */
export function setNewReplicaSetAnnotations(
  d: KubeObject,
  annotations: Record<string, string>,
  newRevision: number,
  exists: boolean,
): boolean {
  let changed = copyDeploymentAnnotations(d, annotations);
  const oldText = annotations[REVISION];
  const oldRevision = oldText === undefined ? 0 : /^[+-]?\d+$/.test(oldText) ? Number(oldText) : undefined;
  if (oldRevision === undefined) return false;
  if (oldRevision < newRevision) {
    annotations[REVISION] = String(newRevision);
    changed = true;
    if (oldText !== undefined) {
      const history = annotations[REVISION_HISTORY] ?? '';
      if (history === '') annotations[REVISION_HISTORY] = oldText;
      else {
        const old = history.split(',');
        let total = history.length + oldText.length + 1;
        let start = 0;
        while (total > MAX_REVISION_HISTORY_CHARS && start < old.length) total -= old[start++]!.length + 1;
        if (total <= MAX_REVISION_HISTORY_CHARS)
          annotations[REVISION_HISTORY] = [...old.slice(start), oldText].join(',');
      }
    }
  }
  if (!exists) {
    const replicas = deploymentSpec(d).replicas;
    if (setReplicasAnnotations(annotations, replicas, replicas + maxSurge(d))) changed = true;
  }
  return changed;
}

function copyDeploymentAnnotations(d: KubeObject, annotations: Record<string, string>): boolean {
  let changed = false;
  for (const [k, v] of Object.entries(d.metadata.annotations ?? {})) {
    if (SKIPPED_ANNOTATIONS.has(k) || annotations[k] === v) continue;
    annotations[k] = v;
    changed = true;
  }
  return changed;
}
