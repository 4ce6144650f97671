import { ApiError, ignoreNotFound } from '../../api/errors.js';
import { selectorFromObject, type LabelSelector } from '../../api/selectors.js';
import { deepCopy, deepEqual, type KubeObject, type OwnerReference } from '../../api/types.js';
import { Resources } from '../../client/client.js';
import {
  ReconcileLoop,
  type Controller,
  type ControllerContext,
  type ReconcileResult,
} from '../../runtime/controller.js';
import { applyClaims, childSelector, planClaims } from '../claims.js';
import { controlledBy, controllerOf, indexByController, newControllerRef } from '../controller-ref.js';
import { deploymentSpec, deploymentStatus, hasProgressDeadline, templateOf } from './model.js';
import { planDeployment } from './plan.js';
import { newCondition, PROGRESSING, Reasons, setCondition } from './progress.js';
import { equalIgnoreHash } from './replicasets.js';
import type { DeploymentPlan, ReplicaSetWrite } from './sync.js';

const ORPHAN_INDEX = 'orphan-by-namespace';
const NAMESPACE_INDEX = 'namespace';

/**
 * The Deployment controller (pkg/controller/deployment): claims the ReplicaSets its selector matches, then each
 * sync plans one step (planDeployment) and writes it: the new ReplicaSet, ReplicaSet resizes, history cleanup,
 * and the Deployment's status with its revision annotation, in that order.
 */
export function deploymentController(ctx: ControllerContext): Controller {
  const deployments = ctx.informers.for(Resources.deployments);
  const replicaSets = ctx.informers.for(Resources.replicasets);
  const pods = ctx.informers.for(Resources.pods);
  const recorder = ctx.recorder('deployment-controller');
  const loop = new ReconcileLoop('deployment', ctx, reconcile, 5, { batchTurns: 4 });
  const selectors = new WeakMap<KubeObject, LabelSelector | null>();

  indexByController(replicaSets);
  indexByController(pods);
  replicaSets.addIndex(ORPHAN_INDEX, (rs) => (controllerOf(rs) ? [] : [rs.metadata.namespace ?? '']));
  deployments.addIndex(NAMESPACE_INDEX, (d) => [d.metadata.namespace ?? '']);

  const keyOf = (obj: KubeObject): string => `${obj.metadata.namespace}/${obj.metadata.name}`;

  const selectorOf = (d: KubeObject): LabelSelector | undefined => {
    let s = selectors.get(d);
    if (s === undefined) {
      try {
        s = selectorFromObject(deploymentSpec(d).selector);
      } catch {
        s = null;
      }
      selectors.set(d, s);
    }
    return s ?? undefined;
  };

  /** The Deployment a controller reference names, if it is still that object. */
  const resolve = (namespace: string | undefined, ref: OwnerReference | undefined): KubeObject | undefined => {
    if (ref?.kind !== 'Deployment' || !ref.apiVersion.startsWith('apps/')) return undefined;
    const d = deployments.get(namespace, ref.name);
    return d && d.metadata.uid === ref.uid ? d : undefined;
  };

  /** Deployments whose selector matches an orphan ReplicaSet (getDeploymentsForReplicaSet). */
  const matching = (rs: KubeObject): KubeObject[] =>
    deployments.byIndex(NAMESPACE_INDEX, rs.metadata.namespace ?? '').filter((d) => {
      const s = selectorOf(d);
      return s !== undefined && !s.empty && s.matches(rs.metadata.labels);
    });

  const enqueueOwner = (obj: KubeObject): void => {
    const d = resolve(obj.metadata.namespace, controllerOf(obj));
    if (d) loop.queue.add(keyOf(d));
  };

  deployments.addEventHandler({
    add: (d) => loop.queue.add(keyOf(d)),
    update: (_old, d) => loop.queue.add(keyOf(d)),
    delete: (d) => loop.queue.add(keyOf(d)),
  });

  replicaSets.addEventHandler({
    add: (rs) => {
      if (controllerOf(rs)) return enqueueOwner(rs);
      for (const d of matching(rs)) loop.queue.add(keyOf(d));
    },
    update: (old, rs) => {
      if (old.metadata.resourceVersion === rs.metadata.resourceVersion) return;
      const ref = controllerOf(rs);
      const oldRef = controllerOf(old);
      const refChanged = ref?.uid !== oldRef?.uid;
      if (refChanged && oldRef) enqueueOwner(old);
      if (ref) return enqueueOwner(rs);
      if (refChanged || !deepEqual(old.metadata.labels ?? {}, rs.metadata.labels ?? {}))
        for (const d of matching(rs)) loop.queue.add(keyOf(d));
    },
    delete: (rs) => enqueueOwner(rs),
  });

  // Recreate waits for the old pods to be gone: their deletion is what lets it go on.
  pods.addEventHandler({
    delete: (pod) => {
      const ref = controllerOf(pod);
      if (ref?.kind !== 'ReplicaSet') return;
      const rs = replicaSets.get(pod.metadata.namespace, ref.name);
      if (!rs || rs.metadata.uid !== ref.uid) return;
      const d = resolve(rs.metadata.namespace, controllerOf(rs));
      if (d && deploymentSpec(d).strategy.type === 'Recreate') loop.queue.add(keyOf(d));
    },
  });

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const [namespace, name] = key.split('/') as [string, string];
    const d = deployments.get(namespace, name);
    if (!d) return;
    const selector = selectorOf(d);
    if (!selector) return;
    if (selector.empty) {
      recorder.event(
        d,
        'Warning',
        'SelectingAll',
        'This deployment is selecting all pods. A non-empty selector is required.',
      );
      const status = deploymentStatus(d);
      if ((status.observedGeneration ?? 0) < (d.metadata.generation ?? 0)) {
        await ignoreNotFound(
          ctx.client.updateStatus(Resources.deployments, {
            ...d,
            status: { ...status, observedGeneration: d.metadata.generation },
          }),
        );
      }
      return;
    }
    const claims = planClaims(
      d,
      childSelector(selector),
      controlledBy(replicaSets, d.metadata.uid!),
      replicaSets.byIndex(ORPHAN_INDEX, namespace),
    );
    // Without adoptions or releases there is nothing to wait for: the plan is made and written without yielding.
    const owned =
      claims.adopt.length + claims.release.length === 0
        ? claims.owned
        : await applyClaims(
            ctx.client,
            Resources.replicasets,
            Resources.deployments,
            d,
            newControllerRef(d, 'apps/v1', 'Deployment'),
            claims,
          );
    const plan = planDeployment({
      deployment: d,
      replicaSets: owned,
      podsOf: (uid) => controlledBy(pods, uid),
      now: ctx.clock.now(),
    });
    await apply(d, plan);
    return plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : undefined;
  }

  /**
   * Writes a plan: the new ReplicaSet first (the rest assumes it exists; a failure stops there), then every other
   * write at once, so that all of them rest on the cache state the plan was made from instead of interleaving with
   * the ReplicaSet controller's status writes. Each carries the resourceVersion it was decided on: a stale one
   * fails with a conflict and the next sync plans again.
   */
  async function apply(d: KubeObject, plan: DeploymentPlan): Promise<void> {
    if (plan.create) await createReplicaSet(d, plan.create);
    const writes: Array<Promise<unknown>> = [];
    for (const write of plan.updates) {
      writes.push(
        ctx.client
          .update(Resources.replicasets, write.rs)
          .then(() => write.events.forEach((e) => recorder.event(d, e.type, e.reason, e.message))),
      );
    }
    for (const rs of plan.deletes) {
      writes.push(
        ignoreNotFound(
          ctx.client.delete(Resources.replicasets, rs.metadata.namespace, rs.metadata.name!, {
            preconditions: { uid: rs.metadata.uid },
          }),
        ),
      );
    }
    if (plan.deployment) writes.push(ignoreNotFound(ctx.client.updateStatus(Resources.deployments, plan.deployment)));
    const failed = (await Promise.allSettled(writes)).find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /**
   * Creates the new ReplicaSet. If the name is taken by this Deployment's own ReplicaSet for the same template, the
   * cache is behind: look again. If it is taken by anything else, the hash collided: bump status.collisionCount so
   * the next sync hashes to another name. Any other failure is reported on the Progressing condition.
   */
  async function createReplicaSet(d: KubeObject, write: ReplicaSetWrite): Promise<void> {
    try {
      await ctx.client.create(Resources.replicasets, d.metadata.namespace, write.rs);
      for (const e of write.events) recorder.event(d, e.type, e.reason, e.message);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      if (err.code === 409 && err.reason === 'AlreadyExists') {
        const existing = await ignoreNotFound(
          ctx.client.get(Resources.replicasets, d.metadata.namespace, write.rs.metadata.name!),
        );
        if (
          existing &&
          controllerOf(existing)?.uid === d.metadata.uid &&
          equalIgnoreHash(templateOf(d), templateOf(existing))
        )
          throw err; // the cache is behind: retried once it has the ReplicaSet
        const status = deploymentStatus(d);
        await ctx.client.updateStatus(Resources.deployments, {
          ...d,
          status: { ...status, collisionCount: (status.collisionCount ?? 0) + 1 },
        });
        ctx.log(
          'info',
          `deployment ${d.metadata.namespace}/${d.metadata.name}: hash collision on ${write.rs.metadata.name}, collisionCount now ${(status.collisionCount ?? 0) + 1}`,
        );
        throw err; // retried, to hash to another name
      }
      if ((err.details?.causes ?? []).some((c) => c.reason === 'NamespaceTerminating')) throw err;
      const message = `Failed to create new replica set "${write.rs.metadata.name}": ${err.message}`;
      if (hasProgressDeadline(d)) {
        const status = deepCopy(deploymentStatus(d));
        setCondition(status, newCondition(PROGRESSING, 'False', Reasons.failedRSCreate, message, ctx.clock.now()));
        await ctx.client.updateStatus(Resources.deployments, { ...d, status }).catch(() => undefined);
      }
      recorder.event(d, 'Warning', Reasons.failedRSCreate, message);
      throw err;
    }
  }

  return {
    name: 'deployment',
    start: async () => loop.start(),
    stop: () => loop.stop(),
  };
}
