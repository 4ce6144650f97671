import { isPlainObject, type KubeObject } from '../api/types.js';
import { containerStatuses, creationTime, isPodActive, isPodReady, podCondition, podPhase } from '../api/pod-util.js';

/**
 * Which pods a ReplicaSet gives up first when it has too many (controller.ActivePodsWithRanks, as
 * kube-controller-manager sorts them with LogarithmicScaleDown and PodDeletionCost on). Earlier means
 * less valuable:
 *
 *  1. unscheduled before scheduled;
 *  2. Pending before Unknown before Running;
 *  3. not ready before ready;
 *  4. lower `controller.kubernetes.io/pod-deletion-cost` first;
 *  5. more sibling pods (of the same owner's ReplicaSets) on the same node first — "doubled up";
 *  6. both ready: ready for a shorter time first, compared in log2 buckets of the time since (ties by uid);
 *  7. more container restarts first (regular containers, then restartable init containers);
 *  8. created more recently first, in the same log2 buckets (ties by uid).
 *
 * Worked example of the buckets: now = 12:00:00; pod a created 11:59:00 (60 s ago), pod b 11:58:30 (90 s
 * ago). log2(60e9 ns) = 35.8 and log2(90e9 ns) = 36.4: buckets 35 and 36, so a goes first. Pods created
 * 70 s and 90 s ago share bucket 36, and their uids decide, which spreads deletions over similar-aged pods.
 */

export const POD_DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';

const PHASE_ORDINAL: Record<string, number> = { Pending: 0, Unknown: 1, Running: 2 };

/** What ranking reads of a pod, remembered per pod object (cache objects never change). */
export interface PodRank {
  node: string;
  phase: number;
  ready: boolean;
  cost: number;
  readySince: number; // ms, 0 when unknown
  restarts: number;
  sidecarRestarts: number;
  created: number; // ms, 0 when unknown
  uid: string;
  /** The log2 age buckets as of `bucketsAt`: a ranking computes them for one `now`, and only on a tie. */
  bucketsAt: number;
  readyBucket: number;
  createdBucket: number;
}

interface Ranked {
  pod: KubeObject;
  r: PodRank;
  colocated: number;
  index: number;
}

/** A pod with its rank, as a caller that keeps ranks next to its pods (OwnedPodTally) hands them over. */
export interface RankedPod {
  readonly pod: KubeObject;
  /** The last tie-breaker: the pod's position in the caller's (deterministic) order of its pods. */
  readonly seq: number;
  rank(): PodRank;
}

/** What ranking reads of a pod (computed once per pod object: cache objects never change). */
export function computeRank(pod: KubeObject): PodRank {
  const ready = isPodReady(pod);
  const { regular, sidecar } = maxRestarts(pod);
  return {
    node: nodeName(pod),
    phase: PHASE_ORDINAL[podPhase(pod)] ?? 0,
    ready,
    cost: deletionCost(pod),
    readySince: ready ? timeOf(podCondition(pod, 'Ready')?.lastTransitionTime) : 0,
    restarts: regular,
    sidecarRestarts: sidecar,
    created: creationTime(pod),
    uid: pod.metadata.uid ?? '',
    bucketsAt: Number.NaN,
    readyBucket: 0,
    createdBucket: 0,
  };
}

const ranks = new WeakMap<KubeObject, PodRank>();

function rankOf(pod: KubeObject): PodRank {
  let r = ranks.get(pod);
  if (!r) ranks.set(pod, (r = computeRank(pod)));
  return r;
}

function bucketsFor(r: PodRank, now: number): PodRank {
  if (r.bucketsAt !== now) {
    r.bucketsAt = now;
    r.readyBucket = logBucket(r.readySince, now);
    r.createdBucket = logBucket(r.created, now);
  }
  return r;
}

/** Active pods per node (unscheduled ones under ""): how "doubled up" each pod of a ReplicaSet is. */
export function podsPerNode(related: readonly KubeObject[]): Map<string, number> {
  const onNode = new Map<string, number>();
  for (const p of related) {
    if (!isPodActive(p)) continue;
    const node = nodeName(p);
    onNode.set(node, (onNode.get(node) ?? 0) + 1);
  }
  return onNode;
}

function ranked(pods: readonly KubeObject[], onNode: ReadonlyMap<string, number>): Ranked[] {
  const out: Ranked[] = new Array(pods.length);
  for (let index = 0; index < pods.length; index++) {
    const pod = pods[index]!;
    const r = rankOf(pod);
    out[index] = { pod, r, index, colocated: onNode.get(r.node) ?? 0 };
  }
  return out;
}

/**
 * The pods ordered least valuable first. `onNode` counts, per node, the active pods of every ReplicaSet sharing
 * this one's owner (podsPerNode of them).
 */
export function rankPodsForDeletion(
  pods: readonly KubeObject[],
  onNode: ReadonlyMap<string, number>,
  now: number,
): KubeObject[] {
  // A stable order: pods the rules cannot tell apart keep the (deterministic) order they came in.
  return ranked(pods, onNode)
    .sort((a, b) => order(a.r, a.colocated, a.index, b.r, b.colocated, b.index, now))
    .map((r) => r.pod);
}

/**
 * getPodsToDelete: the `count` least valuable pods, least valuable first (everything, unsorted, when all go).
 */
export function podsToDelete(
  pods: readonly KubeObject[],
  onNode: ReadonlyMap<string, number>,
  count: number,
  now: number,
): KubeObject[] {
  if (count <= 0) return [];
  if (count >= pods.length) return [...pods];
  const heap = new DeletionHeap(count, onNode, now);
  pods.forEach((pod, seq) => heap.offer({ pod, seq, rank: () => rankOf(pod) }));
  return heap.result();
}

/**
 * Selects the `count` least valuable of the pods offered, with a bounded heap rather than sorting them all; a
 * pod is compared with the heap's top before anything is allocated for it. A rolling update scales a 10,000-pod
 * ReplicaSet down one or two pods at a time, thousands of times, so this runs over tens of millions of pods
 * unless the caller can offer fewer (OwnedPodTally offers the most crowded nodes first and stops early).
 */
export class DeletionHeap {
  private readonly heap: Ranked[] = []; // max-heap on `order`: the most valuable of the chosen on top

  constructor(
    private readonly count: number,
    private readonly onNode: ReadonlyMap<string, number>,
    private readonly now: number,
  ) {}

  get full(): boolean {
    return this.heap.length >= this.count;
  }

  offer(candidate: RankedPod): void {
    const heap = this.heap;
    const r = candidate.rank();
    const colocated = this.onNode.get(r.node) ?? 0;
    if (heap.length < this.count) {
      heap.push({ pod: candidate.pod, r, colocated, index: candidate.seq });
      siftUp(heap, heap.length - 1, this.now);
      return;
    }
    const top = heap[0]!;
    if (order(r, colocated, candidate.seq, top.r, top.colocated, top.index, this.now) < 0) {
      heap[0] = { pod: candidate.pod, r, colocated, index: candidate.seq };
      siftDown(heap, 0, this.now);
    }
  }

  /** The chosen pods, least valuable first. */
  result(): KubeObject[] {
    const now = this.now;
    return this.heap.sort((a, b) => order(a.r, a.colocated, a.index, b.r, b.colocated, b.index, now)).map((r) => r.pod);
  }
}

/** The ranking's order leaving out crowding (for pods alike up to it): negative when a goes first. */
export function compareApartFromCrowding(a: RankedPod, b: RankedPod, now: number): number {
  return order(a.rank(), 0, a.seq, b.rank(), 0, b.seq, now);
}

/** When the first of the pod's log2 age buckets (ready since, created) moves on from what it is at `now`. */
export function bucketsChangeAt(r: PodRank, now: number): number {
  return Math.min(bucketEnds(r.readySince, now), bucketEnds(r.created, now));
}

/** A moment before which the bucket surely stays (a microsecond early, for rounding at 1.7e12 ms). */
function bucketEnds(time: number, now: number): number {
  if (time === 0) return Infinity; // an unknown time is never bucketed
  if (now <= time) return time; // no age yet: any later moment has one
  return time + 2 ** (logBucket(time, now) + 1) / 1e6 - 1e-3;
}

/**
 * Whether a pod ranks like every ordinary one up to the "doubled up" rule: scheduled, Running, ready, no deletion
 * cost. When all of a ReplicaSet's pods are, the node's crowding decides first.
 */
export function isOrdinaryForDeletion(r: PodRank): boolean {
  return r.node !== '' && r.phase === PHASE_ORDINAL.Running && r.ready && r.cost === 0;
}

function before(a: Ranked, b: Ranked, now: number): boolean {
  return order(a.r, a.colocated, a.index, b.r, b.colocated, b.index, now) < 0;
}

function siftUp(heap: Ranked[], i: number, now: number): void {
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!before(heap[parent]!, heap[i]!, now)) break;
    [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
    i = parent;
  }
}

function siftDown(heap: Ranked[], i: number, now: number): void {
  for (;;) {
    const l = 2 * i + 1;
    const r = l + 1;
    let top = i;
    if (l < heap.length && before(heap[top]!, heap[l]!, now)) top = l;
    if (r < heap.length && before(heap[top]!, heap[r]!, now)) top = r;
    if (top === i) return;
    [heap[i], heap[top]] = [heap[top]!, heap[i]!];
    i = top;
  }
}

/** A total order, negative when pod a goes first: Kubernetes' rules, then the input order. */
function order(
  a: PodRank,
  colocatedA: number,
  indexA: number,
  b: PodRank,
  colocatedB: number,
  indexB: number,
  now: number,
): number {
  if (a.node !== b.node && (a.node === '' || b.node === '')) return a.node === '' ? -1 : 1;
  if (a.phase !== b.phase) return a.phase - b.phase;
  if (a.ready !== b.ready) return a.ready ? 1 : -1;
  if (a.cost !== b.cost) return a.cost - b.cost;
  if (colocatedA !== colocatedB) return colocatedB - colocatedA;
  if (a.ready && b.ready && a.readySince !== b.readySince) {
    const byReady = newerFirst(
      a.readySince,
      b.readySince,
      bucketsFor(a, now).readyBucket,
      bucketsFor(b, now).readyBucket,
      a.uid,
      b.uid,
    );
    return byReady !== 0 ? byReady : indexA - indexB;
  }
  if (a.restarts !== b.restarts) return b.restarts - a.restarts;
  if (a.sidecarRestarts !== b.sidecarRestarts) return b.sidecarRestarts - a.sidecarRestarts;
  if (a.created !== b.created) {
    const byCreated = newerFirst(
      a.created,
      b.created,
      bucketsFor(a, now).createdBucket,
      bucketsFor(b, now).createdBucket,
      a.uid,
      b.uid,
    );
    if (byCreated !== 0) return byCreated;
  }
  return indexA - indexB;
}

/**
 * The more recent time first (a missing time counts as most recent), compared in log2 buckets of the age:
 * negative when the first goes first, 0 when the rule cannot tell them apart.
 */
function newerFirst(t1: number, t2: number, bucket1: number, bucket2: number, uid1: string, uid2: string): number {
  if (t1 === 0 || t2 === 0) return t1 === 0 ? -1 : 1;
  if (bucket1 === bucket2) return uid1 < uid2 ? -1 : uid2 < uid1 ? 1 : 0;
  return bucket1 < bucket2 ? -1 : 1;
}

/** floor(log2(age in nanoseconds)), -1 for no age: Go's logarithmicRankDiff works on time.Duration. */
function logBucket(time: number, now: number): number {
  const ageMs = now - time;
  return ageMs > 0 ? Math.floor(Math.log2(ageMs * 1e6)) : -1;
}

export function nodeName(pod: KubeObject): string {
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  return typeof spec.nodeName === 'string' ? spec.nodeName : '';
}

function deletionCost(pod: KubeObject): number {
  const text = pod.metadata.annotations?.[POD_DELETION_COST];
  if (text === undefined || !/^[+-]?\d+$/.test(text.trim())) return 0;
  const n = Number(text.trim());
  return n >= -2147483648 && n <= 2147483647 ? n : 0;
}

function maxRestarts(pod: KubeObject): { regular: number; sidecar: number } {
  let regular = 0;
  for (const c of containerStatuses(pod)) regular = Math.max(regular, c.restartCount ?? 0);
  const spec = isPlainObject(pod.spec) ? pod.spec : {};
  const sidecars = new Set<string>();
  if (Array.isArray(spec.initContainers)) {
    for (const c of spec.initContainers)
      if (isPlainObject(c) && c.restartPolicy === 'Always' && typeof c.name === 'string') sidecars.add(c.name);
  }
  let sidecar = 0;
  for (const c of containerStatuses(pod, 'initContainerStatuses'))
    if (sidecars.has(c.name)) sidecar = Math.max(sidecar, c.restartCount ?? 0);
  return { regular, sidecar };
}

function timeOf(ts: string | undefined): number {
  if (!ts) return 0;
  const t = Date.parse(ts);
  return Number.isNaN(t) ? 0 : t;
}
