import { ApiError } from '../../api/errors.js';
import { goLabelSelectorString, LabelSelector, parseLabelSelector } from '../../api/selectors.js';
import { deepCopy, deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { rfc3339 } from '../../clock/clock.js';
import type { Gvr } from '../../client/client.js';
import {
  ReconcileLoop,
  type Controller,
  type ControllerContext,
  type ReconcileResult,
} from '../../runtime/controller.js';
import { behaviorOf, ScaleHistory } from './behavior.js';
import {
  computeResourceMetric,
  MetricError,
  type ResourceMetricReads,
  type ResourceMetricResult,
} from './resource-metrics.js';

/**
 * The HorizontalPodAutoscaler controller (kube-controller-manager's horizontalpodautoscaling, pkg/controller/
 * podautoscaler/horizontal.go). Every sync period it reads the target's /scale, clamps replicas outside
 * [minReplicas, maxReplicas] through it, and in range computes the replicas each metric asks for: Resource and
 * ContainerResource metrics from metrics.k8s.io (the replica calculator, ./replica-calculator.ts), then the
 * stabilization and rate limits of ./behavior.ts, with kube-controller-manager's conditions, events and texts.
 * Pods, Object and External metrics need a custom or external metrics adapter, which kube-sim does not run: they
 * fail as they do in a cluster without one, and so do Resource metrics with `--no-metrics-server`.
 */
export const DEFAULT_SYNC_PERIOD_MS = 15_000; // --horizontal-pod-autoscaler-sync-period

const HPAS: Gvr = { group: 'autoscaling', version: 'v2', resource: 'horizontalpodautoscalers' };
const PODS: Gvr = { group: '', version: 'v1', resource: 'pods' };
const POD_METRICS: Gvr = { group: 'metrics.k8s.io', version: 'v1beta1', resource: 'pods' };
const COMPONENT = 'horizontal-pod-autoscaler';
/** client-go's answer to a list of an API group nobody serves (external.metrics.k8s.io without an adapter). */
const NOT_SERVED = 'the server could not find the requested resource';
const NO_CUSTOM_METRICS =
  'unable to fetch metrics from custom metrics API: no custom metrics API (custom.metrics.k8s.io) registered';
/** retry.DefaultRetry's steps for a scale update that meets a conflict. */
const SCALE_UPDATE_ATTEMPTS = 5;

type Obj = Record<string, unknown>;
type ConditionStatus = 'True' | 'False';

interface Condition {
  type: string;
  status: ConditionStatus;
  lastTransitionTime?: string;
  reason: string;
  message: string;
}

/** autoscaling/v2 HorizontalPodAutoscalerStatus as Go holds it: omitempty fields are absent when zero. */
interface Status {
  lastScaleTime?: string;
  currentReplicas?: number;
  desiredReplicas: number;
  currentMetrics?: Obj[];
  conditions?: Condition[];
}

/** One metric's failure: the event and ScalingActive condition (getUnableComputeReplicaCountCondition), the error. */
interface MetricFailure {
  reason: string;
  /** The error the condition and the event carry. */
  cause: string;
  /** The error computeReplicasForMetric returns, wrapping `cause`. */
  error: string;
}

const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const num = (v: unknown): number => (typeof v === 'number' ? v : 0);
const nonEmpty = <T>(v: T[] | undefined): T[] | undefined => (v && v.length > 0 ? v : undefined);
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** A status read from the API in Go's shape, so that comparing it with a computed one is apiequality.Semantic. */
function statusOf(raw: unknown): Status {
  const s = obj(raw);
  const status: Status = { desiredReplicas: num(s.desiredReplicas) };
  if (typeof s.lastScaleTime === 'string') status.lastScaleTime = s.lastScaleTime;
  if (num(s.currentReplicas) !== 0) status.currentReplicas = num(s.currentReplicas);
  const metrics = Array.isArray(s.currentMetrics) ? s.currentMetrics.map(obj) : undefined;
  if (nonEmpty(metrics)) status.currentMetrics = metrics;
  const conditions = Array.isArray(s.conditions) ? (s.conditions.map(obj) as unknown as Condition[]) : undefined;
  if (nonEmpty(conditions)) status.conditions = conditions;
  return status;
}

/** setConditionInList: the transition time moves only when the status does (a new condition's status was ""). */
export function setCondition(
  status: Status,
  type: string,
  value: ConditionStatus,
  reason: string,
  message: string,
  now: number,
): void {
  const conditions = (status.conditions ??= []);
  const index = conditions.findIndex((c) => c.type === type);
  const previous = conditions[index];
  const since = previous && previous.status === value ? previous.lastTransitionTime : rfc3339(now);
  // In Go's field order, so that a written condition reads as kube-controller-manager's does.
  const next: Condition =
    since === undefined
      ? { type, status: value, reason, message }
      : { type, status: value, lastTransitionTime: since, reason, message };
  if (index >= 0) conditions[index] = next;
  else conditions.push(next);
}

function removeCondition(status: Status, type: string): void {
  if (status.conditions) status.conditions = nonEmpty(status.conditions.filter((c) => c.type !== type));
}

/** setStatus: a new status keeping lastScaleTime (moved on a rescale) and the conditions. */
function withReplicas(
  status: Status,
  currentReplicas: number,
  desiredReplicas: number,
  metrics: Obj[] | undefined,
  rescaledAt?: number,
): Status {
  const next: Status = { desiredReplicas };
  const lastScaleTime = rescaledAt !== undefined ? rfc3339(rescaledAt) : status.lastScaleTime;
  if (lastScaleTime !== undefined) next.lastScaleTime = lastScaleTime;
  if (currentReplicas !== 0) next.currentReplicas = currentReplicas;
  if (nonEmpty(metrics)) next.currentMetrics = metrics;
  if (nonEmpty(status.conditions)) next.conditions = status.conditions;
  return next;
}

/** schema.ParseGroupVersion: "" and "v1" are the core group; more than one slash is an error. */
function parseGroupVersion(apiVersion: string): { group: string } | { error: string } {
  if (apiVersion === '' || apiVersion === '/') return { group: '' };
  const parts = apiVersion.split('/');
  if (parts.length === 1) return { group: '' };
  if (parts.length === 2) return { group: parts[0]! };
  return { error: `unexpected GroupVersion string: ${apiVersion}` };
}

/**
 * What computeReplicasForMetric reports for a metric no adapter serves (Pods, Object, External: replica_calculator.go
 * and metrics/client.go wrap the client's error on the way up). E.g. a Pods metric:
 *   event FailedGetPodsMetric: unable to get metric packets: unable to fetch metrics from custom metrics API: no
 *     custom metrics API (custom.metrics.k8s.io) registered
 *   error: failed to get pods metric value: <the same>
 */
export function metricFailure(metric: Obj, namespace: string): MetricFailure {
  const type = str(metric.type);
  switch (type) {
    case 'Pods': {
      const cause = `unable to get metric ${str(obj(obj(metric.pods).metric).name)}: ${NO_CUSTOM_METRICS}`;
      return { reason: 'FailedGetPodsMetric', cause, error: `failed to get pods metric value: ${cause}` };
    }
    case 'Object': {
      const source = obj(metric.object);
      const name = str(obj(source.metric).name);
      const target = obj(source.target);
      const described = obj(source.describedObject);
      // The format's verbs and arguments do not line up in replica_calculator.go; this is what it prints.
      const cause = `unable to get metric ${name}: ${str(described.kind)} on ${namespace} ${str(described.name)}/${NO_CUSTOM_METRICS}`;
      if (target.type === 'Value' && target.value !== undefined)
        return { reason: 'FailedGetObjectMetric', cause, error: `failed to get object metric value: ${cause}` };
      if (target.type === 'AverageValue' && target.averageValue !== undefined) {
        return {
          reason: 'FailedGetObjectMetric',
          cause,
          error: `failed to get object metric value: failed to get ${name} object metric: ${cause}`,
        };
      }
      const invalid = 'invalid object metric source: neither a value target nor an average value target was set';
      return {
        reason: 'FailedGetObjectMetric',
        cause: invalid,
        error: `failed to get object metric value: ${invalid}`,
      };
    }
    case 'External': {
      const m = obj(obj(metric.external).metric);
      const name = str(m.name);
      const target = obj(obj(metric.external).target);
      const cause = `unable to get external metric ${namespace}/${name}/${goLabelSelectorString(m.selector)}: unable to fetch metrics from external metrics API: ${NOT_SERVED} (get ${name}.external.metrics.k8s.io)`;
      const wrap = (inner: string): string => `failed to get ${name} external metric value: ${inner}`;
      if (target.averageValue !== undefined)
        return {
          reason: 'FailedGetExternalMetric',
          cause,
          error: wrap(`failed to get ${name} external metric: ${cause}`),
        };
      if (target.value !== undefined)
        return {
          reason: 'FailedGetExternalMetric',
          cause,
          error: wrap(`failed to get external metric ${name}: ${cause}`),
        };
      const invalid = 'invalid external metric source: neither a value target nor an average value target was set';
      return { reason: 'FailedGetExternalMetric', cause: invalid, error: wrap(invalid) };
    }
    default: {
      const cause = `unknown metric source type ${JSON.stringify(type)}`;
      return { reason: 'InvalidMetricSourceType', cause, error: cause };
    }
  }
}

export function hpaController(ctx: ControllerContext, syncPeriodMs = DEFAULT_SYNC_PERIOD_MS): Controller {
  const hpas = ctx.informers.for(HPAS);
  const recorder = ctx.recorder(COMPONENT);
  const loop = new ReconcileLoop('horizontalpodautoscaling', ctx, reconcile);
  /** What each HPA's past syncs recommended and scaled (horizontal.go's recommendations and scale events). */
  const histories = new Map<string, ScaleHistory>();
  const reads: ResourceMetricReads = {
    podMetrics: async (namespace, selector) =>
      (await ctx.client.list(POD_METRICS, namespace, { labelSelector: selector })).items,
    // The label index answers the selector: the pods of the target, not a scan of the namespace.
    pods: async (namespace, selector) => (await ctx.client.list(PODS, namespace, { labelSelector: selector })).items,
  };
  const keyOf = (hpa: KubeObject): string => `${hpa.metadata.namespace}/${hpa.metadata.name}`;
  /**
   * horizontal.go's hpaSelectors: each known HPA's target selector by namespace, registered as selecting nothing
   * until its first sync parses the target's, so that pods selected by two HPAs are found (AmbiguousSelector).
   */
  const hpaSelectors = new Map<string, Map<string, LabelSelector>>();
  const register = (hpa: KubeObject): void => {
    const namespace = hpa.metadata.namespace!;
    let inNamespace = hpaSelectors.get(namespace);
    if (!inNamespace) hpaSelectors.set(namespace, (inNamespace = new Map()));
    if (!inNamespace.has(hpa.metadata.name!)) inNamespace.set(hpa.metadata.name!, LabelSelector.nothing());
  };

  // enqueueHPA: AddRateLimited on a rate limiter that always answers the sync period, so a new or changed HPA is
  // looked at within one period, never sooner (an earlier pending look wins).
  hpas.addEventHandler({
    add: (hpa) => {
      loop.queue.addAfter(keyOf(hpa), syncPeriodMs);
      register(hpa);
    },
    update: (_old, hpa) => {
      loop.queue.addAfter(keyOf(hpa), syncPeriodMs);
      register(hpa);
    },
    delete: (hpa) => {
      hpaSelectors.get(hpa.metadata.namespace!)?.delete(hpa.metadata.name!);
    },
  });

  /** hpasControllingPodsUnderSelector: the keys of every HPA whose target selects one of these pods, sorted. */
  function hpasControlling(namespace: string, pods: readonly KubeObject[]): string[] {
    const selecting = new Set<string>();
    for (const [name, selector] of hpaSelectors.get(namespace) ?? [])
      if (pods.some((pod) => selector.matches(pod.metadata.labels))) selecting.add(`${namespace}/${name}`);
    return [...selecting].sort();
  }

  async function reconcile(key: string): Promise<ReconcileResult | void> {
    const slash = key.indexOf('/');
    const hpa = hpas.get(key.slice(0, slash), key.slice(slash + 1));
    if (!hpa) {
      histories.delete(key);
      return;
    }
    try {
      await reconcileAutoscaler(deepCopy(hpa), key);
    } catch (err) {
      // processNextWorkItem: every error is only logged; the HPA comes back after the sync period all the same.
      if (!(err instanceof ApiError && err.code === 409))
        ctx.log('debug', `horizontalpodautoscaling: ${key}: ${messageOf(err)}`);
    }
    return { requeueAfterMs: syncPeriodMs };
  }

  async function reconcileAutoscaler(hpa: KubeObject, key: string): Promise<void> {
    const namespace = hpa.metadata.namespace!;
    const original = statusOf(hpa.status);
    let status = statusOf(hpa.status);
    const spec = obj(hpa.spec);
    const ref = obj(spec.scaleTargetRef);
    const reference = `${str(ref.kind)}/${namespace}/${str(ref.name)}`;
    const now = (): number => ctx.clock.now();

    const updateStatusIfNeeded = async (): Promise<void> => {
      if (deepEqual(original, status)) return;
      try {
        await ctx.client.updateStatus(HPAS, { ...hpa, status });
      } catch (err) {
        recorder.event(hpa, 'Warning', 'FailedUpdateStatus', messageOf(err));
        throw new Error(`failed to update status for ${hpa.metadata.name}: ${messageOf(err)}`);
      }
    };
    const failedGetScale = async (message: string): Promise<Error> => {
      recorder.event(hpa, 'Warning', 'FailedGetScale', message);
      setCondition(
        status,
        'AbleToScale',
        'False',
        'FailedGetScale',
        `the HPA controller was unable to get the target's current scale: ${message}`,
        now(),
      );
      await updateStatusIfNeeded().catch((err: unknown) => ctx.log('debug', messageOf(err)));
      return new Error(`failed to query scale subresource for ${reference}: ${message}`);
    };

    // The target's RESTMappings: every served version of its group and kind, tried in turn; the first error stands.
    const gv = parseGroupVersion(str(ref.apiVersion));
    if ('error' in gv) throw await failedGetScale(gv.error);
    const mappings = ctx.resources.all().filter((r) => r.gvr.group === gv.group && r.kind === str(ref.kind));
    if (mappings.length === 0)
      throw await failedGetScale(
        `no matches for kind ${JSON.stringify(str(ref.kind))} in group ${JSON.stringify(gv.group)}`,
      );
    let scale: KubeObject | undefined;
    let target: Gvr | undefined;
    let firstError: unknown;
    for (const mapping of mappings) {
      try {
        scale = await ctx.client.getScale!(mapping.gvr, namespace, str(ref.name));
        target = mapping.gvr;
        break;
      } catch (err) {
        firstError ??= err;
      }
    }
    if (!scale || !target) throw await failedGetScale(messageOf(firstError));
    setCondition(
      status,
      'AbleToScale',
      'True',
      'SucceededGetScale',
      "the HPA controller was able to get the target's current scale",
      now(),
    );

    const currentReplicas = num(obj(scale.spec).replicas);
    let history = histories.get(key);
    if (!history) histories.set(key, (history = new ScaleHistory()));
    history.recordInitial(currentReplicas, now());
    const behavior = behaviorOf(spec);
    let metricStatuses: Obj[] | undefined;
    /** Some metrics failed but others gave a proposal: the sync scales on those and ends with this error. */
    let partialError: string | undefined;
    const minReplicas = typeof spec.minReplicas === 'number' ? spec.minReplicas : 1;
    const maxReplicas = num(spec.maxReplicas);
    let desiredReplicas = 0;
    let rescaleReason = '';
    let rescale = true;

    if (currentReplicas === 0) {
      // Someone scaled the target to zero: the HPA leaves it alone (HPAScaleToZero is off by default).
      rescale = false;
      setCondition(
        status,
        'ScalingActive',
        'False',
        'ScalingDisabled',
        'scaling is disabled since the replica count of the target is zero',
        now(),
      );
      removeCondition(status, 'ScaledToZero');
    } else if (currentReplicas > maxReplicas) {
      rescaleReason = 'Current number of replicas above Spec.MaxReplicas';
      desiredReplicas = maxReplicas;
    } else if (currentReplicas < minReplicas) {
      rescaleReason = 'Current number of replicas below Spec.MinReplicas';
      desiredReplicas = minReplicas;
    } else {
      const computed = await computeReplicasForMetrics(hpa, status, scale, namespace, now());
      metricStatuses = computed.statuses;
      if (computed.replicas === -1) {
        status = withReplicas(status, currentReplicas, status.desiredReplicas, metricStatuses);
        await updateStatusIfNeeded().catch((err: unknown) => ctx.log('debug', messageOf(err)));
        recorder.event(hpa, 'Warning', 'FailedComputeMetricsReplicas', computed.error ?? '');
        throw new Error(
          `failed to compute desired number of replicas based on listed metrics for ${reference}: ${computed.error}`,
        );
      }
      partialError = computed.error;
      let rescaleMetric = '';
      if (computed.replicas > desiredReplicas) {
        desiredReplicas = computed.replicas;
        rescaleMetric = computed.metric;
      }
      if (desiredReplicas > currentReplicas) rescaleReason = `${rescaleMetric} above target`;
      if (desiredReplicas < currentReplicas) rescaleReason = 'All metrics below target';
      const normalization = {
        current: currentReplicas,
        desired: desiredReplicas,
        min: minReplicas,
        max: maxReplicas,
        now: now(),
      };
      const normalized = behavior
        ? history.normalizeWithBehavior(normalization, behavior)
        : history.normalize(normalization);
      for (const c of normalized.conditions) setCondition(status, c.type, c.status, c.reason, c.message, now());
      desiredReplicas = normalized.replicas;
      rescale = desiredReplicas !== currentReplicas;
    }

    if (rescale) {
      try {
        await updateScale(target, scale, desiredReplicas);
      } catch (err) {
        recorder.event(
          hpa,
          'Warning',
          'FailedRescale',
          `New size: ${desiredReplicas}; reason: ${rescaleReason}; error: ${messageOf(err)}`,
        );
        setCondition(
          status,
          'AbleToScale',
          'False',
          'FailedUpdateScale',
          `the HPA controller was unable to update the target scale: ${messageOf(err)}`,
          now(),
        );
        status = withReplicas(status, currentReplicas, status.desiredReplicas, metricStatuses);
        await updateStatusIfNeeded().catch((e: unknown) => ctx.log('debug', messageOf(e)));
        throw new Error(`failed to rescale ${reference}: ${messageOf(err)}`);
      }
      setCondition(
        status,
        'AbleToScale',
        'True',
        'SucceededRescale',
        `the HPA controller was able to update the target scale to ${desiredReplicas}`,
        now(),
      );
      recorder.event(hpa, 'Normal', 'SuccessfulRescale', `New size: ${desiredReplicas}; reason: ${rescaleReason}`);
      history.recordScale(behavior, currentReplicas, desiredReplicas, now());
      removeCondition(status, 'ScaledToZero');
    } else desiredReplicas = currentReplicas;

    status = withReplicas(status, currentReplicas, desiredReplicas, metricStatuses, rescale ? now() : undefined);
    await updateStatusIfNeeded();
    if (partialError !== undefined) throw new Error(partialError);
  }

  /** Scales(ns).Update under retry.RetryOnConflict: a conflict re-reads the scale and tries again. */
  async function updateScale(target: Gvr, scale: KubeObject, replicas: number): Promise<void> {
    let current = scale;
    for (let attempt = 1; ; attempt++) {
      try {
        await ctx.client.updateScale!(target, { ...current, spec: { ...obj(current.spec), replicas } });
        return;
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 409) || attempt >= SCALE_UPDATE_ATTEMPTS) throw err;
        current = await ctx.client.getScale!(target, current.metadata.namespace, current.metadata.name!).catch(
          () => current,
        );
      }
    }
  }

  /**
   * computeReplicasForMetrics: the selector checks, then each metric's proposal (an event per failing one); the
   * highest proposal wins. All failing, or some failing while the rest would scale down: -1 and ScalingActive False
   * from the first failure; else ScalingActive True (ValidMetricFound). `statuses` has one MetricStatus per metric,
   * empty ({type: ""}, which kubectl shows as <unknown>) where it failed.
   */
  async function computeReplicasForMetrics(
    hpa: KubeObject,
    status: Status,
    scale: KubeObject,
    namespace: string,
    now: number,
  ): Promise<{ replicas: number; metric: string; statuses?: Obj[]; error?: string }> {
    const selector = str(obj(scale.status).selector);
    if (selector === '') {
      recorder.event(hpa, 'Warning', 'SelectorRequired', 'selector is required');
      setCondition(
        status,
        'ScalingActive',
        'False',
        'InvalidSelector',
        "the HPA target's scale is missing a selector",
        now,
      );
      return { replicas: -1, metric: '', error: 'selector is required' };
    }
    let parsed: LabelSelector;
    try {
      parsed = parseLabelSelector(selector);
    } catch (err) {
      const message = `couldn't convert selector into a corresponding internal selector object: ${messageOf(err)}`;
      recorder.event(hpa, 'Warning', 'InvalidSelector', message);
      setCondition(status, 'ScalingActive', 'False', 'InvalidSelector', message, now);
      return { replicas: -1, metric: '', error: message };
    }
    const known = hpaSelectors.get(namespace);
    if (known?.has(hpa.metadata.name!)) known.set(hpa.metadata.name!, parsed);
    const selecting = hpasControlling(namespace, await reads.pods(namespace, selector));
    if (selecting.length > 1) {
      const message = `pods by selector ${selector} are controlled by multiple HPAs: [${selecting.join(' ')}]`;
      recorder.event(hpa, 'Warning', 'AmbiguousSelector', message);
      setCondition(status, 'ScalingActive', 'False', 'AmbiguousSelector', message, now);
      return { replicas: -1, metric: '', error: message };
    }
    const specReplicas = num(obj(scale.spec).replicas);
    const metrics = (Array.isArray(obj(hpa.spec).metrics) ? (obj(hpa.spec).metrics as unknown[]) : []).map(obj);
    const statuses: Obj[] = metrics.map(() => ({ type: '' }));
    let replicas = 0;
    let metric = '';
    let invalid = 0;
    let first: MetricFailure | undefined;
    for (const [i, spec] of metrics.entries()) {
      try {
        const proposal = await computeReplicasForMetric(spec, specReplicas, namespace, selector, now);
        statuses[i] = proposal.status;
        if (replicas === 0 || proposal.replicas > replicas) {
          replicas = proposal.replicas;
          metric = proposal.metricName;
        }
      } catch (err) {
        const failure: MetricFailure =
          err instanceof MetricError
            ? { reason: err.reason, cause: err.eventMessage, error: err.message }
            : { reason: 'FailedGetResourceMetric', cause: messageOf(err), error: messageOf(err) };
        recorder.event(hpa, 'Warning', failure.reason, failure.cause);
        first ??= failure;
        invalid++;
      }
    }
    const error = first
      ? `invalid metrics (${invalid} invalid out of ${metrics.length}), first error is: ${first.error}`
      : undefined;
    if (invalid >= metrics.length || (invalid > 0 && replicas < specReplicas)) {
      if (first)
        setCondition(
          status,
          'ScalingActive',
          'False',
          first.reason,
          `the HPA was unable to compute the replica count: ${first.cause}`,
          now,
        );
      return { replicas: -1, metric: '', statuses, error };
    }
    setCondition(
      status,
      'ScalingActive',
      'True',
      'ValidMetricFound',
      `the HPA was able to successfully calculate a replica count from ${metric}`,
      now,
    );
    return { replicas, metric, statuses, error };
  }

  /** computeReplicasForMetric: Resource metrics from the metrics API; the others as no adapter serves them. */
  async function computeReplicasForMetric(
    spec: Obj,
    specReplicas: number,
    namespace: string,
    selector: string,
    now: number,
  ): Promise<ResourceMetricResult> {
    if (spec.type === 'Resource' || spec.type === 'ContainerResource')
      return computeResourceMetric(reads, spec, specReplicas, namespace, selector, now);
    const failure = metricFailure(spec, namespace);
    throw new MetricError(failure.reason, failure.cause, failure.error);
  }

  return { name: 'horizontalpodautoscaling', start: async () => loop.start(), stop: () => loop.stop() };
}
