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
 * List + watch with a local cache, like client-go's shared informer: lists, then watches from the list's
 * resourceVersion, re-watches from the last seen version when a watch ends, relists on 410 Expired, and
 * replays the cache to handlers on each resync. Objects in the cache are shared: never change them.
 */
export class Informer {
  private readonly cache = new Map<string, KubeObject>();
  private readonly handlers: EventHandlers[] = [];
  private readonly indexers = new Map<string, { fn: IndexFunc; index: Map<string, Set<string>> }>();
  private readonly cacheIndexes: CacheIndex[] = [];
  private lastResourceVersion = '0';
  private stopped = true;
  private synced = false;
  private watchHandle?: { stop(): void };
  private resyncTimer?: TimerHandle;
  private readonly syncWaiters: Array<() => void> = [];

  constructor(
    private readonly client: KubeClient,
    readonly gvr: Gvr,
    private readonly clock: Clock,
    private readonly options: {
      namespace?: string;
      labelSelector?: string;
      fieldSelector?: string;
      resyncMs?: number;
    } = {},
  ) {
    this.addIndex(NAMESPACE_INDEX, (obj) => [obj.metadata.namespace ?? '']);
  }

  addEventHandler(handlers: EventHandlers): void {
    this.handlers.push(handlers);
    if (this.synced) for (const obj of this.cache.values()) handlers.add?.(obj);
  }

  /** Adds a secondary index (e.g. pods by owner uid, by node name). */
  addIndex(name: string, fn: IndexFunc): void {
    const index = new Map<string, Set<string>>();
    this.indexers.set(name, { fn, index });
    for (const [key, obj] of this.cache) for (const value of fn(obj)) addTo(index, value, key);
  }

  /** Keeps `index` current with the cache from now on (it is first told of every object cached already). */
  addCacheIndex(index: CacheIndex): void {
    this.cacheIndexes.push(index);
    for (const [key, obj] of this.cache) index.changed(key, undefined, obj);
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
    await this.relist();
    if (this.options.resyncMs) this.scheduleResync(this.options.resyncMs);
  }

  stop(): void {
    this.stopped = true;
    this.watchHandle?.stop();
    this.resyncTimer?.cancel();
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
        if (error instanceof ApiError && error.code === 410) void this.relist();
        else if (error) this.clock.setTimer(1000, () => void this.relist().catch(() => undefined));
        else this.watch();
      },
    );
  }

  private apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: KubeObject): void {
    const key = cacheKey(obj);
    const old = this.cache.get(key);
    if (type === 'DELETED') {
      if (!old) return;
      this.cache.delete(key);
      this.reindex(key, old, undefined);
      for (const h of this.handlers) h.delete?.(obj);
      return;
    }
    if (old && old.metadata.resourceVersion === obj.metadata.resourceVersion) return;
    this.cache.set(key, obj);
    this.reindex(key, old, obj);
    for (const h of this.handlers) {
      if (old) h.update?.(old, obj);
      else h.add?.(obj);
    }
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

/** One informer per resource shared by every controller, so each kind is listed and watched once. */
export class SharedInformers {
  private readonly informers = new Map<string, Informer>();

  constructor(
    private readonly client: KubeClient,
    private readonly clock: Clock,
  ) {}

  for(gvr: Gvr): Informer {
    const key = `${gvr.group}/${gvr.version}/${gvr.resource}`;
    let informer = this.informers.get(key);
    if (!informer) this.informers.set(key, (informer = new Informer(this.client, gvr, this.clock)));
    return informer;
  }

  async start(): Promise<void> {
    await Promise.all([...this.informers.values()].map((i) => i.start()));
  }

  stop(): void {
    for (const i of this.informers.values()) i.stop();
  }
}
