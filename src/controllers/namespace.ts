import { rfc3339 } from '../clock/clock.js';
import { ignoreNotFound } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';

const KUBERNETES_FINALIZER = 'kubernetes';

/**
 * The namespace controller: when a namespace is Terminating, delete everything in it, wait until it is
 * all gone (pods take their grace period), then drop the `kubernetes` finalizer so the namespace goes.
 */
export function namespaceController(ctx: ControllerContext): Controller {
  const namespaces = ctx.informers.for(Resources.namespaces);
  const loop = new ReconcileLoop('namespace', ctx, reconcile);

  namespaces.addEventHandler({
    add: (ns) => ns.metadata.deletionTimestamp && loop.queue.add(ns.metadata.name!),
    update: (_old, ns) => ns.metadata.deletionTimestamp && loop.queue.add(ns.metadata.name!),
  });

  async function reconcile(name: string): Promise<ReconcileResult | void> {
    const ns = namespaces.get(undefined, name);
    if (!ns?.metadata.deletionTimestamp) return;
    const finalizers = (ns.spec as { finalizers?: string[] } | undefined)?.finalizers ?? [];
    if (!finalizers.includes(KUBERNETES_FINALIZER)) return;

    const remaining = new Map<string, number>();
    let waitMs = 0;
    for (const resource of ctx.resources.all()) {
      if (!resource.namespaced) continue;
      const list = await ctx.client.list(resource.gvr, name);
      for (const obj of list.items) {
        remaining.set(resource.gvr.resource, (remaining.get(resource.gvr.resource) ?? 0) + 1);
        if (!obj.metadata.deletionTimestamp) {
          await ignoreNotFound(
            ctx.client.delete(resource.gvr, name, obj.metadata.name!, { propagationPolicy: 'Background' }),
          );
        }
        waitMs = Math.max(waitMs, remainingGraceMs(obj, ctx.clock.now()));
      }
    }
    if (remaining.size > 0) {
      await setContentRemaining(ns, remaining);
      return { requeueAfterMs: Math.max(1000, waitMs) };
    }
    await ctx.client.finalizeNamespace({
      ...ns,
      spec: { ...(ns.spec as object), finalizers: finalizers.filter((f) => f !== KUBERNETES_FINALIZER) },
    });
  }

  async function setContentRemaining(ns: KubeObject, remaining: Map<string, number>): Promise<void> {
    const summary = [...remaining].map(([resource, n]) => `${resource} has ${n} resource instances`).join(', ');
    const now = rfc3339(ctx.clock.now());
    const conditions = [
      {
        type: 'NamespaceDeletionDiscoveryFailure',
        status: 'False',
        lastTransitionTime: now,
        reason: 'ResourcesDiscovered',
        message: 'All resources successfully discovered',
      },
      {
        type: 'NamespaceDeletionGroupVersionParsingFailure',
        status: 'False',
        lastTransitionTime: now,
        reason: 'ParsedGroupVersions',
        message: 'All legacy kube types successfully parsed',
      },
      {
        type: 'NamespaceDeletionContentFailure',
        status: 'False',
        lastTransitionTime: now,
        reason: 'ContentDeleted',
        message: 'All content successfully deleted, may be waiting on finalization',
      },
      {
        type: 'NamespaceContentRemaining',
        status: 'True',
        lastTransitionTime: now,
        reason: 'SomeResourcesRemain',
        message: `Some resources are remaining: ${summary}`,
      },
    ];
    const status = (ns.status ?? {}) as { conditions?: Array<{ type: string; message: string }> };
    const current = status.conditions?.find((c) => c.type === 'NamespaceContentRemaining');
    if (current?.message === conditions[3]!.message) return;
    await ignoreNotFound(
      ctx.client.updateStatus(Resources.namespaces, { ...ns, status: { ...status, phase: 'Terminating', conditions } }),
    );
  }

  return {
    name: 'namespace',
    start: async () => loop.start(),
    stop: () => loop.stop(),
  };
}

function remainingGraceMs(obj: KubeObject, now: number): number {
  const at = obj.metadata.deletionTimestamp ? Date.parse(obj.metadata.deletionTimestamp) : NaN;
  return Number.isNaN(at) ? 0 : Math.max(0, at - now);
}
