import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import { FakeKubelet } from './helpers/fake-kubelet.js';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { ROOT, startServer, type SimServer } from './helpers/server.js';
import { httpWatch, type WatchClient, type WatchEvent } from './helpers/watch.js';
import { onLines } from '../src/client/watch-lines.js';

// End to end with the real kubectl: the ReplicaSet and Deployment controllers against a real server, the test
// playing kubelet (pods are marked Running and Ready through /status shortly after they appear).

const missing = kubectlMissing();
// The test is the kubelet here, so the server runs without simulated nodes when it has them.
const NO_NODES = spawnSync(process.execPath, [join(ROOT, 'bin/sim.js'), 'serve', '--help'], {
  encoding: 'utf8',
}).stdout.includes('--nodes')
  ? ['--nodes', '0']
  : [];

/** Marks every new pod of a namespace Running and Ready after `delayMs`, as a kubelet would. */
class AutoKubelet {
  private req?: http.ClientRequest;
  private readonly seen = new Set<string>();
  private readonly kubelet: FakeKubelet;
  private readonly timers = new Set<NodeJS.Timeout>();
  stopped = false;

  constructor(
    private readonly api: Api,
    private readonly namespace: string,
    private readonly delayMs = 5,
  ) {
    this.kubelet = new FakeKubelet(api, namespace);
  }

  async start(): Promise<void> {
    const list = await this.api.list(`/api/v1/namespaces/${this.namespace}/pods`);
    for (const pod of list.items) this.consider(pod);
    await new Promise<void>((resolve, reject) => {
      const path = `/api/v1/namespaces/${this.namespace}/pods?watch=true&resourceVersion=${list.metadata.resourceVersion}`;
      this.req = http.get(this.api.url + path, { agent: false }, (res) => {
        onLines(res, (line) => {
          const event = JSON.parse(line) as WatchEvent;
          if (event.type === 'ADDED' || event.type === 'MODIFIED') this.consider(event.object);
        });
        resolve();
      });
      this.req.on('error', (err) => (this.stopped ? undefined : reject(err)));
    });
  }

  private consider(pod: Obj): void {
    const name = pod.metadata.name!;
    const phase = (pod.status as { phase?: string } | undefined)?.phase;
    if (this.seen.has(name) || pod.metadata.deletionTimestamp || phase !== 'Pending') return;
    this.seen.add(name);
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopped) void this.kubelet.run(name).catch(() => undefined);
    }, this.delayMs);
    this.timers.add(timer);
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.req?.destroy();
  }
}

function deploymentYaml(
  name: string,
  o: {
    replicas: number;
    image?: string;
    surge?: number | string;
    unavailable?: number | string;
    strategy?: 'Recreate';
    grace?: number;
  },
): string {
  const strategy =
    o.strategy === 'Recreate'
      ? '  strategy:\n    type: Recreate\n'
      : `  strategy:\n    type: RollingUpdate\n    rollingUpdate:\n      maxSurge: ${JSON.stringify(o.surge ?? '25%')}\n      maxUnavailable: ${JSON.stringify(o.unavailable ?? '25%')}\n`;
  return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  replicas: ${o.replicas}
  selector:
    matchLabels: {app: ${name}}
${strategy}  template:
    metadata:
      labels: {app: ${name}}
    spec:
${o.grace !== undefined ? `      terminationGracePeriodSeconds: ${o.grace}\n` : ''}      containers:
      - name: app
        image: ${o.image ?? 'nginx:1.25'}
`;
}

/** Replays pod watch events in order from the initial pods and reports the worst instant: most pods, fewest available. */
function boundsOver(
  initial: readonly Obj[],
  events: readonly WatchEvent[],
): { maxPods: number; minAvailable: number; final: Obj[] } {
  const pods = new Map<string, Obj>(initial.map((p) => [p.metadata.name!, p]));
  let maxPods = 0;
  let minAvailable = Number.MAX_SAFE_INTEGER;
  for (const e of events) {
    if (e.type === 'DELETED') pods.delete(e.object.metadata.name!);
    else if (e.type === 'ADDED' || e.type === 'MODIFIED') pods.set(e.object.metadata.name!, e.object);
    else continue;
    const live = [...pods.values()].filter((p) => !p.metadata.deletionTimestamp);
    const available = live.filter((p) =>
      ((p.status as { conditions?: Array<{ type: string; status: string }> }).conditions ?? []).some(
        (c) => c.type === 'Ready' && c.status === 'True',
      ),
    );
    maxPods = Math.max(maxPods, live.length);
    minAvailable = Math.min(minAvailable, available.length);
  }
  return { maxPods, minAvailable, final: [...pods.values()] };
}

describe('Deployments and ReplicaSets with kubectl', { skip: missing }, () => {
  let server: SimServer;
  let api: Api;
  const kubelets: AutoKubelet[] = [];
  const watches: WatchClient[] = [];

  before(async () => {
    server = await startServer(NO_NODES);
    api = new Api(server.url);
  });
  after(async () => {
    for (const k of kubelets) k.stop();
    for (const w of watches) w.close();
    await server.stop();
  });

  const k = async (args: string[], input?: string): Promise<string> => {
    const r = await kubectl(server.url, args, { input, timeoutMs: 30_000 });
    assert.equal(
      r.code,
      0,
      `kubectl ${args.join(' ')} failed (${r.code}):\n${r.stderr}\n${r.stdout}\nserver log:\n${server.stderr().slice(-2000)}`,
    );
    return r.stdout;
  };

  /** A namespace with a kubelet playing in it. */
  const namespace = async (name: string, delayMs = 5): Promise<void> => {
    await api.namespace(name);
    const kubelet = new AutoKubelet(api, name, delayMs);
    kubelets.push(kubelet);
    await kubelet.start();
  };

  const podsOf = async (ns: string, selector: string): Promise<Obj[]> =>
    (await api.list(`/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(selector)}`)).items;

  /** Polls until `check` passes (controllers work asynchronously). */
  const eventually = async (what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> => {
    const until = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const settings: Array<{
    replicas: number;
    surge: number | string;
    unavailable: number | string;
    maxSurge: number;
    maxUnavailable: number;
  }> = [
    { replicas: 10, surge: '25%', unavailable: '25%', maxSurge: 3, maxUnavailable: 2 },
    { replicas: 6, surge: 0, unavailable: 1, maxSurge: 0, maxUnavailable: 1 },
    { replicas: 5, surge: '40%', unavailable: '0%', maxSurge: 2, maxUnavailable: 0 },
    { replicas: 7, surge: 1, unavailable: '30%', maxSurge: 1, maxUnavailable: 2 },
  ];
  for (const s of settings) {
    test(`a rolling update stays within maxSurge ${s.surge} and maxUnavailable ${s.unavailable} at every pod event (${s.replicas} replicas)`, async () => {
      const ns = `roll-${String(s.surge).replace('%', 'p')}-${String(s.unavailable).replace('%', 'p')}`;
      await namespace(ns);
      await k(
        ['-n', ns, 'apply', '-f', '-'],
        deploymentYaml('web', { replicas: s.replicas, surge: s.surge, unavailable: s.unavailable }),
      );
      assert.match(
        await k(['-n', ns, 'rollout', 'status', 'deploy/web', '--timeout=20s']),
        /deployment "web" successfully rolled out/,
      );

      const list = await api.list(`/api/v1/namespaces/${ns}/pods`);
      const watch = await httpWatch(
        server.url,
        `/api/v1/namespaces/${ns}/pods?watch=true&resourceVersion=${list.metadata.resourceVersion}`,
      );
      watches.push(watch);

      assert.match(
        await k(['-n', ns, 'set', 'image', 'deploy/web', 'app=nginx:1.26']),
        /deployment.apps\/web image updated/,
      );
      const status = await k(['-n', ns, 'rollout', 'status', 'deploy/web', '--timeout=30s']);
      assert.match(status, /deployment "web" successfully rolled out/);
      await eventually('only new, ready pods', async () => {
        const { final } = boundsOver(list.items, watch.events);
        return (
          final.length === s.replicas &&
          final.every((p) => JSON.stringify(p.spec).includes('nginx:1.26') && !p.metadata.deletionTimestamp)
        );
      });
      const { maxPods, minAvailable } = boundsOver(list.items, watch.events);
      assert.ok(
        maxPods <= s.replicas + s.maxSurge,
        `at some instant ${maxPods} pods > ${s.replicas} + maxSurge ${s.maxSurge}`,
      );
      assert.ok(
        minAvailable >= s.replicas - s.maxUnavailable,
        `at some instant only ${minAvailable} pods available < ${s.replicas} - maxUnavailable ${s.maxUnavailable}`,
      );
      assert.ok(watch.events.length >= 3 * s.replicas, 'every pod was replaced through watch events');
    });
  }

  test('rollout history, undo (to a new revision), restart, pause and resume, scale', async () => {
    const ns = 'rollouts';
    await namespace(ns);
    await k(['-n', ns, 'apply', '-f', '-'], deploymentYaml('app', { replicas: 3, image: 'nginx:1' }));
    await k(['-n', ns, 'rollout', 'status', 'deploy/app', '--timeout=20s']);
    await k(['-n', ns, 'set', 'image', 'deploy/app', 'app=nginx:2']);
    await k(['-n', ns, 'annotate', 'deploy/app', 'kubernetes.io/change-cause=to v2']);
    await k(['-n', ns, 'rollout', 'status', 'deploy/app', '--timeout=20s']);

    const history = await k(['-n', ns, 'rollout', 'history', 'deploy/app']);
    assert.match(history, /REVISION\s+CHANGE-CAUSE\n1\s+<none>\n2\s+to v2\n/);
    assert.match(await k(['-n', ns, 'rollout', 'history', 'deploy/app', '--revision=1']), /Image:\s+nginx:1\n/);

    assert.match(await k(['-n', ns, 'rollout', 'undo', 'deploy/app']), /deployment.apps\/app rolled back/);
    await k(['-n', ns, 'rollout', 'status', 'deploy/app', '--timeout=20s']);
    const d = await api.get(`/apis/apps/v1/namespaces/${ns}/deployments/app`);
    assert.equal(
      (d.spec as { template: { spec: { containers: Array<{ image: string }> } } }).template.spec.containers[0]!.image,
      'nginx:1',
    );
    assert.equal(d.metadata.annotations!['deployment.kubernetes.io/revision'], '3');
    assert.match(
      await k(['-n', ns, 'rollout', 'history', 'deploy/app']),
      /REVISION\s+CHANGE-CAUSE\n2\s+to v2\n3\s+<none>\n/,
    );
    const rsList = await api.list(`/apis/apps/v1/namespaces/${ns}/replicasets`);
    assert.equal(rsList.items.length, 2, 'the undo reused the first ReplicaSet');
    const reused = rsList.items.find((rs) => rs.metadata.annotations!['deployment.kubernetes.io/revision'] === '3')!;
    assert.equal(reused.metadata.annotations!['deployment.kubernetes.io/revision-history'], '1');
    assert.match(await k(['-n', ns, 'rollout', 'undo', 'deploy/app', '--to-revision=2']), /rolled back/);
    await k(['-n', ns, 'rollout', 'status', 'deploy/app', '--timeout=20s']);
    assert.match(
      await k([
        '-n',
        ns,
        'get',
        'deploy/app',
        '-o',
        'jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision} {.spec.template.spec.containers[0].image}',
      ]),
      /^4 nginx:2$/,
    );

    assert.match(await k(['-n', ns, 'rollout', 'restart', 'deploy/app']), /deployment.apps\/app restarted/);
    await k(['-n', ns, 'rollout', 'status', 'deploy/app', '--timeout=20s']);
    const restarted = await api.get(`/apis/apps/v1/namespaces/${ns}/deployments/app`);
    assert.ok(
      (restarted.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata
        .annotations['kubectl.kubernetes.io/restartedAt'],
    );
    assert.equal(restarted.metadata.annotations!['deployment.kubernetes.io/revision'], '5');

    assert.match(await k(['-n', ns, 'rollout', 'pause', 'deploy/app']), /deployment.apps\/app paused/);
    await eventually('Progressing Unknown DeploymentPaused', async () => {
      const c = await k([
        '-n',
        ns,
        'get',
        'deploy/app',
        '-o',
        'jsonpath={.status.conditions[?(@.type=="Progressing")].reason}',
      ]);
      return c === 'DeploymentPaused';
    });
    await k(['-n', ns, 'set', 'image', 'deploy/app', 'app=nginx:3']);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(
      (await api.list(`/apis/apps/v1/namespaces/${ns}/replicasets`)).items.length,
      3,
      'no new ReplicaSet while paused',
    );
    const undoPaused = await kubectl(server.url, ['-n', ns, 'rollout', 'undo', 'deploy/app']);
    assert.notEqual(undoPaused.code, 0);
    assert.match(undoPaused.stderr, /you cannot rollback a paused deployment; resume it first/);
    assert.match(await k(['-n', ns, 'rollout', 'resume', 'deploy/app']), /deployment.apps\/app resumed/);
    await k(['-n', ns, 'rollout', 'status', 'deploy/app', '--timeout=20s']);
    assert.equal((await api.list(`/apis/apps/v1/namespaces/${ns}/replicasets`)).items.length, 4);

    assert.match(await k(['-n', ns, 'scale', 'deploy/app', '--replicas=5']), /deployment.apps\/app scaled/);
    await k(['-n', ns, 'rollout', 'status', 'deploy/app', '--timeout=20s']);
    assert.match(await k(['-n', ns, 'get', 'deploy/app']), /app\s+5\/5\s+5\s+5\s/);
    await k(['-n', ns, 'scale', 'deploy/app', '--replicas=1']);
    await eventually('one pod', async () => (await podsOf(ns, 'app=app')).length === 1);

    const events = await k([
      '-n',
      ns,
      'get',
      'events',
      '--field-selector',
      'involvedObject.kind=Deployment',
      '-o',
      'jsonpath={range .items[*]}{.reason} {.message}{"\\n"}{end}',
    ]);
    assert.match(events, /ScalingReplicaSet Scaled up replica set app-[a-z0-9]+ from 0 to 3\n/);
    // As in Kubernetes (client-go's event correlator), the 10th distinct scaling message within 10 minutes starts
    // one combined event (and the controller's budget of 25 events about this Deployment may run out before the
    // last scale, 5 to 1, which is then not recorded).
    assert.match(
      events,
      /ScalingReplicaSet \(combined from similar events\): Scaled (up|down) replica set app-[a-z0-9]+ from \d+ to \d+\n/,
    );
    const describe = await k(['-n', ns, 'describe', 'deploy/app']);
    assert.match(describe, /Available\s+True\s+MinimumReplicasAvailable/);
    assert.match(describe, /Progressing\s+True\s+NewReplicaSetAvailable/);
    assert.match(describe, /NewReplicaSet:\s+app-[a-z0-9]+ \(1\/1 replicas created\)/);
  });

  test('Recreate: no new pod runs beside an old one', async () => {
    const ns = 'recreate';
    await namespace(ns);
    await k(['-n', ns, 'apply', '-f', '-'], deploymentYaml('re', { replicas: 3, strategy: 'Recreate' }));
    await k(['-n', ns, 'rollout', 'status', 'deploy/re', '--timeout=20s']);
    const list = await api.list(`/api/v1/namespaces/${ns}/pods`);
    const watch = await httpWatch(
      server.url,
      `/api/v1/namespaces/${ns}/pods?watch=true&resourceVersion=${list.metadata.resourceVersion}`,
    );
    watches.push(watch);
    await k(['-n', ns, 'set', 'image', 'deploy/re', 'app=nginx:2']);
    await k(['-n', ns, 'rollout', 'status', 'deploy/re', '--timeout=20s']);
    await eventually(
      'three new pods',
      async () => (await podsOf(ns, 'app=re')).filter((p) => JSON.stringify(p.spec).includes('nginx:2')).length === 3,
    );
    const live = new Map<string, Obj>(list.items.map((p) => [p.metadata.name!, p]));
    for (const e of watch.events) {
      if (e.type === 'DELETED') live.delete(e.object.metadata.name!);
      else live.set(e.object.metadata.name!, e.object);
      const images = new Set(
        [...live.values()].map((p) => (JSON.stringify(p.spec).includes('nginx:2') ? 'new' : 'old')),
      );
      assert.ok(images.size <= 1, `old and new pods at once: ${[...live.keys()].join(', ')}`);
    }
  });

  test('a ReplicaSet heals deleted pods, adopts matching orphans and releases pods whose labels change', async () => {
    const ns = 'replicasets';
    await namespace(ns);
    const orphan = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'early', labels: { app: 'rs' } },
      spec: { containers: [{ name: 'app', image: 'nginx' }] },
    };
    await api.create(`/api/v1/namespaces/${ns}/pods`, orphan);
    const rsYaml = `apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: rs
spec:
  replicas: 3
  selector:
    matchLabels: {app: rs}
  template:
    metadata:
      labels: {app: rs}
    spec:
      containers:
      - name: app
        image: nginx
`;
    await k(['-n', ns, 'apply', '-f', '-'], rsYaml);
    await eventually(
      '3 ready replicas',
      async () =>
        (await api.get(`/apis/apps/v1/namespaces/${ns}/replicasets/rs`)).status?.['readyReplicas' as never] === 3,
    );
    const rs = await api.get(`/apis/apps/v1/namespaces/${ns}/replicasets/rs`);
    const pods = await podsOf(ns, 'app=rs');
    assert.equal(pods.length, 3, 'the orphan was adopted, so only two were created');
    const early = pods.find((p) => p.metadata.name === 'early')!;
    assert.deepEqual((early.metadata.ownerReferences as unknown[])[0], {
      apiVersion: 'apps/v1',
      kind: 'ReplicaSet',
      name: 'rs',
      uid: rs.metadata.uid,
      controller: true,
      blockOwnerDeletion: true,
    });
    assert.match(await k(['-n', ns, 'get', 'rs', 'rs']), /rs\s+3\s+3\s+3\s/);

    const victim = pods.find((p) => p.metadata.name !== 'early')!.metadata.name!;
    await k(['-n', ns, 'delete', 'pod', victim]);
    await eventually('a replacement pod', async () => {
      const now = await podsOf(ns, 'app=rs');
      return now.length === 3 && !now.some((p) => p.metadata.name === victim);
    });

    await k(['-n', ns, 'label', 'pod', 'early', 'app=elsewhere', '--overwrite']);
    await eventually('early released and replaced', async () => {
      const released = await api.get(`/api/v1/namespaces/${ns}/pods/early`);
      return released.metadata.ownerReferences === undefined && (await podsOf(ns, 'app=rs')).length === 3;
    });
    const events = await k([
      '-n',
      ns,
      'get',
      'events',
      '--field-selector',
      'involvedObject.name=rs',
      '-o',
      'jsonpath={range .items[*]}{.reason} {.message}{"\\n"}{end}',
    ]);
    assert.match(events, /SuccessfulCreate Created pod: rs-[a-z0-9]{5}\n/);

    await k(['-n', ns, 'scale', 'rs/rs', '--replicas=1']);
    await eventually('one pod left', async () => (await podsOf(ns, 'app=rs')).length === 1);
    assert.match(
      await k([
        '-n',
        ns,
        'get',
        'events',
        '--field-selector',
        'involvedObject.name=rs',
        '-o',
        'jsonpath={range .items[*]}{.reason} {.message}{"\\n"}{end}',
      ]),
      /SuccessfulDelete Deleted pod: rs-[a-z0-9]{5}\n/,
    );
  });

  for (const cascade of ['background', 'foreground', 'orphan'] as const) {
    test(`kubectl delete deploy --cascade=${cascade}`, async () => {
      const ns = `cascade-${cascade}`;
      await namespace(ns);
      await k(['-n', ns, 'apply', '-f', '-'], deploymentYaml('gone', { replicas: 2 }));
      await k(['-n', ns, 'rollout', 'status', 'deploy/gone', '--timeout=20s']);
      assert.match(
        await k(['-n', ns, 'delete', 'deploy', 'gone', `--cascade=${cascade}`]),
        /deployment.apps "gone" deleted/,
      );
      const rsPath = `/apis/apps/v1/namespaces/${ns}/replicasets`;
      if (cascade === 'orphan') {
        await eventually('the ReplicaSet orphaned', async () => {
          const items = (await api.list(rsPath)).items;
          return items.length === 1 && items[0]!.metadata.ownerReferences === undefined;
        });
        await new Promise((r) => setTimeout(r, 100));
        assert.equal((await podsOf(ns, 'app=gone')).length, 2, 'the pods stay, still owned by the ReplicaSet');
      } else {
        if (cascade === 'foreground') {
          // kubectl waited for the Deployment, which goes only after its ReplicaSet and pods.
          assert.equal((await api.list(rsPath)).items.length, 0);
          assert.equal((await podsOf(ns, 'app=gone')).length, 0);
        }
        await eventually(
          'the ReplicaSet and pods gone',
          async () => (await api.list(rsPath)).items.length === 0 && (await podsOf(ns, 'app=gone')).length === 0,
        );
      }
    });
  }
});

// The same rolling update against the node simulator (scheduler and kubelets), when this build has it.
describe('a rolling update on simulated nodes', {
  skip: missing ?? (NO_NODES.length === 0 ? 'sim serve has no --nodes in this build' : undefined),
}, () => {
  test('stays within maxSurge and maxUnavailable at every pod event, old pods terminating through the kubelet', async (t) => {
    const server = await startServer(['--nodes', '3']);
    t.after(() => server.stop());
    const api = new Api(server.url);
    const k = async (args: string[], input?: string): Promise<string> => {
      const r = await kubectl(server.url, args, { input, timeoutMs: 30_000 });
      assert.equal(r.code, 0, `kubectl ${args.join(' ')} failed (${r.code}):\n${r.stderr}\n${r.stdout}`);
      return r.stdout;
    };
    await k(['apply', '-f', '-'], deploymentYaml('web', { replicas: 12, surge: '25%', unavailable: '25%', grace: 1 }));
    assert.match(await k(['rollout', 'status', 'deploy/web', '--timeout=30s']), /successfully rolled out/);
    assert.match(await k(['get', 'pods', '-o', 'wide']), /Running\s+0\s+\S+\s+10\.244\.\d+\.\d+\s+node-\d/);
    const list = await api.list('/api/v1/namespaces/default/pods');
    const watch = await httpWatch(
      server.url,
      `/api/v1/namespaces/default/pods?watch=true&resourceVersion=${list.metadata.resourceVersion}`,
    );
    t.after(() => watch.close());
    await k(['set', 'image', 'deploy/web', 'app=nginx:1.26']);
    assert.match(await k(['rollout', 'status', 'deploy/web', '--timeout=30s']), /successfully rolled out/);
    const deadline = Date.now() + 20_000;
    for (;;) {
      const { final } = boundsOver(list.items, watch.events);
      if (final.length === 12 && final.every((p) => JSON.stringify(p.spec).includes('nginx:1.26'))) break;
      if (Date.now() > deadline) assert.fail(`old pods not gone: ${final.map((p) => p.metadata.name).join(', ')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const { maxPods, minAvailable } = boundsOver(list.items, watch.events);
    assert.ok(maxPods <= 12 + 3, `${maxPods} pods > 12 + 3`);
    assert.ok(minAvailable >= 12 - 3, `${minAvailable} ready < 12 - 3`);
    assert.ok(
      watch.events.some((e) => e.type === 'MODIFIED' && e.object.metadata.deletionTimestamp),
      'old pods went through Terminating',
    );
  });
});

describe('progress deadline on a virtual clock', { skip: missing }, () => {
  test('no progress for progressDeadlineSeconds: Progressing False ProgressDeadlineExceeded, and kubectl rollout status fails', async (t) => {
    const server = await startServer(['--clock', 'virtual', ...NO_NODES]);
    t.after(() => server.stop());
    const api = new Api(server.url);
    const yaml = deploymentYaml('stuck', { replicas: 2 }).replace(
      '  replicas: 2\n',
      '  replicas: 2\n  progressDeadlineSeconds: 30\n',
    );
    assert.equal((await kubectl(server.url, ['apply', '-f', '-'], { input: yaml })).code, 0);
    const advance = (by: string): Promise<unknown> =>
      api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
    const progressing = async (): Promise<{
      status: string;
      reason: string;
      message: string;
      lastUpdateTime: string;
    }> =>
      (
        (await api.get('/apis/apps/v1/namespaces/default/deployments/stuck')).status as {
          conditions: Array<{ type: string; status: string; reason: string; message: string; lastUpdateTime: string }>;
        }
      ).conditions.find((c) => c.type === 'Progressing')!;
    await advance('29s');
    assert.equal((await progressing()).status, 'True', 'not yet: the deadline has not passed');
    await advance('5s');
    const c = await progressing();
    assert.deepEqual([c.status, c.reason], ['False', 'ProgressDeadlineExceeded']);
    assert.match(c.message, /^ReplicaSet "stuck-[a-z0-9]+" has timed out progressing\.$/);
    const status = await kubectl(server.url, ['rollout', 'status', 'deploy/stuck', '--timeout=10s']);
    assert.equal(status.code, 1);
    assert.match(status.stderr, /error: deployment "stuck" exceeded its progress deadline/);
  });
});
