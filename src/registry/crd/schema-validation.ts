import type { StatusCause } from '../../api/errors.js';
import { FieldErrors } from '../../api/errors.js';
import { deepCopy, deepEqual, isPlainObject } from '../../api/types.js';

/**
 * A CRD version's structural OpenAPI v3 schema (apiextensions.k8s.io/v1 JSONSchemaProps), as far as the
 * simulator reads it: pruning, defaulting and validation of custom objects with kube-apiserver's field paths
 * and messages (k8s.io/apiextensions-apiserver/pkg/apiserver/validation).
 */
export interface JSONSchemaProps {
  type?: string;
  description?: string;
  format?: string;
  properties?: Record<string, JSONSchemaProps>;
  required?: string[];
  items?: JSONSchemaProps;
  additionalProperties?: boolean | JSONSchemaProps;
  enum?: unknown[];
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  maxProperties?: number;
  nullable?: boolean;
  default?: unknown;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-map-type'?: 'atomic' | 'granular';
  'x-kubernetes-validations'?: Array<{
    rule: string;
    message?: string;
    messageExpression?: string;
    fieldPath?: string;
    reason?: string;
  }>;
}

/** Fields every object keeps whatever its schema says (metadata is ObjectMeta, validated elsewhere). */
const ROOT_FIELDS = new Set(['apiVersion', 'kind', 'metadata']);

const join = (path: string, name: string): string => (path ? `${path}.${name}` : name);

/**
 * Removes fields the schema does not declare (structural pruning) and returns their paths, as
 * `fieldValidation=Strict|Warn` reports them (`spec.foo`, `spec.items[0].bar`).
 */
export function prune(obj: Record<string, unknown>, schema: JSONSchemaProps): string[] {
  const removed: string[] = [];
  pruneObject(obj, schema, '', removed, true);
  return removed;
}

function pruneValue(value: unknown, schema: JSONSchemaProps | undefined, path: string, removed: string[]): void {
  if (!schema) return;
  if (Array.isArray(value)) {
    if (schema.items) value.forEach((item, i) => pruneValue(item, schema.items, `${path}[${i}]`, removed));
    return;
  }
  if (isPlainObject(value)) pruneObject(value, schema, path, removed, false);
}

function pruneObject(
  obj: Record<string, unknown>,
  schema: JSONSchemaProps,
  path: string,
  removed: string[],
  root: boolean,
): void {
  const preserve = schema['x-kubernetes-preserve-unknown-fields'] === true;
  const embedded = schema['x-kubernetes-embedded-resource'] === true;
  const additional = schema.additionalProperties;
  for (const key of Object.keys(obj)) {
    if ((root || embedded) && ROOT_FIELDS.has(key)) continue;
    const prop = schema.properties?.[key];
    if (prop) pruneValue(obj[key], prop, join(path, key), removed);
    else if (isPlainObject(additional)) pruneValue(obj[key], additional, join(path, key), removed);
    else if (additional === true || preserve) continue;
    else {
      delete obj[key];
      removed.push(join(path, key));
    }
  }
}

/** Applies `default`s where a field is absent (and where it is null but not nullable), depth first. */
export function applyDefaults(value: unknown, schema: JSONSchemaProps | undefined): void {
  if (!schema) return;
  if (Array.isArray(value)) {
    if (schema.items) for (const item of value) applyDefaults(item, schema.items);
    return;
  }
  if (!isPlainObject(value)) return;
  for (const [key, prop] of Object.entries(schema.properties ?? {})) {
    if (prop.default !== undefined && (!(key in value) || (value[key] === null && !prop.nullable)))
      value[key] = deepCopy(prop.default);
    applyDefaults(value[key], prop);
  }
  if (isPlainObject(schema.additionalProperties))
    for (const key of Object.keys(value)) applyDefaults(value[key], schema.additionalProperties);
}

/** Whether any node of the schema has a default (most have none: reads then skip defaulting). */
export function hasDefaults(schema: JSONSchemaProps | undefined): boolean {
  if (!schema) return false;
  if (Object.values(schema.properties ?? {}).some((p) => p.default !== undefined || hasDefaults(p))) return true;
  if (isPlainObject(schema.additionalProperties) && hasDefaults(schema.additionalProperties)) return true;
  return hasDefaults(schema.items);
}

/** The type name kube-openapi's validator reports for a value (`must be of type integer: "string"`). */
function typeOf(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  if (typeof value === 'object') return 'object';
  return typeof value;
}

function typeMatches(value: unknown, schema: JSONSchemaProps): boolean {
  if (schema['x-kubernetes-int-or-string'])
    return typeof value === 'string' || (typeof value === 'number' && Number.isInteger(value));
  switch (schema.type) {
    case undefined:
    case '':
      return true;
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'string':
      return typeof value === 'string';
    case 'boolean':
      return typeof value === 'boolean';
    case 'array':
      return Array.isArray(value);
    case 'object':
      return isPlainObject(value);
    default:
      return true;
  }
}

const tooMany = (field: string, actual: number, max: number, unit: string): StatusCause => ({
  reason: 'FieldValueTooMany',
  message: `Too many: ${actual}: must have at most ${max} ${unit}`,
  field,
});

/**
 * Validates a custom object against its version's schema: one StatusCause per violation, with the field path
 * and kube-apiserver's wording (`spec.replicas: Invalid value: 11: spec.replicas in body should be less than or
 * equal to 10`). The object's apiVersion, kind and metadata are not checked here.
 */
export function validateSchema(obj: Record<string, unknown>, schema: JSONSchemaProps): StatusCause[] {
  const causes: StatusCause[] = [];
  const rootSchema: JSONSchemaProps = { ...schema, properties: { ...schema.properties } };
  for (const f of ROOT_FIELDS) delete rootSchema.properties![f];
  rootSchema.required = (schema.required ?? []).filter((r) => !ROOT_FIELDS.has(r));
  validateValue(obj, rootSchema, '', causes);
  return causes;
}

function validateValue(value: unknown, schema: JSONSchemaProps, path: string, causes: StatusCause[]): void {
  const where = path || '<root>';
  if (value === null) {
    if (schema.nullable) return;
    if (schema.type || schema['x-kubernetes-int-or-string']) {
      causes.push(
        FieldErrors.invalid(
          where,
          'null',
          `${where} in body must be of type ${schema['x-kubernetes-int-or-string'] ? 'integer,string' : schema.type}: "null"`,
        ),
      );
    }
    return;
  }
  if (!typeMatches(value, schema)) {
    const expected = schema['x-kubernetes-int-or-string'] ? 'integer,string' : schema.type!;
    causes.push(
      FieldErrors.invalid(where, typeOf(value), `${where} in body must be of type ${expected}: "${typeOf(value)}"`),
    );
    return;
  }
  if (schema.enum && !schema.enum.some((e) => deepEqual(e, value))) {
    causes.push(
      FieldErrors.notSupported(
        where,
        value,
        schema.enum.map((e) => (typeof e === 'string' ? e : JSON.stringify(e))),
      ),
    );
  }
  if (typeof value === 'number') validateNumber(value, schema, where, causes);
  else if (typeof value === 'string') validateString(value, schema, where, causes);
  else if (Array.isArray(value)) validateArray(value, schema, path, causes);
  else if (isPlainObject(value)) validateObject(value, schema, path, causes);
}

function validateNumber(value: number, schema: JSONSchemaProps, where: string, causes: StatusCause[]): void {
  if (schema.maximum !== undefined) {
    if (schema.exclusiveMaximum ? value >= schema.maximum : value > schema.maximum) {
      causes.push(
        FieldErrors.invalid(
          where,
          value,
          `${where} in body should be less than ${schema.exclusiveMaximum ? '' : 'or equal to '}${schema.maximum}`,
        ),
      );
    }
  }
  if (schema.minimum !== undefined) {
    if (schema.exclusiveMinimum ? value <= schema.minimum : value < schema.minimum) {
      causes.push(
        FieldErrors.invalid(
          where,
          value,
          `${where} in body should be greater than ${schema.exclusiveMinimum ? '' : 'or equal to '}${schema.minimum}`,
        ),
      );
    }
  }
  if (schema.multipleOf !== undefined && schema.multipleOf !== 0 && !Number.isInteger(value / schema.multipleOf)) {
    causes.push(FieldErrors.invalid(where, value, `${where} in body should be a multiple of ${schema.multipleOf}`));
  }
}

function validateString(value: string, schema: JSONSchemaProps, where: string, causes: StatusCause[]): void {
  const length = [...value].length;
  if (schema.maxLength !== undefined && length > schema.maxLength) {
    causes.push({
      reason: 'FieldValueTooLong',
      message: `Too long: may not be more than ${schema.maxLength} bytes`,
      field: where,
    });
  }
  if (schema.minLength !== undefined && length < schema.minLength) {
    causes.push(
      FieldErrors.invalid(where, value, `${where} in body should be at least ${schema.minLength} chars long`),
    );
  }
  if (schema.pattern !== undefined) {
    let re: RegExp | undefined;
    try {
      re = new RegExp(schema.pattern, 'u');
    } catch {
      re = undefined;
    }
    if (re && !re.test(value))
      causes.push(FieldErrors.invalid(where, value, `${where} in body should match '${schema.pattern}'`));
  }
}

function validateArray(value: unknown[], schema: JSONSchemaProps, path: string, causes: StatusCause[]): void {
  const where = path || '<root>';
  if (schema.maxItems !== undefined && value.length > schema.maxItems)
    causes.push(tooMany(where, value.length, schema.maxItems, 'items'));
  if (schema.minItems !== undefined && value.length < schema.minItems) {
    causes.push(
      FieldErrors.invalid(where, value.length, `${where} in body should have at least ${schema.minItems} items`),
    );
  }
  const listType = schema['x-kubernetes-list-type'];
  if (listType === 'set') {
    value.forEach((item, i) => {
      if (value.findIndex((other) => deepEqual(other, item)) < i)
        causes.push(FieldErrors.duplicate(`${where}[${i}]`, item));
    });
  } else if (listType === 'map') {
    const keys = schema['x-kubernetes-list-map-keys'] ?? [];
    const seen = new Set<string>();
    value.forEach((item, i) => {
      if (!isPlainObject(item)) return;
      const key = Object.fromEntries(keys.map((k) => [k, item[k]]));
      const id = JSON.stringify(keys.map((k) => item[k]));
      if (seen.has(id)) causes.push(FieldErrors.duplicate(`${where}[${i}]`, key));
      seen.add(id);
    });
  }
  if (schema.items) value.forEach((item, i) => validateValue(item, schema.items!, `${where}[${i}]`, causes));
}

function validateObject(
  value: Record<string, unknown>,
  schema: JSONSchemaProps,
  path: string,
  causes: StatusCause[],
): void {
  const where = path || '<root>';
  const count = Object.keys(value).length;
  if (schema.maxProperties !== undefined && count > schema.maxProperties)
    causes.push(tooMany(where, count, schema.maxProperties, 'properties'));
  if (schema.minProperties !== undefined && count < schema.minProperties) {
    causes.push(
      FieldErrors.invalid(where, count, `${where} in body should have at least ${schema.minProperties} properties`),
    );
  }
  for (const r of schema.required ?? []) {
    if (!(r in value)) causes.push(FieldErrors.required(join(path, r), ''));
  }
  for (const [key, child] of Object.entries(value)) {
    const prop = schema.properties?.[key];
    if (prop) validateValue(child, prop, join(path, key), causes);
    else if (isPlainObject(schema.additionalProperties))
      validateValue(child, schema.additionalProperties, join(path, key), causes);
  }
}

/**
 * Structural-schema checks kube-apiserver makes on a CRD version's schema (the common mistakes): a type at the
 * root and on every specified field, and `items` for arrays.
 */
export function validateStructural(schema: JSONSchemaProps, path: string): StatusCause[] {
  const causes: StatusCause[] = [];
  if (!schema.type) causes.push(FieldErrors.required(`${path}.type`, 'must not be empty at the root'));
  else if (schema.type !== 'object')
    causes.push(FieldErrors.invalid(`${path}.type`, schema.type, 'must be object at the root'));
  const walk = (s: JSONSchemaProps, p: string): void => {
    for (const [name, prop] of Object.entries(s.properties ?? {})) {
      const at = `${p}.properties[${name}]`;
      if (!prop.type && !prop['x-kubernetes-int-or-string'] && !prop['x-kubernetes-preserve-unknown-fields']) {
        causes.push(FieldErrors.required(`${at}.type`, 'must not be empty for specified object fields'));
      }
      if (prop.type === 'array' && !prop.items) causes.push(FieldErrors.required(`${at}.items`, 'must be specified'));
      walk(prop, at);
      if (prop.items) walk(prop.items, `${at}.items`);
    }
  };
  walk(schema, path);
  return causes;
}
