import assert from 'node:assert/strict';
import { after, before, describe, it, test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { startSimulator, type Simulator } from '../src/cluster/simulator.js';
import { Api } from './helpers/http.js';
import { kubectlAgainst, skipWithoutKubectl } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// The HPA controller as kube-controller-manager runs it without metrics-server: clamping to [min, max] through the
// scale subresource, and in range the metrics errors, conditions and events of a metrics-less cluster.

type Obj = Record<string, unknown>;
const SYNC_MS = 15_000;
const CPU_NOT_SERVED =
  'failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)';

describe('horizontalpodautoscaling without metrics-server, on a virtual clock', () => {
  let sim: Simulator;
  const ns = 'default';
  const kinds = () => ({
    deployments: sim.cluster.kind('apps', 'v1', 'deployments'),
    hpas: sim.cluster.kind('autoscaling', 'v2', 'horizontalpodautoscalers'),
    events: sim.cluster.kind('', 'v1', 'events'),
  });
  const deployment = (name: string, replicas: number): void => {
    sim.cluster.api.create(kinds().deployments, ns, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name },
      spec: {
        replicas,
        selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
      },
    });
  };
  const hpa = (name: string, min: number, max: number): void => {
    sim.cluster.api.create(kinds().hpas, ns, {
      apiVersion: 'autoscaling/v2',
      kind: 'HorizontalPodAutoscaler',
      metadata: { name },
      spec: { scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name }, minReplicas: min, maxReplicas: max },
    });
  };
  const replicas = (name: string): unknown => (sim.cluster.api.get(kinds().deployments, ns, name).spec as Obj).replicas;
  const status = (name: string): Obj => sim.cluster.api.get(kinds().hpas, ns, name).status as Obj;
  const condition = (name: string, type: string): Obj | undefined =>
    ((status(name).conditions ?? []) as Obj[]).find((c) => c.type === type);
  const events = (name: string): Array<{ type: unknown; reason: unknown; message: unknown; count: unknown }> =>
    sim.cluster.api
      .list(kinds().events, ns, {})
      .items.filter(
        (e: KubeObject) =>
          (e.involvedObject as Obj).name === name && (e.involvedObject as Obj).kind === 'HorizontalPodAutoscaler',
      )
      .map((e: KubeObject) => ({ type: e.type, reason: e.reason, message: e.message, count: e.count }));
  const advance = (ms: number): Promise<void> => sim.cluster.virtualClock!.advance(ms);

  before(async () => {
    sim = await startSimulator({
      clock: 'virtual',
      seed: 1,
      controllers: 'horizontalpodautoscaling',
      metricsServer: false,
    });
  });
  after(async () => {
    await sim.close();
  });

  it('scales a Deployment below minReplicas up to it within one sync period, with the SuccessfulRescale event', async () => {
    deployment('low', 1);
    hpa('low', 3, 5);
    await advance(SYNC_MS - 1000);
    assert.equal(replicas('low'), 1, 'nothing before the first sync period ends');
    await advance(1000);
    assert.equal(replicas('low'), 3);
    const s = status('low');
    assert.equal(s.currentReplicas, 1);
    assert.equal(s.desiredReplicas, 3);
    assert.equal(typeof s.lastScaleTime, 'string');
    assert.equal(s.currentMetrics, undefined);
    assert.deepEqual(
      (s.conditions as Obj[]).map((c) => [c.type, c.status, c.reason, c.message]),
      [['AbleToScale', 'True', 'SucceededRescale', 'the HPA controller was able to update the target scale to 3']],
    );
    assert.deepEqual(events('low'), [
      {
        type: 'Normal',
        reason: 'SuccessfulRescale',
        message: 'New size: 3; reason: Current number of replicas below Spec.MinReplicas',
        count: 1,
      },
    ]);
  });

  it('scales a Deployment above maxReplicas down to it', async () => {
    deployment('high', 8);
    hpa('high', 3, 5);
    await advance(SYNC_MS);
    assert.equal(replicas('high'), 5);
    assert.deepEqual(events('high'), [
      {
        type: 'Normal',
        reason: 'SuccessfulRescale',
        message: 'New size: 5; reason: Current number of replicas above Spec.MaxReplicas',
        count: 1,
      },
    ]);
  });

  it('in range: FailedGetResourceMetric conditions and events, replicas kept, status written only on change', async () => {
    deployment('mid', 4);
    hpa('mid', 3, 5);
    await advance(SYNC_MS);
    assert.equal(replicas('mid'), 4);
    const s = status('mid');
    assert.equal(s.currentReplicas, 4);
    assert.equal(s.desiredReplicas, 0, 'desiredReplicas stays what it was: nothing was computed');
    assert.deepEqual(
      s.currentMetrics,
      [{ type: '' }],
      'one empty MetricStatus per metric, as kube-controller-manager writes',
    );
    assert.deepEqual(
      (s.conditions as Obj[]).map((c) => [c.type, c.status, c.reason, c.message]),
      [
        ['AbleToScale', 'True', 'SucceededGetScale', "the HPA controller was able to get the target's current scale"],
        [
          'ScalingActive',
          'False',
          'FailedGetResourceMetric',
          `the HPA was unable to compute the replica count: ${CPU_NOT_SERVED}`,
        ],
      ],
    );
    assert.deepEqual(events('mid'), [
      { type: 'Warning', reason: 'FailedGetResourceMetric', message: CPU_NOT_SERVED, count: 1 },
      {
        type: 'Warning',
        reason: 'FailedComputeMetricsReplicas',
        message: `invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: ${CPU_NOT_SERVED}`,
        count: 1,
      },
    ]);
    const rv = sim.cluster.api.get(kinds().hpas, ns, 'mid').metadata.resourceVersion;
    await advance(SYNC_MS);
    assert.equal(
      sim.cluster.api.get(kinds().hpas, ns, 'mid').metadata.resourceVersion,
      rv,
      'an unchanged status is not written again',
    );
    assert.deepEqual(
      events('mid').map((e) => [e.reason, e.count]),
      [
        ['FailedGetResourceMetric', 2],
        ['FailedComputeMetricsReplicas', 2],
      ],
      'the same events again, counted by the correlator',
    );
  });

  it('a clamped target is then in range: the metrics conditions follow, the rescale time stays', async () => {
    const scaledAt = status('low').lastScaleTime;
    await advance(SYNC_MS);
    const s = status('low');
    assert.equal(s.currentReplicas, 3);
    assert.equal(s.desiredReplicas, 3);
    assert.equal(s.lastScaleTime, scaledAt);
    assert.equal(condition('low', 'AbleToScale')?.reason, 'SucceededGetScale');
    assert.equal(condition('low', 'ScalingActive')?.reason, 'FailedGetResourceMetric');
  });

  it('raising minReplicas re-clamps within one sync period', async () => {
    const current = sim.cluster.api.get(kinds().hpas, ns, 'mid');
    sim.cluster.api.update(kinds().hpas, ns, 'mid', { ...current, spec: { ...(current.spec as Obj), minReplicas: 5 } });
    await advance(SYNC_MS);
    assert.equal(replicas('mid'), 5);
    assert.equal(condition('mid', 'AbleToScale')?.reason, 'SucceededRescale');
    assert.ok(
      events('mid').some((e) => e.message === 'New size: 5; reason: Current number of replicas below Spec.MinReplicas'),
    );
  });

  it('a deleted target gives FailedGetScale', async () => {
    sim.cluster.api.delete(kinds().deployments, ns, 'high');
    await advance(SYNC_MS);
    const able = condition('high', 'AbleToScale');
    assert.equal(able?.status, 'False');
    assert.equal(able?.reason, 'FailedGetScale');
    assert.equal(
      able?.message,
      'the HPA controller was unable to get the target\'s current scale: deployments.apps "high" not found',
    );
    assert.ok(
      events('high').some(
        (e) =>
          e.type === 'Warning' && e.reason === 'FailedGetScale' && e.message === 'deployments.apps "high" not found',
      ),
    );
  });

  it('two HPAs over the same pods: AmbiguousSelector on both, until one goes', async () => {
    deployment('shared', 2);
    await sim.cluster.api.create(sim.cluster.kind('', 'v1', 'pods'), ns, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'shared-pod', labels: { app: 'shared' } },
      spec: { containers: [{ name: 'c', image: 'nginx' }] },
    });
    for (const name of ['shared-a', 'shared-b'])
      await sim.cluster.api.create(kinds().hpas, ns, {
        apiVersion: 'autoscaling/v2',
        kind: 'HorizontalPodAutoscaler',
        metadata: { name },
        spec: { scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'shared' }, maxReplicas: 5 },
      });
    await advance(SYNC_MS);
    await advance(SYNC_MS);
    const message = 'pods by selector app=shared are controlled by multiple HPAs: [default/shared-a default/shared-b]';
    for (const name of ['shared-a', 'shared-b']) {
      const active = condition(name, 'ScalingActive');
      assert.deepEqual([active?.status, active?.reason, active?.message], ['False', 'AmbiguousSelector', message]);
      const warnings = events(name).filter((e) => e.message === message);
      assert.deepEqual(warnings.map((e) => e.reason).sort(), ['AmbiguousSelector', 'FailedComputeMetricsReplicas']);
    }
    assert.equal(replicas('shared'), 2);

    // Without metrics-server, the one HPA left then fails on its metrics instead.
    await sim.cluster.api.delete(kinds().hpas, ns, 'shared-b');
    await advance(SYNC_MS);
    assert.equal(condition('shared-a', 'ScalingActive')?.reason, 'FailedGetResourceMetric');
    await sim.cluster.api.delete(kinds().hpas, ns, 'shared-a');
  });

  it("defaults a behavior's unset rules as kube-apiserver does, leaving scale-down's window to the controller", async () => {
    const created = await sim.cluster.api.create(kinds().hpas, ns, {
      apiVersion: 'autoscaling/v2',
      kind: 'HorizontalPodAutoscaler',
      metadata: { name: 'behaved' },
      spec: {
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'behaved' },
        maxReplicas: 3,
        behavior: { scaleUp: { selectPolicy: 'Min' } },
      },
    });
    assert.deepEqual((created.spec as Obj).behavior, {
      scaleUp: {
        selectPolicy: 'Min',
        stabilizationWindowSeconds: 0,
        policies: [
          { type: 'Pods', value: 4, periodSeconds: 15 },
          { type: 'Percent', value: 100, periodSeconds: 15 },
        ],
      },
      scaleDown: { selectPolicy: 'Max', policies: [{ type: 'Percent', value: 100, periodSeconds: 15 }] },
    });
    await sim.cluster.api.delete(kinds().hpas, ns, 'behaved');
  });

  it('a target scaled to zero disables scaling', async () => {
    const d = sim.cluster.api.get(kinds().deployments, ns, 'low');
    sim.cluster.api.update(kinds().deployments, ns, 'low', { ...d, spec: { ...(d.spec as Obj), replicas: 0 } });
    await advance(SYNC_MS);
    assert.equal(replicas('low'), 0);
    const active = condition('low', 'ScalingActive');
    assert.deepEqual(
      [active?.status, active?.reason, active?.message],
      ['False', 'ScalingDisabled', 'scaling is disabled since the replica count of the target is zero'],
    );
    assert.equal(status('low').desiredReplicas, 0);
  });
});

test('kubectl autoscale, get hpa and describe hpa show what a cluster without metrics-server shows', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const server: SimServer = await startServer(['--clock', 'virtual', '--nodes', '0', '--no-metrics-server']);
  t.after(() => server.stop());
  const api = new Api(server.url);
  const { ok: k } = kubectlAgainst(server);
  await k(['create', 'deployment', 'web', '--image=nginx', '--replicas=1']);
  await k(['autoscale', 'deployment', 'web', '--min=2', '--max=4', '--cpu-percent=60']);
  await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by: '15s' } });
  assert.equal(((await api.get('/apis/apps/v1/namespaces/default/deployments/web')).spec as Obj).replicas, 2);
  await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by: '15s' } });

  const get = await k(['get', 'hpa', 'web']);
  assert.match(get, /^NAME\s+REFERENCE\s+TARGETS\s+MINPODS\s+MAXPODS\s+REPLICAS\s+AGE\n/);
  assert.match(get, /\nweb\s+Deployment\/web\s+cpu: <unknown>\/60%\s+2\s+4\s+2\s+\d+s\n$/);

  const describe = await k(['describe', 'hpa', 'web']);
  assert.match(
    describe,
    /AbleToScale\s+True\s+SucceededGetScale\s+the HPA controller was able to get the target's current scale/,
  );
  assert.match(
    describe,
    /ScalingActive\s+False\s+FailedGetResourceMetric\s+the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu/,
  );
  assert.match(
    describe,
    /Normal\s+SuccessfulRescale\s+.*horizontal-pod-autoscaler\s+New size: 2; reason: Current number of replicas below Spec.MinReplicas/,
  );
  assert.match(
    describe,
    /Warning\s+FailedGetResourceMetric\s+.*horizontal-pod-autoscaler\s+failed to get cpu utilization/,
  );
  assert.match(describe, /Warning\s+FailedComputeMetricsReplicas\s+.*invalid metrics \(1 invalid out of 1\)/);
});

test('kubectl: an HPA scales a Deployment up and down on simulated CPU, with its behavior policies', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const server: SimServer = await startServer(['--clock', 'virtual', '--nodes', '2', '--seed', '5']);
  t.after(() => server.stop());
  const api = new Api(server.url);
  const { ok: k } = kubectlAgainst(server);
  const advance = (by: string) => api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
  const replicas = async (): Promise<number> =>
    ((await api.get('/apis/apps/v1/namespaces/default/deployments/web')).spec as Obj).replicas as number;
  const rescales = async (): Promise<string[]> =>
    ((await api.get('/api/v1/namespaces/default/events')).items as Obj[])
      .filter((e) => e.reason === 'SuccessfulRescale')
      .sort((a, b) => String(a.firstTimestamp).localeCompare(String(b.firstTimestamp)))
      .map((e) => String(e.message));
  await k(
    ['apply', '-f', '-'],
    `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 10
  metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}}]
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 60
      policies: [{type: Pods, value: 2, periodSeconds: 30}]
`,
  );
  await advance('1m');
  assert.match(await k(['get', 'hpa', 'web']), /\nweb\s+Deployment\/web\s+cpu: 1%\/50%\s+1\s+10\s+1\s+/);

  // 400m of load on one pod requesting 100m: 401%, 9 wanted; the default scale-up policies allow 1 + 4 = 5.
  await k(['annotate', 'service', 'web', 'kube-sim.dev/cpu-load=400m']);
  await advance('15s');
  assert.equal(await replicas(), 5);
  const limited = JSON.parse(await k(['get', 'hpa', 'web', '-o', 'json'])) as Obj;
  const condition = (type: string) =>
    ((limited.status as Obj).conditions as Obj[]).find((c) => c.type === type) as Obj | undefined;
  assert.deepEqual(
    [condition('ScalingLimited')?.status, condition('ScalingLimited')?.reason],
    ['True', 'ScaleUpLimit'],
  );
  assert.equal(condition('ScalingActive')?.reason, 'ValidMetricFound');
  // The next sync sees the new pods' metrics (81% each): 9 (the 15 s policy period has passed), where 46% (45.4m rounded up to a millicore, as Quantity.MilliValue does) is
  // within the tolerance of 50%.
  await advance('2m');
  assert.equal(await replicas(), 9);
  assert.match(await k(['get', 'hpa', 'web']), /cpu: 46%\/50%\s+1\s+10\s+9\s+/);
  const top = await k(['top', 'pods', '-l', 'app=web']);
  assert.equal(top.trim().split('\n').length, 10, top);
  for (const row of top.trim().split('\n').slice(1)) assert.match(row, /^web-\S+\s+46m\s+8Mi\s*$/);

  // The load stops: 1% wants 1 replica, after the 60 s window, 2 pods per 30 s.
  await k(['annotate', 'service', 'web', 'kube-sim.dev/cpu-load-']);
  await advance('45s');
  assert.equal(await replicas(), 9, 'within the scale-down stabilization window');
  const seen: number[] = [];
  for (let i = 0; i < 10; i++) {
    await advance('15s');
    const n = await replicas();
    if (seen[seen.length - 1] !== n) seen.push(n);
  }
  assert.deepEqual(seen, [7, 5, 3, 1]);
  assert.deepEqual((await rescales()).slice(-4), [
    'New size: 7; reason: All metrics below target',
    'New size: 5; reason: All metrics below target',
    'New size: 3; reason: All metrics below target',
    'New size: 1; reason: All metrics below target',
  ]);
  const describe = await k(['describe', 'hpa', 'web']);
  assert.match(
    describe,
    /ScalingActive\s+True\s+ValidMetricFound\s+the HPA was able to successfully calculate a replica count from cpu resource utilization \(percentage of request\)/,
  );
  assert.match(
    describe,
    /Normal\s+SuccessfulRescale\s+.*New size: 5; reason: cpu resource utilization \(percentage of request\) above target/,
  );
});
