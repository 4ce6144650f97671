import { rfc3339 } from '../clock/clock.js';
import { ApiError, ignoreNotFound } from '../api/errors.js';
import { selectorFromObject, type LabelSelector } from '../api/selectors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject, type OwnerReference } from '../api/types.js';
import { Resources, type Gvr } from '../client/client.js';
import { cacheKey } from '../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import type { EventRecorder } from '../runtime/events.js';
import { Expectations } from '../runtime/expectations.js';
import { controlledBy, controllerOf, indexByController, newControllerRef } from './controller-ref.js';
import { applyClaims, childSelector, planClaims } from './claims.js';
import { isPodActive } from '../api/pod-util.js';
import {
  mattersToReplicaSet,
  OwnedPodTallies,
  type OwnedPodTally,
  type PodSource,
  type PodSummary,
} from './owned-pods.js';

/**
 * The ReplicaSet controller (pkg/controller/replicaset): keeps `spec.replicas` pods from the template, owning
 * them with a controller reference; adopts orphans its selector matches and releases pods that no longer match;
 * deletes the least valuable pods first; reports replicas, fullyLabeled, ready and available (ready for
 * minReadySeconds on the clock) replicas, and a ReplicaFailure condition when pods cannot be created or deleted.
 */

/** kube-controller-manager's burstReplicas: the most pods one sync creates or deletes. */
export const BURST_REPLICAS = 500;
/** controller.SlowStartInitialBatchSize: creations go 1, 2, 4, … at a time and stop at the first failure. */
export const SLOW_START_INITIAL_BATCH = 1;
export const REPLICA_FAILURE = 'ReplicaFailure';

const ORPHAN_INDEX = 'orphan-by-namespace';
const NAMESPACE_INDEX = 'namespace';

export interface ReplicaSetCondition {
  type: string;
  status: string;
  lastTransitionTime?: string;
  reason?: string;
  message?: string;
}

export interface ReplicaSetStatus {
  replicas: number;
  fullyLabeledReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  observedGeneration?: number;
  conditions?: ReplicaSetCondition[];
}

export interface ReplicaSetPlan {
  /** Pods to create now (at most burstReplicas). */
  create: number;
  /** Pods to delete now, least valuable first (at most burstReplicas). */
  delete: KubeObject[];
  /**
   * Status as the pods stand, observedGeneration included, without ReplicaFailure: withReplicaFailure adds it
   * back once the plan's writes were tried, if they failed (calculateStatus).
   */
  status: ReplicaSetStatus;
  /** When the next ready pod becomes available (minReadySeconds), so the status is refreshed then. */
  requeueAfterMs?: number;
}

export function replicasOf(obj: KubeObject): number {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  return typeof spec.replicas === 'number' ? spec.replicas : 1;
}

export function minReadySecondsOf(obj: KubeObject): number {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  return typeof spec.minReadySeconds === 'number' ? spec.minReadySeconds : 0;
}

export function replicaSetStatus(obj: KubeObject): ReplicaSetStatus {
  const s = isPlainObject(obj.status) ? (obj.status as Partial<ReplicaSetStatus>) : {};
  return { ...s, replicas: s.replicas ?? 0 };
}

export function templateLabels(rs: KubeObject): Record<string, string> {
  const spec = isPlainObject(rs.spec) ? rs.spec : {};
  const template = isPlainObject(spec.template) ? spec.template : {};
  const meta = isPlainObject(template.metadata) ? template.metadata : {};
  return isPlainObject(meta.labels) ? (meta.labels as Record<string, string>) : {};
}

/**
 * The whole decision for one sync, from a summary of the pods this ReplicaSet owns (active ones its selector
 * matches) and, for the "doubled up on a node" rank, how many pods its sibling ReplicaSets have on each node. `manage` is false while
 * earlier creations or deletions have not been observed yet, or while the ReplicaSet is being deleted: then only
 * the status moves.
 *
 * Example: replicas 5, 3 pods → create 2. Replicas 1, pods [running+ready, pending] → delete the pending one.
 * minReadySeconds 30, a pod ready since 25 s → not available yet, look again in 5 s.
 */
export function planReplicaSet(
  rs: KubeObject,
  pods: PodSummary,
  related: () => ReadonlyMap<string, number>,
  now: number,
  options: { manage: boolean; burstReplicas?: number },
): ReplicaSetPlan {
  const burst = options.burstReplicas ?? BURST_REPLICAS;
  const diff = pods.count - replicasOf(rs);
  let create = 0;
  let remove: KubeObject[] = [];
  if (options.manage && diff < 0) create = Math.min(-diff, burst);
  if (options.manage && diff > 0) remove = pods.toDelete(related(), Math.min(diff, burst), now);

  // IsPodAvailable: ready, for at least minReadySeconds.
  const minReadyMs = minReadySecondsOf(rs) * 1000;
  let available = pods.ready;
  let nextAvailable: number | undefined;
  if (minReadyMs > 0) {
    available = 0;
    for (const since of pods.readySince()) {
      const wait = since + minReadyMs - now;
      if (wait <= 0) available++;
      else if (!Number.isNaN(wait)) nextAvailable = Math.min(nextAvailable ?? wait, wait);
    }
  }
  const previous = replicaSetStatus(rs);
  const status: ReplicaSetStatus = compactStatus({
    replicas: pods.count,
    fullyLabeledReplicas: pods.fullyLabeled,
    readyReplicas: pods.ready,
    availableReplicas: available,
    observedGeneration: rs.metadata.generation,
    conditions: (previous.conditions ?? []).filter((c) => c.type !== REPLICA_FAILURE),
  });
  const plan: ReplicaSetPlan = { create, delete: remove, status };
  if (nextAvailable !== undefined) plan.requeueAfterMs = nextAvailable;
  return plan;
}

/**
 * The status once the plan's writes were tried: a failure sets ReplicaFailure (reason FailedCreate or
 * FailedDelete, the error as message) unless one is already there; success clears it.
 */
export function withReplicaFailure(
  status: ReplicaSetStatus,
  previous: ReplicaSetStatus,
  error: Error | undefined,
  diff: number,
  now: number,
): ReplicaSetStatus {
  const existing = previous.conditions?.find((c) => c.type === REPLICA_FAILURE);
  const others = (status.conditions ?? []).filter((c) => c.type !== REPLICA_FAILURE);
  let conditions = others;
  if (error) {
    const condition: ReplicaSetCondition = existing ?? {
      type: REPLICA_FAILURE,
      status: 'True',
      lastTransitionTime: rfc3339(now),
      reason: diff < 0 ? 'FailedCreate' : diff > 0 ? 'FailedDelete' : '',
      message: error.message,
    };
    conditions = [...others, condition];
  }
  return compactStatus({ ...status, conditions });
}

/** Drops zero counts and empty conditions, as Go's omitempty does (replicas is always written). */
export function compactStatus(status: ReplicaSetStatus): ReplicaSetStatus {
  const out: ReplicaSetStatus = { replicas: status.replicas };
  if (status.fullyLabeledReplicas) out.fullyLabeledReplicas = status.fullyLabeledReplicas;
  if (status.readyReplicas) out.readyReplicas = status.readyReplicas;
  if (status.availableReplicas) out.availableReplicas = status.availableReplicas;
  if (status.observedGeneration) out.observedGeneration = status.observedGeneration;
  if (status.conditions && status.conditions.length > 0) out.conditions = status.conditions;
  return out;
}

/** controller.GetPodFromTemplate: labels, annotations and finalizers from the template, owned by the ReplicaSet. */
export function podFromTemplate(rs: KubeObject, controllerRef: OwnerReference): KubeObject {
  const spec = isPlainObject(rs.spec) ? rs.spec : {};
  const template = isPlainObject(spec.template) ? spec.template : {};
  const meta = isPlainObject(template.metadata) ? template.metadata : {};
  const metadata: KubeObject['metadata'] = {
    generateName: podPrefix(rs.metadata.name!),
    ownerReferences: [controllerRef],
  };
  if (isPlainObject(meta.labels)) metadata.labels = { ...(meta.labels as Record<string, string>) };
  if (isPlainObject(meta.annotations)) metadata.annotations = { ...(meta.annotations as Record<string, string>) };
  if (Array.isArray(meta.finalizers) && meta.finalizers.length > 0)
    metadata.finalizers = [...(meta.finalizers as string[])];
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec: deepCopy(template.spec ?? {}) };
}

/** `<name>-`, unless that would be too long for a name, then the name itself (getPodsPrefix). */
function podPrefix(name: string): string {
  return name.length < 253 ? `${name}-` : name;
}

/**
 * Runs fn `count` times in batches of 1, 2, 4, … (slowStartBatch): a batch with a failure stops the rest, so a
 * template the API refuses costs one request, not hundreds. Returns how many calls succeeded and the first error.
 */
export async function slowStartBatch(
  count: number,
  initialBatch: number,
  fn: () => Promise<void>,
): Promise<{ successes: number; error?: Error }> {
  let remaining = count;
  let successes = 0;
  for (let batch = Math.min(remaining, initialBatch); batch > 0; batch = Math.min(2 * batch, remaining)) {
    const results = await Promise.allSettled(Array.from({ length: batch }, () => fn()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    successes += results.filter((r) => r.status === 'fulfilled').length;
    if (failed)
      return { successes, error: failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason)) };
    remaining -= batch;
  }
  return { successes };
}

function isNamespaceTerminating(err: unknown): boolean {
  return err instanceof ApiError && (err.details?.causes ?? []).some((c) => c.reason === 'NamespaceTerminating');
}

/**
 * A kind the ReplicaSet algorithm runs: apps/v1 ReplicaSet, or v1 ReplicationController, whose equality selector
 * (a map) is the LabelSelector `{matchLabels: map}` (kube-controller-manager's replication manager is the ReplicaSet
 * controller over an RC-to-RS adapter).
 */
export interface ReplicatedKind {
  /** The controller's name in kube-controller-manager (and in --controllers). */
  controller: string;
  /** The component its events are from. */
  component: string;
  gvr: Gvr;
  apiVersion: string;
  kind: string;
  /** The pod selector, as a LabelSelector object. */
  selector(owner: KubeObject): unknown;
}

const groupOf = (apiVersion: string): string => (apiVersion.includes('/') ? apiVersion.split('/')[0]! : '');

const specOf = (o: KubeObject): Record<string, unknown> => (isPlainObject(o.spec) ? o.spec : {});

export const REPLICA_SETS: ReplicatedKind = {
  controller: 'replicaset',
  component: 'replicaset-controller',
  gvr: Resources.replicasets,
  apiVersion: 'apps/v1',
  kind: 'ReplicaSet',
  selector: (rs) => specOf(rs).selector,
};

export const REPLICATION_CONTROLLERS: ReplicatedKind = {
  controller: 'replicationcontroller',
  component: 'replication-controller',
  gvr: Resources.replicationcontrollers,
  apiVersion: 'v1',
  kind: 'ReplicationController',
  selector: (rc) => {
    const selector = specOf(rc).selector;
    return isPlainObject(selector) && Object.keys(selector).length > 0 ? { matchLabels: selector } : undefined;
  },
};

export function replicaSetController(ctx: ControllerContext): Controller {
  return replicatedPodsController(ctx, REPLICA_SETS);
}

/** The replication manager: ReplicationControllers, kept by the ReplicaSet controller's algorithm. */
export function replicationManager(ctx: ControllerContext): Controller {
  return replicatedPodsController(ctx, REPLICATION_CONTROLLERS);
}

function replicatedPodsController(ctx: ControllerContext, target: ReplicatedKind): Controller {
  const replicaSets = ctx.informers.for(target.gvr);
  const pods = ctx.informers.for(Resources.pods);
  const recorder: EventRecorder = ctx.recorder(target.component);
  const expectations = new Expectations(ctx.clock);
  const loop = new ReconcileLoop(target.controller, ctx, reconcile, 5, { batchTurns: 4 });
  const selectors = new WeakMap<KubeObject, LabelSelector>();

  indexByController(pods);
  indexByController(replicaSets);
  pods.addIndex(ORPHAN_INDEX, (pod) => (controllerOf(pod) ? [] : [pod.metadata.namespace ?? '']));
  replicaSets.addIndex(NAMESPACE_INDEX, (rs) => [rs.metadata.namespace ?? '']);

  const keyOf = (rs: KubeObject): string => `${rs.metadata.namespace}/${rs.metadata.name}`;

  // One LabelSelector per distinct selector (not per ReplicaSet version), so answers remembered per pod carry over.
  const byText = new Map<string, LabelSelector>();
  const selectorOf = (rs: KubeObject): LabelSelector | undefined => {
    let s = selectors.get(rs);
    if (!s) {
      const raw = target.selector(rs);
      const text = JSON.stringify(raw ?? null);
      s = byText.get(text);
      if (!s) {
        try {
          s = selectorFromObject(raw);
        } catch {
          return undefined;
        }
        byText.set(text, s);
      }
      selectors.set(rs, s);
    }
    return s;
  };

  /** The ReplicaSet a controller reference names, if it is still that object. */
  const resolve = (namespace: string | undefined, ref: OwnerReference | undefined): KubeObject | undefined => {
    // Of the kind's group, whatever its version (apps/v1beta2 ReplicaSets are apps/v1's).
    if (ref?.kind !== target.kind || groupOf(ref.apiVersion) !== groupOf(target.apiVersion)) return undefined;
    const rs = replicaSets.get(namespace, ref.name);
    return rs && rs.metadata.uid === ref.uid ? rs : undefined;
  };

  /** ReplicaSets whose selector matches an orphan pod (getPodReplicaSets). */
  const matchingReplicaSets = (pod: KubeObject): KubeObject[] =>
    replicaSets.byIndex(NAMESPACE_INDEX, pod.metadata.namespace ?? '').filter((rs) => {
      const s = selectorOf(rs);
      return s !== undefined && !s.empty && s.matches(pod.metadata.labels);
    });

  /** Each ReplicaSet's pods, counted as the pod cache changes (keyed by ReplicaSet uid). */
  const tallies = new OwnedPodTallies();
  pods.addCacheIndex(tallies);
  const podSource: PodSource = {
    get: (key) => {
      const slash = key.indexOf('/');
      return pods.get(key.slice(0, slash), key.slice(slash + 1));
    },
    controlledKeys: (uid) => controlledBy(pods, uid).map(cacheKey),
  };
  const podDeleted = (pod: KubeObject): void => {
    const rs = resolve(pod.metadata.namespace, controllerOf(pod));
    if (!rs) return;
    expectations.deletionObserved(keyOf(rs), pod.metadata.uid!);
    loop.queue.add(keyOf(rs));
  };

  replicaSets.addEventHandler({
    add: (rs) => loop.queue.add(keyOf(rs)),
    update: (_old, rs) => loop.queue.add(keyOf(rs)),
    delete: (rs) => {
      expectations.forget(keyOf(rs));
      tallies.forget(rs.metadata.uid!);
      loop.queue.add(keyOf(rs));
    },
  });

  pods.addEventHandler({
    add: (pod) => {
      if (pod.metadata.deletionTimestamp) return podDeleted(pod);
      const ref = controllerOf(pod);
      if (ref) {
        const rs = resolve(pod.metadata.namespace, ref);
        if (!rs) return;
        expectations.creationObserved(keyOf(rs));
        loop.queue.add(keyOf(rs));
        return;
      }
      for (const rs of matchingReplicaSets(pod)) loop.queue.add(keyOf(rs));
    },
    update: (old, pod) => {
      if (old.metadata.resourceVersion === pod.metadata.resourceVersion) return;
      // Scheduling and container states move a pod many times; a ReplicaSet only counts active, ready (since
      // when) and labels, and claims by owner and labels. Other updates would make it sync to no effect.
      if (!mattersToReplicaSet(old, pod)) return;
      const labelsChanged = !deepEqual(old.metadata.labels ?? {}, pod.metadata.labels ?? {});
      if (pod.metadata.deletionTimestamp) {
        podDeleted(pod);
        if (labelsChanged) podDeleted(old);
        return;
      }
      const ref = controllerOf(pod);
      const oldRef = controllerOf(old);
      const refChanged = ref?.uid !== oldRef?.uid;
      if (refChanged && oldRef) {
        const oldRs = resolve(old.metadata.namespace, oldRef);
        if (oldRs) loop.queue.add(keyOf(oldRs));
      }
      if (ref) {
        const rs = resolve(pod.metadata.namespace, ref);
        if (rs) loop.queue.add(keyOf(rs));
        return;
      }
      if (labelsChanged || refChanged) for (const rs of matchingReplicaSets(pod)) loop.queue.add(keyOf(rs));
    },
    delete: (pod) => podDeleted(pod),
  });

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const rs = replicaSets.get(namespace, name);
    if (!rs) {
      expectations.forget(key);
      return;
    }
    const needsSync = expectations.satisfied(key);
    const selector = selectorOf(rs);
    if (!selector) return;

    const owned = await claim(rs, selector);
    const now = ctx.clock.now();
    const manage = needsSync && rs.metadata.deletionTimestamp === undefined;
    const plan = planReplicaSet(rs, owned, () => relatedPodsPerNode(rs), now, { manage });

    let error: Error | undefined;
    if (plan.create > 0) error = await createPods(rs, key, plan.create);
    else if (plan.delete.length > 0) error = await deletePods(rs, key, plan.delete);

    const previous = replicaSetStatus(rs);
    const status = withReplicaFailure(plan.status, previous, error, owned.count - replicasOf(rs), now);
    if (!deepEqual(compactStatus(previous), status)) await writeStatus(rs, status);
    if (error) throw error;
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  }

  /**
   * updateReplicaSetStatus: the status computed for the generation seen. If the ReplicaSet changed meanwhile (the
   * deployment controller resized it), read it again and write once more, as Kubernetes does (statusUpdateRetries).
   */
  async function writeStatus(rs: KubeObject, status: ReplicaSetStatus): Promise<void> {
    try {
      await ctx.client.updateStatus(target.gvr, { ...rs, status });
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 409)) {
        if (err instanceof ApiError && err.code === 404) return;
        throw err;
      }
      const fresh = await ignoreNotFound(ctx.client.get(target.gvr, rs.metadata.namespace, rs.metadata.name!));
      if (fresh && fresh.metadata.uid === rs.metadata.uid)
        await ignoreNotFound(ctx.client.updateStatus(target.gvr, { ...fresh, status }));
    }
  }

  /**
   * ClaimPods over the tally: pods it controls but no longer matches are released, matching orphans adopted
   * (re-reading the ReplicaSet first); the tally then counts the active pods it owns.
   */
  async function claim(rs: KubeObject, selector: LabelSelector): Promise<OwnedPodTally> {
    const tally = tallyOf(rs, selector);
    const matcher = childSelector(selector);
    const labels = templateLabels(rs);
    const orphans = selector.empty ? [] : pods.byIndex(ORPHAN_INDEX, rs.metadata.namespace ?? '').filter(isPodActive);
    const claims = planClaims(rs, matcher, tally.strays(), orphans);
    if (claims.adopt.length === 0 && claims.release.length === 0) return tally;
    const owned = await applyClaims(
      ctx.client,
      Resources.pods,
      target.gvr,
      rs,
      newControllerRef(rs, target.apiVersion, target.kind),
      claims,
    );
    for (const pod of owned)
      if (claims.adopt.some((o) => o.metadata.uid === pod.metadata.uid))
        tally.adopted(cacheKey(pod), pod, matcher, labels);
    return tally;
  }

  /** The tally of a ReplicaSet's pods, brought up to date. */
  function tallyOf(rs: KubeObject, selector: LabelSelector): OwnedPodTally {
    const tally = tallies.of(rs.metadata.uid!);
    tally.refresh(podSource, childSelector(selector), templateLabels(rs));
    return tally;
  }

  /** Pods per node of every ReplicaSet with the same controller as this one (getIndirectlyRelatedPods). */
  function relatedPodsPerNode(rs: KubeObject): Map<string, number> {
    const owner = controllerOf(rs);
    const siblings = owner ? controlledBy(replicaSets, owner.uid) : [rs];
    const out = new Map<string, number>();
    for (const sibling of siblings) {
      const selector = selectorOf(sibling);
      if (!selector) continue;
      for (const [node, n] of tallyOf(sibling, selector).podsPerNode()) out.set(node, (out.get(node) ?? 0) + n);
    }
    return out;
  }

  async function createPods(rs: KubeObject, key: string, count: number): Promise<Error | undefined> {
    expectations.expectCreations(key, count);
    const template = podFromTemplate(rs, newControllerRef(rs, target.apiVersion, target.kind));
    const { successes, error } = await slowStartBatch(count, SLOW_START_INITIAL_BATCH, async () => {
      if (Object.keys(template.metadata.labels ?? {}).length === 0) throw new Error('unable to create pods, no labels');
      try {
        const pod = await ctx.client.create(Resources.pods, rs.metadata.namespace, template);
        recorder.event(rs, 'Normal', 'SuccessfulCreate', `Created pod: ${pod.metadata.name}`);
      } catch (err) {
        if (isNamespaceTerminating(err)) return;
        recorder.event(
          rs,
          'Warning',
          'FailedCreate',
          `Error creating: ${err instanceof Error ? err.message : String(err)}`,
        );
        throw err;
      }
    });
    // Creations never attempted (or refused) will not be observed: stop waiting for them.
    for (let i = successes; i < count; i++) expectations.creationObserved(key);
    return error;
  }

  async function deletePods(rs: KubeObject, key: string, victims: readonly KubeObject[]): Promise<Error | undefined> {
    expectations.expectDeletions(
      key,
      victims.map((p) => p.metadata.uid!),
    );
    const results = await Promise.all(
      victims.map(async (pod): Promise<Error | undefined> => {
        try {
          await ctx.client.delete(Resources.pods, pod.metadata.namespace, pod.metadata.name!, {
            preconditions: { uid: pod.metadata.uid },
          });
          recorder.event(rs, 'Normal', 'SuccessfulDelete', `Deleted pod: ${pod.metadata.name}`);
          return undefined;
        } catch (err) {
          expectations.deletionObserved(key, pod.metadata.uid!);
          if (err instanceof ApiError && err.code === 404) return undefined;
          recorder.event(
            rs,
            'Warning',
            'FailedDelete',
            `Error deleting: ${err instanceof Error ? err.message : String(err)}`,
          );
          return err instanceof Error ? err : new Error(String(err));
        }
      }),
    );
    return results.find((e) => e !== undefined);
  }

  return {
    name: target.controller,
    start: async () => loop.start(),
    stop: () => loop.stop(),
  };
}
