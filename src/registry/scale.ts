import { Errors } from '../api/errors.js';
import { deepCopy, isPlainObject, type KubeObject } from '../api/types.js';
import type { GenericStore, WriteOptions } from './generic-store.js';
import { then, type MaybePromise } from '../api/maybe-async.js';
import { field } from './printers.js';
import type { KindInfo } from './types.js';

/**
 * The autoscaling/v1 Scale subresource of a kind that has one: one reading and one write path, shared by the
 * HTTP handler and the in-process client (the HPA controller's scale client), so both answer alike.
 */
export function scaleOf(info: KindInfo, obj: KubeObject): KubeObject {
  const paths = info.scale!;
  const selector = field(obj, 'status.selector') ?? selectorText(field(obj, 'spec.selector'));
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: {
      name: obj.metadata.name,
      namespace: obj.metadata.namespace,
      uid: obj.metadata.uid,
      resourceVersion: obj.metadata.resourceVersion,
      creationTimestamp: obj.metadata.creationTimestamp,
    },
    spec: { replicas: Number(field(obj, paths.specReplicasPath) ?? 0) },
    status: { replicas: Number(field(obj, paths.statusReplicasPath) ?? 0), selector },
  };
}

/**
 * Writes spec.replicas of the owner from the Scale `next` makes of the current one. `put`: a resourceVersion in the
 * body is a precondition (a PUT's optimistic lock, kept across the store's retries); a patch has none.
 */
export function writeScale(
  api: GenericStore,
  info: KindInfo,
  namespace: string | undefined,
  name: string,
  next: (scale: KubeObject) => unknown,
  put: boolean,
  options: WriteOptions,
): MaybePromise<KubeObject> {
  let preconditionRv: string | undefined;
  const updated = api.writeUpdate(
    info,
    namespace,
    name,
    {},
    (current) => {
      const body = next(scaleOf(info, current));
      if (!isPlainObject(body)) throw Errors.badRequest('Scale must be a JSON object');
      const rv = isPlainObject(body.metadata) ? body.metadata.resourceVersion : undefined;
      if (put && typeof rv === 'string' && rv !== '') preconditionRv = rv;
      if (preconditionRv !== undefined && preconditionRv !== current.metadata.resourceVersion)
        throw Errors.conflict(info, name);
      const replicas = isPlainObject(body.spec) ? body.spec.replicas : undefined;
      if (replicas !== undefined && (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0)) {
        throw Errors.invalid('autoscaling', 'Scale', name, [
          {
            reason: 'FieldValueInvalid',
            message: `Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
            field: 'spec.replicas',
          },
        ]);
      }
      const copy = deepCopy(current);
      setPath(copy, info.scale!.specReplicasPath, replicas ?? 0);
      return copy;
    },
    {
      ...options,
      managedSubresource: 'scale',
      admissionView: {
        subresource: 'scale',
        of: (obj) => scaleOf(info, obj),
        apply: (view, obj) => {
          const replicas = isPlainObject(view.spec) ? view.spec.replicas : undefined;
          if (replicas === undefined || replicas === field(obj, info.scale!.specReplicasPath)) return obj;
          const copy = deepCopy(obj);
          setPath(copy, info.scale!.specReplicasPath, replicas);
          return copy;
        },
      },
    },
  );
  return then(updated, (u) => scaleOf(info, u));
}

function selectorText(selector: unknown): string {
  if (!isPlainObject(selector)) return '';
  const parts: string[] = [];
  // A ReplicationController's selector is a plain map (labels.SelectorFromSet), not a LabelSelector.
  if (!('matchLabels' in selector) && !('matchExpressions' in selector))
    return Object.keys(selector)
      .sort()
      .map((k) => `${k}=${String(selector[k])}`)
      .join(',');
  for (const [k, v] of Object.entries(isPlainObject(selector.matchLabels) ? selector.matchLabels : {}))
    parts.push(`${k}=${String(v)}`);
  for (const e of Array.isArray(selector.matchExpressions) ? selector.matchExpressions : []) {
    if (!isPlainObject(e)) continue;
    const values = Array.isArray(e.values) ? e.values.join(',') : '';
    if (e.operator === 'In') parts.push(`${String(e.key)} in (${values})`);
    else if (e.operator === 'NotIn') parts.push(`${String(e.key)} notin (${values})`);
    else if (e.operator === 'Exists') parts.push(String(e.key));
    else if (e.operator === 'DoesNotExist') parts.push(`!${String(e.key)}`);
  }
  return parts.sort().join(',');
}

function setPath(obj: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let current = obj;
  for (const part of parts.slice(0, -1)) {
    if (!isPlainObject(current[part])) current[part] = {};
    current = current[part] as Record<string, unknown>;
  }
  current[parts[parts.length - 1]!] = value;
}
