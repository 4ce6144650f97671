import jsonpatch from 'fast-json-patch';
import { ApiError, Errors } from './errors.js';
import type { FieldPatchMeta } from './schema/patch-meta.js';
import { propertyOf, type Shape } from './schema/schema.js';
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
  if (!Array.isArray(patch))
    throw Errors.badRequest('json: cannot unmarshal object into Go value of type jsonpatch.Patch');
  for (const [i, op] of patch.entries()) {
    if (!isPlainObject(op) || typeof op.op !== 'string')
      throw Errors.badRequest(`invalid JSON patch operation at index ${i}`);
    if (!['add', 'remove', 'replace', 'move', 'copy', 'test'].includes(op.op))
      throw Errors.badRequest(`Unexpected kind: ${op.op}`);
    if (typeof op.path !== 'string') throw Errors.badRequest(`operation at index ${i} is missing path`);
  }
  try {
    return jsonpatch.applyPatch(deepCopy(target), patch as jsonpatch.Operation[], true, true, false).newDocument;
  } catch (err) {
    const name = (err as { name?: string }).name ?? '';
    const message = err instanceof Error ? err.message.split('\n')[0]! : String(err);
    if (name === 'TEST_OPERATION_FAILED')
      throw Errors.unprocessable(
        'the server rejected our request due to an error in our request: testing value failed',
      );
    throw new ApiError(422, 'Invalid', `the server rejected our request due to an error in our request: ${message}`);
  }
}

/**
 * Where the patch is in the object's schema: a named type (fields from its schema), a map (every key has the
 * value type) or nothing known (lists are then replaced whole, as for types without patch metadata).
 */
export interface PatchSchema {
  field(name: string): { shape?: Shape; meta?: FieldPatchMeta };
}

const UNKNOWN: PatchSchema = { field: () => ({}) };

/** The patch schema of a named type (e.g. io.k8s.api.apps.v1.Deployment); unknown names merge without keys. */
export function patchSchemaOf(typeName: string | undefined): PatchSchema {
  if (!typeName) return UNKNOWN;
  return {
    field(name) {
      const p = propertyOf(typeName, name);
      return p ? { shape: p.shape, ...(p.meta ? { meta: p.meta } : {}) } : {};
    },
  };
}

function childSchema(shape: Shape | undefined): PatchSchema {
  if (!shape) return UNKNOWN;
  if (shape.kind === 'ref') return patchSchemaOf(shape.name);
  if (shape.kind === 'map') return { field: () => ({ shape: shape.values }) };
  return UNKNOWN;
}

/** How a list field merges, from its patchStrategy and patchMergeKey: by key, as a set of primitives, or replaced. */
function listMerge(meta: FieldPatchMeta | undefined): string | 'primitive' | undefined {
  if (!meta?.strategy?.split(',').includes('merge')) return undefined;
  return meta.key ?? 'primitive';
}

const SET_ORDER = '$setElementOrder/';
const DELETE_FROM_PRIMITIVE = '$deleteFromPrimitiveList/';

/**
 * Strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch): maps merge, null deletes, lists merge by
 * the patchMergeKey the schema gives their field (src/api/schema/patch-meta.ts), and the `$patch`,
 * `$setElementOrder`, `$retainKeys` and `$deleteFromPrimitiveList` directives are honoured. `typeName` is the
 * schema of the patched object; without it lists are replaced whole.
 */
export function applyStrategicMergePatch(target: unknown, patch: unknown, typeName?: string): unknown {
  if (!isPlainObject(patch)) throw Errors.badRequest('strategic merge patch must be a JSON object');
  return mergeMap(isPlainObject(target) ? target : {}, patch, patchSchemaOf(typeName));
}

function mergeMap(
  target: Record<string, unknown>,
  patch: Record<string, unknown>,
  schema: PatchSchema,
): Record<string, unknown> | undefined {
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
      if (Array.isArray(current) && Array.isArray(value))
        result[field] = current.filter((v) => !value.some((d) => deepEqual(d, v)));
      continue;
    }
    if (value === null) {
      delete result[key];
      continue;
    }
    const current = result[key];
    const { shape, meta } = schema.field(key);
    if (isPlainObject(value)) {
      const merged = mergeMap(isPlainObject(current) ? current : {}, value, childSchema(shape));
      if (merged === undefined) delete result[key];
      else result[key] = merged;
    } else if (Array.isArray(value)) {
      result[key] = mergeList(
        Array.isArray(current) ? current : [],
        value,
        meta,
        childSchema(shape?.kind === 'list' ? shape.items : undefined),
      );
    } else {
      result[key] = value;
    }
  }
  for (const [key, order] of Object.entries(patch)) {
    if (!key.startsWith(SET_ORDER) || !Array.isArray(order)) continue;
    const field = key.slice(SET_ORDER.length);
    const list = result[field];
    if (Array.isArray(list)) result[field] = orderList(list, order, listMerge(schema.field(field).meta));
  }
  if (Array.isArray(retainKeys)) {
    const keep = new Set(retainKeys.map(String));
    result = Object.fromEntries(Object.entries(result).filter(([k]) => keep.has(k)));
  }
  return result;
}

function mergeList(
  current: unknown[],
  patch: unknown[],
  meta: FieldPatchMeta | undefined,
  items: PatchSchema,
): unknown[] {
  const key = listMerge(meta);
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
      const merged = mergeMap(out[index] as Record<string, unknown>, item, items);
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
    if (k === '$patch' || k === '$retainKeys' || k.startsWith(SET_ORDER) || k.startsWith(DELETE_FROM_PRIMITIVE))
      continue;
    out[k] = stripDirectives(v);
  }
  return out;
}
