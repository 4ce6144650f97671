import { ApiError } from '../../api/errors.js';
import { formatQuantity, milliValue, parseQuantity } from '../../api/quantity.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { podMetricsOf, rawResourceReplicas, resourceReplicas, type PodMetricsInfo } from './replica-calculator.js';

/**
 * computeStatusForResourceMetric / computeStatusForContainerResourceMetric: one Resource or ContainerResource metric
 * of an HPA, read from metrics.k8s.io (resource_client.go) and the pods, turned into a replica proposal and the
 * MetricStatus kubectl shows (`cpu: 42%/50%`). Errors carry horizontal.go's wrapping, e.g. with no metrics yet:
 *   event FailedGetResourceMetric: failed to get cpu utilization: did not receive metrics for targeted pods (pods
 *     might be unready)
 *   error: failed to get cpu resource metric value: <the same>
 */
type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** What the metric reads: the metrics API's PodMetrics and the pods, both by the target's selector. */
export interface ResourceMetricReads {
  podMetrics(namespace: string, selector: string): Promise<KubeObject[]>;
  pods(namespace: string, selector: string): Promise<KubeObject[]>;
}

export interface ResourceMetricResult {
  replicas: number;
  /** How the rescale reason names it: "cpu resource utilization (percentage of request)". */
  metricName: string;
  status: Obj;
}

/** A metric that could not be computed: the event's reason and message (the condition says it too), and the error returned. */
export class MetricError extends Error {
  constructor(
    readonly reason: string,
    readonly eventMessage: string,
    error: string,
  ) {
    super(error);
  }
}

/** resource.NewMilliQuantity(v, DecimalSI).String(). */
const milliQuantity = (milli: number): string =>
  formatQuantity({ nanos: BigInt(milli) * 1_000_000n, format: 'DecimalSI' });

/** The client's error as client-go prints it: a bare 404 names what was asked for. */
function clientError(err: unknown): string {
  if (err instanceof ApiError && err.code === 404 && err.details === undefined)
    return `${err.message} (get pods.metrics.k8s.io)`;
  return messageOf(err);
}

/** GetResourceMetric: the pods' usage of the resource (one container's, when named). */
async function fetchMetrics(
  reads: ResourceMetricReads,
  resource: string,
  namespace: string,
  selector: string,
  container: string,
): Promise<PodMetricsInfo> {
  let items: KubeObject[];
  try {
    items = await reads.podMetrics(namespace, selector);
  } catch (err) {
    throw new Error(
      `unable to get metrics for resource ${resource}: unable to fetch metrics from resource metrics API: ${clientError(err)}`,
    );
  }
  if (items.length === 0)
    throw new Error(`unable to get metrics for resource ${resource}: no metrics returned from resource metrics API`);
  try {
    return podMetricsOf(items, resource, container);
  } catch (err) {
    throw new Error(
      `unable to get metrics for resource ${resource}: failed to get container metrics: ${messageOf(err)}`,
    );
  }
}

async function listPods(reads: ResourceMetricReads, namespace: string, selector: string): Promise<KubeObject[]> {
  try {
    return await reads.pods(namespace, selector);
  } catch (err) {
    throw new Error(`unable to get pods while calculating replica count: ${messageOf(err)}`);
  }
}

/** computeStatusForResourceMetricGeneric, then the metric's own wrapping and MetricStatus. */
export async function computeResourceMetric(
  reads: ResourceMetricReads,
  metric: Obj,
  currentReplicas: number,
  namespace: string,
  selector: string,
  now: number,
): Promise<ResourceMetricResult> {
  const container = metric.type === 'ContainerResource';
  const source = obj(container ? metric.containerResource : metric.resource);
  const name = String(source.name ?? '');
  const containerName = container ? String(source.container ?? '') : '';
  const target = obj(source.target);
  const fail = (cause: string): MetricError =>
    container
      ? new MetricError(
          'FailedGetContainerResourceMetric',
          cause,
          `failed to get ${containerName} container metric value: ${cause}`,
        )
      : new MetricError('FailedGetResourceMetric', cause, `failed to get ${name} resource metric value: ${cause}`);
  const status = (current: Obj): Obj =>
    container
      ? { type: 'ContainerResource', containerResource: { name, container: containerName, current } }
      : { type: 'Resource', resource: { name, current } };

  if (target.averageValue !== undefined && target.averageValue !== null) {
    const quantity = parseQuantity(target.averageValue);
    const targetUsage = quantity ? Number(milliValue(quantity)) : 0;
    try {
      const metrics = await fetchMetrics(reads, name, namespace, selector, containerName);
      const pods = await listPods(reads, namespace, selector);
      const { replicas, usage } = rawResourceReplicas(
        { currentReplicas, pods, metrics, resource: name, container: containerName, now },
        targetUsage,
      );
      return { replicas, metricName: `${name} resource`, status: status({ averageValue: milliQuantity(usage) }) };
    } catch (err) {
      throw fail(`failed to get ${name} usage: ${messageOf(err)}`);
    }
  }
  if (typeof target.averageUtilization !== 'number')
    throw fail(
      'invalid resource metric source: neither an average utilization target nor an average value (usage) target was set',
    );
  try {
    const metrics = await fetchMetrics(reads, name, namespace, selector, containerName);
    const pods = await listPods(reads, namespace, selector);
    const { replicas, utilization, rawUtilization } = resourceReplicas(
      { currentReplicas, pods, metrics, resource: name, container: containerName, now },
      target.averageUtilization,
    );
    return {
      replicas,
      metricName: container
        ? `${name} container resource utilization (percentage of request)`
        : `${name} resource utilization (percentage of request)`,
      status: status({ averageValue: milliQuantity(rawUtilization), averageUtilization: utilization }),
    };
  } catch (err) {
    throw fail(`failed to get ${name} utilization: ${messageOf(err)}`);
  }
}
