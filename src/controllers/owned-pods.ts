import { deepEqual, type KubeObject } from '../api/types.js';
import type { CacheIndex } from '../client/informer.js';
import type { ChildSelector } from './claims.js';
import { controllerOf } from './controller-ref.js';
import {
  bucketsChangeAt,
  compareApartFromCrowding,
  computeRank,
  DeletionHeap,
  isOrdinaryForDeletion,
  nodeName,
  podsToDelete,
  type PodRank,
  type RankedPod,
} from './pod-ranking.js';
import { isPodActive, isPodReady, podCondition } from '../api/pod-util.js';

/**
 * What a ReplicaSet's sync needs to know of its pods: how many it owns, how many carry the template's labels, how
 * many are ready and since when, and — only when some must go — the pods themselves. `summarizePods` computes it
 * from a list; `OwnedPodTally` keeps it up to date from pod events, so a sync costs the pods that changed since the
 * last one rather than all of them (a 10,000-pod ReplicaSet syncs on every pod event).
 */
export interface PodSummary {
  /** Active pods the ReplicaSet controls and its selector matches. */
  readonly count: number;
  /** Of those, the ones carrying every template label. */
  readonly fullyLabeled: number;
  readonly ready: number;
  /** When each ready pod turned Ready (ms, NaN when unknown): availability after minReadySeconds. */
  readySince(): Iterable<number>;
  /** The pods, current versions (asked for only to choose which to delete). */
  pods(): readonly KubeObject[];
  /**
   * The `count` least valuable pods, least valuable first (getPodsToDelete); `onNode` counts the active pods of
   * the ReplicaSet and its siblings per node.
   */
  toDelete(onNode: ReadonlyMap<string, number>, count: number, now: number): KubeObject[];
}

interface PodFacts {
  ready: boolean;
  readySince: number;
}

const facts = new WeakMap<KubeObject, PodFacts>();

/** Readiness facts, remembered per pod object (cache objects never change: an update is a new object). */
export function podFacts(pod: KubeObject): PodFacts {
  let f = facts.get(pod);
  if (!f) {
    const ready = isPodReady(pod);
    const since = ready ? podCondition(pod, 'Ready')?.lastTransitionTime : undefined;
    f = { ready, readySince: since ? Date.parse(since) : NaN };
    facts.set(pod, f);
  }
  return f;
}

function carries(pod: KubeObject, labels: Readonly<Record<string, string>>): boolean {
  const own = pod.metadata.labels ?? {};
  for (const k in labels) if (own[k] !== labels[k]) return false;
  return true;
}

/** The summary of a list of pods the ReplicaSet owns (all active, all matching). */
export function summarizePods(
  pods: readonly KubeObject[],
  templateLabels: Readonly<Record<string, string>>,
): PodSummary {
  let fullyLabeled = 0;
  const since: number[] = [];
  for (const pod of pods) {
    if (carries(pod, templateLabels)) fullyLabeled++;
    const f = podFacts(pod);
    if (f.ready) since.push(f.readySince);
  }
  return {
    count: pods.length,
    fullyLabeled,
    ready: since.length,
    readySince: () => since,
    pods: () => pods,
    toDelete: (onNode, count, now) => podsToDelete(pods, onNode, count, now),
  };
}

/** Whether a pod update changes anything a ReplicaSet counts or claims by (other updates need no sync). */
export function mattersToReplicaSet(old: KubeObject, pod: KubeObject): boolean {
  const a = podFacts(old);
  const b = podFacts(pod);
  return (
    a.ready !== b.ready ||
    !(a.readySince === b.readySince || (Number.isNaN(a.readySince) && Number.isNaN(b.readySince))) ||
    isPodActive(old) !== isPodActive(pod) ||
    !deepEqual(old.metadata.labels ?? {}, pod.metadata.labels ?? {}) ||
    !deepEqual(old.metadata.ownerReferences ?? [], pod.metadata.ownerReferences ?? [])
  );
}

/** A pod as a tally counts it; its deletion rank is computed on first use and kept with it. */
class Entry implements RankedPod {
  private computed?: PodRank;
  /** No longer in the tally (a later version, or gone): skipped by the deletion order that still lists it. */
  removed = false;

  constructor(
    readonly seq: number,
    readonly pod: KubeObject,
    readonly node: string,
    readonly owned: boolean,
    readonly fullyLabeled: boolean,
    readonly ready: boolean,
  ) {}

  rank(): PodRank {
    return (this.computed ??= computeRank(this.pod));
  }
}

/** Where a tally reads pods: by cache key, and the keys of every pod the owner controls (for a full recount). */
export interface PodSource {
  get(key: string): KubeObject | undefined;
  controlledKeys(ownerUid: string): Iterable<string>;
}

/**
 * One ReplicaSet's pods, counted incrementally. Pod events `touch` the keys they concern (every event, so the pods
 * it hands out are the current versions); `refresh` re-reads only those (everything on first use, or when the
 * template's labels change). Equivalent to ClaimPods followed by summarizePods on the active pods the owner
 * controls: matching ones are owned, the others are strays to release.
 */
export class OwnedPodTally implements PodSummary {
  private readonly entries = new Map<string, Entry>();
  private readonly strayKeys = new Set<string>();
  private readonly readyTimes = new Map<string, number>();
  private readonly dirty = new Set<string>();
  /** Owned pods per node. */
  private readonly perNode = new Map<string, number>();
  /** How many owned pods rank unlike an ordinary running one (isOrdinaryForDeletion). */
  private unusual = 0;
  /** Entries are numbered as they are made: the order pods() lists them in, the ranking's last tie-breaker. */
  private nextSeq = 0;
  /**
   * The owned pods in deletion order apart from crowding, kept while every pod is ordinary and no pod joins,
   * until the first log2 age bucket moves (`orderUntil`). A rolling update scales a ReplicaSet down by a few
   * pods thousands of times; each scale-down walks this list instead of ranking every pod again.
   */
  private order?: Entry[];
  /** Where the order's first pod still in the tally is (deletions take pods from the front). */
  private orderHead = 0;
  private orderUntil = -Infinity;
  private labelsKey?: string;
  count = 0;
  fullyLabeled = 0;
  ready = 0;

  constructor(readonly ownerUid: string) {}

  touch(key: string): void {
    this.dirty.add(key);
  }

  refresh(source: PodSource, selector: ChildSelector, templateLabels: Readonly<Record<string, string>>): void {
    const labelsKey = JSON.stringify(templateLabels);
    if (labelsKey !== this.labelsKey) {
      this.labelsKey = labelsKey;
      for (const key of this.entries.keys()) this.dirty.add(key);
      for (const key of source.controlledKeys(this.ownerUid)) this.dirty.add(key);
    }
    for (const key of this.dirty) this.apply(key, source.get(key), selector, templateLabels);
    this.dirty.clear();
  }

  /** Counts a pod this sync adopted (the patched object), before its event comes back. */
  adopted(
    key: string,
    pod: KubeObject,
    selector: ChildSelector,
    templateLabels: Readonly<Record<string, string>>,
  ): void {
    this.apply(key, pod, selector, templateLabels);
  }

  private apply(
    key: string,
    pod: KubeObject | undefined,
    selector: ChildSelector,
    templateLabels: Readonly<Record<string, string>>,
  ): void {
    const before = this.entries.get(key);
    if (before) {
      if (before.owned) {
        this.count--;
        if (before.fullyLabeled) this.fullyLabeled--;
        if (before.ready) this.ready--;
        const n = this.perNode.get(before.node)! - 1;
        if (n === 0) this.perNode.delete(before.node);
        else this.perNode.set(before.node, n);
        if (!isOrdinaryForDeletion(before.rank())) this.unusual--;
      }
      before.removed = true;
      this.entries.delete(key);
      this.strayKeys.delete(key);
      this.readyTimes.delete(key);
    }
    if (!pod || controllerOf(pod)?.uid !== this.ownerUid || !isPodActive(pod)) return;
    const node = nodeName(pod);
    if (!selector.matches(pod)) {
      this.entries.set(key, new Entry(this.nextSeq++, pod, node, false, false, false));
      this.strayKeys.add(key);
      return;
    }
    const f = podFacts(pod);
    const entry = new Entry(this.nextSeq++, pod, node, true, carries(pod, templateLabels), f.ready);
    this.entries.set(key, entry);
    this.order = undefined;
    this.perNode.set(node, (this.perNode.get(node) ?? 0) + 1);
    if (!isOrdinaryForDeletion(entry.rank())) this.unusual++;
    this.count++;
    if (entry.fullyLabeled) this.fullyLabeled++;
    if (entry.ready) {
      this.ready++;
      this.readyTimes.set(key, f.readySince);
    }
  }

  readySince(): Iterable<number> {
    return this.readyTimes.values();
  }

  pods(): KubeObject[] {
    const out: KubeObject[] = [];
    for (const entry of this.entries.values()) if (entry.owned) out.push(entry.pod);
    return out;
  }

  /**
   * When every owned pod is ordinary (the common case: a rolling update scaling down a ReplicaSet of running pods),
   * crowding decides first and the rest of the ranking does not depend on it: the pods of the most crowded nodes
   * go first, each level in the kept order (orderedApartFromCrowding), and the walk stops once enough were taken.
   * Otherwise every pod is offered to a heap. The same answer either way wherever Kubernetes' rules order the pods
   * consistently; where they do not (they are not transitive when some pods share a ready second and others
   * differ within one log2 bucket), the pick is one Kubernetes itself makes for some order of its pod list.
   */
  toDelete(onNode: ReadonlyMap<string, number>, count: number, now: number): KubeObject[] {
    if (count <= 0) return [];
    if (count >= this.count) return this.pods();
    if (this.unusual > 0) {
      const heap = new DeletionHeap(count, onNode, now);
      for (const entry of this.entries.values()) if (entry.owned) heap.offer(entry);
      return heap.result();
    }
    // Pods per crowding level; every level above `last` goes whole, of `last` the first `need` in order.
    const perLevel = new Map<number, number>();
    for (const [node, owned] of this.perNode) {
      const crowding = onNode.get(node) ?? 0;
      perLevel.set(crowding, (perLevel.get(crowding) ?? 0) + owned);
    }
    const levels = [...perLevel.keys()].sort((a, b) => b - a);
    let above = 0;
    let last = levels[0]!;
    for (const crowding of levels) {
      last = crowding;
      const n = perLevel.get(crowding)!;
      if (above + n >= count) break;
      above += n;
    }
    const need = count - above;
    const whole: Entry[] = [];
    const part: Entry[] = [];
    const order = this.orderedApartFromCrowding(now);
    while (this.orderHead < order.length && order[this.orderHead]!.removed) this.orderHead++;
    for (let i = this.orderHead; i < order.length; i++) {
      const entry = order[i]!;
      if (entry.removed) continue;
      const crowding = onNode.get(entry.node) ?? 0;
      if (crowding > last) whole.push(entry);
      else if (crowding === last && part.length < need) part.push(entry);
      if (whole.length === above && part.length === need) break;
    }
    // Sorting is stable: within a level, the kept order.
    whole.sort((a, b) => (onNode.get(b.node) ?? 0) - (onNode.get(a.node) ?? 0));
    return [...whole, ...part].map((e) => e.pod);
  }

  private orderedApartFromCrowding(now: number): Entry[] {
    if (this.order && now < this.orderUntil) return this.order;
    const order: Entry[] = [];
    for (const entry of this.entries.values()) if (entry.owned) order.push(entry);
    order.sort((a, b) => compareApartFromCrowding(a, b, now));
    let until = Infinity;
    for (const entry of order) until = Math.min(until, bucketsChangeAt(entry.rank(), now));
    this.order = order;
    this.orderHead = 0;
    this.orderUntil = until;
    return order;
  }

  /** Owned pods per node (unscheduled ones under ""). */
  podsPerNode(): ReadonlyMap<string, number> {
    return this.perNode;
  }

  /** Pods it controls that its selector no longer matches (to release). */
  strays(): KubeObject[] {
    const out: KubeObject[] = [];
    for (const key of this.strayKeys) out.push(this.entries.get(key)!.pod);
    return out;
  }
}

/**
 * Every ReplicaSet's tally, by its uid: an index of the pod informer (addCacheIndex), so that each pod change marks
 * the pod in the tallies of its old and new controllers as the cache takes it, before any handler runs.
 */
export class OwnedPodTallies implements CacheIndex {
  private readonly tallies = new Map<string, OwnedPodTally>();

  changed(key: string, old: KubeObject | undefined, next: KubeObject | undefined): void {
    const before = old && controllerOf(old)?.uid;
    const after = next && controllerOf(next)?.uid;
    if (before !== undefined) this.tallies.get(before)?.touch(key);
    if (after !== undefined && after !== before) this.tallies.get(after)?.touch(key);
  }

  /** The tally of the ReplicaSet with this uid, made on first use (its first refresh counts every pod it controls). */
  of(ownerUid: string): OwnedPodTally {
    let tally = this.tallies.get(ownerUid);
    if (!tally) this.tallies.set(ownerUid, (tally = new OwnedPodTally(ownerUid)));
    return tally;
  }

  /** Drops a deleted ReplicaSet's tally. */
  forget(ownerUid: string): void {
    this.tallies.delete(ownerUid);
  }
}
