import { isPlainObject, type KubeObject } from '../../api/types.js';
import { revisionOf } from './revision.js';
import {
  availableReplicas,
  POD_TEMPLATE_HASH,
  readyReplicas,
  specReplicas,
  statusReplicas,
  templateOf,
} from './model.js';

/** How a Deployment sorts, finds and counts its ReplicaSets (deploymentutil and controller_utils). */

/**
 * Two pod templates are the same rollout when they are equal but for the pod-template-hash label (EqualIgnoreHash),
 * compared semantically: an empty map or list is the same as none.
 */
export function equalIgnoreHash(a: unknown, b: unknown): boolean {
  return semanticEqual(withoutHash(a), withoutHash(b));
}

function withoutHash(template: unknown): unknown {
  if (!isPlainObject(template)) return template;
  const meta = isPlainObject(template.metadata) ? template.metadata : {};
  if (!isPlainObject(meta.labels) || !(POD_TEMPLATE_HASH in meta.labels)) return template;
  const { [POD_TEMPLATE_HASH]: _hash, ...labels } = meta.labels as Record<string, string>;
  return { ...template, metadata: { ...meta, labels } };
}

function isEmpty(v: unknown): boolean {
  return (
    v === undefined ||
    v === null ||
    (Array.isArray(v) && v.length === 0) ||
    (isPlainObject(v) && Object.keys(v).every((k) => isEmpty(v[k])))
  );
}

/** Deep equality where null, empty lists and empty maps equal absence (apiequality.Semantic on JSON). */
export function semanticEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (isEmpty(a) && isEmpty(b)) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => semanticEqual(x, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) if (!semanticEqual(a[k], b[k])) return false;
    return true;
  }
  return false;
}

function created(rs: KubeObject): string {
  return rs.metadata.creationTimestamp ?? '';
}

/** ReplicaSetsByCreationTimestamp: oldest first, then by name. */
export function byCreation(a: KubeObject, b: KubeObject): number {
  const x = created(a);
  const y = created(b);
  if (x !== y) return x < y ? -1 : 1;
  return (a.metadata.name ?? '') < (b.metadata.name ?? '')
    ? -1
    : (a.metadata.name ?? '') > (b.metadata.name ?? '')
      ? 1
      : 0;
}

/** ReplicaSetsBySizeOlder: larger first, then older first (scaling down takes from old ones first). */
export function bySizeOlder(a: KubeObject, b: KubeObject): number {
  return specReplicas(b) - specReplicas(a) || byCreation(a, b);
}

/** ReplicaSetsBySizeNewer: larger first, then newer first (scaling up gives to new ones first). */
export function bySizeNewer(a: KubeObject, b: KubeObject): number {
  return specReplicas(b) - specReplicas(a) || byCreation(b, a);
}

/** ReplicaSetsByRevision: lowest revision first, then oldest. */
export function byRevision(a: KubeObject, b: KubeObject): number {
  return (revisionOf(a) ?? 0) - (revisionOf(b) ?? 0) || byCreation(a, b);
}

/** The ReplicaSet running the Deployment's current template: the oldest one equal to it, if any. */
export function findNewReplicaSet(template: unknown, replicaSets: readonly KubeObject[]): KubeObject | undefined {
  return [...replicaSets].sort(byCreation).find((rs) => equalIgnoreHash(templateOf(rs), template));
}

/** Every ReplicaSet but the new one: `active` those with replicas, `all` of them. */
export function findOldReplicaSets(
  newRS: KubeObject | undefined,
  replicaSets: readonly KubeObject[],
): { active: KubeObject[]; all: KubeObject[] } {
  const all = replicaSets.filter((rs) => rs.metadata.uid !== newRS?.metadata.uid);
  return { active: all.filter((rs) => specReplicas(rs) !== 0), all };
}

export function filterActive(replicaSets: ReadonlyArray<KubeObject | undefined>): KubeObject[] {
  return replicaSets.filter((rs): rs is KubeObject => rs !== undefined && specReplicas(rs) > 0);
}

const sum = (rss: ReadonlyArray<KubeObject | undefined>, f: (rs: KubeObject) => number): number =>
  rss.reduce((n, rs) => n + (rs ? f(rs) : 0), 0);

/** Σ spec.replicas. */
export const replicaCount = (rss: ReadonlyArray<KubeObject | undefined>): number => sum(rss, specReplicas);
/** Σ status.replicas: pods that exist and are not terminating. */
export const actualReplicaCount = (rss: ReadonlyArray<KubeObject | undefined>): number => sum(rss, statusReplicas);
export const readyReplicaCount = (rss: ReadonlyArray<KubeObject | undefined>): number => sum(rss, readyReplicas);
export const availableReplicaCount = (rss: ReadonlyArray<KubeObject | undefined>): number =>
  sum(rss, availableReplicas);

/**
 * Pods a ReplicaSet may have right now: its spec, or its last reported count when that is higher (a scale-down
 * whose deletions it has not reported yet). Rolling updates size the new ReplicaSet against this, so that the
 * pod count stays within maxSurge even before an old ReplicaSet's controller has caught up. (Kubernetes counts
 * spec alone and can overshoot for a moment.)
 */
export const podCeiling = (rss: ReadonlyArray<KubeObject | undefined>): number =>
  sum(rss, (rs) => Math.max(specReplicas(rs), statusReplicas(rs)));

/**
 * Available pods a ReplicaSet will keep once its controller has acted: its reported available count, but no more
 * than its spec. Rolling updates scale old ReplicaSets down against this, so a stale status cannot make them take
 * away pods below minAvailable. (Equal to the reported count whenever the status is current.)
 */
export const availableFloor = (rss: ReadonlyArray<KubeObject | undefined>): number =>
  sum(rss, (rs) => Math.min(availableReplicas(rs), specReplicas(rs)));
