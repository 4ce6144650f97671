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

/** kube-apiserver's watch cache keeps at least this long of events when it can (watch_cache.go eventFreshDuration). */
export const EVENT_FRESH_MS = 75_000;
/** …and never fewer than this many (lowerBoundCapacity), unless --watch-history asks for fewer. */
const HISTORY_LOWER_BOUND = 100;

/**
 * A resource's recent events, oldest first, in a ring. With a clock it is sized as kube-apiserver sizes its watch
 * cache (watch_cache.go resizeCacheLocked): between 100 events and the upper bound (--watch-history), doubled when
 * full while its oldest event is younger than 75 s, halved when full while even its newest quarter is older. A
 * busy resource keeps what a reconnecting watcher needs; a quiet one, or one on a virtual clock jumping hours
 * ahead, keeps little — and every event held keeps its object alive, long enough to outlive the young generation.
 */
class EventHistory {
  private ring: StoreEvent[];
  /** When each event was recorded (with a clock), at the same index as the event. */
  private times: number[];
  private start = 0;
  size = 0;
  /** Every event with a revision above this is still held. */
  compactedThrough: number;
  private readonly lower: number;

  constructor(
    private readonly upper: number,
    startRevision: number,
    private readonly now?: () => number,
  ) {
    this.upper = Math.max(1, upper);
    this.lower = now ? Math.min(HISTORY_LOWER_BOUND, this.upper) : this.upper;
    this.ring = new Array<StoreEvent>(this.lower);
    this.times = now ? new Array<number>(this.lower) : [];
    this.compactedThrough = startRevision;
  }

  at(i: number): StoreEvent {
    return this.ring[(this.start + i) % this.ring.length]!;
  }

  push(event: StoreEvent): void {
    const now = this.now?.();
    if (now !== undefined && this.size === this.ring.length) this.resize(now);
    const capacity = this.ring.length;
    if (this.size === capacity) {
      this.compactedThrough = this.ring[this.start]!.revision;
      this.start = (this.start + 1) % capacity;
      this.size--;
    }
    const i = (this.start + this.size) % capacity;
    this.ring[i] = event;
    if (now !== undefined) this.times[i] = now;
    this.size++;
  }

  firstIndexAfter(revision: number): number {
    let lo = 0;
    let hi = this.size;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.at(mid).revision <= revision) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Called when full: grow while the whole history is fresh, shrink while its newest quarter is stale. */
  private resize(now: number): void {
    const capacity = this.ring.length;
    const timeAt = (i: number): number => this.times[(this.start + i) % capacity]!;
    if (now - timeAt(0) < EVENT_FRESH_MS) {
      if (capacity < this.upper) this.moveTo(Math.min(capacity * 2, this.upper));
    } else if (capacity > this.lower && now - timeAt(this.size - Math.floor(capacity / 4)) > EVENT_FRESH_MS) {
      this.moveTo(Math.max(Math.floor(capacity / 2), this.lower));
    }
  }

  /** A ring of another capacity holding the newest events that fit; the older ones are compacted away. */
  private moveTo(capacity: number): void {
    const keep = Math.min(this.size, capacity);
    const dropped = this.size - keep;
    if (dropped > 0) this.compactedThrough = this.at(dropped - 1).revision;
    const ring = new Array<StoreEvent>(capacity);
    const times = new Array<number>(capacity);
    for (let i = 0; i < keep; i++) {
      const from = (this.start + dropped + i) % this.ring.length;
      ring[i] = this.ring[from]!;
      times[i] = this.times[from]!;
    }
    this.ring = ring;
    this.times = times;
    this.start = 0;
    this.size = keep;
  }
}

/**
 * The watch side of one resource: its recent events (to resume watches from a resourceVersion, or answer 410
 * Expired) and the live watchers, indexed so that a write only visits watchers that can match it: by object name,
 * by one label equality, by namespace, or all.
 */
export class WatchHub {
  private readonly history: EventHistory;
  private readonly watchers = new Map<string, Set<Watch>>();
  /** How many keys of `watchers` there are of each kind: a write builds no key no watcher can be under. */
  private readonly keysOfKind: Record<KeyKind, number> = { all: 0, ns: 0, name: 0, label: 0 };
  private watcherCount = 0;

  /** `now` (the cluster's clock) sizes the history by time, as kube-apiserver's watch cache; without it, `capacity` events. */
  constructor(
    capacity: number,
    startRevision: number,
    private readonly fieldsOf: FieldsOf,
    now?: () => number,
  ) {
    this.history = new EventHistory(capacity, startRevision, now);
  }

  get count(): number {
    return this.watcherCount;
  }

  /** Watches from before `revision` are answered 410 Expired from now on. */
  compactThrough(revision: number): void {
    if (revision > this.history.compactedThrough) this.history.compactedThrough = revision;
  }

  oldestResumableRevision(): number {
    return this.history.compactedThrough;
  }

  record(event: StoreEvent): void {
    this.history.push(event);
    if (this.watcherCount > 0) this.dispatch(event);
  }

  /**
   * Starts a watch that first replays the retained events after `fromRevision`, then follows live ones.
   * Throws 410 Expired when those events are no longer retained.
   */
  watchFrom(fromRevision: number, filter: WatchFilter, sink: WatchSink): Watch {
    const history = this.history;
    if (fromRevision < history.compactedThrough) {
      throw Errors.expired(`too old resource version: ${fromRevision} (${history.compactedThrough + 1})`);
    }
    const watch = this.add(filter, sink);
    watch.after = fromRevision;
    for (let i = history.firstIndexAfter(fromRevision); i < history.size && !watch.closed; i++) {
      this.deliver(watch, history.at(i));
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
    if (before && before !== labels)
      for (const k in before) if (labels?.[k] !== before[k]) this.visit(`label\u0000${k}\u0000${before[k]}`, event);
  }

  private visit(key: string, event: StoreEvent): void {
    const set = this.watchers.get(key);
    if (set) for (const w of set) this.deliver(w, event);
  }

  private deliver(watch: Watch, event: StoreEvent): void {
    if (watch.closed || event.revision <= watch.after) return;
    const nowPasses = this.passes(watch.filter, event.object);
    const type = transition(
      event,
      nowPasses,
      event.prevObject !== undefined && this.passes(watch.filter, event.prevObject),
    );
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
