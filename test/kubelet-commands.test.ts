import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import { kubectlMissing, kubectlAgainst } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// Issue 21 with the real kubectl on a virtual clock: containers do what their command says where kube-sim's exec
// shell can run it. The Kubernetes documentation's CronJob example completes and its Jobs succeed with the output in
// `kubectl logs`; exit codes end containers (restartPolicy, Job back-off); images without a command follow the image
// catalog (busybox's shell exits at once, nginx serves); a command that needs a real program, or an image kube-sim
// does not know, runs until stopped and says so once in an event; kube-sim.dev/duration still overrides.

const missing = kubectlMissing();

// https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#example, as the page gives it.
const DOCS_CRONJOB = `apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: hello
            image: busybox:1.28
            imagePullPolicy: IfNotPresent
            command:
            - /bin/sh
            - -c
            - date; echo Hello from the Kubernetes cluster
          restartPolicy: OnFailure
`;

type Status = {
  phase?: string;
  containerStatuses?: Array<{
    restartCount: number;
    state: { running?: Obj; waiting?: { reason: string }; terminated?: { exitCode: number; reason: string } };
  }>;
};

describe('container commands with kubectl', { skip: missing }, () => {
  let server: SimServer;
  let api: Api;

  before(async () => {
    server = await startServer(['--clock', 'virtual', '--seed', '21', '--nodes', '2']);
    api = new Api(server.url);
  });
  after(async () => {
    await server.stop();
  });

  const run = (args: string[], input?: string) => kubectlAgainst(server).run(args, input);
  const k = (args: string[], input?: string): Promise<string> => kubectlAgainst(server).ok(args, input);
  const advance = async (by: string): Promise<void> => {
    await api.expect(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });
  };
  const status = async (pod: string): Promise<Status> =>
    (await api.expect<Obj>(200, `/api/v1/namespaces/default/pods/${pod}`)).status as Status;
  const events = async (pod: string, reason: string): Promise<Array<{ message: string; count?: number }>> =>
    (
      JSON.parse(
        await k(['get', 'events', '--field-selector', `involvedObject.name=${pod},reason=${reason}`, '-o', 'json']),
      ) as { items: Array<{ message: string; count?: number }> }
    ).items;
  const pod = (name: string, container: Record<string, unknown>, extra = ''): string =>
    `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}${extra}}\nspec: {restartPolicy: Never, containers: [${JSON.stringify({ name: 'c', ...container })}]}\n`;

  test("the documentation's CronJob example completes: its Jobs succeed and kubectl logs shows the output", async () => {
    await k(['apply', '-f', '-'], DOCS_CRONJOB);
    await advance('61s');
    const jobs = (): Promise<Array<{ metadata: { name: string }; status: Obj }>> =>
      api.list('/apis/batch/v1/namespaces/default/jobs').then((l) => l.items as never);
    const [first] = await jobs();
    assert.ok(first, 'the schedule made a Job at 00:01');
    await advance('2s');
    assert.match(
      await k(['get', 'job', first.metadata.name, '-o', 'jsonpath={.status.succeeded} {.status.conditions[0].type}']),
      /^1 (SuccessCriteriaMet|Complete)$/,
    );
    const logs = await k(['logs', `job/${first.metadata.name}`]);
    assert.equal(
      logs,
      'Wed Jan  1 00:01:00 UTC 2025\nHello from the Kubernetes cluster\n',
      'date on the cluster clock',
    );
    const [pod] = (await api.list(`/api/v1/namespaces/default/pods?labelSelector=job-name=${first.metadata.name}`))
      .items;
    const terminated = ((pod!.status as Status).containerStatuses ?? [])[0]!.state.terminated!;
    assert.deepEqual([terminated.exitCode, terminated.reason], [0, 'Completed']);
    assert.match(await k(['get', 'pod', pod!.metadata.name!]), /\s0\/1\s+Completed\s+0\s/);

    // A few minutes on: one Job a minute, each done in a second, none piling up as active; the history limit keeps 3.
    await advance('5m');
    const after = await jobs();
    assert.equal(after.length, 3, after.map((j) => j.metadata.name).join(' '));
    assert.ok(after.every((j) => j.status.succeeded === 1));
    const active = JSON.parse(await k(['get', 'cronjob', 'hello', '-o', 'json'])) as { status: { active?: unknown[] } };
    assert.ok((active.status.active ?? []).length <= 1);
    await k(['delete', 'cronjob', 'hello']);
  });

  test("an exit code ends the container: a failing Job's pod fails with it after its sleep", async () => {
    await k(
      ['apply', '-f', '-'],
      'apiVersion: batch/v1\nkind: Job\nmetadata: {name: fails}\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: alpine:3.20, command: [sh, -c, "echo working; sleep 30; echo giving up >&2; exit 3"]}]\n',
    );
    await advance('1s');
    const [p] = (await api.list('/api/v1/namespaces/default/pods?labelSelector=job-name=fails')).items;
    const name = p!.metadata.name!;
    assert.ok((await status(name)).containerStatuses![0]!.state.running, 'sleeping');
    await advance('28s');
    assert.equal((await status(name)).phase, 'Running');
    await advance('2s');
    const s = await status(name);
    assert.equal(s.phase, 'Failed');
    assert.deepEqual(s.containerStatuses![0]!.state.terminated, {
      ...s.containerStatuses![0]!.state.terminated,
      exitCode: 3,
      reason: 'Error',
    });
    assert.equal(await k(['logs', name]), 'working\ngiving up\n');
    await advance('2s');
    assert.match(
      await k(['get', 'job', 'fails', '-o', 'jsonpath={.status.conditions[?(@.type=="Failed")].reason}']),
      /^BackoffLimitExceeded$/,
    );
    await k(['delete', 'job', 'fails']);
  });

  test('images without a command follow the catalog: busybox exits at once into CrashLoopBackOff, nginx serves', async () => {
    await k(['run', 'bb', '--image=busybox']);
    await k(['run', 'web', '--image=nginx:1.27']);
    await advance('1s');
    const bb = await status('bb');
    assert.ok(bb.containerStatuses![0]!.restartCount >= 1, 'its shell had no input and exited 0');
    await advance('1m');
    assert.match(await k(['get', 'pod', 'bb']), /^bb\s+0\/1\s+CrashLoopBackOff\s+\d+ \(/m);
    assert.match(await k(['get', 'pod', 'web']), /^web\s+1\/1\s+Running\s+0\s/m);
    assert.equal((await events('web', 'Simulated')).length, 0, 'nginx is known to serve');
    await k(['delete', 'pod', 'bb', 'web', '--wait=false']);
  });

  test('a command that needs a real program, and an unknown image, run until stopped and say so once', async () => {
    await k(
      ['apply', '-f', '-'],
      pod('py', { image: 'python:3.12', command: ['sh', '-c', 'echo starting; python app.py'] }),
    );
    await k(['run', 'own', '--image=registry.example.com/team/app:1.0']);
    await k(['apply', '-f', '-'], pod('spin', { image: 'busybox', command: ['sh', '-c', 'while true; do :; done'] }));
    await advance('1s');
    // Spinning is told by the steps it takes, in real time: the event comes once it has taken enough.
    let spins: { message: string } | undefined;
    for (let i = 0; i < 100 && !spins; i++) {
      [spins] = await events('spin', 'Simulated');
      if (!spins) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.match(spins!.message, /the command of container c loops without waiting on the clock, so kube-sim stops/);
    assert.ok((await status('spin')).containerStatuses![0]!.state.running);
    assert.ok((await status('py')).containerStatuses![0]!.state.running);
    assert.equal(await k(['logs', 'py']), 'starting\n', 'what it ran before the program it waits in');
    const [said] = await events('py', 'Simulated');
    assert.match(
      said!.message,
      /kube-sim runs no real processes, and its shell has no "python": container c runs it until it is stopped/,
    );
    const [unknown] = await events('own', 'Simulated');
    assert.match(
      unknown!.message,
      /its image catalog does not say what "registry\.example\.com\/team\/app:1\.0" runs: container own runs until it is stopped/,
    );
    assert.match(
      await k(['describe', 'pod', 'own']),
      /Normal\s+Simulated\s+.*kubelet\s+kube-sim runs no real processes/,
    );
    await advance('10m');
    assert.ok((await status('py')).containerStatuses![0]!.state.running);
    assert.equal(
      (await events('py', 'Simulated')).reduce((n, e) => n + (e.count ?? 1), 0),
      1,
      'said once',
    );
    // The program exits on SIGTERM after the image's stop delay (1 s), not at the end of the grace period.
    await k(['delete', 'pod', 'py', 'own', 'spin', '--wait=false', '--grace-period=1']);
    await advance('1s');
    assert.equal((await run(['get', 'pod', 'py'])).code, 1, 'gone after the stop delay');
  });

  test('a shell as PID 1 ignores SIGTERM; $(VAR) expands; kube-sim.dev/duration still overrides', async () => {
    await k(
      ['apply', '-f', '-'],
      pod('sleeper', {
        image: 'busybox',
        env: [{ name: 'GREETING', value: 'hi' }],
        command: ['sh', '-c', 'echo $(GREETING) from $HOSTNAME; sleep 3600'],
      }),
    );
    await k(
      ['apply', '-f', '-'],
      pod('timed', { image: 'busybox', command: ['sleep', '3600'] }, ', annotations: {kube-sim.dev/duration: 5s}'),
    );
    await advance('1s');
    assert.equal(await k(['logs', 'sleeper']), 'hi from sleeper\n');
    await advance('5s');
    assert.equal((await status('timed')).phase, 'Succeeded', 'the annotation ends it after 5 s, not its sleep');
    await k(['delete', 'pod', 'sleeper', '--wait=false']);
    await advance('29s');
    assert.equal((await run(['get', 'pod', 'sleeper'])).code, 0, 'still terminating: sh ignores SIGTERM as PID 1');
    await advance('1s');
    assert.equal((await run(['get', 'pod', 'sleeper'])).code, 1, 'killed at the end of its grace period');
    await k(['delete', 'pod', 'timed']);
  });
});
