import { Errors, type GroupResource } from '../api/errors.js';
import type { MaybePromise } from '../api/maybe-async.js';
import type { FieldSelector, LabelSelector } from '../api/selectors.js';
import { deepEqual, type KubeObject, type Preconditions } from '../api/types.js';
import { compactObject } from './compact.js';
import { SortedKeys } from './sorted-keys.js';
import { StoreEvent, WatchHub, type FieldsOf, type Watch, type WatchFilter, type WatchSink } from './watch.js';

/**
 * The versioned in-memory store: one global revision (like etcd's), objects per resource kept in etcd's key
 * order, label and field indexes so that selected lists never scan the whole resource, and a watch hub per
 * resource. It knows nothing of kinds or defaults; the registry's strategies do that before calling it.
 */
export interface ResourceSpec {
  /** Unique key of the resource, e.g. "apps/deployments" ("/configmaps" for the core group). */
  key: string;
  groupResource: GroupResource;
  /** Field selectors answered from an index, besides metadata.name/namespace (e.g. spec.nodeName for pods). */
  indexedFields?: readonly string[];
  fieldsOf: FieldsOf;
  /** Objects of this resource share their alike parts (compactObject); others only get their strings flattened. */
  shareParts?: boolean;
}

export interface ListOptions {
  namespace?: string;
  label: LabelSelector;
  field: FieldSelector;
  limit?: number;
  /** List objects whose key (namespace/name) sorts after this one. */
  after?: string;
}

export interface ListResult {
  items: KubeObject[];
  revision: number;
  /** Key of the last item returned, when more remain. */
  continueAfter?: string;
  remaining?: number;
}

export type ChangeListener = (resourceKey: string, event: StoreEvent) => void;

/**
 * The writes of the store, which the registry's generic store goes through: the in-memory store answers at once;
 * a store whose truth lives elsewhere (etcd: etcd-store.ts) answers once the write is committed there and its
 * watch has brought it into the cache.
 */
export interface StoreWrites {
  create(resource: string, obj: KubeObject): MaybePromise<KubeObject>;
  guaranteedUpdate(
    resource: string,
    namespace: string | undefined,
    name: string,
    preconditions: Preconditions,
    tryUpdate: (current: KubeObject) => KubeObject,
    dryRun?: boolean,
  ): MaybePromise<{ object: KubeObject; changed: boolean }>;
  delete(
    resource: string,
    namespace: string | undefined,
    name: string,
    preconditions?: Preconditions,
  ): MaybePromise<KubeObject>;
}

export function objectKey(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

class ResourceTable {
  readonly objects = new Map<string, KubeObject>();
  readonly order = new SortedKeys();
  readonly labelIndex = new Map<string, Map<string, Keys>>();
  readonly fieldIndex = new Map<string, Map<string, Keys>>();
  readonly namespaceCounts = new Map<string, number>();
  readonly hub: WatchHub;

  constructor(
    readonly spec: ResourceSpec,
    historySize: number,
    startRevision: number,
    now?: () => number,
  ) {
    this.hub = new WatchHub(historySize, startRevision, spec.fieldsOf, now);
    for (const f of spec.indexedFields ?? []) this.fieldIndex.set(f, new Map());
  }

  index(key: string, obj: KubeObject | undefined, add: boolean): void {
    if (!obj) return;
    const labels = obj.metadata.labels;
    if (labels) {
      for (const [k, v] of Object.entries(labels)) {
        let values = this.labelIndex.get(k);
        if (!values) this.labelIndex.set(k, (values = new Map()));
        updateKeys(values, v, key, add);
        if (!add && values.size === 0) this.labelIndex.delete(k);
      }
    }
    if (this.fieldIndex.size > 0) {
      const fields = this.spec.fieldsOf(obj);
      for (const [field, values] of this.fieldIndex) updateKeys(values, fields(field) ?? '', key, add);
    }
    const ns = obj.metadata.namespace ?? '';
    this.namespaceCounts.set(ns, (this.namespaceCounts.get(ns) ?? 0) + (add ? 1 : -1));
    if (this.namespaceCounts.get(ns) === 0) this.namespaceCounts.delete(ns);
  }

  /**
   * Moves an updated object's index entries: only the labels and indexed fields whose values changed. Most
   * updates (status writes, Lease renewals) change neither, and the key, hence the namespace, never changes.
   */
  reindex(key: string, before: KubeObject, after: KubeObject): void {
    const was = before.metadata.labels;
    const now = after.metadata.labels;
    if (was !== now) {
      if (was) {
        for (const k in was) {
          const v = was[k]!;
          if (now?.[k] === v) continue;
          const values = this.labelIndex.get(k);
          if (!values) continue;
          updateKeys(values, v, key, false);
          if (values.size === 0) this.labelIndex.delete(k);
        }
      }
      if (now) {
        for (const k in now) {
          const v = now[k]!;
          if (was?.[k] === v) continue;
          let values = this.labelIndex.get(k);
          if (!values) this.labelIndex.set(k, (values = new Map()));
          updateKeys(values, v, key, true);
        }
      }
    }
    if (this.fieldIndex.size > 0) {
      const old = this.spec.fieldsOf(before);
      const fields = this.spec.fieldsOf(after);
      for (const [field, values] of this.fieldIndex) {
        const from = old(field) ?? '';
        const to = fields(field) ?? '';
        if (from === to) continue;
        updateKeys(values, from, key, false);
        updateKeys(values, to, key, true);
      }
    }
  }
}

/**
 * The keys of one index entry. Most entries hold a few keys (the 3 or 4 events of a pod, indexed by
 * involvedObject.uid), and a Set's hash table is large even for three: so one key is kept as the string,
 * up to SMALL_KEYS as an array, more as a Set.
 */
type Keys = string | string[] | Set<string>;
const SMALL_KEYS = 8;
const NO_KEYS: readonly string[] = [];

function updateKeys(map: Map<string, Keys>, value: string, key: string, add: boolean): void {
  const keys = map.get(value);
  if (add) {
    if (keys === undefined) map.set(value, key);
    else if (typeof keys === 'string') {
      if (keys !== key) map.set(value, [keys, key]);
    } else if (Array.isArray(keys)) {
      // concat makes an array of the exact length; push, a spread or filter leave room for ~16 more.
      if (!keys.includes(key)) map.set(value, keys.length < SMALL_KEYS ? keys.concat(key) : new Set(keys).add(key));
    } else keys.add(key);
    return;
  }
  if (keys === undefined) return;
  if (typeof keys === 'string') {
    if (keys === key) map.delete(value);
  } else if (Array.isArray(keys)) {
    const i = keys.indexOf(key);
    if (i < 0) return;
    map.set(value, keys.length === 2 ? keys[1 - i]! : keys.slice(0, i).concat(keys.slice(i + 1)));
  } else {
    keys.delete(key);
    if (keys.size === 0) map.delete(value);
  }
}

function keyCount(keys: Keys | readonly string[]): number {
  return typeof keys === 'string' ? 1 : Array.isArray(keys) ? keys.length : (keys as Set<string>).size;
}

/** The keys as a new array (to sort). */
function keyList(keys: Keys | readonly string[]): string[] {
  return typeof keys === 'string' ? [keys] : Array.isArray(keys) ? keys.slice() : [...(keys as Set<string>)];
}

export class MemoryStore implements StoreWrites {
  private revision: number;
  private readonly tables = new Map<string, ResourceTable>();
  private readonly listeners: ChangeListener[] = [];
  /** With a write-ahead log, watch events wait here until their revision is durable (see holdWatchEvents). */
  private held: Array<{ table: ResourceTable; event: StoreEvent }> | undefined;
  private heldHead = 0;

  /**
   * `historySize` bounds the events kept per resource for resuming watches; with `now` (the cluster's clock) the
   * history is sized by time within that bound, as kube-apiserver's watch cache is (see EventHistory).
   */
  constructor(
    private readonly historySize = 10_000,
    startRevision = 0,
    private readonly now?: () => number,
  ) {
    this.revision = startRevision;
  }

  get currentRevision(): number {
    return this.revision;
  }

  register(spec: ResourceSpec): void {
    if (!this.tables.has(spec.key))
      this.tables.set(spec.key, new ResourceTable(spec, this.historySize, this.revision, this.now));
  }

  unregister(key: string): void {
    this.tables.get(key)?.hub.closeAll();
    this.tables.delete(key);
  }

  /** The resource's registration (undefined when it is not served). */
  spec(key: string): ResourceSpec | undefined {
    return this.tables.get(key)?.spec;
  }

  /**
   * Moves the revision on without a change of ours: a store fed by etcd's watch learns that everything up to
   * `revision` has been seen (a progress notification) when the last writes were outside its keys.
   */
  advanceRevision(revision: number): void {
    if (revision > this.revision) this.revision = revision;
  }

  /** Watches from before `revision` get 410 Expired from now on (their events were compacted away in etcd). */
  compactHistory(revision: number): void {
    for (const table of this.tables.values()) table.hub.compactThrough(revision);
  }

  onChange(listener: ChangeListener): void {
    this.listeners.push(listener);
  }

  private table(key: string): ResourceTable {
    const table = this.tables.get(key);
    if (!table) throw Errors.internal(`resource ${key} is not registered with the store`);
    return table;
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.table(resource).objects.get(objectKey(namespace, name));
  }

  /** Watches open on the resource now (HTTP and in-process alike). */
  watcherCount(resource: string): number {
    return this.table(resource).hub.count;
  }

  count(resource: string, namespace?: string): number {
    const table = this.table(resource);
    return namespace === undefined ? table.objects.size : (table.namespaceCounts.get(namespace) ?? 0);
  }

  /**
   * Every object of a resource in one namespace (or all), in key order, with selectors answered from indexes.
   * A page stops at the first match past the limit; remainingItemCount is given, as kube-apiserver gives it,
   * only for unselected lists, where it is a subtraction rather than a scan.
   */
  list(resource: string, options: ListOptions): ListResult {
    const table = this.table(resource);
    const candidates = this.candidates(table, options);
    const limit = options.limit && options.limit > 0 ? options.limit : Infinity;
    const items: KubeObject[] = [];
    let lastKey: string | undefined;
    let nextIndex = -1;
    for (let i = candidates.from; i < candidates.keys.length; i++) {
      const key = candidates.keys[i]!;
      if (candidates.prefix !== undefined && !key.startsWith(candidates.prefix)) break;
      const obj = table.objects.get(key);
      if (!obj || !this.matches(table, obj, options)) continue;
      if (items.length >= limit) {
        nextIndex = i;
        break;
      }
      items.push(obj);
      lastKey = key;
    }
    const result: ListResult = { items, revision: this.revision };
    if (nextIndex >= 0 && lastKey !== undefined) {
      result.continueAfter = lastKey;
      if (options.label.empty && options.field.empty && candidates.end !== undefined)
        result.remaining = candidates.end - nextIndex;
    }
    return result;
  }

  private matches(table: ResourceTable, obj: KubeObject, options: ListOptions): boolean {
    if (options.namespace !== undefined && (obj.metadata.namespace ?? '') !== options.namespace) return false;
    if (!options.label.empty && !options.label.matches(obj.metadata.labels)) return false;
    if (!options.field.empty && !options.field.matches(table.spec.fieldsOf(obj))) return false;
    return true;
  }

  /**
   * The smallest ordered key range that can hold every match: an index hit (sorted on the spot, since it is
   * small), or the namespace's contiguous range of the resource's ordered keys.
   */
  private candidates(
    table: ResourceTable,
    options: ListOptions,
  ): { keys: readonly string[]; from: number; prefix?: string; end?: number } {
    const sets: Array<Keys | readonly string[]> = [];
    const name = options.field.equality('metadata.name');
    if (name !== undefined) {
      if (options.namespace !== undefined) {
        const key = objectKey(options.namespace, name);
        return { keys: table.objects.has(key) ? [key] : [], from: 0 };
      }
    }
    for (const [k, v] of options.label.equalities()) sets.push(table.labelIndex.get(k)?.get(v) ?? NO_KEYS);
    for (const [field, values] of table.fieldIndex) {
      const wanted = options.field.equality(field);
      if (wanted !== undefined) sets.push(values.get(wanted) ?? NO_KEYS);
    }
    const prefixScan =
      options.namespace !== undefined ? (table.namespaceCounts.get(options.namespace) ?? 0) : table.objects.size;
    const smallest = sets.reduce<Keys | readonly string[] | undefined>(
      (best, s) => (best === undefined || keyCount(s) < keyCount(best) ? s : best),
      undefined,
    );
    if (smallest !== undefined && keyCount(smallest) < prefixScan) {
      const keys = keyList(smallest).sort();
      const from = options.after !== undefined ? upperBound(keys, options.after) : 0;
      return { keys, from };
    }
    const ordered = table.order.ordered();
    if (options.namespace !== undefined) {
      const prefix = `${options.namespace}/`;
      const after = options.after !== undefined && options.after > prefix ? options.after : prefix;
      // Keys of one namespace are contiguous: they end before the first key ≥ "<namespace>0" ('0' follows '/').
      return {
        keys: ordered,
        from: table.order.firstAfter(after),
        prefix,
        end: table.order.firstAtOrAfter(`${options.namespace}0`),
      };
    }
    return {
      keys: ordered,
      from: options.after !== undefined ? table.order.firstAfter(options.after) : 0,
      end: ordered.length,
    };
  }

  /** Stores a new object (which the store now owns) and stamps its resourceVersion. */
  create(resource: string, obj: KubeObject): KubeObject {
    const table = this.table(resource);
    const key = objectKey(obj.metadata.namespace, obj.metadata.name!);
    if (table.objects.has(key)) throw Errors.alreadyExists(table.spec.groupResource, obj.metadata.name!);
    obj.metadata.resourceVersion = String(++this.revision);
    compactObject(obj, undefined, table.spec.shareParts === true);
    if (FREEZE) deepFreeze(obj);
    table.objects.set(key, obj);
    table.order.add(key);
    table.index(key, obj, true);
    this.emit(table, new StoreEvent('ADDED', obj, undefined, this.revision));
    return obj;
  }

  /**
   * Optimistic locking in one place: checks the preconditions against the current object, lets `tryUpdate`
   * compute the next state from it, and writes it unless nothing changed (then the current object is returned
   * with its resourceVersion untouched, and no event is sent).
   */
  /** The stored object an update starts from: 404 when there is none, 409 when the preconditions fail, as guaranteedUpdate checks. */
  current(resource: string, namespace: string | undefined, name: string, preconditions: Preconditions): KubeObject {
    const table = this.table(resource);
    const current = table.objects.get(objectKey(namespace, name));
    if (!current) throw Errors.notFound(table.spec.groupResource, name);
    checkPreconditions(table.spec.groupResource, current, preconditions);
    return current;
  }

  guaranteedUpdate(
    resource: string,
    namespace: string | undefined,
    name: string,
    preconditions: Preconditions,
    tryUpdate: (current: KubeObject) => KubeObject,
    dryRun = false,
  ): { object: KubeObject; changed: boolean } {
    const table = this.table(resource);
    const key = objectKey(namespace, name);
    const current = table.objects.get(key);
    if (!current) throw Errors.notFound(table.spec.groupResource, name);
    checkPreconditions(table.spec.groupResource, current, preconditions);
    const next = tryUpdate(current);
    if (next === current || sameIgnoringVersion(next, current)) return { object: current, changed: false };
    if (dryRun) return { object: next, changed: true };
    next.metadata.resourceVersion = String(++this.revision);
    compactObject(next, current, table.spec.shareParts === true);
    if (FREEZE) deepFreeze(next);
    table.reindex(key, current, next);
    table.objects.set(key, next);
    this.emit(table, new StoreEvent('MODIFIED', next, current, this.revision));
    return { object: next, changed: true };
  }

  delete(resource: string, namespace: string | undefined, name: string, preconditions: Preconditions = {}): KubeObject {
    const table = this.table(resource);
    const key = objectKey(namespace, name);
    const current = table.objects.get(key);
    if (!current) throw Errors.notFound(table.spec.groupResource, name);
    checkPreconditions(table.spec.groupResource, current, preconditions);
    table.objects.delete(key);
    table.order.remove(key);
    table.index(key, current, false);
    const revision = ++this.revision;
    const last: KubeObject = { ...current, metadata: { ...current.metadata, resourceVersion: String(revision) } };
    this.emit(table, new StoreEvent('DELETED', last, current, revision));
    return last;
  }

  /** Watches from a resourceVersion (events after it), or throws 410 Expired if they are gone. */
  watch(resource: string, fromRevision: number, filter: WatchFilter, sink: WatchSink): Watch {
    return this.table(resource).hub.watchFrom(fromRevision, filter, sink);
  }

  /**
   * Restores objects read from disk (used once, before serving) without watch events; change listeners hear
   * them as ADDED, so state derived from objects (CRD kinds, Service IPs, Event expiry) is rebuilt.
   */
  load(resource: string, objects: KubeObject[]): void {
    const table = this.table(resource);
    for (const obj of objects) {
      const key = objectKey(obj.metadata.namespace, obj.metadata.name!);
      compactObject(obj, undefined, table.spec.shareParts === true);
      if (FREEZE) deepFreeze(obj);
      table.objects.set(key, obj);
      table.order.add(key);
      table.index(key, obj, true);
      this.notify(resource, new StoreEvent('ADDED', obj, undefined, Number(obj.metadata.resourceVersion)));
    }
  }

  private notify(resource: string, event: StoreEvent): void {
    for (const listener of this.listeners) listener(resource, event);
  }

  resourceKeys(): string[] {
    return [...this.tables.keys()];
  }

  /** All objects of a resource in key order (for snapshots). */
  all(resource: string): KubeObject[] {
    const table = this.table(resource);
    return table.order.ordered().map((k) => table.objects.get(k)!);
  }

  closeWatches(): void {
    for (const table of this.tables.values()) table.hub.closeAll();
  }

  private emit(table: ResourceTable, event: StoreEvent): void {
    if (this.held) this.held.push({ table, event });
    else table.hub.record(event);
    for (const listener of this.listeners) listener(table.spec.key, event);
  }

  /**
   * From now on, changes reach the watch history and watchers only through releaseWatchEvents (called once
   * their revision is durable), so no watcher sees a revision that a crash could lose and reuse.
   */
  holdWatchEvents(): void {
    this.held ??= [];
  }

  /** Records and dispatches the held events up to `revision`, in order. */
  releaseWatchEvents(revision: number): void {
    const held = this.held;
    if (!held) return;
    while (this.heldHead < held.length && held[this.heldHead]!.event.revision <= revision) {
      const { table, event } = held[this.heldHead]!;
      held[this.heldHead++] = undefined!;
      if (this.tables.get(table.spec.key) === table) table.hub.record(event);
    }
    if (this.heldHead === held.length) {
      held.length = 0;
      this.heldHead = 0;
    } else if (this.heldHead > 1024 && this.heldHead * 2 > held.length) {
      held.splice(0, this.heldHead);
      this.heldHead = 0;
    }
  }

  /**
   * Re-applies one logged change at start-up (after the snapshot's load): the object state, the revision
   * counter, the watch history — so a watch from a resourceVersion before a crash resumes — and the change
   * listeners (as load does; a CRD's kind is registered before the records of its objects come).
   */
  replay(
    resource: string,
    type: 'A' | 'M' | 'D',
    revision: number,
    obj: KubeObject | undefined,
    namespace?: string,
    name?: string,
  ): StoreEvent | null | false {
    this.revision = revision;
    const table = this.tables.get(resource);
    if (!table) return false; // a resource this build does not serve
    if (type === 'D') {
      const key = objectKey(namespace || undefined, name!);
      const current = table.objects.get(key);
      if (!current) return null;
      table.objects.delete(key);
      table.order.remove(key);
      table.index(key, current, false);
      const last: KubeObject = { ...current, metadata: { ...current.metadata, resourceVersion: String(revision) } };
      const event = new StoreEvent('DELETED', last, current, revision);
      table.hub.record(event);
      this.notify(resource, event);
      return event;
    }
    const key = objectKey(obj!.metadata.namespace, obj!.metadata.name!);
    const current = table.objects.get(key);
    if (current) table.index(key, current, false);
    else table.order.add(key);
    compactObject(obj!, undefined, table.spec.shareParts === true);
    if (FREEZE) deepFreeze(obj);
    table.objects.set(key, obj!);
    table.index(key, obj!, true);
    const event = new StoreEvent(current ? 'MODIFIED' : 'ADDED', obj!, current, revision);
    table.hub.record(event);
    this.notify(resource, event);
    return event;
  }
}

/**
 * KUBE_SIM_FREEZE_OBJECTS=1 (the tests set it) freezes every stored object, deeply: stored objects are shared with
 * in-process informers, watch history and cached JSON, so code that changes one in place would corrupt the store
 * without a write. Frozen, such code throws where it writes.
 */
const FREEZE = process.env.KUBE_SIM_FREEZE_OBJECTS === '1';
function deepFreeze(value: unknown): void {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const child of Object.values(value)) deepFreeze(child);
}

export function checkPreconditions(gr: GroupResource, current: KubeObject, pre: Preconditions): void {
  if (pre.uid && pre.uid !== current.metadata.uid) {
    throw Errors.conflict(
      gr,
      current.metadata.name!,
      `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${current.metadata.uid}`,
    );
  }
  if (pre.resourceVersion && pre.resourceVersion !== current.metadata.resourceVersion) {
    throw Errors.conflict(gr, current.metadata.name!);
  }
}

/**
 * Whether an update changes nothing but the resourceVersion: compared in place, no copies (it runs on every write).
 * Metadata last: most writes change the spec or status (a Lease's renewTime, a status), not metadata.
 */
export function sameIgnoringVersion(next: KubeObject, current: KubeObject): boolean {
  const keys = Object.keys(next);
  if (keys.length !== Object.keys(current).length) return false;
  for (const key of keys) {
    if (!(key in current)) return false;
    if (key !== 'metadata' && !deepEqual(next[key], current[key])) return false;
  }
  return sameExcept(next.metadata, current.metadata, 'resourceVersion');
}

function sameExcept(a: Record<string, unknown>, b: Record<string, unknown>, ignored: string): boolean {
  if (a === b) return true;
  let count = 0;
  for (const key of Object.keys(a)) {
    if (key === ignored) continue;
    count++;
    if (!(key in b) || !deepEqual(a[key], b[key])) return false;
  }
  for (const key of Object.keys(b)) if (key !== ignored) count--;
  return count === 0;
}

function upperBound(keys: readonly string[], after: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (keys[mid]! <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
