import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { behaviorOf, ScaleHistory, scaleDownLimit, scaleUpLimit } from '../src/controllers/hpa/behavior.js';
import {
  groupPods,
  podMetricsOf,
  rawResourceReplicas,
  resourceReplicas,
  type PodMetricsInfo,
} from '../src/controllers/hpa/replica-calculator.js';

// The HPA's arithmetic without a server, case by case as kube-controller-manager's replica_calculator_test.go and
// horizontal_test.go state them: tolerance, unready and missing pods, requests, and the normalization of a desired
// count by stabilization windows and behavior policies.

const T0 = Date.UTC(2025, 0, 1, 12);
const MIN = 60_000;

interface PodSpec {
  phase?: string;
  ready?: 'True' | 'False' | 'none';
  /** When the pod started and turned (un)ready, before T0. */
  startedAgoMs?: number;
  readyAgoMs?: number;
  request?: string | null;
  deleting?: boolean;
}

function pod(name: string, p: PodSpec = {}): KubeObject {
  const started = T0 - (p.startedAgoMs ?? 10 * MIN);
  const conditions =
    p.ready === 'none'
      ? []
      : [
          {
            type: 'Ready',
            status: p.ready ?? 'True',
            lastTransitionTime: new Date(T0 - (p.readyAgoMs ?? 9 * MIN)).toISOString(),
          },
        ];
  const resources = p.request === null ? {} : { requests: { cpu: p.request ?? '1' } };
  const o: KubeObject = {
    metadata: { name, namespace: 'default' },
    spec: { containers: [{ name: 'c', image: 'nginx', resources }] },
    status: { phase: p.phase ?? 'Running', startTime: new Date(started).toISOString(), conditions },
  };
  if (p.deleting) o.metadata.deletionTimestamp = new Date(T0).toISOString();
  return o;
}

/** Metrics in millicores, sampled 30 s before T0 over 15 s. */
function metrics(values: Record<string, number>): PodMetricsInfo {
  return new Map(
    Object.entries(values).map(([name, value]) => [name, { value, timestamp: T0 - 30_000, windowMs: 15_000 }]),
  );
}

const input = (pods: KubeObject[], m: PodMetricsInfo, currentReplicas = pods.length) => ({
  currentReplicas,
  pods,
  metrics: m,
  resource: 'cpu',
  container: '',
  now: T0,
});

describe('replica calculator (GetResourceReplicas)', () => {
  it('scales up by the usage ratio: 3 pods at 1 core requested using 900m each against 30% → 9', () => {
    const pods = ['a', 'b', 'c'].map((n) => pod(n));
    const r = resourceReplicas(input(pods, metrics({ a: 900, b: 900, c: 900 })), 30);
    assert.deepEqual(r, { replicas: 9, utilization: 90, rawUtilization: 900 });
  });

  it('keeps the count within the 0.1 tolerance: 54% against 50% is a ratio of 1.08', () => {
    const pods = ['a', 'b'].map((n) => pod(n));
    assert.equal(resourceReplicas(input(pods, metrics({ a: 540, b: 540 })), 50).replicas, 2);
    assert.equal(resourceReplicas(input(pods, metrics({ a: 560, b: 560 })), 50).replicas, 3, '1.12: out of tolerance');
  });

  it('scales down by the ratio: 4 pods at 10% against 50% → 1', () => {
    const pods = ['a', 'b', 'c', 'd'].map((n) => pod(n));
    assert.equal(resourceReplicas(input(pods, metrics({ a: 100, b: 100, c: 100, d: 100 })), 50).replicas, 1);
  });

  it('on a scale-up, unready and pending pods count at 0%: the docs walkthrough settles at 5', () => {
    // One pod requesting 200m uses 500m against 50%: 5 replicas; the 4 new ones are pending or without metrics.
    const request = '200m';
    const first = resourceReplicas(input([pod('a', { request })], metrics({ a: 500 }), 1), 50);
    assert.equal(first.replicas, 5);
    const pods = [
      pod('a', { request }),
      pod('b', { request, phase: 'Pending', ready: 'False' }),
      pod('c', { request, phase: 'Pending', ready: 'False' }),
      pod('d', { request, startedAgoMs: 20_000, readyAgoMs: 5_000 }),
      pod('e', { request, startedAgoMs: 20_000, readyAgoMs: 5_000 }),
    ];
    // d and e are Ready, but their metrics are older than a window since: unready in their first 5 minutes.
    const groups = groupPods(pods, metrics({ a: 500, d: 100, e: 100 }), 'cpu', T0);
    assert.deepEqual([...groups.unready].sort(), ['b', 'c', 'd', 'e']);
    assert.equal(groups.readyPodCount, 1);
    const r = resourceReplicas(input(pods, metrics({ a: 500, d: 100, e: 100 }), 5), 50);
    // 500 / (5 × 200) = 50%: ratio 1.0, so no change.
    assert.equal(r.replicas, 5);
    assert.equal(r.utilization, 250, 'the utilization reported is of the ready pods alone');
  });

  it('on a scale-down, pods without metrics count at 100% of their request', () => {
    const pods = ['a', 'b', 'c', 'd'].map((n) => pod(n));
    // a and b use 100m of 1 core: 10%; c and d have no metrics, so 1000m each: (200 + 2000) / 4000 = 55% against 50%.
    const r = resourceReplicas(input(pods, metrics({ a: 100, b: 100 })), 50);
    assert.equal(r.replicas, 4, 'filled in, the ratio is 1.1: across the target from 0.2, so no change');
    const five = ['a', 'b', 'c', 'd', 'e'].map((n) => pod(n));
    // (3 × 100 + 2 × 1000) / 5000 = 46% against 60% → 0.766… → ceil(0.766 × 5) = 4.
    assert.equal(resourceReplicas(input(five, metrics({ a: 100, b: 100, c: 100 })), 60).replicas, 4);
  });

  it('deleted and failed pods are ignored; a pod unready long after start is unready only if it never was ready', () => {
    const pods = [
      pod('a'),
      pod('gone', { deleting: true }),
      pod('failed', { phase: 'Failed' }),
      pod('late', { ready: 'False', startedAgoMs: 10 * MIN, readyAgoMs: 9 * MIN }),
      pod('never', { ready: 'False', startedAgoMs: 10 * MIN, readyAgoMs: 10 * MIN - 10_000 }),
    ];
    const groups = groupPods(pods, metrics({ a: 1, gone: 1, failed: 1, late: 1, never: 1 }), 'cpu', T0);
    assert.deepEqual([...groups.ignored].sort(), ['failed', 'gone']);
    assert.deepEqual([...groups.unready], ['never']);
    assert.equal(groups.readyPodCount, 2);
  });

  it('says what kube-controller-manager says when it cannot compute: no pods, no usable metrics, no request', () => {
    assert.throws(() => resourceReplicas(input([], metrics({})), 50), {
      message: 'no pods returned by selector while calculating replica count',
    });
    assert.throws(() => resourceReplicas(input([pod('a', { phase: 'Pending' })], metrics({ a: 5 })), 50), {
      message: 'did not receive metrics for targeted pods (pods might be unready)',
    });
    assert.throws(() => resourceReplicas(input([pod('a', { request: null })], metrics({ a: 5 })), 50), {
      message: 'missing request for cpu in container c of Pod a',
    });
  });

  it('an AverageValue target divides the mean usage by it (GetRawResourceReplicas)', () => {
    const pods = ['a', 'b'].map((n) => pod(n, { request: null }));
    assert.deepEqual(rawResourceReplicas(input(pods, metrics({ a: 300, b: 500 })), 100), { replicas: 8, usage: 400 });
    assert.equal(rawResourceReplicas(input(pods, metrics({ a: 95, b: 105 })), 100).replicas, 2, 'within tolerance');
  });

  it('reads PodMetrics as the resource metrics client does: milli-values summed, a container picked', () => {
    const items: KubeObject[] = [
      {
        metadata: { name: 'a', namespace: 'default' },
        timestamp: '2025-01-01T12:00:00Z',
        window: '15s',
        containers: [
          { name: 'app', usage: { cpu: '250000001n', memory: '64Mi' } },
          { name: 'side', usage: { cpu: '5m', memory: '8Mi' } },
        ],
      },
    ];
    assert.deepEqual(podMetricsOf(items, 'cpu', ''), new Map([['a', { value: 256, timestamp: T0, windowMs: 15_000 }]]));
    assert.equal(podMetricsOf(items, 'cpu', 'side').get('a')?.value, 5);
    assert.throws(() => podMetricsOf(items, 'cpu', 'web'), {
      message: 'container web not present in metrics for pod default/a',
    });
  });
});

describe('normalization without spec.behavior', () => {
  const n = (current: number, desired: number, at: number) => ({ current, desired, min: 1, max: 10, now: at });

  it('scale-up at most to max(2 × current, 4): ScalingLimited True, ScaleUpLimit', () => {
    const h = new ScaleHistory();
    h.recordInitial(1, T0);
    const r = h.normalize(n(1, 7, T0));
    assert.equal(r.replicas, 4);
    assert.deepEqual(
      r.conditions.map((c) => [c.type, c.status, c.reason]),
      [
        ['AbleToScale', 'True', 'ReadyForNewScale'],
        ['ScalingLimited', 'True', 'ScaleUpLimit'],
      ],
    );
  });

  it('scale-down waits for the highest recommendation of the last 5 minutes: ScaleDownStabilized', () => {
    const h = new ScaleHistory();
    h.recordInitial(7, T0);
    assert.equal(h.normalize(n(7, 7, T0)).replicas, 7);
    const early = h.normalize(n(7, 1, T0 + 4 * MIN));
    assert.equal(early.replicas, 7);
    assert.deepEqual(early.conditions[0], {
      type: 'AbleToScale',
      status: 'True',
      reason: 'ScaleDownStabilized',
      message: 'recent recommendations were higher than current one, applying the highest recent recommendation',
    });
    assert.equal(h.normalize(n(7, 1, T0 + 5 * MIN)).replicas, 7, 'the 7 of T0 is still in the window');
    assert.equal(h.normalize(n(7, 1, T0 + 5 * MIN + 1)).replicas, 1, 'past the window: straight to 1');
  });

  it('clamps to the range: TooManyReplicas, TooFewReplicas, else DesiredWithinRange', () => {
    const h = new ScaleHistory();
    assert.equal(
      h.normalize({ current: 8, desired: 30, min: 1, max: 10, now: T0 }).conditions[1]!.reason,
      'TooManyReplicas',
    );
    const h2 = new ScaleHistory();
    assert.deepEqual(h2.normalize({ current: 3, desired: 1, min: 2, max: 10, now: T0 }).replicas, 2);
    const h3 = new ScaleHistory();
    assert.deepEqual(h3.normalize({ current: 3, desired: 5, min: 1, max: 10, now: T0 }).conditions[1], {
      type: 'ScalingLimited',
      status: 'False',
      reason: 'DesiredWithinRange',
      message: 'the desired count is within the acceptable range',
    });
  });
});

describe('behavior policies (autoscaling/v2)', () => {
  const defaults = behaviorOf({ behavior: {} })!;

  it('defaults: scale-up 4 pods or 100% per 15 s (Max), scale-down 100% per 15 s after 300 s', () => {
    assert.deepEqual(defaults, {
      scaleUp: {
        stabilizationWindowSeconds: 0,
        selectPolicy: 'Max',
        policies: [
          { type: 'Pods', value: 4, periodSeconds: 15 },
          { type: 'Percent', value: 100, periodSeconds: 15 },
        ],
      },
      scaleDown: {
        stabilizationWindowSeconds: 300,
        selectPolicy: 'Max',
        policies: [{ type: 'Percent', value: 100, periodSeconds: 15 }],
      },
    });
    assert.equal(behaviorOf({}), undefined);
  });

  it('the worked example: 3 replicas, 2 added 10 s ago → at most 5 (Pods 1 + 4 beats Percent 1 × 2)', () => {
    const up = [{ change: 2, at: T0 - 10_000, outdated: false }];
    assert.equal(scaleUpLimit(3, { up, down: [] }, defaults.scaleUp, T0), 5);
    assert.equal(scaleUpLimit(3, { up, down: [] }, { ...defaults.scaleUp, selectPolicy: 'Min' }, T0), 2);
    assert.equal(scaleUpLimit(3, { up, down: [] }, { ...defaults.scaleUp, selectPolicy: 'Disabled' }, T0), 3);
    assert.equal(scaleUpLimit(3, { up, down: [] }, defaults.scaleUp, T0 + 10_000), 7, 'the event left the 15 s period');
  });

  it('scale-down limits: Percent rounds down, Pods subtracts, Min picks the smaller change', () => {
    const rules = {
      stabilizationWindowSeconds: 0,
      selectPolicy: 'Max',
      policies: [
        { type: 'Percent', value: 50, periodSeconds: 60 },
        { type: 'Pods', value: 1, periodSeconds: 60 },
      ],
    };
    assert.equal(scaleDownLimit(5, { up: [], down: [] }, rules, T0), 2, 'Max: the larger change, 5 × 0.5 = 2.5 → 2');
    assert.equal(scaleDownLimit(5, { up: [], down: [] }, { ...rules, selectPolicy: 'Min' }, T0), 4);
    const down = [{ change: 2, at: T0 - 30_000, outdated: false }];
    assert.equal(scaleDownLimit(3, { up: [], down }, rules, T0), 2, 'the period started at 5 replicas');
  });

  it('a scale-down policy of 1 pod per minute steps down and says ScaleDownLimit', () => {
    const behavior = behaviorOf({
      behavior: {
        scaleDown: { stabilizationWindowSeconds: 0, policies: [{ type: 'Pods', value: 1, periodSeconds: 60 }] },
      },
    })!;
    const h = new ScaleHistory();
    h.recordInitial(5, T0);
    const first = h.normalizeWithBehavior({ current: 5, desired: 1, min: 1, max: 10, now: T0 }, behavior);
    assert.equal(first.replicas, 4);
    assert.deepEqual(first.conditions[1], {
      type: 'ScalingLimited',
      status: 'True',
      reason: 'ScaleDownLimit',
      message: 'the desired replica count is decreasing faster than the maximum scale rate',
    });
    h.recordScale(behavior, 5, 4, T0);
    assert.equal(
      h.normalizeWithBehavior({ current: 4, desired: 1, min: 1, max: 10, now: T0 + 15_000 }, behavior).replicas,
      4,
    );
    assert.equal(
      h.normalizeWithBehavior({ current: 4, desired: 1, min: 1, max: 10, now: T0 + 61_000 }, behavior).replicas,
      3,
    );
  });

  it('a scale-up stabilization window takes the lowest recent recommendation: ScaleUpStabilized', () => {
    const behavior = behaviorOf({ behavior: { scaleUp: { stabilizationWindowSeconds: 60 } } })!;
    const h = new ScaleHistory();
    h.recordInitial(2, T0);
    const r = h.normalizeWithBehavior({ current: 2, desired: 6, min: 1, max: 10, now: T0 + 30_000 }, behavior);
    assert.equal(r.replicas, 2);
    assert.equal(r.conditions[0]!.reason, 'ScaleUpStabilized');
    assert.equal(
      h.normalizeWithBehavior({ current: 2, desired: 6, min: 1, max: 10, now: T0 + 61_000 }, behavior).replicas,
      6,
      'the 2 of T0 left the window; the 6 of T0+30s is the lowest now',
    );
  });
});
