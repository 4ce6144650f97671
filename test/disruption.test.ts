import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, type Obj, type Reply } from './helpers/http.js';
import { kubectlAgainst, kubectlMissing, spawnKubectl, type KubectlProcess } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import { httpWatch } from './helpers/watch.js';

// PodDisruptionBudgets end to end: the disruption controller's status, the eviction subresource's answers (exact
// Status bodies), and the real `kubectl drain` blocked by a budget until more replicas are Ready elsewhere.
// Virtual clock; new pods take 30 s of cluster time to turn Ready, so a budget can be short of healthy pods.

type Status = Record<string, unknown> & {
  disruptionsAllowed: number;
  currentHealthy: number;
  desiredHealthy: number;
  expectedPods: number;
};

const pdbPath = (ns: string, name = ''): string =>
  `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets${name ? `/${name}` : ''}`;
const podsPath = (ns: string, name = ''): string => `/api/v1/namespaces/${ns}/pods${name ? `/${name}` : ''}`;

function deployment(name: string, replicas: number): Obj {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'app', image: 'nginx' }] } },
    },
  };
}

function pdb(name: string, app: string, spec: Record<string, unknown>): Obj {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name },
    spec: { selector: { matchLabels: { app } }, ...spec },
  };
}

function eviction(name: string, extra: Record<string, unknown> = {}): Obj {
  return { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name }, ...extra };
}

describe('PodDisruptionBudgets and evictions', () => {
  let server: SimServer;
  let api: Api;

  before(async () => {
    server = await startServer(['--clock', 'virtual', '--seed', '11', '--nodes', '3', '--ready-delay', '30s']);
    api = new Api(server.url);
  });
  after(async () => {
    await server.stop();
  });

  const advance = (by: string): Promise<unknown> =>
    api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
  const status = async (ns: string, name: string): Promise<Status> =>
    (await api.get(pdbPath(ns, name))).status as Status;
  const podsOf = async (ns: string, app: string): Promise<Obj[]> =>
    (await api.list(`${podsPath(ns)}?labelSelector=app%3D${app}`)).items;
  const live = (pods: Obj[]): Obj[] => pods.filter((p) => !p.metadata.deletionTimestamp);
  const evict = (ns: string, pod: string, extra: Record<string, unknown> = {}, query = ''): Promise<Reply> =>
    api.request(`${podsPath(ns, pod)}/eviction${query}`, { method: 'POST', body: eviction(pod, extra) });
  /** A namespace with a Deployment `app` and a budget over it, once the pods are Ready; resolves with the pods. */
  const budgeted = async (ns: string, app: string, replicas: number, spec: Record<string, unknown>): Promise<Obj[]> => {
    await api.namespace(ns);
    await api.create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment(app, replicas));
    await api.create(pdbPath(ns), pdb(app, app, spec));
    await advance('31s');
    return live(await podsOf(ns, app));
  };

  test('status for minAvailable, maxUnavailable and percentages of a Deployment', async () => {
    const ns = 'budgets';
    await api.namespace(ns);
    await api.create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('web', 4));
    for (const [name, spec] of [
      ['min-3', { minAvailable: 3 }],
      ['min-50', { minAvailable: '50%' }],
      ['max-1', { maxUnavailable: 1 }],
      ['max-30', { maxUnavailable: '30%' }],
    ] as const) {
      await api.create(pdbPath(ns), pdb(name, 'web', spec));
    }
    await advance('31s');
    // 4 Ready pods. minAvailable 3: expected = the 4 pods found; 50%: the Deployment's scale 4, ceil(2) = 2;
    // maxUnavailable 1: 4 - 1 = 3; 30%: 4 - ceil(1.2) = 2.
    const expect = { 'min-3': [4, 3, 1], 'min-50': [4, 2, 2], 'max-1': [4, 3, 1], 'max-30': [4, 2, 2] } as const;
    for (const [name, [expectedPods, desiredHealthy, disruptionsAllowed]] of Object.entries(expect)) {
      const s = await status(ns, name);
      assert.deepEqual(
        {
          expectedPods: s.expectedPods,
          currentHealthy: s.currentHealthy,
          desiredHealthy: s.desiredHealthy,
          disruptionsAllowed: s.disruptionsAllowed,
          observedGeneration: s.observedGeneration,
        },
        { expectedPods, currentHealthy: 4, desiredHealthy, disruptionsAllowed, observedGeneration: 1 },
        name,
      );
      const conditions = s.conditions as Array<Record<string, unknown>>;
      assert.deepEqual(
        conditions.map((c) => [c.type, c.status, c.reason, c.message, c.observedGeneration]),
        [['DisruptionAllowed', 'True', 'SufficientPods', '', 1]],
        name,
      );
    }

    // Scaled to 6: the percentages follow the Deployment's scale at once, while the 2 new pods are not Ready yet.
    await api.mergePatch(`/apis/apps/v1/namespaces/${ns}/deployments/web`, { spec: { replicas: 6 } });
    await advance('1s');
    const s50 = await status(ns, 'min-50');
    assert.deepEqual([s50.expectedPods, s50.desiredHealthy, s50.currentHealthy, s50.disruptionsAllowed], [6, 3, 4, 1]);
    const s1 = await status(ns, 'max-1');
    assert.deepEqual([s1.expectedPods, s1.desiredHealthy, s1.currentHealthy, s1.disruptionsAllowed], [6, 5, 4, 0]);
    const cond = (s1.conditions as Array<Record<string, unknown>>)[0]!;
    assert.deepEqual([cond.status, cond.reason], ['False', 'InsufficientPods']);

    // A spec change bumps generation; the controller catches up observedGeneration.
    const updated = await api.mergePatch(pdbPath(ns, 'min-3'), { spec: { minAvailable: 5 } });
    assert.equal(updated.metadata.generation, 2);
    await advance('0s');
    const s3 = await status(ns, 'min-3');
    assert.deepEqual([s3.observedGeneration, s3.desiredHealthy, s3.expectedPods], [2, 5, 6]);

    // `kubectl get pdb` columns.
    if (!kubectlMissing()) {
      const out = await kubectlAgainst(server).ok(['get', 'pdb', '-n', ns]);
      assert.match(out, /^NAME\s+MIN AVAILABLE\s+MAX UNAVAILABLE\s+ALLOWED DISRUPTIONS\s+AGE$/m);
      assert.match(out, /^max-30\s+N\/A\s+30%\s+\d+\s+\S+$/m);
      assert.match(out, /^min-3\s+5\s+N\/A\s+\d+\s+\S+$/m);
    }
  });

  test('other owners: a custom resource through its scale subresource; a Job has none (SyncFailed)', async () => {
    const ns = 'owners';
    await api.namespace(ns);
    await api.create('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'pools.example.com' },
      spec: {
        group: 'example.com',
        names: { plural: 'pools', singular: 'pool', kind: 'Pool' },
        scope: 'Namespaced',
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            subresources: { scale: { specReplicasPath: '.spec.size', statusReplicasPath: '.status.size' } },
            schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          },
        ],
      },
    });
    await advance('1s');
    const pool = await api.create(`/apis/example.com/v1/namespaces/${ns}/pools`, {
      apiVersion: 'example.com/v1',
      kind: 'Pool',
      metadata: { name: 'p' },
      spec: { size: 5 },
    });
    for (const name of ['p-0', 'p-1']) {
      await api.create(podsPath(ns), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name,
          labels: { app: 'pool' },
          ownerReferences: [
            { apiVersion: 'example.com/v1', kind: 'Pool', name: 'p', uid: pool.metadata.uid, controller: true },
          ],
        },
        spec: { containers: [{ name: 'a', image: 'nginx' }] },
      });
    }
    await api.create(pdbPath(ns), pdb('pool', 'pool', { maxUnavailable: 1 }));
    await advance('31s');
    const s = await status(ns, 'pool');
    assert.deepEqual([s.expectedPods, s.desiredHealthy, s.currentHealthy, s.disruptionsAllowed], [5, 4, 2, 0]);

    await api.create(`/apis/batch/v1/namespaces/${ns}/jobs`, {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'j' },
      spec: {
        template: {
          metadata: { labels: { app: 'job' } },
          spec: { restartPolicy: 'Never', containers: [{ name: 'a', image: 'busybox' }] },
        },
      },
    });
    await api.create(pdbPath(ns), pdb('job', 'job', { minAvailable: '50%' }));
    await advance('1s');
    const failed = await status(ns, 'job');
    assert.equal(failed.disruptionsAllowed, 0);
    const cond = (failed.conditions as Array<Record<string, unknown>>)[0]!;
    assert.deepEqual(
      [cond.type, cond.status, cond.reason, cond.message],
      ['DisruptionAllowed', 'False', 'SyncFailed', 'jobs.batch does not implement the scale subresource'],
    );
  });

  test('validation: minAvailable and maxUnavailable are exclusive, percentages at most 100%', async () => {
    const both = await api.request(pdbPath('default'), {
      method: 'POST',
      body: pdb('both', 'x', { minAvailable: 1, maxUnavailable: 1 }),
    });
    assert.equal(both.status, 422);
    assert.match(both.text, /minAvailable and maxUnavailable cannot be both set/);
    const over = await api.request(pdbPath('default'), {
      method: 'POST',
      body: pdb('over', 'x', { maxUnavailable: '101%' }),
    });
    assert.equal(over.status, 422);
    assert.equal(
      (over.body as { message: string }).message,
      'PodDisruptionBudget.policy "over" is invalid: spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"101%"}: must not be greater than 100%',
    );
    const policy = await api.request(pdbPath('default'), {
      method: 'POST',
      body: pdb('policy', 'x', { minAvailable: 1, unhealthyPodEvictionPolicy: 'Sometimes' }),
    });
    assert.equal(policy.status, 422);
    assert.match(
      policy.text,
      /spec.unhealthyPodEvictionPolicy: Unsupported value: \\"Sometimes\\": supported values: \\"AlwaysAllow\\", \\"IfHealthyBudget\\"/,
    );
  });

  test('an eviction takes a disruption and records the pod; the next is refused with 429 until a replacement is Ready', async () => {
    const ns = 'evict';
    const [a, b] = await budgeted(ns, 'web', 3, { minAvailable: 2 });
    assert.equal((await status(ns, 'web')).disruptionsAllowed, 1);
    const budget = await api.get(pdbPath(ns, 'web'));

    // dryRun checks and changes nothing.
    assert.equal((await evict(ns, a!.metadata.name!, {}, '?dryRun=All')).status, 201);
    assert.equal((await api.get(podsPath(ns, a!.metadata.name!))).metadata.deletionTimestamp, undefined);
    assert.equal((await api.get(pdbPath(ns, 'web'))).metadata.resourceVersion, budget.metadata.resourceVersion);

    const watch = await httpWatch(
      server.url,
      `${pdbPath(ns)}?watch=1&resourceVersion=${budget.metadata.resourceVersion}`,
    );
    try {
      const ok = await evict(ns, a!.metadata.name!);
      assert.equal(ok.status, 201, ok.text);
      assert.deepEqual(ok.body, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 });
      // The eviction's own write: one disruption taken, the pod listed with the cluster time, in one update.
      await watch.until((events) => events.length > 0, 'the eviction status write');
      const written = watch.events[0]!.object.status as unknown as Status;
      assert.equal(written.disruptionsAllowed, 0);
      assert.deepEqual(Object.keys(written.disruptedPods as object), [a!.metadata.name]);
      assert.equal((written.conditions as Array<Record<string, unknown>>)[0]!.reason, 'InsufficientPods');
    } finally {
      watch.close();
    }
    const evicted = await api.get(podsPath(ns, a!.metadata.name!));
    assert.ok(evicted.metadata.deletionTimestamp, 'the evicted pod is terminating');
    const target = ((evicted.status as Obj).conditions as Array<Record<string, unknown>>).find(
      (c) => c.type === 'DisruptionTarget',
    );
    assert.deepEqual(
      [target?.status, target?.reason, target?.message],
      ['True', 'EvictionByEvictionAPI', 'Eviction API: evicting'],
    );

    const refused = await evict(ns, b!.metadata.name!);
    assert.equal(refused.status, 429);
    assert.deepEqual(refused.body, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: "Cannot evict pod as it would violate the pod's disruption budget.",
      reason: 'TooManyRequests',
      details: {
        causes: [
          { reason: 'DisruptionBudget', message: 'The disruption budget web needs 2 healthy pods and has 2 currently' },
        ],
      },
      code: 429,
    });
    assert.equal((await api.get(podsPath(ns, b!.metadata.name!))).metadata.deletionTimestamp, undefined);

    await advance('31s'); // the replacement turns Ready
    assert.equal((await status(ns, 'web')).disruptionsAllowed, 1);
    assert.equal((await evict(ns, b!.metadata.name!)).status, 201);
  });

  test('unready pods follow unhealthyPodEvictionPolicy; two budgets over one pod are a 500', async () => {
    const ns = 'unhealthy';
    const ready = (await budgeted(ns, 'db', 3, { minAvailable: 3 }))[0]!;
    assert.equal((await evict(ns, ready.metadata.name!)).status, 429);

    // A fourth replica, Running but not Ready yet: the budget is healthy (3 of 3), so it may go (IfHealthyBudget).
    await api.mergePatch(`/apis/apps/v1/namespaces/${ns}/deployments/db`, { spec: { replicas: 5 } });
    await advance('1s');
    const unready = live(await podsOf(ns, 'db')).filter(
      (p) =>
        (p.status as Obj).phase === 'Running' &&
        !((p.status as Obj).conditions as Array<Record<string, unknown>>).some(
          (c) => c.type === 'Ready' && c.status === 'True',
        ),
    );
    assert.equal(unready.length, 2, 'two replicas Running and not Ready');
    assert.equal((await status(ns, 'db')).disruptionsAllowed, 0);
    assert.equal((await evict(ns, unready[0]!.metadata.name!)).status, 201);

    // Asking for 4 healthy of 3: the budget is not healthy, so an unready pod is guarded too...
    await api.mergePatch(pdbPath(ns, 'db'), { spec: { minAvailable: 4 } });
    await advance('0s');
    const refused = await evict(ns, unready[1]!.metadata.name!);
    assert.equal(refused.status, 429);
    assert.equal(
      (refused.body as { details: { causes: Array<{ message: string }> } }).details.causes[0]!.message,
      'The disruption budget db needs 4 healthy pods and has 3 currently',
    );
    // ...unless the budget says AlwaysAllow.
    await api.mergePatch(pdbPath(ns, 'db'), { spec: { unhealthyPodEvictionPolicy: 'AlwaysAllow' } });
    await advance('0s');
    assert.equal((await evict(ns, unready[1]!.metadata.name!)).status, 201);

    await api.create(pdbPath(ns), pdb('db-too', 'db', { maxUnavailable: 1 }));
    const twice = await evict(ns, ready.metadata.name!);
    assert.equal(twice.status, 500);
    assert.deepEqual(twice.body, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.',
      code: 500,
    });
  });

  test('disruptedPods entries expire after two minutes of cluster time', async () => {
    const ns = 'expiry';
    const pod = (await budgeted(ns, 'app', 2, { minAvailable: 1 }))[0]!;
    // As if an eviction had been granted but the pod never deleted: the pod counts as gone while listed.
    const now = ((await api.get('/sim/v1/clock')) as unknown as { now: string }).now;
    const current = await api.get(pdbPath(ns, 'app'));
    await api.put(`${pdbPath(ns, 'app')}/status`, {
      ...current,
      status: { ...(current.status as Status), disruptedPods: { [pod.metadata.name!]: now } },
    });
    await advance('0s');
    let s = await status(ns, 'app');
    assert.deepEqual(
      [s.currentHealthy, s.disruptionsAllowed, Object.keys(s.disruptedPods as object)],
      [1, 0, [pod.metadata.name]],
    );
    await advance('119s');
    assert.equal(
      Object.keys(((await status(ns, 'app')).disruptedPods as object) ?? {}).length,
      1,
      'still listed before two minutes',
    );
    await advance('1s'); // exactly two minutes: kept (expiry is strictly after), and the controller must not spin
    assert.equal(
      Object.keys(((await status(ns, 'app')).disruptedPods as object) ?? {}).length,
      1,
      'still listed at two minutes',
    );
    await advance('1s');
    s = await status(ns, 'app');
    assert.deepEqual([s.currentHealthy, s.disruptionsAllowed, s.disruptedPods], [2, 1, undefined]);
  });
});

describe('kubectl drain against a PodDisruptionBudget', { skip: kubectlMissing() }, () => {
  let server: SimServer;
  let api: Api;
  const background: KubectlProcess[] = [];

  before(async () => {
    server = await startServer(['--clock', 'virtual', '--seed', '12', '--nodes', '3', '--ready-delay', '30s']);
    api = new Api(server.url);
  });
  after(async () => {
    for (const p of background) await p.stop();
    await server.stop();
  });

  const advance = (by: string): Promise<unknown> =>
    api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });

  test('drain is blocked (kubectl retries the 429s and times out), then succeeds once replicas are Ready elsewhere', async () => {
    const k = kubectlAgainst(server);
    await k.ok(['create', 'deployment', 'web', '--image=nginx', '--replicas=2']);
    await k.ok(['create', 'pdb', 'web', '--selector=app=web', '--min-available=2']);
    await advance('31s');
    assert.match(await k.ok(['get', 'pdb', 'web']), /^web\s+2\s+N\/A\s+0\s/m);
    const pods = (await api.list(`${podsPath('default')}?labelSelector=app%3Dweb`)).items;
    const node = String((pods[0]!.spec as Obj).nodeName);
    const onNode = pods.filter((p) => (p.spec as Obj).nodeName === node).map((p) => p.metadata.name!);

    const blocked = await k.run(
      ['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=7s'],
      undefined,
      30_000,
    );
    assert.notEqual(blocked.code, 0, blocked.stdout);
    assert.match(
      blocked.stderr,
      new RegExp(
        `error when evicting pods/"${onNode[0]}" -n "default" \\(will retry after 5s\\): Cannot evict pod as it would violate the pod's disruption budget\\.`,
      ),
    );
    assert.match(blocked.stderr, /global timeout reached: 7s/);
    for (const name of onNode)
      assert.equal((await api.get(podsPath('default', name))).metadata.deletionTimestamp, undefined, `${name} kept`);

    // Drain again; while kubectl retries, two more replicas start on the other (uncordoned) nodes and turn Ready.
    const drain = spawnKubectl(server.url, [
      'drain',
      node,
      '--ignore-daemonsets',
      '--delete-emptydir-data',
      '--timeout=90s',
    ]);
    background.push(drain);
    await waitFor(() => drain.stderr.includes('will retry after 5s'), 'the first refused eviction', drain);
    await k.ok(['scale', 'deployment', 'web', '--replicas=4']);
    await advance('31s');
    assert.match(await k.ok(['get', 'pdb', 'web']), /^web\s+2\s+N\/A\s+2\s/m);
    await waitFor(
      async () =>
        (await Promise.all(onNode.map((n) => api.get(podsPath('default', n))))).every(
          (p) => p.metadata.deletionTimestamp,
        ),
      'the evictions',
      drain,
      20_000,
    );
    await advance('31s'); // the grace period
    const code = await drain.exited;
    assert.equal(code, 0, drain.stderr);
    assert.match(drain.stdout, new RegExp(`node/${node} drained`));
  });
});

async function waitFor(
  check: () => boolean | Promise<boolean>,
  what: string,
  p: KubectlProcess,
  ms = 15_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; stdout:\n${p.stdout}\nstderr:\n${p.stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
