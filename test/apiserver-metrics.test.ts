import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { CounterFamily, HistogramFamily } from '../src/metrics/families.js';
import { Api, request } from './helpers/http.js';
import { kubectlAgainst, kubectlMissing, spawnKubectl } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// Issue 21: /metrics as kube-apiserver serves it (Prometheus text 0.0.4, behind RBAC's system:monitoring with
// --auth), with the API server's request series, the controllers' work queues, the scheduler's attempts and
// queues, objects per resource and pods by phase — scraped after real kubectl work, and checked to move.

/** One sample line: its labels and value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The value of the one sample of `name` whose labels include `labels` (0 when there is none). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.ok(found.length <= 1, `${name} ${JSON.stringify(labels)} matches ${found.length} series`);
  return found[0]?.value ?? 0;
}

const REQUEST_LABELS = ['code', 'component', 'dry_run', 'group', 'resource', 'scope', 'subresource', 'verb', 'version'];

describe('metric families', () => {
  test('counters and histograms print as the text format wants them: sorted buckets, cumulative, +Inf, sum, count', async () => {
    const registry = new Registry();
    const requests = new CounterFamily(registry, 'x_total', 'Xs.', ['a', 'b']);
    const durations = new HistogramFamily(registry, 'x_seconds', 'X time.', ['a'], [0.1, 1]);
    const one = requests.series({ a: '1', b: 'q"\\' });
    one.value += 2;
    assert.equal(requests.series({ a: '1', b: 'q"\\' }), one, 'a series is found again by its labels');
    const d = durations.series({ a: '1' });
    for (const v of [0.05, 0.1, 0.5, 7]) d.observe(v);
    assert.equal(
      await registry.metrics(),
      [
        '# HELP x_total Xs.',
        '# TYPE x_total counter',
        'x_total{a="1",b="q\\"\\\\"} 2',
        '',
        '# HELP x_seconds X time.',
        '# TYPE x_seconds histogram',
        'x_seconds_bucket{a="1",le="0.1"} 2',
        'x_seconds_bucket{a="1",le="1"} 3',
        'x_seconds_bucket{a="1",le="+Inf"} 4',
        'x_seconds_sum{a="1"} 7.65',
        'x_seconds_count{a="1"} 4',
        '',
      ].join('\n'),
    );
  });
});

describe('/metrics after kubectl work', { skip: kubectlMissing() }, () => {
  let server: SimServer;
  let api: Api;
  const k = (args: string[], input?: string): Promise<string> => kubectlAgainst(server).ok(args, input);
  const scrape = async (): Promise<Sample[]> => parse(await k(['get', '--raw', '/metrics']));
  const advance = (by: string) => api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });

  before(async () => {
    server = await startServer(['--clock', 'virtual', '--seed', '21', '--nodes', '2']);
    api = new Api(server.url);
  });
  after(async () => {
    await server.stop();
  });

  test('is Prometheus text 0.0.4, every line a sample or a comment', async () => {
    await k(['get', 'namespaces']);
    const reply = await request(server.url, '/metrics');
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
    const samples = parse(reply.text);
    for (const name of [
      'apiserver_request_total',
      'apiserver_request_duration_seconds_bucket',
      'apiserver_current_inflight_requests',
      'apiserver_storage_objects',
      'workqueue_depth',
      'workqueue_adds_total',
      'workqueue_queue_duration_seconds_bucket',
      'workqueue_work_duration_seconds_bucket',
      'scheduler_pending_pods',
      'scheduler_schedule_attempts_total',
      'kube_sim_pods',
    ])
      assert.ok(
        samples.some((s) => s.name === name),
        `${name} is served`,
      );
    for (const s of samples.filter((x) => x.name === 'apiserver_request_total'))
      assert.deepEqual(Object.keys(s.labels), REQUEST_LABELS, 'labels as kube-apiserver names and orders them');
  });

  test('requests, objects, work queues, the scheduler and pod phases move as kubectl works', async () => {
    const before = await scrape();
    const created = {
      verb: 'POST',
      group: 'apps',
      version: 'v1',
      resource: 'deployments',
      scope: 'resource',
      subresource: '',
      dry_run: '',
    };
    await k(['create', 'deployment', 'web', '--image=nginx', '--replicas=3']);
    await k(['create', 'configmap', 'dry', '--from-literal=a=b', '--dry-run=server']);
    assert.equal((await request(server.url, '/api/v1/namespaces/default/configmaps/nope')).status, 404);
    await advance('30s');
    await k(['rollout', 'status', 'deployment/web', '--timeout=20s']);
    await k(['get', 'pods']);
    // Asks for more CPU than a node has: the scheduler fails it and parks it.
    await k(
      ['apply', '-f', '-'],
      'apiVersion: v1\nkind: Pod\nmetadata: {name: huge}\nspec: {containers: [{name: c, image: nginx, resources: {requests: {cpu: "500"}}}]}\n',
    );
    await advance('1s');
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>): number =>
      value(after, name, labels) - value(before, name, labels);

    assert.equal(delta('apiserver_request_total', { ...created, code: '201' }), 1, 'one create of the Deployment');
    assert.equal(
      delta('apiserver_request_total', { verb: 'POST', resource: 'configmaps', dry_run: 'All', code: '201' }),
      1,
      'the dry run is counted as one',
    );
    assert.equal(
      delta('apiserver_request_total', { verb: 'GET', resource: 'configmaps', scope: 'resource', code: '404' }),
      1,
      'the get of a missing ConfigMap',
    );
    assert.ok(
      delta('apiserver_request_total', { verb: 'LIST', resource: 'pods', scope: 'namespace', code: '200' }) >= 1,
    );
    assert.ok(
      delta('apiserver_request_total', {
        verb: 'WATCH',
        resource: 'deployments',
        group: 'apps',
        scope: 'namespace',
        code: '200',
      }) >= 1,
      "rollout status's watch is counted once it ended",
    );
    // The histogram counts every request of its series, and its buckets are cumulative up to +Inf.
    const createDuration = { ...created, component: 'apiserver' };
    const buckets = after.filter(
      (s) =>
        s.name === 'apiserver_request_duration_seconds_bucket' &&
        Object.entries(createDuration).every(([k, v]) => s.labels[k] === v),
    );
    assert.deepEqual(
      buckets.map((b) => b.labels.le),
      [
        '0.005',
        '0.025',
        '0.05',
        '0.1',
        '0.2',
        '0.4',
        '0.6',
        '0.8',
        '1',
        '1.25',
        '1.5',
        '2',
        '3',
        '4',
        '5',
        '6',
        '8',
      ].concat(['10', '15', '20', '30', '45', '60', '+Inf']),
      "kube-apiserver's buckets",
    );
    for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i]!.value >= buckets[i - 1]!.value);
    assert.equal(buckets.at(-1)!.value, value(after, 'apiserver_request_duration_seconds_count', createDuration));
    assert.equal(buckets.at(-1)!.value, value(after, 'apiserver_request_total', { ...created, code: '201' }));

    assert.equal(value(after, 'apiserver_storage_objects', { resource: 'deployments.apps' }), 1);
    assert.equal(value(after, 'apiserver_storage_objects', { resource: 'replicasets.apps' }), 1);
    assert.equal(value(after, 'apiserver_storage_objects', { resource: 'pods' }), 4);
    assert.equal(delta('apiserver_storage_objects', { resource: 'configmaps' }), 0, 'a dry run stores nothing');
    assert.equal(value(after, 'kube_sim_pods', { phase: 'Running' }), 3);
    assert.equal(value(after, 'kube_sim_pods', { phase: 'Pending' }), 1);

    assert.ok(delta('workqueue_adds_total', { name: 'deployment' }) >= 1);
    assert.ok(delta('workqueue_adds_total', { name: 'replicaset' }) >= 1);
    assert.equal(value(after, 'workqueue_depth', { name: 'deployment' }), 0, 'the queue is drained once idle');
    assert.ok(delta('workqueue_work_duration_seconds_count', { name: 'replicaset' }) >= 1);

    assert.equal(delta('scheduler_schedule_attempts_total', { result: 'scheduled' }), 3);
    assert.ok(delta('scheduler_schedule_attempts_total', { result: 'unschedulable' }) >= 1);
    assert.equal(value(after, 'scheduler_pending_pods', { queue: 'unschedulable' }), 1);
    assert.equal(value(after, 'scheduler_pending_pods', { queue: 'active' }), 0);

    // Scaled to zero, the pods go: their phases and counts follow.
    await k(['scale', 'deployment/web', '--replicas=0']);
    await advance('60s');
    const scaled = await scrape();
    assert.equal(value(scaled, 'kube_sim_pods', { phase: 'Running' }), 0);
    assert.equal(value(scaled, 'apiserver_storage_objects', { resource: 'pods' }), 1);
  });

  test('an open watch is a long-running request until it ends', async () => {
    const watching = { verb: 'WATCH', resource: 'pods', scope: 'namespace', component: 'apiserver' };
    const before = value(await scrape(), 'apiserver_longrunning_requests', watching);
    const watch = spawnKubectl(server.url, ['get', 'pods', '-w']);
    try {
      await watch.until((out) => out.includes('huge'), 'the pod list');
      assert.equal(value(await scrape(), 'apiserver_longrunning_requests', watching), before + 1);
    } finally {
      await watch.stop();
    }
    for (let i = 0; i < 50; i++) {
      if (value(await scrape(), 'apiserver_longrunning_requests', watching) === before) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail('the watch still counts as open after kubectl ended');
  });
});

describe('/metrics with --auth', () => {
  let server: SimServer;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kube-sim-metrics-'));
    writeFileSync(
      join(dir, 'tokens.csv'),
      [
        'admin-token,admin,uid-admin,system:masters',
        'bob-token,bob,uid-bob',
        'prom-token,prom,uid-prom,system:monitoring',
      ]
        .concat([''])
        .join('\n'),
    );
    server = await startServer(['--auth', '--token-auth-file', join(dir, 'tokens.csv'), '--nodes', '0']);
  });
  after(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const scrape = (token?: string) =>
    request(server.url, '/metrics', { headers: token ? { authorization: `Bearer ${token}` } : {} });

  test("is kube-apiserver's: 401 without a token, 403 without system:monitoring, served to it and to admins", async () => {
    assert.equal((await scrape()).status, 401);
    const bob = await scrape('bob-token');
    assert.equal(bob.status, 403);
    assert.equal((bob.body as { message: string }).message, 'forbidden: User "bob" cannot get path "/metrics"');
    for (const token of ['prom-token', 'admin-token']) {
      const reply = await scrape(token);
      assert.equal(reply.status, 200, reply.text);
      assert.match(reply.text, /^# HELP apiserver_request_total /m);
    }
    const role = await request(server.url, '/apis/rbac.authorization.k8s.io/v1/clusterroles/system:monitoring', {
      headers: { authorization: 'Bearer admin-token' },
    });
    assert.deepEqual((role.body as { rules: unknown }).rules, [
      {
        nonResourceURLs: [
          '/healthz',
          '/healthz/*',
          '/livez',
          '/livez/*',
          '/metrics',
          '/metrics/slis',
          '/readyz',
          '/readyz/*',
        ],
        verbs: ['get'],
      },
    ]);
  });
});
