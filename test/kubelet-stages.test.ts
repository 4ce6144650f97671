import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { deepEqual, type KubeObject } from '../src/api/types.js';
import { VirtualClock, rfc3339 } from '../src/clock/clock.js';
import {
  crashLoopDelayMs,
  goDuration,
  runAction,
  type ActionContext,
  type ActionName,
} from '../src/kubelet/actions.js';
import { normalizeImage } from '../src/kubelet/image-ref.js';
import { defaultImageCatalog, Images } from '../src/kubelet/images.js';
import { programOf } from '../src/kubelet/programs.js';
import { runInContainer } from '../src/kubelet/exec-shell.js';
import { resolveEnv, serviceEnv, type EnvSources } from '../src/kubelet/pod-env.js';
import {
  defaultStages,
  evaluatePath,
  expressionMatches,
  nextStage,
  parseStages,
  type Stage,
  type StageContext,
} from '../src/kubelet/stages.js';
import { containerFs, volumeError } from '../src/kubelet/volumes.js';

// The kubelet's lifecycle is data plus pure actions: these tests drive a pod through the default stages
// without a server, on a fixed virtual clock.
const T0 = Date.UTC(2025, 0, 1);
const S = 1000;

/** An exec's stdin that holds `text` and then ends. */
function once(text: string): { read(): Promise<Uint8Array | undefined> } {
  let left: Uint8Array | undefined = Buffer.from(text);
  return {
    read: async () => {
      const chunk = left;
      left = undefined;
      return chunk;
    },
  };
}
type Obj = Record<string, unknown>;

function pod(
  extra: { annotations?: Record<string, string>; spec?: Obj; labels?: Record<string, string> } = {},
): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'web',
      namespace: 'default',
      uid: 'uid-1',
      resourceVersion: '1',
      labels: extra.labels ?? { app: 'web' },
      annotations: extra.annotations ?? {},
    },
    spec: {
      nodeName: 'node-1',
      restartPolicy: 'Always',
      containers: [
        {
          name: 'app',
          image: 'nginx:1.27',
          env: [
            { name: 'GREETING', value: 'hi $(NAME)' },
            { name: 'NAME', value: 'web' },
          ],
        },
      ],
      ...(extra.spec ?? {}),
    },
    status: {
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: rfc3339(T0) }],
    },
  };
}

const sources = (configMaps: Record<string, Obj> = {}, secrets: Record<string, Obj> = {}): EnvSources => ({
  configMap: (_ns, name) =>
    configMaps[name] ? ({ metadata: { name }, ...configMaps[name] } as KubeObject) : undefined,
  secret: (_ns, name) => (secrets[name] ? ({ metadata: { name }, ...secrets[name] } as KubeObject) : undefined),
  services: (ns) =>
    ns === 'default'
      ? [
          {
            metadata: { name: 'kubernetes', namespace: 'default' },
            spec: { clusterIP: '10.96.0.1', ports: [{ name: 'https', port: 443, protocol: 'TCP' }] },
          },
        ]
      : [],
  allocatable: { cpu: '4', memory: '16Gi' },
});

function context(
  now: number,
  p: KubeObject,
  settings: Record<string, string> = {},
  envSources = sources(),
): ActionContext {
  let ids = 0;
  return {
    now,
    hostIP: '172.18.0.2',
    podIP: () => '10.244.0.2',
    setting: (k) => p.metadata.annotations?.[k] ?? settings[k],
    resolveEnv: (q, c) => resolveEnv(q, c, envSources),
    volumeError: (q) => volumeError(q, envSources),
    containerID: () => `containerd://${String(++ids).padStart(64, '0')}`,
    imageMissing: (image) => new Images(defaultImageCatalog()).missing(image),
    pullRetryAt: () => undefined,
    program: (c) => programOf(c, new Images(defaultImageCatalog())),
    command: () => undefined,
  };
}

/** Applies the due stage at `now` (if any) and returns the next pod and what the stage did. */
function step(
  stages: readonly Stage[],
  p: KubeObject,
  now: number,
  settings: Record<string, string> = {},
  envSources = sources(),
) {
  const ctx: StageContext = { now, setting: (k) => p.metadata.annotations?.[k] ?? settings[k], firstSeen: () => now };
  const decision = nextStage(stages, p, ctx);
  if (!decision || decision.dueAt > now) return { pod: p, decision, applied: undefined };
  const next = decision.stage.next;
  const result = runAction(next.action as ActionName, p, context(now, p, settings, envSources), next.params);
  const annotations = { ...(p.metadata.annotations ?? {}) };
  for (const [k, v] of Object.entries(result.annotations ?? {})) if (v !== null) annotations[k] = v;
  const rv = String(Number(p.metadata.resourceVersion) + 1);
  return {
    pod: { ...p, metadata: { ...p.metadata, annotations, resourceVersion: rv }, status: result.status ?? p.status },
    decision,
    applied: { stage: decision.stage.name, result },
  };
}

/** Runs stages until none is due at `now`; returns the pod and the stages applied in order. */
function settle(
  stages: readonly Stage[],
  p: KubeObject,
  now: number,
  settings: Record<string, string> = {},
  envSources = sources(),
) {
  const applied: string[] = [];
  for (let i = 0; i < 20; i++) {
    const s = step(stages, p, now, settings, envSources);
    if (!s.applied) return { pod: s.pod, applied, next: s.decision };
    applied.push(s.applied.stage);
    const unchanged =
      deepEqual(s.pod.status, p.status) && deepEqual(s.pod.metadata.annotations, p.metadata.annotations);
    p = s.pod;
    // A stage that changes nothing (Kill, a failed mount) is applied once, as the kubelet remembers.
    if (unchanged) return { pod: p, applied, next: undefined };
  }
  throw new Error(`no fixed point: ${applied.join(' → ')}`);
}

const status = (p: KubeObject): Obj => p.status as Obj;
const container = (p: KubeObject): Obj => (status(p).containerStatuses as Obj[])[0]!;
const condition = (p: KubeObject, type: string): Obj | undefined =>
  (status(p).conditions as Obj[]).find((c) => c.type === type);

describe('stage selectors and delays', () => {
  test('paths reach fields, any element, elements by field, and keys with dots', () => {
    const p = pod({ annotations: { 'kube-sim.dev/duration': '5s' } });
    assert.deepEqual(evaluatePath(p, '.status.phase'), ['Pending']);
    assert.deepEqual(evaluatePath(p, '.metadata.annotations["kube-sim.dev/duration"]'), ['5s']);
    assert.deepEqual(evaluatePath(p, '.status.conditions[type=PodScheduled].status'), ['True']);
    assert.deepEqual(evaluatePath(p, '.spec.containers[*].env[*].name'), ['GREETING', 'NAME']);
    assert.deepEqual(evaluatePath(p, '.spec.containers[0].image'), ['nginx:1.27']);
    assert.deepEqual(evaluatePath(p, '.status.containerStatuses'), []);
    // [field!=value]: the elements whose field differs (a sidecar's restart beside a server that never restarted).
    const two = {
      ...p,
      status: {
        containerStatuses: [
          { name: 'app', restartCount: 0 },
          { name: 'side', restartCount: 2 },
        ],
      },
    };
    assert.deepEqual(evaluatePath(two, '.status.containerStatuses[restartCount!=0].name'), ['side']);
    assert.deepEqual(evaluatePath(two, '.status.containerStatuses[restartCount=0].name'), ['app']);
    assert.equal(
      expressionMatches(two, {
        key: '.status.containerStatuses[restartCount!=0].name',
        operator: 'In',
        values: ['app'],
      }),
      false,
    );
  });

  test('the stage due first wins among those that match; a setting absent makes its stage not apply', () => {
    const stages = parseStages(`
apiVersion: kube-sim.dev/v1alpha1
kind: Stage
metadata: {name: slow}
spec:
  selector: {matchExpressions: [{key: .status.phase, operator: In, values: [Pending]}]}
  delay: {duration: 10s}
  next: {action: Accept}
---
apiVersion: kube-sim.dev/v1alpha1
kind: Stage
metadata: {name: fast}
spec:
  selector: {matchLabels: {app: web}}
  delay: {fromAnnotation: example/fast, since: '.status.conditions[type=PodScheduled].lastTransitionTime'}
  next: {action: Accept}
`);
    const ctx = (p: KubeObject): StageContext => ({
      now: T0,
      setting: (k) => p.metadata.annotations?.[k],
      firstSeen: () => T0,
    });
    const plain = pod();
    assert.equal(
      nextStage(stages, plain, ctx(plain))?.stage.name,
      'slow',
      'no example/fast setting: only slow applies',
    );
    const hurried = pod({ annotations: { 'example/fast': '2s' } });
    assert.deepEqual(nextStage(stages, hurried, ctx(hurried)), { stage: stages[1], dueAt: T0 + 2 * S });
    const lazy = pod({ annotations: { 'example/fast': '1m' } });
    assert.equal(nextStage(stages, lazy, ctx(lazy))?.stage.name, 'slow');
  });

  test('stage files are checked: unknown actions, operators, missing names', () => {
    const doc = (spec: string): string =>
      `apiVersion: kube-sim.dev/v1alpha1\nkind: Stage\nmetadata: {name: x}\nspec:\n${spec}`;
    assert.throws(() => parseStages(doc('  next: {action: Explode}')), /next.action must be one of Accept, Start/);
    assert.throws(
      () => parseStages(doc('  selector: {matchExpressions: [{key: .a, operator: Has}]}')),
      /operator must be In, NotIn, Exists or DoesNotExist/,
    );
    assert.throws(
      () => parseStages(doc('  selector: {matchExpressions: [{key: a.b, operator: Exists}]}')),
      /invalid path "a.b"/,
    );
    assert.throws(
      () => parseStages('apiVersion: kube-sim.dev/v1alpha1\nkind: Stage\nspec: {}'),
      /metadata.name is required/,
    );
    assert.throws(() => parseStages(''), /no stages found/);
  });

  test('CrashLoopBackOff waits 0, then 10 s doubling to 5 min', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 9].map(crashLoopDelayMs),
      [0, 10, 20, 40, 80, 160, 300, 300].map((s) => s * S),
    );
    assert.deepEqual(
      [10, 80, 160, 300].map((s) => goDuration(s * S)),
      ['10s', '1m20s', '2m40s', '5m0s'],
    );
  });
});

describe('the default lifecycle', () => {
  const stages = defaultStages();

  test('Pending → ContainerCreating → Running → Ready at once by default, with env resolved at start', () => {
    const { pod: p, applied } = settle(stages, pod(), T0);
    assert.deepEqual(applied, ['pod-accept', 'pod-start', 'pod-ready']);
    assert.equal(status(p).phase, 'Running');
    assert.equal(status(p).podIP, '10.244.0.2');
    assert.equal(status(p).hostIP, '172.18.0.2');
    assert.equal(status(p).startTime, rfc3339(T0));
    assert.equal(container(p).ready, true);
    assert.equal(container(p).image, 'docker.io/library/nginx:1.27');
    assert.deepEqual(
      (status(p).conditions as Obj[]).map((c) => `${String(c.type)}=${String(c.status)}`),
      ['PodReadyToStartContainers=True', 'Initialized=True', 'Ready=True', 'ContainersReady=True', 'PodScheduled=True'],
    );
    const env = JSON.parse(p.metadata.annotations!['kube-sim.dev/env-app']!) as Record<string, string>;
    assert.equal(env.GREETING, 'hi $(NAME)', '$(NAME) is defined after GREETING, so it stays as written');
    assert.equal(env.NAME, 'web');
    assert.equal(env.KUBERNETES_SERVICE_HOST, '10.96.0.1');
    assert.equal(env.HOSTNAME, 'web');
  });

  test('startup and ready delays come from annotations, else the server-wide settings', () => {
    const p0 = pod({ annotations: { 'kube-sim.dev/startup-delay': '3s' } });
    let r = settle(stages, p0, T0, { 'kube-sim.dev/ready-delay': '5s' });
    assert.deepEqual(r.applied, ['pod-accept']);
    assert.equal(
      container(r.pod).state &&
        (container(r.pod).state as Obj).waiting &&
        ((container(r.pod).state as Obj).waiting as Obj).reason,
      'ContainerCreating',
    );
    assert.equal(r.next?.dueAt, T0 + 3 * S);
    r = settle(stages, r.pod, T0 + 3 * S, { 'kube-sim.dev/ready-delay': '5s' });
    assert.deepEqual(r.applied, ['pod-start']);
    assert.equal(condition(r.pod, 'Ready')?.status, 'False');
    assert.equal(r.next?.dueAt, T0 + 8 * S, 'ready 5 s after the container started');
    r = settle(stages, r.pod, T0 + 8 * S, { 'kube-sim.dev/ready-delay': '5s' });
    assert.deepEqual(r.applied, ['pod-ready']);
  });

  test('restartPolicy Always: exit, immediate first restart, then CrashLoopBackOff 10 s, 20 s, 40 s …', () => {
    const settings = { 'kube-sim.dev/duration': '5s', 'kube-sim.dev/exit-code': '1' };
    let p = settle(stages, pod(), T0, settings).pod;
    const restartsAt: Array<[number, number]> = [];
    let now = T0;
    for (let i = 0; i < 40 && restartsAt.length < 5; i++) {
      const r = settle(stages, p, now, settings);
      const before = Number(container(p).restartCount);
      p = r.pod;
      if (Number(container(p).restartCount) > before)
        restartsAt.push([Number(container(p).restartCount), (now - T0) / S]);
      if (!r.next) break;
      now = r.next.dueAt;
    }
    // Runs of 5 s; restart 1 at once, then waits of 10, 20, 40, 80 s after each exit.
    assert.deepEqual(restartsAt, [
      [1, 5],
      [2, 20],
      [3, 45],
      [4, 90],
      [5, 175],
    ]);
    const r = settle(stages, p, now + 5 * S, settings);
    assert.equal(((container(r.pod).state as Obj).waiting as Obj).reason, 'CrashLoopBackOff');
    assert.match(
      String(((container(r.pod).state as Obj).waiting as Obj).message),
      /^back-off 2m40s restarting failed container=app pod=web_default\(uid-1\)$/,
    );
    assert.equal(((container(r.pod).lastState as Obj).terminated as Obj).exitCode, 1);
    assert.ok(r.applied.includes('container-backoff'));
  });

  test('restartPolicy Never ends Succeeded or Failed; OnFailure restarts only on failure', () => {
    for (const [policy, code, phase, reason] of [
      ['Never', '0', 'Succeeded', 'Completed'],
      ['Never', '3', 'Failed', 'Error'],
      ['OnFailure', '0', 'Succeeded', 'Completed'],
    ] as const) {
      const settings = { 'kube-sim.dev/duration': '30s', 'kube-sim.dev/exit-code': code };
      let r = settle(stages, pod({ spec: { restartPolicy: policy } }), T0, settings);
      assert.equal(r.next?.dueAt, T0 + 30 * S);
      r = settle(stages, r.pod, T0 + 30 * S, settings);
      assert.equal(status(r.pod).phase, phase, `${policy} exit ${code}`);
      assert.equal(((container(r.pod).state as Obj).terminated as Obj).reason, reason);
      assert.equal(condition(r.pod, 'Ready')?.reason, 'PodCompleted');
      assert.equal(r.next, undefined, 'a terminal pod has no further stage');
    }
    const r = settle(
      stages,
      settle(stages, pod({ spec: { restartPolicy: 'OnFailure' } }), T0, {
        'kube-sim.dev/duration': '1s',
        'kube-sim.dev/exit-code': '2',
      }).pod,
      T0 + S,
      { 'kube-sim.dev/duration': '1s', 'kube-sim.dev/exit-code': '2' },
    );
    assert.equal(container(r.pod).restartCount, 1);
  });

  test('a missing ConfigMap key leaves the container in CreateContainerConfigError until it appears', () => {
    const p0 = pod({
      spec: {
        containers: [
          {
            name: 'app',
            image: 'x',
            env: [{ name: 'MESSAGE', valueFrom: { configMapKeyRef: { name: 'cfg', key: 'message' } } }],
          },
        ],
      },
    });
    let r = settle(stages, p0, T0);
    assert.equal(((container(r.pod).state as Obj).waiting as Obj).reason, 'CreateContainerConfigError');
    assert.equal(((container(r.pod).state as Obj).waiting as Obj).message, 'configmap "cfg" not found');
    assert.equal(status(r.pod).phase, 'Pending');
    const events = step(stages, r.pod, T0).applied?.result.events.map((e) => `${e.reason}: ${e.message}`);
    assert.ok(events?.includes('Failed: Error: configmap "cfg" not found'), String(events));
    r = settle(stages, r.pod, T0, {}, sources({ cfg: { data: { other: 'x' } } }));
    assert.equal(
      ((container(r.pod).state as Obj).waiting as Obj).message,
      "couldn't find key message in ConfigMap default/cfg",
    );
    r = settle(stages, r.pod, T0 + S, {}, sources({ cfg: { data: { message: 'hello' } } }));
    assert.equal(status(r.pod).phase, 'Running');
    assert.equal(JSON.parse(r.pod.metadata.annotations!['kube-sim.dev/env-app']!).MESSAGE, 'hello');
  });

  test('a graceful delete: Killing at once, then stopped and removed at the deletion timestamp', () => {
    let p = settle(stages, pod(), T0).pod;
    p = { ...p, metadata: { ...p.metadata, deletionTimestamp: rfc3339(T0 + 40 * S), deletionGracePeriodSeconds: 30 } };
    const kill = step(stages, p, T0 + 10 * S);
    assert.equal(kill.applied?.stage, 'pod-kill');
    assert.deepEqual(
      kill.applied?.result.events.map((e) => [e.reason, e.message, e.fieldPath]),
      [['Killing', 'Stopping container app', 'spec.containers{app}']],
    );
    assert.equal(kill.applied?.result.status, undefined, 'SIGTERM changes no status');
    const stages2 = stages.filter((s) => s.name !== 'pod-kill'); // the kubelet remembers it applied Kill
    const next = nextStage(stages2, p, { now: T0 + 10 * S, setting: () => undefined, firstSeen: () => T0 });
    assert.deepEqual([next?.stage.name, next?.dueAt], ['pod-delete', T0 + 40 * S]);
    assert.equal(next?.stage.next.delete, true);
  });

  test('activeDeadlineSeconds fails the pod with DeadlineExceeded', () => {
    let r = settle(stages, pod({ spec: { activeDeadlineSeconds: 60, restartPolicy: 'Never' } }), T0);
    assert.equal(r.next?.dueAt, T0 + 60 * S);
    r = settle(stages, r.pod, T0 + 60 * S);
    assert.equal(status(r.pod).phase, 'Failed');
    assert.equal(status(r.pod).reason, 'DeadlineExceeded');
  });
});

describe('environment, volumes and the exec shell', () => {
  test('service links, envFrom with prefix, secrets, downward API', () => {
    const p = pod({
      spec: {
        containers: [
          {
            name: 'app',
            image: 'x',
            resources: { limits: { memory: '64Mi' } },
            envFrom: [{ configMapRef: { name: 'cfg' }, prefix: 'CFG_' }],
            env: [
              { name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } },
              { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
              { name: 'APP', valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
              { name: 'MEM', valueFrom: { resourceFieldRef: { resource: 'limits.memory', divisor: '1Mi' } } },
              { name: 'CPU', valueFrom: { resourceFieldRef: { resource: 'limits.cpu' } } },
              { name: 'URL', value: 'http://$(POD_IP):80' },
              { name: 'OPT', valueFrom: { configMapKeyRef: { name: 'absent', key: 'k', optional: true } } },
            ],
          },
        ],
      },
    });
    (p.status as Obj).podIP = '10.244.0.9';
    const r = resolveEnv(
      p,
      (p.spec as { containers: Obj[] }).containers[0]!,
      sources(
        { cfg: { data: { mode: 'fast' } } },
        { db: { data: { password: Buffer.from('s3cret').toString('base64') } } },
      ),
    );
    assert.ok('env' in r);
    const env = new Map(r.env);
    assert.equal(env.get('CFG_mode'), 'fast');
    assert.equal(env.get('PASSWORD'), 's3cret');
    assert.equal(env.get('POD_IP'), '10.244.0.9');
    assert.equal(env.get('APP'), 'web');
    assert.equal(env.get('MEM'), '64');
    assert.equal(env.get('CPU'), '4', 'no cpu limit: the node allocatable');
    assert.equal(env.get('URL'), 'http://10.244.0.9:80');
    assert.equal(env.has('OPT'), false);
    assert.deepEqual(
      serviceEnv({
        metadata: { name: 'my-svc' },
        spec: { clusterIP: '10.96.1.2', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
      }),
      [
        ['MY_SVC_SERVICE_HOST', '10.96.1.2'],
        ['MY_SVC_SERVICE_PORT', '80'],
        ['MY_SVC_SERVICE_PORT_HTTP', '80'],
        ['MY_SVC_PORT', 'tcp://10.96.1.2:80'],
        ['MY_SVC_PORT_80_TCP', 'tcp://10.96.1.2:80'],
        ['MY_SVC_PORT_80_TCP_PROTO', 'tcp'],
        ['MY_SVC_PORT_80_TCP_PORT', '80'],
        ['MY_SVC_PORT_80_TCP_ADDR', '10.96.1.2'],
      ],
    );
    assert.equal(normalizeImage('registry.k8s.io/pause:3.9'), 'registry.k8s.io/pause:3.9');
    assert.equal(normalizeImage('bitnami/redis'), 'docker.io/bitnami/redis:latest');
  });

  test('exec: printenv, cat of mounted ConfigMap/Secret files, ls, sh -c with && and pipes, exit codes', async () => {
    const p = pod({
      spec: {
        containers: [
          {
            name: 'app',
            image: 'x',
            volumeMounts: [
              { name: 'cfg', mountPath: '/etc/config' },
              { name: 'creds', mountPath: '/etc/creds/user', subPath: 'user' },
            ],
          },
        ],
        volumes: [
          { name: 'cfg', configMap: { name: 'cfg' } },
          { name: 'creds', secret: { secretName: 'creds' } },
        ],
      },
    });
    const src = sources(
      { cfg: { data: { 'app.conf': 'mode=fast\n', motd: 'hello' } } },
      { creds: { data: { user: Buffer.from('admin').toString('base64') } } },
    );
    const fs = containerFs(p, (p.spec as { containers: Obj[] }).containers[0]!, src);
    const clock = new VirtualClock(T0);
    const run = async (argv: string[], stdin?: string): Promise<{ code: number; out: string; err: string }> => {
      let out = '';
      let err = '';
      const code = await runInContainer(argv, {
        env: new Map([
          ['MESSAGE', 'Hello'],
          ['HOSTNAME', 'web'],
        ]),
        fs,
        clock,
        io: {
          stdout: (t) => void (out += Buffer.from(t).toString()),
          stderr: (t) => void (err += Buffer.from(t).toString()),
          ...(stdin === undefined ? {} : { stdin: once(stdin) }),
          closed: new Promise(() => undefined),
        },
      });
      return { code, out, err };
    };
    assert.deepEqual(await run(['printenv', 'MESSAGE']), { code: 0, out: 'Hello\n', err: '' });
    assert.deepEqual(await run(['printenv', 'NOPE']), { code: 1, out: '', err: '' });
    assert.deepEqual(await run(['cat', '/etc/config/app.conf']), { code: 0, out: 'mode=fast\n', err: '' });
    assert.deepEqual(await run(['cat', '/etc/creds/user']), { code: 0, out: 'admin', err: '' });
    assert.deepEqual(await run(['cat', '/etc/nope']), {
      code: 1,
      out: '',
      err: 'cat: /etc/nope: No such file or directory\n',
    });
    assert.deepEqual(await run(['ls', '/etc/config']), { code: 0, out: 'app.conf\nmotd\n', err: '' });
    assert.deepEqual(await run(['hostname']), { code: 0, out: 'web\n', err: '' });
    assert.deepEqual(
      await run([
        'sh',
        '-c',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell script, expanded by the exec shell
        'echo "$MESSAGE, ${HOSTNAME}" && false || echo fallback; printenv | grep -c MESSAGE; exit 4',
      ]),
      { code: 4, out: 'Hello, web\nfallback\n1\n', err: '' },
    );
    assert.deepEqual(await run(['frobnicate', '--now']), {
      code: 127,
      out: '',
      err: 'frobnicate: command not found\n',
    });
    assert.deepEqual(await run(['cat'], 'from stdin'), { code: 0, out: 'from stdin', err: '' });
    assert.equal((await run(['sh'], 'echo one\necho two | wc -l\n')).out, 'one\n1\n');
    // sleep waits on the cluster clock.
    let done = false;
    const sleeping = run(['sleep', '30']).then((r) => {
      done = true;
      return r;
    });
    await clock.advance(29 * S);
    assert.equal(done, false);
    await clock.advance(S);
    assert.equal((await sleeping).code, 0);
  });

  test('a missing ConfigMap volume is a FailedMount, and the pod waits in ContainerCreating', () => {
    const p = pod({
      spec: { containers: [{ name: 'app', image: 'x' }], volumes: [{ name: 'cfg', configMap: { name: 'cfg' } }] },
    });
    const r = settle(defaultStages(), p, T0);
    assert.deepEqual(r.applied, ['pod-accept', 'pod-start']);
    assert.equal(((container(r.pod).state as Obj).waiting as Obj).reason, 'ContainerCreating');
    assert.deepEqual(
      step(defaultStages(), r.pod, T0).applied?.result.events.map((e) => e.message),
      ['MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found'],
    );
  });
});
