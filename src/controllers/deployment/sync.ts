import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { newControllerRef } from '../controller-ref.js';
import { maxSurge } from './fenceposts.js';
import { computeHash } from './hash.js';
import {
  deploymentSpec,
  deploymentStatus,
  hasProgressDeadline,
  isRollingUpdate,
  observedGeneration,
  POD_TEMPLATE_HASH,
  specReplicas,
  statusReplicas,
  type DeploymentStatus,
} from './model.js';
import {
  calculateStatus,
  compactStatus,
  getCondition,
  newCondition,
  PROGRESSING,
  Reasons,
  setCondition,
} from './progress.js';
import {
  bySizeNewer,
  bySizeOlder,
  byCreation,
  byRevision,
  filterActive,
  findNewReplicaSet,
  findOldReplicaSets,
  podCeiling,
  replicaCount,
} from './replicasets.js';
import {
  desiredReplicasAnnotation,
  maxReplicasAnnotation,
  maxRevision,
  REVISION,
  replicasAnnotationsNeedUpdate,
  setNewReplicaSetAnnotations,
  setReplicasAnnotations,
} from './revision.js';

/**
 * One sync of a Deployment as a plan (pkg/controller/deployment/sync.go): from the Deployment and the
 * ReplicaSets it owns, decide the ReplicaSet to create, the ReplicaSets to resize or re-annotate, the old ones
 * to delete for revisionHistoryLimit, and the Deployment's new status and revision annotation — then the
 * controller writes each once. Kubernetes writes as it goes (and often writes status twice); the decisions here
 * are the same.
 */

export interface PlannedEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface ReplicaSetWrite {
  rs: KubeObject;
  /** Recorded on the Deployment once the write succeeded. */
  events: PlannedEvent[];
}

export interface DeploymentPlan {
  /** The new ReplicaSet, when the current template has none yet. */
  create?: ReplicaSetWrite;
  /** ReplicaSets to update (replicas, annotations, minReadySeconds), as whole objects carrying their resourceVersion. */
  updates: ReplicaSetWrite[];
  /** Old ReplicaSets beyond revisionHistoryLimit, scaled to 0 and settled. */
  deletes: KubeObject[];
  /** The Deployment with its new status and annotations, for a /status write; absent when nothing changed. */
  deployment?: KubeObject;
  /** Look again then (a rollout's progress deadline). */
  requeueAfterMs?: number;
}

export interface DeploymentInput {
  deployment: KubeObject;
  /** The ReplicaSets this Deployment controls. */
  replicaSets: readonly KubeObject[];
  /** Pods a ReplicaSet controls (Recreate waits for old pods to be gone). */
  podsOf(replicaSetUid: string): readonly KubeObject[];
  now: number;
}

/** Working state of one sync: copies of what changes, the writes so far. */
export class Planner {
  readonly d: KubeObject;
  readonly now: number;
  readonly podsOf: (uid: string) => readonly KubeObject[];
  /** The ReplicaSets as this sync leaves them (a written one replaced by its new version). */
  replicaSets: KubeObject[];
  /** The ReplicaSets as the cache has them. */
  readonly original: readonly KubeObject[];
  readonly status: DeploymentStatus;
  readonly annotations: Record<string, string>;
  create?: ReplicaSetWrite;
  private readonly updates = new Map<string, ReplicaSetWrite>();
  readonly deletes: KubeObject[] = [];
  requeueAfterMs?: number;

  constructor(input: DeploymentInput) {
    this.d = input.deployment;
    this.now = input.now;
    this.podsOf = input.podsOf;
    this.original = input.replicaSets;
    this.replicaSets = [...input.replicaSets];
    this.status = deepCopy(deploymentStatus(input.deployment));
    this.annotations = { ...(input.deployment.metadata.annotations ?? {}) };
  }

  get replicas(): number {
    return deploymentSpec(this.d).replicas;
  }

  /** The cache's version of a ReplicaSet (what Kubernetes' sync still holds after writing a copy). */
  originalOf(rs: KubeObject): KubeObject {
    return this.original.find((o) => o.metadata.uid === rs.metadata.uid) ?? rs;
  }

  /** Records a ReplicaSet write (merging with an earlier one in this sync) and returns the new version. */
  write(rs: KubeObject, event?: PlannedEvent): KubeObject {
    if (this.create && rs.metadata.name === this.create.rs.metadata.name) {
      this.create = { rs, events: event ? [...this.create.events, event] : this.create.events };
    } else {
      const earlier = this.updates.get(rs.metadata.name!);
      this.updates.set(rs.metadata.name!, { rs, events: [...(earlier?.events ?? []), ...(event ? [event] : [])] });
    }
    this.replicaSets = this.replicaSets.map((x) => (x.metadata.name === rs.metadata.name ? rs : x));
    return rs;
  }

  /**
   * scaleReplicaSet: set replicas (and the desired/max-replicas annotations) when either differs; a size change
   * records the ScalingReplicaSet event.
   */
  scale(rs: KubeObject, newScale: number): { scaled: boolean; rs: KubeObject } {
    const sizeChanges = specReplicas(rs) !== newScale;
    const max = this.replicas + maxSurge(this.d);
    if (!sizeChanges && !replicasAnnotationsNeedUpdate(rs, this.replicas, max)) return { scaled: false, rs };
    const copy = withSpec(rs, { replicas: newScale });
    const annotations = { ...(copy.metadata.annotations ?? {}) };
    setReplicasAnnotations(annotations, this.replicas, max);
    copy.metadata = { ...copy.metadata, annotations };
    const old = specReplicas(rs);
    const event: PlannedEvent | undefined = sizeChanges
      ? {
          type: 'Normal',
          reason: 'ScalingReplicaSet',
          message: `Scaled ${old < newScale ? 'up' : 'down'} replica set ${rs.metadata.name} from ${old} to ${newScale}`,
        }
      : undefined;
    return { scaled: sizeChanges, rs: this.write(copy, event) };
  }

  /** scaleReplicaSetAndRecordEvent: only when the size changes. */
  scaleTo(rs: KubeObject, newScale: number): { scaled: boolean; rs: KubeObject } {
    if (specReplicas(rs) === newScale) return { scaled: false, rs };
    return this.scale(rs, newScale);
  }

  plan(status: DeploymentStatus | undefined): DeploymentPlan {
    const plan: DeploymentPlan = { updates: [...this.updates.values()], deletes: this.deletes };
    if (this.create) plan.create = this.create;
    const next = compactStatus(status ?? this.status);
    const stored = compactStatus(deploymentStatus(this.d));
    const annotationsChanged = !deepEqual(this.annotations, this.d.metadata.annotations ?? {});
    if (annotationsChanged || !deepEqual(stored, next)) {
      const metadata = { ...this.d.metadata };
      if (Object.keys(this.annotations).length > 0) metadata.annotations = this.annotations;
      else delete metadata.annotations;
      plan.deployment = { ...this.d, metadata, status: next };
    }
    if (this.requeueAfterMs !== undefined) plan.requeueAfterMs = this.requeueAfterMs;
    return plan;
  }
}

function withSpec(rs: KubeObject, fields: Record<string, unknown>): KubeObject {
  return { ...rs, metadata: { ...rs.metadata }, spec: { ...(isPlainObject(rs.spec) ? rs.spec : {}), ...fields } };
}

/**
 * NewRSNewReplicas: how big the new ReplicaSet may be now. Rolling: up to replicas + maxSurge pods in all, never
 * above replicas. Recreate: replicas (the old ones are gone by then).
 *
 * Worked example: 10 replicas, maxSurge 3, old ReplicaSet at 10, new at 0 → room for 13 − 10 = 3: new goes to 3.
 * Once the old one is down to 8: 13 − 11 = 2 more, new goes to 5.
 */
export function newRSNewReplicas(d: KubeObject, allRSs: readonly KubeObject[], newRS: KubeObject): number {
  const replicas = deploymentSpec(d).replicas;
  if (!isRollingUpdate(d)) return replicas;
  const maxTotal = replicas + maxSurge(d);
  const current = podCeiling(allRSs);
  if (current >= maxTotal) return specReplicas(newRS);
  const up = Math.min(maxTotal - current, replicas - specReplicas(newRS));
  return specReplicas(newRS) + Math.max(0, up);
}

/**
 * getAllReplicaSetsAndSyncRevision: the new ReplicaSet (found, or planned for creation when `create`) with its
 * revision brought up to date, and every old one. The Deployment's revision annotation follows the new one.
 */
export function syncRevision(p: Planner, create: boolean): { newRS: KubeObject | undefined; allOld: KubeObject[] } {
  const template = deploymentSpec(p.d).template;
  const existing = findNewReplicaSet(template, p.replicaSets);
  const { all: allOld } = findOldReplicaSets(existing, p.replicaSets);
  const newRevision = maxRevision(allOld) + 1;
  const spec = deploymentSpec(p.d);

  if (existing) {
    let rs = existing;
    const annotations = { ...(rs.metadata.annotations ?? {}) };
    const annotationsChanged = setNewReplicaSetAnnotations(p.d, annotations, newRevision, true);
    const minReadyChanged =
      ((rs.spec as { minReadySeconds?: number } | undefined)?.minReadySeconds ?? 0) !== spec.minReadySeconds;
    if (annotationsChanged || minReadyChanged) {
      const copy = withSpec(rs, { minReadySeconds: spec.minReadySeconds });
      copy.metadata.annotations = annotations;
      rs = p.write(copy);
    }
    const revision = rs.metadata.annotations?.[REVISION];
    if (revision !== undefined) p.annotations[REVISION] = revision;
    if (hasProgressDeadline(p.d) && !getCondition(p.status, PROGRESSING)) {
      setCondition(
        p.status,
        newCondition(PROGRESSING, 'True', Reasons.foundNewRS, `Found new replica set "${rs.metadata.name}"`, p.now),
      );
    }
    return { newRS: rs, allOld };
  }
  if (!create) return { newRS: undefined, allOld };

  const hash = computeHash(template, p.status.collisionCount);
  const podTemplate = deepCopy(template);
  const meta = isPlainObject(podTemplate.metadata) ? podTemplate.metadata : (podTemplate.metadata = {});
  const labels = { ...((meta as { labels?: Record<string, string> }).labels ?? {}), [POD_TEMPLATE_HASH]: hash };
  (meta as { labels?: Record<string, string> }).labels = labels;
  const selector = deepCopy(isPlainObject(spec.selector) ? spec.selector : {});
  selector.matchLabels = {
    ...((selector.matchLabels as Record<string, string> | undefined) ?? {}),
    [POD_TEMPLATE_HASH]: hash,
  };
  const rs: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    metadata: {
      name: `${p.d.metadata.name}-${hash}`,
      namespace: p.d.metadata.namespace,
      labels: { ...labels },
      ownerReferences: [newControllerRef(p.d, 'apps/v1', 'Deployment')],
    },
    spec: { replicas: 0, minReadySeconds: spec.minReadySeconds, selector, template: podTemplate },
  };
  const replicas = newRSNewReplicas(p.d, [...allOld, rs], rs);
  (rs.spec as { replicas: number }).replicas = replicas;
  const annotations: Record<string, string> = {};
  setNewReplicaSetAnnotations(p.d, annotations, newRevision, false);
  rs.metadata.annotations = annotations;
  const events: PlannedEvent[] =
    replicas > 0
      ? [
          {
            type: 'Normal',
            reason: 'ScalingReplicaSet',
            message: `Scaled up replica set ${rs.metadata.name} from 0 to ${replicas}`,
          },
        ]
      : [];
  p.create = { rs, events };
  p.replicaSets = [...p.replicaSets, rs];
  p.annotations[REVISION] = String(newRevision);
  if (hasProgressDeadline(p.d)) {
    setCondition(
      p.status,
      newCondition(PROGRESSING, 'True', Reasons.newReplicaSet, `Created new replica set "${rs.metadata.name}"`, p.now),
    );
  }
  return { newRS: rs, allOld };
}

/**
 * checkPausedConditions: a pause (and the resume after it) shows as Progressing Unknown, so that time paused
 * never counts against the progress deadline. A deadline already exceeded stays reported.
 */
export function syncPausedCondition(p: Planner): void {
  if (!hasProgressDeadline(p.d)) return;
  const c = getCondition(p.status, PROGRESSING);
  if (c?.reason === Reasons.timedOut) return;
  const pausedShown = c?.reason === Reasons.paused;
  const paused = deploymentSpec(p.d).paused;
  if (paused && !pausedShown)
    setCondition(p.status, newCondition(PROGRESSING, 'Unknown', Reasons.paused, 'Deployment is paused', p.now));
  else if (!paused && pausedShown)
    setCondition(p.status, newCondition(PROGRESSING, 'Unknown', Reasons.resumed, 'Deployment is resumed', p.now));
}

/** isScalingEvent: an active ReplicaSet was sized for a different spec.replicas than the Deployment has now. */
export function isScalingEvent(p: Planner): boolean {
  const { newRS, allOld } = syncRevision(p, false);
  for (const rs of filterActive([...allOld, newRS])) {
    const desired = desiredReplicasAnnotation(rs);
    if (desired !== undefined && desired !== p.replicas) return true;
  }
  return false;
}

/**
 * scale: fit the ReplicaSets to a new spec.replicas. One active ReplicaSet (or none: the newest) takes it all; a
 * saturated new one means the old ones go to 0; otherwise, during a rolling update, the difference is spread over
 * the active ReplicaSets in proportion to their size, leftovers to the largest.
 *
 * Worked example: replicas 10 → 15, maxSurge 3 (max 13 → 18), mid-rollout old 8 and new 5 (both annotated
 * max-replicas 13). Room: 18 − 13 = 5. Sorted larger first: old 8 → 8·18/13 = 11.08 → 11 (+3), new 5 → 5·18/13
 * = 6.92 → 7 (+2). Total added 5: nothing left over. Old 11, new 7.
 */
export function proportionalScale(p: Planner, newRS: KubeObject | undefined, oldRSs: readonly KubeObject[]): void {
  const activeOrLatest = findActiveOrLatest(newRS, oldRSs);
  if (activeOrLatest) {
    if (specReplicas(activeOrLatest) !== p.replicas) p.scaleTo(activeOrLatest, p.replicas);
    return;
  }
  if (isSaturated(p.d, newRS)) {
    for (const old of filterActive(oldRSs)) p.scaleTo(old, 0);
    return;
  }
  if (!isRollingUpdate(p.d)) return;
  const all = filterActive([...oldRSs, newRS]);
  const allowed = p.replicas > 0 ? p.replicas + maxSurge(p.d) : 0;
  const toAdd = allowed - replicaCount(all);
  if (toAdd > 0) all.sort(bySizeNewer);
  else if (toAdd < 0) all.sort(bySizeOlder);
  let added = 0;
  const sizes = new Map<string, number>();
  for (const rs of all) {
    if (toAdd !== 0) {
      const proportion = getProportion(rs, p.d, toAdd, added);
      sizes.set(rs.metadata.name!, specReplicas(rs) + proportion);
      added += proportion;
    } else sizes.set(rs.metadata.name!, specReplicas(rs));
  }
  all.forEach((rs, i) => {
    let size = sizes.get(rs.metadata.name!)!;
    if (i === 0 && toAdd !== 0) size = Math.max(0, size + toAdd - added);
    p.scale(rs, size);
  });
}

/** The only active ReplicaSet, or the newest when none is active; undefined when several are active. */
export function findActiveOrLatest(
  newRS: KubeObject | undefined,
  oldRSs: readonly KubeObject[],
): KubeObject | undefined {
  if (!newRS && oldRSs.length === 0) return undefined;
  const sortedOld = [...oldRSs].sort((a, b) => byCreation(b, a));
  const active = filterActive([...sortedOld, newRS]);
  if (active.length === 0) return newRS ?? sortedOld[0];
  return active.length === 1 ? active[0] : undefined;
}

/** The new ReplicaSet runs every replica, sized for this spec, all of them available (IsSaturated). */
export function isSaturated(d: KubeObject, rs: KubeObject | undefined): boolean {
  if (!rs) return false;
  const replicas = deploymentSpec(d).replicas;
  const desired = desiredReplicasAnnotation(rs);
  const available = (rs.status as { availableReplicas?: number } | undefined)?.availableReplicas ?? 0;
  return specReplicas(rs) === replicas && desired === replicas && available === replicas;
}

/** GetProportion: this ReplicaSet's share of the replicas to add (or remove), bounded by what is left to hand out. */
export function getProportion(rs: KubeObject, d: KubeObject, toAdd: number, added: number): number {
  if (specReplicas(rs) === 0 || toAdd === 0 || toAdd === added) return 0;
  const fraction = replicaSetFraction(rs, d);
  const allowed = toAdd - added;
  return toAdd > 0 ? Math.min(fraction, allowed) : Math.max(fraction, allowed);
}

function replicaSetFraction(rs: KubeObject, d: KubeObject): number {
  const replicas = deploymentSpec(d).replicas;
  if (replicas === 0) return -specReplicas(rs);
  const maxReplicas = replicas + maxSurge(d);
  let before = maxReplicasAnnotation(rs);
  if (before === undefined || before === 0) before = deploymentStatus(d).replicas ?? 0;
  if (before === 0) return 0;
  return roundHalfAway((specReplicas(rs) * maxReplicas) / before) - specReplicas(rs);
}

/** integer.RoundToInt32: halves away from zero. */
function roundHalfAway(x: number): number {
  return x < 0 ? Math.trunc(x - 0.5) : Math.trunc(x + 0.5);
}

/**
 * cleanupDeployment: with revisionHistoryLimit N, delete the oldest revisions beyond N among old ReplicaSets that
 * are scaled to 0, have no pods, and whose controller has seen their latest spec.
 */
export function cleanup(p: Planner, oldRSs: readonly KubeObject[]): void {
  const limit = deploymentSpec(p.d).revisionHistoryLimit;
  if (limit === undefined) return;
  const cleanable = oldRSs.filter((rs) => rs.metadata.deletionTimestamp === undefined);
  const diff = cleanable.length - limit;
  if (diff <= 0) return;
  const sorted = [...cleanable].sort(byRevision);
  for (let i = 0; i < diff; i++) {
    const rs = sorted[i]!;
    if (statusReplicas(rs) !== 0 || specReplicas(rs) !== 0 || (rs.metadata.generation ?? 0) > observedGeneration(rs))
      continue;
    p.deletes.push(rs);
  }
}

/** sync: scaling events and paused Deployments resize without rolling; status without Progressing changes. */
export function syncScale(p: Planner): DeploymentPlan {
  const { newRS, allOld } = syncRevision(p, false);
  proportionalScale(p, newRS, allOld);
  if (deploymentSpec(p.d).paused)
    cleanup(
      p,
      allOld.map((rs) => p.originalOf(rs)),
    );
  return p.plan(calculateStatus(p.d, p.status, [...allOld, ...(newRS ? [newRS] : [])], newRS, p.now));
}

/** syncStatusOnly: a Deployment being deleted only reports. */
export function syncStatusOnly(p: Planner): DeploymentPlan {
  const { newRS, allOld } = syncRevision(p, false);
  return p.plan(calculateStatus(p.d, p.status, [...allOld, ...(newRS ? [newRS] : [])], newRS, p.now));
}
