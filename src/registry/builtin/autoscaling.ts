import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { checkPathSegmentName } from '../../api/validation.js';
import { col, field, str } from '../printers.js';
import type { KindInfo } from '../types.js';

/**
 * autoscaling HorizontalPodAutoscaler, stored as autoscaling/v2 and served as v2 and v1 (kubectl up to 1.32 creates
 * v1 objects with `kubectl autoscale`). v1 has only targetCPUUtilizationPercentage; kube-apiserver's conversion
 * (pkg/apis/autoscaling/v1/conversion.go) carries what v1 cannot say in annotations, so a v1 round trip loses
 * nothing:
 *
 *   autoscaling.alpha.kubernetes.io/metrics          spec.metrics other than a CPU utilization target (v1 MetricSpec)
 *   autoscaling.alpha.kubernetes.io/current-metrics  status.currentMetrics (v1 MetricStatus)
 *   autoscaling.alpha.kubernetes.io/behavior         spec.behavior
 *   autoscaling.alpha.kubernetes.io/conditions       status.conditions
 *
 * The HPA controller is src/controllers/hpa/ (see README).
 */
type Obj = Record<string, unknown>;

const METRICS = 'autoscaling.alpha.kubernetes.io/metrics';
const CURRENT_METRICS = 'autoscaling.alpha.kubernetes.io/current-metrics';
const BEHAVIOR = 'autoscaling.alpha.kubernetes.io/behavior';
const CONDITIONS = 'autoscaling.alpha.kubernetes.io/conditions';
const ROUND_TRIP = [METRICS, CURRENT_METRICS, BEHAVIOR, CONDITIONS];
const DEFAULT_CPU_UTILIZATION = 80;
const METRIC_TYPES = ['ContainerResource', 'External', 'Object', 'Pods', 'Resource'];
const TARGET_TYPES = ['Utilization', 'Value', 'AverageValue'];

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

/** An object without the keys whose value is undefined (Go's omitempty pointers). */
function compact(o: Obj): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

function cpuUtilization(target: number): Obj {
  return { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: target } } };
}

function isCpuUtilization(m: Obj): boolean {
  const r = obj(m.resource);
  return m.type === 'Resource' && r.name === 'cpu' && obj(r.target).averageUtilization !== undefined;
}

/**
 * GenerateHPAScaleUpRules / GenerateHPAScaleDownRules: the unset parts of a behavior's rules. Scale-down's window is
 * left unset, as kube-apiserver leaves it: the controller then uses its --horizontal-pod-autoscaler-downscale-stabilization.
 */
function defaultRules(rules: unknown, up: boolean): Obj {
  const r = obj(rules);
  return compact({
    ...r,
    stabilizationWindowSeconds: r.stabilizationWindowSeconds ?? (up ? 0 : undefined),
    selectPolicy: r.selectPolicy ?? 'Max',
    policies:
      r.policies ??
      (up
        ? [
            { type: 'Pods', value: 4, periodSeconds: 15 },
            { type: 'Percent', value: 100, periodSeconds: 15 },
          ]
        : [{ type: 'Percent', value: 100, periodSeconds: 15 }]),
  });
}

/** SetDefaults_HorizontalPodAutoscaler (v2): minReplicas 1, CPU at 80% without metrics, a behavior's unset rules. */
function defaultV2(o: KubeObject): void {
  const spec = isPlainObject(o.spec) ? o.spec : (o.spec = {});
  spec.minReplicas ??= 1;
  if (list(spec.metrics).length === 0) spec.metrics = [cpuUtilization(DEFAULT_CPU_UTILIZATION)];
  if (isPlainObject(spec.behavior))
    spec.behavior = {
      ...spec.behavior,
      scaleUp: defaultRules(spec.behavior.scaleUp, true),
      scaleDown: defaultRules(spec.behavior.scaleDown, false),
    };
}

function validateTarget(target: unknown, path: string): StatusCause[] {
  const t = obj(target);
  const causes: StatusCause[] = [];
  if (!t.type) causes.push(FieldErrors.required(`${path}.type`, 'must specify a metric target type'));
  if (!TARGET_TYPES.includes(String(t.type ?? '')))
    causes.push(
      FieldErrors.invalid(`${path}.type`, t.type ?? '', 'must be either Utilization, Value, or AverageValue'),
    );
  if (typeof t.averageUtilization === 'number' && t.averageUtilization < 1)
    causes.push(FieldErrors.invalid(`${path}.averageUtilization`, t.averageUtilization, 'must be greater than 0'));
  return causes;
}

/** ValidateHorizontalPodAutoscaler on the v2 form (what kube-apiserver validates, whatever version was sent). */
function validateV2(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const causes: StatusCause[] = [];
  const min = spec.minReplicas;
  const max = typeof spec.maxReplicas === 'number' ? spec.maxReplicas : 0;
  if (typeof min === 'number' && min < 1)
    causes.push(FieldErrors.invalid('spec.minReplicas', min, 'must be greater than or equal to 1'));
  if (max < 1) causes.push(FieldErrors.invalid('spec.maxReplicas', max, 'must be greater than 0'));
  if (typeof min === 'number' && max < min)
    causes.push(FieldErrors.invalid('spec.maxReplicas', max, 'must be greater than or equal to `minReplicas`'));
  const ref = obj(spec.scaleTargetRef);
  for (const key of ['kind', 'name'] as const) {
    const value = typeof ref[key] === 'string' ? ref[key] : '';
    if (value === '') causes.push(FieldErrors.required(`spec.scaleTargetRef.${key}`, ''));
    else
      for (const p of checkPathSegmentName(value))
        causes.push(FieldErrors.invalid(`spec.scaleTargetRef.${key}`, value, p));
  }
  list(spec.metrics).forEach((metric, i) => {
    const m = obj(metric);
    const path = `spec.metrics[${i}]`;
    if (!m.type) return causes.push(FieldErrors.required(`${path}.type`, 'must specify a metric source type'));
    if (!METRIC_TYPES.includes(String(m.type)))
      return causes.push(FieldErrors.notSupported(`${path}.type`, m.type, METRIC_TYPES));
    const key = String(m.type).charAt(0).toLowerCase() + String(m.type).slice(1);
    const source = m[key];
    if (!isPlainObject(source))
      return causes.push(
        FieldErrors.required(`${path}.${key}`, 'must populate information for the given metric source'),
      );
    if ((m.type === 'Resource' || m.type === 'ContainerResource') && !source.name)
      causes.push(FieldErrors.required(`${path}.${key}.name`, 'must specify a resource name'));
    if ((m.type === 'Pods' || m.type === 'Object' || m.type === 'External') && !obj(source.metric).name)
      causes.push(FieldErrors.required(`${path}.${key}.metric.name`, 'must specify a metric name'));
    causes.push(...validateTarget(source.target, `${path}.${key}.target`));
    return undefined;
  });
  return causes;
}

// --- v2 <-> v1 metric shapes (the v1 annotation format is autoscaling/v2beta1's) ---

/** The metric source types and the field each keeps its source in. */
const SOURCES: Record<string, string> = {
  Resource: 'resource',
  ContainerResource: 'containerResource',
  Pods: 'pods',
  Object: 'object',
  External: 'external',
};

type Side = 'target' | 'current';

/**
 * Where a v2 target (spec) or current value (status) goes in a v1 metric of each type, e.g. a Pods target's
 * averageValue is `targetAverageValue`, an Object's is `averageValue`. `zero`: Go quantities that are not pointers
 * in v1, so they read "0" when unset.
 */
function v1Fields(
  type: string,
  side: Side,
): { byName: boolean; selector: string; value?: string; averageValue: string; utilization?: string; zero: string[] } {
  const averageValue = `${side}AverageValue`;
  switch (type) {
    case 'Resource':
    case 'ContainerResource':
      return {
        byName: true,
        selector: '',
        averageValue,
        utilization: `${side}AverageUtilization`,
        zero: side === 'current' ? [averageValue] : [],
      };
    case 'Pods':
      return { byName: false, selector: 'selector', averageValue, zero: [averageValue] };
    case 'Object':
      return {
        byName: false,
        selector: 'selector',
        value: `${side}Value`,
        averageValue: 'averageValue',
        zero: [`${side}Value`],
      };
    default:
      return {
        byName: false,
        selector: 'metricSelector',
        value: `${side}Value`,
        averageValue,
        zero: side === 'current' ? [`${side}Value`] : [],
      };
  }
}

/** A v2 MetricSpec (side `target`) or MetricStatus (side `current`) in v1's form. */
function metricToV1(m: Obj, side: Side): Obj {
  const type = String(m.type ?? '');
  const key = SOURCES[type];
  if (!key || !isPlainObject(m[key])) return { type: m.type };
  const source = m[key] as Obj;
  const values = obj(source[side]);
  const f = v1Fields(type, side);
  const out: Obj = f.byName
    ? { name: source.name }
    : { metricName: obj(source.metric).name, [f.selector]: obj(source.metric).selector };
  if (type === 'Object') out.target = source.describedObject;
  if (f.utilization) out[f.utilization] = values.averageUtilization;
  if (f.value) out[f.value] = values.value;
  out[f.averageValue] = values.averageValue;
  if (type === 'ContainerResource') out.container = source.container;
  for (const z of f.zero) out[z] ??= '0';
  return { type, [key]: compact(out) };
}

/** The target type Go's conversion infers from which v1 target fields are set. */
function targetType(type: string, q: Obj): string {
  if (type === 'Resource' || type === 'ContainerResource')
    return q.averageUtilization === undefined ? 'AverageValue' : 'Utilization';
  if (type === 'Pods') return 'AverageValue';
  if (type === 'Object') return q.averageValue === undefined ? 'Value' : 'AverageValue';
  return q.value === undefined ? 'AverageValue' : 'Value';
}

/** A v1 metric (from the annotations) back in v2's form. */
function metricFromV1(m: Obj, side: Side): Obj {
  const type = String(m.type ?? '');
  const key = SOURCES[type];
  if (!key || !isPlainObject(m[key])) return { type: m.type };
  const source = m[key] as Obj;
  const f = v1Fields(type, side);
  const q = compact({
    value: f.value && source[f.value],
    averageValue: source[f.averageValue],
    averageUtilization: f.utilization && source[f.utilization],
  });
  const out: Obj = f.byName
    ? { name: source.name }
    : { metric: compact({ name: source.metricName, selector: source[f.selector] }) };
  if (type === 'Object') out.describedObject = source.target;
  out[side] = side === 'target' ? { type: targetType(type, q), ...q } : q;
  if (type === 'ContainerResource') out.container = source.container;
  return { type, [key]: out };
}

function withoutRoundTrip(annotations: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(annotations ?? {})) if (!ROUND_TRIP.includes(k)) out[k] = v;
  return out;
}

function parse(text: string | undefined): unknown[] | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Convert_autoscaling_HorizontalPodAutoscaler_To_v1: the stored v2 object as a v1 client sees it. */
export function hpaToV1(o: KubeObject): KubeObject {
  const spec = obj(o.spec);
  const status = obj(o.status);
  const metrics = list(spec.metrics).map(obj);
  const annotations = withoutRoundTrip(o.metadata.annotations);
  const others = metrics.filter((m) => !isCpuUtilization(m)).map((m) => metricToV1(m, 'target'));
  if (others.length > 0) annotations[METRICS] = JSON.stringify(others);
  const current = list(status.currentMetrics).map(obj);
  if (current.length > 0) annotations[CURRENT_METRICS] = JSON.stringify(current.map((m) => metricToV1(m, 'current')));
  if (spec.behavior !== undefined) annotations[BEHAVIOR] = JSON.stringify(spec.behavior);
  if (list(status.conditions).length > 0) annotations[CONDITIONS] = JSON.stringify(status.conditions);
  // The first CPU Resource metric gives targetCPUUtilizationPercentage, if it targets a utilization.
  const cpu = metrics.find((m) => m.type === 'Resource' && obj(m.resource).name === 'cpu');
  const cpuStatus = current.find((m) => m.type === 'Resource' && obj(m.resource).name === 'cpu');
  const metadata = { ...o.metadata };
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  else delete metadata.annotations;
  const out: KubeObject = { apiVersion: 'autoscaling/v1', kind: 'HorizontalPodAutoscaler', metadata };
  out.spec = compact({
    scaleTargetRef: spec.scaleTargetRef,
    minReplicas: spec.minReplicas,
    maxReplicas: spec.maxReplicas,
    targetCPUUtilizationPercentage: cpu ? obj(obj(cpu.resource).target).averageUtilization : undefined,
  });
  if (o.status !== undefined) {
    out.status = compact({
      observedGeneration: status.observedGeneration,
      lastScaleTime: status.lastScaleTime,
      currentReplicas: status.currentReplicas ?? 0,
      desiredReplicas: status.desiredReplicas ?? 0,
      currentCPUUtilizationPercentage: cpuStatus ? obj(obj(cpuStatus.resource).current).averageUtilization : undefined,
    });
  }
  return out;
}

/** Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler: a v1 object as it is stored (v2). */
export function hpaFromV1(o: KubeObject): KubeObject {
  const spec = obj(o.spec);
  const status = obj(o.status);
  const annotations = o.metadata.annotations ?? {};
  const metrics: Obj[] = (parse(annotations[METRICS]) ?? []).map((m) => metricFromV1(obj(m), 'target'));
  if (typeof spec.targetCPUUtilizationPercentage === 'number')
    metrics.push(cpuUtilization(spec.targetCPUUtilizationPercentage));
  // v1 had an implicit CPU default in the controller; the conversion makes it explicit.
  if (metrics.length === 0) metrics.push(cpuUtilization(DEFAULT_CPU_UTILIZATION));
  let behavior: unknown;
  try {
    behavior = annotations[BEHAVIOR] === undefined ? undefined : JSON.parse(annotations[BEHAVIOR]);
  } catch {
    behavior = undefined;
  }
  const metadata = { ...o.metadata };
  const kept = withoutRoundTrip(annotations);
  if (Object.keys(kept).length > 0) metadata.annotations = kept;
  else delete metadata.annotations;
  const out: KubeObject = { apiVersion: 'autoscaling/v2', kind: 'HorizontalPodAutoscaler', metadata };
  out.spec = compact({
    scaleTargetRef: spec.scaleTargetRef,
    minReplicas: spec.minReplicas,
    maxReplicas: spec.maxReplicas,
    metrics,
    behavior: isPlainObject(behavior) && Object.keys(behavior).length > 0 ? behavior : undefined,
  });
  if (o.status !== undefined) {
    let current: unknown[] | undefined = parse(annotations[CURRENT_METRICS])?.map((m) =>
      metricFromV1(obj(m), 'current'),
    );
    if (!current && typeof status.currentCPUUtilizationPercentage === 'number') {
      current = [
        {
          type: 'Resource',
          resource: { name: 'cpu', current: { averageUtilization: status.currentCPUUtilizationPercentage } },
        },
      ];
    }
    out.status = compact({
      observedGeneration: status.observedGeneration,
      lastScaleTime: status.lastScaleTime,
      currentReplicas: status.currentReplicas || undefined,
      desiredReplicas: status.desiredReplicas ?? 0,
      currentMetrics: current,
      conditions: parse(annotations[CONDITIONS]),
    });
  }
  return out;
}

/** formatHPAMetrics: up to two targets, `cpu: <unknown>/80%` while no metric was read. */
function formatMetrics(o: KubeObject): string {
  const specs = list(field(o, 'spec.metrics')).map(obj);
  if (specs.length === 0) return '<none>';
  const statuses = list(field(o, 'status.currentMetrics')).map(obj);
  const parts = specs.map((spec, i) => {
    const status = statuses[i] ?? {};
    const current = (kind: string, key: string): unknown => obj(obj(status[kind]).current)[key];
    const known = (v: unknown): string => (v === undefined || v === null ? '<unknown>' : String(v));
    switch (spec.type) {
      case 'External':
      case 'Object': {
        const kind = spec.type === 'External' ? 'external' : 'object';
        const target = obj(obj(spec[kind]).target);
        if (target.averageValue !== undefined)
          return `${known(current(kind, 'averageValue'))}/${String(target.averageValue)} (avg)`;
        return `${known(isPlainObject(status[kind]) ? (current(kind, 'value') ?? '0') : undefined)}/${String(target.value ?? '0')}`;
      }
      case 'Pods':
        return `${known(isPlainObject(status.pods) ? (current('pods', 'averageValue') ?? '0') : undefined)}/${String(obj(obj(spec.pods).target).averageValue ?? '0')}`;
      case 'Resource':
      case 'ContainerResource': {
        const kind = spec.type === 'Resource' ? 'resource' : 'containerResource';
        const source = obj(spec[kind]);
        const target = obj(source.target);
        if (target.averageValue !== undefined)
          return `${String(source.name)}: ${known(isPlainObject(status[kind]) ? (current(kind, 'averageValue') ?? '0') : undefined)}/${String(target.averageValue)}`;
        const utilization = current(kind, 'averageUtilization');
        const now = isPlainObject(status[kind]) && typeof utilization === 'number' ? `${utilization}%` : '<unknown>';
        const goal = typeof target.averageUtilization === 'number' ? `${target.averageUtilization}%` : '<auto>';
        return `${String(source.name)}: ${now}/${goal}`;
      }
      default:
        return '<unknown type>';
    }
  });
  return parts.length > 2 ? `${parts.slice(0, 2).join(', ')} + ${parts.length - 2} more...` : parts.join(', ');
}

const hpaColumns = [
  col('Reference', (o) => `${str(o, 'spec.scaleTargetRef.kind')}/${str(o, 'spec.scaleTargetRef.name')}`, {
    description:
      'scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.',
  }),
  col('Targets', formatMetrics, {
    description:
      'metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond.',
  }),
  col(
    'MinPods',
    (o) => (typeof field(o, 'spec.minReplicas') === 'number' ? String(field(o, 'spec.minReplicas')) : '<unset>'),
    {
      description:
        'minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down. It defaults to 1 pod.',
    },
  ),
  col(
    'MaxPods',
    (o) => (typeof field(o, 'spec.maxReplicas') === 'number' ? (field(o, 'spec.maxReplicas') as number) : 0),
    {
      description:
        'maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.',
    },
  ),
  col(
    'Replicas',
    (o) =>
      typeof field(o, 'status.currentReplicas') === 'number' ? (field(o, 'status.currentReplicas') as number) : 0,
    {
      description:
        'currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.',
    },
  ),
];

const hpaV2: KindInfo = {
  group: 'autoscaling',
  version: 'v2',
  kind: 'HorizontalPodAutoscaler',
  resource: 'horizontalpodautoscalers',
  singular: 'horizontalpodautoscaler',
  namespaced: true,
  shortNames: ['hpa'],
  categories: ['all'],
  status: true,
  strategy: {
    defaults: defaultV2,
    prepareForCreate(o) {
      o.status = { desiredReplicas: 0 };
    },
    validate: validateV2,
  },
  columns: hpaColumns,
};

/** v1 objects are validated and printed in their v2 form, as kube-apiserver does on its internal version. */
const asV2 = (o: KubeObject): KubeObject => {
  const v2 = hpaFromV1(o);
  defaultV2(v2);
  return v2;
};

/** A v1 row's v2 form, converted once for all of the row's columns (the row's object is their key). */
const rowsAsV2 = new WeakMap<KubeObject, KubeObject>();
const rowAsV2 = (o: KubeObject): KubeObject => {
  let v2 = rowsAsV2.get(o);
  if (!v2) rowsAsV2.set(o, (v2 = asV2(o)));
  return v2;
};

const hpaV1: KindInfo = {
  ...hpaV2,
  version: 'v1',
  storage: { group: 'autoscaling', resource: 'horizontalpodautoscalers', toStorage: asV2, fromStorage: hpaToV1 },
  strategy: {
    defaults(o: KubeObject) {
      const spec = isPlainObject(o.spec) ? o.spec : (o.spec = {});
      spec.minReplicas ??= 1;
    },
    prepareForCreate(o) {
      o.status = { currentReplicas: 0, desiredReplicas: 0 };
    },
    validate: (o) => validateV2(asV2(o)),
  },
  columns: hpaColumns.map((c) => ({ ...c, cell: (o: KubeObject, now: number) => c.cell(rowAsV2(o), now) })),
};

export const autoscalingKinds: KindInfo[] = [hpaV2, hpaV1];
