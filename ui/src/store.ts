/**
 * The page's copy of the cluster: what the watches said, nothing else (an informer cache, as client-go's). Changes
 * are queued as they arrive and applied once per animation frame; each frame tells only the views whose data
 * changed (a node's lane, a ReplicaSet's pods, one object), so a busy cluster does not re-render everything.
 */
import type { Kind, KubeObject } from './api.js';
import { RESOURCES } from './api.js';

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface Change {
  kind: Kind;
  type: WatchType | 'RESET';
  object?: KubeObject;
  objects?: KubeObject[];
}

/** What a resource's reflector is doing, for the header. */
export interface FeedState {
  state: 'listing' | 'live' | 'reconnecting' | 'forbidden' | 'failed';
  message?: string;
  /** Set when only part of the objects is kept: how many are shown, and how many the cluster holds. */
  sample?: { shown: number; total: number };
}

export function keyOf(obj: KubeObject): string {
  return obj.metadata.namespace ? `${obj.metadata.namespace}/${obj.metadata.name}` : obj.metadata.name;
}

export function controllerOf(obj: KubeObject): { kind: string; name: string; uid: string } | undefined {
  const refs = obj.metadata.ownerReferences ?? [];
  return refs.find((r) => r.controller) ?? refs[0];
}

function nodeOf(pod: KubeObject): string {
  const spec = pod.spec as { nodeName?: string } | undefined;
  return spec?.nodeName ?? '';
}

function involvedUid(event: KubeObject): string | undefined {
  const involved = (event as { involvedObject?: { uid?: string } }).involvedObject;
  return involved?.uid || undefined;
}

/** Newest first: by the last time it happened, then by resourceVersion (events of one second in their order). */
export function newestFirst(a: KubeObject, b: KubeObject): number {
  return (
    eventTime(b) - eventTime(a) || Number(b.metadata.resourceVersion ?? 0) - Number(a.metadata.resourceVersion ?? 0)
  );
}

/** An event's time: the last time it happened (events.k8s.io's eventTime for ones that only carry that). */
export function eventTime(event: KubeObject): number {
  const e = event as { lastTimestamp?: string; eventTime?: string; firstTimestamp?: string };
  const text = e.lastTimestamp || e.eventTime || e.firstTimestamp || event.metadata.creationTimestamp;
  return text ? Date.parse(text) : 0;
}

/** Whether two versions of an object name the same owners (and keep the same uid). */
function sameOwnerUids(a: KubeObject, b: KubeObject): boolean {
  if (a.metadata.uid !== b.metadata.uid) return false;
  const x = a.metadata.ownerReferences ?? [];
  const y = b.metadata.ownerReferences ?? [];
  return x.length === y.length && x.every((ref, i) => ref.uid === y[i]!.uid);
}

function addTo(index: Map<string, Set<string>>, key: string, value: string): void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(value);
}

function removeFrom(index: Map<string, Set<string>>, key: string, value: string): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}

function byName(a: KubeObject, b: KubeObject): number {
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}

/** Creation time, then name: a lane's pods keep their places as others come and go. */
function byAge(a: KubeObject, b: KubeObject): number {
  const ta = a.metadata.creationTimestamp ?? '';
  const tb = b.metadata.creationTimestamp ?? '';
  if (ta !== tb) return ta < tb ? -1 : 1;
  return byName(a, b);
}

/** At most this many events are kept (`?maxEvents=N` sets another bound); the oldest go first. */
export const MAX_EVENTS = Number(new URLSearchParams(location.search).get('maxEvents')) || 10_000;

export class ClusterStore {
  private readonly objects = new Map<Kind, Map<string, KubeObject>>();
  private readonly byUid = new Map<string, KubeObject>();
  private readonly kindByUid = new Map<string, Kind>();
  private readonly children = new Map<string, Set<string>>();
  /** An owner's dependents of one kind by name, as uids: sorted again only when the set of them changes. */
  private readonly childrenByName = new Map<string, Map<Kind, string[]>>();
  private readonly podsByNode = new Map<string, Map<string, KubeObject>>();
  private readonly eventsByInvolved = new Map<string, Set<string>>();
  private readonly sortedLanes = new Map<string, KubeObject[]>();
  private sortedEvents: KubeObject[] | undefined;
  /** Events taken out and put in since `sortedEvents` was last brought up to date. */
  private readonly eventsOut = new Set<KubeObject>();
  private eventsIn: KubeObject[] = [];

  private queue: Change[] = [];
  private pendingTopics = new Set<string>();
  private frame: number | undefined;
  private fallback: ReturnType<typeof setTimeout> | undefined;
  private readonly listeners = new Map<string, Set<() => void>>();
  private readonly feeds = new Map<Kind, FeedState>();

  constructor() {
    for (const kind of Object.keys(RESOURCES) as Kind[]) this.objects.set(kind, new Map());
  }

  // --- reading ---

  list(kind: Kind): Iterable<KubeObject> {
    return this.objects.get(kind)!.values();
  }

  count(kind: Kind): number {
    return this.objects.get(kind)!.size;
  }

  get(kind: Kind, key: string): KubeObject | undefined {
    return this.objects.get(kind)!.get(key);
  }

  byId(uid: string): { kind: Kind; object: KubeObject } | undefined {
    const object = this.byUid.get(uid);
    const kind = this.kindByUid.get(uid);
    return object && kind ? { kind, object } : undefined;
  }

  /** The objects whose ownerReferences name `uid`. */
  dependents(uid: string): Array<{ kind: Kind; object: KubeObject }> {
    const out: Array<{ kind: Kind; object: KubeObject }> = [];
    for (const child of this.children.get(uid) ?? []) {
      const found = this.byId(child);
      if (found) out.push(found);
    }
    return out;
  }

  /**
   * The first `limit` dependents of `uid` of one kind by name, and how many there are. A status change of one of
   * a ReplicaSet's 5,000 pods costs `limit` lookups, not a sort of them all.
   */
  dependentsByName(uid: string, kind: Kind, limit = Number.POSITIVE_INFINITY): { first: KubeObject[]; total: number } {
    let byKind = this.childrenByName.get(uid);
    if (!byKind) this.childrenByName.set(uid, (byKind = new Map()));
    let sorted = byKind.get(kind);
    if (!sorted) {
      sorted = this.dependents(uid)
        .filter((d) => d.kind === kind)
        .map((d) => d.object)
        .sort(byName)
        .map((o) => o.metadata.uid!);
      byKind.set(kind, sorted);
    }
    const first: KubeObject[] = [];
    for (const child of sorted) {
      if (first.length >= limit) break;
      const found = this.byUid.get(child);
      if (found) first.push(found);
    }
    return { first, total: sorted.length };
  }

  /** The pods bound to a node ('' for those not scheduled yet), oldest first. */
  podsOn(node: string): KubeObject[] {
    let sorted = this.sortedLanes.get(node);
    if (!sorted) {
      sorted = [...(this.podsByNode.get(node)?.values() ?? [])].sort(byAge);
      this.sortedLanes.set(node, sorted);
    }
    return sorted;
  }

  /** Names of the nodes pods are bound to, including ones the Node list does not have (deleted nodes). */
  laneNames(): string[] {
    return [...this.podsByNode.keys()];
  }

  /**
   * Every kept event, newest first. Kept sorted across frames: the events changed since the last call are taken
   * out and merged back in (a busy cluster adds a few per frame to thousands).
   */
  events(): KubeObject[] {
    if (!this.sortedEvents) this.sortedEvents = [...this.list('Event')].sort(newestFirst);
    else if (this.eventsOut.size > 0 || this.eventsIn.length > 0) {
      const kept =
        this.eventsOut.size > 0 ? this.sortedEvents.filter((e) => !this.eventsOut.has(e)) : this.sortedEvents;
      const added = this.eventsIn.filter((e) => this.get('Event', keyOf(e)) === e).sort(newestFirst);
      const merged: KubeObject[] = [];
      let i = 0;
      let j = 0;
      while (i < kept.length || j < added.length) {
        if (j >= added.length || (i < kept.length && newestFirst(kept[i]!, added[j]!) <= 0)) merged.push(kept[i++]!);
        else merged.push(added[j++]!);
      }
      this.sortedEvents = merged;
    }
    this.eventsOut.clear();
    this.eventsIn = [];
    return this.sortedEvents;
  }

  eventsOf(uid: string): KubeObject[] {
    const out: KubeObject[] = [];
    for (const key of this.eventsByInvolved.get(uid) ?? []) {
      const event = this.get('Event', key);
      if (event) out.push(event);
    }
    return out.sort(newestFirst);
  }

  feed(kind: Kind): FeedState | undefined {
    return this.feeds.get(kind);
  }

  // --- subscribing ---

  /**
   * Topics: `kind:Pod` (any pod), `key:Pod/NS/NAME` (the object of that name, whatever its uid), `node:NAME` (the node or its pods), `owner:UID` (an object's dependents),
   * `uid:UID` (one object), `events` (the feed), `events:UID` (one object's events), `feeds` (reflector states).
   */
  subscribe(topic: string, listener: () => void): () => void {
    let set = this.listeners.get(topic);
    if (!set) this.listeners.set(topic, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(topic);
    };
  }

  setFeed(kind: Kind, state: FeedState): void {
    this.feeds.set(kind, state);
    this.pendingTopics.add('feeds');
    this.schedule();
  }

  // --- writing (reflectors) ---

  /** A watch event; applied with the others of this frame. */
  enqueue(kind: Kind, type: WatchType, object: KubeObject): void {
    this.queue.push({ kind, type, object });
    this.schedule();
  }

  /** A (re)list: the objects of `kind` are these, from now on. */
  reset(kind: Kind, objects: KubeObject[]): void {
    this.queue.push({ kind, type: 'RESET', objects });
    this.schedule();
  }

  private schedule(): void {
    if (this.frame !== undefined) return;
    this.frame = requestAnimationFrame(() => this.flush());
    // A hidden tab gets no animation frames: apply the queue anyway now and then, so it does not grow unbounded.
    this.fallback = setTimeout(() => this.flush(), 1000);
  }

  /** Applies every queued change, then tells the views whose data changed. */
  flush(): void {
    if (this.frame !== undefined) cancelAnimationFrame(this.frame);
    clearTimeout(this.fallback);
    this.frame = undefined;
    const queue = this.queue;
    this.queue = [];
    const changed = this.pendingTopics;
    this.pendingTopics = new Set();
    for (const change of queue) {
      if (change.type === 'RESET') this.applyReset(change.kind, change.objects ?? [], changed);
      else this.apply(change.kind, change.type, change.object!, changed);
    }
    this.trimEvents(changed);
    this.notify(changed);
  }

  private notify(changed: Set<string>): void {
    for (const topic of changed) for (const listener of this.listeners.get(topic) ?? []) listener();
  }

  private applyReset(kind: Kind, objects: KubeObject[], changed: Set<string>): void {
    const fresh = new Set(objects.map(keyOf));
    for (const [key, old] of this.objects.get(kind)!) if (!fresh.has(key)) this.apply(kind, 'DELETED', old, changed);
    for (const obj of objects) this.apply(kind, 'ADDED', obj, changed);
  }

  private apply(kind: Kind, type: WatchType, incoming: KubeObject, changed: Set<string>): void {
    const map = this.objects.get(kind)!;
    const key = keyOf(incoming);
    const old = map.get(key);
    // List items carry no kind; watch events do. Every kept object says what it is.
    const obj = incoming.kind ? incoming : { ...incoming, kind };
    // Most changes are of status: the object keeps its owners, and its owners' sorted dependents stay valid.
    const sameOwners = old !== undefined && type !== 'DELETED' && sameOwnerUids(old, obj);
    if (old) this.unindex(kind, old, changed, sameOwners);
    if (type === 'DELETED') map.delete(key);
    else {
      map.set(key, obj);
      this.index(kind, obj, changed, sameOwners);
    }
    changed.add(`kind:${kind}`);
    changed.add(`key:${kind}/${key}`);
    const uid = obj.metadata.uid ?? old?.metadata.uid;
    if (uid) changed.add(`uid:${uid}`);
  }

  private index(kind: Kind, obj: KubeObject, changed: Set<string>, sameOwners: boolean): void {
    const uid = obj.metadata.uid;
    if (uid) {
      this.byUid.set(uid, obj);
      this.kindByUid.set(uid, kind);
      for (const ref of obj.metadata.ownerReferences ?? []) {
        if (!sameOwners) {
          addTo(this.children, ref.uid, uid);
          this.childrenByName.get(ref.uid)?.delete(kind);
        }
        changed.add(`owner:${ref.uid}`);
      }
    }
    if (kind === 'Pod') {
      const node = nodeOf(obj);
      let lane = this.podsByNode.get(node);
      if (!lane) this.podsByNode.set(node, (lane = new Map()));
      lane.set(uid ?? keyOf(obj), obj);
      this.sortedLanes.delete(node);
      changed.add(`node:${node}`);
      changed.add('lanes');
    } else if (kind === 'Node') changed.add(`node:${obj.metadata.name}`);
    else if (kind === 'Event') {
      const involved = involvedUid(obj);
      if (involved) {
        addTo(this.eventsByInvolved, involved, keyOf(obj));
        changed.add(`events:${involved}`);
      }
      if (this.sortedEvents) this.eventsIn.push(obj);
      changed.add('events');
    }
  }

  private unindex(kind: Kind, obj: KubeObject, changed: Set<string>, sameOwners: boolean): void {
    const uid = obj.metadata.uid;
    if (uid) {
      this.byUid.delete(uid);
      this.kindByUid.delete(uid);
      for (const ref of obj.metadata.ownerReferences ?? []) {
        if (!sameOwners) {
          removeFrom(this.children, ref.uid, uid);
          this.childrenByName.get(ref.uid)?.delete(kind);
        }
        changed.add(`owner:${ref.uid}`);
      }
    }
    if (kind === 'Pod') {
      const node = nodeOf(obj);
      const lane = this.podsByNode.get(node);
      lane?.delete(uid ?? keyOf(obj));
      if (lane?.size === 0) {
        this.podsByNode.delete(node);
        changed.add('lanes');
      }
      this.sortedLanes.delete(node);
      changed.add(`node:${node}`);
    } else if (kind === 'Node') changed.add(`node:${obj.metadata.name}`);
    else if (kind === 'Event') {
      const involved = involvedUid(obj);
      if (involved) {
        removeFrom(this.eventsByInvolved, involved, keyOf(obj));
        changed.add(`events:${involved}`);
      }
      if (this.sortedEvents) this.eventsOut.add(obj);
      changed.add('events');
    }
  }

  private trimEvents(changed: Set<string>): void {
    const events = this.objects.get('Event')!;
    // Trimmed in steps, so that a flood of events does not sort them all every frame.
    if (events.size <= MAX_EVENTS * 1.1) return;
    const oldest = [...events.values()].sort((a, b) => eventTime(a) - eventTime(b));
    for (const event of oldest.slice(0, events.size - MAX_EVENTS)) this.apply('Event', 'DELETED', event, changed);
  }
}

export const store = new ClusterStore();
