import { ApiError, ignoreNotFound } from '../api/errors.js';
import { deepEqual, type KubeObject, type OwnerReference } from '../api/types.js';
import type { Informer } from '../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ResourceInfo } from '../runtime/controller.js';

const ORPHAN = 'orphan';
const FOREGROUND = 'foregroundDeletion';
/** Like kube-controller-manager, the collector ignores events: they are many and never own anything. */
const IGNORED_RESOURCES = new Set(['events']);

interface Node {
  resource: ResourceInfo;
  obj: KubeObject;
}

/**
 * The garbage collector: keeps a graph of owner uid → dependents from informers on every resource, and
 * - deletes a dependent once none of its owners exists (background cascade),
 * - for an owner deleted with propagationPolicy=Foreground, deletes its dependents and removes the
 *   `foregroundDeletion` finalizer once no dependent with blockOwnerDeletion is left,
 * - for propagationPolicy=Orphan, removes the owner reference from every dependent, then the `orphan` finalizer.
 */
export function garbageCollector(ctx: ControllerContext): Controller {
  const nodes = new Map<string, Node>();
  const dependents = new Map<string, Set<string>>();
  const informers = new Map<string, Informer>();
  const loop = new ReconcileLoop('garbagecollector', ctx, reconcile, 2);

  const link = (uid: string, refs: readonly OwnerReference[] | undefined, add: boolean): void => {
    for (const ref of refs ?? []) {
      let set = dependents.get(ref.uid);
      if (add) {
        if (!set) dependents.set(ref.uid, (set = new Set()));
        set.add(uid);
      } else if (set) {
        set.delete(uid);
        if (set.size === 0) dependents.delete(ref.uid);
      }
    }
  };

  const enqueueDependents = (uid: string): void => {
    for (const d of dependents.get(uid) ?? []) loop.queue.add(d);
  };

  const watch = (resource: ResourceInfo): void => {
    const key = `${resource.gvr.group}/${resource.gvr.resource}`;
    if (informers.has(key) || IGNORED_RESOURCES.has(resource.gvr.resource)) return;
    const informer = ctx.informers.for(resource.gvr);
    informers.set(key, informer);
    informer.addEventHandler({
      add: (obj) => {
        const uid = obj.metadata.uid!;
        nodes.set(uid, { resource, obj });
        link(uid, obj.metadata.ownerReferences, true);
        if (obj.metadata.ownerReferences?.length || obj.metadata.deletionTimestamp) loop.queue.add(uid);
      },
      update: (old, obj) => {
        const uid = obj.metadata.uid!;
        nodes.set(uid, { resource, obj });
        // Most updates (status, heartbeats) leave the owners alone: no relinking, and no JSON per update.
        const before = old.metadata.ownerReferences;
        const after = obj.metadata.ownerReferences;
        const ownersChanged = before !== after && !deepEqual(before ?? [], after ?? []);
        if (ownersChanged) {
          link(uid, before, false);
          link(uid, after, true);
        }
        if (obj.metadata.deletionTimestamp && hasGcFinalizer(obj)) {
          loop.queue.add(uid);
          enqueueDependents(uid);
        }
        if (ownersChanged) loop.queue.add(uid);
      },
      delete: (obj) => {
        const uid = obj.metadata.uid!;
        nodes.delete(uid);
        link(uid, obj.metadata.ownerReferences, false);
        enqueueDependents(uid);
        // An owner waiting in foreground deletion may have been waiting for this one.
        for (const ref of obj.metadata.ownerReferences ?? []) loop.queue.add(ref.uid);
      },
    });
  };

  async function reconcile(uid: string): Promise<void> {
    const node = nodes.get(uid);
    if (!node) return;
    const { obj, resource } = node;
    const finalizers = obj.metadata.finalizers ?? [];
    if (obj.metadata.deletionTimestamp && finalizers.includes(ORPHAN)) return orphanDependents(node);
    if (obj.metadata.deletionTimestamp && finalizers.includes(FOREGROUND)) return deleteForeground(node);
    const refs = obj.metadata.ownerReferences ?? [];
    if (refs.length === 0 || obj.metadata.deletionTimestamp) return;
    const states = await Promise.all(refs.map((ref) => ownerState(ref, obj.metadata.namespace)));
    const absent = refs.filter((_, i) => states[i] === 'absent');
    if (absent.length === refs.length) {
      await ignoreNotFound(
        ctx.client.delete(resource.gvr, obj.metadata.namespace, obj.metadata.name!, {
          propagationPolicy: 'Background',
          preconditions: { uid },
        }),
      );
      return;
    }
    const blockingForeground = refs.some((ref, i) => states[i] === 'deleting-foreground' && ref.blockOwnerDeletion);
    if (blockingForeground) {
      await ignoreNotFound(
        ctx.client.delete(resource.gvr, obj.metadata.namespace, obj.metadata.name!, {
          propagationPolicy: 'Foreground',
          preconditions: { uid },
        }),
      );
      return;
    }
    if (absent.length > 0) {
      const kept = refs.filter((_, i) => states[i] !== 'absent');
      await patchMeta(node, { ownerReferences: kept });
    }
  }

  /** Whether an owner exists, trusting the graph first and asking the API when the graph has not seen it. */
  async function ownerState(
    ref: OwnerReference,
    namespace: string | undefined,
  ): Promise<'present' | 'absent' | 'deleting-foreground'> {
    const known = nodes.get(ref.uid);
    if (known)
      return known.obj.metadata.deletionTimestamp && known.obj.metadata.finalizers?.includes(FOREGROUND)
        ? 'deleting-foreground'
        : 'present';
    const resource = ctx.resources.byKind(ref.apiVersion, ref.kind);
    if (!resource) return 'present'; // an owner of a kind we cannot resolve is never assumed gone
    try {
      const owner = await ctx.client.get(resource.gvr, resource.namespaced ? namespace : undefined, ref.name);
      return owner.metadata.uid === ref.uid ? 'present' : 'absent';
    } catch (err) {
      if (err instanceof ApiError && err.code === 404) return 'absent';
      throw err;
    }
  }

  async function orphanDependents(owner: Node): Promise<void> {
    const uid = owner.obj.metadata.uid!;
    for (const d of [...(dependents.get(uid) ?? [])]) {
      const dep = nodes.get(d);
      if (!dep) continue;
      const kept = (dep.obj.metadata.ownerReferences ?? []).filter((r) => r.uid !== uid);
      await patchMeta(dep, { ownerReferences: kept.length > 0 ? kept : null });
    }
    await removeFinalizer(owner, ORPHAN);
  }

  async function deleteForeground(owner: Node): Promise<void> {
    const uid = owner.obj.metadata.uid!;
    let blocking = 0;
    for (const d of [...(dependents.get(uid) ?? [])]) {
      const dep = nodes.get(d);
      if (!dep) continue;
      const ref = dep.obj.metadata.ownerReferences?.find((r) => r.uid === uid);
      if (ref?.blockOwnerDeletion) blocking++;
      if (!dep.obj.metadata.deletionTimestamp) {
        await ignoreNotFound(
          ctx.client.delete(dep.resource.gvr, dep.obj.metadata.namespace, dep.obj.metadata.name!, {
            propagationPolicy: 'Foreground',
            preconditions: { uid: d },
          }),
        );
      }
    }
    if (blocking === 0) await removeFinalizer(owner, FOREGROUND);
  }

  async function removeFinalizer(node: Node, finalizer: string): Promise<void> {
    const rest = (node.obj.metadata.finalizers ?? []).filter((f) => f !== finalizer);
    await patchMeta(node, { finalizers: rest.length > 0 ? rest : null });
  }

  /** A merge patch of metadata, conditional on the resourceVersion the decision was made on. */
  async function patchMeta(node: Node, meta: Record<string, unknown>): Promise<void> {
    const { obj, resource } = node;
    await ignoreNotFound(
      ctx.client.patch(resource.gvr, obj.metadata.namespace, obj.metadata.name!, 'merge', {
        metadata: { ...meta, resourceVersion: obj.metadata.resourceVersion },
      }),
    );
  }

  return {
    name: 'garbagecollector',
    start: async () => {
      for (const r of ctx.resources.all()) watch(r);
      await Promise.all([...informers.values()].map((i) => i.start()));
      // Kinds come and go at run time (CRDs): a kind no longer served stops its informer, which starts again
      // (relisting) if the kind is served again.
      const dormant = new Set<string>();
      ctx.resources.onChange(() => {
        const served = new Set<string>();
        for (const r of ctx.resources.all()) {
          const key = `${r.gvr.group}/${r.gvr.resource}`;
          served.add(key);
          const before = informers.size;
          watch(r);
          if (informers.size > before || dormant.delete(key))
            void informers
              .get(key)
              ?.start()
              .catch(() => undefined);
        }
        for (const [key, informer] of informers) {
          if (served.has(key) || dormant.has(key)) continue;
          informer.stop();
          dormant.add(key);
        }
      });
      loop.start();
    },
    stop: () => loop.stop(),
  };
}

function hasGcFinalizer(obj: KubeObject): boolean {
  const f = obj.metadata.finalizers ?? [];
  return f.includes(ORPHAN) || f.includes(FOREGROUND);
}
