import { Errors } from './errors.js';
import { isPlainObject } from './types.js';
import { checkLabelValue, checkQualifiedName } from './validation.js';

/** Label selectors (k8s.io/apimachinery/pkg/labels): the string syntax and the LabelSelector object, as one type. */
export type Operator = 'in' | 'notin' | 'exists' | '!' | 'gt' | 'lt';

export interface Requirement {
  key: string;
  operator: Operator;
  values: string[];
}

export type Labels = Readonly<Record<string, string>> | undefined;

export class LabelSelector {
  constructor(readonly requirements: readonly Requirement[]) {}

  static everything(): LabelSelector {
    return new LabelSelector([]);
  }

  /** A selector that matches nothing (a nil LabelSelector in a workload spec). */
  static nothing(): LabelSelector {
    return new LabelSelector([{ key: '', operator: 'in', values: [] }]);
  }

  get empty(): boolean {
    return this.requirements.length === 0;
  }

  matches(labels: Labels): boolean {
    for (const r of this.requirements) if (!requirementMatches(r, labels)) return false;
    return true;
  }

  /** key=value pairs every match must carry: used to look candidates up in a label index. */
  equalities(): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    for (const r of this.requirements)
      if (r.operator === 'in' && r.values.length === 1) out.push([r.key, r.values[0]!]);
    return out;
  }

  toString(): string {
    return this.requirements
      .map((r) => {
        switch (r.operator) {
          case 'in':
            return r.values.length === 1 ? `${r.key}=${r.values[0]}` : `${r.key} in (${r.values.join(',')})`;
          case 'notin':
            return r.values.length === 1 ? `${r.key}!=${r.values[0]}` : `${r.key} notin (${r.values.join(',')})`;
          case 'exists':
            return r.key;
          case '!':
            return `!${r.key}`;
          case 'gt':
            return `${r.key}>${r.values[0]}`;
          case 'lt':
            return `${r.key}<${r.values[0]}`;
        }
      })
      .join(',');
  }
}

function requirementMatches(r: Requirement, labels: Labels): boolean {
  const has = labels !== undefined && Object.hasOwn(labels, r.key);
  const value = has ? labels![r.key]! : undefined;
  switch (r.operator) {
    case 'in':
      return has && r.values.includes(value!);
    case 'notin':
      return !has || !r.values.includes(value!);
    case 'exists':
      return has;
    case '!':
      return !has;
    case 'gt':
    case 'lt': {
      if (!has) return false;
      const n = Number(value);
      const bound = Number(r.values[0]);
      if (!Number.isInteger(n)) return false;
      return r.operator === 'gt' ? n > bound : n < bound;
    }
  }
}

function invalidRequirement(_key: string, problem: string): never {
  throw Errors.badRequest(`unable to parse requirement: ${problem}`);
}

function checkKey(key: string): void {
  const problems = checkQualifiedName(key);
  if (problems.length > 0) invalidRequirement(key, `key: Invalid value: "${key}": ${problems.join('; ')}`);
}

function checkValue(key: string, value: string, index: number): void {
  const problems = checkLabelValue(value);
  if (problems.length > 0)
    invalidRequirement(key, `values[${index}][${key}]: Invalid value: "${value}": ${problems.join('; ')}`);
}

/** Parses the string syntax: `a=b,c!=d,e in (f,g),h notin (i),j,!k,l>3`. Throws a 400 ApiError when malformed. */
export function parseLabelSelector(text: string | undefined): LabelSelector {
  if (text === undefined) return LabelSelector.everything();
  const source = text.trim();
  if (source === '') return LabelSelector.everything();
  const requirements: Requirement[] = [];
  let pos = 0;
  const skipSpace = (): void => {
    while (pos < source.length && /\s/.test(source[pos]!)) pos++;
  };
  const readIdentifier = (): string => {
    skipSpace();
    const start = pos;
    while (pos < source.length && !/[\s,=!()<>]/.test(source[pos]!)) pos++;
    return source.slice(start, pos);
  };
  const fail = (expected: string): never => {
    const found = pos < source.length ? source.slice(pos).split(/[\s,]/)[0] || source[pos]! : '';
    throw Errors.badRequest(`unable to parse requirement: found '${found}', expected: ${expected}`);
  };
  for (;;) {
    skipSpace();
    if (source[pos] === '!') {
      pos++;
      const key = readIdentifier();
      if (!key) fail("identifier after '!'");
      checkKey(key);
      requirements.push({ key, operator: '!', values: [] });
    } else {
      const key = readIdentifier();
      if (!key) fail('identifier');
      checkKey(key);
      skipSpace();
      const rest = source.slice(pos);
      let operator: Operator | undefined;
      let values: string[] = [];
      if (rest.startsWith('==') || rest.startsWith('=') || rest.startsWith('!=')) {
        const op = rest.startsWith('==') ? '==' : rest.startsWith('!=') ? '!=' : '=';
        pos += op.length;
        skipSpace();
        const start = pos;
        while (pos < source.length && !/[\s,]/.test(source[pos]!)) pos++;
        const value = source.slice(start, pos);
        if (/[=!()<>]/.test(value)) fail('identifier');
        operator = op === '!=' ? 'notin' : 'in';
        values = [value];
      } else if (rest.startsWith('>') || rest.startsWith('<')) {
        operator = rest[0] === '>' ? 'gt' : 'lt';
        pos++;
        const value = readIdentifier();
        if (!/^-?\d+$/.test(value)) invalidRequirement(key, `for 'Gt', 'Lt' operators, the value must be an integer`);
        values = [value];
      } else if (/^(in|notin)\s*\(/.test(rest)) {
        operator = rest.startsWith('in') ? 'in' : 'notin';
        pos += operator.length;
        skipSpace();
        pos++; // '('
        for (;;) {
          skipSpace();
          const start = pos;
          while (pos < source.length && !/[\s,()]/.test(source[pos]!)) pos++;
          const value = source.slice(start, pos);
          values.push(value);
          skipSpace();
          if (source[pos] === ',') {
            pos++;
            continue;
          }
          if (source[pos] === ')') {
            pos++;
            break;
          }
          fail("',' or ')'");
        }
        if (values.length === 0 || (values.length === 1 && values[0] === '')) {
          invalidRequirement(key, `for 'in', 'notin' operators, values set can't be empty`);
        }
      } else if (rest === '' || rest.startsWith(',')) {
        operator = 'exists';
      } else {
        fail('=, !=, ==, in, notin');
      }
      values.forEach((v, i) => checkValue(key, v, i));
      requirements.push({ key, operator: operator!, values });
    }
    skipSpace();
    if (pos >= source.length) break;
    if (source[pos] !== ',') fail("','");
    pos++;
  }
  return new LabelSelector(sortRequirements(requirements));
}

function sortRequirements(requirements: Requirement[]): Requirement[] {
  return requirements.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** Converts a metav1.LabelSelector (matchLabels + matchExpressions). A missing selector matches nothing. */
export function selectorFromObject(selector: unknown): LabelSelector {
  if (selector === undefined || selector === null) return LabelSelector.nothing();
  if (!isPlainObject(selector)) throw Errors.badRequest('invalid label selector');
  const requirements: Requirement[] = [];
  const matchLabels = selector.matchLabels;
  if (isPlainObject(matchLabels)) {
    for (const [key, value] of Object.entries(matchLabels))
      requirements.push({ key, operator: 'in', values: [String(value)] });
  }
  const expressions = selector.matchExpressions;
  if (Array.isArray(expressions)) {
    for (const e of expressions) {
      if (!isPlainObject(e)) continue;
      const key = String(e.key ?? '');
      const values = Array.isArray(e.values) ? e.values.map(String) : [];
      switch (e.operator) {
        case 'In':
          requirements.push({ key, operator: 'in', values });
          break;
        case 'NotIn':
          requirements.push({ key, operator: 'notin', values });
          break;
        case 'Exists':
          requirements.push({ key, operator: 'exists', values: [] });
          break;
        case 'DoesNotExist':
          requirements.push({ key, operator: '!', values: [] });
          break;
        default:
          throw Errors.badRequest(`"${String(e.operator)}" is not a valid label selector operator`);
      }
    }
  }
  return new LabelSelector(sortRequirements(requirements));
}

/** Field selectors: `metadata.name=x,spec.nodeName!=`, with backslash escapes as kubectl sends them. */
export interface FieldRequirement {
  field: string;
  value: string;
  negate: boolean;
}

export class FieldSelector {
  constructor(readonly requirements: readonly FieldRequirement[]) {}

  get empty(): boolean {
    return this.requirements.length === 0;
  }

  matches(fields: (field: string) => string | undefined): boolean {
    for (const r of this.requirements) {
      const actual = fields(r.field) ?? '';
      if ((actual === r.value) === r.negate) return false;
    }
    return true;
  }

  /** The value a field must equal, for index lookups (metadata.name, spec.nodeName, …). */
  equality(field: string): string | undefined {
    return this.requirements.find((r) => r.field === field && !r.negate)?.value;
  }
}

export function parseFieldSelector(text: string | undefined, supported: ReadonlySet<string>): FieldSelector {
  if (!text || text.trim() === '') return new FieldSelector([]);
  const terms: string[] = [];
  let current = '';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === '\\' && i + 1 < text.length) {
      current += ch + text[i + 1];
      i++;
    } else if (ch === ',') {
      terms.push(current);
      current = '';
    } else current += ch;
  }
  terms.push(current);
  const requirements: FieldRequirement[] = [];
  for (const term of terms) {
    const match = /^(.*?)(!=|==|=)(.*)$/s.exec(term);
    if (!match) throw Errors.badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    const field = match[1]!.trim();
    if (!supported.has(field)) throw Errors.badRequest(`field label not supported: ${field}`);
    const value = match[3]!.replace(/\\(.)/g, '$1');
    requirements.push({ field, value, negate: match[2] === '!=' });
  }
  return new FieldSelector(requirements);
}

/**
 * A *metav1.LabelSelector as Go's %v / %+v prints it (its generated String method: every member followed by a
 * comma, "nil" for no selector), for messages that quote one (HPA external metrics, the PDB UnmanagedPods event).
 */
export function goLabelSelectorString(selector: unknown): string {
  if (!isPlainObject(selector)) return 'nil';
  const matchLabels = isPlainObject(selector.matchLabels) ? selector.matchLabels : {};
  const labels = Object.keys(matchLabels)
    .sort()
    .map((k) => `${k}: ${String(matchLabels[k])},`)
    .join('');
  const expressions = (Array.isArray(selector.matchExpressions) ? selector.matchExpressions : [])
    .map((e) => (isPlainObject(e) ? e : {}))
    .map(
      (e) =>
        `LabelSelectorRequirement{Key:${String(e.key ?? '')},Operator:${String(e.operator ?? '')},Values:[${(Array.isArray(e.values) ? e.values : []).join(' ')}],},`,
    )
    .join('');
  return `&LabelSelector{MatchLabels:map[string]string{${labels}},MatchExpressions:[]LabelSelectorRequirement{${expressions}},}`;
}
