import { rfc3339 } from '../clock/clock.js';
import { ApiError, ignoreNotFound } from '../api/errors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { cacheKey } from '../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';
import { nodeTaints as taintsOf, tolerates, type Taint, tolerationsOf } from '../api/node-fit.js';
import { podNodeName as nodeOf, setPodCondition } from '../api/pod-util.js';

type Obj = Record<string, unknown>;

/** --node-monitor-grace-period (50 s since Kubernetes 1.32) and --node-startup-grace-period. */
export const NODE_MONITOR_GRACE_MS = 50_000;
export const NODE_STARTUP_GRACE_MS = 60_000;
const NODE_LEASE_NAMESPACE = 'kube-node-lease';

export const TAINT_NOT_READY = 'node.kubernetes.io/not-ready';
export const TAINT_UNREACHABLE = 'node.kubernetes.io/unreachable';
export const TAINT_UNSCHEDULABLE = 'node.kubernetes.io/unschedulable';
const MANAGED = new Set([TAINT_NOT_READY, TAINT_UNREACHABLE, TAINT_UNSCHEDULABLE]);
const NODE_CONDITIONS = ['Ready', 'MemoryPressure', 'DiskPressure', 'PIDPressure'];

function conditionsOf(node: KubeObject): Obj[] {
  const status = isPlainObject(node.status) ? node.status : {};
  return Array.isArray(status.conditions) ? (status.conditions as Obj[]) : [];
}

function time(value: unknown): number {
  const t = typeof value === 'string' ? Date.parse(value) : NaN;
  return Number.isNaN(t) ? 0 : t;
}

/**
 * The taints TaintNodesByCondition and the NoExecute tainting pass keep on a node, given its Ready condition
 * and spec.unschedulable: not-ready for Ready=False, unreachable for Ready=Unknown (NoSchedule and NoExecute),
 * unschedulable (NoSchedule) for a cordoned node. Other taints are left as they are; timeAdded is kept.
 */
export function desiredTaints(node: KubeObject, now: string): Array<Taint & { timeAdded?: string }> {
  const ready = conditionsOf(node).find((c) => c.type === 'Ready');
  const wanted: Taint[] = [];
  if (ready?.status === 'False')
    wanted.push({ key: TAINT_NOT_READY, effect: 'NoSchedule' }, { key: TAINT_NOT_READY, effect: 'NoExecute' });
  if (ready?.status === 'Unknown')
    wanted.push({ key: TAINT_UNREACHABLE, effect: 'NoSchedule' }, { key: TAINT_UNREACHABLE, effect: 'NoExecute' });
  if ((node.spec as Obj | undefined)?.unschedulable === true)
    wanted.push({ key: TAINT_UNSCHEDULABLE, effect: 'NoSchedule' });
  const current = taintsOf(node) as Array<Taint & { timeAdded?: string }>;
  const kept = current.filter(
    (t) => !MANAGED.has(t.key) || wanted.some((w) => w.key === t.key && w.effect === t.effect),
  );
  for (const w of wanted) {
    if (kept.some((t) => t.key === w.key && t.effect === w.effect)) continue;
    kept.push(w.effect === 'NoExecute' ? { ...w, timeAdded: now } : w);
  }
  return kept;
}

/**
 * When a pod must leave a node with these NoExecute taints: now when one is not tolerated, the earliest
 * expiry of its tolerationSeconds otherwise (counted from the taint's timeAdded), or never (undefined).
 */
export function evictionTime(
  pod: KubeObject,
  taints: ReadonlyArray<Taint & { timeAdded?: string }>,
  now: number,
): number | undefined {
  const tolerations = tolerationsOf(pod);
  let at: number | undefined;
  for (const taint of taints) {
    if (taint.effect !== 'NoExecute') continue;
    const matching = tolerations.filter((t) => tolerates(t, taint));
    if (matching.length === 0) return now;
    const seconds = matching.map((t) =>
      typeof t.tolerationSeconds === 'number' ? Math.max(0, t.tolerationSeconds) : Infinity,
    );
    const min = Math.min(...seconds);
    if (min === Infinity) continue;
    const due = (taint.timeAdded ? time(taint.timeAdded) : now) + min * 1000;
    at = at === undefined ? due : Math.min(at, due);
  }
  return at;
}

/**
 * The node lifecycle controller (with the taint eviction controller it used to contain):
 * - a node whose kubelet stopped renewing its Lease and posting status for the grace period gets its
 *   conditions set to Unknown ("Kubelet stopped posting node status."), its pods marked not ready;
 * - nodes carry the not-ready / unreachable / unschedulable taints their state calls for;
 * - pods on a node with NoExecute taints are deleted, at once if they do not tolerate them, else when their
 *   tolerationSeconds run out (the API server gives every pod 300 s for not-ready and unreachable).
 * Every wait is a requeue on the clock: one reconcile per node per grace period, one per pod per decision.
 */
export function nodeLifecycleController(ctx: ControllerContext): Controller {
  const nodes = ctx.informers.for(Resources.nodes);
  const leases = ctx.informers.for(Resources.leases);
  const pods = ctx.informers.for(Resources.pods);
  const recorder = ctx.recorder('node-controller');
  const taintRecorder = ctx.recorder('taint-eviction-controller');
  const nodeLoop = new ReconcileLoop('nodelifecycle', ctx, reconcileNode, 2);
  const podLoop = new ReconcileLoop('taint-eviction', ctx, reconcilePod, 2);
  const scheduled = new Set<string>();

  pods.addIndex('nodelifecycle-node', (p) => (nodeOf(p) ? [nodeOf(p)] : []));
  const enqueuePodsOf = (node: string): void => {
    for (const p of pods.byIndex('nodelifecycle-node', node)) podLoop.queue.add(cacheKey(p));
  };

  /**
   * When this controller first saw each node (kube-controller-manager's nodeHealthMap probeTimestamp on first
   * sight): a node's grace period runs from then at the earliest, so a controller that starts on nodes whose last
   * heartbeat is old (a restart, a cluster booted from a snapshot) gives their kubelets a full period to report.
   */
  const firstSeen = new Map<string, number>();
  nodes.addEventHandler({
    add: (node) => {
      firstSeen.set(node.metadata.name!, ctx.clock.now());
      nodeLoop.queue.add(node.metadata.name!);
    },
    update: (old, node) => {
      nodeLoop.queue.add(node.metadata.name!);
      if (!deepEqual(taintsOf(old), taintsOf(node))) enqueuePodsOf(node.metadata.name!);
    },
    delete: (node) => firstSeen.delete(node.metadata.name!),
  });
  // Renewals are not events to react to (kube-controller-manager only reads the Lease lister, every
  // --node-monitor-period): each reconcile of a live node requeues itself for when its grace period would run
  // out, and then reads the latest renewTime. Reacting to every renewal cost a reconcile per heartbeat.
  leases.addEventHandler({
    add: (lease) => lease.metadata.namespace === NODE_LEASE_NAMESPACE && nodeLoop.queue.add(lease.metadata.name!),
  });
  pods.addEventHandler({
    add: (pod) => {
      const node = nodes.get(undefined, nodeOf(pod));
      if (node && taintsOf(node).some((t) => t.effect === 'NoExecute')) podLoop.queue.add(cacheKey(pod));
    },
    update: (_old, pod) => {
      const node = nodes.get(undefined, nodeOf(pod));
      if (node && (scheduled.has(cacheKey(pod)) || taintsOf(node).some((t) => t.effect === 'NoExecute')))
        podLoop.queue.add(cacheKey(pod));
    },
    delete: (pod) => scheduled.delete(cacheKey(pod)),
  });

  /** The last sign of life: the Lease's renewTime, the Ready heartbeat, the node's creation, or its first sight. */
  function lastProbe(node: KubeObject): { at: number; everPosted: boolean } {
    const lease = leases.get(NODE_LEASE_NAMESPACE, node.metadata.name!);
    const ready = conditionsOf(node).find((c) => c.type === 'Ready');
    const renew = time((lease?.spec as Obj | undefined)?.renewTime);
    const heartbeat = time(ready?.lastHeartbeatTime);
    const seen = firstSeen.get(node.metadata.name!) ?? 0;
    return {
      at: Math.max(renew, heartbeat, time(node.metadata.creationTimestamp), seen),
      everPosted: ready !== undefined,
    };
  }

  async function reconcileNode(name: string): Promise<ReconcileResult | void> {
    let node = nodes.get(undefined, name);
    if (!node || node.metadata.deletionTimestamp) return;
    const now = ctx.clock.now();
    const at = rfc3339(now);
    const probe = lastProbe(node);
    const grace = probe.everPosted ? NODE_MONITOR_GRACE_MS : NODE_STARTUP_GRACE_MS;
    const silent = now - probe.at >= grace;
    const ready = conditionsOf(node).find((c) => c.type === 'Ready');
    if (silent && ready?.status !== 'Unknown') {
      const status = deepCopy(isPlainObject(node.status) ? node.status : {}) as Obj;
      const byType = new Map(conditionsOf(node).map((c) => [String(c.type), c]));
      status.conditions = NODE_CONDITIONS.map((type): Obj => {
        const c = byType.get(type);
        const message = c ? 'Kubelet stopped posting node status.' : 'Kubelet never posted node status.';
        return {
          type,
          status: 'Unknown',
          lastHeartbeatTime: c?.lastHeartbeatTime ?? node!.metadata.creationTimestamp,
          lastTransitionTime: at,
          reason: 'NodeStatusUnknown',
          message,
        };
      }).concat(conditionsOf(node).filter((c) => !NODE_CONDITIONS.includes(String(c.type))));
      node = await ctx.client.updateStatus(Resources.nodes, { ...node, status });
      recorder.event(node, 'Normal', 'NodeNotReady', `Node ${name} status is now: NodeNotReady`);
      await markPodsNotReady(name);
    }
    const taints = desiredTaints(node, at);
    if (!deepEqual(taints, taintsOf(node))) {
      const spec = { ...(isPlainObject(node.spec) ? node.spec : {}) } as Obj;
      if (taints.length > 0) spec.taints = taints;
      else delete spec.taints;
      await ctx.client.update(Resources.nodes, { ...node, spec });
    }
    if (!silent) return { requeueAfterMs: probe.at + grace - now + 1 };
  }

  /** nodeutil.MarkPodsNotReady: Ready=False on each pod of the node, and a NodeNotReady event. */
  async function markPodsNotReady(node: string): Promise<void> {
    const at = rfc3339(ctx.clock.now());
    for (const pod of pods.byIndex('nodelifecycle-node', node)) {
      const status = deepCopy(isPlainObject(pod.status) ? pod.status : {}) as Obj;
      const conditions = Array.isArray(status.conditions) ? (status.conditions as Obj[]) : [];
      const readyCondition = conditions.find((c) => c.type === 'Ready');
      if (!readyCondition || readyCondition.status === 'False') continue;
      setPodCondition(status, { ...readyCondition, status: 'False' }, at);
      recorder.event(pod, 'Warning', 'NodeNotReady', 'Node is not ready');
      try {
        await ctx.client.updateStatus(Resources.pods, { ...pod, status });
      } catch (err) {
        if (!(err instanceof ApiError && (err.code === 404 || err.code === 409))) throw err;
      }
    }
  }

  async function reconcilePod(key: string): Promise<ReconcileResult | void> {
    const slash = key.indexOf('/');
    const pod = pods.get(key.slice(0, slash), key.slice(slash + 1));
    if (!pod || pod.metadata.deletionTimestamp) return void scheduled.delete(key);
    const node = nodes.get(undefined, nodeOf(pod));
    const now = ctx.clock.now();
    const when = node ? evictionTime(pod, taintsOf(node), now) : undefined;
    if (when === undefined) {
      if (scheduled.delete(key))
        taintRecorder.event(pod, 'Normal', 'TaintManagerEviction', `Cancelling deletion of Pod ${key}`);
      return;
    }
    if (when > now) {
      scheduled.add(key);
      return { requeueAfterMs: when - now };
    }
    scheduled.delete(key);
    taintRecorder.event(pod, 'Normal', 'TaintManagerEviction', `Marking for deletion Pod ${key}`);
    const status = deepCopy(isPlainObject(pod.status) ? pod.status : {}) as Obj;
    setPodCondition(
      status,
      {
        type: 'DisruptionTarget',
        status: 'True',
        reason: 'DeletionByTaintManager',
        message: 'Taint manager: deleting due to NoExecute taint',
      },
      rfc3339(now),
    );
    await ignoreNotFound(ctx.client.updateStatus(Resources.pods, { ...pod, status }));
    await ignoreNotFound(
      ctx.client.delete(Resources.pods, pod.metadata.namespace, pod.metadata.name!, {
        preconditions: { uid: pod.metadata.uid! },
      }),
    );
  }

  return {
    name: 'nodelifecycle',
    start: async () => {
      nodeLoop.start();
      podLoop.start();
    },
    stop: () => {
      nodeLoop.stop();
      podLoop.stop();
    },
  };
}
