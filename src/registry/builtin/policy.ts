import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { pdbStatus, type IntOrString, type PdbStatus } from '../../api/pdb.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { checkLabelValue, checkQualifiedName, validateLabels } from '../../api/validation.js';
import { col, field } from '../printers.js';
import type { KindInfo } from '../types.js';

/**
 * policy/v1 PodDisruptionBudget (k8s.io/kubernetes pkg/registry/policy/poddisruptionbudget and
 * pkg/apis/policy/validation). The budget arithmetic the eviction subresource and the disruption controller
 * share is in api/pdb.ts.
 */
type Obj = Record<string, unknown>;

const UNHEALTHY_POLICIES = ['AlwaysAllow', 'IfHealthyBudget'];

/** Go's %#v of an intstr.IntOrString, as field errors print one. */
function goIntOrString(v: IntOrString): string {
  return typeof v === 'number'
    ? `intstr.IntOrString{Type:0, IntVal:${v}, StrVal:""}`
    : `intstr.IntOrString{Type:1, IntVal:0, StrVal:${JSON.stringify(v)}}`;
}

const PERCENT_MESSAGE =
  "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/** appsvalidation.ValidatePositiveIntOrPercent + IsNotMoreThan100Percent. */
function validateIntOrPercent(value: unknown, path: string): StatusCause[] {
  if (typeof value === 'number')
    return Number.isInteger(value) && value >= 0
      ? []
      : [FieldErrors.invalid(path, value, 'must be greater than or equal to 0')];
  if (typeof value !== 'string')
    return [FieldErrors.invalid(path, value, "must be an integer or percentage (e.g '5%')")];
  const match = /^(\d+)%$/.exec(value);
  if (!match) return [invalidGo(path, goIntOrString(value), PERCENT_MESSAGE)];
  return Number(match[1]) > 100 ? [invalidGo(path, goIntOrString(value), 'must not be greater than 100%')] : [];
}

function invalidGo(path: string, rendered: string, detail: string): StatusCause {
  return { reason: 'FieldValueInvalid', message: `Invalid value: ${rendered}: ${detail}`, field: path };
}

/** metav1validation.ValidateLabelSelector. */
export function validateLabelSelector(selector: unknown, path: string): StatusCause[] {
  if (selector === undefined || selector === null) return [];
  if (!isPlainObject(selector)) return [FieldErrors.invalid(path, selector, 'must be a label selector')];
  const causes = validateLabels(selector.matchLabels, `${path}.matchLabels`);
  const expressions = Array.isArray(selector.matchExpressions) ? selector.matchExpressions : [];
  expressions.forEach((e: unknown, i) => {
    const at = `${path}.matchExpressions[${i}]`;
    const expr = isPlainObject(e) ? e : {};
    const values = Array.isArray(expr.values) ? expr.values : [];
    switch (expr.operator) {
      case 'In':
      case 'NotIn':
        if (values.length === 0)
          causes.push(FieldErrors.required(`${at}.values`, "must be specified when `operator` is 'In' or 'NotIn'"));
        break;
      case 'Exists':
      case 'DoesNotExist':
        if (values.length > 0)
          causes.push(
            FieldErrors.forbidden(`${at}.values`, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
          );
        break;
      default:
        causes.push(FieldErrors.invalid(`${at}.operator`, expr.operator ?? '', 'not a valid selector operator'));
    }
    for (const p of checkQualifiedName(String(expr.key ?? '')))
      causes.push(FieldErrors.invalid(`${at}.key`, expr.key ?? '', p));
    values.forEach((v: unknown, j) => {
      for (const p of checkLabelValue(String(v))) causes.push(FieldErrors.invalid(`${at}.values[${j}]`, v, p));
    });
  });
  return causes;
}

function validateSpec(obj: KubeObject): StatusCause[] {
  const spec = isPlainObject(obj.spec) ? obj.spec : {};
  const causes: StatusCause[] = [];
  if (
    spec.minAvailable !== undefined &&
    spec.minAvailable !== null &&
    spec.maxUnavailable !== undefined &&
    spec.maxUnavailable !== null
  ) {
    causes.push(FieldErrors.invalid('spec', spec, 'minAvailable and maxUnavailable cannot be both set'));
  }
  for (const key of ['minAvailable', 'maxUnavailable'] as const) {
    if (spec[key] !== undefined && spec[key] !== null) causes.push(...validateIntOrPercent(spec[key], `spec.${key}`));
  }
  causes.push(...validateLabelSelector(spec.selector, 'spec.selector'));
  const policy = spec.unhealthyPodEvictionPolicy;
  if (policy !== undefined && policy !== null && !UNHEALTHY_POLICIES.includes(String(policy))) {
    causes.push(FieldErrors.notSupported('spec.unhealthyPodEvictionPolicy', policy, UNHEALTHY_POLICIES));
  }
  return causes;
}

/** ValidatePodDisruptionBudgetStatusUpdate (policy/v1): the counters are never negative. */
function validateStatus(obj: KubeObject): StatusCause[] {
  const status = isPlainObject(obj.status) ? obj.status : {};
  const causes: StatusCause[] = [];
  for (const key of ['disruptionsAllowed', 'currentHealthy', 'desiredHealthy', 'expectedPods']) {
    const v = status[key];
    if (typeof v === 'number' && v < 0)
      causes.push(FieldErrors.invalid(`status.${key}`, v, 'must be greater than or equal to 0'));
  }
  return causes;
}

/** PodDisruptionBudgetSpec.String() of an int-or-percent, "N/A" when unset (printPodDisruptionBudget). */
function intOrPercentCell(path: string): (o: KubeObject) => string {
  return (o) => {
    const v = field(o, path);
    return v === undefined || v === null ? 'N/A' : String(v);
  };
}

export const podDisruptionBudgets: KindInfo = {
  group: 'policy',
  version: 'v1',
  kind: 'PodDisruptionBudget',
  resource: 'poddisruptionbudgets',
  singular: 'poddisruptionbudget',
  namespaced: true,
  shortNames: ['pdb'],
  status: true,
  generation: true,
  strategy: {
    // A new PDB's status is Go's zero value: the four counters at 0 (not omitempty), nothing else.
    prepareForCreate(obj) {
      obj.status = {
        disruptionsAllowed: 0,
        currentHealthy: 0,
        desiredHealthy: 0,
        expectedPods: 0,
      } satisfies PdbStatus as Obj;
    },
    validate(obj) {
      return [...validateSpec(obj), ...validateStatus(obj)];
    },
  },
  columns: [
    col('Min Available', intOrPercentCell('spec.minAvailable'), {
      description: 'The minimum number of pods that must be available.',
    }),
    col('Max Unavailable', intOrPercentCell('spec.maxUnavailable'), {
      description: 'The maximum number of pods that may be unavailable.',
    }),
    col('Allowed Disruptions', (o) => pdbStatus(o).disruptionsAllowed, {
      type: 'integer',
      description: 'Calculated number of pods that may be disrupted at this time.',
    }),
  ],
};

export const policyKinds: KindInfo[] = [podDisruptionBudgets];
