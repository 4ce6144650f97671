import { rfc3339 } from '../clock/clock.js';
import { ApiError } from '../api/errors.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { Resources as Gvrs } from '../client/client.js';
import { cacheKey, type Informer } from '../client/informer.js';
import { isTerminal, podNodeName, setPodCondition } from '../api/pod-util.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import {
  allocatableOf,
  feasibleNodesToFind,
  filterNode,
  fitErrorMessage,
  podFilter,
  preFilterMessage,
  podRequest,
  selectHost,
  ZONE_LABEL,
  type Candidate,
  type FilterFailure,
  type NodeState,
  type PodRequest,
} from './plugins.js';
import { BIND_TIMEOUT_MS, VolumeBinder, type VolumePlan } from './volume-binding.js';
import type { SchedulerMetrics } from '../metrics/metrics.js';

function count(map: Map<string, Map<string, number>>, owner: string, key: string, delta: number): void {
  let inner = map.get(owner);
  if (!inner) map.set(owner, (inner = new Map()));
  const n = (inner.get(key) ?? 0) + delta;
  if (n > 0) inner.set(key, n);
  else inner.delete(key);
  if (inner.size === 0) map.delete(owner);
}

/**
 * Requests by the part of the spec they were read from: the containers when nothing else counts (no init
 * containers, no overhead), else the whole spec. The accounting keeps a request per assigned pod (an object and a
 * Map each), and the pods of a template share their containers in the cache (the store keeps one copy of the parts
 * its objects have alike), so they share one request too. Requests are only read.
 */
const requests = new WeakMap<object, PodRequest>();

function requestOf(pod: KubeObject): PodRequest {
  const spec = isPlainObject(pod.spec) ? pod.spec : undefined;
  if (!spec) return podRequest(pod);
  const source =
    spec.initContainers === undefined && spec.overhead === undefined && Array.isArray(spec.containers)
      ? spec.containers
      : spec;
  let request = requests.get(source);
  if (!request) requests.set(source, (request = podRequest(pod)));
  return request;
}

export const SCHEDULER_NAME = 'default-scheduler';
/** podInitialBackoffDuration / podMaxBackoffDuration. */
const INITIAL_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 10_000;
/** podMaxInUnschedulablePodsDuration: an unschedulable pod is tried again at least this often. */
const UNSCHEDULABLE_RETRY_MS = 5 * 60_000;

type Obj = Record<string, unknown>;

function ownerUid(pod: KubeObject): string | undefined {
  return pod.metadata.ownerReferences?.find((r) => r.controller)?.uid;
}

/**
 * kube-scheduler's default profile for pods with schedulerName default-scheduler and no node: filter the nodes,
 * score the feasible ones, bind through pods/NAME/binding. A pod that fits nowhere gets PodScheduled=False
 * (Unschedulable) with the FitError message and a FailedScheduling event, and is tried again when a node or
 * an assigned pod changes (after its back-off), or every 5 minutes. Node accounting is kept incrementally from
 * the pod informer, with bound-but-not-yet-observed pods assumed, so no decision rescans every pod.
 */
export class Scheduler implements Controller {
  readonly name = SCHEDULER_NAME;
  private readonly pods: Informer;
  private readonly nodes: Informer;
  private readonly loop: ReconcileLoop;
  private readonly states = new Map<string, NodeState>();
  private order: string[] = [];
  private orderDirty = false;
  private nextStart = 0;
  /** What each assigned pod adds to its node's accounting (and its controller's spread counts). */
  private readonly accounted = new Map<string, { node: string; request: PodRequest; owner?: string; zone?: string }>();
  /** Assigned pods per controller uid, per node and per zone: PodTopologySpread's counts, kept incrementally. */
  private readonly ownerNodes = new Map<string, Map<string, number>>();
  private readonly ownerZones = new Map<string, Map<string, number>>();
  /** Pods bound by us that the informer has not shown bound yet. */
  private readonly assumed = new Set<string>();
  /** Pods that fit nowhere, with their attempt count and last attempt time. */
  private readonly unschedulable = new Map<string, { attempts: number; at: number }>();
  /**
   * Of those, the ones waiting for a cluster change (kube-scheduler's unschedulablePods): a change moves them to
   * the queue after their back-off and they leave this set, so the next change does not move them again until
   * they have failed once more. Moving every unschedulable pod on every pod deletion was O(pending × deletions),
   * millions of moves in a large rolling update.
   */
  private readonly parked = new Set<string>();
  private readonly recorder;
  private wakeScheduled = false;
  private readonly volumes: VolumeBinder;
  /**
   * Pods assumed on a node whose claims the PV controller is binding (VolumeBinding's PreBind waits for it), with
   * when it gives up; and by claim, the pods waiting for it.
   */
  private readonly waitingForVolumes = new Map<string, { node: string; deadline: number; claims: string[] }>();
  private readonly claimWaiters = new Map<string, Set<string>>();
  /** scheduler_schedule_attempts_total's series (and scheduler_pending_pods, read from the queues). */
  private readonly attempts: SchedulerMetrics | undefined;

  constructor(private readonly ctx: ControllerContext) {
    this.pods = ctx.informers.for(Gvrs.pods);
    this.nodes = ctx.informers.for(Gvrs.nodes);
    this.volumes = new VolumeBinder(ctx, (claim) => {
      for (const key of (claim && this.claimWaiters.get(claim)) || []) this.loop.queue.add(key);
      this.wakeUnschedulable();
    });
    this.recorder = ctx.recorder(SCHEDULER_NAME);
    this.loop = new ReconcileLoop('scheduler', ctx, (key) => this.attempt(key), 1);
    // kube-scheduler's queues, as near as this one's state says: keys waiting to be tried (activeQ), pods moved
    // back after a cluster change that wait out their back-off or their turn (backoffQ), pods parked until a
    // change (unschedulablePods).
    this.attempts = ctx.metrics?.scheduler(SCHEDULER_NAME, () => ({
      active: this.loop.queue.length,
      backoff: this.unschedulable.size - this.parked.size,
      unschedulable: this.parked.size,
    }));
    this.pods.addEventHandler({
      add: (pod) => this.podChanged(undefined, pod),
      update: (old, pod) => this.podChanged(old, pod),
      delete: (pod) => this.podDeleted(pod),
    });
    this.nodes.addEventHandler({
      add: (node) => this.nodeChanged(undefined, node),
      update: (old, node) => this.nodeChanged(old, node),
      delete: (node) => {
        this.states.delete(node.metadata.name!);
        this.orderDirty = true;
      },
    });
  }

  async start(): Promise<void> {
    this.loop.start();
  }

  stop(): void {
    this.loop.stop();
  }

  // ---------------------------------------------------------------------------------------------------
  // accounting

  private state(name: string): NodeState | undefined {
    return this.states.get(name);
  }

  private account(key: string, node: string | undefined, request: PodRequest | undefined, owner?: string): void {
    const previous = this.accounted.get(key);
    if (previous) {
      const s = this.state(previous.node);
      if (s) {
        for (const [k, v] of previous.request.resources) s.requested.set(k, (s.requested.get(k) ?? 0) - v);
        s.nonZeroCpu -= previous.request.nonZeroCpu;
        s.nonZeroMemory -= previous.request.nonZeroMemory;
        s.pods--;
      }
      if (previous.owner) {
        count(this.ownerNodes, previous.owner, previous.node, -1);
        if (previous.zone !== undefined) count(this.ownerZones, previous.owner, previous.zone, -1);
      }
      this.accounted.delete(key);
    }
    if (node === undefined || request === undefined) return;
    const s = this.state(node);
    const zone = s?.node.metadata.labels?.[ZONE_LABEL];
    this.accounted.set(key, { node, request, owner, zone });
    if (owner) {
      count(this.ownerNodes, owner, node, 1);
      if (zone !== undefined) count(this.ownerZones, owner, zone, 1);
    }
    if (!s) return;
    for (const [k, v] of request.resources) s.requested.set(k, (s.requested.get(k) ?? 0) + v);
    s.nonZeroCpu += request.nonZeroCpu;
    s.nonZeroMemory += request.nonZeroMemory;
    s.pods++;
  }

  private isPending(pod: KubeObject): boolean {
    const spec = isPlainObject(pod.spec) ? pod.spec : {};
    return (
      podNodeName(pod) === '' &&
      !pod.metadata.deletionTimestamp &&
      (spec.schedulerName ?? SCHEDULER_NAME) === SCHEDULER_NAME &&
      !isTerminal(pod)
    );
  }

  private podChanged(old: KubeObject | undefined, pod: KubeObject): void {
    const node = podNodeName(pod);
    // A bound pod that stays on its node, terminal or not as before (its status writes, its deletion): its
    // previous event left the accounting as it must be. Most pod events are these; no key is built for them.
    if (node !== '' && old !== undefined && podNodeName(old) === node && isTerminal(old) === isTerminal(pod)) return;
    const key = cacheKey(pod);
    if (node !== '') {
      this.assumed.delete(key);
      this.forgetUnschedulable(key);
      const terminal = isTerminal(pod);
      const wasCounted = this.accounted.has(key);
      if (terminal) this.account(key, undefined, undefined);
      else if (!wasCounted || this.accounted.get(key)!.node !== node)
        this.account(key, node, requestOf(pod), ownerUid(pod));
      if (terminal && wasCounted) this.wakeUnschedulable();
      return;
    }
    if (!this.isPending(pod)) {
      this.forgetUnschedulable(key);
      return;
    }
    // An unschedulable pod is not retried for its own status writes, only when what it asks for changes.
    if (
      old &&
      this.unschedulable.has(key) &&
      deepEqual(old.spec, pod.spec) &&
      deepEqual(old.metadata.labels, pod.metadata.labels)
    )
      return;
    this.parked.delete(key);
    this.loop.queue.add(key);
  }

  private forgetUnschedulable(key: string): void {
    this.unschedulable.delete(key);
    this.parked.delete(key);
  }

  private podDeleted(pod: KubeObject): void {
    const key = cacheKey(pod);
    this.stopWaiting(key);
    this.assumed.delete(key);
    this.forgetUnschedulable(key);
    if (this.accounted.has(key)) {
      this.account(key, undefined, undefined);
      this.wakeUnschedulable();
    }
  }

  private nodeChanged(old: KubeObject | undefined, node: KubeObject): void {
    const name = node.metadata.name!;
    let s = this.states.get(name);
    if (!s) {
      s = {
        name,
        node,
        allocatable: allocatableOf(node),
        requested: new Map(),
        nonZeroCpu: 0,
        nonZeroMemory: 0,
        pods: 0,
      };
      this.states.set(name, s);
      this.orderDirty = true;
      // Pods seen bound to it before the node itself (a restart with --data, a snapshot): accounted, but not yet
      // counted on a node state. (account() would take them off this new state first, and so count them as 0.)
      for (const a of this.accounted.values()) {
        if (a.node !== name) continue;
        for (const [k, v] of a.request.resources) s.requested.set(k, (s.requested.get(k) ?? 0) + v);
        s.nonZeroCpu += a.request.nonZeroCpu;
        s.nonZeroMemory += a.request.nonZeroMemory;
        s.pods++;
      }
    } else {
      s.node = node;
      s.allocatable = allocatableOf(node);
    }
    // Heartbeats change a node every few seconds; only what filters read wakes unschedulable pods.
    const relevant = (n: KubeObject | undefined): unknown =>
      n && [
        n.metadata.labels,
        (n.spec as Obj | undefined)?.taints,
        (n.spec as Obj | undefined)?.unschedulable,
        (n.status as Obj | undefined)?.allocatable,
      ];
    if (!old || !deepEqual(relevant(old), relevant(node))) this.wakeUnschedulable();
  }

  /**
   * A cluster change that may let unschedulable pods fit: each goes back to the queue after its back-off.
   * Changes that arrive together (a Job's pods finishing) move the pods once.
   */
  private wakeUnschedulable(): void {
    if (this.wakeScheduled || this.parked.size === 0) return;
    this.wakeScheduled = true;
    queueMicrotask(() => {
      this.wakeScheduled = false;
      this.moveUnschedulable();
    });
  }

  private moveUnschedulable(): void {
    const now = this.ctx.clock.now();
    for (const key of this.parked) {
      const u = this.unschedulable.get(key);
      if (!u) continue;
      const backoff = Math.min(INITIAL_BACKOFF_MS * 2 ** Math.max(0, u.attempts - 1), MAX_BACKOFF_MS);
      this.loop.queue.addAfter(key, Math.max(0, u.at + backoff - now));
    }
    this.parked.clear();
  }

  private nodeOrder(): string[] {
    if (this.orderDirty) {
      this.order = [...this.states.keys()].sort();
      this.orderDirty = false;
    }
    return this.order;
  }

  // ---------------------------------------------------------------------------------------------------
  // one scheduling cycle

  /** A cycle that fails for another reason than the pod not fitting is an error attempt (it is retried). */
  private async attempt(key: string): Promise<ReconcileResult | void> {
    try {
      return await this.schedule(key);
    } catch (err) {
      if (this.attempts) this.attempts.error.value++;
      throw err;
    }
  }

  private async schedule(key: string): Promise<ReconcileResult | void> {
    const slash = key.indexOf('/');
    const pod = this.pods.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pod || !this.isPending(pod)) {
      this.stopWaiting(key);
      return;
    }
    const waiting = this.waitingForVolumes.get(key);
    if (waiting) return this.finishVolumeBinding(pod, key, waiting);
    if (this.assumed.has(key)) return;
    const request = requestOf(pod);
    const prepared = podFilter(pod);
    const order = this.nodeOrder();
    const preemptionPolicy = (pod.spec as Obj).preemptionPolicy as string | undefined;
    // VolumeBinding's PreFilter: claims missing, terminating or unbound with immediate binding fail on every node.
    const volumes = this.volumes.prefilter(pod);
    if (volumes && 'failure' in volumes)
      return this.unschedulableFor(pod, key, preFilterMessage(order.length, volumes.failure, preemptionPolicy));
    const podVolumes = volumes?.volumes;
    const plans = new Map<string, VolumePlan>();
    const want = feasibleNodesToFind(order.length);
    const failures: FilterFailure[] = [];
    const feasible: NodeState[] = [];
    const start = order.length > 0 ? this.nextStart % order.length : 0;
    let checked = 0;
    for (; checked < order.length && feasible.length < want; checked++) {
      const state = this.states.get(order[(start + checked) % order.length]!)!;
      let failure = filterNode(prepared, request, state);
      if (!failure && podVolumes) {
        const fit = this.volumes.filter(podVolumes, state.node);
        failure = fit.failure;
        if (fit.plan) plans.set(state.name, fit.plan);
      }
      if (failure) failures.push(failure);
      else feasible.push(state);
    }
    this.nextStart = order.length > 0 ? (start + checked) % order.length : 0;
    if (feasible.length === 0)
      return this.unschedulableFor(pod, key, fitErrorMessage(order.length, failures, preemptionPolicy));

    const candidates = this.candidates(pod, feasible);
    const chosen = candidates[selectHost(pod, request, candidates, (n) => this.ctx.random.int(n))]!.state;
    // Assume the pod on the node, so the next decision sees its requests before the informer does.
    this.assumed.add(key);
    this.account(key, chosen.name, request, ownerUid(pod));
    const plan = plans.get(chosen.name);
    if (plan && (plan.static.length > 0 || plan.provision.length > 0)) {
      try {
        await this.volumes.bind(plan, chosen.name);
      } catch (err) {
        this.unassume(pod, key);
        throw err;
      }
      const claims = [...plan.static.map((s) => s.claim), ...plan.provision].map((c) => cacheKey(c));
      this.waitingForVolumes.set(key, { node: chosen.name, deadline: this.ctx.clock.now() + BIND_TIMEOUT_MS, claims });
      for (const c of claims) {
        let waiters = this.claimWaiters.get(c);
        if (!waiters) this.claimWaiters.set(c, (waiters = new Set()));
        waiters.add(key);
      }
      return this.finishVolumeBinding(pod, key, this.waitingForVolumes.get(key)!);
    }
    return this.bindPod(pod, key, chosen.name);
  }

  /** PreBind's wait: the pod is bound once all its claims are; the attempt fails after bindTimeoutSeconds. */
  private async finishVolumeBinding(
    pod: KubeObject,
    key: string,
    waiting: { node: string; deadline: number },
  ): Promise<ReconcileResult | void> {
    if (this.volumes.allBound(pod)) {
      this.stopWaiting(key);
      return this.bindPod(pod, key, waiting.node);
    }
    const now = this.ctx.clock.now();
    if (now < waiting.deadline) return { requeueAfterMs: waiting.deadline - now };
    this.stopWaiting(key);
    this.unassume(pod, key);
    return this.unschedulableFor(
      pod,
      key,
      'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded',
    );
  }

  private stopWaiting(key: string): void {
    const waiting = this.waitingForVolumes.get(key);
    if (!waiting) return;
    this.waitingForVolumes.delete(key);
    for (const c of waiting.claims) {
      const waiters = this.claimWaiters.get(c);
      waiters?.delete(key);
      if (waiters?.size === 0) this.claimWaiters.delete(c);
    }
  }

  /** Takes back an assumption that did not come to a binding. */
  private unassume(pod: KubeObject, key: string): void {
    this.assumed.delete(key);
    if (podNodeName(this.pods.get(pod.metadata.namespace, pod.metadata.name!) ?? pod) === '')
      this.account(key, undefined, undefined);
  }

  private async bindPod(pod: KubeObject, key: string, node: string): Promise<void> {
    try {
      await this.ctx.client.createSubresource!(Gvrs.pods, pod.metadata.namespace, pod.metadata.name!, 'binding', {
        apiVersion: 'v1',
        kind: 'Binding',
        metadata: { name: pod.metadata.name, namespace: pod.metadata.namespace, uid: pod.metadata.uid },
        target: { apiVersion: 'v1', kind: 'Node', name: node },
      });
    } catch (err) {
      this.unassume(pod, key);
      if (err instanceof ApiError && (err.code === 404 || err.code === 409)) return; // deleted, or bound meanwhile
      throw err;
    }
    this.forgetUnschedulable(key);
    if (this.attempts) this.attempts.scheduled.value++;
    this.recorder.event(
      pod,
      'Normal',
      'Scheduled',
      `Successfully assigned ${pod.metadata.namespace}/${pod.metadata.name} to ${node}`,
    );
  }

  /** Siblings (assigned pods of the same controller) per candidate node and zone. */
  private candidates(pod: KubeObject, feasible: NodeState[]): Candidate[] {
    const uid = ownerUid(pod);
    const onNode = (uid && this.ownerNodes.get(uid)) || new Map<string, number>();
    const inZone = (uid && this.ownerZones.get(uid)) || new Map<string, number>();
    return feasible.map((state) => ({
      state,
      siblingsOnNode: onNode.get(state.name) ?? 0,
      siblingsInZone: inZone.get(state.node.metadata.labels?.[ZONE_LABEL] ?? '\u0000') ?? 0,
    }));
  }

  private async unschedulableFor(pod: KubeObject, key: string, message: string): Promise<ReconcileResult> {
    const now = this.ctx.clock.now();
    const previous = this.unschedulable.get(key);
    this.unschedulable.set(key, { attempts: (previous?.attempts ?? 0) + 1, at: now });
    // Parked in the same synchronous step as the failed filter: a change after it moves the pod again.
    this.parked.add(key);
    if (this.attempts) this.attempts.unschedulable.value++;
    this.recorder.event(pod, 'Warning', 'FailedScheduling', message);
    // setPodCondition replaces the conditions array: the other parts stay the stored pod's, which the store's write skips.
    const status: Obj = isPlainObject(pod.status) ? { ...pod.status } : {};
    setPodCondition(status, { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }, rfc3339(now));
    if (!deepEqual(status, pod.status)) {
      try {
        await this.ctx.client.updateStatus(Gvrs.pods, { ...pod, status });
      } catch (err) {
        if (!(err instanceof ApiError && (err.code === 404 || err.code === 409))) throw err;
      }
    }
    return { requeueAfterMs: UNSCHEDULABLE_RETRY_MS };
  }
}
