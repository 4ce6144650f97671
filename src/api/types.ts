/** The shapes every Kubernetes object shares. Objects read from the store are shared: treat them as read-only. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
  managedFields?: unknown[];
  [extra: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

/** A list as the API answers it (metav1.List of one kind). */
export interface KubeList {
  apiVersion: string;
  kind: string;
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: KubeObject[];
}

/** metav1.Preconditions: a write or delete goes ahead only on this uid and/or resourceVersion. */
export interface Preconditions {
  uid?: string;
  resourceVersion?: string;
}

/** metav1.DeleteOptions, as a delete request carries them. */
export interface DeleteOptions {
  gracePeriodSeconds?: number;
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  orphanDependents?: boolean;
  preconditions?: Preconditions;
  dryRun?: boolean;
}

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Marks a value that never changes (see freezeShared). */
const IMMUTABLE = Symbol('kube-sim.immutable');

/**
 * Freezes a value that many objects share (the interned nodes of managedFields tries), and marks it so that deep
 * copies share it too: without the mark, every copy of a stored Pod (status writes copy its metadata) made the
 * Pod's own copy of the trie again. The mark is a non-enumerable symbol, which neither JSON,
 * Object.keys nor spreads see.
 */
export function freezeShared<T extends object>(value: T): T {
  Object.defineProperty(value, IMMUTABLE, { value: true });
  return Object.freeze(value);
}

/**
 * Deep copy of a JSON-shaped value (objects from the store are shared and must not be changed in place). With
 * `stored`, a stored version of it: a part that is that version's own part at the same place is kept, not copied,
 * since stored objects never change (a status write of an object read from an informer copies only its new parts).
 */
export function deepCopy<T>(value: T, stored?: unknown): T {
  return copyJson(value, stored) as T;
}

/**
 * Objects are JSON-shaped, so a plain recursive copy does: about 5× faster than structuredClone, which
 * serialises (and deep copies run on every write). Anything that is not a plain object or array (a Date, a
 * Map) still goes through structuredClone.
 */
function copyJson(value: unknown, stored: unknown): unknown {
  if (typeof value !== 'object' || value === null || value === stored) return value;
  if ((value as { [IMMUTABLE]?: true })[IMMUTABLE]) return value;
  if (Array.isArray(value)) {
    const before = Array.isArray(stored) ? (stored as unknown[]) : undefined;
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) out[i] = copyJson(value[i], before?.[i]);
    return out;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const before = isPlainObject(stored) ? stored : undefined;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const copy = copyJson(
      (value as Record<string, unknown>)[key],
      before !== undefined && Object.hasOwn(before, key) ? before[key] : undefined,
    );
    // A "__proto__" key (JSON.parse makes it an own property) must stay data, not become the prototype.
    if (key === '__proto__')
      Object.defineProperty(out, key, { value: copy, enumerable: true, writable: true, configurable: true });
    else out[key] = copy;
  }
  return out;
}

/** Structural equality of JSON-shaped values (key order does not matter). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ak = Object.keys(a as object);
  const bo = b as Record<string, unknown>;
  if (ak.length !== Object.keys(bo).length) return false;
  for (const k of ak) {
    if (!(k in bo) || !deepEqual((a as Record<string, unknown>)[k], bo[k])) return false;
  }
  return true;
}
