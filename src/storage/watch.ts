import { Errors } from '../api/errors.js';
import type { FieldSelector, LabelSelector } from '../api/selectors.js';
import type { KubeObject } from '../api/types.js';

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';
export type WatchEventType = EventType | 'BOOKMARK' | 'ERROR';

/**
 * One change in the store. `object` is the new state (for DELETED, the last state stamped with the deletion's
 * revision); `prevObject` is the state before, so a watcher can tell that an object entered or left its selector.
 * Encodings are cached on the event, so N watchers of the same format cost one serialisation.
 */
export class StoreEvent {
  private encodings?: Map<string, Buffer>;
  private leftSelector?: KubeObject;

  constructor(
    readonly type: EventType,
    readonly object: KubeObject,
    readonly prevObject: KubeObject | undefined,
    readonly revision: number,
  ) {}

  /** The event as a watcher sees it: DELETED for an object that left its selector carries the old state. */
  objectFor(type: WatchEventType): KubeObject {
    if (type === 'DELETED' && this.type === 'MODIFIED' && this.prevObject) {
      this.leftSelector ??= {
        ...this.prevObject,
        metadata: { ...this.prevObject.metadata, resourceVersion: String(this.revision) },
      };
      return this.leftSelector;
    }
    return this.object;
  }

  /**
   * Encodes once per (type, format) however many watchers ask, as the bytes every watcher's socket is given
   * (one UTF-8 encoding per event, not one per watcher).
   */
  encoded(type: WatchEventType, format: string, encode: (type: WatchEventType, object: KubeObject) => string): Buffer {
    const key = `${type}\u0000${format}`;
    this.encodings ??= new Map();
    let bytes = this.encodings.get(key);
    if (bytes === undefined) {
      bytes = Buffer.from(encode(type, this.objectFor(type)), 'utf8');
      this.encodings.set(key, bytes);
    }
    return bytes;
  }
}

export interface WatchFilter {
  namespace?: string;
  label: LabelSelector;
  field: FieldSelector;
}

export interface WatchSink {
  /** Delivers one event; returns false when the sink gave up (slow or closed), which ends the watch. */
  send(type: WatchEventType, event: StoreEvent): boolean;
  close(): void;
}

export type FieldsOf = (obj: KubeObject) => (field: string) => string | undefined;

export class Watch {
  closed = false;
  /** Events at or below this revision are already reflected in what the watcher got (held events released late). */
  after = 0;
  constructor(
    readonly filter: WatchFilter,
    readonly sink: WatchSink,
    readonly dispatchKey: string,
    private readonly hub: WatchHub,
  ) {}

  stop(): void {
    if (this.closed) return;
    this.closed = true;
    this.hub.remove(this);
    this.sink.close();
  }
}

/**
 * The watch side of one resource: a bounded ring of recent events (to resume watches from a resourceVersion,
 * or answer 410 Expired) and the live watchers, indexed so that a write only visits watchers that can match it:
 * by object name, by one label equality, by namespace, or all.
 */
export class WatchHub {
  private readonly ring: StoreEvent[];
  private start = 0;
  private size = 0;
  /** Every event with a revision above this is still in the ring. */
  private compactedThrough: number;
  private readonly watchers = new Map<string, Set<Watch>>();
  /** How many keys of `watchers` there are of each kind: a write builds no key no watcher can be under. */
  private readonly keysOfKind: Record<KeyKind, number> = { all: 0, ns: 0, name: 0, label: 0 };
  private watcherCount = 0;

  constructor(
    capacity: number,
    startRevision: number,
    private readonly fieldsOf: FieldsOf,
  ) {
    this.ring = new Array(Math.max(1, capacity));
    this.compactedThrough = startRevision;
  }

  get count(): number {
    return this.watcherCount;
  }

  oldestResumableRevision(): number {
    return this.compactedThrough;
  }

  record(event: StoreEvent): void {
    if (this.size === this.ring.length) {
      this.compactedThrough = this.ring[this.start]!.revision;
      this.start = (this.start + 1) % this.ring.length;
      this.size--;
    }
    this.ring[(this.start + this.size) % this.ring.length] = event;
    this.size++;
    if (this.watcherCount > 0) this.dispatch(event);
  }

  /**
   * Starts a watch that first replays the retained events after `fromRevision`, then follows live ones.
   * Throws 410 Expired when those events are no longer retained.
   */
  watchFrom(fromRevision: number, filter: WatchFilter, sink: WatchSink): Watch {
    if (fromRevision < this.compactedThrough) {
      throw Errors.expired(`too old resource version: ${fromRevision} (${this.compactedThrough + 1})`);
    }
    const watch = this.add(filter, sink);
    watch.after = fromRevision;
    for (let i = this.firstIndexAfter(fromRevision); i < this.size && !watch.closed; i++) {
      this.deliver(watch, this.ring[(this.start + i) % this.ring.length]!);
    }
    return watch;
  }

  /** Starts a live-only watch (after the caller has sent the current state itself). */
  add(filter: WatchFilter, sink: WatchSink): Watch {
    const key = dispatchKeyOf(filter);
    const watch = new Watch(filter, sink, key, this);
    let set = this.watchers.get(key);
    if (!set) {
      this.watchers.set(key, (set = new Set()));
      this.keysOfKind[kindOfKey(key)]++;
    }
    set.add(watch);
    this.watcherCount++;
    return watch;
  }

  remove(watch: Watch): void {
    const set = this.watchers.get(watch.dispatchKey);
    if (set?.delete(watch)) {
      this.watcherCount--;
      if (set.size === 0) {
        this.watchers.delete(watch.dispatchKey);
        this.keysOfKind[kindOfKey(watch.dispatchKey)]--;
      }
    }
  }

  closeAll(): void {
    for (const set of [...this.watchers.values()]) for (const w of [...set]) w.stop();
  }

  private firstIndexAfter(revision: number): number {
    let lo = 0;
    let hi = this.size;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.ring[(this.start + mid) % this.ring.length]!.revision <= revision) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Visits the watchers a change can concern: those of every object, of its namespace, of its name, and of each
   * label it has or had. A watch sits under one key, so visiting each key once visits each watcher once; a label
   * the object kept is one key, visited once. Keys are only built for kinds of watcher that exist.
   */
  private dispatch(event: StoreEvent): void {
    const obj = event.object;
    const ns = obj.metadata.namespace ?? '';
    const keys = this.keysOfKind;
    if (keys.all > 0) this.visit('all', event);
    if (keys.ns > 0) this.visit(`ns\u0000${ns}`, event);
    if (keys.name > 0) {
      this.visit(`name\u0000*\u0000${obj.metadata.name}`, event);
      this.visit(`name\u0000${ns}\u0000${obj.metadata.name}`, event);
    }
    if (keys.label === 0) return;
    const labels = obj.metadata.labels;
    const before = event.prevObject?.metadata.labels;
    if (labels) for (const k in labels) this.visit(`label\u0000${k}\u0000${labels[k]}`, event);
    if (before && before !== labels) for (const k in before) if (labels?.[k] !== before[k]) this.visit(`label\u0000${k}\u0000${before[k]}`, event);
  }

  private visit(key: string, event: StoreEvent): void {
    const set = this.watchers.get(key);
    if (set) for (const w of set) this.deliver(w, event);
  }

  private deliver(watch: Watch, event: StoreEvent): void {
    if (watch.closed || event.revision <= watch.after) return;
    const nowPasses = this.passes(watch.filter, event.object);
    const type = transition(event, nowPasses, event.prevObject !== undefined && this.passes(watch.filter, event.prevObject));
    if (type && !watch.sink.send(type, event)) watch.stop();
  }

  private passes(filter: WatchFilter, obj: KubeObject): boolean {
    if (filter.namespace !== undefined && (obj.metadata.namespace ?? '') !== filter.namespace) return false;
    if (!filter.label.empty && !filter.label.matches(obj.metadata.labels)) return false;
    if (!filter.field.empty && !filter.field.matches(this.fieldsOf(obj))) return false;
    return true;
  }
}

/** How the watch cache turns a change into what one watcher sees (cacheWatcher.convertToWatchEvent). */
function transition(event: StoreEvent, nowPasses: boolean, before: boolean): WatchEventType | undefined {
  if (event.type === 'ADDED') return nowPasses ? 'ADDED' : undefined;
  if (event.type === 'DELETED') return nowPasses || before ? 'DELETED' : undefined;
  if (nowPasses && before) return 'MODIFIED';
  if (nowPasses) return 'ADDED';
  if (before) return 'DELETED';
  return undefined;
}

function dispatchKeyOf(filter: WatchFilter): string {
  const name = filter.field.equality('metadata.name');
  if (name !== undefined) return `name\u0000${filter.namespace ?? '*'}\u0000${name}`;
  const equalities = filter.label.equalities();
  if (equalities.length > 0) return `label\u0000${equalities[0]![0]}\u0000${equalities[0]![1]}`;
  if (filter.namespace !== undefined) return `ns\u0000${filter.namespace}`;
  return 'all';
}

type KeyKind = 'all' | 'ns' | 'name' | 'label';

function kindOfKey(key: string): KeyKind {
  return key === 'all' ? 'all' : (key.slice(0, key.indexOf('\u0000')) as KeyKind);
}
