import { isPlainObject } from '../types.js';
import { typeInfo, type Shape, type TypeInfo } from './schema.js';

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

/** What one walk of a decoded object against its type's schema finds. */
export interface FieldCheck {
  /** Undeclared fields, removed from the object, in kube-apiserver's notation (`spec.foo`, `spec.containers[0].bar`), in document order. */
  unknown: string[];
  /** The first value whose JSON type does not fit the schema, worded as the Go JSON decoder words it. */
  mismatch: string | undefined;
}

/**
 * Field validation of a decoded object in one walk: removes (in place) the fields the schema of `typeName` does not
 * declare, and finds the first value whose JSON type does not fit (`json: cannot unmarshal string into Go struct
 * field DeploymentSpec.spec.replicas of type int32`), on which decoding fails whatever fieldValidation says.
 * Paths are only spelt out for what is reported.
 */
export function validateFields(obj: Record<string, unknown>, typeName: string): FieldCheck {
  const walk = new FieldWalk(true);
  const t = typeInfo(typeName);
  if (t && !t.scalar) walk.object(obj, t);
  return { unknown: walk.unknown, mismatch: walk.mismatch };
}

/** Removes the fields the schema of `typeName` does not declare from `obj` (in place) and returns their paths. */
export function pruneUnknownFields(obj: Record<string, unknown>, typeName: string): string[] {
  return validateFields(obj, typeName).unknown;
}

/** The first value whose JSON type does not fit the schema (the object is left as it is), or undefined. */
export function typeMismatch(obj: Record<string, unknown>, typeName: string): string | undefined {
  const walk = new FieldWalk(false);
  const t = typeInfo(typeName);
  if (t && !t.scalar) walk.object(obj, t);
  return walk.mismatch;
}

/** Where a FieldWalk is: a struct field, a map key or a list index. */
enum Step {
  Field,
  MapKey,
  Index,
}

class FieldWalk {
  readonly unknown: string[] = [];
  mismatch: string | undefined;
  private readonly names: Array<string | number> = [];
  private readonly steps: Step[] = [];

  constructor(private readonly prune: boolean) {}

  object(obj: Record<string, unknown>, t: TypeInfo): void {
    for (const key of Object.keys(obj)) {
      const prop = t.properties.get(key);
      if (!prop) {
        if (this.prune) {
          this.unknown.push(this.prunedPath(key));
          delete obj[key];
        }
        continue;
      }
      // Decoded into the Go struct, a null field is its zero value, serialised as Go serialises it: nothing for an
      // optional (omitempty) field, the zero scalar or null (a nil slice or map) for a required one; a zero metav1.Time
      // comes back as null either way.
      if (this.prune && obj[key] === null && !keepsNull(prop.shape)) {
        const zero = t.required.includes(key) ? zeroValue(prop.shape) : undefined;
        if (zero === undefined) delete obj[key];
        else obj[key] = zero;
        continue;
      }
      this.enter(key, Step.Field);
      this.value(obj[key], prop.shape, t);
      this.leave();
    }
  }

  /** `owner`: the struct whose field holds the value, which the Go decoder names in a mismatch. */
  private value(value: unknown, shape: Shape, owner: TypeInfo): void {
    if (value === null || value === undefined) return;
    switch (shape.kind) {
      case 'scalar':
        if (!scalarFits(value, shape)) this.wrong(value, shape, owner);
        return;
      case 'list':
        if (!Array.isArray(value)) return this.wrong(value, shape, owner);
        for (let i = 0; i < value.length; i++) {
          if (this.prune && value[i] === null) value[i] = zeroValue(shape.items);
          this.enter(i, Step.Index);
          this.value(value[i], shape.items, owner);
          this.leave();
        }
        return;
      case 'map':
        if (!isPlainObject(value)) return this.wrong(value, shape, owner);
        for (const key of Object.keys(value)) {
          if (this.prune && value[key] === null) value[key] = zeroValue(shape.values);
          this.enter(key, Step.MapKey);
          this.value(value[key], shape.values, owner);
          this.leave();
        }
        return;
      case 'ref': {
        const t = typeInfo(shape.name);
        if (!t) return;
        if (t.scalar === 'quantity' || t.scalar === 'int-or-string') {
          if (typeof value !== 'string' && typeof value !== 'number') this.wrong(value, shape, owner);
          return;
        }
        if (t.scalar === 'date-time') {
          if (typeof value !== 'string') this.wrong(value, shape, owner);
          return;
        }
        if (t.scalar) return;
        if (!isPlainObject(value)) return this.wrong(value, shape, owner);
        this.object(value, t);
        return;
      }
      default:
        return;
    }
  }

  private enter(name: string | number, step: Step): void {
    this.names.push(name);
    this.steps.push(step);
  }

  private leave(): void {
    this.names.pop();
    this.steps.pop();
  }

  /** kube-apiserver's path of an unknown field: fields and map keys joined by dots, list indices in brackets. */
  private prunedPath(last: string): string {
    let path = '';
    for (let i = 0; i < this.names.length; i++) {
      const name = this.names[i]!;
      path += this.steps[i] === Step.Index ? `[${name}]` : path === '' ? String(name) : `.${name}`;
    }
    return path === '' ? last : `${path}.${last}`;
  }

  private wrong(value: unknown, shape: Shape, owner: TypeInfo): void {
    if (this.mismatch !== undefined) return;
    // The Go decoder's path has the struct fields only (no map keys or list indices).
    const fields = this.names.filter((_, i) => this.steps[i] === Step.Field).join('.');
    const struct = owner.name.slice(owner.name.lastIndexOf('.') + 1);
    this.mismatch = `json: cannot unmarshal ${jsonType(value)} into Go struct field ${struct}.${fields} of type ${goType(shape)}`;
  }
}

/** Fields whose null survives Go's decoding: metav1.Time's zero value marshals as null; raw JSON keeps what it got. */
function keepsNull(shape: Shape): boolean {
  if (shape.kind === 'any') return true;
  if (shape.kind !== 'ref') return false;
  const t = typeInfo(shape.name);
  return t?.scalar === 'date-time' || t?.scalar === 'object';
}

/** The JSON of a Go zero value: "" for strings, 0, false, {} for structs, null for a nil slice or map. */
function zeroValue(shape: Shape): unknown {
  if (shape.kind === 'scalar') return shape.type === 'string' ? '' : shape.type === 'boolean' ? false : 0;
  if (shape.kind === 'ref') {
    const t = typeInfo(shape.name);
    if (!t?.scalar) return {};
    if (t.scalar === 'quantity') return '0';
    if (t.scalar === 'int-or-string') return 0;
  }
  return null;
}

function scalarFits(value: unknown, shape: Shape & { kind: 'scalar' }): boolean {
  if (shape.type === 'integer') return typeof value === 'number' && Number.isInteger(value);
  if (shape.type === 'number') return typeof value === 'number';
  if (shape.type === 'boolean') return typeof value === 'boolean';
  return typeof value === 'string';
}

/** The message of a Strict failure, as kube-apiserver words it. */
export function strictDecodingMessage(kind: string, version: string, unknown: readonly string[]): string {
  return `${kind} in version "${version}" cannot be handled as a ${kind}: strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(', ')}`;
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
