import { Errors } from '../../api/errors.js';
import { compareQuantities } from '../../api/quantity.js';
import {
  addLists,
  hardResourceNames,
  listFromJson,
  listToJson,
  maskList,
  prettyPrint,
  quotaEvaluator,
  quotaMatches,
  quotaScopes,
  removeZeros,
  subtractNonNegative,
  type ResourceList,
} from '../../api/quota.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { settle } from '../../api/maybe-async.js';
import type { MemoryStore, StoreWrites } from '../../storage/memory-store.js';
import type { AdmissionPlugin, AdmissionRequest } from '../types.js';
import { namespaceObjects } from './namespace-objects.js';

/**
 * kube-apiserver's ResourceQuota plugin: a create (or an update that uses more: a Service turning NodePort, a claim
 * growing) in a namespace with quotas is refused with 403 when it would take any matching quota's `status.used` past
 * its `status.hard` — `exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1` — and otherwise charged to
 * the quotas at once, as kube-apiserver's quota evaluator writes their status before the object is stored. Here the
 * check, the object's write and the charge are one synchronous step, so concurrent creates cannot overshoot; the
 * resourcequota controller later writes what it counts (lower again after deletions).
 */
const QUOTAS = '/resourcequotas';

interface Charge {
  quota: KubeObject;
  used: ResourceList;
}

function status(quota: KubeObject): Record<string, unknown> {
  return isPlainObject(quota.status) ? quota.status : {};
}

export class ResourceQuotaAdmission implements AdmissionPlugin {
  readonly name = 'ResourceQuota';

  constructor(
    private readonly store: MemoryStore,
    private readonly writes: StoreWrites = store,
  ) {}

  validate(request: AdmissionRequest): (() => void) | undefined {
    const { info, operation, obj, old } = request;
    // Quota ignores subresources (a pod's status, a deployment's scale), as kube-apiserver's plugin does.
    if (!obj || request.subresource !== '') return undefined;
    const namespace = obj.metadata.namespace;
    if (!info.namespaced || namespace === undefined) return undefined;
    const quotas = namespaceObjects(this.store, QUOTAS, namespace);
    if (quotas.length === 0) return undefined;
    const evaluator = quotaEvaluator(info.group, info.resource);
    if (operation === 'UPDATE' && !evaluator.chargesUpdates) return undefined;
    const name = obj.metadata.name ?? obj.metadata.generateName ?? '';
    const refuse = (why: string) => Errors.forbidden(info, name, why);

    // The quotas that count this object; each must have usage to check against (its first sync done).
    const matching: KubeObject[] = [];
    for (const quota of quotas) {
      const hard = hardResourceNames(quota);
      if (!quotaMatches(evaluator, hard, quotaScopes(quota), obj)) continue;
      const restricted = evaluator.matchingResources(hard);
      const unmet = evaluator.constraints?.(restricted, obj);
      if (unmet) throw refuse(`failed quota: ${quota.metadata.name}: ${unmet}`);
      const used = status(quota).used;
      if (restricted.some((r) => !isPlainObject(used) || used[r] === undefined))
        throw refuse(
          `status unknown for quota: ${quota.metadata.name}, resources: ${[...restricted].sort().join(',')}`,
        );
      matching.push(quota);
    }
    if (matching.length === 0) return undefined;

    const usage = evaluator.usage(obj);
    const negative = [...usage].filter(([, q]) => q.nanos < 0n).map(([k]) => k);
    if (negative.length > 0) throw refuse(`quota usage is negative for resource(s): ${negative.sort().join(',')}`);
    // An update is charged what it adds, to the quotas that already counted the object; others are charged in full.
    const previous = operation === 'UPDATE' && old ? evaluator.usage(old) : undefined;

    const charges: Charge[] = [];
    for (const quota of matching) {
      const hardNames = hardResourceNames(quota);
      const counted = previous && quotaMatches(evaluator, hardNames, quotaScopes(quota), old!);
      const delta = removeZeros(counted ? subtractNonNegative(usage, previous) : usage);
      if (delta.size === 0) continue;
      const hard = listFromJson(status(quota).hard);
      const used = listFromJson(status(quota).used);
      const requested = maskList(delta, hardNames);
      const after = addLists(used, requested);
      const exceeded = [...requested.keys()].filter((k) => {
        const limit = hard.get(k);
        return limit !== undefined && compareQuantities(after.get(k)!, limit) > 0;
      });
      if (exceeded.length > 0)
        throw refuse(
          `exceeded quota: ${quota.metadata.name}, requested: ${prettyPrint(maskList(requested, exceeded))}, used: ${prettyPrint(maskList(used, exceeded))}, limited: ${prettyPrint(maskList(hard, exceeded))}`,
        );
      if (requested.size > 0) charges.push({ quota, used: maskList(after, requested.keys()) });
    }
    if (charges.length === 0 || request.dryRun) return undefined;
    return () => {
      for (const { quota, used } of charges) this.charge(quota, used);
    };
  }

  /** Writes the quota's new usage (only the resources charged change), as the evaluator's status update does. */
  private charge(quota: KubeObject, used: ResourceList): void {
    const charged = this.writes.guaranteedUpdate(
      QUOTAS,
      quota.metadata.namespace,
      quota.metadata.name!,
      { resourceVersion: quota.metadata.resourceVersion },
      (current) => {
        const s = status(current);
        const previous = isPlainObject(s.used) ? s.used : {};
        return {
          ...current,
          metadata: { ...current.metadata },
          status: { ...s, used: { ...previous, ...listToJson(used) } },
        };
      },
    );
    // With etcd the write completes later; a quota status that lost a race is recomputed by the quota controller.
    settle(charged, () => undefined);
  }
}
