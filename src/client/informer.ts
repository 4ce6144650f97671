import { ApiError } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import type { Clock, TimerHandle } from '../clock/clock.js';
import type { Gvr, KubeClient } from './client.js';

export interface EventHandlers {
  add?(obj: KubeObject): void;
  update?(oldObj: KubeObject, newObj: KubeObject): void;
  delete?(obj: KubeObject): void;
}

export type IndexFunc = (obj: KubeObject) => readonly string[];

/**
 * A view an informer keeps current with its cache, as client-go keeps its indexers: told of every change to the
 * cache (a list, a watch event, a relist's deletions) as it is made, before any event handler runs, so that what it
 * derives is never behind the objects the handlers and reconciles read. `old` and `next` are the cached versions
 * before and after (undefined: absent); objects are shared, never to be changed.
 */
export interface CacheIndex {
  changed(key: string, old: KubeObject | undefined, next: KubeObject | undefined): void;
}

const NAMESPACE_INDEX = 'namespace';

/**
 * `namespace/name` (or the name of a cluster-scoped object): the key of the cache and of what components keep
 * per object. Joined rather than concatenated, so that it is one flat string: a concatenation is a rope that keeps
 * its pieces, and maps hash and compare a flat key faster.
 */
export function cacheKey(obj: KubeObject): string {
  return obj.metadata.namespace ? [obj.metadata.namespace, obj.metadata.name].join('/') : obj.metadata.name!;
}

/**
 * What a component reads and hears of one resource: the cache, its indexes and its events. Objects are shared with
 * every other reader of the cache (and the store): never change them.
 */
export interface Informer {
  readonly gvr: Gvr;
  addEventHandler(handlers: EventHandlers): void;
  addIndex(name: string, fn: IndexFunc): void;
  addCacheIndex(index: CacheIndex): void;
  byIndex(name: string, value: string): KubeObject[];
  get(namespace: string | undefined, name: string): KubeObject | undefined;
  list(): KubeObject[];
  listNamespace(namespace: string): KubeObject[];
  readonly hasSynced: boolean;
  waitForSync(): Promise<void>;
  start(): Promise<void>;
  stop(): void;
}

/** Where a component gets its informers: `for` makes or finds the resource's; start lists and syncs them. */
export interface InformerFactory {
  for(gvr: Gvr): Informer;
  start(): Promise<void>;
  stop(): void;
}

/**
 * List + watch with a local cache, like client-go's shared informer: lists, then watches from the list's
 * resourceVersion, re-watches from the last seen version when a watch ends, relists on 410 Expired, and
 * replays the cache to handlers on each resync. Objects in the cache are shared: never change them.
 */
export class SharedInformer implements Informer {
  private readonly cache = new Map<string, KubeObject>();
  /** Replaced, never changed in place: a delivery goes on over the list it began with when a handler comes or goes. */
  private handlers: readonly EventHandlers[] = [];
  private readonly indexers = new Map<string, { fn: IndexFunc; index: Map<string, Set<string>> }>();
  private cacheIndexes: readonly CacheIndex[] = [];
  private lastResourceVersion = '0';
  private stopped = true;
  private synced = false;
  private watchHandle?: { stop(): void };
  private resyncTimer?: TimerHandle;
  private readonly syncWaiters: Array<() => void> = [];
  /** How long the next list after a failure waits: doubled while the server stays away (client-go's backoff). */
  private retryMs = RETRY_FIRST_MS;
  private retryTimer?: TimerHandle;

  constructor(
    private readonly client: KubeClient,
    readonly gvr: Gvr,
    private readonly clock: Clock,
    private readonly options: {
      namespace?: string;
      labelSelector?: string;
      fieldSelector?: string;
      resyncMs?: number;
      /** Told of an error an event handler threw (the others are told of the event all the same); unset: thrown. */
      onHandlerError?: (error: unknown) => void;
    } = {},
  ) {
    this.addIndex(NAMESPACE_INDEX, (obj) => [obj.metadata.namespace ?? '']);
  }

  addEventHandler(handlers: EventHandlers): void {
    this.handlers = [...this.handlers, handlers];
    if (this.synced) for (const obj of this.cache.values()) handlers.add?.(obj);
  }

  removeEventHandler(handlers: EventHandlers): void {
    this.handlers = this.handlers.filter((h) => h !== handlers);
  }

  /** Adds a secondary index (e.g. pods by owner uid, by node name). */
  addIndex(name: string, fn: IndexFunc): void {
    const index = new Map<string, Set<string>>();
    this.indexers.set(name, { fn, index });
    for (const [key, obj] of this.cache) for (const value of fn(obj)) addTo(index, value, key);
  }

  /** Keeps `index` current with the cache from now on (it is first told of every object cached already). */
  addCacheIndex(index: CacheIndex): void {
    this.cacheIndexes = [...this.cacheIndexes, index];
    for (const [key, obj] of this.cache) index.changed(key, undefined, obj);
  }

  removeCacheIndex(index: CacheIndex): void {
    this.cacheIndexes = this.cacheIndexes.filter((i) => i !== index);
  }

  byIndex(name: string, value: string): KubeObject[] {
    const keys = this.indexers.get(name)?.index.get(value);
    if (!keys) return [];
    const out: KubeObject[] = [];
    for (const k of keys) {
      const obj = this.cache.get(k);
      if (obj) out.push(obj);
    }
    return out;
  }

  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.cache.get(namespace ? [namespace, name].join('/') : name);
  }

  list(): KubeObject[] {
    return [...this.cache.values()];
  }

  /** Objects of one namespace, from the namespace index every informer keeps (client-go's NamespaceIndex). */
  listNamespace(namespace: string): KubeObject[] {
    return this.byIndex(NAMESPACE_INDEX, namespace);
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves once the first list has been loaded into the cache. */
  waitForSync(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    try {
      await this.relist();
    } catch (err) {
      // The server is not answering yet (over HTTP): started means synced, however long the server takes. A
      // request the server refuses (403, 404) fails the start as before.
      if (err instanceof ApiError && err.code < 500 && err.code !== 429) throw err;
      this.relistLater();
      await this.waitForSync();
    }
    if (this.options.resyncMs) this.scheduleResync(this.options.resyncMs);
  }

  stop(): void {
    this.stopped = true;
    this.watchHandle?.stop();
    this.resyncTimer?.cancel();
    this.retryTimer?.cancel();
  }

  private scheduleResync(ms: number): void {
    this.resyncTimer = this.clock.setTimer(ms, () => {
      if (this.stopped) return;
      for (const obj of this.cache.values()) for (const h of this.handlers) h.update?.(obj, obj);
      this.scheduleResync(ms);
    });
  }

  private async relist(): Promise<void> {
    if (this.stopped) return;
    const list = await this.client.list(this.gvr, this.options.namespace, {
      labelSelector: this.options.labelSelector,
      fieldSelector: this.options.fieldSelector,
    });
    const seen = new Set<string>();
    for (const obj of list.items) {
      const key = cacheKey(obj);
      seen.add(key);
      this.apply('MODIFIED', obj);
    }
    for (const [key, obj] of [...this.cache]) if (!seen.has(key)) this.apply('DELETED', obj);
    this.lastResourceVersion = list.metadata.resourceVersion;
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters.splice(0)) w();
    }
    this.watch();
  }

  private watch(): void {
    if (this.stopped) return;
    this.watchHandle = this.client.watch(
      this.gvr,
      this.options.namespace,
      {
        resourceVersion: this.lastResourceVersion,
        labelSelector: this.options.labelSelector,
        fieldSelector: this.options.fieldSelector,
      },
      (type, obj) => {
        if (obj.metadata.resourceVersion) this.lastResourceVersion = obj.metadata.resourceVersion;
        if (type !== 'BOOKMARK') this.apply(type, obj);
      },
      (error) => {
        if (this.stopped) return;
        if (error instanceof ApiError && error.code === 410) void this.relist().catch(() => this.relistLater());
        else if (error) this.relistLater();
        else this.watch();
      },
    );
  }

  /**
   * After a failed watch or list (the API server away, over HTTP): lists again after a wait, doubled per failure up
   * to 30 s, so that an informer outlives a restart of its server rather than giving up after one try.
   */
  private relistLater(): void {
    const wait = this.retryMs;
    this.retryMs = Math.min(wait * 2, RETRY_MAX_MS);
    this.retryTimer = this.clock.setTimer(wait, () => {
      if (this.stopped) return;
      this.relist().then(
        () => (this.retryMs = RETRY_FIRST_MS),
        () => this.relistLater(),
      );
    });
  }

  private apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: KubeObject): void {
    const key = cacheKey(obj);
    const old = this.cache.get(key);
    if (type === 'DELETED') {
      if (!old) return;
      this.cache.delete(key);
      this.reindex(key, old, undefined);
      this.deliver(undefined, obj);
      return;
    }
    if (old && old.metadata.resourceVersion === obj.metadata.resourceVersion) return;
    this.cache.set(key, obj);
    this.reindex(key, old, obj);
    this.deliver(old, obj, true);
  }

  /**
   * Tells every handler, each whatever another threw (the handlers of several components share the informer): an
   * error goes to onHandlerError, or without one the first is thrown once all have heard. `present` false: `obj`
   * was deleted.
   */
  private deliver(old: KubeObject | undefined, obj: KubeObject, present = false): void {
    let failure: { error: unknown } | undefined;
    for (const h of this.handlers) {
      try {
        if (!present) h.delete?.(obj);
        else if (old) h.update?.(old, obj);
        else h.add?.(obj);
      } catch (error) {
        if (this.options.onHandlerError) this.options.onHandlerError(error);
        else failure ??= { error };
      }
    }
    if (failure) throw failure.error;
  }

  private reindex(key: string, old: KubeObject | undefined, next: KubeObject | undefined): void {
    for (const index of this.cacheIndexes) index.changed(key, old, next);
    for (const { fn, index } of this.indexers.values()) {
      const before = old ? fn(old) : NO_VALUES;
      const after = next ? fn(next) : NO_VALUES;
      // Most updates (status, heartbeats) keep every indexed value: nothing to move.
      if (sameValues(before, after)) continue;
      for (const v of before) removeFrom(index, v, key);
      for (const v of after) addTo(index, v, key);
    }
  }
}

const NO_VALUES: readonly string[] = [];
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

function sameValues(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function addTo(index: Map<string, Set<string>>, value: string, key: string): void {
  let set = index.get(value);
  if (!set) index.set(value, (set = new Set()));
  set.add(key);
}

function removeFrom(index: Map<string, Set<string>>, value: string, key: string): void {
  const set = index.get(value);
  if (!set) return;
  set.delete(key);
  if (set.size === 0) index.delete(value);
}

/**
 * One informer per resource, shared by every component given it (client-go's SharedInformerFactory): each kind is
 * listed, watched and cached once however many components read it. Components do not use it directly but through
 * `component()`, so that one stopping takes its handlers away and lets go of its informers without stopping anyone
 * else's: an informer runs while some component holds it.
 */
export class SharedInformers {
  private readonly informers = new Map<string, { informer: SharedInformer; holders: number }>();

  /** `onHandlerError`: where an error an event handler throws is told (unset: thrown where the watch delivers). */
  constructor(
    private readonly client: KubeClient,
    private readonly clock: Clock,
    private readonly onHandlerError?: (gvr: Gvr, error: unknown) => void,
  ) {}

  /** The resource's informer (made on first use, not started). */
  informer(gvr: Gvr): SharedInformer {
    return this.entry(gvr).informer;
  }

  private entry(gvr: Gvr): { informer: SharedInformer; holders: number } {
    const key = `${gvr.group}/${gvr.version}/${gvr.resource}`;
    let entry = this.informers.get(key);
    if (!entry) {
      const onHandlerError = this.onHandlerError && ((error: unknown) => this.onHandlerError!(gvr, error));
      const informer = new SharedInformer(this.client, gvr, this.clock, { onHandlerError });
      this.informers.set(key, (entry = { informer, holders: 0 }));
    }
    return entry;
  }

  /** A component's share: the informers it asks for, which it holds from its start to its stop. */
  component(): InformerFactory {
    return new ComponentInformers(this);
  }

  /** Starts (or keeps running) the resource's informer for one more holder. */
  hold(gvr: Gvr): Promise<void> {
    const entry = this.entry(gvr);
    entry.holders++;
    return entry.informer.start();
  }

  /** One holder fewer: the last one's leaving stops the informer (its cache stays, to be relisted on a new start). */
  release(gvr: Gvr): void {
    const entry = this.entry(gvr);
    if (entry.holders > 0 && --entry.holders === 0) entry.informer.stop();
  }

  /** How many components hold each running informer, by group/version/resource. */
  holders(): Map<string, number> {
    return new Map([...this.informers].filter(([, e]) => e.holders > 0).map(([k, e]) => [k, e.holders]));
  }

  stop(): void {
    for (const entry of this.informers.values()) {
      entry.holders = 0;
      entry.informer.stop();
    }
  }
}

/** What one component registered on the shared informers, to take back when it stops. */
class ComponentInformers implements InformerFactory {
  private readonly views = new Map<string, ComponentInformer>();

  constructor(private readonly shared: SharedInformers) {}

  for(gvr: Gvr): Informer {
    const key = `${gvr.group}/${gvr.version}/${gvr.resource}`;
    let view = this.views.get(key);
    if (!view) this.views.set(key, (view = new ComponentInformer(this.shared, gvr)));
    return view;
  }

  async start(): Promise<void> {
    await Promise.all([...this.views.values()].map((v) => v.start()));
  }

  stop(): void {
    for (const view of this.views.values()) view.detach();
  }
}

/**
 * A component's view of a shared informer: reads go to the shared cache; its handlers and cache indexes are
 * attached when the component starts (not while it is being built: a synced informer tells a new handler of every
 * object at once, as it would tell a component's own informer on its start) and taken away when it stops.
 */
class ComponentInformer implements Informer {
  private readonly informer: SharedInformer;
  private readonly handlers: EventHandlers[] = [];
  private readonly cacheIndexes: CacheIndex[] = [];
  private attached = false;
  private held = false;

  constructor(
    private readonly shared: SharedInformers,
    readonly gvr: Gvr,
  ) {
    this.informer = shared.informer(gvr);
  }

  addEventHandler(handlers: EventHandlers): void {
    this.handlers.push(handlers);
    if (this.attached) this.informer.addEventHandler(handlers);
  }

  addIndex(name: string, fn: IndexFunc): void {
    this.informer.addIndex(name, fn);
  }

  addCacheIndex(index: CacheIndex): void {
    this.cacheIndexes.push(index);
    if (this.attached) this.informer.addCacheIndex(index);
  }

  byIndex(name: string, value: string): KubeObject[] {
    return this.informer.byIndex(name, value);
  }

  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.informer.get(namespace, name);
  }

  list(): KubeObject[] {
    return this.informer.list();
  }

  listNamespace(namespace: string): KubeObject[] {
    return this.informer.listNamespace(namespace);
  }

  get hasSynced(): boolean {
    return this.informer.hasSynced;
  }

  waitForSync(): Promise<void> {
    return this.informer.waitForSync();
  }

  /** Attaches what the component added, holds the informer (once) and resolves when its cache is synced. */
  async start(): Promise<void> {
    if (!this.attached) {
      this.attached = true;
      for (const index of this.cacheIndexes) this.informer.addCacheIndex(index);
      for (const h of this.handlers) this.informer.addEventHandler(h);
    }
    if (!this.held) {
      this.held = true;
      await this.shared.hold(this.gvr);
    }
    await this.informer.waitForSync();
  }

  /** Lets go of the informer; handlers stay, to hear of the kind again should it start again (garbage collector). */
  stop(): void {
    if (!this.held) return;
    this.held = false;
    this.shared.release(this.gvr);
  }

  /** The component stopped: its handlers and cache indexes go, and its hold. */
  detach(): void {
    if (this.attached) {
      for (const h of this.handlers) this.informer.removeEventHandler(h);
      for (const i of this.cacheIndexes) this.informer.removeCacheIndex(i);
    }
    this.handlers.length = 0;
    this.cacheIndexes.length = 0;
    this.attached = false;
    this.stop();
  }
}
