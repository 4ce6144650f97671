import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { checkLabelValue, checkQualifiedName, validateLabels } from '../../api/validation.js';
import { col, field } from '../printers.js';
import type { KindInfo } from '../types.js';

/**
 * policy/v1 PodDisruptionBudget (k8s.io/kubernetes pkg/registry/policy/poddisruptionbudget and
 * pkg/apis/policy/validation), and the helpers the eviction subresource and the disruption controller share
 * (k8s.io/component-helpers/apps/poddisruptionbudget).
 */
type Obj = Record<string, unknown>;

export type IntOrString = number | string;

export interface PdbCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

/** PodDisruptionBudgetStatus, its keys in the Go struct's order (so the JSON reads as kube-apiserver's). */
export interface PdbStatus {
  observedGeneration?: number;
  disruptedPods?: Record<string, string>;
  disruptionsAllowed: number;
  currentHealthy: number;
  desiredHealthy: number;
  expectedPods: number;
  conditions?: PdbCondition[];
}

export const DISRUPTION_ALLOWED = 'DisruptionAllowed';
export const SUFFICIENT_PODS = 'SufficientPods';
export const INSUFFICIENT_PODS = 'InsufficientPods';
export const SYNC_FAILED = 'SyncFailed';
const UNHEALTHY_POLICIES = ['AlwaysAllow', 'IfHealthyBudget'];

export function pdbSpec(pdb: KubeObject): {
  minAvailable?: IntOrString;
  maxUnavailable?: IntOrString;
  selector?: unknown;
  unhealthyPodEvictionPolicy?: string;
} {
  return isPlainObject(pdb.spec) ? (pdb.spec as ReturnType<typeof pdbSpec>) : {};
}

/** The status as stored, every counter present (a status never written reads as zeros, as Go's would). */
export function pdbStatus(pdb: KubeObject): PdbStatus {
  const s = isPlainObject(pdb.status) ? pdb.status : {};
  const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
  const status: PdbStatus = {
    disruptionsAllowed: n(s.disruptionsAllowed),
    currentHealthy: n(s.currentHealthy),
    desiredHealthy: n(s.desiredHealthy),
    expectedPods: n(s.expectedPods),
  };
  if (typeof s.observedGeneration === 'number') status.observedGeneration = s.observedGeneration;
  if (isPlainObject(s.disruptedPods) && Object.keys(s.disruptedPods).length > 0)
    status.disruptedPods = s.disruptedPods as Record<string, string>;
  if (Array.isArray(s.conditions)) status.conditions = s.conditions as PdbCondition[];
  return orderedStatus(status);
}

/** A copy with the keys in PodDisruptionBudgetStatus's order; empty optional fields left out (omitempty). */
export function orderedStatus(s: PdbStatus): PdbStatus {
  const out: PdbStatus = {} as PdbStatus;
  if (s.observedGeneration) out.observedGeneration = s.observedGeneration;
  if (s.disruptedPods && Object.keys(s.disruptedPods).length > 0) out.disruptedPods = s.disruptedPods;
  out.disruptionsAllowed = s.disruptionsAllowed;
  out.currentHealthy = s.currentHealthy;
  out.desiredHealthy = s.desiredHealthy;
  out.expectedPods = s.expectedPods;
  if (s.conditions && s.conditions.length > 0) out.conditions = s.conditions;
  return out;
}

/**
 * apimeta.SetStatusCondition: replaces the condition of the same type, moving lastTransitionTime only when the
 * status changes; returns the new list.
 */
export function setCondition(
  conditions: readonly PdbCondition[] | undefined,
  next: Omit<PdbCondition, 'lastTransitionTime'>,
  now: string,
): PdbCondition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const previous = i >= 0 ? list[i] : undefined;
  const lastTransitionTime = previous && previous.status === next.status ? previous.lastTransitionTime : now;
  // metav1.Condition's key order: type, status, observedGeneration (omitempty), lastTransitionTime, reason, message.
  const condition: PdbCondition = next.observedGeneration
    ? {
        type: next.type,
        status: next.status,
        observedGeneration: next.observedGeneration,
        lastTransitionTime,
        reason: next.reason,
        message: next.message,
      }
    : { type: next.type, status: next.status, lastTransitionTime, reason: next.reason, message: next.message };
  if (i >= 0) list[i] = condition;
  else list.push(condition);
  return list;
}

/** pdbhelper.UpdateDisruptionAllowedCondition: True/SufficientPods while disruptions are allowed, else False/InsufficientPods. */
export function withDisruptionAllowedCondition(status: PdbStatus, now: string): PdbStatus {
  const allowed = status.disruptionsAllowed > 0;
  const conditions = setCondition(
    status.conditions,
    {
      type: DISRUPTION_ALLOWED,
      status: allowed ? 'True' : 'False',
      observedGeneration: status.observedGeneration,
      reason: allowed ? SUFFICIENT_PODS : INSUFFICIENT_PODS,
      message: '',
    },
    now,
  );
  return { ...status, conditions };
}

/** pdbhelper.ConditionsAreUpToDate. */
export function conditionsAreUpToDate(pdb: KubeObject, status: PdbStatus): boolean {
  const cond = status.conditions?.find((c) => c.type === DISRUPTION_ALLOWED);
  if (!cond || (status.observedGeneration ?? 0) !== (pdb.metadata.generation ?? 0)) return false;
  return status.disruptionsAllowed > 0
    ? cond.status === 'True' && cond.reason === SUFFICIENT_PODS
    : cond.status === 'False' && cond.reason === INSUFFICIENT_PODS;
}

/**
 * intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true), with its errors: an integer is itself,
 * "N%" is ceil(N% of total), any other string is refused.
 */
export function scaledIntOrPercent(value: IntOrString, total: number): number {
  if (typeof value === 'number') return value;
  const match = /^(\d+)%$/.exec(value);
  if (!match) throw new Error(`invalid value for IntOrString: invalid type: string is not a percentage`);
  return Math.ceil((Number(match[1]) * total) / 100);
}

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
