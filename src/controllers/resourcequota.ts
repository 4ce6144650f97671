import { ZERO_QUANTITY } from '../api/quantity.js';
import {
  addLists,
  listFromJson,
  listsEqual,
  listToJson,
  maskList,
  podQuotaExpiry,
  quotaEvaluator,
  quotaMatches,
  quotaScopes,
  resourceOfQuotaName,
  subtractLists,
  type QuotaEvaluator,
  type ResourceList,
  type ScopeSelectorRequirement,
} from '../api/quota.js';
import { deepEqual, isPlainObject, type KubeObject } from '../api/types.js';
import { Resources } from '../client/client.js';
import { cacheKey, type CacheIndex, type Informer } from '../client/informer.js';
import { ReconcileLoop, type Controller, type ControllerContext, type ReconcileResult } from '../runtime/controller.js';

/**
 * kube-controller-manager's resourcequota controller: every ResourceQuota's `status.hard` is its `spec.hard` and
 * `status.used` what the namespace's objects use of it (pods' requests and limits, services, claims and storage,
 * object counts `count/<resource>.<group>`), within the quota's scopes. Quota admission charges creates as they
 * happen; this controller is what gives usage back when objects go or stop counting.
 *
 * Usage is kept per quota as a running tally, from the informers' caches (an index told of every change): a
 * quota's first sync, or a change of what it limits, counts its namespace once; after that each object change adds
 * its difference, so no sync walks a namespace. Pods terminating past their grace period stop counting without an
 * event, so the few terminating pods of a quota's namespace are looked at on each sync, and the sync comes back when
 * the next of them would expire.
 */
const CORE_TRACKED = ['pods', 'services', 'persistentvolumeclaims', 'configmaps', 'secrets', 'resourcequotas'];

interface QuotaTally {
  readonly key: string;
  /** What the tally counts for: spec.hard's names and the scopes; a change means counting again. */
  readonly signature: string;
  readonly hard: readonly string[];
  readonly scopes: readonly ScopeSelectorRequirement[];
  /** Per tracked group/resource, the quota names its evaluator counts. */
  readonly counted: ReadonlyMap<string, readonly string[]>;
  /** Names of spec.hard no served kind counts (a `count/` of a kind not served yet). */
  readonly unresolved: boolean;
  used: ResourceList;
}

interface NamespaceTallies {
  readonly quotas: Map<string, QuotaTally>;
  /** Pods of the namespace with a deletionTimestamp: they may stop counting as time passes. */
  readonly terminating: Set<string>;
}

const NONE: ResourceList = new Map();

function hardOf(quota: KubeObject): Record<string, unknown> {
  const spec = isPlainObject(quota.spec) ? quota.spec : {};
  return isPlainObject(spec.hard) ? spec.hard : {};
}

function signatureOf(quota: KubeObject): string {
  const spec = isPlainObject(quota.spec) ? quota.spec : {};
  return JSON.stringify([Object.keys(hardOf(quota)).sort(), spec.scopes ?? null, spec.scopeSelector ?? null]);
}

export function resourceQuotaController(ctx: ControllerContext): Controller {
  const quotas = ctx.informers.for(Resources.resourcequotas);
  const loop = new ReconcileLoop('resourcequota', ctx, reconcile);
  const namespaces = new Map<string, NamespaceTallies>();
  /** Informers of the kinds quotas count, by `group/resource`. */
  const tracked = new Map<string, { informer: Informer; evaluator: QuotaEvaluator }>();

  quotas.addEventHandler({
    add: (q) => loop.queue.add(cacheKey(q)),
    update: (_old, q) => loop.queue.add(cacheKey(q)),
    delete: (q) => forget(cacheKey(q), q.metadata.namespace!),
  });

  /** Applies an object's change to the tallies of its namespace's quotas. */
  const indexFor = (gr: string, evaluator: QuotaEvaluator): CacheIndex => ({
    changed(key, old, next) {
      const obj = next ?? old;
      const namespace = obj?.metadata.namespace;
      const state = namespace === undefined ? undefined : namespaces.get(namespace);
      if (!state) return;
      if (gr === '/pods') {
        if (next?.metadata.deletionTimestamp) state.terminating.add(key);
        else state.terminating.delete(key);
      }
      for (const tally of state.quotas.values()) {
        const names = tally.counted.get(gr);
        if (!names) continue;
        const before = old ? contribution(tally, evaluator, names, old) : NONE;
        const after = next ? contribution(tally, evaluator, names, next) : NONE;
        if (before === after || listsEqual(before, after)) continue;
        tally.used = addLists(subtractLists(tally.used, before), after);
        loop.queue.add(tally.key);
      }
    },
  });

  function contribution(tally: QuotaTally, evaluator: QuotaEvaluator, names: readonly string[], obj: KubeObject) {
    return quotaMatches(evaluator, tally.hard, tally.scopes, obj) ? maskList(evaluator.usage(obj), names) : NONE;
  }

  /** The informer of a group/resource a quota counts, started on first need; undefined when no such kind is served. */
  function track(group: string, resource: string): { informer: Informer; evaluator: QuotaEvaluator } | undefined {
    const gr = `${group}/${resource}`;
    let entry = tracked.get(gr);
    if (entry) return entry;
    const served = ctx.resources.all().find((r) => r.gvr.group === group && r.gvr.resource === resource);
    if (!served?.namespaced) return undefined;
    const informer = ctx.informers.for(served.gvr);
    const evaluator = quotaEvaluator(group, resource);
    informer.addCacheIndex(indexFor(gr, evaluator));
    tracked.set(gr, (entry = { informer, evaluator }));
    void informer.start().catch(() => undefined);
    return entry;
  }
  for (const resource of CORE_TRACKED) track('', resource);

  /** Counts a quota's namespace from the caches: its first sync, or a change of what it limits. */
  function count(quota: KubeObject, key: string): QuotaTally {
    const hard = Object.keys(hardOf(quota));
    const scopes = quotaScopes(quota);
    const counted = new Map<string, string[]>();
    let unresolved = false;
    for (const name of hard) {
      const target = resourceOfQuotaName(name);
      const entry = target && track(target.group, target.resource);
      if (!target || !entry) {
        unresolved ||= name.startsWith('count/');
        continue;
      }
      const gr = `${target.group}/${target.resource}`;
      if (!counted.has(gr)) counted.set(gr, entry.evaluator.matchingResources(hard));
    }
    const tally: QuotaTally = {
      key,
      signature: signatureOf(quota),
      hard,
      scopes,
      counted,
      unresolved,
      used: new Map(),
    };
    let used: ResourceList = new Map();
    for (const names of counted.values()) for (const n of names) used.set(n, ZERO_QUANTITY);
    for (const [gr, names] of counted) {
      const { informer, evaluator } = tracked.get(gr)!;
      for (const obj of informer.listNamespace(quota.metadata.namespace!))
        used = addLists(used, contribution(tally, evaluator, names, obj));
    }
    tally.used = used;
    return tally;
  }

  function stateOf(namespace: string): NamespaceTallies {
    let state = namespaces.get(namespace);
    if (!state) {
      state = { quotas: new Map(), terminating: new Set() };
      for (const pod of tracked.get('/pods')?.informer.listNamespace(namespace) ?? [])
        if (pod.metadata.deletionTimestamp) state.terminating.add(cacheKey(pod));
      namespaces.set(namespace, state);
    }
    return state;
  }

  function forget(key: string, namespace: string): void {
    const state = namespaces.get(namespace);
    if (!state) return;
    state.quotas.delete(key);
    if (state.quotas.size === 0) namespaces.delete(namespace);
  }

  /** The tally with pods that stopped counting since (terminating past their grace period) taken out. */
  function usedNow(tally: QuotaTally, state: NamespaceTallies, now: number): { used: ResourceList; next?: number } {
    const names = tally.counted.get('/pods');
    const pods = tracked.get('/pods');
    if (!names || !pods || state.terminating.size === 0) return { used: tally.used };
    let used = tally.used;
    let next: number | undefined;
    for (const key of state.terminating) {
      const slash = key.indexOf('/');
      const pod = pods.informer.get(key.slice(0, slash), key.slice(slash + 1));
      const expiry = pod && podQuotaExpiry(pod);
      if (!pod || expiry === undefined || !quotaMatches(pods.evaluator, tally.hard, tally.scopes, pod)) continue;
      if (now <= expiry) {
        next = Math.min(next ?? expiry, expiry);
        continue;
      }
      used = subtractLists(used, maskList(pods.evaluator.usage(pod), names));
      used = addLists(used, maskList(pods.evaluator.usage(pod, now), names));
    }
    return { used, next };
  }

  async function reconcile(key: string): Promise<ReconcileResult | undefined> {
    const slash = key.indexOf('/');
    const namespace = key.slice(0, slash);
    const quota = quotas.get(namespace, key.slice(slash + 1));
    if (!quota) {
      forget(key, namespace);
      return undefined;
    }
    const state = stateOf(namespace);
    let tally = state.quotas.get(key);
    if (!tally || tally.signature !== signatureOf(quota)) state.quotas.set(key, (tally = count(quota, key)));
    // A kind's informer started for this quota counts in what its first list brings as it arrives: wait for it.
    for (const gr of tally.counted.keys()) await tracked.get(gr)!.informer.waitForSync();
    const now = ctx.clock.now();
    const { used, next } = usedNow(tally, state, now);
    const hard = hardOf(quota);
    const status = isPlainObject(quota.status) ? quota.status : {};
    // Usage this controller does not count (no served kind) keeps the last observation, as kube's does.
    const previous = listFromJson(status.used);
    const merged = maskList(new Map([...previous, ...used]), Object.keys(hard));
    const dirty = !deepEqual(status.hard, hard) || !isPlainObject(status.used) || !listsEqual(merged, previous);
    if (dirty)
      await ctx.client.updateStatus(Resources.resourcequotas, {
        ...quota,
        status: { ...status, hard, used: listToJson(merged) },
      });
    return next === undefined ? undefined : { requeueAfterMs: next - now + 1 };
  }

  return {
    name: 'resourcequota',
    start: async () => {
      // A kind served later (a CRD) may be what a `count/` quota waits for: count those quotas again.
      ctx.resources.onChange(() => {
        for (const state of namespaces.values())
          for (const [key, tally] of state.quotas)
            if (tally.unresolved) {
              state.quotas.delete(key);
              loop.queue.add(key);
            }
      });
      loop.start();
    },
    stop: () => loop.stop(),
  };
}
