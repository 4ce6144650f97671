import type { KubeObject } from '../api/types.js';
import type { WatchHandle } from '../client/client.js';
import { wallSleep, type ScenarioTarget } from './target.js';
import type { ApiResource } from './resources.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One change the runner saw, stamped with the cluster time it happened and the step it belongs to. */
export interface HistoryEvent {
  rv: number;
  time: number;
  /** 1-based step index; 0 for what happened while the cluster started. */
  step: number;
  type: ChangeType;
  resource: ApiResource;
  object: KubeObject;
  /** The first change that shows the object going away: deletionTimestamp newly set, or removed at once. */
  deletionStarted?: boolean;
}

export function objectKey(resource: ApiResource, obj: KubeObject): string {
  return `${resource.gvr.group}/${resource.gvr.resource}/${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`;
}

/** Resources not recorded unless a scenario asks: node leases renew every few seconds, Events narrate. */
export const DEFAULT_HISTORY_EXCLUDE = ['leases', 'events'];

/**
 * The event history for `expect`: every resource watched through the client from the start. Changes that
 * differ from the previous version only in heartbeat fields (a kubelet's lastHeartbeatTime) are not kept,
 * so a week of node heartbeats does not drown the changes that matter. Events are kept in arrival order
 * and read back sorted by resourceVersion, which is the order the cluster made them in.
 */
export class History {
  readonly events: HistoryEvent[] = [];
  /** The objects that existed when recording started. */
  readonly initial = new Map<string, { resource: ApiResource; object: KubeObject }>();
  step = 0;
  private readonly watches = new Map<string, WatchHandle>();
  private readonly latest = new Map<string, { resource: ApiResource; object: KubeObject }>();
  private readonly byUid = new Map<string, { resource: ApiResource; object: KubeObject }>();
  private readonly terminating = new Set<string>();
  private stopped = false;
  private sorted = true;
  /** Watches that failed in a way that loses events; the run reports them. */
  readonly problems: string[] = [];
  recorded: ApiResource[] = [];

  constructor(private readonly target: ScenarioTarget) {}

  async start(resources: readonly ApiResource[], exclude: readonly string[]): Promise<void> {
    const excluded = new Set(exclude.map((e) => e.toLowerCase()));
    this.recorded = resources.filter(
      (r) =>
        r.verbs.includes('watch') &&
        r.verbs.includes('list') &&
        !r.names.some((n) => excluded.has(n)) &&
        !excluded.has(`${r.gvr.resource}.${r.gvr.group}`),
    );
    // One version per group/resource (discovery lists a resource once per served version).
    const seen = new Set<string>();
    this.recorded = this.recorded.filter((r) => {
      const k = `${r.gvr.group}/${r.gvr.resource}`;
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    });
    for (const resource of this.recorded) {
      const list = await this.target.client.list(resource.gvr, undefined);
      for (const obj of list.items) {
        const key = objectKey(resource, obj);
        this.initial.set(key, { resource, object: obj });
        this.remember(key, resource, obj);
      }
      this.watch(resource, list.metadata.resourceVersion);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const w of this.watches.values()) w.stop();
    this.watches.clear();
  }

  private watch(resource: ApiResource, fromRv: string): void {
    if (this.stopped) return;
    let lastRv = fromRv;
    const handle = this.target.client.watch(
      resource.gvr,
      undefined,
      { resourceVersion: fromRv },
      (type, obj) => {
        if (obj.metadata.resourceVersion) lastRv = obj.metadata.resourceVersion;
        if (type !== 'BOOKMARK') this.record(resource, type, obj);
      },
      (error) => {
        if (this.stopped) return;
        if (error)
          this.problems.push(
            `the watch of ${resource.gvr.resource} failed (${error.message}); the history may miss changes`,
          );
        else this.watch(resource, lastRv);
      },
    );
    this.watches.set(`${resource.gvr.group}/${resource.gvr.resource}`, handle);
  }

  private remember(key: string, resource: ApiResource, obj: KubeObject): void {
    this.latest.set(key, { resource, object: obj });
    if (obj.metadata.uid) this.byUid.set(obj.metadata.uid, { resource, object: obj });
  }

  private record(resource: ApiResource, type: ChangeType, obj: KubeObject): void {
    const key = objectKey(resource, obj);
    const wasTerminating =
      this.terminating.has(key) || this.latest.get(key)?.object.metadata.deletionTimestamp !== undefined;
    let deletionStarted = false;
    if (type === 'DELETED') {
      deletionStarted = !wasTerminating;
      this.terminating.delete(key);
    } else if (obj.metadata.deletionTimestamp !== undefined && !wasTerminating) {
      deletionStarted = type === 'MODIFIED';
      this.terminating.add(key);
    } else if (type === 'ADDED') {
      this.terminating.delete(key);
    }
    if (type === 'DELETED') {
      this.latest.delete(key);
      if (obj.metadata.uid) this.byUid.set(obj.metadata.uid, { resource, object: obj });
    } else {
      const previous = this.latest.get(key)?.object;
      const unchanged = type === 'MODIFIED' && previous !== undefined && sameButHeartbeats(previous, obj);
      this.remember(key, resource, obj);
      if (unchanged) return;
    }
    const rv = Number(obj.metadata.resourceVersion ?? 0);
    const last = this.events[this.events.length - 1];
    if (last && last.rv > rv) this.sorted = false;
    const event: HistoryEvent = { rv, time: this.target.now(), step: this.step, type, resource, object: obj };
    if (deletionStarted) event.deletionStarted = true;
    this.events.push(event);
  }

  /** Every change so far, in resourceVersion order. */
  ordered(): readonly HistoryEvent[] {
    if (!this.sorted) {
      this.events.sort((a, b) => a.rv - b.rv);
      this.sorted = true;
    }
    return this.events;
  }

  /** The latest version seen of an object by uid (deleted objects included). */
  byUidLatest(uid: string): { resource: ApiResource; object: KubeObject } | undefined {
    return this.byUid.get(uid);
  }

  /**
   * For a remote server, whose watch events arrive over sockets: waits until what the history holds matches
   * a fresh list of every recorded resource (or two seconds pass). An embedded target needs none of this:
   * its clock waits for the runner's watch deliveries before it lets time move.
   */
  async catchUp(): Promise<void> {
    if (this.target.mode === 'embedded') return;
    for (let attempt = 0; attempt < 40; attempt++) {
      let behind = false;
      for (const resource of this.recorded) {
        const list = await this.target.client.list(resource.gvr, undefined);
        const prefix = `${resource.gvr.group}/${resource.gvr.resource}/`;
        const mine = new Map<string, string | undefined>();
        for (const [key, { object }] of this.latest)
          if (key.startsWith(prefix)) mine.set(key, object.metadata.resourceVersion);
        if (
          mine.size !== list.items.length ||
          list.items.some((o) => mine.get(objectKey(resource, o)) !== o.metadata.resourceVersion)
        ) {
          behind = true;
          break;
        }
      }
      if (!behind) return;
      await wallSleep(50);
    }
  }
}

/** Fields that change on every heartbeat (or every write), at any depth: a change of these alone is noise. */
const HEARTBEAT_FIELDS = new Set(['resourceVersion', 'managedFields', 'lastHeartbeatTime', 'renewTime']);

/**
 * Whether two versions of an object have the same JSON once the heartbeat fields are left out, at any depth (as
 * `JSON.stringify` with a replacer dropping them would compare, key order included), without building either text.
 * The parts a write did not touch are usually the same objects in both versions, which ends those branches at once.
 */
export function sameButHeartbeats(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return jsonEqualScalars(a, b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    if (a.length !== other.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameButHeartbeats(a[i], other[i])) return false;
    return true;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const yKeys = Object.keys(y);
  let j = 0;
  // JSON.stringify leaves out undefined, function and symbol values; the heartbeat fields are left out here too.
  const kept = (o: Record<string, unknown>, k: string): boolean => !HEARTBEAT_FIELDS.has(k) && jsonValue(o[k]);
  for (const k of Object.keys(x)) {
    if (!kept(x, k)) continue;
    while (j < yKeys.length && !kept(y, yKeys[j]!)) j++;
    if (j === yKeys.length || yKeys[j] !== k || !sameButHeartbeats(x[k], y[k])) return false;
    j++;
  }
  while (j < yKeys.length && !kept(y, yKeys[j]!)) j++;
  return j === yKeys.length;
}

function jsonValue(v: unknown): boolean {
  return v !== undefined && typeof v !== 'function' && typeof v !== 'symbol';
}

/** Scalars (and an array's holes) as JSON writes them: undefined, functions and non-finite numbers in arrays are null. */
function jsonEqualScalars(a: unknown, b: unknown): boolean {
  const scalar = (v: unknown): unknown =>
    v === undefined ||
    typeof v === 'function' ||
    typeof v === 'symbol' ||
    (typeof v === 'number' && !Number.isFinite(v))
      ? null
      : v;
  return scalar(a) === scalar(b);
}
