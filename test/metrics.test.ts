import assert from 'node:assert/strict';
import { after, before, describe, it, test } from 'node:test';
import type { KubeObject } from '../src/api/types.js';
import { meanOver, parseGoDuration, parseUsage } from '../src/api/usage.js';
import { startSimulator, type Simulator } from '../src/cluster/simulator.js';
import { Api, type Obj } from './helpers/http.js';
import { kubectlAgainst, skipWithoutKubectl } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// metrics.k8s.io as metrics-server serves it, from simulated usage on the cluster clock (issue 24, "Debugging and
// metrics"): the usage annotations and profiles, the scrape model (15 s resolution, fresh containers after 10 s),
// pods and nodes summed, a Service's load shared by its ready endpoints; then `kubectl top` with the real kubectl.

describe('usage annotations', () => {
  it('parse a constant or a profile over time, in millicores or bytes', () => {
    assert.deepEqual(parseUsage('250m', 1000), [{ fromMs: 0, toMs: Infinity, value: 250 }]);
    assert.deepEqual(parseUsage('64Mi', 1), [{ fromMs: 0, toMs: Infinity, value: 64 * 1024 * 1024 }]);
    assert.deepEqual(parseUsage('0-5m: 50m, 5m-20m: 900m, 20m-: 50m', 1000), [
      { fromMs: 0, toMs: 300_000, value: 50 },
      { fromMs: 300_000, toMs: 1_200_000, value: 900 },
      { fromMs: 1_200_000, toMs: Infinity, value: 50 },
    ]);
    assert.equal(parseGoDuration('1h30m'), 5_400_000);
    assert.equal(parseGoDuration('1.5s'), 1500);
    for (const bad of ['fast', '5m-1m: 2', '0-5m: 1, 4m-6m: 2', '0-: x', '-1'])
      assert.equal(parseUsage(bad, 1000), undefined, bad);
  });

  it('a window across a step of the profile averages it, and time no piece covers is idle', () => {
    const profile = parseUsage('0-5m: 50m, 5m-20m: 900m', 1000)!;
    // 4m50s–5m05s: 10 s at 50m and 5 s at 900m.
    assert.equal(Math.round(meanOver(profile, 1, 290_000, 305_000) * 1000) / 1000, 333.333);
    assert.equal(meanOver(profile, 1, 1_200_000, 1_215_000), 1);
  });
});

describe('metrics.k8s.io on a virtual clock', () => {
  let sim: Simulator;
  const advance = (ms: number): Promise<void> => sim.cluster.virtualClock!.advance(ms);
  const kinds = () => ({
    pods: sim.cluster.kind('', 'v1', 'pods'),
    services: sim.cluster.kind('', 'v1', 'services'),
    podMetrics: sim.cluster.kind('metrics.k8s.io', 'v1beta1', 'pods'),
    nodeMetrics: sim.cluster.kind('metrics.k8s.io', 'v1beta1', 'nodes'),
  });
  const pod = (name: string, annotations: Record<string, string>, containers = ['app']): void => {
    sim.cluster.api.create(kinds().pods, 'default', {
      metadata: { name, labels: { app: name.replace(/-\d+$/, '') }, annotations },
      spec: { containers: containers.map((c) => ({ name: c, image: 'nginx' })) },
    });
  };
  const metricsOf = (name: string): KubeObject => sim.cluster.api.get(kinds().podMetrics, 'default', name);
  const usage = (m: KubeObject): Array<[unknown, unknown, unknown]> =>
    (m.containers as Obj[]).map((c) => [c.name, (c.usage as Obj).cpu, (c.usage as Obj).memory]);

  before(async () => {
    sim = await startSimulator({ clock: 'virtual', seed: 7, nodes: 1 });
    // The node's kubelet is Ready from the start; its first rate needs 10 s.
  });
  after(async () => {
    await sim.close();
  });

  it('a container is reported once it ran 10 s before a scrape; the scrape every 15 s sets timestamp and window', async () => {
    await advance(3_000);
    pod('fresh', { 'kube-sim.dev/cpu-usage': '120m', 'kube-sim.dev/memory-usage': '100Mi' });
    await advance(1);
    const status = sim.cluster.api.get(kinds().pods, 'default', 'fresh').status as Obj;
    const running = ((status.containerStatuses as Obj[])[0]!.state as Obj).running as Obj;
    const started = Date.parse(String(running.startedAt));
    assert.equal(started, sim.cluster.clock.now() - 1, 'started at once (no startup delay)');
    await advance(15_000 - 3_001); // the scrape at 0:00:15 is 12 s after the start
    const m = metricsOf('fresh');
    assert.equal(m.timestamp, '2025-01-01T00:00:15Z');
    assert.equal(m.window, '12s');
    assert.deepEqual(usage(m), [['app', '120m', '100Mi']]);
    assert.deepEqual(m.metadata, {
      name: 'fresh',
      namespace: 'default',
      creationTimestamp: '2025-01-01T00:00:15Z',
      labels: { app: 'fresh' },
    });
    await advance(15_000);
    assert.equal(metricsOf('fresh').window, '15s');
    assert.equal(metricsOf('fresh').timestamp, '2025-01-01T00:00:30Z');
    await advance(7_000);
    const later = metricsOf('fresh');
    assert.equal(later.timestamp, '2025-01-01T00:00:30Z', 'a read between scrapes sees the last one');
    assert.equal(later.metadata.creationTimestamp, '2025-01-01T00:00:37Z', 'created when read, as metrics-server does');
    await advance(8_000); // to the next scrape, where the tests below start
  });

  it('before its first rate a pod has no metrics: a GET is 404 podmetrics, an unknown pod 404 pods', async () => {
    pod('young', {});
    await advance(1);
    assert.throws(() => metricsOf('young'), {
      code: 404,
      message: 'podmetrics.metrics.k8s.io "default/young" not found',
    });
    assert.throws(() => metricsOf('nobody'), { code: 404, message: 'pods "nobody" not found' });
    assert.ok(!sim.cluster.api.list(kinds().podMetrics, 'default', {}).items.some((m) => m.metadata.name === 'young'));
    await advance(15_000);
    assert.deepEqual(usage(metricsOf('young')), [['app', '1m', '8Mi']], 'idle by default: 1m and 8Mi');
  });

  it('a profile follows time since the container started; per-container annotations win over the pod-wide one', async () => {
    pod('burst', { 'kube-sim.dev/cpu-usage': '0-1m: 50m, 1m-2m: 900m', 'kube-sim.dev/cpu-usage.sidecar': '5m' }, [
      'app',
      'sidecar',
    ]);
    await advance(30_000);
    assert.deepEqual(usage(metricsOf('burst')), [
      ['app', '50m', '8Mi'],
      ['sidecar', '5m', '8Mi'],
    ]);
    await advance(60_000);
    assert.deepEqual(usage(metricsOf('burst'))[0], ['app', '900m', '8Mi']);
    await advance(60_000);
    assert.deepEqual(usage(metricsOf('burst'))[0], ['app', '1m', '8Mi'], 'past the last piece: idle');
  });

  it('a list takes a label selector; a namespace sees its own pods only', () => {
    const selected = sim.cluster.api.list(kinds().podMetrics, 'default', { labelSelector: 'app=burst' });
    assert.deepEqual(
      selected.items.map((m) => m.metadata.name),
      ['burst'],
    );
    assert.equal(selected.kind, 'PodMetricsList');
    assert.deepEqual(sim.cluster.api.list(kinds().podMetrics, 'kube-system', {}).items, []);
  });

  it("a Service's load is shared by its ready endpoints, so scaling out lowers each pod's share", async () => {
    for (const name of ['shop-1', 'shop-2']) pod(name, {});
    sim.cluster.api.create(kinds().services, 'default', {
      metadata: { name: 'shop', annotations: { 'kube-sim.dev/cpu-load': '600m' } },
      spec: { selector: { app: 'shop' }, ports: [{ port: 80 }] },
    });
    await advance(30_000);
    assert.deepEqual(usage(metricsOf('shop-1')), [['app', '301m', '8Mi']], 'idle 1m + 600m / 2');
    pod('shop-3', {});
    await advance(30_000);
    assert.deepEqual(usage(metricsOf('shop-1')), [['app', '201m', '8Mi']], 'idle 1m + 600m / 3');
  });

  it("a node's usage is its pods' plus the system's 50m and 400Mi", async () => {
    const nodes = sim.cluster.api.list(kinds().nodeMetrics, undefined, {}).items;
    assert.equal(nodes.length, 1);
    const pods = sim.cluster.api.list(kinds().podMetrics, 'default', {}).items;
    let cpu = 50;
    let memory = 400;
    for (const m of pods)
      for (const c of m.containers as Obj[]) {
        cpu += Number(String((c.usage as Obj).cpu).replace(/m$/, ''));
        memory += Number(String((c.usage as Obj).memory).replace(/Mi$/, ''));
      }
    assert.deepEqual(nodes[0]!.usage, { cpu: `${cpu}m`, memory: `${memory}Mi` });
    assert.equal(nodes[0]!.window, '15s');
    assert.deepEqual(sim.cluster.api.get(kinds().nodeMetrics, undefined, 'node-1').usage, nodes[0]!.usage);
    assert.throws(() => sim.cluster.api.get(kinds().nodeMetrics, undefined, 'node-9'), {
      message: 'nodes "node-9" not found',
    });
  });

  it('a node that is not Ready answers no scrape: neither it nor its pods are reported', () => {
    const nodes = sim.cluster.kind('', 'v1', 'nodes');
    const node = sim.cluster.api.get(nodes, undefined, 'node-1');
    const status = node.status as Obj;
    const conditions = (status.conditions as Obj[]).map((c) =>
      c.type === 'Ready' ? { ...c, status: 'Unknown', reason: 'NodeStatusUnknown' } : c,
    );
    sim.cluster.api.update(
      nodes,
      undefined,
      'node-1',
      { ...node, status: { ...status, conditions } },
      {
        subresource: 'status',
      },
    );
    assert.deepEqual(sim.cluster.api.list(kinds().nodeMetrics, undefined, {}).items, []);
    assert.deepEqual(sim.cluster.api.list(kinds().podMetrics, 'default', {}).items, []);
    assert.throws(() => metricsOf('shop-1'), { message: 'podmetrics.metrics.k8s.io "default/shop-1" not found' });
  });
});

test('kubectl top pods, top pods --containers and top nodes read the simulated usage', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const server: SimServer = await startServer(['--clock', 'virtual', '--nodes', '2', '--seed', '3']);
  t.after(() => server.stop());
  const api = new Api(server.url);
  const { ok: k, run } = kubectlAgainst(server);
  const advance = (by: string) => api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
  await k(
    ['apply', '-f', '-'],
    `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {kube-sim.dev/cpu-usage: "0-1m: 50m, 1m-: 250m", kube-sim.dev/memory-usage: 64Mi}
    spec:
      containers: [{name: php, image: nginx, resources: {requests: {cpu: 200m}}}]
`,
  );
  await advance('1s');
  const early = await run(['top', 'pods']);
  assert.notEqual(early.code, 0, 'no scrape has seen the new pods yet');
  assert.match(early.stderr, /[Mm]etrics not available/);

  await advance('29s');
  const top = await k(['top', 'pods']);
  const rows = top.trimEnd().split('\n');
  assert.match(rows[0]!, /^NAME\s+CPU\(cores\)\s+MEMORY\(bytes\)\s*$/);
  assert.equal(rows.length, 4, top);
  for (const row of rows.slice(1)) assert.match(row, /^web-[a-z0-9]+-[a-z0-9]{5}\s+50m\s+64Mi\s*$/);

  await advance('60s');
  const containers = await k(['top', 'pods', '--containers', '-l', 'app=web']);
  const crow = containers.trimEnd().split('\n');
  assert.match(crow[0]!, /^POD\s+NAME\s+CPU\(cores\)\s+MEMORY\(bytes\)\s*$/);
  assert.equal(crow.length, 4, containers);
  for (const row of crow.slice(1)) assert.match(row, /^web-\S+\s+php\s+250m\s+64Mi\s*$/);

  const pods = (await api.get('/api/v1/namespaces/default/pods')).items as KubeObject[];
  const onNode = (node: string): number => pods.filter((p) => (p.spec as Obj).nodeName === node).length;
  const nodes = await k(['top', 'nodes']);
  const nrows = nodes.trimEnd().split('\n');
  assert.match(nrows[0]!, /^NAME\s+CPU\(cores\)\s+CPU\(%\)\s+MEMORY\(bytes\)\s+MEMORY\(%\)\s*$/);
  for (const node of ['node-1', 'node-2']) {
    const cpu = 50 + 250 * onNode(node);
    const memory = 400 + 64 * onNode(node);
    // Allocatable is 4 CPUs and 16Gi: kubectl's percentages of it.
    const cpuPercent = Math.floor((cpu * 100) / 4000);
    const memoryPercent = Math.floor((memory * 100) / (16 * 1024));
    assert.match(
      nodes,
      new RegExp(`\\n${node}\\s+${cpu}m\\s+${cpuPercent}%\\s+${memory}Mi\\s+${memoryPercent}%`),
      nodes,
    );
  }

  const name = pods[0]!.metadata.name!;
  const raw = JSON.parse(await k(['get', '--raw', `/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/${name}`]));
  assert.deepEqual(
    { kind: raw.kind, window: raw.window, timestamp: raw.timestamp, containers: raw.containers },
    {
      kind: 'PodMetrics',
      window: '15s',
      timestamp: '2025-01-01T00:01:30Z',
      containers: [{ name: 'php', usage: { cpu: '250m', memory: '64Mi' } }],
    },
  );
  const missing = await run(['top', 'pod', 'nope']);
  assert.equal(missing.stderr.trim(), 'Error from server (NotFound): pods "nope" not found');
  assert.match(await k(['get', 'apiservice', 'v1beta1.metrics.k8s.io']), /kube-system\/metrics-server\s+True/);
});

test('with --no-metrics-server, kubectl top says the Metrics API is not available', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const server: SimServer = await startServer(['--clock', 'virtual', '--nodes', '1', '--no-metrics-server']);
  t.after(() => server.stop());
  const { run } = kubectlAgainst(server);
  const r = await run(['top', 'nodes']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /Metrics API not available/);
});
