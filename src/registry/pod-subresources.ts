import { rfc3339 } from '../clock/clock.js';
import { ApiError, Errors, FieldErrors, type Status, type StatusCause } from '../api/errors.js';
import { deepCopy, isPlainObject, type KubeObject } from '../api/types.js';
import type { DeleteOptions, GenericStore } from './generic-store.js';
import { resourceKey, type KindInfo } from './types.js';

type Obj = Record<string, unknown>;

/** The Status a successful create of pods/binding or pods/eviction answers with. */
function created(): Status {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 };
}

/** Sets (or replaces) a pod condition, moving lastTransitionTime only when the status changes. */
export function setPodCondition(status: Obj, condition: Obj, now: string): void {
  const conditions = Array.isArray(status.conditions) ? [...(status.conditions as Obj[])] : [];
  const i = conditions.findIndex((c) => c.type === condition.type);
  const previous = i >= 0 ? conditions[i] : undefined;
  const next: Obj = { ...condition, lastProbeTime: null, lastTransitionTime: previous && previous.status === condition.status ? previous.lastTransitionTime : now };
  if (i >= 0) conditions[i] = next;
  else conditions.push(next);
  status.conditions = conditions;
}

/**
 * POST pods/NAME/binding (BindingREST in kube-apiserver): sets spec.nodeName, copies the Binding's
 * annotations and marks PodScheduled=True in one storage update. A pod that is already bound, or being
 * deleted, is a 409 Conflict on "pods/binding".
 */
export function bindPod(api: GenericStore, info: KindInfo, namespace: string | undefined, name: string, body: unknown, options: { dryRun?: boolean }): Status {
  if (!isPlainObject(body)) throw Errors.badRequest("Object 'Binding' is not a JSON object");
  const meta = isPlainObject(body.metadata) ? body.metadata : {};
  if (meta.name !== undefined && meta.name !== name) throw Errors.badRequest('name in URL does not match name in Binding object');
  const target = isPlainObject(body.target) ? body.target : {};
  const causes: StatusCause[] = [];
  if (typeof target.name !== 'string' || target.name === '') causes.push(FieldErrors.required('target.name', ''));
  if (target.kind !== undefined && target.kind !== '' && target.kind !== 'Node') causes.push(FieldErrors.notSupported('target.kind', target.kind, ['Node']));
  if (causes.length > 0) throw Errors.invalid('', 'Binding', name, causes);
  const nodeName = target.name as string;
  const conflict = (why: string): ApiError => Errors.conflict({ group: '', resource: 'pods/binding' }, name, why);
  const preconditions: { uid?: string; resourceVersion?: string } = {};
  if (typeof meta.uid === 'string' && meta.uid !== '') preconditions.uid = meta.uid;
  if (typeof meta.resourceVersion === 'string' && meta.resourceVersion !== '') preconditions.resourceVersion = meta.resourceVersion;
  const now = rfc3339(api.ctx.clock.now());
  api.store.guaranteedUpdate(
    resourceKey(info),
    namespace,
    name,
    preconditions,
    (current) => {
      if (current.metadata.deletionTimestamp) throw conflict(`pod ${name} is being deleted, cannot be assigned to a host`);
      const spec = isPlainObject(current.spec) ? current.spec : {};
      if (typeof spec.nodeName === 'string' && spec.nodeName !== '') throw conflict(`pod ${name} is already assigned to node "${spec.nodeName}"`);
      const pod = deepCopy(current);
      (pod.spec as Obj).nodeName = nodeName;
      const annotations = isPlainObject(meta.annotations) ? (meta.annotations as Record<string, string>) : undefined;
      if (annotations && Object.keys(annotations).length > 0) pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), ...annotations };
      const status = isPlainObject(pod.status) ? pod.status : (pod.status = {});
      setPodCondition(status as Obj, { type: 'PodScheduled', status: 'True' }, now);
      return pod;
    },
    options.dryRun,
  );
  return created();
}

/**
 * POST pods/NAME/eviction (policy/v1 Eviction). PodDisruptionBudgets are not served, so every eviction is
 * allowed: the pod gets the DisruptionTarget condition (EvictionByEvictionAPI) and is deleted with the
 * Eviction's deleteOptions, as kube-apiserver does once the budget check passes.
 */
export function evictPod(api: GenericStore, info: KindInfo, namespace: string | undefined, name: string, body: unknown, options: { dryRun?: boolean }): Status {
  if (!isPlainObject(body)) throw Errors.badRequest("Object 'Eviction' is not a JSON object");
  const meta = isPlainObject(body.metadata) ? body.metadata : {};
  if (meta.name !== undefined && meta.name !== name) throw Errors.badRequest('name in URL does not match name in Eviction object');
  const requested = isPlainObject(body.deleteOptions) ? body.deleteOptions : {};
  const deleteOptions: DeleteOptions = { dryRun: options.dryRun || (Array.isArray(requested.dryRun) && requested.dryRun.includes('All')) };
  if (typeof requested.gracePeriodSeconds === 'number') deleteOptions.gracePeriodSeconds = Math.max(0, requested.gracePeriodSeconds);
  if (isPlainObject(requested.preconditions)) {
    deleteOptions.preconditions = {};
    if (typeof requested.preconditions.uid === 'string') deleteOptions.preconditions.uid = requested.preconditions.uid;
    if (typeof requested.preconditions.resourceVersion === 'string') deleteOptions.preconditions.resourceVersion = requested.preconditions.resourceVersion;
  }
  const pod = api.get(info, namespace, name);
  if (!pod.metadata.deletionTimestamp && !deleteOptions.dryRun) {
    const now = rfc3339(api.ctx.clock.now());
    api.store.guaranteedUpdate(resourceKey(info), namespace, name, deleteOptions.preconditions ?? {}, (current) => {
      // A metadata of its own: the store stamps the new resourceVersion into it, and `current` is still shared.
      const next: KubeObject = { ...current, metadata: { ...current.metadata }, status: { ...(isPlainObject(current.status) ? current.status : {}) } };
      setPodCondition(next.status as Obj, { type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI', message: 'Eviction API: evicting' }, now);
      return next;
    });
  }
  api.delete(info, namespace, name, { ...deleteOptions, preconditions: deleteOptions.preconditions?.uid ? { uid: deleteOptions.preconditions.uid } : undefined });
  return created();
}
