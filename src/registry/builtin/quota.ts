import { Errors, FieldErrors, type StatusCause } from '../../api/errors.js';
import { compareQuantities, formatQuantity, milliValue, parseQuantity, unitValue } from '../../api/quantity.js';
import {
  INTEGER_QUOTA_RESOURCES,
  STANDARD_QUOTA_RESOURCES,
  STANDARD_SCOPES,
  scopeValidForResource,
} from '../../api/quota.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { checkQualifiedName } from '../../api/validation.js';
import { col, field, humanDuration as humanAge } from '../printers.js';
import type { KindInfo } from '../types.js';

/**
 * ResourceQuota and LimitRange as kube-apiserver stores them: quantities in canonical form, LimitRange's Container
 * defaults (SetDefaults_LimitRangeItem), ValidateResourceQuota and ValidateLimitRange. What they enforce is admission
 * (registry/admission) and the resourcequota controller. `kubectl describe namespace` lists both, printing
 * "No resource quota." and "No LimitRange resource." when empty.
 */
type Obj = Record<string, unknown>;

const QUANTITY_REGEX = `'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`;

/** Quantities come back canonical ("0.5" is stored as "500m"); one that does not parse fails decoding, a 400. */
function canonicalize(kind: string, map: unknown): unknown {
  if (!isPlainObject(map)) return map;
  const out: Obj = {};
  for (const [k, v] of Object.entries(map)) {
    const q = parseQuantity(v);
    if (!q)
      throw Errors.badRequest(
        `${kind} in version "v1" cannot be handled as a ${kind}: quantities must match the regular expression ${QUANTITY_REGEX}`,
      );
    out[k] = formatQuantity(q);
  }
  return out;
}

const STANDARD_RESOURCES = new Set([...STANDARD_QUOTA_RESOURCES, 'storage']);

function isHugePages(name: string): boolean {
  return (
    name.startsWith('hugepages-') || name.startsWith('requests.hugepages-') || name.startsWith('limits.hugepages-')
  );
}

/** validateResourceName: a qualified name, standard unless it has a domain. */
function resourceNameErrors(name: string, path: string, standard: (n: string) => boolean, notStandard: string) {
  const problems = checkQualifiedName(name);
  if (problems.length > 0) return problems.map((p) => FieldErrors.invalid(path, name, p));
  if (name.includes('/')) return [];
  const causes: StatusCause[] = [];
  if (!STANDARD_RESOURCES.has(name) && !isHugePages(name))
    causes.push(FieldErrors.invalid(path, name, 'must be a standard resource type or fully qualified'));
  if (!standard(name)) causes.push(FieldErrors.invalid(path, name, notStandard));
  return causes;
}

function nonNegative(path: string, value: unknown): StatusCause[] {
  const q = parseQuantity(value);
  return q && q.nanos < 0n ? [FieldErrors.invalid(path, value, 'must be greater than or equal to 0')] : [];
}

function validateResourceQuota(o: KubeObject): StatusCause[] {
  const spec: Obj = isPlainObject(o.spec) ? o.spec : {};
  const hard: Obj = isPlainObject(spec.hard) ? spec.hard : {};
  const causes: StatusCause[] = [];
  for (const [k, v] of Object.entries(hard)) {
    const path = `spec.hard[${k}]`;
    causes.push(
      ...resourceNameErrors(
        k,
        path,
        (n) => STANDARD_QUOTA_RESOURCES.has(n) || isHugePages(n),
        'must be a standard resource for quota',
      ),
    );
    causes.push(...nonNegative(path, v));
    const q = parseQuantity(v);
    if (q && INTEGER_QUOTA_RESOURCES.has(k) && q.nanos % 1_000_000_000n !== 0n)
      causes.push(FieldErrors.invalid(path, v, 'must be an integer'));
  }
  const scopes = Array.isArray(spec.scopes) ? spec.scopes.map(String) : [];
  // Go prints the internal []core.ResourceQuotaScope value with %#v.
  const badScopes = (detail: string): StatusCause => ({
    reason: 'FieldValueInvalid',
    message: `Invalid value: []core.ResourceQuotaScope{${scopes.map((x) => JSON.stringify(x)).join(', ')}}: ${detail}`,
    field: 'spec.scopes',
  });
  for (const scope of scopes) {
    if (!(STANDARD_SCOPES as readonly string[]).includes(scope)) causes.push(badScopes('unsupported scope'));
    for (const k of Object.keys(hard).sort())
      if (STANDARD_QUOTA_RESOURCES.has(k) && !scopeValidForResource(scope, k))
        causes.push(badScopes('unsupported scope applied to resource'));
  }
  for (const [a, b] of [
    ['BestEffort', 'NotBestEffort'],
    ['Terminating', 'NotTerminating'],
  ])
    if (scopes.includes(a!) && scopes.includes(b!)) causes.push(badScopes('conflicting scopes'));
  const selector = isPlainObject(spec.scopeSelector) ? spec.scopeSelector : undefined;
  const expressions = Array.isArray(selector?.matchExpressions) ? selector.matchExpressions : [];
  expressions.forEach((e, i) => {
    const path = `spec.scopeSelector.matchExpressions[${i}]`;
    const req: Obj = isPlainObject(e) ? e : {};
    const scope = String(req.scopeName ?? '');
    if (!(STANDARD_SCOPES as readonly string[]).includes(scope))
      causes.push(FieldErrors.invalid(`${path}.scopeName`, scope, 'unsupported scope'));
    const values = Array.isArray(req.values) ? req.values : [];
    switch (req.operator) {
      case 'In':
      case 'NotIn':
        if (values.length === 0)
          causes.push(
            FieldErrors.required(
              `${path}.values`,
              "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            ),
          );
        break;
      case 'Exists':
      case 'DoesNotExist':
        if (values.length > 0)
          causes.push(
            FieldErrors.invalid(
              `${path}.values`,
              values,
              "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            ),
          );
        break;
      default:
        causes.push(FieldErrors.invalid(`${path}.operator`, req.operator, 'not a valid selector operator'));
    }
    if (['Terminating', 'NotTerminating', 'BestEffort', 'NotBestEffort'].includes(scope) && req.operator !== 'Exists')
      causes.push(
        FieldErrors.invalid(
          `${path}.operator`,
          req.operator,
          "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
        ),
      );
  });
  return causes;
}

// ---------------------------------------------------------------------------------------------------
// LimitRange

const LIMIT_FIELDS = ['max', 'min', 'default', 'defaultRequest', 'maxLimitRequestRatio'] as const;
const LIMIT_TYPES = ['Pod', 'Container', 'PersistentVolumeClaim'];

function limitItems(o: KubeObject): Obj[] {
  const spec = isPlainObject(o.spec) ? o.spec : {};
  return Array.isArray(spec.limits) ? (spec.limits.filter(isPlainObject) as Obj[]) : [];
}

/** SetDefaults_LimitRangeItem: a Container limit's default is its max, its default request the default, else the min. */
function defaultLimitRange(o: KubeObject): void {
  for (const item of limitItems(o)) {
    for (const f of LIMIT_FIELDS) if (item[f] !== undefined) item[f] = canonicalize('LimitRange', item[f]);
    if (item.type !== 'Container') continue;
    const max: Obj = isPlainObject(item.max) ? item.max : {};
    const min: Obj = isPlainObject(item.min) ? item.min : {};
    const defaults: Obj = { ...(isPlainObject(item.default) ? item.default : {}) };
    const requests: Obj = { ...(isPlainObject(item.defaultRequest) ? item.defaultRequest : {}) };
    for (const [k, v] of Object.entries(max)) defaults[k] ??= v;
    for (const [k, v] of Object.entries(defaults)) requests[k] ??= v;
    for (const [k, v] of Object.entries(min)) requests[k] ??= v;
    if (Object.keys(defaults).length > 0) item.default = defaults;
    if (Object.keys(requests).length > 0) item.defaultRequest = requests;
  }
}

const OVERCOMMIT_FORBIDDEN = (name: string): boolean =>
  name.startsWith('hugepages-') || (name.includes('/') && !name.startsWith('kubernetes.io/'));

function validateLimitRange(o: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const seen = new Set<string>();
  limitItems(o).forEach((item, i) => {
    const path = `spec.limits[${i}]`;
    const type = String(item.type ?? '');
    if (!type.includes('/') && !LIMIT_TYPES.includes(type))
      causes.push(FieldErrors.invalid(`${path}.type`, type, 'must be a standard limit type or fully qualified'));
    if (seen.has(type)) causes.push(FieldErrors.duplicate(`${path}.type`, type));
    seen.add(type);
    const maps = Object.fromEntries(LIMIT_FIELDS.map((f) => [f, isPlainObject(item[f]) ? (item[f] as Obj) : {}]));
    if (type === 'Pod') {
      for (const f of ['default', 'defaultRequest'])
        if (Object.keys(maps[f]!).length > 0)
          causes.push(FieldErrors.forbidden(`${path}.${f}`, "may not be specified when `type` is 'Pod'"));
    }
    const containerType = type === 'Pod' || type === 'Container';
    const keys = new Set<string>();
    for (const f of LIMIT_FIELDS) {
      if (type === 'Pod' && (f === 'default' || f === 'defaultRequest')) continue;
      for (const k of Object.keys(maps[f]!)) {
        keys.add(k);
        causes.push(
          ...resourceNameErrors(
            k,
            `${path}.${f}[${k}]`,
            (n) => !containerType || ['cpu', 'memory', 'ephemeral-storage'].includes(n) || n.startsWith('hugepages-'),
            'must be a standard resource for containers',
          ),
        );
      }
    }
    if (type === 'PersistentVolumeClaim' && maps.min!.storage === undefined && maps.max!.storage === undefined)
      causes.push(
        FieldErrors.required(
          `${path}.limits`,
          'either minimum or maximum storage value is required, but neither was provided',
        ),
      );
    for (const k of [...keys].sort()) {
      const q = (f: string) => parseQuantity(maps[f]![k]);
      const [min, max, def, defReq, ratio] = [
        q('min'),
        q('max'),
        q('default'),
        q('defaultRequest'),
        q('maxLimitRequestRatio'),
      ];
      const s = formatQuantity;
      const gt = (a: typeof min, b: typeof min) => a !== undefined && b !== undefined && compareQuantities(a, b) > 0;
      if (gt(min, max))
        causes.push(
          FieldErrors.invalid(
            `${path}.min[${k}]`,
            s(min!),
            `min value ${s(min!)} is greater than max value ${s(max!)}`,
          ),
        );
      if (gt(min, defReq))
        causes.push(
          FieldErrors.invalid(
            `${path}.defaultRequest[${k}]`,
            s(defReq!),
            `min value ${s(min!)} is greater than default request value ${s(defReq!)}`,
          ),
        );
      if (gt(defReq, max))
        causes.push(
          FieldErrors.invalid(
            `${path}.defaultRequest[${k}]`,
            s(defReq!),
            `default request value ${s(defReq!)} is greater than max value ${s(max!)}`,
          ),
        );
      if (gt(defReq, def))
        causes.push(
          FieldErrors.invalid(
            `${path}.defaultRequest[${k}]`,
            s(defReq!),
            `default request value ${s(defReq!)} is greater than default limit value ${s(def!)}`,
          ),
        );
      if (gt(min, def))
        causes.push(
          FieldErrors.invalid(
            `${path}.default[${k}]`,
            s(min!),
            `min value ${s(min!)} is greater than default value ${s(def!)}`,
          ),
        );
      if (gt(def, max))
        causes.push(
          FieldErrors.invalid(
            `${path}.default[${k}]`,
            s(max!),
            `default value ${s(def!)} is greater than max value ${s(max!)}`,
          ),
        );
      if (ratio && ratio.nanos < 1_000_000_000n)
        causes.push(
          FieldErrors.invalid(`${path}.maxLimitRequestRatio[${k}]`, s(ratio), `ratio ${s(ratio)} is less than 1`),
        );
      if (ratio && min && max && min.nanos > 0n) {
        const milli = [ratio, min, max].every((x) => unitValue(x) < (2n ** 63n - 1n) / 1000n);
        const ratioValue = milli ? Number(milliValue(ratio)) / 1000 : Number(unitValue(ratio));
        const limit = milli
          ? Number(milliValue(max)) / Number(milliValue(min))
          : Number(unitValue(max)) / Number(unitValue(min));
        if (ratioValue > limit)
          causes.push(
            FieldErrors.invalid(
              `${path}.maxLimitRequestRatio[${k}]`,
              s(ratio),
              `ratio ${s(ratio)} is greater than max/min = ${limit.toFixed(6)}`,
            ),
          );
      }
      if (OVERCOMMIT_FORBIDDEN(k) && def && defReq && compareQuantities(def, defReq) !== 0)
        causes.push(
          FieldErrors.invalid(
            `${path}.defaultRequest[${k}]`,
            s(defReq),
            `default value ${s(def)} must equal to defaultRequest value ${s(defReq)} in ${k}`,
          ),
        );
    }
  });
  return causes;
}

/** printResourceQuota: `resource: used/hard` for each of status.hard, the `limits.*` ones in a column of their own. */
function quotaColumn(limits: boolean): (o: KubeObject) => string {
  return (o) => {
    const hard = field(o, 'status.hard');
    if (!isPlainObject(hard)) return '';
    const used = field(o, 'status.used');
    const q = (m: unknown, k: string): string => {
      const v = isPlainObject(m) ? parseQuantity(m[k]) : undefined;
      return v ? formatQuantity(v) : '0';
    };
    return Object.keys(hard)
      .sort()
      .filter((r) => (r.split('.').length > 1 && r.split('.')[0] === 'limits') === limits)
      .map((r) => `${r}: ${q(used, r)}/${q(hard, r)}`)
      .join(', ');
  };
}

export const quotaKinds: KindInfo[] = [
  {
    group: '',
    version: 'v1',
    kind: 'ResourceQuota',
    resource: 'resourcequotas',
    singular: 'resourcequota',
    namespaced: true,
    shortNames: ['quota'],
    status: true,
    strategy: {
      defaults(o) {
        if (isPlainObject(o.spec) && o.spec.hard !== undefined)
          o.spec = { ...o.spec, hard: canonicalize('ResourceQuota', o.spec.hard) };
      },
      validate: validateResourceQuota,
    },
    columns: [
      col(
        'Age',
        (o, now) => {
          const t = Date.parse(o.metadata.creationTimestamp ?? '');
          return Number.isNaN(t) ? '<unknown>' : humanAge(now - t);
        },
        { description: 'CreationTimestamp is a timestamp representing the server time when this object was created.' },
      ),
      col('Request', quotaColumn(false), {
        description: 'Request represents a minimum amount of cpu/memory that a container may consume.',
      }),
      col('Limit', quotaColumn(true), {
        description:
          'Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.',
      }),
    ],
    noAge: true,
  },
  {
    group: '',
    version: 'v1',
    kind: 'LimitRange',
    resource: 'limitranges',
    singular: 'limitrange',
    namespaced: true,
    shortNames: ['limits'],
    strategy: { defaults: defaultLimitRange, validate: validateLimitRange },
    columns: [
      col('Created At', (o) => o.metadata.creationTimestamp ?? '', {
        type: 'date',
        description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
      }),
    ],
    noAge: true,
  },
];
