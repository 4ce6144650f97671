import { Etcd3, type IKeyValue, type IWatchResponse } from 'etcd3';
import { ApiError, Errors, type GroupResource } from '../api/errors.js';
import { wallClock, type TimerHandle } from '../clock/clock.js';
import type { KubeObject, Preconditions } from '../api/types.js';
import { sameIgnoringVersion, type MemoryStore, type StoreWrites } from './memory-store.js';
import type { StoreEvent } from './watch.js';

/**
 * etcd as the source of truth (`sim serve --etcd-servers`), with the in-memory store as the watch cache in front of
 * it, as kube-apiserver's cacher is: every write is one etcd transaction on the object's key (a create compares its
 * create_revision with 0, an update or delete its mod_revision with the resourceVersion it started from, so
 * optimistic locking holds across API server processes), and every process learns every change, its own included,
 * from one etcd watch on the key prefix, which replays it into the cache in etcd's revision order. resourceVersion
 * is etcd's mod_revision. A write answers once the cache holds it, so a process reads its own writes.
 *
 * Keys are kube-apiserver's: `<prefix>/<resource>/<namespace>/<name>` (cluster-scoped: no namespace), with its
 * special prefixes (nodes under `minions`, Services under `services/specs`, Endpoints under `services/endpoints`)
 * and `<group>/<resource>` for custom resources and the apiextensions and apiregistration groups. Values are JSON
 * without the resourceVersion, as kube-apiserver writes custom resources (built-in kinds it writes as protobuf).
 *
 * This talks to a real etcd over the network, so its timeouts are wall-clock ones (wallClock), not the cluster's
 * Clock: a virtual clock standing still must not stop a consistent read from finding out etcd's revision.
 */
export interface EtcdStoreOptions {
  /** Client URLs of the etcd members (kube-apiserver's --etcd-servers). */
  endpoints: string[];
  /** Key prefix (--etcd-prefix, default /registry). */
  prefix: string;
  /** How often one of the API servers compacts etcd's history (--etcd-compaction-interval; 0: never). */
  compactionIntervalMs: number;
  log?: (level: 'error' | 'warn' | 'info' | 'debug', message: string) => void;
}

/** kube-apiserver's compactor coordinates through this key (outside the prefix), so one API server compacts per interval. */
const COMPACT_REV_KEY = 'compact_rev_key';

/** kube-apiserver's prefixes that are not the resource's name (pkg/kubeapiserver/default_storage_factory_builder.go). */
const SPECIAL_PREFIXES: Record<string, string> = {
  '/replicationcontrollers': 'controllers',
  '/endpoints': 'services/endpoints',
  '/nodes': 'minions',
  '/services': 'services/specs',
  'extensions/ingresses': 'ingress',
  'networking.k8s.io/ingresses': 'ingress',
};

/** Groups stored under `<group>/<resource>` although they are Kubernetes' own. */
const GROUP_PREFIXED = new Set(['apiextensions.k8s.io', 'apiregistration.k8s.io']);

/**
 * The part of a resource's keys between the prefix and the namespace: Kubernetes' own groups (no dot, or *.k8s.io)
 * are stored under the resource's name, other groups (custom resources) under `<group>/<resource>`.
 */
export function resourcePrefix(resourceKey: string, gr: GroupResource): string {
  const special = SPECIAL_PREFIXES[resourceKey];
  if (special) return special;
  const { group, resource } = gr;
  if (GROUP_PREFIXED.has(group)) return `${group}/${resource}`;
  if (group === '' || !group.includes('.') || group.endsWith('.k8s.io')) return resource;
  return `${group}/${resource}`;
}

/** The key after the last key with this prefix: etcd's range end for "every key with the prefix". */
function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]!++;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** A gRPC failure in one line (grpc-js appends an empty "Resolution note"). */
function grpcMessage(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/\s*Resolution note:\s*$/, '');
}

interface Waiter {
  revision: number;
  resolve: (event: StoreEvent | undefined) => void;
}

/** Events kept by revision for writes whose transaction answered after the watch brought their change. */
const RECENT_EVENTS = 4096;
/** A process reads its own writes within this long or the write fails (the watch is down and etcd unreachable). */
const WRITE_VISIBLE_MS = 60_000;
/** How often a consistent read asks etcd again for its watch's progress (etcd answers only once the watch caught up). */
const PROGRESS_RETRY_MS = 20;
const RECONNECT_MS = 250;
/** A request etcd has not answered in this long fails (quorum lost): 500, as kube-apiserver answers etcd's errors. */
const RPC_DEADLINE_MS = 20_000;
/** An update re-reads and retries at most this often when other processes keep winning the race for the object. */
const MAX_ATTEMPTS = 64;

/** The objects under the prefix at one revision, as start-up reads them. */
export interface EtcdSnapshot {
  revision: number;
  kvs: IKeyValue[];
}

export class EtcdStore implements StoreWrites {
  private readonly prefix: Buffer;
  private readonly prefixText: string;
  private readonly end: Buffer;
  /** resource key → `<prefix>/<resource prefix>/`, and back (rebuilt when a resource is missing). */
  private readonly keyPrefixes = new Map<string, string>();
  private resourcesByPrefix = new Map<string, string>();
  private waiters: Waiter[] = [];
  private readonly recent = new Map<number, StoreEvent>();
  private stream: Awaited<ReturnType<Etcd3['watchClient']['watch']>> | undefined;
  private closed = false;
  private compactTimer: TimerHandle | undefined;
  private progressTimer: TimerHandle | undefined;

  private constructor(
    private readonly client: Etcd3,
    private readonly options: EtcdStoreOptions,
    private store: MemoryStore,
  ) {
    const prefix = options.prefix.endsWith('/') ? options.prefix : `${options.prefix}/`;
    this.prefixText = prefix;
    this.prefix = Buffer.from(prefix);
    this.end = prefixEnd(this.prefix);
  }

  /** Connects and reads everything under the prefix at one revision (the cache is filled from it by the caller). */
  static async connect(
    options: EtcdStoreOptions,
  ): Promise<{ attach: (store: MemoryStore) => EtcdStore; snapshot: EtcdSnapshot }> {
    const client = new Etcd3({ hosts: options.endpoints, dialTimeout: 5000 });
    const pending = new EtcdStore(client, options, undefined as unknown as MemoryStore);
    let snapshot: EtcdSnapshot;
    try {
      snapshot = await pending.readAll();
    } catch (err) {
      client.close();
      const cause = err instanceof ApiError && err.cause !== undefined ? err.cause : err;
      throw new Error(`cannot reach etcd at ${options.endpoints.join(',')}: ${grpcMessage(cause)}`);
    }
    return {
      snapshot,
      attach: (store) => {
        pending.store = store;
        return pending;
      },
    };
  }

  /** Every key under the prefix at one revision, a page at a time. */
  private async readAll(): Promise<EtcdSnapshot> {
    const kvs: IKeyValue[] = [];
    let from = this.prefix;
    let revision = 0;
    for (;;) {
      const page = await this.rpc('range', (o) =>
        this.client.kv.range({ key: from, range_end: this.end, limit: 1000, ...(revision > 0 ? { revision } : {}) }, o),
      );
      if (revision === 0) revision = Number(page.header.revision);
      kvs.push(...page.kvs);
      if (!page.more || page.kvs.length === 0) break;
      from = Buffer.concat([page.kvs[page.kvs.length - 1]!.key, Buffer.from([0])]);
    }
    return { revision, kvs };
  }

  /**
   * A value kept beside the cluster, just outside the prefix (`/registry.kube-sim/NAME`, so no resource's watch sees
   * it), made once: the first process to ask stores what `make` returns, in one create-if-absent transaction, and
   * every process, then and later, gets that value.
   */
  async createOnce(name: string, make: () => string): Promise<string> {
    const key = Buffer.from(`${this.prefixText.slice(0, -1)}.kube-sim/${name}`);
    const existing = await this.rpc('range', (o) => this.client.kv.range({ key }, o));
    if (existing.kvs[0]) return existing.kvs[0].value.toString('utf8');
    const value = Buffer.from(make());
    const result = await this.rpc('txn', (o) =>
      this.client.kv.txn(
        {
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
          success: [{ request_put: { key, value } }],
          failure: [{ request_range: { key } }],
        },
        o,
      ),
    );
    const stored = result.succeeded ? value : result.responses[0]?.response_range?.kvs[0]?.value;
    if (!stored) throw Errors.internal(`etcd: ${key.toString()} was neither created nor found`);
    return stored.toString('utf8');
  }

  /** Whether a key is one of kube-apiserver's allocator bitmaps (`<prefix>/ranges/…`), which hold no resource. */
  isRangeKey(key: Buffer): boolean {
    return key.toString('utf8').startsWith(`${this.prefixText}ranges/`);
  }

  /** What the last swap saw of each key it went over: the value and its mod_revision (0: absent). */
  private readonly swapped = new Map<string, { value: Buffer | undefined; revision: string }>();
  private swaps: Promise<unknown> = Promise.resolve();

  /**
   * A compare-and-swap of keys under the prefix that hold no resource (kube-apiserver's `ranges/serviceips` …):
   * `update` gets their values (undefined: absent) and returns new ones (or none, to leave them), and the transaction
   * commits only if etcd still holds what it was given; else it runs again on etcd's newer values, as
   * GuaranteedUpdate does. Resolves with update's result; what update throws is thrown.
   */
  swap<T>(
    names: readonly string[],
    update: (values: Array<Buffer | undefined>) => { values?: Buffer[]; result: T },
  ): Promise<T> {
    // One at a time in this process (kube-apiserver's allocator holds a lock around its update): concurrent swaps of
    // one process would otherwise only lose the race to each other, one round trip each.
    const next = this.swaps.then(() => this.swapNow(names, update));
    this.swaps = next.catch(() => undefined);
    return next;
  }

  private async swapNow<T>(
    names: readonly string[],
    update: (values: Array<Buffer | undefined>) => { values?: Buffer[]; result: T },
  ): Promise<T> {
    const keys = names.map((n) => Buffer.from(`${this.prefixText}${n}`));
    const read = (which: readonly string[]): Promise<void[]> =>
      Promise.all(
        which.map(async (name) => {
          const page = await this.rpc('range', (o) =>
            this.client.kv.range({ key: Buffer.from(`${this.prefixText}${name}`) }, o),
          );
          const kv = page.kvs[0];
          this.swapped.set(name, { value: kv?.value, revision: kv ? String(kv.mod_revision) : '0' });
        }),
      );
    const unknown = names.filter((n) => !this.swapped.has(n));
    if (unknown.length > 0) await read(unknown);
    // What the last swap saw may be behind another process's since: a decision taken without a transaction (an
    // error, or nothing to change) is taken again on values read now.
    let fresh = unknown.length === names.length;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const seen = names.map((n) => this.swapped.get(n)!);
      let decided: { values?: Buffer[]; result: T };
      try {
        decided = update(seen.map((s) => s.value));
      } catch (err) {
        if (fresh) throw err;
        await read(names);
        fresh = true;
        continue;
      }
      const { values, result } = decided;
      if (!values) {
        if (fresh) return result;
        await read(names);
        fresh = true;
        continue;
      }
      const outcome = await this.rpc('txn', (o) =>
        this.client.kv.txn(
          {
            compare: keys.map((key, i) =>
              seen[i]!.revision === '0'
                ? { key, target: 'Create' as const, result: 'Equal' as const, create_revision: 0 }
                : { key, target: 'Mod' as const, result: 'Equal' as const, mod_revision: seen[i]!.revision },
            ),
            success: keys.map((key, i) => ({ request_put: { key, value: values[i]! } })),
            failure: keys.map((key) => ({ request_range: { key } })),
          },
          o,
        ),
      );
      if (outcome.succeeded) {
        const revision = String(outcome.header.revision);
        names.forEach((n, i) => this.swapped.set(n, { value: values[i], revision }));
        return result;
      }
      names.forEach((n, i) => {
        const kv = outcome.responses[i]?.response_range?.kvs[0];
        this.swapped.set(n, { value: kv?.value, revision: kv ? String(kv.mod_revision) : '0' });
      });
      fresh = true;
    }
    throw Errors.internal(`etcd: ${names.join(', ')}: too many concurrent writers`);
  }

  /** The resource, namespace and name a key stands for, or undefined for keys of resources not served here. */
  parseKey(key: Buffer | string): { resource: string; namespace: string | undefined; name: string } | undefined {
    const text = typeof key === 'string' ? key : key.toString('utf8');
    if (!text.startsWith(this.prefixText)) return undefined;
    const parts = text.slice(this.prefixText.length).split('/');
    for (let attempt = 0; attempt < 2; attempt++) {
      for (const take of [2, 1]) {
        if (parts.length <= take) continue;
        const resource = this.resourcesByPrefix.get(parts.slice(0, take).join('/'));
        if (resource === undefined) continue;
        const rest = parts.slice(take);
        if (rest.length === 1) return { resource, namespace: undefined, name: rest[0]! };
        if (rest.length === 2) return { resource, namespace: rest[0]!, name: rest[1]! };
      }
      this.rebuildPrefixes();
    }
    return undefined;
  }

  private rebuildPrefixes(): void {
    this.resourcesByPrefix = new Map();
    for (const key of this.store.resourceKeys()) {
      const spec = this.store.spec(key);
      if (!spec) continue;
      // The first registered keeps a prefix another resource would share (metrics.k8s.io's computed pods: core's).
      const prefix = resourcePrefix(key, spec.groupResource);
      if (!this.resourcesByPrefix.has(prefix)) this.resourcesByPrefix.set(prefix, key);
    }
  }

  keyOf(resource: string, namespace: string | undefined, name: string): Buffer {
    let base = this.keyPrefixes.get(resource);
    if (base === undefined) {
      const spec = this.store.spec(resource);
      if (!spec) throw Errors.internal(`resource ${resource} is not registered with the store`);
      base = `${this.prefixText}${resourcePrefix(resource, spec.groupResource)}/`;
      this.keyPrefixes.set(resource, base);
    }
    return Buffer.from(namespace ? `${base}${namespace}/${name}` : `${base}${name}`);
  }

  private groupResource(resource: string): GroupResource {
    const spec = this.store.spec(resource);
    if (!spec) throw Errors.internal(`resource ${resource} is not registered with the store`);
    return spec.groupResource;
  }

  /** Starts the watch that feeds the cache, from just after the revision it was filled at. */
  start(): void {
    void this.watchFrom(this.store.currentRevision + 1);
    if (this.options.compactionIntervalMs > 0) this.scheduleCompaction(0, 0);
  }

  private async watchFrom(revision: number): Promise<void> {
    if (this.closed) return;
    let stream: NonNullable<typeof this.stream>;
    try {
      stream = await this.client.watchClient.watch();
    } catch (err) {
      this.reconnectLater(err);
      return;
    }
    if (this.closed) {
      stream.end();
      return;
    }
    this.stream = stream;
    let ended = false;
    const lost = (err: unknown): void => {
      if (ended) return;
      ended = true;
      if (this.stream === stream) this.stream = undefined;
      try {
        stream.end();
      } catch {
        // already gone
      }
      this.reconnectLater(err);
    };
    stream.on('data', (response: IWatchResponse) => {
      try {
        if (!this.onWatchResponse(response)) lost(new Error('watch canceled'));
      } catch (err) {
        this.options.log?.('error', `etcd watch: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
    stream.on('error', lost);
    stream.on('end', () => lost(new Error('watch stream ended')));
    stream.write({
      create_request: { key: this.prefix, range_end: this.end, start_revision: revision, prev_kv: false },
    });
    stream.write({ create_request: { key: Buffer.from(COMPACT_REV_KEY), start_revision: revision } });
    if (this.waiters.length > 0) this.requestProgress();
  }

  private reconnectLater(err: unknown): void {
    if (this.closed) return;
    this.options.log?.(
      'warn',
      `etcd watch lost (${err instanceof Error ? err.message : String(err)}); reconnecting from revision ${this.store.currentRevision + 1}`,
    );
    wallClock.setTimer(RECONNECT_MS, () => void this.watchFrom(this.store.currentRevision + 1));
  }

  /** Applies one watch response to the cache; false when the watch was canceled (it must be made again). */
  private onWatchResponse(response: IWatchResponse): boolean {
    if (response.canceled) {
      if (Number(response.compact_revision) > 0) this.resync(Number(response.compact_revision));
      return false;
    }
    for (const event of response.events) {
      const key = event.kv.key;
      const revision = Number(event.kv.mod_revision);
      if (key.length === COMPACT_REV_KEY.length && key.toString() === COMPACT_REV_KEY) {
        // Another API server (or this one) is compacting at this revision: watches from before it are gone.
        if (event.type === 'Put') this.store.compactHistory(Number(event.kv.value.toString()) - 1);
        this.store.advanceRevision(revision);
        this.settle(revision, undefined);
        continue;
      }
      const where = this.parseKey(key);
      let applied: StoreEvent | null | false = false;
      if (where) {
        if (event.type === 'Delete')
          applied = this.store.replay(where.resource, 'D', revision, undefined, where.namespace ?? '', where.name);
        else applied = this.store.replay(where.resource, 'M', revision, this.decode(event.kv), undefined, undefined);
      } else this.store.advanceRevision(revision);
      this.settle(revision, applied || undefined);
    }
    // A response without events (a progress notification, or a created watch) tells how far etcd has sent.
    if (response.events.length === 0 && !response.created) {
      const revision = Number(response.header.revision);
      this.store.advanceRevision(revision);
      this.settle(revision, undefined);
    }
    return true;
  }

  /**
   * The watch could not resume: etcd compacted the revisions it missed (it was away longer than the compaction
   * interval). The cache is brought to etcd's state afresh and every watch on it ends with 410, so that clients
   * list again, as kube-apiserver's cacher does after it relists.
   */
  private resync(compacted: number): void {
    this.options.log?.(
      'warn',
      `etcd compacted revision ${compacted} before the watch resumed: reading everything again`,
    );
    void this.readAll().then(
      (snapshot) => {
        const seen = new Set<string>();
        for (const kv of snapshot.kvs) {
          const where = this.parseKey(kv.key);
          if (!where) continue;
          seen.add(`${where.resource}\u0000${where.namespace ?? ''}/${where.name}`);
          const cached = this.store.get(where.resource, where.namespace, where.name);
          if (cached?.metadata.resourceVersion !== String(kv.mod_revision))
            this.store.replay(where.resource, 'M', snapshot.revision, this.decode(kv));
        }
        for (const resource of this.store.resourceKeys())
          for (const obj of this.store.all(resource))
            if (!seen.has(`${resource}\u0000${obj.metadata.namespace ?? ''}/${obj.metadata.name}`))
              this.store.replay(
                resource,
                'D',
                snapshot.revision,
                undefined,
                obj.metadata.namespace ?? '',
                obj.metadata.name,
              );
        this.store.advanceRevision(snapshot.revision);
        this.store.compactHistory(snapshot.revision);
        this.store.closeWatches();
        this.settle(snapshot.revision, undefined);
      },
      (err: unknown) => this.reconnectLater(err),
    );
  }

  /** An object as the cache keeps it: etcd's JSON with etcd's mod_revision as its resourceVersion. */
  decode(kv: IKeyValue): KubeObject {
    const obj = JSON.parse(kv.value.toString('utf8')) as KubeObject;
    obj.metadata.resourceVersion = String(kv.mod_revision);
    return obj;
  }

  private encode(obj: KubeObject): Buffer {
    const { resourceVersion: _, ...metadata } = obj.metadata;
    return Buffer.from(JSON.stringify({ ...obj, metadata }));
  }

  /** The cache has applied `revision` (with the event it made, when it was a change of a served object). */
  private settle(revision: number, event: StoreEvent | undefined): void {
    if (event) {
      this.recent.set(revision, event);
      if (this.recent.size > RECENT_EVENTS) this.recent.delete(this.recent.keys().next().value!);
    }
    if (this.waiters.length === 0 || this.waiters[0]!.revision > revision) return;
    let i = 0;
    while (i < this.waiters.length && this.waiters[i]!.revision <= revision) i++;
    const done = this.waiters.splice(0, i);
    for (const w of done) w.resolve(w.revision === revision ? event : this.recent.get(w.revision));
    if (this.waiters.length === 0 && this.progressTimer) {
      this.progressTimer.cancel();
      this.progressTimer = undefined;
    }
  }

  /** Resolves once the cache has applied `revision`, with the event of that revision when it made one. */
  private reached(revision: number, timeoutMs = WRITE_VISIBLE_MS): Promise<StoreEvent | undefined> {
    if (revision <= this.store.currentRevision) return Promise.resolve(this.recent.get(revision));
    return new Promise((resolve, reject) => {
      const timer = wallClock.setTimer(timeoutMs, () => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(Errors.timeout(`etcd's change at revision ${revision} did not reach this API server in time`));
      });
      const waiter: Waiter = {
        revision,
        resolve: (event) => {
          timer.cancel();
          resolve(event);
        },
      };
      let i = this.waiters.length;
      while (i > 0 && this.waiters[i - 1]!.revision > revision) i--;
      this.waiters.splice(i, 0, waiter);
    });
  }

  /**
   * A consistent read waits here until the cache has reached etcd's current revision (kube-apiserver's consistent
   * reads from cache): one range request for the revision, then the watch's progress, which etcd reports on request
   * once it has sent every event up to it (the last writes may be outside the prefix, and bring no event).
   */
  async consistentRead(): Promise<void> {
    const head = await this.rpc('range', (o) =>
      this.client.kv.range({ key: this.prefix, range_end: this.end, limit: 1, keys_only: true }, o),
    );
    const revision = Number(head.header.revision);
    if (revision <= this.store.currentRevision) return;
    const reached = this.reached(revision);
    this.requestProgress();
    await reached;
  }

  private requestProgress(): void {
    if (this.progressTimer || this.waiters.length === 0) return;
    const ask = (): void => {
      this.progressTimer = undefined;
      if (this.waiters.length === 0 || this.closed) return;
      try {
        this.stream?.write({ progress_request: {} });
      } catch {
        // the stream is being replaced; the new one asks again
      }
      this.progressTimer = wallClock.setTimer(PROGRESS_RETRY_MS, ask);
    };
    ask();
  }

  /** The cache's object at the write's revision (the write's own answer); `fallback` if the cache skipped it. */
  private async committed(revision: number, fallback: () => KubeObject): Promise<KubeObject> {
    const event = await this.reached(revision);
    return event ? event.object : fallback();
  }

  async create(resource: string, obj: KubeObject): Promise<KubeObject> {
    const name = obj.metadata.name!;
    const key = this.keyOf(resource, obj.metadata.namespace, name);
    const value = this.encode(obj);
    const result = await this.rpc('txn', (o) =>
      this.client.kv.txn(
        {
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
          success: [{ request_put: { key, value } }],
          failure: [{ request_range: { key } }],
        },
        o,
      ),
    );
    let revision = Number(result.header.revision);
    if (!result.succeeded) {
      // The client sends a request again on another member when the first one went away mid-request: when that
      // first one had committed it, the key holds this very write (its new uid), which is no AlreadyExists.
      const existing = result.responses[0]?.response_range?.kvs[0];
      if (!existing?.value.equals(value)) throw Errors.alreadyExists(this.groupResource(resource), name);
      revision = Number(existing.mod_revision);
    }
    return this.committed(revision, () => this.decode({ value, mod_revision: String(revision) } as IKeyValue));
  }

  /**
   * guaranteedUpdate over etcd: `tryUpdate` runs on the cached object, and the transaction only succeeds if etcd
   * still holds that version. When another process got there first, the cache is let catch up to etcd's version and
   * the update runs again on it (a resourceVersion precondition then fails with 409, as in kube-apiserver).
   */
  async guaranteedUpdate(
    resource: string,
    namespace: string | undefined,
    name: string,
    preconditions: Preconditions,
    tryUpdate: (current: KubeObject) => KubeObject,
    dryRun = false,
  ): Promise<{ object: KubeObject; changed: boolean }> {
    const gr = this.groupResource(resource);
    const key = this.keyOf(resource, namespace, name);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = this.store.current(resource, namespace, name, preconditions);
      const next = tryUpdate(current);
      if (next === current || sameIgnoringVersion(next, current)) return { object: current, changed: false };
      if (dryRun) return { object: next, changed: true };
      const value = this.encode(next);
      const result = await this.rpc('txn', (o) =>
        this.client.kv.txn(
          {
            compare: [{ key, target: 'Mod', result: 'Equal', mod_revision: current.metadata.resourceVersion }],
            success: [{ request_put: { key, value } }],
            failure: [{ request_range: { key } }],
          },
          o,
        ),
      );
      // (No "it holds our value, so it was our own retried write" here, unlike create: another server may well
      // have written the same bytes from the same version, and each client must not think its update went in.)
      const latest = result.responses[0]?.response_range?.kvs[0];
      if (result.succeeded) {
        const revision = Number(result.header.revision);
        const object = await this.committed(revision, () =>
          this.decode({ value, mod_revision: String(revision) } as IKeyValue),
        );
        return { object, changed: true };
      }
      await this.catchUp(latest, Number(result.header.revision));
    }
    throw Errors.conflict(gr, name);
  }

  async delete(
    resource: string,
    namespace: string | undefined,
    name: string,
    preconditions: Preconditions = {},
  ): Promise<KubeObject> {
    const gr = this.groupResource(resource);
    const key = this.keyOf(resource, namespace, name);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = this.store.current(resource, namespace, name, preconditions);
      const result = await this.rpc('txn', (o) =>
        this.client.kv.txn(
          {
            compare: [{ key, target: 'Mod', result: 'Equal', mod_revision: current.metadata.resourceVersion }],
            success: [{ request_delete_range: { key } }],
            failure: [{ request_range: { key } }],
          },
          o,
        ),
      );
      if (result.succeeded) {
        const revision = Number(result.header.revision);
        return this.committed(revision, () => ({
          ...current,
          metadata: { ...current.metadata, resourceVersion: String(revision) },
        }));
      }
      await this.catchUp(result.responses[0]?.response_range?.kvs[0], Number(result.header.revision));
    }
    throw Errors.conflict(gr, name);
  }

  /** After a lost race: waits until the cache holds etcd's version of the key (or its deletion). */
  private async catchUp(kv: IKeyValue | undefined, headRevision: number): Promise<void> {
    const revision = kv ? Number(kv.mod_revision) : headRevision;
    const reached = this.reached(revision);
    if (!kv) this.requestProgress();
    await reached;
  }

  /**
   * kube-apiserver's compactor (storage/etcd3/compact.go): every interval, the API server that wins a transaction on
   * compact_rev_key's version records the revision it saw an interval ago there and compacts etcd to it; the others
   * see the key's new version and wait another interval. So one compaction per interval, however many servers.
   */
  private scheduleCompaction(version: number, revision: number): void {
    this.compactTimer = wallClock.setTimer(this.options.compactionIntervalMs, () => {
      void this.compactOnce(version, revision).then(
        ([v, r]) => this.scheduleCompaction(v, r),
        (err: unknown) => {
          this.options.log?.('warn', `etcd compaction: ${err instanceof Error ? err.message : String(err)}`);
          this.scheduleCompaction(version, revision);
        },
      );
    });
  }

  private async compactOnce(version: number, revision: number): Promise<[number, number]> {
    const key = Buffer.from(COMPACT_REV_KEY);
    const result = await this.rpc('txn', (o) =>
      this.client.kv.txn(
        {
          compare: [{ key, target: 'Version', result: 'Equal', version }],
          success: [{ request_put: { key, value: Buffer.from(String(revision)) } }],
          failure: [{ request_range: { key } }],
        },
        o,
      ),
    );
    const head = Number(result.header.revision);
    if (!result.succeeded) return [Number(result.responses[0]?.response_range?.kvs[0]?.version ?? 0), head];
    if (revision > 0) await this.rpc('compact', (o) => this.client.kv.compact({ revision }, o));
    return [version + 1, head];
  }

  /** One etcd request, with a deadline; etcd's failures become a Status (500 InternalError), as kube-apiserver's do. */
  private async rpc<T>(what: string, call: (options: { deadline: Date }) => Promise<T>): Promise<T> {
    try {
      return await call({ deadline: new Date(wallClock.now() + RPC_DEADLINE_MS) });
    } catch (err) {
      if (err instanceof ApiError) throw err;
      const failure = Errors.internal(`etcd ${what}: ${grpcMessage(err)}`);
      failure.cause = err;
      throw failure;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.compactTimer?.cancel();
    this.progressTimer?.cancel();
    try {
      this.stream?.end();
    } catch {
      // already gone
    }
    this.stream = undefined;
    this.client.close();
  }
}
