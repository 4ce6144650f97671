import { defineSchemaTypes, forgetSchemaTypes, type Shape, type TypeInfo } from '../../api/schema/schema.js';
import type { FieldPatchMeta } from '../../api/schema/patch-meta.js';
import { isPlainObject } from '../../api/types.js';
import type { JSONSchemaProps } from './schema-validation.js';

/**
 * A custom resource version's schema as the named types server-side apply walks (the built-in kinds' come from
 * builtin-schemas.json): objects with properties become types `crd:<group>/<version>/<Kind>.<path>`, and
 * `x-kubernetes-list-type`, `x-kubernetes-list-map-keys` and `x-kubernetes-map-type` their fields' patch meta, so
 * managedFields and apply merge keyed lists, sets and granular maps as structured-merge-diff does for CRDs.
 */
export function crdTypePrefix(group: string, version: string, kind: string): string {
  return `crd:${group}/${version}/${kind}`;
}

/** Defines the types of one version's schema (replacing earlier ones) and answers the root type's name. */
export function defineCrdTypes(group: string, version: string, kind: string, schema: JSONSchemaProps): string {
  const root = crdTypePrefix(group, version, kind);
  forgetCrdTypes(group, version, kind);
  const types: TypeInfo[] = [];
  objectType({ ...schema, type: 'object', properties: schema.properties ?? {} }, root, types);
  defineSchemaTypes(types);
  return root;
}

export function forgetCrdTypes(group: string, version: string, kind: string): void {
  const root = crdTypePrefix(group, version, kind);
  forgetSchemaTypes((name) => name === root || name.startsWith(`${root}.`));
}

function objectType(s: JSONSchemaProps, name: string, out: TypeInfo[]): void {
  const properties = new Map<string, TypeInfo['properties'] extends Map<string, infer P> ? P : never>();
  for (const [key, prop] of Object.entries(s.properties ?? {})) {
    const p: { name: string; shape: Shape; description: string; meta?: FieldPatchMeta } = {
      name: key,
      shape: shapeOf(prop, `${name}.${key}`, out),
      description: prop.description ?? '',
    };
    const meta: FieldPatchMeta = {};
    if (prop['x-kubernetes-list-type']) meta.list = prop['x-kubernetes-list-type'];
    if (prop['x-kubernetes-list-map-keys']) meta.mapKeys = prop['x-kubernetes-list-map-keys'];
    if (prop['x-kubernetes-map-type']) meta.mapType = prop['x-kubernetes-map-type'];
    if (Object.keys(meta).length > 0) p.meta = meta;
    properties.set(key, p);
  }
  // No `required`: that marks Go struct fields that always exist, which custom objects do not have.
  out.push({
    name,
    description: s.description ?? '',
    properties,
    required: [],
    atomic: s['x-kubernetes-map-type'] === 'atomic',
  });
}

function shapeOf(s: JSONSchemaProps, name: string, out: TypeInfo[]): Shape {
  if (s['x-kubernetes-int-or-string']) return { kind: 'scalar', type: 'string' };
  switch (s.type) {
    case 'object':
      if (s.properties) {
        objectType(s, name, out);
        return { kind: 'ref', name };
      }
      if (isPlainObject(s.additionalProperties))
        return { kind: 'map', values: shapeOf(s.additionalProperties, `${name}{}`, out) };
      return { kind: 'any' };
    case 'array':
      return { kind: 'list', items: s.items ? shapeOf(s.items, `${name}[]`, out) : { kind: 'any' } };
    case 'string':
    case 'integer':
    case 'number':
    case 'boolean':
      return { kind: 'scalar', type: s.type };
    default:
      return { kind: 'any' };
  }
}
