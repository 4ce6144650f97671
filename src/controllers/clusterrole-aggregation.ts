import { selectorFromObject } from '../api/selectors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import type { Gvr } from '../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../runtime/controller.js';

const CLUSTER_ROLES: Gvr = { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterroles' };

function selectorsOf(role: KubeObject): unknown[] | undefined {
  const rule = role.aggregationRule;
  if (!isPlainObject(rule)) return undefined;
  return Array.isArray(rule.clusterRoleSelectors) ? rule.clusterRoleSelectors : [];
}

/**
 * The rules an aggregating ClusterRole should hold: those of every other ClusterRole its selectors match, each
 * selector's matches in name order, each rule once (pkg/controller/clusterroleaggregation).
 *
 * Example: `admin` selects aggregate-to-admin=true, which `edit` and `system:aggregate-to-admin` carry; `edit` in
 * turn holds what aggregate-to-edit roles give, so admin ends up with edit's rules plus its own.
 */
export function aggregatedRules(role: KubeObject, all: readonly KubeObject[]): unknown[] {
  const rules: unknown[] = [];
  for (const selectorObject of selectorsOf(role) ?? []) {
    let selector: ReturnType<typeof selectorFromObject>;
    try {
      selector = selectorFromObject(selectorObject);
    } catch {
      continue;
    }
    const matching = all
      .filter((r) => r.metadata.name !== role.metadata.name && selector.matches(r.metadata.labels))
      .sort((a, b) => (a.metadata.name! < b.metadata.name! ? -1 : 1));
    for (const other of matching) {
      for (const rule of Array.isArray(other.rules) ? other.rules : [])
        if (!rules.some((r) => deepEqual(r, rule))) rules.push(rule);
    }
  }
  return rules;
}

/**
 * The ClusterRole aggregation controller: keeps the rules of each ClusterRole with an aggregationRule equal to the
 * union of the ClusterRoles it selects. Any ClusterRole change may change a selection, so each one queues the
 * aggregating roles (a handful, tracked by name) rather than every role.
 */
export function clusterRoleAggregationController(ctx: ControllerContext): Controller {
  const roles = ctx.informers.for(CLUSTER_ROLES);
  const aggregating = new Set<string>();
  const loop = new ReconcileLoop('clusterrole-aggregation', ctx, reconcile);
  const changed = (role: KubeObject, deleted = false): void => {
    const name = role.metadata.name!;
    if (!deleted && selectorsOf(role)) aggregating.add(name);
    else aggregating.delete(name);
    for (const n of aggregating) loop.queue.add(n);
  };
  roles.addEventHandler({ add: (r) => changed(r), update: (_old, r) => changed(r), delete: (r) => changed(r, true) });

  async function reconcile(name: string): Promise<void> {
    const role = roles.get(undefined, name);
    if (!role || !selectorsOf(role)) return;
    const rules = aggregatedRules(role, roles.list());
    if (deepEqual(rules, Array.isArray(role.rules) ? role.rules : [])) return;
    const next = deepCopy(role);
    next.rules = rules;
    await ctx.client.update(CLUSTER_ROLES, next);
  }

  return { name: 'clusterrole-aggregation', start: async () => loop.start(), stop: () => loop.stop() };
}
