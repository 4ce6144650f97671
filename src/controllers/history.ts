import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { controllerOf, newControllerRef } from './controller-ref.js';

/**
 * ControllerRevisions (k8s.io/kubernetes/pkg/controller/history), shared by the StatefulSet and DaemonSet
 * controllers: a revision is an immutable snapshot of a workload's pod template, named `<parent>-<hash>`,
 * numbered, and labelled `controller-revision-hash: <hash>`. `kubectl rollout history|undo` read them.
 */

export const CONTROLLER_REVISION_HASH_LABEL = 'controller-revision-hash';

/** 32-bit FNV-1 (Go's hash/fnv New32), over UTF-8 bytes. */
export function fnv32(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    h = Math.imul(h, 0x01000193) >>> 0;
    h = (h ^ byte) >>> 0;
  }
  return h >>> 0;
}

/** apimachinery's rand.SafeEncodeString: each character mapped into an alphabet without vowels or lookalikes. */
export function safeEncodeString(text: string): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  let out = '';
  for (let i = 0; i < text.length; i++) out += alphabet[text.charCodeAt(i) % alphabet.length];
  return out;
}

/**
 * The revision hash: FNV-32 of the revision's data, then of the collision count when there is one, written
 * as a decimal number and safe-encoded — as history.HashControllerRevision does. (Kubernetes hashes the Go
 * spew dump of the raw bytes, so the exact strings differ; the shape and the properties are the same.)
 */
export function hashRevision(data: unknown, collisionCount = 0): string {
  let text = stableJson(data);
  if (collisionCount > 0) text += `\u0000${collisionCount}`;
  return safeEncodeString(String(fnv32(text)));
}

/** history.ControllerRevisionName: the prefix is cut to 223 characters so the name stays valid. */
export function revisionName(prefix: string, hash: string): string {
  return `${prefix.length > 223 ? prefix.slice(0, 223) : prefix}-${hash}`;
}

/**
 * What StatefulSet and DaemonSet revisions store: a strategic merge patch that replaces the template, which
 * `kubectl rollout undo` applies to roll back.
 */
export function templatePatch(template: unknown): Record<string, unknown> {
  const t = isPlainObject(template) ? template : {};
  return { spec: { template: { ...t, $patch: 'replace' } } };
}

/** The template stored in a revision's data. */
export function templateOfRevision(revision: KubeObject): Record<string, unknown> | undefined {
  const data = revision.data as { spec?: { template?: Record<string, unknown> } } | undefined;
  const t = data?.spec?.template;
  if (!isPlainObject(t)) return undefined;
  const { $patch: _drop, ...rest } = t;
  return rest;
}

export function revisionNumber(revision: KubeObject): number {
  return typeof revision.revision === 'number' ? revision.revision : 0;
}

/** Revisions sorted by revision number, then creation time, then name (history.SortControllerRevisions). */
export function sortRevisions(revisions: readonly KubeObject[]): KubeObject[] {
  return [...revisions].sort(
    (a, b) =>
      revisionNumber(a) - revisionNumber(b) ||
      (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? '') ||
      (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''),
  );
}

export function nextRevisionNumber(revisions: readonly KubeObject[]): number {
  let max = 0;
  for (const r of revisions) max = Math.max(max, revisionNumber(r));
  return max + 1;
}

/** A new ControllerRevision for a parent (history.NewControllerRevision), named and labelled by its hash. */
export function newRevision(
  parent: KubeObject,
  apiVersion: string,
  kind: string,
  templateLabels: Record<string, string> | undefined,
  data: unknown,
  revision: number,
  collisionCount: number,
): KubeObject {
  const hash = hashRevision(data, collisionCount);
  return {
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: {
      name: revisionName(parent.metadata.name!, hash),
      namespace: parent.metadata.namespace,
      labels: { ...(templateLabels ?? {}), [CONTROLLER_REVISION_HASH_LABEL]: hash },
      annotations: { ...(parent.metadata.annotations ?? {}) },
      ownerReferences: [newControllerRef(parent, apiVersion, kind)],
    },
    data,
    revision,
  };
}

export type RevisionStep =
  | { action: 'none'; revision: KubeObject }
  | { action: 'renumber'; revision: KubeObject; to: number }
  | { action: 'create'; revision: KubeObject };

/**
 * Decides the update revision given the existing ones and the candidate built from the current template:
 * the newest revision if it already holds the same data; an older equal one, renumbered to be the newest
 * (a rollback reuses its revision); else the candidate, to be created.
 *
 * Example: revisions 1 (image v1) and 2 (image v2); the template goes back to v1 → revision 1 is renumbered
 * to 3, and `kubectl rollout history` shows 2 and 3.
 */
export function planUpdateRevision(revisions: readonly KubeObject[], candidate: KubeObject): RevisionStep {
  const sorted = sortRevisions(revisions);
  const equal = sorted.filter((r) => deepEqual(r.data, candidate.data));
  const latest = sorted[sorted.length - 1];
  if (equal.length > 0) {
    const match = equal[equal.length - 1]!;
    if (match === latest) return { action: 'none', revision: match };
    return { action: 'renumber', revision: match, to: revisionNumber(candidate) };
  }
  return { action: 'create', revision: candidate };
}

/**
 * Revisions to delete to keep the history at `limit`: the oldest first, never one that is live (the current or
 * update revision, or one a pod still runs).
 */
export function revisionsToTruncate(
  revisions: readonly KubeObject[],
  live: ReadonlySet<string>,
  limit: number,
): KubeObject[] {
  const candidates = sortRevisions(revisions).filter((r) => !live.has(r.metadata.name!));
  const excess = candidates.length - Math.max(0, limit);
  return excess > 0 ? candidates.slice(0, excess) : [];
}

/** Revisions controlled by the parent. */
export function ownedRevisions(revisions: readonly KubeObject[], parentUid: string): KubeObject[] {
  return revisions.filter((r) => controllerOf(r)?.uid === parentUid);
}

/** JSON with sorted keys, so equal data hashes equally whatever order the fields arrived in. */
export function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (isPlainObject(value)) {
    return `{${Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson(value[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
