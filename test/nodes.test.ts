import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Api, assertStatus, type Obj } from './helpers/http.js';
import { kubectl, kubectlMissing, spawnKubectl, type KubectlProcess } from './helpers/kubectl.js';
import { ROOT, startServer, type SimServer } from './helpers/server.js';

// Issue 3 end to end with the real kubectl: fake nodes, the scheduler, the kubelet's lifecycle, node failure
// and eviction, cordon/drain, exec and logs, on a virtual clock (cluster minutes pass in milliseconds).

const missing = kubectlMissing();
const KUBECTL_129 = '/usr/lib/google-cloud-sdk/bin/kubectl.1.29';

const webapp = `
apiVersion: v1
kind: ConfigMap
metadata: {name: webapp-config}
data: {message: "Welcome to Kubernetes Patterns !"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: webapp}
spec:
  replicas: 2
  selector: {matchLabels: {app: webapp}}
  template:
    metadata: {labels: {app: webapp}}
    spec:
      containers:
      - name: app
        image: k8spatterns/mini-http-server
        env:
        - name: MESSAGE
          valueFrom: {configMapKeyRef: {name: webapp-config, key: message}}
        volumeMounts: [{name: cfg, mountPath: /etc/config}]
      volumes: [{name: cfg, configMap: {name: webapp-config}}]
`;

/** A background kubectl's exit code, or a failure (not a hang) when it does not exit in time. */
function exitOf(p: KubectlProcess, what: string, ms = 15_000): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>(
    (_, reject) =>
      (timer = setTimeout(
        () => reject(new Error(`${what} did not exit within ${ms} ms; stdout:\n${p.stdout}\nstderr:\n${p.stderr}`)),
        ms,
      )),
  );
  return Promise.race([p.exited, late]).finally(() => clearTimeout(timer));
}

function rows(table: string): string[][] {
  return table
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s{2,}/));
}

describe('nodes, scheduler and kubelets with kubectl', { skip: missing }, () => {
  let server: SimServer;
  let api: Api;
  const background: KubectlProcess[] = [];

  before(async () => {
    server = await startServer(['--clock', 'virtual', '--seed', '3', '--nodes', '3']);
    api = new Api(server.url);
  });
  after(async () => {
    for (const p of background) await p.stop();
    await server.stop();
  });

  const run = (args: string[], input?: string) => kubectl(server.url, args, input === undefined ? {} : { input });
  const k = async (args: string[], input?: string): Promise<string> => {
    const r = await run(args, input);
    assert.equal(
      r.code,
      0,
      `kubectl ${args.join(' ')} failed (${r.code}):\n${r.stderr}\n${r.stdout}\nserver log:\n${server.stderr().slice(-2000)}`,
    );
    return r.stdout;
  };
  /** Moves the virtual clock; returns the wall time it took (ms). */
  const advance = async (by: string): Promise<number> => {
    const start = performance.now();
    await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
    return performance.now() - start;
  };
  const now = async (): Promise<string> => (await api.expect<{ now: string }>(200, '/sim/v1/clock')).now;
  const pods = async (selector: string): Promise<Obj[]> =>
    (await api.list(`/api/v1/namespaces/default/pods?labelSelector=${encodeURIComponent(selector)}`)).items;
  const field = (obj: unknown, path: string): unknown =>
    path.split('.').reduce<unknown>((o, key) => (o as Record<string, unknown> | undefined)?.[key], obj);

  test('get nodes: three Ready nodes with version, addresses, zones, leases', async () => {
    const table = rows(await k(['get', 'nodes']));
    assert.deepEqual(table[0], ['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION']);
    assert.deepEqual(
      table.slice(1).map((r) => [r[0], r[1], r[2], r[4]]),
      [
        ['node-1', 'Ready', '<none>', 'v1.32.0'],
        ['node-2', 'Ready', '<none>', 'v1.32.0'],
        ['node-3', 'Ready', '<none>', 'v1.32.0'],
      ],
    );
    assert.match(
      await k(['get', 'nodes', '-o', 'wide']),
      /^node-1\s+Ready\s+<none>\s+\S+\s+v1\.32\.0\s+172\.18\.0\.2\s+<none>\s+kube-sim simulated node\s+\S+\s+containerd:\/\/1\.7\.24$/m,
    );
    const node = JSON.parse(await k(['get', 'node', 'node-2', '-o', 'json'])) as Obj;
    assert.deepEqual(field(node, 'status.capacity'), {
      cpu: '4',
      'ephemeral-storage': '100Gi',
      'hugepages-1Gi': '0',
      'hugepages-2Mi': '0',
      memory: '16Gi',
      pods: '110',
    });
    assert.equal(node.metadata.labels!['topology.kubernetes.io/zone'], 'zone-b');
    assert.equal(node.metadata.labels!['kubernetes.io/hostname'], 'node-2');
    assert.equal(field(node, 'spec.podCIDR'), '10.244.1.0/24');
    assert.deepEqual(
      (field(node, 'status.conditions') as Obj[]).map((c) => `${String(c.type)}=${String(c.status)}`),
      ['MemoryPressure=False', 'DiskPressure=False', 'PIDPressure=False', 'Ready=True'],
    );
    assert.match(await k(['get', 'leases', '-n', 'kube-node-lease']), /^node-3\s+node-3\s/m);
    const version = JSON.parse((await api.request('/version')).text) as { gitVersion: string };
    assert.equal(field(node, 'status.nodeInfo.kubeletVersion'), version.gitVersion);
  });

  test('a Deployment runs: pods Running with IP and NODE in -o wide, spread over the nodes', async () => {
    await k(['apply', '-f', '-'], webapp);
    await advance('0s');
    const table = rows(await k(['get', 'pods', '-l', 'app=webapp', '-o', 'wide']));
    assert.deepEqual(table[0]!.slice(0, 7), ['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE', 'IP', 'NODE']);
    assert.equal(table.length, 3);
    for (const row of table.slice(1)) {
      assert.deepEqual([row[1], row[2], row[3]], ['1/1', 'Running', '0']);
      assert.match(row[5]!, /^10\.244\.\d+\.\d+$/);
      assert.match(row[6]!, /^node-[123]$/);
    }
    assert.notEqual(table[1]![6], table[2]![6], 'two replicas land on two nodes');
    const name = table[1]![0]!;
    const events = await k([
      'get',
      'events',
      '--field-selector',
      `involvedObject.name=${name}`,
      '-o',
      'jsonpath={range .items[*]}{.reason}{"\\n"}{end}',
    ]);
    assert.deepEqual(events.trim().split('\n'), ['Scheduled', 'Pulling', 'Pulled', 'Created', 'Started']);
  });

  test('exec: printenv and cat of a mounted ConfigMap, through deploy/NAME; errors as Kubernetes gives them', async () => {
    assert.equal(await k(['exec', 'deploy/webapp', '--', 'printenv', 'MESSAGE']), 'Welcome to Kubernetes Patterns !\n');
    assert.equal(
      await k(['exec', 'deploy/webapp', '--', 'cat', '/etc/config/message']),
      'Welcome to Kubernetes Patterns !',
    );
    const name = (await pods('app=webapp'))[0]!.metadata.name!;
    const wrong = await run(['exec', name, '-c', 'nope', '--', 'printenv']);
    assert.equal(wrong.code, 1);
    assert.match(
      wrong.stderr,
      new RegExp(`Error from server \\(BadRequest\\): container nope is not valid for pod ${name}`),
    );
    const unknown = await run(['exec', name, '--', 'frobnicate']);
    assert.equal(unknown.code, 127);
    assert.match(unknown.stderr, /frobnicate: command not found/);
    assert.match(unknown.stderr, /command terminated with exit code 127/);
    const script = await run(['exec', name, '--', 'sh', '-c', 'echo $HOSTNAME; ls /etc/config; exit 3']);
    assert.equal(script.code, 3);
    assert.equal(script.stdout, `${name}\nmessage\n`);
    if (existsSync(KUBECTL_129)) {
      // kubectl before 1.30 speaks SPDY/3.1: the same session, the same output and exit code.
      const home = mkdtempSync(join(tmpdir(), 'kube-sim-kubectl129-'));
      try {
        const old = spawnSync(
          KUBECTL_129,
          ['--server', server.url, 'exec', name, '--', 'sh', '-c', 'echo $HOSTNAME; ls /etc/config; exit 3'],
          { encoding: 'utf8', timeout: 20_000, env: { ...process.env, KUBECONFIG: '/dev/null', HOME: home } },
        );
        assert.equal(old.status, 3, old.stderr);
        assert.equal(old.stdout, `${name}\nmessage\n`);
        assert.match(old.stderr, /command terminated with exit code 3/);
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    }
  });

  test('the ConfigMap changes, the pods are recreated, and the new pod started with the new value (the seed walkthrough)', async () => {
    await k(['annotate', 'configmap', 'webapp-config', 'k8spatterns.io/podDeleteSelector=app=webapp']);
    const watch = spawnKubectl(server.url, ['get', 'pods', '-l', 'app=webapp', '-w']);
    background.push(watch);
    await watch.until((out) => out.includes('Running'), 'the initial list');
    await k(['patch', 'configmap', 'webapp-config', '--patch', '{"data":{"message":"Hello, Updated World!"}}']);
    await advance('0s');
    await watch.until((out) => /Terminating/.test(out), 'Terminating pods');
    await advance('30s');
    assert.equal(await k(['exec', 'deploy/webapp', '--', 'printenv', 'MESSAGE']), 'Hello, Updated World!\n');
    await watch.until(
      (out) => /\s0\/1\s+ContainerCreating/.test(out) && /\s1\/1\s+Running\s+0\s+0s/.test(out),
      'the new pods coming up',
    );
    await watch.stop();
    await k(['annotate', 'configmap', 'webapp-config', 'k8spatterns.io/podDeleteSelector-']);
  });

  test('an unschedulable pod says why, with the scheduler message shape and a FailedScheduling event; binding a bound pod is 409', async () => {
    await k(
      ['apply', '-f', '-'],
      `
apiVersion: v1
kind: Pod
metadata: {name: hungry}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: "6"}}}]
`,
    );
    await advance('0s');
    assert.match(await k(['get', 'pod', 'hungry']), /^hungry\s+0\/1\s+Pending\s+0\s/m);
    const message =
      '0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.';
    const condition = JSON.parse(await k(['get', 'pod', 'hungry', '-o', 'jsonpath={.status.conditions[0]}'])) as Obj;
    assert.deepEqual(
      [condition.type, condition.status, condition.reason, condition.message],
      ['PodScheduled', 'False', 'Unschedulable', message],
    );
    assert.match(
      await k(['describe', 'pod', 'hungry']),
      new RegExp(`Warning\\s+FailedScheduling\\s+\\S+\\s+default-scheduler\\s+${message.replace(/[.()]/g, '\\$&')}`),
    );
    await k(['delete', 'pod', 'hungry']);

    const bound = (await pods('app=webapp'))[0]!;
    const reply = await api.request(`/api/v1/namespaces/default/pods/${bound.metadata.name}/binding`, {
      method: 'POST',
      body: {
        apiVersion: 'v1',
        kind: 'Binding',
        metadata: { name: bound.metadata.name },
        target: { kind: 'Node', name: 'node-1' },
      },
    });
    const status = assertStatus(reply, 409, 'Conflict');
    assert.equal(
      status.message,
      `Operation cannot be fulfilled on pods/binding "${bound.metadata.name}": pod ${bound.metadata.name} is already assigned to node "${String(field(bound, 'spec.nodeName'))}"`,
    );
  });

  test('logs: a pending pod is an error; -f streams until the container exits; --tail and --timestamps', async () => {
    await k(
      ['apply', '-f', '-'],
      `
apiVersion: v1
kind: Pod
metadata:
  name: worker
  annotations: {kube-sim.dev/startup-delay: 10s, kube-sim.dev/duration: 1m, kube-sim.dev/log: "processing $(HOSTNAME)"}
spec:
  restartPolicy: Never
  containers: [{name: c, image: busybox}]
`,
    );
    await advance('0s');
    const early = await run(['logs', 'worker']);
    assert.equal(early.code, 1);
    assert.match(
      early.stderr,
      /Error from server \(BadRequest\): container "c" in pod "worker" is waiting to start: ContainerCreating/,
    );
    await advance('10s');
    const follow = spawnKubectl(server.url, ['logs', '-f', 'worker']);
    background.push(follow);
    await follow.until((out) => out.includes('processing worker'), 'the first lines');
    assert.doesNotMatch(follow.stdout, /exited/);
    await advance('1m');
    await follow.until((out) => out.includes('exited with code 0'), 'the exit line');
    assert.equal(await exitOf(follow, 'kubectl logs -f'), 0, 'the stream ends when the container exits');
    assert.equal(
      follow.stdout,
      '[kube-sim] container c started (image busybox, restart 0)\nprocessing worker\n[kube-sim] container c exited with code 0\n',
    );
    assert.equal(
      await k(['logs', 'worker', '--tail', '1', '--timestamps']),
      '2025-01-01T00:01:40.000000000Z [kube-sim] container c exited with code 0\n',
    );
    assert.match(await k(['get', 'pod', 'worker']), /^worker\s+0\/1\s+Completed\s+0\s/m);
    const previous = await run(['logs', 'worker', '--previous']);
    assert.match(previous.stderr, /previous terminated container "c" in pod "worker" not found/);
  });

  test("CrashLoopBackOff: the restart count rises on the kubelet's schedule (10 s doubling)", async () => {
    await k(
      ['apply', '-f', '-'],
      `
apiVersion: v1
kind: Pod
metadata:
  name: crasher
  annotations: {kube-sim.dev/duration: 5s, kube-sim.dev/exit-code: "1"}
spec:
  containers: [{name: c, image: busybox}]
`,
    );
    await advance('0s');
    const seen: string[] = [];
    // Runs of 5 s: restart 1 at once (at 5 s), then back-offs of 10 s, 20 s, 40 s after each exit (restarts at 20 s, 45 s, 90 s).
    for (const [by, restarts, status] of [
      ['5s', 1, 'Running'],
      ['5s', 1, 'CrashLoopBackOff'],
      ['10s', 2, 'Running'],
      ['5s', 2, 'CrashLoopBackOff'],
      ['19s', 2, 'CrashLoopBackOff'],
      ['1s', 3, 'Running'],
      ['44s', 3, 'CrashLoopBackOff'],
      ['1s', 4, 'Running'],
    ] as const) {
      await advance(by);
      const row = rows(await k(['get', 'pod', 'crasher']))[1]!;
      seen.push(`${row[2]} ${row[3]!.split(' ')[0]}`);
      assert.equal(
        `${row[2]} ${row[3]!.split(' ')[0]}`,
        `${status} ${restarts}`,
        `after ${seen.length} steps: ${seen.join(', ')}`,
      );
    }
    assert.match(
      await k(['get', 'events', '--field-selector', 'involvedObject.name=crasher,reason=BackOff']),
      /Back-off restarting failed container c in pod crasher_default/,
    );
    assert.match(await k(['logs', 'crasher', '--previous']), /exited with code 1/);
    await k(['delete', 'pod', 'crasher', '--grace-period=0', '--force']);
  });

  test('a graceful delete: Terminating until the container exits on SIGTERM (1 s), a shell as PID 1 the whole grace period', async () => {
    // A shell script as PID 1 without a trap: the kernel delivers it no SIGTERM, the kubelet kills it after 30 s.
    await k(
      ['apply', '-f', '-'],
      'apiVersion: v1\nkind: Pod\nmetadata: {name: looper}\nspec: {containers: [{name: c, image: busybox, command: [sh, -c, "while true; do sleep 1; done"]}]}\n',
    );
    await advance('0s');
    const name = (await pods('app=webapp'))[0]!.metadata.name!;
    await k(['delete', 'pod', name, 'looper', '--wait=false']);
    await advance('0s');
    assert.match(await k(['get', 'pod', name]), new RegExp(`^${name}\\s+1/1\\s+Terminating`, 'm'));
    assert.match(
      await k(['get', 'events', '--field-selector', `involvedObject.name=${name},reason=Killing`]),
      /Stopping container app/,
    );
    await advance('999ms');
    assert.equal((await api.request(`/api/v1/namespaces/default/pods/${name}`)).status, 200);
    await advance('1ms');
    assert.equal(
      (await api.request(`/api/v1/namespaces/default/pods/${name}`)).status,
      404,
      "the server exits a second after SIGTERM (the image catalog's stop delay)",
    );
    await advance('28s');
    assert.match(await k(['get', 'pod', 'looper']), /^looper\s+1\/1\s+Terminating/m);
    await advance('1s');
    assert.equal((await api.request('/api/v1/namespaces/default/pods/looper')).status, 404);
  });

  test('a failed node goes NotReady after the grace period and its pods are evicted after their 300 s toleration', async () => {
    await advance('0s');
    const before = await pods('app=webapp');
    const victim = before[0]!;
    const node = String(field(victim, 'spec.nodeName'));
    const kubelets = async () =>
      (await api.expect<{ items: Array<{ node: string; kubelet: string }> }>(200, '/sim/v1/nodes')).items;
    assert.ok((await kubelets()).every((k) => k.kubelet === 'running'));
    await api.expect(200, `/sim/v1/nodes/${node}/fail`, { method: 'POST' });
    assert.deepEqual(
      (await kubelets()).filter((k) => k.kubelet === 'stopped'),
      [{ node, kubelet: 'stopped' }],
      'GET /sim/v1/nodes says which kubelet is failed',
    );
    let wall = await advance('45s');
    assert.match(
      await k(['get', 'node', node]),
      new RegExp(`^${node}\\s+Ready\\s`, 'm'),
      'still within the 50 s grace period',
    );
    wall += await advance('15s');
    assert.match(await k(['get', 'node', node]), new RegExp(`^${node}\\s+NotReady\\s`, 'm'));
    const described = await k(['describe', 'node', node]);
    assert.match(
      described,
      /Taints:\s+node\.kubernetes\.io\/unreachable:NoExecute\s+node\.kubernetes\.io\/unreachable:NoSchedule/,
    );
    assert.match(described, /Ready\s+Unknown\s.*NodeStatusUnknown\s+Kubelet stopped posting node status\./);
    // The kubelet cannot be reached: kube-apiserver's answer (its dial error), which is no internal error of the server.
    const logs = await run(['logs', victim.metadata.name!]);
    assert.equal(logs.code, 1);
    assert.match(
      logs.stderr,
      new RegExp(
        `^Error from server: Get "https://${String(field(victim, 'status.hostIP')).replaceAll('.', '\\.')}:10250/containerLogs/default/${victim.metadata.name}/app": dial tcp [0-9.]+:10250: connect: connection refused\\n$`,
      ),
    );
    assert.doesNotMatch(server.stderr(), /internal error/i, 'an unreachable kubelet is not logged as an error');
    wall += await advance('4m');
    assert.equal(
      (await api.get(`/api/v1/namespaces/default/pods/${victim.metadata.name}`)).metadata.deletionTimestamp,
      undefined,
      'tolerated for 300 s',
    );
    wall += await advance('1m');
    const evicted = await api.get(`/api/v1/namespaces/default/pods/${victim.metadata.name}`);
    assert.ok(evicted.metadata.deletionTimestamp, 'evicted once the toleration ran out');
    assert.match(
      await k([
        'get',
        'events',
        '--field-selector',
        `involvedObject.name=${victim.metadata.name},reason=TaintManagerEviction`,
      ]),
      /Marking for deletion Pod default\//,
    );
    assert.match(
      await k(['get', 'pod', victim.metadata.name!]),
      /Terminating/,
      'no kubelet finishes it while the node is down',
    );
    const replacement = (await pods('app=webapp')).filter((p) => !p.metadata.deletionTimestamp);
    assert.equal(replacement.length, 2);
    assert.ok(
      replacement.every((p) => field(p, 'spec.nodeName') !== node && field(p, 'status.phase') === 'Running'),
      'the replacement runs elsewhere',
    );
    assert.ok(wall < 1000, `6 minutes of cluster time took ${Math.round(wall)} ms of wall time`);
    // The kubelet comes back: the node is Ready again, untainted, and the evicted pod is finished off when its
    // grace period (which started at the eviction) is over.
    await api.expect(200, `/sim/v1/nodes/${node}/recover`, { method: 'POST' });
    await advance('1s');
    assert.ok((await kubelets()).every((k) => k.kubelet === 'running'));
    assert.match(await k(['get', 'node', node]), new RegExp(`^${node}\\s+Ready\\s`, 'm'));
    assert.match(await k(['describe', 'node', node]), /Taints:\s+<none>/);
    await advance(
      `${Math.max(0, Math.ceil((Date.parse(evicted.metadata.deletionTimestamp!) - Date.parse(await now())) / 1000))}s`,
    );
    assert.equal((await api.request(`/api/v1/namespaces/default/pods/${victim.metadata.name}`)).status, 404);
  });

  test('cordon, drain (through the eviction subresource) and uncordon', async () => {
    const node = String(field((await pods('app=webapp'))[0]!, 'spec.nodeName'));
    await k(['cordon', node]);
    assert.match(await k(['get', 'node', node]), new RegExp(`^${node}\\s+Ready,SchedulingDisabled\\s`, 'm'));
    const drain = spawnKubectl(server.url, ['drain', node, '--ignore-daemonsets']);
    background.push(drain);
    await drain.until((out) => out.includes('evicting pod'), 'the eviction');
    await advance('0s');
    await advance('30s');
    assert.equal(await exitOf(drain, 'kubectl drain'), 0, drain.stderr);
    assert.match(drain.stdout, new RegExp(`node/${node} drained`));
    const after = await pods('app=webapp');
    assert.ok(
      after.every((p) => field(p, 'spec.nodeName') !== node),
      'nothing left on the drained node',
    );
    await k(['uncordon', node]);
    assert.match(await k(['get', 'node', node]), new RegExp(`^${node}\\s+Ready\\s`, 'm'));
  });

  test('a Node applied later gets a kubelet; deleting it stops the kubelet and its pods are collected', async () => {
    await k(
      ['apply', '-f', '-'],
      `
apiVersion: v1
kind: Node
metadata: {name: big-1, labels: {size: big}}
status: {capacity: {cpu: "64", memory: 256Gi, pods: "20"}}
`,
    );
    await advance('0s');
    assert.match(await k(['get', 'node', 'big-1']), /^big-1\s+Ready\s/m);
    await k(
      ['apply', '-f', '-'],
      `
apiVersion: v1
kind: Pod
metadata: {name: on-big}
spec:
  nodeSelector: {size: big}
  containers: [{name: c, image: nginx, resources: {requests: {cpu: "32"}}}]
`,
    );
    await advance('0s');
    assert.match(
      await k(['get', 'pod', 'on-big', '-o', 'wide']),
      /^on-big\s+1\/1\s+Running\s+0\s+\S+\s+10\.244\.3\.\d+\s+big-1\s/m,
    );
    await k(['delete', 'node', 'big-1']);
    await advance('41s');
    assert.equal((await api.request('/api/v1/namespaces/default/pods/on-big')).status, 404);
    assert.equal(
      (await api.request('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/big-1')).status,
      404,
    );
  });
});

describe('a user stage file drives the lifecycle', { skip: missing }, () => {
  let server: SimServer;
  let api: Api;
  before(async () => {
    server = await startServer([
      '--clock',
      'virtual',
      '--seed',
      '4',
      '--nodes',
      '1',
      '--stages',
      join(ROOT, 'fixtures/stages/slow-start-oom.yaml'),
    ]);
    api = new Api(server.url);
  });
  after(() => server.stop());

  test('slow pulls (20 s), ready 5 s later, OOMKilled after a minute, then restarted', async () => {
    const k = async (args: string[], input?: string): Promise<string> => {
      const r = await kubectl(server.url, args, input === undefined ? {} : { input });
      assert.equal(r.code, 0, r.stderr);
      return r.stdout;
    };
    const advance = (by: string) => api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
    await k(
      ['apply', '-f', '-'],
      `
apiVersion: v1
kind: Pod
metadata: {name: leaky, labels: {sim.example/fate: oom}}
spec:
  containers: [{name: c, image: busybox}]
`,
    );
    const status = async (): Promise<string> => {
      const row = (await k(['get', 'pod', 'leaky', '--no-headers'])).trim().split(/\s{2,}/);
      return `${row[1]} ${row[2]} ${row[3]!.split(' ')[0]}`;
    };
    await advance('0s');
    assert.equal(await status(), '0/1 ContainerCreating 0');
    await advance('19s');
    assert.equal(await status(), '0/1 ContainerCreating 0');
    await advance('1s');
    assert.equal(await status(), '0/1 Running 0');
    await advance('5s');
    assert.equal(await status(), '1/1 Running 0');
    await advance('55s');
    assert.equal(await status(), '0/1 Running 1', 'OOMKilled at 1m20s, restarted at once (not ready for 5 s)');
    const pod = JSON.parse(await k(['get', 'pod', 'leaky', '-o', 'json'])) as {
      status: { containerStatuses: Array<{ lastState: { terminated: { reason: string; exitCode: number } } }> };
    };
    assert.deepEqual(pod.status.containerStatuses[0]!.lastState.terminated.reason, 'OOMKilled');
    assert.equal(pod.status.containerStatuses[0]!.lastState.terminated.exitCode, 137);
    assert.match(
      await k(['logs', 'leaky', '--previous']),
      /out of memory: killed process 1 \(leaky\)\n\[kube-sim\] container c exited with code 137 \(OOMKilled\)\n$/,
    );
    assert.match(
      await k(['get', 'events', '--field-selector', 'reason=SlowPull']),
      /image pull for leaky took 20s on node-1/,
    );
  });
});
