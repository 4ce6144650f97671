import { podCondition, podPhase } from '../../api/pod-util.js';
import { milliValue, parseQuantity } from '../../api/quantity.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';

/**
 * kube-controller-manager's replica calculator (pkg/controller/podautoscaler/replica_calculator.go, metrics/
 * utilization.go, metrics/client.go's resource metrics) as pure functions of the pods, their metrics and the time.
 *
 * Worked example (the docs' walkthrough): 1 pod requesting 200m uses 500m against a 50% target. Utilization is
 * 500 × 100 / 200 = 250%, the usage ratio 250 / 50 = 5.0, outside the 0.1 tolerance, so 1 × 5.0 → 5 replicas. The 4
 * new pods are Pending, then without metrics: on the next sync the ready pod alone still shows 5.0, and the new ones
 * count as using 0% (missing or unready on a scale-up): 500 / (5 × 200) = 50% → ratio 1.0, within tolerance → 5.
 */
export const DEFAULT_TOLERANCE = 0.1;
/** --horizontal-pod-autoscaler-cpu-initialization-period. */
export const CPU_INITIALIZATION_PERIOD_MS = 5 * 60_000;
/** --horizontal-pod-autoscaler-initial-readiness-delay. */
export const DELAY_OF_INITIAL_READINESS_STATUS_MS = 30_000;

/** One pod's metric: milli-units summed over its containers (or the one container asked for). */
export interface PodMetric {
  value: number;
  timestamp: number;
  windowMs: number;
}

/** Metrics by pod name (metricsclient.PodMetricsInfo). */
export type PodMetricsInfo = Map<string, PodMetric>;

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.map(obj) : []);

/**
 * getPodMetrics / getContainerMetrics: what a PodMetricsList says of one resource. A pod missing the resource in any
 * container is left out; asking for a container a pod's metrics lack is an error.
 */
export function podMetricsOf(items: readonly KubeObject[], resource: string, container: string): PodMetricsInfo {
  const result: PodMetricsInfo = new Map();
  for (const m of items) {
    const timestamp = Date.parse(String(m.timestamp ?? '')) || 0;
    const windowMs = goDurationMs(String(m.window ?? ''));
    const containers = list(m.containers);
    if (container !== '') {
      const c = containers.find((x) => x.name === container);
      if (!c)
        throw new Error(
          `container ${container} not present in metrics for pod ${m.metadata.namespace ?? ''}/${m.metadata.name ?? ''}`,
        );
      const q = parseQuantity(obj(c.usage)[resource]);
      if (q) result.set(m.metadata.name!, { value: Number(milliValue(q)), timestamp, windowMs });
      continue;
    }
    let sum = 0;
    let missing = containers.length === 0;
    for (const c of containers) {
      const q = parseQuantity(obj(c.usage)[resource]);
      if (!q) {
        missing = true;
        break;
      }
      sum += Number(milliValue(q));
    }
    if (!missing) result.set(m.metadata.name!, { value: sum, timestamp, windowMs });
  }
  return result;
}

/** A metav1.Duration's text ("15s", "12.5s", "1m0s", "500ms") in ms. */
function goDurationMs(text: string): number {
  let total = 0;
  for (const [, n, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g))
    total += Number(n) * (unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000);
  return total;
}

export interface PodGroups {
  readyPodCount: number;
  unready: Set<string>;
  missing: Set<string>;
  ignored: Set<string>;
}

/**
 * groupPods: deleted and failed pods are ignored, pending ones unready, those without metrics missing. For CPU, a
 * pod in its first 5 minutes counts as unready while not Ready or until a whole metrics window passed since it turned
 * Ready (its start-up burst is no load); after that only a pod that never became ready within 30 s of starting.
 */
export function groupPods(
  pods: readonly KubeObject[],
  metrics: PodMetricsInfo,
  resource: string,
  now: number,
  cpuInitializationPeriodMs = CPU_INITIALIZATION_PERIOD_MS,
  delayOfInitialReadinessStatusMs = DELAY_OF_INITIAL_READINESS_STATUS_MS,
): PodGroups {
  const groups: PodGroups = { readyPodCount: 0, unready: new Set(), missing: new Set(), ignored: new Set() };
  for (const pod of pods) {
    const name = pod.metadata.name!;
    const phase = podPhase(pod);
    if (pod.metadata.deletionTimestamp || phase === 'Failed') {
      groups.ignored.add(name);
      continue;
    }
    if (phase === 'Pending') {
      groups.unready.add(name);
      continue;
    }
    const metric = metrics.get(name);
    if (!metric) {
      groups.missing.add(name);
      continue;
    }
    if (resource === 'cpu') {
      const ready = podCondition(pod, 'Ready');
      const startText = obj(pod.status).startTime;
      const start = typeof startText === 'string' ? Date.parse(startText) : Number.NaN;
      let unready: boolean;
      if (!ready || !Number.isFinite(start)) unready = true;
      else {
        const transition = Date.parse(ready.lastTransitionTime ?? '') || 0;
        if (start + cpuInitializationPeriodMs > now)
          unready = ready.status === 'False' || metric.timestamp < transition + metric.windowMs;
        else unready = ready.status === 'False' && start + delayOfInitialReadinessStatusMs > transition;
      }
      if (unready) {
        groups.unready.add(name);
        continue;
      }
    }
    groups.readyPodCount++;
  }
  return groups;
}

/** calculatePodRequests: each pod's request of the resource (its containers', restartable init containers' too). */
export function podRequests(pods: readonly KubeObject[], container: string, resource: string): Map<string, number> {
  const requests = new Map<string, number>();
  for (const pod of pods) {
    const spec = obj(pod.spec);
    const containers = [
      ...list(spec.containers),
      ...list(spec.initContainers).filter((c) => c.restartPolicy === 'Always'),
    ];
    let sum = 0;
    for (const c of containers) {
      if (container !== '' && c.name !== container) continue;
      const request = obj(obj(c.resources).requests)[resource];
      const q = request === undefined ? undefined : parseQuantity(request);
      if (!q)
        throw new Error(
          `missing request for ${resource} in container ${String(c.name)} of Pod ${pod.metadata.name ?? ''}`,
        );
      sum += Number(milliValue(q));
    }
    requests.set(pod.metadata.name!, sum);
  }
  return requests;
}

/** GetResourceUtilizationRatio: usage over requests of the pods with both, against the target percentage. */
export function resourceUtilizationRatio(
  metrics: PodMetricsInfo,
  requests: ReadonlyMap<string, number>,
  targetUtilization: number,
): { ratio: number; utilization: number; rawAverage: number } {
  let metricsTotal = 0;
  let requestsTotal = 0;
  let entries = 0;
  for (const [pod, metric] of metrics) {
    const request = requests.get(pod);
    // Missing requests are checked elsewhere: a metric without one is extraneous.
    if (request === undefined) continue;
    metricsTotal += metric.value;
    requestsTotal += request;
    entries++;
  }
  if (requestsTotal === 0) throw new Error('no metrics returned matched known pods');
  const utilization = Math.trunc((metricsTotal * 100) / requestsTotal);
  return { ratio: utilization / targetUtilization, utilization, rawAverage: Math.trunc(metricsTotal / entries) };
}

/** GetMetricUsageRatio: the mean usage against the target average value. */
export function metricUsageRatio(metrics: PodMetricsInfo, targetUsage: number): { ratio: number; usage: number } {
  let total = 0;
  for (const m of metrics.values()) total += m.value;
  const usage = Math.trunc(total / metrics.size);
  return { ratio: usage / targetUsage, usage };
}

export interface ReplicaInput {
  currentReplicas: number;
  /** The pods the target's selector selects (the pod lister's answer). */
  pods: readonly KubeObject[];
  /** The metrics API's answer for them; the calculator changes it (it is its own copy). */
  metrics: PodMetricsInfo;
  resource: string;
  container: string;
  now: number;
  tolerance?: number;
}

/**
 * The shared end of GetResourceReplicas and calcPlainMetricReplicas, given the first usage ratio: without unready or
 * missing pods, the ratio times the ready pods (unless within tolerance); else the ratio again with missing pods at
 * `fallback` on a scale-down and at 0 on a scale-up, unready pods at 0 on a scale-up, and no change when that
 * crosses the target or turns the direction.
 */
function proposal(
  input: ReplicaInput,
  groups: PodGroups,
  ratio: number,
  fallback: (pod: string) => number,
  ratioAgain: () => number,
): number {
  const { currentReplicas, metrics } = input;
  const tolerance = input.tolerance ?? DEFAULT_TOLERANCE;
  const scaleUpWithUnready = groups.unready.size > 0 && ratio > 1.0;
  if (!scaleUpWithUnready && groups.missing.size === 0) {
    if (Math.abs(1.0 - ratio) <= tolerance) return currentReplicas;
    return Math.ceil(ratio * groups.readyPodCount);
  }
  const at = (value: number): PodMetric => ({ value, timestamp: 0, windowMs: 0 });
  for (const name of groups.missing) {
    if (ratio < 1.0) metrics.set(name, at(fallback(name)));
    else if (ratio > 1.0) metrics.set(name, at(0));
  }
  if (scaleUpWithUnready) for (const name of groups.unready) metrics.set(name, at(0));
  const next = ratioAgain();
  if (Math.abs(1.0 - next) <= tolerance || (ratio < 1.0 && next > 1.0) || (ratio > 1.0 && next < 1.0))
    return currentReplicas;
  const replicas = Math.ceil(next * metrics.size);
  // A change of direction through the count of pods considered is no change either.
  if ((next < 1.0 && replicas > currentReplicas) || (next > 1.0 && replicas < currentReplicas)) return currentReplicas;
  return replicas;
}

/** The pods that count: metrics of ignored and unready pods dropped; none left is an error. */
function counted(input: ReplicaInput): PodGroups {
  if (input.pods.length === 0) throw new Error('no pods returned by selector while calculating replica count');
  const groups = groupPods(input.pods, input.metrics, input.resource, input.now);
  for (const name of [...groups.ignored, ...groups.unready]) input.metrics.delete(name);
  if (input.metrics.size === 0) throw new Error('did not receive metrics for targeted pods (pods might be unready)');
  return groups;
}

/** GetResourceReplicas: replicas for a target utilization (percent of request), with the utilization seen. */
export function resourceReplicas(
  input: ReplicaInput,
  targetUtilization: number,
): { replicas: number; utilization: number; rawUtilization: number } {
  const groups = counted(input);
  const requests = podRequests(input.pods, input.container, input.resource);
  const { ratio, utilization, rawAverage } = resourceUtilizationRatio(input.metrics, requests, targetUtilization);
  // On a scale-down a missing pod counts at 100% of its request (or at the target, for a target above 100%).
  const fallback = Math.max(100, targetUtilization);
  const replicas = proposal(
    input,
    groups,
    ratio,
    (pod) => Math.trunc(((requests.get(pod) ?? 0) * fallback) / 100),
    () => resourceUtilizationRatio(input.metrics, requests, targetUtilization).ratio,
  );
  return { replicas, utilization, rawUtilization: rawAverage };
}

/** calcPlainMetricReplicas (GetRawResourceReplicas): replicas for a target average value (milli-units per pod). */
export function rawResourceReplicas(input: ReplicaInput, targetUsage: number): { replicas: number; usage: number } {
  const groups = counted(input);
  const { ratio, usage } = metricUsageRatio(input.metrics, targetUsage);
  // On a scale-down a missing pod counts at exactly the target.
  const replicas = proposal(
    input,
    groups,
    ratio,
    () => targetUsage,
    () => metricUsageRatio(input.metrics, targetUsage).ratio,
  );
  return { replicas, usage };
}
