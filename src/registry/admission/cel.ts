import { isPlainObject } from '../../api/types.js';
import { loadCel } from '../crd/cel.js';

/**
 * CEL for admission (webhook matchConditions, ValidatingAdmissionPolicy validations, variables, messages and audit
 * annotations), on the library CRD validation rules use. Objects are bound as Kubernetes' CEL sees them: whole JSON
 * numbers are CEL ints (int64 fields), so `object.spec.replicas * 2` and `string(object.spec.replicas)` behave as
 * in kube-apiserver.
 */
export type Bindings = Record<string, unknown>;

export type EvalResult = { value: unknown } | { error: string };

export interface AdmissionProgram {
  readonly expression: string;
  run(bindings: Bindings): EvalResult;
}

const programs = new Map<string, AdmissionProgram | string>();

/** The compiled expression, or why it does not compile (cel-go's `compilation failed: …` text follows it). */
export function compileExpression(expression: string): AdmissionProgram | string {
  let program = programs.get(expression);
  if (program === undefined) {
    try {
      const { lib, env } = loadCel();
      const planned = lib.plan(env, lib.parse(expression));
      program = {
        expression,
        run(bindings) {
          let result: unknown;
          try {
            result = planned(bindings as never);
          } catch (err) {
            return { error: celMessage(err instanceof Error ? err.message : String(err)) };
          }
          if (lib.isCelError(result)) return { error: celMessage(result.message) };
          return { value: fromCel(result) };
        },
      };
    } catch (err) {
      program = `ERROR: ${err instanceof Error ? err.message : String(err)}`;
    }
    programs.set(expression, program);
  }
  return program;
}

/** cel-go's words for the errors cel-es words otherwise. */
function celMessage(message: string): string {
  const missing = /^field not found: (.*)$/.exec(message);
  if (missing) return `no such key: ${missing[1]}`;
  return message.replace(/^found no matching overload for/, 'no matching overload for');
}

const converted = new WeakMap<object, unknown>();

/** A JSON value as CEL input: whole numbers as ints (bigint), the rest as they are. Objects are converted once. */
export function toCel(value: unknown): unknown {
  if (typeof value === 'number') return Number.isInteger(value) ? BigInt(value) : value;
  if (value === null || typeof value !== 'object') return value;
  const known = converted.get(value);
  if (known !== undefined) return known;
  let out: unknown;
  if (Array.isArray(value)) out = value.map(toCel);
  else {
    const record: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) record[k] = toCel(v);
    out = record;
  }
  converted.set(value, out);
  return out;
}

/** A CEL result as JSON: ints as numbers, lists and maps as arrays and objects. */
export function fromCel(value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value);
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(fromCel);
  const { lib } = loadCel();
  if (lib.isCelList(value)) {
    const out: unknown[] = [];
    for (let i = 0; i < value.size; i++) out.push(fromCel(value.get(i)));
    return out;
  }
  if (lib.isCelMap(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of value.entries()) out[String(k)] = fromCel(v);
    return out;
  }
  if (lib.isCelUint(value)) return Number(value.value);
  if (isPlainObject(value)) return value;
  return value;
}

/** The type name cel-go reports for a value (for "must evaluate to bool" and audit annotation errors). */
export function celTypeName(value: unknown): string {
  if (value === null || value === undefined) return 'null_type';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'double';
  if (Array.isArray(value)) return 'list';
  return 'map';
}
