import { ApiError, ignoreNotFound } from '../api/errors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import { Expectations } from '../runtime/expectations.js';
import {
  controlledBy,
  controllerOf,
  indexByController,
  newControllerRef,
  wakeOwnerOnPodEvents,
} from './controller-ref.js';
import {
  CONTROLLER_REVISION_HASH_LABEL,
  newRevision,
  nextRevisionNumber,
  planUpdateRevision,
  revisionsToTruncate,
  templatePatch,
} from './history.js';
import { fitsNodeAffinity, nodeTaints, targetNodeName, untoleratedTaint, type Toleration } from '../api/node-fit.js';
import {
  creationTime,
  isPodAvailable,
  isPodReady,
  isTerminal,
  isTerminating,
  msUntilAvailable,
  podPhase,
} from '../api/pod-util.js';

export const TEMPLATE_GENERATION_LABEL = 'pod-template-generation';

interface DaemonSetSpec {
  template?: {
    metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
    spec?: Record<string, unknown>;
  };
  minReadySeconds?: number;
  revisionHistoryLimit?: number;
  updateStrategy?: { type?: string; rollingUpdate?: { maxUnavailable?: number | string; maxSurge?: number | string } };
}

export interface DaemonSetStatus {
  currentNumberScheduled: number;
  numberMisscheduled: number;
  desiredNumberScheduled: number;
  numberReady: number;
  observedGeneration?: number;
  updatedNumberScheduled?: number;
  numberAvailable?: number;
  numberUnavailable?: number;
  collisionCount?: number;
  [extra: string]: unknown;
}

export interface DaemonSetPlan {
  /** Nodes to create a daemon pod on. */
  createOn: string[];
  deletePods: KubeObject[];
  status: DaemonSetStatus;
  events: Array<{ type: 'Normal' | 'Warning'; reason: string; message: string }>;
  requeueAfterMs?: number;
}

function dsSpec(ds: KubeObject): DaemonSetSpec {
  return isPlainObject(ds.spec) ? (ds.spec as DaemonSetSpec) : {};
}

/**
 * The tolerations every daemon pod gets (util.AddOrUpdateDaemonPodTolerations), so it keeps running where
 * ordinary pods are kept off: not-ready and unreachable nodes (NoExecute), disk, memory and PID pressure
 * and unschedulable nodes (NoSchedule), and without a network when it uses the host network.
 */
export function daemonPodTolerations(podSpec: Record<string, unknown>): Toleration[] {
  const tolerations = Array.isArray(podSpec.tolerations) ? [...(podSpec.tolerations as Toleration[])] : [];
  const add = (key: string, effect: string): void => {
    const t: Toleration = { key, operator: 'Exists', effect };
    const i = tolerations.findIndex((x) => x.key === key && x.effect === effect);
    if (i >= 0) tolerations[i] = t;
    else tolerations.push(t);
  };
  add('node.kubernetes.io/not-ready', 'NoExecute');
  add('node.kubernetes.io/unreachable', 'NoExecute');
  add('node.kubernetes.io/disk-pressure', 'NoSchedule');
  add('node.kubernetes.io/memory-pressure', 'NoSchedule');
  add('node.kubernetes.io/pid-pressure', 'NoSchedule');
  add('node.kubernetes.io/unschedulable', 'NoSchedule');
  if (podSpec.hostNetwork === true) add('node.kubernetes.io/network-unavailable', 'NoSchedule');
  return tolerations;
}

/**
 * nodeShouldRunDaemonPod: shouldRun — a new daemon pod belongs on the node; shouldContinueRunning — an
 * existing one may stay. A NoSchedule taint the pod does not tolerate keeps new pods off but lets a running
 * one stay; an untolerated NoExecute taint evicts it.
 */
export function nodeShouldRunDaemonPod(
  ds: KubeObject,
  node: KubeObject,
): { shouldRun: boolean; shouldContinueRunning: boolean } {
  const podSpec = (dsSpec(ds).template?.spec ?? {}) as Record<string, unknown>;
  if (typeof podSpec.nodeName === 'string' && podSpec.nodeName && podSpec.nodeName !== node.metadata.name)
    return { shouldRun: false, shouldContinueRunning: false };
  if (!fitsNodeAffinity(podSpec, node)) return { shouldRun: false, shouldContinueRunning: false };
  const tolerations = daemonPodTolerations(podSpec);
  const taints = nodeTaints(node);
  if (untoleratedTaint(taints, tolerations, (t) => t.effect === 'NoSchedule' || t.effect === 'NoExecute')) {
    return {
      shouldRun: false,
      shouldContinueRunning: !untoleratedTaint(taints, tolerations, (t) => t.effect === 'NoExecute'),
    };
  }
  return { shouldRun: true, shouldContinueRunning: true };
}

/** An int-or-percent against the number of nodes, rounded up (GetScaledValueFromIntOrPercent(…, true)). */
function scaled(value: number | string | undefined, total: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === 'number') return value;
  const m = /^(\d+)%$/.exec(value);
  return m ? Math.ceil((Number(m[1]) * total) / 100) : Number(value) || 0;
}

/** The daemon pod for a node (CreatePodTemplate + ReplaceDaemonSetPodNodeNameNodeAffinity). */
export function daemonPod(ds: KubeObject, nodeName: string, hash: string): KubeObject {
  const template = deepCopy(dsSpec(ds).template ?? {});
  const podSpec = (template.spec ?? {}) as Record<string, unknown>;
  podSpec.tolerations = daemonPodTolerations(podSpec);
  const affinity = (isPlainObject(podSpec.affinity) ? podSpec.affinity : {}) as Record<string, unknown>;
  const nodeAffinity = (isPlainObject(affinity.nodeAffinity) ? affinity.nodeAffinity : {}) as Record<string, unknown>;
  nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution = {
    nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [nodeName] }] }],
  };
  affinity.nodeAffinity = nodeAffinity;
  podSpec.affinity = affinity;
  const generation =
    ds.metadata.annotations?.['deprecated.daemonset.template.generation'] ?? String(ds.metadata.generation ?? 1);
  const metadata: KubeObject['metadata'] = {
    generateName: `${ds.metadata.name}-`,
    namespace: ds.metadata.namespace,
    labels: {
      ...(template.metadata?.labels ?? {}),
      [CONTROLLER_REVISION_HASH_LABEL]: hash,
      [TEMPLATE_GENERATION_LABEL]: generation,
    },
    ownerReferences: [newControllerRef(ds, 'apps/v1', 'DaemonSet')],
  };
  if (template.metadata?.annotations) metadata.annotations = { ...template.metadata.annotations };
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec: podSpec };
}

/**
 * One sync of a DaemonSet (pkg/controller/daemon: manage, rollingUpdate, updateDaemonSetStatus), pure:
 * given the set, the nodes, its pods (grouped by the node they are bound or pinned to), the update hash and
 * the time — which nodes get a pod and which pods go.
 *
 * RollingUpdate with maxSurge 0 deletes old pods while at most maxUnavailable nodes lack an available pod
 * (an old pod that is unavailable anyway is always replaced). With maxSurge > 0 a new pod starts beside the
 * old one on up to maxSurge nodes, and the old one goes once the new one is available.
 *
 * Example: 4 nodes, maxUnavailable 1, maxSurge 0, all old and available → one old pod is deleted; manage
 * creates its replacement next sync; the next old pod goes once that one is available.
 */
export function planDaemonSet(
  ds: KubeObject,
  nodes: readonly KubeObject[],
  pods: readonly KubeObject[],
  hash: string,
  now: number,
): DaemonSetPlan {
  const spec = dsSpec(ds);
  const minReady = spec.minReadySeconds ?? 0;
  const plan: DaemonSetPlan = {
    createOn: [],
    deletePods: [],
    status: { currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0 },
    events: [],
  };
  const byNode = new Map<string, KubeObject[]>();
  for (const pod of pods) {
    if (isTerminating(pod) && isTerminal(pod)) continue;
    const node = targetNodeName(pod);
    if (node === undefined) continue;
    let list = byNode.get(node);
    if (!list) byNode.set(node, (list = []));
    list.push(pod);
  }
  for (const list of byNode.values())
    list.sort(
      (a, b) => creationTime(a) - creationTime(b) || (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''),
    );
  const isNew = (p: KubeObject): boolean => p.metadata.labels?.[CONTROLLER_REVISION_HASH_LABEL] === hash;
  const available = (p: KubeObject): boolean => isPodAvailable(p, minReady, now);
  const del = (p: KubeObject): void => {
    if (plan.deletePods.includes(p)) return;
    plan.deletePods.push(p);
    plan.events.push({ type: 'Normal', reason: 'SuccessfulDelete', message: `Deleted pod: ${p.metadata.name}` });
  };
  const deleting = !!ds.metadata.deletionTimestamp;
  const shouldRunOn = new Map<string, boolean>();
  const nodeNames = new Set(nodes.map((n) => n.metadata.name!));

  // manage: one pod per node that should run one, none elsewhere.
  for (const node of nodes) {
    const name = node.metadata.name!;
    const { shouldRun, shouldContinueRunning } = nodeShouldRunDaemonPod(ds, node);
    shouldRunOn.set(name, shouldRun);
    const daemonPods = byNode.get(name) ?? [];
    if (deleting) continue;
    if (shouldRun && daemonPods.length === 0) {
      plan.createOn.push(name);
    } else if (shouldContinueRunning) {
      const running: KubeObject[] = [];
      for (const pod of daemonPods) {
        if (isTerminating(pod)) continue;
        // A failed (or finished) daemon pod goes; its replacement comes in a later sync.
        if (podPhase(pod) === 'Failed') {
          plan.events.push({
            type: 'Warning',
            reason: 'FailedDaemonPod',
            message: `Found failed daemon pod ${pod.metadata.namespace}/${pod.metadata.name} on node ${name}, will try to kill it`,
          });
          del(pod);
        } else if (podPhase(pod) === 'Succeeded') del(pod);
        else running.push(pod);
      }
      // More than one: keep the oldest (with surge, the oldest new and the oldest old).
      if (running.length > 1) {
        const keep = new Set<KubeObject>();
        if (scaled(spec.updateStrategy?.rollingUpdate?.maxSurge, 1, 0) > 0) {
          const oldestNew = running.find(isNew);
          const oldestOld = running.find((p) => !isNew(p));
          if (oldestNew) keep.add(oldestNew);
          if (oldestOld) keep.add(oldestOld);
        } else keep.add(running[0]!);
        for (const p of running) if (!keep.has(p)) del(p);
      }
    } else {
      for (const pod of daemonPods) if (!isTerminating(pod)) del(pod);
    }
  }
  // Pods on nodes that are gone.
  for (const [name, list] of byNode) if (!nodeNames.has(name)) for (const p of list) if (!isTerminating(p)) del(p);

  // Rolling update.
  if (!deleting && (spec.updateStrategy?.type ?? 'RollingUpdate') === 'RollingUpdate') {
    const desired = [...shouldRunOn.values()].filter(Boolean).length;
    let maxSurge = scaled(spec.updateStrategy?.rollingUpdate?.maxSurge, desired, 0);
    let maxUnavailable = scaled(spec.updateStrategy?.rollingUpdate?.maxUnavailable, desired, 1);
    if (maxSurge === 0 && maxUnavailable === 0) maxUnavailable = 1;
    if (maxSurge < 0) maxSurge = 0;
    const onNode = (name: string): { newPod?: KubeObject; oldPod?: KubeObject; ok: boolean } => {
      const live = (byNode.get(name) ?? []).filter((p) => !isTerminating(p) && !plan.deletePods.includes(p));
      const news = live.filter(isNew);
      const olds = live.filter((p) => !isNew(p));
      return { newPod: news[0], oldPod: olds[0], ok: news.length <= 1 && olds.length <= 1 };
    };
    const eligible = nodes.filter((n) => shouldRunOn.get(n.metadata.name!));
    if (maxSurge === 0) {
      let unavailable = 0;
      const allowed: KubeObject[] = [];
      const candidates: KubeObject[] = [];
      for (const node of eligible) {
        const { newPod, oldPod, ok } = onNode(node.metadata.name!);
        if (!ok) continue;
        if (!oldPod) {
          if (!newPod || !available(newPod)) unavailable++;
        } else if (!available(oldPod)) {
          allowed.push(oldPod);
          unavailable++;
        } else if (unavailable < maxUnavailable) candidates.push(oldPod);
      }
      const remaining = Math.min(Math.max(0, maxUnavailable - unavailable), candidates.length);
      for (const p of [...allowed, ...candidates.slice(0, remaining)]) del(p);
    } else {
      let surge = 0;
      const allowedNodes: string[] = [];
      const candidateNodes: string[] = [];
      for (const node of eligible) {
        const name = node.metadata.name!;
        const { newPod, oldPod, ok } = onNode(name);
        if (!ok || !oldPod) continue;
        if (!newPod) {
          if (!available(oldPod)) allowedNodes.push(name);
          else if (surge < maxSurge) candidateNodes.push(name);
        } else if (!available(newPod)) surge++;
        else del(oldPod);
      }
      const remaining = Math.min(Math.max(0, maxSurge - surge), candidateNodes.length);
      for (const n of [...allowedNodes, ...candidateNodes.slice(0, remaining)])
        if (!plan.createOn.includes(n)) plan.createOn.push(n);
    }
  }

  // Status (updateDaemonSetStatus), from the pods as they are.
  const s = plan.status;
  let availableCount = 0;
  let updated = 0;
  for (const node of nodes) {
    const name = node.metadata.name!;
    const list = byNode.get(name) ?? [];
    if (shouldRunOn.get(name)) {
      s.desiredNumberScheduled++;
      if (list.length === 0) continue;
      s.currentNumberScheduled++;
      const pod = list[0]!;
      if (isPodReady(pod)) {
        s.numberReady++;
        if (available(pod)) availableCount++;
        else {
          const left = msUntilAvailable(pod, minReady, now);
          if (left !== undefined) plan.requeueAfterMs = Math.min(plan.requeueAfterMs ?? Infinity, left);
        }
      }
      if (isNew(pod)) updated++;
    } else if (list.length > 0) s.numberMisscheduled++;
  }
  s.observedGeneration = ds.metadata.generation;
  if (updated) s.updatedNumberScheduled = updated;
  if (availableCount) s.numberAvailable = availableCount;
  if (s.desiredNumberScheduled - availableCount) s.numberUnavailable = s.desiredNumberScheduled - availableCount;
  const collisions = (ds.status as { collisionCount?: number } | undefined)?.collisionCount;
  if (collisions !== undefined) s.collisionCount = collisions;
  return plan;
}

/**
 * The DaemonSet controller. Pods are created pinned to their node by required node affinity on
 * metadata.name, and the scheduler binds them, as in Kubernetes 1.32.
 */
export function daemonSetController(ctx: ControllerContext): Controller {
  const sets = ctx.informers.for(Resources.daemonsets);
  const pods = ctx.informers.for(Resources.pods);
  const nodes = ctx.informers.for(Resources.nodes);
  const revisions = ctx.informers.for(Resources.controllerrevisions);
  indexByController(pods);
  indexByController(revisions);
  const expectations = new Expectations(ctx.clock);
  const recorder = ctx.recorder('daemonset-controller');
  const loop = new ReconcileLoop('daemonset', ctx, reconcile, 2);
  const keyOf = (o: KubeObject): string => `${o.metadata.namespace}/${o.metadata.name}`;
  const enqueueAll = (): void => {
    for (const ds of sets.list()) loop.queue.add(keyOf(ds));
  };

  sets.addEventHandler({
    add: (s) => loop.queue.add(keyOf(s)),
    update: (_o, s) => loop.queue.add(keyOf(s)),
    delete: (s) => expectations.forget(keyOf(s)),
  });
  wakeOwnerOnPodEvents(pods, 'DaemonSet', loop.queue, expectations);
  nodes.addEventHandler({
    add: enqueueAll,
    delete: enqueueAll,
    update: (old, node) => {
      // Only what placement depends on: labels, taints, unschedulable.
      if (deepEqual(old.metadata.labels, node.metadata.labels) && deepEqual(old.spec, node.spec)) return;
      enqueueAll();
    },
  });

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const ds = sets.get(namespace, name);
    if (!ds || !expectations.satisfied(key)) return;
    const owned = controlledBy(pods, ds.metadata.uid!);
    const { hash, all, current } = await syncRevisions(ds);
    const plan = planDaemonSet(ds, nodes.list(), owned, hash, ctx.clock.now());

    if (plan.deletePods.length > 0) {
      expectations.expectDeletions(
        key,
        plan.deletePods.map((p) => p.metadata.uid!),
      );
      await Promise.all(
        plan.deletePods.map(async (pod) => {
          try {
            await ctx.client.delete(Resources.pods, namespace, pod.metadata.name!, {
              preconditions: { uid: pod.metadata.uid! },
            });
          } catch (err) {
            expectations.deletionObserved(key, pod.metadata.uid!);
            if (!(err instanceof ApiError && err.code === 404)) throw err;
          }
        }),
      );
    }
    if (plan.createOn.length > 0) {
      expectations.expectCreations(key, plan.createOn.length);
      await Promise.all(
        plan.createOn.map(async (node) => {
          try {
            const pod = await ctx.client.create(Resources.pods, namespace, daemonPod(ds, node, hash));
            recorder.event(ds, 'Normal', 'SuccessfulCreate', `Created pod: ${pod.metadata.name}`);
          } catch (err) {
            expectations.creationObserved(key);
            recorder.event(ds, 'Warning', 'FailedCreate', `Error creating: ${(err as Error).message}`);
          }
        }),
      );
    }
    for (const e of plan.events) recorder.event(ds, e.type, e.reason, e.message);
    const fresh = sets.get(namespace, name) ?? ds;
    if (!deepEqual(fresh.status, plan.status))
      await ignoreNotFound(ctx.client.updateStatus(Resources.daemonsets, { ...fresh, status: plan.status }));
    // cleanupHistory: keep the current revision and any a pod still runs.
    const live = new Set<string>([current.metadata.name!]);
    for (const r of all)
      if (
        owned.some(
          (p) =>
            p.metadata.labels?.[CONTROLLER_REVISION_HASH_LABEL] === r.metadata.labels?.[CONTROLLER_REVISION_HASH_LABEL],
        )
      )
        live.add(r.metadata.name!);
    for (const r of revisionsToTruncate(all, live, dsSpec(ds).revisionHistoryLimit ?? 10)) {
      await ignoreNotFound(ctx.client.delete(Resources.controllerrevisions, namespace, r.metadata.name!));
    }
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  }

  /** constructHistory: the revision matching the template (made or renumbered to be the newest). */
  async function syncRevisions(ds: KubeObject): Promise<{ hash: string; all: KubeObject[]; current: KubeObject }> {
    const all = controlledBy(revisions, ds.metadata.uid!);
    let collisionCount = (ds.status as { collisionCount?: number } | undefined)?.collisionCount ?? 0;
    const template = dsSpec(ds).template;
    for (let attempt = 0; ; attempt++) {
      const candidate = newRevision(
        ds,
        'apps/v1',
        'DaemonSet',
        template?.metadata?.labels,
        templatePatch(template),
        nextRevisionNumber(all),
        collisionCount,
      );
      const step = planUpdateRevision(all, candidate);
      let current: KubeObject;
      if (step.action === 'none') current = step.revision;
      else if (step.action === 'renumber') {
        current = await ctx.client.patch(
          Resources.controllerrevisions,
          ds.metadata.namespace,
          step.revision.metadata.name!,
          'merge',
          { revision: step.to },
        );
        all[all.indexOf(step.revision)] = current;
      } else {
        try {
          current = await ctx.client.create(Resources.controllerrevisions, ds.metadata.namespace, step.revision);
          all.push(current);
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 409) || attempt > 5) throw err;
          const existing = await ctx.client.get(
            Resources.controllerrevisions,
            ds.metadata.namespace,
            step.revision.metadata.name!,
          );
          if (controllerOf(existing)?.uid === ds.metadata.uid && deepEqual(existing.data, step.revision.data)) {
            current = existing;
            all.push(existing);
          } else {
            collisionCount++;
            await ctx.client.patch(
              Resources.daemonsets,
              ds.metadata.namespace,
              ds.metadata.name!,
              'merge',
              { status: { collisionCount } },
              'status',
            );
            continue;
          }
        }
      }
      return { hash: current.metadata.labels?.[CONTROLLER_REVISION_HASH_LABEL] ?? '', all, current };
    }
  }

  return { name: 'daemonset', start: async () => loop.start(), stop: () => loop.stop() };
}
