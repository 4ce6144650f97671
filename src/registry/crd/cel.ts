import { createRequire } from 'node:module';
import type { StatusCause } from '../../api/errors.js';
import { FieldErrors } from '../../api/errors.js';
import { isPlainObject } from '../../api/types.js';
import type { JSONSchemaProps } from './schema-validation.js';

/**
 * CEL validation rules (`x-kubernetes-validations`) of a CRD's schema, evaluated with @bufbuild/cel: `self` is the
 * value at the rule's node, `oldSelf` the stored one on updates. Rules that mention `oldSelf` are transition rules
 * and run only on updates where the old value exists (as kube-apiserver runs them without optionalOldSelf).
 *
 * What kube-apiserver has beyond this: the Kubernetes CEL libraries (lists, regex `find`, url, quantity, ip/cidr,
 * `format`), type-checking of rules against the schema at CRD creation, cost limits, `optionalOldSelf`, and the
 * typed int/uint distinction (numbers here are JSON numbers).
 */
type Rule = NonNullable<JSONSchemaProps['x-kubernetes-validations']>[number];
type Program = (bindings: Record<string, unknown>) => unknown;

type Cel = typeof import('@bufbuild/cel');

let cel: { lib: Cel; env: ReturnType<Cel['celEnv']> } | undefined;

/**
 * @bufbuild/cel, loaded when a rule is first compiled: every `sim serve` start would pay for loading it although
 * most clusters have no CRD with rules. Its CommonJS build can be required synchronously,
 * as validation is.
 */
export function loadCel(): NonNullable<typeof cel> {
  if (!cel) {
    const lib = createRequire(import.meta.url)('@bufbuild/cel') as Cel;
    cel = { lib, env: lib.celEnv() };
  }
  return cel;
}

const programs = new Map<string, Program | Error>();

function compile(expr: string): Program | Error {
  let program = programs.get(expr);
  if (!program) {
    try {
      const { lib, env } = loadCel();
      const planned = lib.plan(env, lib.parse(expr));
      program = (bindings) => planned(bindings as never);
    } catch (err) {
      program = err instanceof Error ? err : new Error(String(err));
    }
    programs.set(expr, program);
  }
  return program;
}

/** Why a rule does not compile, or undefined (for validating the CRD). */
export function compileError(expr: string): string | undefined {
  const program = compile(expr);
  return program instanceof Error ? program.message : undefined;
}

const isTransition = (rule: Rule): boolean => /\boldSelf\b/.test(rule.rule);

function typeName(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (isPlainObject(value)) return 'object';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

/**
 * Evaluates the rules of the whole object: without `old`, the rules that do not mention oldSelf; with `old` (the
 * stored object, on updates), the transition rules — so an update runs each rule once.
 */
export function validateRules(obj: unknown, schema: JSONSchemaProps, old?: unknown): StatusCause[] {
  const causes: StatusCause[] = [];
  walk(obj, schema, '', old, old !== undefined, causes);
  return causes;
}

/** Rules that do not compile, for the CRD's validation. */
export function validateRuleSyntax(schema: JSONSchemaProps, path: string): StatusCause[] {
  const causes: StatusCause[] = [];
  const visit = (s: JSONSchemaProps, p: string): void => {
    (s['x-kubernetes-validations'] ?? []).forEach((rule, i) => {
      const error = typeof rule.rule === 'string' ? compileError(rule.rule) : 'rule must be a string';
      if (error)
        causes.push(
          FieldErrors.invalid(`${p}.x-kubernetes-validations[${i}].rule`, rule.rule, `compilation failed: ${error}`),
        );
    });
    for (const [name, prop] of Object.entries(s.properties ?? {})) visit(prop, `${p}.properties[${name}]`);
    if (isPlainObject(s.additionalProperties)) visit(s.additionalProperties, `${p}.additionalProperties`);
    if (s.items) visit(s.items, `${p}.items`);
  };
  visit(schema, path);
  return causes;
}

/** Whether a schema has any rule (most have none: no walk then). */
export function hasRules(schema: JSONSchemaProps | undefined): boolean {
  if (!schema) return false;
  if (schema['x-kubernetes-validations']?.length) return true;
  if (Object.values(schema.properties ?? {}).some(hasRules)) return true;
  if (isPlainObject(schema.additionalProperties) && hasRules(schema.additionalProperties)) return true;
  return hasRules(schema.items);
}

function walk(
  value: unknown,
  schema: JSONSchemaProps,
  path: string,
  old: unknown,
  update: boolean,
  causes: StatusCause[],
): void {
  if (value === undefined || value === null) return;
  for (const rule of schema['x-kubernetes-validations'] ?? []) {
    if (isTransition(rule) !== update || (update && (old === undefined || old === null))) continue;
    const where = `${path}${rule.fieldPath ?? ''}`.replace(/^\./, '') || '<nil>';
    const program = compile(rule.rule);
    if (program instanceof Error) {
      causes.push(FieldErrors.invalid(where, typeName(value), `compilation failed: ${program.message}`));
      continue;
    }
    let result: unknown;
    try {
      result = program({ self: value, oldSelf: old });
    } catch (err) {
      result = err;
    }
    if (result === true) continue;
    if (result !== false) {
      const why = loadCel().lib.isCelError(result)
        ? result.message
        : result instanceof Error
          ? result.message
          : `rule did not evaluate to a bool: ${String(result)}`;
      causes.push(FieldErrors.invalid(where, typeName(value), `rule evaluation error: ${why}`));
      continue;
    }
    causes.push(FieldErrors.invalid(where, typeName(value), message(rule, value, old)));
  }
  if (Array.isArray(value)) {
    if (!schema.items) return;
    const keys = schema['x-kubernetes-list-type'] === 'map' ? (schema['x-kubernetes-list-map-keys'] ?? []) : undefined;
    const oldItems = Array.isArray(old) ? old : [];
    value.forEach((item, i) => {
      // Items are correlated with their old selves only in keyed lists (as in Kubernetes).
      const previous =
        keys && isPlainObject(item)
          ? oldItems.find((o) => isPlainObject(o) && keys.every((k) => o[k] === item[k]))
          : undefined;
      walk(item, schema.items!, `${path}[${i}]`, previous, update, causes);
    });
    return;
  }
  if (!isPlainObject(value)) return;
  const oldObj = isPlainObject(old) ? old : {};
  for (const [key, child] of Object.entries(value)) {
    const prop =
      schema.properties?.[key] ??
      (isPlainObject(schema.additionalProperties) ? schema.additionalProperties : undefined);
    if (prop) walk(child, prop, path ? `${path}.${key}` : key, oldObj[key], update, causes);
  }
}

function message(rule: Rule, self: unknown, oldSelf: unknown): string {
  if (rule.messageExpression) {
    const program = compile(rule.messageExpression);
    if (!(program instanceof Error)) {
      try {
        const text = program({ self, oldSelf });
        if (typeof text === 'string' && text.trim() !== '') return text;
      } catch {
        // fall back to the message
      }
    }
  }
  return rule.message ?? `failed rule: ${rule.rule}`;
}
