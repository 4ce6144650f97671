import { rfc3339 } from '../clock/clock.js';
import { ApiError, Errors, FieldErrors, type Status, type StatusCause } from '../api/errors.js';
import { selectorFromObject } from '../api/selectors.js';
import { orderedStatus, pdbSpec, pdbStatus, withDisruptionAllowedCondition, type PdbStatus } from '../api/pdb.js';
import { setPodCondition } from '../api/pod-util.js';
import { isPlainObject, type KubeObject, type DeleteOptions } from '../api/types.js';
import { then, type MaybePromise } from '../api/maybe-async.js';
import type { GenericStore } from './generic-store.js';
import { resourceKey, type KindInfo } from './types.js';

type Obj = Record<string, unknown>;

/** The Status a successful create of pods/binding or pods/eviction answers with. */
function created(): Status {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 };
}

/**
 * POST pods/NAME/binding (BindingREST in kube-apiserver): sets spec.nodeName, copies the Binding's
 * annotations and marks PodScheduled=True in one storage update. A pod that is already bound, or being
 * deleted, is a 409 Conflict on "pods/binding".
 */
export function bindPod(
  api: GenericStore,
  info: KindInfo,
  namespace: string | undefined,
  name: string,
  body: unknown,
  options: { dryRun?: boolean },
): MaybePromise<Status> {
  if (!isPlainObject(body)) throw Errors.badRequest("Object 'Binding' is not a JSON object");
  const meta = isPlainObject(body.metadata) ? body.metadata : {};
  if (meta.name !== undefined && meta.name !== name)
    throw Errors.badRequest('name in URL does not match name in Binding object');
  const target = isPlainObject(body.target) ? body.target : {};
  const causes: StatusCause[] = [];
  if (typeof target.name !== 'string' || target.name === '') causes.push(FieldErrors.required('target.name', ''));
  if (target.kind !== undefined && target.kind !== '' && target.kind !== 'Node')
    causes.push(FieldErrors.notSupported('target.kind', target.kind, ['Node']));
  if (causes.length > 0) throw Errors.invalid('', 'Binding', name, causes);
  const nodeName = target.name as string;
  const conflict = (why: string): ApiError => Errors.conflict({ group: '', resource: 'pods/binding' }, name, why);
  const preconditions: { uid?: string; resourceVersion?: string } = {};
  if (typeof meta.uid === 'string' && meta.uid !== '') preconditions.uid = meta.uid;
  if (typeof meta.resourceVersion === 'string' && meta.resourceVersion !== '')
    preconditions.resourceVersion = meta.resourceVersion;
  const now = rfc3339(api.ctx.clock.now());
  const bound = api.writes.guaranteedUpdate(
    resourceKey(info),
    namespace,
    name,
    preconditions,
    (current) => {
      if (current.metadata.deletionTimestamp)
        throw conflict(`pod ${name} is being deleted, cannot be assigned to a host`);
      const spec = isPlainObject(current.spec) ? current.spec : {};
      if (typeof spec.nodeName === 'string' && spec.nodeName !== '')
        throw conflict(`pod ${name} is already assigned to node "${spec.nodeName}"`);
      // A new pod that shares every part it does not change with the stored one (the store keeps those as they
      // are, and never changes a stored object in place): copying the whole pod cost a copy and a compaction of
      // its spec on every binding.
      const annotations = isPlainObject(meta.annotations) ? (meta.annotations as Record<string, string>) : undefined;
      const metadata =
        annotations && Object.keys(annotations).length > 0
          ? { ...current.metadata, annotations: { ...(current.metadata.annotations ?? {}), ...annotations } }
          : { ...current.metadata };
      const status: Obj = { ...(isPlainObject(current.status) ? current.status : {}) };
      setPodCondition(status, { type: 'PodScheduled', status: 'True' }, now);
      return { ...current, metadata, spec: { ...spec, nodeName }, status };
    },
    options.dryRun,
  );
  return then(bound, created);
}

/** Eviction's own Status for a pod that more than one budget covers: a Failure without a reason, code 500. */
class EvictionFailure extends ApiError {
  override toStatus(): Status {
    const { reason: _reason, ...status } = super.toStatus();
    return status;
  }
}

/** Entries the controller has not confirmed yet beyond which evictions stop (MaxDisruptedPodSize). */
const MAX_DISRUPTED_PODS = 2000;
const DISRUPTION_BUDGET_CAUSE = 'DisruptionBudget';
const VIOLATES_BUDGET = "Cannot evict pod as it would violate the pod's disruption budget.";

/** errors.NewTooManyRequests with a DisruptionBudget cause (retryAfterSeconds 0 is left out, as omitempty does). */
function tooManyRequests(cause: string, retryAfterSeconds: number): ApiError {
  const details: StatusCause[] = [{ reason: DISRUPTION_BUDGET_CAUSE, message: cause }];
  return new ApiError(
    429,
    'TooManyRequests',
    VIOLATES_BUDGET,
    retryAfterSeconds > 0 ? { retryAfterSeconds, causes: details } : { causes: details },
  );
}

/** createTooManyRequestsError: the budget's status is older than its spec, or the pod changed under the eviction. */
function stillProcessing(pdbName: string): ApiError {
  return tooManyRequests(`The disruption budget ${pdbName} is still being processed by the server.`, 10);
}

/** Pending, finished or already terminating pods are evicted without asking their budget (canIgnorePDB). */
function canIgnoreBudget(pod: KubeObject): boolean {
  const phase = isPlainObject(pod.status) ? pod.status.phase : undefined;
  return phase === 'Succeeded' || phase === 'Failed' || phase === 'Pending' || !!pod.metadata.deletionTimestamp;
}

function isReady(pod: KubeObject): boolean {
  const conditions =
    isPlainObject(pod.status) && Array.isArray(pod.status.conditions) ? (pod.status.conditions as Obj[]) : [];
  return conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

/** The budgets in the pod's namespace whose selector matches it (an empty selector matches every pod, as in policy/v1). */
function budgetsFor(api: GenericStore, pdbInfo: KindInfo, pod: KubeObject): KubeObject[] {
  return api.list(pdbInfo, pod.metadata.namespace, {}).items.filter((pdb) => {
    try {
      return selectorFromObject(pdbSpec(pdb).selector).matches(pod.metadata.labels);
    } catch {
      return false; // an invalid selector matches nothing
    }
  });
}

/**
 * checkAndDecrement: refuses with 429 while the budget allows no disruption (or its status is stale), else takes
 * one disruption and records the pod in status.disruptedPods (the controller then counts it as gone for two
 * minutes). kube-apiserver guards this /status write with the budget's resourceVersion and retries on conflict,
 * since apiservers run side by side; here the eviction reads and writes in one synchronous call, so nothing can
 * come between.
 */
function takeDisruption(
  api: GenericStore,
  pdbInfo: KindInfo,
  pdb: KubeObject,
  podName: string,
  dryRun: boolean,
): MaybePromise<unknown> {
  const status = pdbStatus(pdb);
  const name = pdb.metadata.name!;
  if ((status.observedGeneration ?? 0) < (pdb.metadata.generation ?? 0)) throw stillProcessing(name);
  if (status.disruptionsAllowed < 0)
    throw Errors.forbidden(
      { group: 'policy', resource: 'poddisruptionbudget' },
      name,
      'pdb disruptions allowed is negative',
    );
  if (Object.keys(status.disruptedPods ?? {}).length > MAX_DISRUPTED_PODS) {
    throw Errors.forbidden(
      { group: 'policy', resource: 'poddisruptionbudget' },
      name,
      'DisruptedPods map too big - too many evictions not confirmed by PDB controller',
    );
  }
  if (status.disruptionsAllowed === 0)
    throw tooManyRequests(
      `The disruption budget ${name} needs ${status.desiredHealthy} healthy pods and has ${status.currentHealthy} currently`,
      0,
    );
  if (dryRun) return undefined;
  const now = rfc3339(api.ctx.clock.now());
  let next: PdbStatus = { ...status, disruptionsAllowed: status.disruptionsAllowed - 1 };
  if (next.disruptionsAllowed === 0) next = withDisruptionAllowedCondition(next, now);
  next.disruptedPods = { ...(status.disruptedPods ?? {}), [podName]: now };
  return api.update(
    pdbInfo,
    pdb.metadata.namespace,
    name,
    { ...pdb, status: orderedStatus(next) },
    { subresource: 'status', internal: true },
  );
}

/**
 * addConditionAndDeletePod: marks the pod DisruptionTarget=True (EvictionByEvictionAPI), then deletes it with the
 * Eviction's options. A resourceVersion precondition guards the condition's write and moves to the version that
 * write made, so it still guards the delete.
 */
function markAndDelete(
  api: GenericStore,
  info: KindInfo,
  namespace: string | undefined,
  name: string,
  options: DeleteOptions,
): MaybePromise<unknown> {
  const preconditions = { ...(options.preconditions ?? {}) };
  const remove = (): MaybePromise<unknown> =>
    api.delete(info, namespace, name, { ...options, preconditions, internal: true });
  if (!options.dryRun) {
    const now = rfc3339(api.ctx.clock.now());
    const marked = api.writes.guaranteedUpdate(resourceKey(info), namespace, name, preconditions, (current) => {
      // A metadata of its own: the store stamps the new resourceVersion into it, and `current` is still shared.
      const next: KubeObject = {
        ...current,
        metadata: { ...current.metadata },
        status: { ...(isPlainObject(current.status) ? current.status : {}) },
      };
      setPodCondition(
        next.status as Obj,
        {
          type: 'DisruptionTarget',
          status: 'True',
          reason: 'EvictionByEvictionAPI',
          message: 'Eviction API: evicting',
        },
        now,
      );
      return next;
    });
    return then(marked, ({ object }) => {
      if (preconditions.resourceVersion) preconditions.resourceVersion = object.metadata.resourceVersion;
      return remove();
    });
  }
  return remove();
}

/**
 * POST pods/NAME/eviction (policy/v1 Eviction, kube-apiserver's EvictionREST). Pending, finished and terminating
 * pods are deleted at once. Otherwise the one PodDisruptionBudget covering the pod decides: none lets the eviction
 * through; more than one is a 500; a budget allowing no disruption is a 429 TooManyRequests with a DisruptionBudget
 * cause; else one disruption is taken from it before the delete. A pod that is not Ready is deleted without
 * taking one when its budget's unhealthyPodEvictionPolicy is AlwaysAllow, or (IfHealthyBudget, the default) while
 * the budget has its desired healthy pods. kube-apiserver guards those deletes with the pod's resourceVersion
 * against a pod turning Ready meanwhile; a synchronous eviction here reads and deletes with nothing in between.
 * dryRun checks everything and changes nothing.
 */
export function evictPod(
  api: GenericStore,
  info: KindInfo,
  namespace: string | undefined,
  name: string,
  body: unknown,
  options: { dryRun?: boolean },
): MaybePromise<Status> {
  if (!isPlainObject(body)) throw Errors.badRequest("Object 'Eviction' is not a JSON object");
  const meta = isPlainObject(body.metadata) ? body.metadata : {};
  if (meta.name !== undefined && meta.name !== name)
    throw Errors.badRequest('name in URL does not match name in Eviction object');
  const requested = isPlainObject(body.deleteOptions) ? body.deleteOptions : {};
  const deleteOptions: DeleteOptions = {
    dryRun: options.dryRun || (Array.isArray(requested.dryRun) && requested.dryRun.includes('All')),
  };
  if (typeof requested.gracePeriodSeconds === 'number')
    deleteOptions.gracePeriodSeconds = Math.max(0, requested.gracePeriodSeconds);
  if (isPlainObject(requested.preconditions)) {
    deleteOptions.preconditions = {};
    if (typeof requested.preconditions.uid === 'string') deleteOptions.preconditions.uid = requested.preconditions.uid;
    if (typeof requested.preconditions.resourceVersion === 'string')
      deleteOptions.preconditions.resourceVersion = requested.preconditions.resourceVersion;
  }
  const pod = api.get(info, namespace, name);
  if (canIgnoreBudget(pod)) return then(markAndDelete(api, info, namespace, name, deleteOptions), created);

  const pdbInfo = api.registry.lookup('policy', 'v1', 'poddisruptionbudgets');
  const pdbs = pdbInfo ? budgetsFor(api, pdbInfo, pod) : [];
  if (pdbs.length > 1)
    throw new EvictionFailure(
      500,
      '',
      'This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.',
    );
  const pdb = pdbs[0];
  if (pdb && pdbInfo) {
    const status = pdbStatus(pdb);
    const unhealthyMayGo =
      pdbSpec(pdb).unhealthyPodEvictionPolicy === 'AlwaysAllow' ||
      (status.currentHealthy >= status.desiredHealthy && status.desiredHealthy > 0);
    // An unready pod counts towards neither currentHealthy nor desiredHealthy: deleting it disrupts nothing.
    if (isReady(pod) || !unhealthyMayGo)
      return then(takeDisruption(api, pdbInfo, pdb, name, deleteOptions.dryRun === true), () =>
        then(markAndDelete(api, info, namespace, name, deleteOptions), created),
      );
  }
  return then(markAndDelete(api, info, namespace, name, deleteOptions), created);
}
