import jsonpatch from 'fast-json-patch';
import { ApiError, Errors } from './errors.js';
import { deepCopy, deepEqual, isPlainObject } from './types.js';

/** The patch types kube-apiserver accepts, by Content-Type. */
export type PatchType = 'json' | 'merge' | 'strategic' | 'apply';

export const PATCH_CONTENT_TYPES: Record<string, PatchType> = {
  'application/json-patch+json': 'json',
  'application/merge-patch+json': 'merge',
  'application/strategic-merge-patch+json': 'strategic',
  'application/apply-patch+yaml': 'apply',
  'application/apply-patch+cbor': 'apply',
};

/** RFC 7386 JSON merge patch: objects merge recursively, null removes, anything else replaces. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return deepCopy(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

/** RFC 6902 JSON patch; a failing operation is 422 as in kube-apiserver, a malformed patch 400. */
export function applyJsonPatch(target: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch)) throw Errors.badRequest('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  for (const [i, op] of patch.entries()) {
    if (!isPlainObject(op) || typeof op.op !== 'string') throw Errors.badRequest(`invalid JSON patch operation at index ${i}`);
    if (!['add', 'remove', 'replace', 'move', 'copy', 'test'].includes(op.op)) throw Errors.badRequest(`Unexpected kind: ${op.op}`);
    if (typeof op.path !== 'string') throw Errors.badRequest(`operation at index ${i} is missing path`);
  }
  try {
    return jsonpatch.applyPatch(deepCopy(target), patch as jsonpatch.Operation[], true, true, false).newDocument;
  } catch (err) {
    const name = (err as { name?: string }).name ?? '';
    const message = err instanceof Error ? err.message.split('\n')[0]! : String(err);
    if (name === 'TEST_OPERATION_FAILED') throw Errors.unprocessable('the server rejected our request due to an error in our request: testing value failed');
    throw new ApiError(422, 'Invalid', `the server rejected our request due to an error in our request: ${message}`);
  }
}

/**
 * Where a list merges by key instead of being replaced, per Kubernetes' patchMergeKey/patchStrategy tags.
 * `parents` is the path of field names above the list (array indices left out).
 */
export function listMergeKey(field: string, parents: readonly string[]): string | 'primitive' | undefined {
  const parent = parents[parents.length - 1];
  switch (field) {
    case 'containers':
    case 'initContainers':
    case 'ephemeralContainers':
    case 'volumes':
    case 'imagePullSecrets':
    case 'env':
    case 'resourceClaims':
    case 'schedulingGates':
      return 'name';
    case 'ports':
      return parents.some((p) => p === 'containers' || p === 'initContainers' || p === 'ephemeralContainers') ? 'containerPort' : 'port';
    case 'volumeMounts':
      return 'mountPath';
    case 'volumeDevices':
      return 'devicePath';
    case 'hostAliases':
      return 'ip';
    case 'topologySpreadConstraints':
      return 'topologyKey';
    case 'conditions':
      return parent === 'status' ? 'type' : undefined;
    case 'addresses':
      return parent === 'status' ? 'type' : undefined;
    case 'ownerReferences':
      return parent === 'metadata' ? 'uid' : undefined;
    case 'finalizers':
      return parent === 'metadata' ? 'primitive' : undefined;
    default:
      return undefined;
  }
}

const SET_ORDER = '$setElementOrder/';
const DELETE_FROM_PRIMITIVE = '$deleteFromPrimitiveList/';

/**
 * Strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch) for built-in kinds: maps merge, null
 * deletes, keyed lists merge by their patchMergeKey, and the `$patch`, `$setElementOrder`, `$retainKeys` and
 * `$deleteFromPrimitiveList` directives are honoured.
 */
export function applyStrategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) throw Errors.badRequest('strategic merge patch must be a JSON object');
  return mergeMap(isPlainObject(target) ? target : {}, patch, []);
}

function mergeMap(target: Record<string, unknown>, patch: Record<string, unknown>, path: string[]): Record<string, unknown> | undefined {
  const directive = patch.$patch;
  if (directive === 'delete') return undefined;
  if (directive === 'replace') {
    const { $patch: _drop, ...rest } = patch;
    return stripDirectives(rest) as Record<string, unknown>;
  }
  if (directive !== undefined) throw Errors.badRequest(`Unknown patch type: ${String(directive)}`);
  let result: Record<string, unknown> = { ...target };
  const retainKeys = patch.$retainKeys;
  for (const [key, value] of Object.entries(patch)) {
    if (key === '$retainKeys' || key.startsWith(SET_ORDER)) continue;
    if (key.startsWith(DELETE_FROM_PRIMITIVE)) {
      const field = key.slice(DELETE_FROM_PRIMITIVE.length);
      const current = result[field];
      if (Array.isArray(current) && Array.isArray(value)) result[field] = current.filter((v) => !value.some((d) => deepEqual(d, v)));
      continue;
    }
    if (value === null) {
      delete result[key];
      continue;
    }
    const current = result[key];
    if (isPlainObject(value)) {
      const merged = mergeMap(isPlainObject(current) ? current : {}, value, [...path, key]);
      if (merged === undefined) delete result[key];
      else result[key] = merged;
    } else if (Array.isArray(value)) {
      result[key] = mergeList(Array.isArray(current) ? current : [], value, key, path);
    } else {
      result[key] = value;
    }
  }
  for (const [key, order] of Object.entries(patch)) {
    if (!key.startsWith(SET_ORDER) || !Array.isArray(order)) continue;
    const field = key.slice(SET_ORDER.length);
    const list = result[field];
    if (Array.isArray(list)) result[field] = orderList(list, order, listMergeKey(field, path));
  }
  if (Array.isArray(retainKeys)) {
    const keep = new Set(retainKeys.map(String));
    result = Object.fromEntries(Object.entries(result).filter(([k]) => keep.has(k)));
  }
  return result;
}

function mergeList(current: unknown[], patch: unknown[], field: string, parents: string[]): unknown[] {
  const key = listMergeKey(field, parents);
  if (key === undefined) {
    if (patch.length === 1 && isPlainObject(patch[0]) && patch[0].$patch === 'replace') return [];
    return stripDirectives(patch) as unknown[];
  }
  if (key === 'primitive') {
    const out = [...current];
    for (const v of patch) if (!out.some((c) => deepEqual(c, v))) out.push(v);
    return out;
  }
  if (patch.some((p) => isPlainObject(p) && p.$patch === 'replace')) {
    return stripDirectives(patch.filter((p) => !(isPlainObject(p) && p.$patch === 'replace'))) as unknown[];
  }
  const out = [...current];
  const childPath = [...parents, field];
  for (const item of patch) {
    if (!isPlainObject(item)) {
      out.push(item);
      continue;
    }
    const index = out.findIndex((c) => isPlainObject(c) && deepEqual(c[key], item[key]));
    if (item.$patch === 'delete') {
      if (index >= 0) out.splice(index, 1);
      continue;
    }
    if (index >= 0) {
      const merged = mergeMap(out[index] as Record<string, unknown>, item, childPath);
      if (merged === undefined) out.splice(index, 1);
      else out[index] = merged;
    } else {
      out.push(stripDirectives(item));
    }
  }
  return out;
}

/** `$setElementOrder`: the listed elements in the given order; others keep their place after them. */
function orderList(list: unknown[], order: unknown[], key: string | undefined): unknown[] {
  const keyOf = (v: unknown): unknown => (key && key !== 'primitive' && isPlainObject(v) ? v[key] : v);
  const orderKeys = order.map((o) => keyOf(o));
  const ranked = list.map((item, index) => {
    const rank = orderKeys.findIndex((k) => deepEqual(k, keyOf(item)));
    return { item, rank: rank < 0 ? orderKeys.length + index : rank };
  });
  ranked.sort((a, b) => a.rank - b.rank);
  return ranked.map((r) => r.item);
}

function stripDirectives(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripDirectives);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === '$patch' || k === '$retainKeys' || k.startsWith(SET_ORDER) || k.startsWith(DELETE_FROM_PRIMITIVE)) continue;
    out[k] = stripDirectives(v);
  }
  return out;
}
