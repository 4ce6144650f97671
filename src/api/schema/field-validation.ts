import { isPlainObject } from '../types.js';
import { typeInfo, type Shape } from './schema.js';

/**
 * Server-side field validation (the `fieldValidation` query parameter): a built-in kind is decoded into its Go
 * struct, so fields its schema does not declare are dropped — silently (Ignore), with a `Warning` header each
 * (Warn, the server's default) or by failing the request with 400 (Strict, what kubectl sends).
 */
export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

export function parseFieldValidation(value: string | undefined): FieldValidation | undefined {
  if (value === undefined || value === '') return undefined;
  if (value === 'Strict' || value === 'Warn' || value === 'Ignore') return value;
  return undefined;
}

/**
 * Removes the fields the schema of `typeName` does not declare from `obj` (in place) and returns their paths in
 * kube-apiserver's notation (`spec.foo`, `spec.template.spec.containers[0].bar`), in document order.
 */
export function pruneUnknownFields(obj: Record<string, unknown>, typeName: string): string[] {
  const unknown: string[] = [];
  pruneObject(obj, typeName, '', unknown);
  return unknown;
}

function pruneObject(obj: Record<string, unknown>, typeName: string, path: string, unknown: string[]): void {
  const t = typeInfo(typeName);
  if (!t || t.scalar) return;
  for (const key of Object.keys(obj)) {
    const child = path === '' ? key : `${path}.${key}`;
    const prop = t.properties.get(key);
    if (!prop) {
      unknown.push(child);
      delete obj[key];
      continue;
    }
    pruneValue(obj[key], prop.shape, child, unknown);
  }
}

function pruneValue(value: unknown, shape: Shape, path: string, unknown: string[]): void {
  if (value === null || value === undefined) return;
  switch (shape.kind) {
    case 'ref':
      if (isPlainObject(value)) pruneObject(value, shape.name, path, unknown);
      return;
    case 'list':
      if (Array.isArray(value)) value.forEach((item, i) => pruneValue(item, shape.items, `${path}[${i}]`, unknown));
      return;
    case 'map':
      if (isPlainObject(value)) for (const [k, v] of Object.entries(value)) pruneValue(v, shape.values, `${path}.${k}`, unknown);
      return;
    default:
      return;
  }
}

/** The message of a Strict failure, as kube-apiserver words it. */
export function strictDecodingMessage(kind: string, version: string, unknown: readonly string[]): string {
  return `${kind} in version "${version}" cannot be handled as a ${kind}: strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(', ')}`;
}
