import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { FakeKubelet } from './helpers/fake-kubelet.js';
import { Api, type Obj } from './helpers/http.js';
import { kubectl, skipWithoutKubectl } from './helpers/kubectl.js';
import { ROOT, serverFor } from './helpers/server.js';

// Issue 5's "Done when", end to end through the real kubectl on a virtual clock. No kubelet runs here: the
// test plays it (FakeKubelet patches pod status), so ordering is under the test's control.

const names = (pods: Obj[]): string[] => pods.map((p) => p.metadata.name!).sort();

// These tests play the kubelet themselves, so the server runs without simulated nodes when it has them.
const NO_NODES = spawnSync(process.execPath, [join(ROOT, 'bin/sim.js'), 'serve', '--help'], {
  encoding: 'utf8',
}).stdout.includes('--nodes')
  ? ['--nodes', '0']
  : [];

async function setup(t: Parameters<typeof serverFor>[0], extraArgs: string[] = []) {
  const server = await serverFor(t, ['--clock', 'virtual', '--seed', '5', ...NO_NODES, ...extraArgs]);
  const api = new Api(server.url);
  const kubelet = new FakeKubelet(api);
  const k = async (args: string[], input?: string): Promise<string> => {
    const r = await kubectl(server.url, args, input === undefined ? {} : { input });
    assert.equal(r.code, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  return { server, api, kubelet, k };
}

const statefulSet = (partition = 0): string => `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: nginx
  replicas: 3
  selector: {matchLabels: {app: web}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {partition: ${partition}}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: nginx, image: "nginx:1.0"}]}
  volumeClaimTemplates:
  - metadata: {name: www}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
`;

test('StatefulSet: ordered creation, stable identity and claims, highest-first scale-down, partitioned rollout, history and undo', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const { api, kubelet, k } = await setup(t);
  await k(['apply', '-f', '-'], statefulSet(2));
  await kubelet.advance('0s');
  const sts = (): Promise<Obj[]> => kubelet.pods('app=web');

  // OrderedReady: web-1 only once web-0 is Running and Ready, and so on.
  assert.deepEqual(names(await sts()), ['web-0']);
  await kubelet.run('web-0', false);
  await kubelet.advance('0s');
  assert.deepEqual(names(await sts()), ['web-0'], 'web-0 running but not ready: web-1 waits');
  await kubelet.run('web-0');
  await kubelet.advance('0s');
  assert.deepEqual(names(await sts()), ['web-0', 'web-1']);
  await kubelet.run('web-1');
  await kubelet.advance('0s');
  await kubelet.run('web-2');
  await kubelet.advance('0s');
  assert.match(await k(['get', 'sts', 'web']), /^web\s+3\/3\s/m);

  const web0 = await api.get('/api/v1/namespaces/default/pods/web-0');
  const spec0 = web0.spec as {
    hostname: string;
    subdomain: string;
    volumes: Array<{ name: string; persistentVolumeClaim?: { claimName: string } }>;
  };
  assert.equal(spec0.hostname, 'web-0');
  assert.equal(spec0.subdomain, 'nginx');
  assert.equal(web0.metadata.annotations?.['kube-sim.dev/dns-name'], 'web-0.nginx.default.svc.cluster.local');
  assert.deepEqual(spec0.volumes.find((v) => v.name === 'www')?.persistentVolumeClaim, { claimName: 'www-web-0' });
  assert.deepEqual((await k(['get', 'pvc', '-o', 'name'])).trim().split('\n').sort(), [
    'persistentvolumeclaim/www-web-0',
    'persistentvolumeclaim/www-web-1',
    'persistentvolumeclaim/www-web-2',
  ]);

  // A deleted pod comes back with the same name and claim.
  const oldUid = (await api.get('/api/v1/namespaces/default/pods/web-1')).metadata.uid;
  await k(['delete', 'pod', 'web-1', '--wait=false']);
  await kubelet.advance('0s');
  const again = await api.get('/api/v1/namespaces/default/pods/web-1');
  assert.notEqual(again.metadata.uid, oldUid);
  assert.equal(
    (again.spec as typeof spec0).volumes.find((v) => v.name === 'www')?.persistentVolumeClaim?.claimName,
    'www-web-1',
  );
  await kubelet.run('web-1');
  await kubelet.advance('0s');

  // Partitioned rollout (partition 2): only web-2 moves to the new revision.
  const status = JSON.parse(await k(['get', 'sts', 'web', '-o', 'json'])).status as Record<string, unknown>;
  assert.equal(status.currentRevision, status.updateRevision);
  await k(['set', 'image', 'sts/web', 'nginx=nginx:2.0']);
  await kubelet.advance('0s');
  const afterSet = JSON.parse(await k(['get', 'sts', 'web', '-o', 'json'])).status as Record<string, string | number>;
  assert.notEqual(afterSet.updateRevision, afterSet.currentRevision);
  assert.deepEqual(names(await sts()), ['web-0', 'web-1', 'web-2']);
  const revOf = async (n: string): Promise<string | undefined> =>
    (await api.get(`/api/v1/namespaces/default/pods/${n}`)).metadata.labels?.['controller-revision-hash'];
  assert.equal(await revOf('web-2'), afterSet.updateRevision, 'web-2 was replaced at the update revision');
  await kubelet.run('web-2');
  await kubelet.advance('0s');
  assert.equal(await revOf('web-1'), afterSet.currentRevision, 'web-1 is below the partition');
  assert.equal(await revOf('web-0'), afterSet.currentRevision);
  assert.match(
    await k(['rollout', 'status', 'sts/web', '--timeout=5s']),
    /partitioned roll out complete: 1 new pods have been updated/,
  );

  // Lower the partition: web-1 then web-0, highest first, each after the previous is ready.
  await k(['patch', 'sts', 'web', '-p', '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}']);
  await kubelet.advance('0s');
  assert.equal(await revOf('web-1'), afterSet.updateRevision);
  assert.equal(await revOf('web-0'), afterSet.currentRevision, 'web-0 waits for web-1 to be ready');
  await kubelet.run('web-1');
  await kubelet.advance('0s');
  assert.equal(await revOf('web-0'), afterSet.updateRevision);
  await kubelet.run('web-0');
  await kubelet.advance('0s');
  assert.match(await k(['rollout', 'status', 'sts/web', '--timeout=5s']), /3 new pods have been updated/);
  const done = JSON.parse(await k(['get', 'sts', 'web', '-o', 'json'])).status as Record<string, unknown>;
  assert.equal(done.currentRevision, afterSet.updateRevision);
  assert.deepEqual(
    [done.replicas, done.readyReplicas, done.updatedReplicas, done.currentReplicas, done.availableReplicas],
    [3, 3, 3, 3, 3],
  );

  assert.match(await k(['rollout', 'history', 'sts/web']), /REVISION\s+CHANGE-CAUSE\n1\s+<none>\n2\s+<none>/);
  await k(['rollout', 'undo', 'sts/web']);
  await kubelet.advance('0s');
  assert.equal(
    JSON.parse(await k(['get', 'sts', 'web', '-o', 'json'])).spec.template.spec.containers[0].image,
    'nginx:1.0',
  );
  assert.match(await k(['rollout', 'history', 'sts/web']), /REVISION\s+CHANGE-CAUSE\n2\s+<none>\n3\s+<none>/);

  // Scale down: the highest ordinal goes first, one at a time; the claims stay.
  for (const n of ['web-2', 'web-1', 'web-0']) await kubelet.run(n);
  await kubelet.advance('0s');
  await k(['scale', 'sts', 'web', '--replicas=1']);
  await kubelet.advance('0s');
  const afterScale = names(await sts());
  assert.ok(!afterScale.includes('web-2'), `web-2 goes first: ${afterScale.join(',')}`);
  assert.deepEqual(
    (await k(['get', 'pvc', '-o', 'name'])).trim().split('\n').length,
    3,
    'claims survive scale-down (whenScaled: Retain)',
  );
  const events = await k([
    'get',
    'events',
    '--field-selector',
    'involvedObject.kind=StatefulSet',
    '-o',
    'jsonpath={range .items[*]}{.reason} {.message}{"\\n"}{end}',
  ]);
  assert.match(events, /SuccessfulCreate create Pod web-0 in StatefulSet web successful/);
  assert.match(events, /SuccessfulCreate create Claim www-web-0 Pod web-0 in StatefulSet web success/);
  assert.match(events, /SuccessfulDelete delete Pod web-2 in StatefulSet web successful/);
});

const nodeYaml = (name: string, labels: Record<string, string>, taints = ''): string => `
apiVersion: v1
kind: Node
metadata:
  name: ${name}
  labels: {${Object.entries(labels)
    .map(([k, v]) => `"${k}": "${v}"`)
    .join(', ')}}
spec: {${taints}}
`;

test('DaemonSet: one pod per eligible node as nodes come, go and change labels; rolling update; rollout status/history/undo', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const { kubelet, k } = await setup(t);
  // Nodes here have no kubelet: the test finishes graceful deletions itself (a scheduler may have bound the pods).
  const settle = async (): Promise<void> => {
    await kubelet.advance('0s');
    await kubelet.reap('app=agent');
    await kubelet.advance('0s');
  };
  await k(
    ['apply', '-f', '-'],
    [
      nodeYaml('n1', { tier: 'edge' }),
      nodeYaml('n2', { tier: 'edge' }),
      nodeYaml('n3', { tier: 'core' }),
      nodeYaml('n4', { tier: 'edge' }, 'taints: [{key: dedicated, value: db, effect: NoSchedule}]'),
    ].join('---'),
  );
  await k(
    ['apply', '-f', '-'],
    `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {tier: edge}
      containers: [{name: agent, image: "agent:1"}]
`,
  );
  await settle();
  const placement = async (): Promise<string[]> =>
    (await kubelet.pods('app=agent'))
      .filter((p) => !p.metadata.deletionTimestamp)
      .map(
        (p) =>
          (
            p.spec as {
              affinity: {
                nodeAffinity: {
                  requiredDuringSchedulingIgnoredDuringExecution: {
                    nodeSelectorTerms: Array<{ matchFields: Array<{ values: string[] }> }>;
                  };
                };
              };
            }
          ).affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]!.matchFields[0]!
            .values[0]!,
      )
      .sort();
  assert.deepEqual(await placement(), ['n1', 'n2'], 'n3 is not edge; n4 has an untolerated NoSchedule taint');
  const pod = (await kubelet.pods('app=agent'))[0]!;
  const tolerations = (pod.spec as { tolerations: Array<{ key: string; effect: string }> }).tolerations.map(
    (x) => `${x.key}:${x.effect}`,
  );
  for (const want of [
    'not-ready:NoExecute',
    'unreachable:NoExecute',
    'disk-pressure:NoSchedule',
    'memory-pressure:NoSchedule',
    'pid-pressure:NoSchedule',
    'unschedulable:NoSchedule',
  ]) {
    assert.ok(
      tolerations.includes(`node.kubernetes.io/${want}`),
      `daemon pods tolerate ${want}: ${tolerations.join(', ')}`,
    );
  }

  // A node joins, one is relabelled out, one leaves.
  await k(['apply', '-f', '-'], nodeYaml('n5', { tier: 'edge' }));
  await settle();
  assert.deepEqual(await placement(), ['n1', 'n2', 'n5']);
  await k(['label', 'node', 'n2', 'tier=core', '--overwrite']);
  await settle();
  assert.deepEqual(await placement(), ['n1', 'n5']);
  await k(['label', 'node', 'n3', 'tier=edge', '--overwrite']);
  await k(['delete', 'node', 'n5']);
  await settle();
  assert.deepEqual(await placement(), ['n1', 'n3']);

  for (const p of await kubelet.pods('app=agent')) await kubelet.run(p.metadata.name!);
  await settle();
  assert.match(await k(['get', 'ds', 'agent']), /^agent\s+2\s+2\s+2\s+2\s+2\s+tier=edge\s/m);
  assert.match(
    await k(['rollout', 'status', 'ds/agent', '--timeout=5s']),
    /daemon set "agent" successfully rolled out/,
  );

  // Rolling update, maxUnavailable 1: one node at a time.
  await k(['set', 'image', 'ds/agent', 'agent=agent:2']);
  await settle();
  const images = async (): Promise<string[]> =>
    (await kubelet.pods('app=agent'))
      .filter((p) => !p.metadata.deletionTimestamp)
      .map((p) => (p.spec as { containers: Array<{ image: string }> }).containers[0]!.image)
      .sort();
  assert.deepEqual(await images(), ['agent:1', 'agent:2'], 'one old pod replaced, the other waits');
  for (const p of await kubelet.pods('app=agent')) await kubelet.run(p.metadata.name!);
  await settle();
  for (const p of await kubelet.pods('app=agent')) await kubelet.run(p.metadata.name!);
  await settle();
  assert.deepEqual(await images(), ['agent:2', 'agent:2']);
  const status = JSON.parse(await k(['get', 'ds', 'agent', '-o', 'json'])).status as Record<string, number>;
  assert.deepEqual(
    [
      status.desiredNumberScheduled,
      status.currentNumberScheduled,
      status.updatedNumberScheduled,
      status.numberReady,
      status.numberAvailable,
      status.numberMisscheduled,
    ],
    [2, 2, 2, 2, 2, 0],
  );
  assert.match(await k(['rollout', 'history', 'ds/agent']), /REVISION\s+CHANGE-CAUSE\n1\s+<none>\n2\s+<none>/);
  await k(['rollout', 'undo', 'ds/agent']);
  await settle();
  assert.equal(
    JSON.parse(await k(['get', 'ds', 'agent', '-o', 'json'])).spec.template.spec.containers[0].image,
    'agent:1',
  );
});

test('Job: retries with exponential back-off on the clock, BackoffLimitExceeded, DeadlineExceeded, Indexed, ttlSecondsAfterFinished', async (t) => {
  if (skipWithoutKubectl(t)) return;
  const { kubelet, k } = await setup(t);
  await k(
    ['apply', '-f', '-'],
    `
apiVersion: batch/v1
kind: Job
metadata: {name: flaky}
spec:
  backoffLimit: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
`,
  );
  await kubelet.advance('0s');
  const active = async (sel: string): Promise<Obj[]> =>
    (await kubelet.pods(sel)).filter((p) => (p.status as { phase: string }).phase === 'Pending');
  // Failure 1 at t=0 → replacement after 10 s; failure 2 → after 20 s; failure 3 exceeds backoffLimit 2.
  for (const wait of ['10s', '20s']) {
    const [pod] = await active('job-name=flaky');
    assert.ok(pod, 'a pod is running');
    await kubelet.finish(pod.metadata.name!, 1);
    const before = await kubelet.advance('0s');
    assert.equal((await active('job-name=flaky')).length, 0, `no replacement yet at ${before}`);
    const waitMs = Number(wait.slice(0, -1)) * 1000;
    await kubelet.advance(`${waitMs / 1000 - 1}s`);
    assert.equal((await active('job-name=flaky')).length, 0, `still backing off 1 s before ${wait}`);
    await kubelet.advance('1s');
    assert.equal((await active('job-name=flaky')).length, 1, `replacement after ${wait}`);
  }
  const [last] = await active('job-name=flaky');
  await kubelet.finish(last!.metadata.name!, 1);
  // A pod's change reaches its Job within the Job controller's 1 s batch period (syncJobBatchPeriod).
  await kubelet.advance('0s');
  assert.equal(
    (JSON.parse(await k(['get', 'job', 'flaky', '-o', 'json'])).status as { failed?: number }).failed,
    2,
    'not counted before the batch period',
  );
  await kubelet.advance('1s');
  const failed = JSON.parse(await k(['get', 'job', 'flaky', '-o', 'json'])).status as {
    failed: number;
    conditions: Array<{ type: string; reason: string; message: string }>;
  };
  assert.equal(failed.failed, 3);
  assert.deepEqual(
    failed.conditions.map((c) => [c.type, c.reason]),
    [
      ['FailureTarget', 'BackoffLimitExceeded'],
      ['Failed', 'BackoffLimitExceeded'],
    ],
  );
  assert.match(await k(['get', 'job', 'flaky']), /^flaky\s+Failed\s+0\/1\s/m);
  assert.match(
    await k(['get', 'events', '--field-selector', 'involvedObject.name=flaky,reason=BackoffLimitExceeded']),
    /Job has reached the specified backoff limit/,
  );
  const pods = await kubelet.pods('job-name=flaky');
  assert.equal(pods.length, 3);
  assert.ok(
    pods.every((p) => !p.metadata.finalizers?.length),
    'the job-tracking finalizer is gone once counted',
  );

  // activeDeadlineSeconds: the running pod is deleted and the Job fails DeadlineExceeded.
  await k(
    ['apply', '-f', '-'],
    `
apiVersion: batch/v1
kind: Job
metadata: {name: slow}
spec:
  activeDeadlineSeconds: 60
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
`,
  );
  await kubelet.advance('59s');
  assert.match(await k(['get', 'job', 'slow']), /^slow\s+Running/m);
  // The deadline's sync deletes the pod; the pod's updates (its finalizer removed, then gone) reach the Job one
  // batch period each, and the Job is Failed once the pod is gone.
  await kubelet.advance('1s');
  assert.match(await k(['get', 'job', 'slow']), /^slow\s+FailureTarget/m);
  await kubelet.advance('2s');
  const slow = JSON.parse(await k(['get', 'job', 'slow', '-o', 'json'])).status as {
    conditions: Array<{ type: string; reason: string; message: string }>;
  };
  assert.deepEqual(slow.conditions.at(-1), {
    ...slow.conditions.at(-1)!,
    type: 'Failed',
    reason: 'DeadlineExceeded',
    message: 'Job was active longer than specified deadline',
  });
  assert.equal((await kubelet.pods('job-name=slow')).length, 0, 'the unscheduled pod was deleted');

  // Indexed completions, parallelism 2, and a TTL after finishing.
  await k(
    ['apply', '-f', '-'],
    `
apiVersion: batch/v1
kind: Job
metadata: {name: idx}
spec:
  completionMode: Indexed
  completions: 3
  parallelism: 2
  ttlSecondsAfterFinished: 100
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
`,
  );
  await kubelet.advance('0s');
  for (let round = 0; round < 3; round++) {
    const running = await active('job-name=idx');
    if (running.length === 0) break;
    for (const p of running) await kubelet.finish(p.metadata.name!, 0);
    await kubelet.advance('1s');
  }
  const idxPods = await kubelet.pods('job-name=idx');
  assert.deepEqual(idxPods.map((p) => p.metadata.annotations?.['batch.kubernetes.io/job-completion-index']).sort(), [
    '0',
    '1',
    '2',
  ]);
  assert.deepEqual(idxPods.map((p) => (p.spec as { hostname: string }).hostname).sort(), ['idx-0', 'idx-1', 'idx-2']);
  const idx = JSON.parse(await k(['get', 'job', 'idx', '-o', 'json'])).status as Record<string, unknown>;
  assert.equal(idx.completedIndexes, '0-2');
  assert.equal(idx.succeeded, 3);
  assert.match(await k(['get', 'job', 'idx']), /^idx\s+Complete\s+3\/3\s/m);
  await kubelet.advance('99s');
  assert.match(await k(['get', 'jobs', '-o', 'name']), /job.batch\/idx/);
  await kubelet.advance('1s');
  await kubelet.advance('0s');
  assert.doesNotMatch(await k(['get', 'jobs', '-o', 'name']), /job.batch\/idx/, 'deleted 100 s after it finished');
  assert.equal((await kubelet.pods('job-name=idx')).length, 0, 'with its pods');
});

test('CronJob: a simulated week of daily runs at the right times, history trimmed; 24 h of @hourly makes exactly 24 Jobs', async (t) => {
  if (skipWithoutKubectl(t)) return;
  // Events live an hour by default (--event-ttl); this test counts a week of them.
  const { kubelet, k } = await setup(t, ['--event-ttl', '720h']);
  await k(
    ['apply', '-f', '-'],
    `
apiVersion: batch/v1
kind: CronJob
metadata: {name: backup}
spec:
  schedule: "30 2 * * *"
  timeZone: Asia/Seoul
  successfulJobsHistoryLimit: 3
  failedJobsHistoryLimit: 1
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: main, image: busybox}]
`,
  );
  // 02:30 in Seoul is 17:30 UTC. Each day: run the day's Job to completion (day 3's fails).
  const created: string[] = [];
  for (let day = 0; day < 7; day++) {
    await kubelet.advance('24h');
    const jobs = JSON.parse(await k(['get', 'jobs', '-o', 'json'])).items as Obj[];
    const fresh = jobs.filter((j) => !created.includes(j.metadata.name!));
    assert.equal(fresh.length, 1, `day ${day}: one new Job (${jobs.map((j) => j.metadata.name).join(',')})`);
    const job = fresh[0]!;
    created.push(job.metadata.name!);
    assert.equal(
      job.metadata.annotations?.['batch.kubernetes.io/cronjob-scheduled-timestamp'],
      `2025-01-0${day + 2}T02:30:00+09:00`,
    );
    const at = Date.UTC(2025, 0, day + 1, 17, 30);
    assert.equal(job.metadata.name, `backup-${at / 60000}`);
    for (const p of await kubelet.pods(`job-name=${job.metadata.name}`))
      await kubelet.finish(p.metadata.name!, day === 3 ? 1 : 0);
    if (day === 3) {
      // backoffLimit 6 would retry; make it fail for good by failing each retry.
      for (let i = 0; i < 7; i++) {
        await kubelet.advance('10m');
        for (const p of await kubelet.pods(`job-name=${job.metadata.name}`))
          if ((p.status as { phase: string }).phase === 'Pending') await kubelet.finish(p.metadata.name!, 1);
      }
    }
    await kubelet.advance('1s');
  }
  const remaining = (JSON.parse(await k(['get', 'jobs', '-o', 'json'])).items as Obj[])
    .map((j) => j.metadata.name)
    .sort();
  assert.deepEqual(
    remaining,
    [created[3], created[4], created[5], created[6]].sort(),
    'three successful Jobs and the failed one are kept',
  );
  const creates = await k([
    'get',
    'events',
    '--field-selector',
    'involvedObject.name=backup,reason=SuccessfulCreate',
    '-o',
    'jsonpath={.items[*].message}',
  ]);
  assert.equal(creates.split('Created job').length - 1, 7);
  const cj = JSON.parse(await k(['get', 'cj', 'backup', '-o', 'json'])).status as Record<string, unknown>;
  assert.equal(cj.lastScheduleTime, '2025-01-07T17:30:00Z');
  assert.equal(cj.active, undefined);
  assert.ok(
    typeof cj.lastSuccessfulTime === 'string' && cj.lastSuccessfulTime > '2025-01-07T17:30:00Z',
    `lastSuccessfulTime ${String(cj.lastSuccessfulTime)} is the last Job's completion`,
  );
  assert.match(await k(['get', 'cj', 'backup']), /^backup\s+30 2 \* \* \*\s+Asia\/Seoul\s+False\s+0\s/m);

  // @hourly over a day, Allow: exactly the 24 schedule times, named by their minute.
  await k(
    ['apply', '-f', '-'],
    `
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick}
spec:
  schedule: "@hourly"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: main, image: busybox}]
`,
  );
  const start = Date.parse(await kubelet.now());
  await kubelet.advance('24h');
  const ticks = (JSON.parse(await k(['get', 'jobs', '-l', '!job-name', '-o', 'json', '--selector', ''])).items as Obj[])
    .map((j) => j.metadata.name!)
    .filter((n) => n.startsWith('tick-'))
    .sort();
  const firstHour = Math.ceil((start + 1) / 3_600_000) * 3_600_000;
  assert.deepEqual(ticks, Array.from({ length: 24 }, (_, i) => `tick-${(firstHour + i * 3_600_000) / 60000}`).sort());
});

test("a created workload's status is Go's zero status, as kube-apiserver answers: {} or its fields without omitempty at 0", async (t) => {
  const server = await serverFor(t, ['--controllers', '-*', ...NO_NODES]);
  const api = new Api(server.url);
  const template = { metadata: { labels: { app: 'z' } }, spec: { containers: [{ name: 'c', image: 'i' }] } };
  const workload = { selector: { matchLabels: { app: 'z' } }, template };
  const created = async (path: string, kind: string, spec: unknown): Promise<unknown> =>
    (await api.create(path, { kind, metadata: { name: 'zero' }, spec })).status;
  assert.deepEqual(await created('/apis/apps/v1/namespaces/default/deployments', 'Deployment', workload), {});
  assert.deepEqual(await created('/apis/apps/v1/namespaces/default/replicasets', 'ReplicaSet', workload), {
    replicas: 0,
  });
  assert.deepEqual(
    await created('/apis/apps/v1/namespaces/default/statefulsets', 'StatefulSet', { ...workload, serviceName: 'z' }),
    { replicas: 0, availableReplicas: 0 },
  );
  assert.deepEqual(await created('/apis/apps/v1/namespaces/default/daemonsets', 'DaemonSet', workload), {
    currentNumberScheduled: 0,
    numberMisscheduled: 0,
    desiredNumberScheduled: 0,
    numberReady: 0,
  });
  const job = { template: { spec: { ...template.spec, restartPolicy: 'Never' } } };
  assert.deepEqual(await created('/apis/batch/v1/namespaces/default/jobs', 'Job', job), {});
  assert.deepEqual(
    await created('/apis/batch/v1/namespaces/default/cronjobs', 'CronJob', {
      schedule: '@daily',
      jobTemplate: { spec: job },
    }),
    {},
  );
  // A status sent with the create is dropped all the same.
  const sent = await api.create('/apis/apps/v1/namespaces/default/deployments', {
    kind: 'Deployment',
    metadata: { name: 'sent' },
    spec: workload,
    status: { replicas: 7 },
  });
  assert.deepEqual(sent.status, {});
});
