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

/**
 * The first value whose JSON type does not fit the schema, worded as the Go JSON decoder kube-apiserver uses
 * words it (`json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32`), or
 * undefined when every value fits. Decoding fails on it whatever fieldValidation says.
 */
export function typeMismatch(obj: Record<string, unknown>, typeName: string): string | undefined {
  return mismatchInObject(obj, typeName, '');
}

function jsonType(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (value === null) return 'null';
  if (typeof value === 'boolean') return 'bool';
  return typeof value === 'object' ? 'object' : typeof value;
}

function goType(shape: Shape): string {
  switch (shape.kind) {
    case 'scalar':
      if (shape.type === 'integer') return shape.format === 'int64' ? 'int64' : 'int32';
      if (shape.type === 'number') return 'float64';
      if (shape.type === 'boolean') return 'bool';
      return shape.format === 'byte' ? '[]uint8' : 'string';
    case 'list':
      return `[]${goType(shape.items)}`;
    case 'map':
      return `map[string]${goType(shape.values)}`;
    case 'ref': {
      const parts = shape.name.split('.');
      return `${parts[parts.length - 2]}.${parts[parts.length - 1]}`;
    }
    default:
      return 'interface {}';
  }
}

function mismatchInObject(obj: Record<string, unknown>, typeName: string, path: string): string | undefined {
  const t = typeInfo(typeName);
  if (!t || t.scalar) return undefined;
  const struct = typeName.split('.').pop()!;
  for (const [key, value] of Object.entries(obj)) {
    const prop = t.properties.get(key);
    if (!prop) continue;
    const child = path === '' ? key : `${path}.${key}`;
    const found = mismatchInValue(value, prop.shape, child, struct);
    if (found) return found;
  }
  return undefined;
}

function mismatchInValue(value: unknown, shape: Shape, path: string, struct: string): string | undefined {
  if (value === null || value === undefined) return undefined;
  const wrong = (): string => `json: cannot unmarshal ${jsonType(value)} into Go struct field ${struct}.${path} of type ${goType(shape)}`;
  switch (shape.kind) {
    case 'scalar':
      if (shape.type === 'integer') return typeof value === 'number' && Number.isInteger(value) ? undefined : wrong();
      if (shape.type === 'number') return typeof value === 'number' ? undefined : wrong();
      if (shape.type === 'boolean') return typeof value === 'boolean' ? undefined : wrong();
      return typeof value === 'string' ? undefined : wrong();
    case 'list':
      if (!Array.isArray(value)) return wrong();
      for (const item of value) {
        const found = mismatchInValue(item, shape.items, path, struct);
        if (found) return found;
      }
      return undefined;
    case 'map':
      if (!isPlainObject(value)) return wrong();
      for (const v of Object.values(value)) {
        const found = mismatchInValue(v, shape.values, path, struct);
        if (found) return found;
      }
      return undefined;
    case 'ref': {
      const t = typeInfo(shape.name);
      if (!t) return undefined;
      if (t.scalar === 'quantity' || t.scalar === 'int-or-string') return typeof value === 'string' || typeof value === 'number' ? undefined : wrong();
      if (t.scalar === 'date-time') return typeof value === 'string' ? undefined : wrong();
      if (t.scalar) return undefined;
      if (!isPlainObject(value)) return wrong();
      return mismatchInObject(value, shape.name, path);
    }
    default:
      return undefined;
  }
}
